//! Cargo: the workspace (`cargo metadata`, binary selection), one stage's `cargo build` and its
//! JSON message stream, the user's rustflags, `cargo --timings` read back, sccache, and the
//! packages' sources fingerprinted.

pub mod build;
pub mod dep_info;
pub mod fn_source;
pub mod manifest;
pub mod rustflags;
pub mod sccache;
pub mod settings;
pub mod source_fingerprints;
pub mod target_source;
pub mod timings;
pub mod workspace;
