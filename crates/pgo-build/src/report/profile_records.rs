//! The records `report.json` keeps of profiles: what training wrote per binary, the merged
//! profile, what rustc said of it in the optimized build, how a committed profile matched the
//! build (staleness), and how training covers held-out work (overlap). Data only: the code that
//! makes them is in `profiles` and the pipeline's steps, which import them from here.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Per-binary figures after training. One raw file is one process (see [`RAW_PATTERN`]); a
/// merged one counts the processes whose files it holds.
#[derive(Debug, Default, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct BinaryProfiles {
    /// Processes that started: recorded starts, or profile files where more.
    pub processes: usize,
    /// Processes that ended without writing a profile: stopped by a signal, `abort`, `_exit`.
    pub died: usize,
    /// Profile files (one per process that got as far as creating one).
    pub files: usize,
    /// Files whose profile is usable.
    pub valid_files: usize,
    /// Bytes of the usable files (what is merged; excluded files are not counted).
    pub bytes: u64,
    /// 0-byte files: processes that were stopped after the runtime created their file.
    pub empty_files: usize,
    /// Non-empty files that cannot be merged (corrupt, written twice, another LLVM's): their
    /// processes wrote, but nothing usable.
    #[serde(default)]
    pub unusable_files: usize,
    /// Functions with non-zero counts in this binary's merged profile.
    pub covered_functions: Option<u64>,
    /// Instrumented functions in this binary's profile.
    pub instrumented_functions: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MergedProfile {
    pub path: PathBuf,
    pub size_bytes: u64,
    pub total_functions: u64,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CrateCounts {
    pub missing_functions: usize,
    pub mismatched_functions: usize,
    /// Functions whose value profile (indirect calls, memcpy sizes) was discarded.
    #[serde(default)]
    pub inconsistent_value_sites: usize,
}

/// What rustc said of the profile in the optimized build, per crate (`optimize_diagnostics`).
#[derive(Debug, Default, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct DiagnosticsSummary {
    pub per_crate: BTreeMap<String, CrateCounts>,
    /// Messages saying the profile was unusable as a whole.
    pub unusable_profile: Vec<String>,
    /// Changed or missing functions of crates in [`EXPECTED_TO_DIFFER`], left out of the
    /// counts: crate → functions.
    #[serde(default)]
    pub expected: BTreeMap<String, usize>,
}

/// Staleness of a committed profile, from the optimized build: weighted by the profile's
/// counts, since a stale hot function costs what a thousand cold ones do not.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Staleness {
    pub profile_functions: usize,
    pub profile_counts: u64,
    /// Functions whose code changed since, or whose crate was renamed (their data is dropped).
    pub stale_functions: usize,
    /// Their share of the profile's counts: what `[pgo] max_stale` applies to.
    pub share: f64,
    /// Crates whose every symbol has another name now (see `profiles::carry::RenamedCrate`).
    pub renamed_crates: Vec<String>,
    /// Functions found under another name (another codegen unit) and carried over.
    pub carried_functions: usize,
    pub carried_counts: u64,
    /// Crates compiled a second time to carry records over.
    pub recompiled: Vec<String>,
    /// Crates whose carrying failed (their first compile stands), with why.
    pub carry_errors: Vec<String>,
    pub per_crate: BTreeMap<String, CrateStaleness>,
    /// The functions that changed, most counts first.
    pub changed: Vec<ChangedFunction>,
    /// The functions carried over, most counts first.
    pub carried: Vec<CarriedName>,
}

/// A function found in another codegen unit, and the records it got.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CarriedName {
    pub name: String,
    /// Its name in this build (`module;symbol`).
    pub now: String,
    /// The records' names in the profile.
    pub from: Vec<String>,
    pub counts: u64,
}

/// One crate's part of a committed profile in the optimized build. The crate is the one whose
/// code a function is (for a generic, where it is defined).
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct CrateStaleness {
    pub functions: usize,
    pub counts: u64,
    pub carried_functions: usize,
    pub carried_counts: u64,
    pub changed_functions: usize,
    pub changed_counts: u64,
    /// Functions compiled in this crate without data the profile could give (new code).
    pub new_functions: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ChangedFunction {
    pub name: String,
    /// Share of the profile's counts.
    pub share: f64,
}

impl Staleness {
    /// Share of the profile's counts in functions that still match, exactly or carried.
    pub fn matching_share(&self) -> f64 {
        1.0 - self.share
    }
}

/// How the training covers one binary's held-out work (`profile overlap`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OverlapRecord {
    /// The edge-profile overlap of training with holdout (0–1).
    pub edge_overlap: f64,
    /// `[pgo] min_overlap` when it was measured: below it training represents the held-out
    /// work poorly (absent in reports before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_overlap: Option<f64>,
    /// The functions holdout runs most that training misses, most counts first.
    pub missed_by_training: Vec<Missed>,
}

/// A function that `test` spends time in and `base` does not (or hardly).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Missed {
    pub name: String,
    pub krate: String,
    /// Share of the test profile's total count.
    pub test_share: f64,
    /// Share of the base profile's total count (0 when absent).
    pub base_share: f64,
}

/// A held-out function this large a share of the held-out counts is hot there.
pub const HOT_IN_HOLDOUT: f64 = 0.05;

impl Missed {
    /// Hot in held-out work ([`HOT_IN_HOLDOUT`] of its counts or more) and at most a tenth as
    /// hot in training: what PGO lays out as cold, where held-out work spends its time. The
    /// overlap's share can be high while such a function exists (most counts elsewhere).
    pub fn left_cold(&self) -> bool {
        self.test_share >= HOT_IN_HOLDOUT && self.cold_in_training()
    }

    /// At most a tenth as hot in training as in held-out work, however hot there.
    pub fn cold_in_training(&self) -> bool {
        self.base_share * 10.0 <= self.test_share
    }
}

/// `pgo-build profile show --json`: what a profile holds, hottest functions first. Fields in
/// alphabetical order, as the output has always had them.
#[derive(Debug, Clone, Serialize)]
pub struct ShownProfile {
    /// Per binary of the last training: functions run and instrumented.
    pub coverage: BTreeMap<String, ShownCoverage>,
    /// Each crate's share of all counts, largest first.
    pub crates: Vec<CrateShare>,
    /// Functions in the profile.
    pub functions: usize,
    pub hottest: Vec<HotFunction>,
    /// Shares of all counts in Rust and in C/C++ a build script compiled, when any was.
    pub languages: Option<LanguageShares>,
    /// Functions the start-up order covers, when the profile has temporal traces.
    pub ordered_functions: Option<usize>,
    pub profile: PathBuf,
    pub temporal_traces: super::records::Traces,
    pub total_count: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ShownCoverage {
    pub covered: Option<u64>,
    pub instrumented: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CrateShare {
    #[serde(rename = "crate")]
    pub krate: String,
    pub share: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct HotFunction {
    pub count: u64,
    #[serde(rename = "crate")]
    pub krate: String,
    pub name: String,
    /// Of all counts.
    pub share: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct LanguageShares {
    pub c: f64,
    pub rust: f64,
}
