//! The steps of the pipeline, one module each: `doctor`, `plain_builds` (`build` and `instrument`:
//! the baseline and instrumented builds), `train`, `optimize`, `bolt`, `compare`, `profile`
//! (`profile show|check|overlap`, `export`) and `shard` (`pack`, `unpack`, `merge`, training
//! bundles). A step never uses another: steps share code through the shared pipeline modules beside
//! this folder, and only the dispatcher and `run`, `gate`, `explore` tie steps together.

pub(super) mod bolt;
pub(super) mod compare;
pub(super) mod doctor;
pub(super) mod optimize;
pub(super) mod plain_builds;
pub(super) mod profile;
pub(super) mod shard;
pub(super) mod train;
