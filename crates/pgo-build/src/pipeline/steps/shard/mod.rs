//! Stages and training across machines: `pack`/`unpack` of a stage (`pack.rs`), the bundle a
//! sharded `train --bundle` writes and `merge`, which turns bundles into the profile
//! `optimize` uses (`merge.rs`).

mod merge;
mod pack;

pub use merge::{merge, write_bundle};
pub use pack::{pack, unpack};
