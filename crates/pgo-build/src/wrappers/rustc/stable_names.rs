//! Symbol names that survive a release (`[pgo] stable_names`).
//!
//! A profile names functions by their symbols, and rustc derives every symbol's hash (legacy
//! `17h…E`, v0 `Cs…_`) and every codegen unit's name (`crate.<hash>-cgu.N`, the prefix of a
//! local function's profile name) from the crate's `-C metadata`. Cargo's value covers the
//! package version and every dependency's metadata, so a version bump, or any dependency's,
//! renames every function a committed profile knows (the example: 398 of 515).
//!
//! So the wrapper replaces it by a hash of what tells one build's crates apart and does not
//! change between releases: package name, crate name and types, features, the target (host
//! crates have no `--target`), and the version only for a package present in several versions
//! (cargo allows one per semver-compatible range, so that is what keeps them apart). Cargo's
//! `-C extra-filename` is left alone: file names and cargo's own bookkeeping do not change.
//!
//! Two crates that still collided would make rustc refuse the build (E0523: crates "not
//! distinguished by differing `-C metadata`"); `[pgo] stable_names = false` is the way out.
//!
//! Across rustc releases: rustc hashes its own version into every crate's identity too, and
//! legacy symbol hashes cover types hashed by the compiler's own rules. So stage builds with
//! stable names mangle with v0 (`-Csymbol-mangling-version=v0`, in the stage's rustflags:
//! [`V0_MANGLING`]), and the wrapper pins the version rustc hashes ([`FORCED_VERSION_ENV`],
//! only for compiles with v0 names: it would change legacy ones for nothing). rustc reads that
//! variable for reproducible builds and its own tests; it changes each crate's
//! `StableCrateId` (so its v0 disambiguator, its codegen unit names and `TypeId` values) and,
//! on a nightly, the version an incremental cache is stamped with, so an incremental compile
//! keeps the real one (and its names do not survive a rustc upgrade).
//! See `profiles::toolchain_names` for the standard library's crates, which it cannot pin.

use std::ffi::OsString;

/// Set for stage builds with stable names; its value lists the packages present in more than
/// one version (comma-separated).
pub const ENV: &str = "PGO_BUILD_STABLE_NAMES";

/// The flag stage builds with stable names get (unless the user's flags choose a mangling).
pub const V0_MANGLING: &str = "-Csymbol-mangling-version=v0";

/// Names that profiles record, by scheme: 1 was legacy symbols (rustc's default, renamed by
/// every rustc release), 2 is v0 symbols with the version pinned (kept across releases).
pub const NAME_SCHEME: u32 = 2;

/// The scheme a build with these settings names functions by: 2 when stable names are on
/// and the last mangling the rustflags choose is v0 (pgo-build adds it unless they choose).
pub fn scheme_of(stable_names: bool, rustflags: &[String]) -> u32 {
    let chosen = rustflags.iter().enumerate().rev().find_map(|(at, flag)| {
        let value = match flag.as_str() {
            "-C" => rustflags.get(at + 1).map(String::as_str)?,
            other => other.strip_prefix("-C")?,
        };
        value.strip_prefix("symbol-mangling-version=")
    });
    if stable_names && chosen == Some("v0") {
        NAME_SCHEME
    } else {
        1
    }
}

/// The variable rustc hashes into every crate's identity instead of its version.
pub const FORCED_VERSION_ENV: &str = "RUSTC_FORCE_RUSTC_VERSION";

/// What it is set to: any fixed text does; this one says who set it.
pub const FORCED_VERSION: &str = "pgo-build-stable-names";

/// Whether a rustc command line compiles a crate with v0 names, not incrementally: the
/// compiles whose crate identity the wrapper pins (see the module's comment).
pub fn pins_version(args: &[OsString]) -> bool {
    let text: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let joined_c = |option: &str| -> Vec<String> {
        text.iter()
            .enumerate()
            .filter_map(|(at, arg)| match arg.strip_prefix("-C") {
                Some("") => text.get(at + 1).cloned(),
                Some(value) => Some(value.to_owned()),
                None => None,
            })
            .filter(|value| value.starts_with(option))
            .collect()
    };
    text.iter()
        .any(|a| a == "--crate-name" || a.starts_with("--crate-name="))
        && !text.iter().any(|a| a.starts_with("--print"))
        && joined_c("symbol-mangling-version=")
            .last()
            .map(String::as_str)
            == Some("symbol-mangling-version=v0")
        && joined_c("incremental").is_empty()
}

/// Bumped when what the hash covers changes: profiles made before do not match after.
const SCHEME: &str = "pgo-build stable names 1";

/// What identifies the crate a rustc command line compiles, from the line and cargo's
/// `CARGO_PKG_*` variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrateIdentity {
    pub package: String,
    pub version: String,
}

/// `args` with cargo's `-C metadata=…` replaced by the stable value; unchanged when there is
/// none (a query, or rustc run by hand).
pub fn rewrite(args: &[OsString], identity: &CrateIdentity, duplicated: &str) -> Vec<OsString> {
    let text: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let duplicated = duplicated.split(',').any(|name| name == identity.package);
    let stable = stable_metadata(&text, identity, duplicated);
    let mut out = Vec::with_capacity(args.len());
    let mut pending_c = false;
    for (arg, text) in args.iter().zip(&text) {
        if pending_c {
            pending_c = false;
            if text.starts_with("metadata=") {
                out.push(OsString::from(format!("metadata={stable}")));
                continue;
            }
        } else if text == "-C" {
            pending_c = true;
        } else if text.starts_with("-Cmetadata=") {
            out.push(OsString::from(format!("-Cmetadata={stable}")));
            continue;
        }
        out.push(arg.clone());
    }
    out
}

