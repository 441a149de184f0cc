//! What a rustc command line says: the crate it compiles and its kind, where its metadata
//! goes, its crate root, and whether it links.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::report::CrateKind;

/// The crate a rustc command line compiles and its kind (of several, `--crate-type
/// rlib,cdylib`, the first); `None` for queries (`-vV`, `--print`), which compile nothing.
pub fn compiled_crate(args: &[OsString]) -> Option<(String, CrateKind)> {
    let args: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if args
        .iter()
        .any(|a| a.starts_with("--print") || a == "-vV" || a == "-V")
    {
        return None;
    }
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
            .or_else(|| {
                args.iter()
                    .find_map(|a| a.strip_prefix(&format!("{flag}=")).map(str::to_owned))
            })
    };
    let krate = value("--crate-name")?;
    let kind = if krate.starts_with("build_script_") {
        CrateKind::BuildScript
    } else {
        match value("--crate-type") {
            // A crate type this pgo-build does not know (a nightly's `sdylib`) is a library
            // of some kind: admitted and measured as one, not let past the budget.
            Some(types) => types
                .split(',')
                .next()
                .and_then(CrateKind::from_name)
                .unwrap_or(CrateKind::Lib),
            None => CrateKind::default(),
        }
    };
    Some((krate, kind))
}

/// Where rustc writes a library's metadata (`<out-dir>/lib<crate><extra-filename>.rmeta`):
/// once it exists, cargo may have started the crates that depend on it.
pub(super) fn metadata_path(args: &[OsString]) -> Option<PathBuf> {
    let args: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let after = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
    };
    let out_dir = after("--out-dir")?;
    let krate = after("--crate-name")?;
    let extra = args
        .windows(2)
        .find_map(|pair| {
            (pair[0] == "-C")
                .then(|| pair[1].strip_prefix("extra-filename="))
                .flatten()
        })
        .unwrap_or_default();
    Some(PathBuf::from(out_dir).join(format!("lib{krate}{extra}.rmeta")))
}

/// The crate root a rustc command line compiles (its one `.rs` argument).
pub(super) fn crate_root(args: &[OsString]) -> Option<PathBuf> {
    args.iter()
        .map(Path::new)
        .find(|arg| arg.extension().is_some_and(|e| e == "rs") && !arg.starts_with("-"))
        .map(Path::to_path_buf)
}

/// Whether rustc links this crate (a binary or a dynamic library): only then does it run
/// the linker its `-C linker` names.
pub(super) fn links(args: &[OsString]) -> bool {
    const LINKED: [&str; 3] = ["bin", "cdylib", "dylib"];
    args.windows(2)
        .any(|pair| pair[0] == "--crate-type" && LINKED.iter().any(|t| pair[1] == *t))
        || args.iter().any(|arg| {
            arg.to_str()
                .and_then(|a| a.strip_prefix("--crate-type="))
                .is_some_and(|t| LINKED.contains(&t))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_crates_that_link_are_said_to() {
        let args = |line: &str| -> Vec<OsString> { line.split(' ').map(OsString::from).collect() };
        assert!(links(&args(
            "--crate-name s --crate-type cdylib --crate-type rlib"
        )));
        assert!(links(&args("--crate-name app --crate-type=bin")));
        assert!(!links(&args("--crate-name libc --crate-type lib")));
        assert!(!links(&args("--crate-name m --crate-type proc-macro")));
    }

    #[test]
    fn compiled_crates_are_named_and_queries_are_not() {
        let args = |line: &str| -> Vec<OsString> { line.split(' ').map(OsString::from).collect() };
        assert_eq!(
            compiled_crate(&args(
                "--crate-name app --edition=2024 src/main.rs --crate-type bin"
            )),
            Some(("app".into(), CrateKind::Bin))
        );
        assert_eq!(
            compiled_crate(&args(
                "--crate-name build_script_build build.rs --crate-type bin"
            )),
            Some(("build_script_build".into(), CrateKind::BuildScript))
        );
        assert_eq!(
            compiled_crate(&args("--crate-name=serde --crate-type=lib x.rs")),
            Some(("serde".into(), CrateKind::Lib))
        );
        assert_eq!(
            compiled_crate(&args("--crate-name m --crate-type proc-macro x.rs")),
            Some(("m".into(), CrateKind::ProcMacro))
        );
        // No --crate-type: rustc's default, a binary; of a list, the first; one this
        // pgo-build does not know, a library (still inside the budget).
        assert_eq!(
            compiled_crate(&args("--crate-name app x.rs")),
            Some(("app".into(), CrateKind::Bin))
        );
        assert_eq!(
            compiled_crate(&args("--crate-name both --crate-type=cdylib,rlib x.rs")),
            Some(("both".into(), CrateKind::Cdylib))
        );
        assert_eq!(
            compiled_crate(&args("--crate-name s --crate-type sdylib x.rs")),
            Some(("s".into(), CrateKind::Lib))
        );
        assert_eq!(compiled_crate(&args("-vV")), None);
        assert_eq!(
            compiled_crate(&args("- --crate-name ___ --print=file-names")),
            None
        );
    }
}
