//! The modes pgo-build runs in under cargo: rustc's wrapper (`rustc`: the memory budget),
//! rustc's linker (`linker`: link slots, the link log), and the C compiler of build scripts
//! (`cc`: cross-language PGO). `main` checks for each before parsing flags.

pub mod cc;
pub mod linker;
pub mod rustc;