fn stable_metadata(args: &[String], identity: &CrateIdentity, duplicated: bool) -> String {
    let values = |flag: &str| -> Vec<String> {
        let mut found: Vec<String> = args
            .windows(2)
            .filter(|pair| pair[0] == flag)
            .map(|pair| pair[1].clone())
            .chain(
                args.iter()
                    .filter_map(|a| a.strip_prefix(&format!("{flag}=")).map(str::to_owned)),
            )
            .collect();
        found.sort();
        found
    };
    let features: Vec<String> = values("--cfg")
        .into_iter()
        .filter(|cfg| cfg.starts_with("feature="))
        .collect();
    let target = values("--target");
    let parts = [
        SCHEME.to_owned(),
        identity.package.clone(),
        if duplicated {
            identity.version.clone()
        } else {
            String::new()
        },
        values("--crate-name").join(","),
        values("--crate-type").join(","),
        features.join(","),
        if target.is_empty() {
            "host".to_owned()
        } else {
            target.join(",")
        },
    ];
    crate::util::files::sha256_hex(parts.join("\n").as_bytes())[..16].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<OsString> {
        line.split(' ').map(OsString::from).collect()
    }

    fn metadata_of(args: &[OsString]) -> String {
        args.windows(2)
            .find_map(|p| {
                (p[0] == "-C")
                    .then(|| p[1].to_str()?.strip_prefix("metadata=").map(str::to_owned))
                    .flatten()
            })
            .unwrap()
    }

    fn identity(package: &str, version: &str) -> CrateIdentity {
        CrateIdentity {
            package: package.into(),
            version: version.into(),
        }
    }

    const LINE: &str = "--crate-name engine --edition=2024 engine/src/lib.rs --crate-type lib \
                        --cfg feature=\"std\" -C metadata=0123abcd -C extra-filename=-99ff \
                        --target x86_64-unknown-linux-gnu";

    #[test]
    fn a_version_bump_keeps_the_metadata_and_only_metadata_is_replaced() {
        let before = rewrite(&args(LINE), &identity("engine", "0.1.0"), "");
        let after = rewrite(
            &args(&LINE.replace("0123abcd", "fedc4321")),
            &identity("engine", "0.1.1"),
            "",
        );
        assert_eq!(metadata_of(&before), metadata_of(&after));
        assert_ne!(metadata_of(&before), "0123abcd");
        let unchanged: Vec<_> = before
            .iter()
            .filter(|a| !a.to_string_lossy().starts_with("metadata="))
            .collect();
        let original: Vec<_> = args(LINE)
            .into_iter()
            .filter(|a| !a.to_string_lossy().starts_with("metadata="))
            .collect();
        assert_eq!(unchanged, original.iter().collect::<Vec<_>>());
        assert!(before.iter().any(|a| a == "extra-filename=-99ff"));
    }

    #[test]
    fn what_tells_crates_of_one_build_apart_changes_the_metadata() {
        let base = metadata_of(&rewrite(&args(LINE), &identity("engine", "0.1.0"), ""));
        let other_versions = metadata_of(&rewrite(
            &args(LINE),
            &identity("engine", "0.1.0"),
            "rand,engine",
        ));
        let host = metadata_of(&rewrite(
            &args(&LINE.replace(" --target x86_64-unknown-linux-gnu", "")),
            &identity("engine", "0.1.0"),
            "",
        ));
        let features = metadata_of(&rewrite(
            &args(&LINE.replace("\"std\"", "\"alloc\"")),
            &identity("engine", "0.1.0"),
            "",
        ));
        let bin = metadata_of(&rewrite(
            &args(&LINE.replace("--crate-type lib", "--crate-type bin")),
            &identity("engine", "0.1.0"),
            "",
        ));
        let package = metadata_of(&rewrite(&args(LINE), &identity("engine2", "0.1.0"), ""));
        let all = [&base, &other_versions, &host, &features, &bin, &package];
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a, b);
            }
        }
        // A duplicated package's versions differ from each other.
        let v2 = metadata_of(&rewrite(
            &args(LINE),
            &identity("engine", "0.2.0"),
            "rand,engine",
        ));
        assert_ne!(other_versions, v2);
    }

    #[test]
    fn the_version_is_pinned_for_v0_compiles_only() {
        let compile = "--crate-name x x.rs -C metadata=abc";
        assert!(pins_version(&args(&format!(
            "{compile} -Csymbol-mangling-version=v0"
        ))));
        assert!(pins_version(&args(&format!(
            "{compile} -C symbol-mangling-version=v0"
        ))));
        // The last one counts, as for rustc.
        assert!(!pins_version(&args(&format!(
            "{compile} -Csymbol-mangling-version=v0 -Csymbol-mangling-version=legacy"
        ))));
        assert!(!pins_version(&args(compile)));
        assert!(!pins_version(&args(&format!(
            "{compile} -Csymbol-mangling-version=v0 -C incremental=/tmp/i"
        ))));
        // Queries (`rustc -vV`, cargo's `--print=file-names`): rustc would print the pinned
        // version as its own.
        assert!(!pins_version(&args("-vV -Csymbol-mangling-version=v0")));
        assert!(!pins_version(&args(
            "- --crate-name ___ --print=file-names -Csymbol-mangling-version=v0"
        )));
    }

    #[test]
    fn the_joined_form_and_lines_without_metadata() {
        let joined = rewrite(
            &args("--crate-name x x.rs -Cmetadata=abc"),
            &identity("x", "1.0.0"),
            "",
        );
        assert!(joined[3].to_string_lossy().starts_with("-Cmetadata="));
        assert_ne!(joined[3], "-Cmetadata=abc");
        let none = args("- --crate-name ___ --print=file-names");
        assert_eq!(rewrite(&none, &identity("", ""), ""), none);
    }
}
