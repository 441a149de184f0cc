//! Cross-language PGO: the C and C++ that build scripts compile (the `cc` and `cmake` crates)
//! built by a clang of rustc's LLVM major, instrumented and optimized with the same profile as
//! the Rust.
//!
//! Why clang of the same major: rustc links its own LLVM profile runtime, so clang's IR
//! instrumentation writes into the same raw file as rustc's; a clang of another major writes
//! another raw format, and one format silently wins (llvm#52683).
//!
//! How the flags reach the C: cargo's `CC_<target>`/`CXX_<target>` (the variables the `cc`
//! crate reads first, and through it the `cmake` crate's `CMAKE_<LANG>_COMPILER`) name
//! pgo-build's compiler wrapper (`cc_wrapper.rs`), which adds the stage's profile flags to
//! every compile. The user's own `CFLAGS`/`CXXFLAGS` stay where they are. The wrapper's
//! directory is named by the hash of what it adds, so a new profile changes `CC_<target>` and
//! the `cc` crate's `rerun-if-env-changed` makes cargo compile the C again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use crate::util::command::Cmd;
use crate::util::printer::Printer;

/// Names the clang to use; when set, nothing else is tried.
pub const CLANG_ENV: &str = "PGO_BUILD_CLANG";

pub use crate::config::CBuild;

/// What cross-language ThinLTO adds to the rustflags: rustc leaves LLVM bitcode for the linker.
pub const XLTO_RUSTFLAGS: [&str; 1] = ["-Clinker-plugin-lto"];

/// What a link says when it merges rustc's and clang's profile call graphs ("CG Profile"
/// module flags) and LLVM cannot (rust-lang/rust#162795, open; hit by ouch 0.6.1's link with
/// cross-language ThinLTO and PGO). Neither compiler of LLVM 22 has an option to leave them out.
pub const CG_PROFILE_CLASH: &str = "module flag identifiers must be unique";

/// The build-script crates whose compiler cross-language PGO replaces (cmake through the
/// compiler the `cc` crate finds).
pub const COVERED_BUILDERS: [&str; 2] = ["cc", "cmake"];

/// What is said after cargo's output when a link failed with [`CG_PROFILE_CLASH`].
pub fn cg_profile_clash_help() -> &'static str {
    "This is LLVM failing to merge the Rust and the C profile call graphs in one ThinLTO link \
     (rust-lang/rust#162795, open upstream): cross-language PGO without ThinLTO \
     (`cross_language = true`, explore's `pgo+c`) is not affected."
}

/// The C side of a build's settings: part of `BuildSettings`, so changing the compiler or the
/// user's C variables after `instrument` is refused like changed rustflags.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CSettings {
    pub mode: CBuild,
    pub clang: PathBuf,
    pub clangxx: PathBuf,
    /// `clang --version`'s first line.
    pub version: String,
    /// llvm-ar of the same LLVM, for archives of bitcode (cross-language ThinLTO only: the
    /// system's `ar` writes no symbol index for bitcode members).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llvm_ar: Option<PathBuf>,
    /// The user's variables the `cc` crate reads (`CC`, `CFLAGS`, `CXXFLAGS`, their
    /// `_<target>`, `TARGET_`/`HOST_` forms), as set when the settings were resolved.
    pub user_env: BTreeMap<String, String>,
    /// Packages whose C/C++ keeps the user's compiler (`[pgo] cross_language_exclude`): part
    /// of the settings, so the instrumented and optimized builds exclude the same.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
}

/// The variables of the `cc` crate that decide how C is compiled for `target`, most specific
/// first (the order the `cc` crate looks for a compiler in).
fn cc_variables(base: &str, target: &str) -> [String; 5] {
    [
        format!("{base}_{target}"),
        format!("{base}_{}", target.replace('-', "_")),
        format!("TARGET_{base}"),
        format!("HOST_{base}"),
        base.to_owned(),
    ]
}

