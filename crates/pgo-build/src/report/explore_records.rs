//! The records of `pgo-build explore` in `report.json`: the variants it built, what each cost
//! and how fast it was, and what it recommends (re-exported by `records`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::layout::step::Step;
use crate::measure::metric::Metric;
use crate::measure::stats::PairedSummary;
use crate::util::units::human_bytes;

/// The two variants every exploration measures: the others are judged against them
/// (`vs_baseline`, `vs_pgo`).
pub const BASELINE_VARIANT: &str = "baseline";
pub const PGO_VARIANT: &str = "pgo";

/// What `pgo-build explore` built and measured, and what it recommends.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ExploreResult {
    pub metric: Metric,
    /// The workload metric the verdicts rest on, if any (as `CompareResult::decided_by`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// Counted rounds per holdout workload.
    pub rounds: usize,
    /// The holdout workloads speed was measured on.
    pub workloads: Vec<String>,
    /// Sorted by speed against the baseline (fastest first); unmeasured variants last.
    pub variants: Vec<ExploreVariantRecord>,
    /// The recommended variant and why; `None` while variants remain unbuilt or unmeasured,
    /// or when the measurements cannot decide (`undecided`).
    pub recommendation: Option<ExploreRecommendation>,
    /// Why the measurements cannot decide yet (pgo neither shown faster than the baseline nor
    /// the same within the margin), and what would.
    #[serde(default)]
    pub undecided: Option<String>,
    /// Why exploration stopped early (`--budget`), if it did.
    pub stopped: Option<String>,
}

/// Where an explored variant is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum VariantStatus {
    #[serde(rename = "measured")]
    Measured,
    /// Built, but a holdout run against it failed: never recommended.
    #[serde(rename = "failed")]
    Failed,
    #[serde(rename = "build failed")]
    BuildFailed,
    #[serde(rename = "not built")]
    NotBuilt,
    /// Built, not measured yet (the budget ran out first).
    #[serde(rename = "not measured")]
    NotMeasured,
}

impl VariantStatus {
    /// As tables and `report.json` write it.
    pub fn name(self) -> &'static str {
        match self {
            VariantStatus::Measured => "measured",
            VariantStatus::Failed => "failed",
            VariantStatus::BuildFailed => "build failed",
            VariantStatus::NotBuilt => "not built",
            VariantStatus::NotMeasured => "not measured",
        }
    }
}

impl std::fmt::Display for VariantStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ExploreVariantRecord {
    pub name: String,
    pub pgo: bool,
    pub bolt: bool,
    /// Cargo profile overrides (`cargo --config profile.<name>.<key>=<value>`).
    pub profile_overrides: BTreeMap<String, String>,
    pub rustflags: Vec<String>,
    pub status: VariantStatus,
    /// What failed, or why it was not built or measured.
    #[serde(default)]
    pub detail: Option<String>,
    /// Where its binaries are: `target/pgo-build/explore/<variant>/bin/`.
    pub bin_dir: Option<PathBuf>,
    /// Every step the variant needed, with the duration and peak memory of the run that did
    /// its work (a step shared with another variant counts for each); `stages` before
    /// schema 13.
    #[serde(alias = "stages")]
    pub steps: Vec<ExploreStepCost>,
    pub build_secs: Option<f64>,
    pub peak_memory_bytes: Option<u64>,
    /// Total file size of its binaries.
    pub size_bytes: Option<u64>,
    /// Total loaded size of its binaries: the files less debug info and symbol tables (about
    /// what a stripped release ships; comparable where file sizes are not: BOLT drops debug
    /// info).
    #[serde(default)]
    pub loaded_bytes: Option<u64>,
    /// Loaded size against the baseline's: 0.05 is 5% larger.
    pub size_change: Option<f64>,
    /// Over `[pgo] max_size_growth`: never recommended.
    #[serde(default)]
    pub over_size_limit: bool,
    pub vs_baseline: Option<ExploreSpeed>,
    pub vs_pgo: Option<ExploreSpeed>,
    /// The rounds it was measured for: explore's race stops a variant once it is decided.
    #[serde(default)]
    pub rounds: Option<usize>,
    /// The Pareto fronts it is on: `build time`, `peak memory`, `size` (speed against each).
    pub front: Vec<String>,
}

impl ExploreVariantRecord {
    /// "12.3s", or "-" when it was not built.
    pub fn build_time_text(&self) -> String {
        self.build_secs
            .map_or("-".to_owned(), |s| format!("{s:.1}s"))
    }

    pub fn peak_memory_text(&self) -> String {
        self.peak_memory_bytes.map_or("-".to_owned(), human_bytes)
    }

    /// "5.1 MiB (+3.2%)": loaded size and its change over the baseline's.
    pub fn size_text(&self) -> String {
        match (self.loaded_bytes, self.size_change) {
            (Some(bytes), Some(change)) if self.name != BASELINE_VARIANT => format!(
                "{} ({:+.1}%){}",
                human_bytes(bytes),
                change * 100.0,
                if self.over_size_limit {
                    " over limit"
                } else {
                    ""
                }
            ),
            (Some(bytes), _) => human_bytes(bytes),
            _ => "-".to_owned(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ExploreStepCost {
    /// The build it belongs to: `target/pgo-build/` itself or `explore/builds/<key>`.
    pub build: String,
    /// `stage` before schema 13.
    #[serde(alias = "stage")]
    pub step: Step,
    pub secs: f64,
    pub peak_memory_bytes: Option<u64>,
    pub cached: bool,
}

/// A variant's speed against a reference over the holdout workloads.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ExploreSpeed {
    /// Geometric mean of the per-workload median ratios (below 1: faster).
    pub ratio: f64,
    /// faster when every holdout workload's verdict is, slower when every one is.
    pub verdict: crate::measure::stats::Verdict,
    pub workloads: BTreeMap<String, PairedSummary>,
    /// Set when not the explore's metric decided: "instructions (wall time undecided after
    /// 40 rounds)".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ExploreRecommendation {
    pub variant: String,
    /// Whether a variant beat `pgo` with evidence (false: "no variant is better than pgo").
    pub better_than_pgo: bool,
    pub evidence: String,
}
