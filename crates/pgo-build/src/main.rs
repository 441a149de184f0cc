//! `pgo-build`: profile-guided optimized release builds of a cargo workspace.
//!
//! `main` only turns the outcome of [`app::run`] into an exit code; everything else lives in
//! the modules listed in ARCHITECTURE.md.

mod app;
mod bolt;
mod cargo_build;
mod cli;
mod command;
mod compare;
mod config;
mod insight;
mod layout;
mod pgo_diagnostics;
mod printer;
mod profile_commands;
mod profiles;
mod render;
mod report;
mod rustflags;
mod stages;
mod start_marker;
mod state;
mod stats;
mod toolchain;
mod training;
mod workspace;

fn main() -> std::process::ExitCode {
    app::main()
}
