//! Start-up ordering from temporal profiles (`[pgo] startup_order`).
//!
//! With `-pgo-temporal-instrumentation` the instrumented binaries also record the order in
//! which functions first run (one trace per process; `llvm-profdata merge` keeps up to 100).
//! The flag adds a timestamp per function and changes neither profile names nor hashes
//! (checked: `llvm-profdata show --all-functions` lists the same names and hashes with and
//! without it), so the optimized build stays the one the profile was made for. It is not
//! compatible with online merging (`%m`); pgo-build writes one raw file per process anyway.
//!
//! The order reaches only the optimized *link*, as `-Clink-arg`s for rust-lld (rustc 1.95's
//! default linker on Linux): codegen is unchanged, so profile use is unaffected.
//! - `ordering-file`: `llvm-profdata order` turns the traces into a function order, written
//!   (without its comment lines) to a content-addressed file for `--symbol-ordering-file`.
//!   lld places the listed functions first, in that order.
//! - `balanced`: lld reads the profile itself (`--irpgo-profile`) and groups the functions
//!   each start-up trace touches (`--bp-startup-sort=function`).
//! - `balanced-compression`: also orders the rest for a smaller compressed binary
//!   (`--bp-compression-sort=function`).
//!
//! Functions from the precompiled standard library are not in the profile (it is not
//! instrumented), so only the workspace's and its dependencies' code is ordered.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::config::StartupOrder;
use crate::profiles;
use crate::report::Traces;
use crate::toolchain::LlvmTool;
use crate::util::command::Cmd;
use crate::util::printer::Printer;

/// Added to the instrumented build when `startup_order` is not off.
pub const TEMPORAL_FLAG: &str = "-Cllvm-args=-pgo-temporal-instrumentation";
/// Set for the optimized link: the linker wrapper refuses a linker other than lld with it.
pub const REQUIRE_LLD_ENV: &str = "PGO_BUILD_REQUIRE_LLD";

/// Reads the traces `llvm-profdata show --temporal-profile-traces` reports for `profile`.
pub fn traces(profdata: &LlvmTool, profile: &Path, printer: &Printer) -> Result<Traces> {
    let text = Cmd::new(&profdata.path)
        .args(["show", "--temporal-profile-traces"])
        .arg(profile)
        .stdout_checked(printer)?;
    Ok(parse_traces(&text))
}

