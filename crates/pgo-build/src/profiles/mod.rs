//! Profiles: raw profiles collected, checked and attributed per binary (`raw`, `compact`,
//! `format`), a training's accounting (`accounting`, with the start markers that count every
//! process, `start_marker`, and the record beside each workload's profiles,
//! `training_record`), merging (`merge`), reading profiles and rustc's profile warnings
//! (`insight`, `diagnostics`), carrying a committed profile to the names functions have now
//! (`carry`; across rustc releases, `toolchain_names`) and telling how much of one applies without building (`prediction`), start-up order (`startup_order`), and the bundles that carry
//! training between machines (`bundle`).

mod accounting;
pub mod bundle;
pub mod carry;
pub mod compact;
pub mod diagnostics;
mod format;
mod handed;
pub mod insight;
pub mod prediction;
mod profdata_merge;
mod raw;
pub mod start_marker;
pub mod startup_order;
pub mod toolchain_names;
pub mod training_record;

pub use accounting::{Accounting, BinaryProfiles, RawDirs, account, coverage};
pub use format::{indexed_version, keep_summary_of, written_indexed_version};
pub use handed::{ExportedProfile, PgoProfile};
pub use profdata_merge::{
    checkout_independent, checkout_independent_dir, content_hash, install_content_addressed, merge,
    merge_to, merge_weighted, summary,
};
pub use raw::{quoted_tool_output, raw_pattern, workload_dirs};