/// The user's C variables for `target` that are set.
pub fn user_env(target: &str, env: &dyn Fn(&str) -> Option<String>) -> BTreeMap<String, String> {
    ["CC", "CXX", "CFLAGS", "CXXFLAGS", "CPPFLAGS"]
        .iter()
        .flat_map(|base| cc_variables(base, target))
        .filter_map(|name| env(&name).map(|value| (name, value)))
        .collect()
}

/// The C (`base` "CC") or C++ ("CXX") compiler the user's own build runs for `target`: the
/// one they named for the `cc` crate, else its default (`cc`, `c++`).
pub fn users_own_compiler(base: &str, target: &str, host: &str) -> String {
    user_compiler(base, target, host, &|key| std::env::var(key).ok())
        .map(|(_, compiler)| compiler)
        .unwrap_or_else(|| if base == "CXX" { "c++" } else { "cc" }.to_owned())
}

/// The user's own C compiler for `target` and the first line of its `--version` ("version
/// unknown" when it says none): what a stage that keeps the user's C compiles it with.
pub fn users_compiler_identity(target: &str, host: &str, printer: &Printer) -> (String, String) {
    let compiler = users_own_compiler("CC", target, host);
    // `CC` may hold a launcher and flags (`ccache gcc -m64`): the words, as the cc crate runs.
    let mut words = compiler.split_whitespace();
    let version = words
        .next()
        .and_then(|program| {
            Cmd::new(program)
                .args(words)
                .arg("--version")
                .output(printer)
                .ok()
        })
        .filter(|output| output.status.success())
        .and_then(|output| {
            let text = String::from_utf8_lossy(&output.stdout).into_owned();
            text.lines().next().map(|line| line.trim().to_owned())
        })
        .unwrap_or_else(|| "version unknown".to_owned());
    (compiler, version)
}

