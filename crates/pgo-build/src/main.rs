//! `pgo-build`: profile-guided optimized release builds of a cargo workspace.
//!
//! `main` picks the mode pgo-build runs in (a wrapper under cargo, or the command a user
//! typed), parses the flags, runs the command (`offline::execute` for those that need no
//! context, else [`pipeline::execute`]) and turns its outcome into an exit code;
//! everything else lives in the modules listed in ARCHITECTURE.md.

// pgo-build is for Linux (see toolchain::platform_problem): elsewhere it does not build, and
// says why before the errors of the Unix-only code that follow.
#[cfg(not(unix))]
compile_error!(
    "pgo-build runs on Linux (x86_64 and aarch64): build and run it in a Linux container or VM"
);

mod cargo;
mod cli;
mod config;
mod exec;
mod layout;
mod measure;
mod offline;
mod pipeline;
mod profiles;
mod report;
mod toolchain;
mod util;
mod wrappers;

fn main() -> std::process::ExitCode {
    // The `cc` crate runs pgo-build as its C compiler in cross-language builds (see
    // wrappers/cc.rs); first, since build scripts inherit cargo's other pgo-build variables.
    if let Some(code) = wrappers::cc::run_if_wrapper() {
        return std::process::ExitCode::from(code);
    }
    // cargo runs pgo-build as its rustc wrapper (see wrappers/rustc/), which runs rustc
    // without that mode; rustc runs pgo-build as its linker (see wrappers/linker.rs).
    if let Some(code) = wrappers::rustc::run_if_wrapper() {
        return std::process::ExitCode::from(code);
    }
    if let Some(code) = wrappers::linker::run_if_linker() {
        return std::process::ExitCode::from(code);
    }
    let cli = cli::parse();
    let printer = util::printer::Printer::new(cli.global.verbosity());
    let (os, arch) = (std::env::consts::OS, std::env::consts::ARCH);
    if let Some(problem) = toolchain::platform_problem(os, arch) {
        printer.error(&anyhow::anyhow!(problem));
        return std::process::ExitCode::from(2);
    }
    if let Some(note) = toolchain::untested_arch(arch) {
        printer.warn_once(note);
    }
    exec::interrupt::install();
    let outcome =
        offline::execute(&cli, &printer).unwrap_or_else(|| pipeline::execute(&cli, &printer));
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            printer.error(&err);
            match err.downcast_ref::<exec::interrupt::Interrupted>() {
                // 130 for SIGINT, 143 for SIGTERM, as if the signal had ended pgo-build.
                Some(interrupted) => std::process::ExitCode::from(interrupted.exit_code()),
                None => std::process::ExitCode::FAILURE,
            }
        }
    }
}
