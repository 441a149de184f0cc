//! Profile insight and committed profiles: `profile show`, `profile overlap`, `profile check`
//! and `export`, a file each, and where their profiles come from (`profile_inputs.rs`).

mod check;
mod export;
mod overlap;
mod profile_inputs;
mod show;

pub use check::profile_check;
pub use export::export;
pub use overlap::profile_overlap;
pub use show::profile_show;