/// The C compiler the `cc` crate would use for `target`, when the user named one.
fn user_compiler(
    base: &str,
    target: &str,
    host: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<(String, String)> {
    let [hyphen, underscore, target_kind, host_kind, plain] = cc_variables(base, target);
    let kind = if target == host {
        host_kind
    } else {
        target_kind
    };
    [hyphen, underscore, kind, plain]
        .into_iter()
        .find_map(|name| {
            env(&name)
                .filter(|v| !v.trim().is_empty())
                .map(|v| (name, v))
        })
}

/// The major of a `clang --version` text ("Debian clang version 22.1.8 (1~deb12u1)").
pub fn clang_major(version_text: &str) -> Option<(u32, String)> {
    let line = version_text.lines().next()?.trim();
    let version = line
        .split("clang version ")
        .nth(1)?
        .split_whitespace()
        .next()?;
    let major = version.split('.').next()?.parse().ok()?;
    Some((major, line.to_owned()))
}

/// `clang++` beside a clang (`clang-N` → `clang++-N`, `clang` → `clang++`).
fn cxx_of(clang: &Path) -> PathBuf {
    let name = clang
        .file_name()
        .map(|n| n.to_string_lossy().replacen("clang", "clang++", 1))
        .unwrap_or_else(|| "clang++".to_owned());
    clang.with_file_name(name)
}

/// How a C compiler candidate turned out.
struct Probe {
    path: PathBuf,
    outcome: std::result::Result<String, String>,
}

fn probe(path: &Path, major: u32, printer: &Printer) -> Probe {
    let outcome = match Cmd::new(path).arg("--version").output(printer) {
        Ok(output) if output.status.success() => {
            match clang_major(&String::from_utf8_lossy(&output.stdout)) {
                Some((found, line)) if found == major => Ok(line),
                Some((found, line)) => Err(format!(
                    "{line}: clang {found} writes another raw profile format than rustc's LLVM \
                     {major}, and one of the two formats would silently win (llvm#52683)"
                )),
                None => Err("not a clang (its `--version` names no clang version)".to_owned()),
            }
        }
        Ok(output) => Err(format!("`--version` failed ({})", output.status)),
        Err(err) => Err(format!("could not run it: {}", err.root_cause())),
    };
    Probe {
        path: path.to_owned(),
        outcome,
    }
}

/// The clang of LLVM `major` that compiles the C: `PGO_BUILD_CLANG` when set (and nothing
/// else), else the user's `CC` for the target when it is a clang (another major is refused:
/// it is what the user asked for, and it cannot work), else `clang-<major>`,
/// `/usr/lib/llvm-<major>/bin/clang`, `clang`.
pub fn locate(
    mode: CBuild,
    target: &str,
    host: &str,
    major: u32,
    env: &dyn Fn(&str) -> Option<String>,
    printer: &Printer,
) -> Result<Option<CSettings>> {
    if mode == CBuild::User {
        return Ok(None);
    }
    let fix = format!(
        "Fix: `apt-get install clang-{major}` (Debian/Ubuntu; apt.llvm.org for others), or set \
         {CLANG_ENV} to a clang {major}, or turn cross-language PGO off (`[pgo] cross_language \
         = false`)."
    );
    let resolve = |path: PathBuf| -> PathBuf {
        if path.components().count() > 1 {
            path
        } else {
            crate::toolchain::which(&path.to_string_lossy())
                .into_iter()
                .next()
                .unwrap_or(path)
        }
    };
    let settings = |probe: Probe, line: String| -> Result<CSettings> {
        let llvm_ar = match mode {
            CBuild::PgoXlto => Some(llvm_ar_beside(&probe.path).ok_or_else(|| {
                anyhow::anyhow!(
                    "cross-language ThinLTO archives LLVM bitcode with llvm-ar of LLVM {major}, \
                     and there is none beside {} (the system's `ar` writes no symbol index for \
                     bitcode, and the link then misses the C). Fix: `apt-get install \
                     llvm-{major}`.",
                    probe.path.display()
                )
            })?),
            _ => None,
        };
        Ok(CSettings {
            mode,
            clangxx: cxx_of(&probe.path),
            clang: probe.path,
            version: line,
            llvm_ar,
            user_env: user_env(target, env),
            exclude: Vec::new(),
        })
    };
    let named = env(CLANG_ENV)
        .map(|path| (CLANG_ENV.to_owned(), path))
        .or_else(|| {
            user_compiler("CC", target, host, env).filter(|(_, cc)| {
                Path::new(cc)
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("clang"))
            })
        });
    if let Some((variable, path)) = named {
        let probe = probe(&resolve(PathBuf::from(&path)), major, printer);
        return match probe.outcome.clone() {
            Ok(line) => Ok(Some(settings(probe, line)?)),
            Err(why) => bail!(
                "{variable}={path} cannot compile the C for cross-language PGO: {why}.\n{fix}"
            ),
        };
    }
    let mut looked = Vec::new();
    for candidate in [
        PathBuf::from(format!("clang-{major}")),
        PathBuf::from(format!("/usr/lib/llvm-{major}/bin/clang")),
        PathBuf::from("clang"),
    ] {
        let path = resolve(candidate);
        if path.components().count() == 1 || !path.is_file() {
            looked.push(format!("  {}: not found", path.display()));
            continue;
        }
        let probe = probe(&path, major, printer);
        match probe.outcome.clone() {
            Ok(line) => return Ok(Some(settings(probe, line)?)),
            Err(why) => looked.push(format!("  {}: {why}", path.display())),
        }
    }
    bail!(
        "cross-language PGO needs a clang of rustc's LLVM {major} to compile the C and C++ of \
         build scripts, and none was found. Looked at:\n{}\n{fix}",
        looked.join("\n")
    )
}

/// `llvm-ar` of the LLVM a clang belongs to: in its real directory
/// (`/usr/bin/clang-N` → `/usr/lib/llvm-N/bin/llvm-ar`), or `llvm-ar-<suffix>` beside it.
fn llvm_ar_beside(clang: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(clang).ok()?;
    let suffix = clang
        .file_name()?
        .to_string_lossy()
        .strip_prefix("clang")
        .map(str::to_owned)
        .unwrap_or_default();
    [
        real.with_file_name("llvm-ar"),
        clang.with_file_name(format!("llvm-ar{suffix}")),
    ]
    .into_iter()
    .find(|candidate| candidate.is_file())
}

