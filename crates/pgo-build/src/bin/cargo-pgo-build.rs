//! `cargo-pgo-build`: what cargo runs for `cargo pgo-build …`. It runs the `pgo-build` installed
//! beside it with the same arguments, less the `pgo-build` cargo puts first, so `cargo install`
//! gives both commands without a link made by hand.

use std::io::Write;
use std::os::unix::process::CommandExt;

fn main() {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|arg| arg == "pgo-build") {
        args.remove(0);
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("pgo-build")))
        .filter(|path| path.is_file());
    let Some(pgo_build) = beside else {
        // A closed stderr is no reason to panic: the exit status still says it.
        let _ = writeln!(
            std::io::stderr(),
            "error: cargo-pgo-build runs the pgo-build installed beside it, and there is none: \
             install both with `cargo install --locked --path crates/pgo-build`"
        );
        std::process::exit(2);
    };
    // exec replaces this process: signals, exit status and the terminal are pgo-build's own.
    let err = std::process::Command::new(&pgo_build).args(args).exec();
    let _ = writeln!(
        std::io::stderr(),
        "error: could not run {}: {err}",
        pgo_build.display()
    );
    std::process::exit(2);
}
