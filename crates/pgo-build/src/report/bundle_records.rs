//! The record `report.json` keeps of training merged from other machines' bundles (`pgo-build
//! merge`): each shard's workloads, weight and per-binary accounting, and the totals. Data
//! only: `profiles::bundle` reads and writes bundles (and re-exports `Shard`, `Weights`,
//! `BundleWorkload` with their behaviour), and `profiles/bundles.json` keeps this record with
//! the instrumented build's stage manifest beside it (`pipeline/bundles.rs`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::profile_records::{BinaryProfiles, MergedProfile};

/// What `pgo-build merge` made of the bundles it was given.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MergedBundles {
    pub merged: MergedProfile,
    pub weights: Weights,
    pub bundles: Vec<MergedBundle>,
    /// Per binary, over all bundles; coverage is that of the merged profile.
    pub per_binary: BTreeMap<String, BinaryProfiles>,
    /// Shards of the split that no bundle brought.
    pub missing_shards: Vec<usize>,
    /// Cargo workload runs whose bench/test binaries' profiles are in the merge (they count
    /// for every binary).
    #[serde(default)]
    pub cargo_workloads: Vec<String>,
}

/// One bundle of a merge: where it came from and what it brought.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MergedBundle {
    pub file: PathBuf,
    pub shard: Shard,
    pub weight: u64,
    pub total_count: u64,
    pub git_revision: Option<String>,
    pub created: String,
    pub workloads: Vec<BundleWorkload>,
    pub accounting: BTreeMap<String, BinaryProfiles>,
}

/// One workload run of a shard.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BundleWorkload {
    /// `name`, or `name.part<I>of<K>` for a part of a workload with `shards = K`.
    pub run: String,
    pub workload: String,
    /// The workload's definition when it ran (`Workload::fingerprint`).
    pub fingerprint: String,
    pub status: String,
    pub duration_secs: f64,
}

/// `--shard I/N`: shard `index` (1-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

/// `merge --weights`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Weights {
    Counts,
    Equal,
}