/// The flags the C of a stage gets, from the stage's own rustflags, so both languages use the
/// same profile: `-Cprofile-generate` gives `-fprofile-generate` (with continuous mode's
/// counter relocation when the Rust has it: counters outside the mapped file would be lost),
/// `-Cprofile-use=P` gives `-fprofile-use=P` and LLVM's per-function warnings, which the
/// wrapper records for the staleness summary. `continuous`: the Rust is instrumented in
/// continuous mode. `None`: this stage uses the user's compiler.
pub fn stage_flags(
    mode: CBuild,
    stage_rustflags: &[String],
    continuous: bool,
) -> Option<Vec<String>> {
    let generate = stage_rustflags
        .iter()
        .any(|f| f.starts_with("-Cprofile-generate"));
    let used = stage_rustflags
        .iter()
        .find_map(|f| f.strip_prefix("-Cprofile-use="));
    let mllvm = |flag: &str| ["-mllvm".to_owned(), flag.to_owned()];
    match mode {
        CBuild::User => None,
        CBuild::Clang => Some(Vec::new()),
        CBuild::PgoXlto => {
            stage_flags(CBuild::Pgo, stage_rustflags, continuous).map(|mut flags| {
                flags.push("-flto=thin".to_owned());
                flags
            })
        }
        CBuild::Pgo if generate => {
            let mut flags = vec!["-fprofile-generate".to_owned()];
            if continuous {
                for flag in [
                    "-runtime-counter-relocation",
                    "-disable-vp",
                    "-do-counter-promotion=false",
                ] {
                    flags.extend(mllvm(flag));
                }
            }
            Some(flags)
        }
        CBuild::Pgo => used.map(|profile| {
            let mut flags = vec![format!("-fprofile-use={profile}")];
            flags.extend(mllvm("-pgo-warn-missing-function"));
            // A user's -Werror must not turn the profile's notes into a failed build.
            flags.push("-Wno-error=backend-plugin".to_owned());
            flags
        }),
    }
}

/// Libraries every C program links: not a package's own C.
const RUNTIME_LIBS: [&str; 9] = [
    "c", "m", "dl", "pthread", "rt", "util", "gcc_s", "stdc++", "c++",
];

/// The libraries of a build script's `cargo:rustc-link-lib` lines that are linked dynamically
/// (`dylib=x` or a bare `x`; not `static=`, not the C runtime's): C no build compiles.
pub fn dynamic_libs(linked: &[impl AsRef<str>]) -> Vec<String> {
    linked
        .iter()
        .map(|lib| lib.as_ref())
        .filter(|lib| !lib.starts_with("static=") && !lib.starts_with("framework="))
        .map(|lib| lib.strip_prefix("dylib=").unwrap_or(lib))
        .map(|lib| lib.split(':').next().unwrap_or(lib).to_owned())
        .filter(|lib| !RUNTIME_LIBS.contains(&lib.as_str()))
        .collect()
}