fn parse_traces(show: &str) -> Traces {
    // "Temporal Profile Traces (samples=2 seen=5):"; absent when there are none.
    let Some(line) = show
        .lines()
        .find(|line| line.starts_with("Temporal Profile Traces"))
    else {
        return Traces::default();
    };
    let number = |key: &str| {
        line.split([' ', '(', ')', ':'])
            .find_map(|word| word.strip_prefix(key))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    Traces {
        kept: number("samples="),
        seen: number("seen="),
    }
}

/// The function order of `profile`'s traces, in `dir/order-<hash>.txt`: one symbol per line,
/// `llvm-profdata order`'s comments (the file a local function came from) left out. Returns
/// the file and how many functions it orders.
pub fn order_file(
    profdata: &LlvmTool,
    profile: &Path,
    dir: &Path,
    printer: &Printer,
) -> Result<(PathBuf, usize)> {
    crate::util::files::create_dir_all(dir)?;
    let raw = dir.join(format!("order.{}.partial", std::process::id()));
    Cmd::new(&profdata.path)
        .arg("order")
        .arg(profile)
        .arg("--output")
        .arg(&raw)
        .stdout_checked(printer)
        .context("llvm-profdata could not compute a function order from the temporal traces")?;
    let text = crate::util::files::read_to_string(&raw)?;
    let _ = std::fs::remove_file(&raw);
    let symbols: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .collect();
    if symbols.is_empty() {
        bail!(
            "llvm-profdata order found no function order in {}: its temporal traces are empty",
            profile.display()
        );
    }
    let contents = symbols.join("\n") + "\n";
    let file = dir.join(format!(
        "order-{}.txt",
        profiles::content_hash(contents.as_bytes())
    ));
    // Never rewritten when unchanged: a new mtime is harmless here, but a stable path keeps
    // the flags (and so cargo's fingerprints) the same.
    if std::fs::read_to_string(&file).ok().as_deref() != Some(contents.as_str()) {
        crate::util::files::write(&file, &contents)?;
    }
    Ok((file, symbols.len()))
}

/// The optimized link's arguments for `mode`: `profile` is the profile `-Cprofile-use`
/// names, `order` the ordering file (for `ordering-file`).
pub fn link_flags(mode: StartupOrder, profile: &Path, order: Option<&Path>) -> Vec<String> {
    let arg = |text: String| format!("-Clink-arg=-Wl,{text}");
    match mode {
        StartupOrder::Off => Vec::new(),
        StartupOrder::OrderingFile => vec![
            arg(format!(
                "--symbol-ordering-file={}",
                order.expect("an ordering file").display()
            )),
            // Functions inlined everywhere or removed by the linker have no symbol: expected.
            arg("--no-warn-symbol-ordering".to_owned()),
        ],
        StartupOrder::Balanced | StartupOrder::BalancedCompression => {
            let mut flags = vec![
                arg(format!("--irpgo-profile={}", profile.display())),
                arg("--bp-startup-sort=function".to_owned()),
            ];
            if mode == StartupOrder::BalancedCompression {
                flags.push(arg("--bp-compression-sort=function".to_owned()));
            }
            flags
        }
    }
}

/// In linker mode, with [`REQUIRE_LLD_ENV`] set (to why lld is needed, `needs`): why this
/// link cannot do it, if it cannot (the ordering options are lld's, GNU ld rejects them and
/// some linkers ignore them; bitcode needs a linker of rustc's LLVM).
pub fn lld_missing(
    args: &[std::ffi::OsString],
    real_linker: &std::ffi::OsStr,
    needs: &str,
) -> Option<String> {
    let name = Path::new(real_linker)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // The compiler driver uses the last -fuse-ld= (rustc passes -fuse-ld=lld itself; a user's
    // `-Clink-arg=-fuse-ld=bfd` comes after it and wins).
    let chosen = args.iter().rev().find_map(|arg| {
        let arg = arg.to_string_lossy();
        arg.strip_prefix("-fuse-ld=")
            .or_else(|| arg.strip_prefix("--ld-path="))
            .map(str::to_owned)
    });
    let lld = match chosen {
        Some(linker) => linker.contains("lld"),
        None => name.contains("lld"),
    };
    (!lld).then(|| {
        format!(
            "{needs}, but this link runs `{name}` without lld (another -fuse-ld, or none), \
             which cannot do it. Let rustc link with its rust-lld (its default on x86_64 Linux; \
             remove `-Clinker`/`-Clink-self-contained` overrides), or add \
             `-Clink-arg=-fuse-ld=lld` (an lld of rustc's LLVM), or turn the setting off"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traces_are_read_from_show_output() {
        let show = "Total functions: 10\nTemporal Profile Traces (samples=2 seen=5):\n  Temporal Profile Trace 0 (weight=1 count=8):\n    main\n";
        assert_eq!(parse_traces(show), Traces { kept: 2, seen: 5 });
        assert_eq!(parse_traces("Total functions: 10\n"), Traces::default());
    }

    #[test]
    fn each_mode_gives_its_link_arguments_and_off_none() {
        let profile = Path::new("/p/merged.profdata");
        let order = Path::new("/p/order-1.txt");
        assert!(link_flags(StartupOrder::Off, profile, None).is_empty());
        assert_eq!(
            link_flags(StartupOrder::OrderingFile, profile, Some(order)),
            [
                "-Clink-arg=-Wl,--symbol-ordering-file=/p/order-1.txt",
                "-Clink-arg=-Wl,--no-warn-symbol-ordering"
            ]
        );
        let balanced = link_flags(StartupOrder::BalancedCompression, profile, None);
        assert_eq!(
            balanced,
            [
                "-Clink-arg=-Wl,--irpgo-profile=/p/merged.profdata",
                "-Clink-arg=-Wl,--bp-startup-sort=function",
                "-Clink-arg=-Wl,--bp-compression-sort=function"
            ]
        );
    }

    #[test]
    fn a_link_without_lld_is_named() {
        let with = ["-fuse-ld=lld".into(), "-o".into()];
        let needs = "X needs lld";
        assert!(lld_missing(&with, "cc".as_ref(), needs).is_none());
        assert!(lld_missing(&[], "ld.lld".as_ref(), needs).is_none());
        let without = lld_missing(&["-o".into()], "/usr/bin/gcc".as_ref(), needs).unwrap();
        assert!(
            without.contains("X needs lld, but this link runs `gcc` without lld"),
            "{without}"
        );
        let overridden = ["-fuse-ld=lld".into(), "-fuse-ld=bfd".into()];
        assert!(lld_missing(&overridden, "cc".as_ref(), needs).is_some());
    }
}
