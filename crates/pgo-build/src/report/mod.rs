//! `target/pgo-build/report.json`: the [`Report`], its records (`records`) and their terminal
//! tables (`tables`). Stages write records; `render` and the tables read them. Nothing in
//! here imports a stage.
//!
//! Each command updates the report of the last run in place (a stage's record replaces the
//! previous record of that stage); `run` starts a fresh one. The JSON is versioned
//! (`schema_version`) because CI scripts read it.
//!
//! `answer`: the verdict block every surface leads with; `file`: the [`Report`] itself; `records`:
//! every record it keeps (the schema, `docs/report.schema.json`); `explore_records`: explore's
//! (re-exported by `records`); `profile_records`, `bundle_records`: profiles' and merged bundles';
//! `tables`: their terminal tables; `history`: the comparisons as they ran; `render`: `pgo-build
//! report`'s Markdown and HTML.

pub mod answer;
mod bundle_records;
mod explore_records;
mod file;
mod history;
mod profile_records;
mod rebuilt;
mod records;
pub mod render;
pub mod schema;
pub mod tables;
mod why;

pub use bundle_records::{BundleWorkload, MergedBundle, MergedBundles, Shard, Weights};
pub use file::Report;
pub use history::table as compare_history_table;
pub use profile_records::{
    BinaryProfiles, CarriedName, ChangedFunction, CrateCounts, CrateShare, DiagnosticsSummary,
    HotFunction, LanguageShares, MergedProfile, Missed, OverlapRecord, ShownCoverage, ShownProfile,
    Staleness,
};
pub use records::{
    BASELINE_VARIANT, BenchmarkComparison, BinaryRecord, BoltRecord, CCompilerRecord,
    CandidatePair, CandidateSummary, CompareResult, CompareRun, CrateFigures,
    ExploreRecommendation, ExploreResult, ExploreSpeed, ExploreStepCost, ExploreVariantRecord,
    FamilyRule, GraphBound, LinkSummary, MetricComparison, OrderRecord, PGO_VARIANT,
    PreviousComparison, RejectedProfile, RunSample, RustcSummary, ServiceRecord, StageCache,
    StepRecord, StepResult, StoppedProcess, Traces, VariantStatus, WorkloadComparison,
    WorkloadRecord, decider_label, invocation, metric_label, now_unix, verdict_text,
};