/// The variables that point the `cc` crate's compilers (and archiver) for `target` at `cc`,
/// `cxx` and `ar`: the most specific ones, which win over anything else the user set.
pub fn compiler_env(
    target: &str,
    cc: &Path,
    cxx: &Path,
    ar: Option<&Path>,
) -> Vec<(String, String)> {
    let tools = [("CC", Some(cc)), ("CXX", Some(cxx)), ("AR", ar)];
    tools
        .into_iter()
        .filter_map(|(base, path)| Some((base, path?.to_string_lossy().into_owned())))
        .flat_map(|(base, path)| {
            let [hyphen, underscore, ..] = cc_variables(base, target);
            [(hyphen, path.clone()), (underscore, path)]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |key| {
            pairs
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn only_dynamically_linked_libraries_beyond_the_c_runtime_are_named() {
        let libs = [
            "static=bz2",
            "dylib=lzma",
            "ssl",
            "m",
            "dylib=stdc++",
            "dylib=z:renamed",
        ];
        assert_eq!(dynamic_libs(&libs), ["lzma", "ssl", "z"]);
    }

    #[test]
    fn clang_versions_are_read() {
        assert_eq!(
            clang_major("Debian clang version 22.1.8 (1~deb12u1)\nTarget: x86_64-pc-linux-gnu\n"),
            Some((22, "Debian clang version 22.1.8 (1~deb12u1)".to_owned()))
        );
        assert_eq!(
            clang_major("Ubuntu clang version 14.0.0-1ubuntu1\n")
                .unwrap()
                .0,
            14
        );
        assert_eq!(clang_major("gcc (Debian 12.2.0-14) 12.2.0\n"), None);
    }

    #[test]
    fn the_most_specific_user_compiler_wins() {
        let target = "x86_64-unknown-linux-gnu";
        // Any versioned clang: the lookup reads names, not the machine's LLVM.
        let env = env_of(&[("CC", "gcc"), ("CC_x86_64_unknown_linux_gnu", "clang-7")]);
        assert_eq!(
            user_compiler("CC", target, target, &env),
            Some((
                "CC_x86_64_unknown_linux_gnu".to_owned(),
                "clang-7".to_owned()
            ))
        );
        let env = env_of(&[("CC", "gcc"), ("TARGET_CC", "clang-14")]);
        assert_eq!(user_compiler("CC", target, target, &env).unwrap().1, "gcc");
        assert_eq!(
            user_compiler("CC", "aarch64-unknown-linux-gnu", target, &env)
                .unwrap()
                .1,
            "clang-14"
        );
        let recorded = user_env(target, &env_of(&[("CFLAGS", "-O3"), ("LANG", "C")]));
        assert_eq!(
            recorded.into_iter().collect::<Vec<_>>(),
            [("CFLAGS".to_owned(), "-O3".to_owned())]
        );
    }

    #[test]
    fn the_c_of_a_stage_gets_the_rust_profile() {
        let flags = |mode, rust: &[&str]| {
            stage_flags(
                mode,
                &rust.iter().map(|f| f.to_string()).collect::<Vec<_>>(),
                false,
            )
        };
        assert_eq!(flags(CBuild::User, &["-Cprofile-generate=/p"]), None);
        assert_eq!(
            flags(CBuild::Pgo, &["--cfg", "x"]),
            None,
            "the baseline keeps the user's"
        );
        assert_eq!(flags(CBuild::Clang, &[]), Some(vec![]));
        assert_eq!(
            flags(CBuild::Pgo, &["-Cprofile-generate=/p"]).unwrap(),
            ["-fprofile-generate"]
        );
        let continuous =
            stage_flags(CBuild::Pgo, &["-Cprofile-generate=/p".to_owned()], true).unwrap();
        assert!(continuous.contains(&"-runtime-counter-relocation".to_owned()));
        let used = flags(CBuild::Pgo, &["-Cprofile-use=/x/merged-ab.profdata"]).unwrap();
        assert_eq!(used[0], "-fprofile-use=/x/merged-ab.profdata");
        let thin = flags(CBuild::PgoXlto, &["-Cprofile-use=/x/merged-ab.profdata"]).unwrap();
        assert_eq!(thin[0], used[0]);
        assert!(thin.contains(&"-flto=thin".to_owned()), "{thin:?}");
        assert_eq!(
            flags(CBuild::PgoXlto, &[]),
            None,
            "the baseline keeps the user's"
        );
        assert_eq!(
            cxx_of(Path::new("/usr/bin/clang-7")),
            Path::new("/usr/bin/clang++-7")
        );
        assert_eq!(
            cxx_of(Path::new("/usr/lib/llvm-22/bin/clang")),
            Path::new("/usr/lib/llvm-22/bin/clang++")
        );
    }
}
