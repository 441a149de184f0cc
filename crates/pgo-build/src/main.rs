//! `pgo-build`: profile-guided optimized release builds of a cargo workspace.
//!
//! `main` only turns the outcome of [`app::run`] into an exit code; everything else lives in
//! the modules listed in ARCHITECTURE.md.

mod app;
mod cargo;
mod cli;
mod config;
mod exec;
mod layout;
mod measure;
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
    app::main()
}
