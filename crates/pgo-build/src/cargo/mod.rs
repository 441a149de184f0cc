//! Cargo: the workspace (`cargo metadata`, binary selection), one stage's `cargo build` and its
//! JSON message stream, the user's rustflags, `cargo --timings` read back, and sccache.

pub mod build;
pub mod dep_info;
pub mod manifest;
pub mod rustflags;
pub mod sccache;
pub mod settings;
pub mod timings;
pub mod workspace;
