//! `pgo-build`: profile-guided optimized release builds of a cargo workspace.
//!
//! `main` only turns the outcome of [`app::run`] into an exit code; everything else lives in
//! the modules listed in ARCHITECTURE.md.

mod app;
mod bundle;
mod cargo_build;
mod cargo_config;
mod cargo_timings;
mod cargo_workload;
mod cc_wrapper;
mod cli;
mod command;
mod config;
mod counter;
mod criterion;
mod cross_language;
mod files;
mod init;
mod insight;
mod interrupt;
mod layout;
mod linker;
mod measurement;
mod memory;
mod metrics;
mod names;
mod pgo_diagnostics;
mod pipeline;
mod printer;
mod profiles;
mod release;
mod report;
mod rustc_wrapper;
mod rustflags;
mod sccache;
mod start_marker;
mod startup_order;
mod state;
mod stats;
mod step;
mod targets;
mod toolchain;
mod training;
mod training_record;
mod workspace;

fn main() -> std::process::ExitCode {
    // The `cc` crate runs pgo-build as its C compiler in cross-language builds (see
    // cc_wrapper.rs); first, since build scripts inherit cargo's other pgo-build variables.
    if let Some(code) = cc_wrapper::run_if_wrapper() {
        return std::process::ExitCode::from(code);
    }
    // cargo runs pgo-build as its rustc wrapper (see rustc_wrapper.rs), which runs rustc
    // without that mode; rustc runs pgo-build as its linker (see linker.rs).
    if let Some(code) = rustc_wrapper::run_if_wrapper() {
        return std::process::ExitCode::from(code);
    }
    if let Some(code) = linker::run_if_linker() {
        return std::process::ExitCode::from(code);
    }
    app::main()
}
