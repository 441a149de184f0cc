//! The record of training merged from other machines' bundles (`profiles/bundles.json`):
//! written by `merge`, read by `optimize` and `profile`, forgotten by a local `train`,
//! `instrument` or `unpack`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};

use super::context::Context;
use crate::cargo::manifest::StageManifest;
use crate::profiles::bundle::{BundleWorkload, Shard, Weights};
use crate::profiles::{BinaryProfiles, MergedProfile};

/// `profiles/bundles.json`: what `merge` made, read by `optimize`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MergedBundles {
    pub merged: MergedProfile,
    /// The instrumented build every bundle trained.
    pub instrumented: StageManifest,
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

#[derive(Debug, Clone, Serialize, Deserialize)]
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

/// The last `merge`'s record, when it is the current training.
pub(super) fn merged_bundles(cx: &Context) -> Result<Option<MergedBundles>> {
    let path = cx.layout.merged_bundles();
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(None);
    };
    let record: MergedBundles = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is unreadable; run `pgo-build merge` again",
            path.display()
        )
    })?;
    Ok(Some(record))
}
