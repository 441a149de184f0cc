//! The record of a workload's last training run, kept beside its raw profiles
//! (`profiles/raw/<workload>/training.json`).
//!
//! Raw profiles count only together with a record that says the run completed, against the
//! current instrumented build, with the workload defined as it is now, and with the files as
//! they were when it completed. So a run that failed or was interrupted, a workload that was
//! removed, changed or made a holdout, and files truncated, removed or added afterwards (by a
//! process left running) are never merged.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::cargo_build::{StageManifest, age};
use crate::config::Workload;
use crate::files::write_atomically;

const FILE_NAME: &str = "training.json";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrainingRecord {
    pub workload: String,
    /// [`Workload::fingerprint`] when it ran.
    pub workload_fingerprint: String,
    /// The build ids of the instrumented binaries it ran against: a build that made the same
    /// binaries again keeps the profiles valid, any other does not.
    pub instrumented_build_ids: Vec<String>,
    /// Set only once the workload ended and its outcome was acceptable (success, or
    /// `allow_failure`).
    pub completed: bool,
    /// "exit status: 0", "timed out after 30s", … once it ended.
    pub status: Option<String>,
    /// File name → size of every file of the run when it completed.
    pub files: BTreeMap<String, u64>,
}

impl TrainingRecord {
    /// Records that `workload` starts a run into `dir` (emptied by the caller).
    pub fn start(dir: &Path, workload: &Workload, instrumented: &StageManifest) -> Result<()> {
        TrainingRecord {
            workload: workload.name().to_owned(),
            workload_fingerprint: workload.fingerprint(),
            instrumented_build_ids: build_ids(instrumented),
            completed: false,
            status: None,
            files: BTreeMap::new(),
        }
        .save(dir)
    }

    /// Records how the run in `dir` ended; `usable` when its profiles may be merged.
    pub fn finish(dir: &Path, status: &str, usable: bool) -> Result<()> {
        let mut record = TrainingRecord::load(dir)
            .with_context(|| format!("the training record in {} is gone", dir.display()))?;
        record.status = Some(status.to_owned());
        record.completed = usable;
        record.files = files_of(dir);
        record.save(dir)
    }

    fn load(dir: &Path) -> Option<TrainingRecord> {
        let text = std::fs::read_to_string(dir.join(FILE_NAME)).ok()?;
        serde_json::from_str(&text).ok()
    }

    fn save(&self, dir: &Path) -> Result<()> {
        write_atomically(
            &dir.join(FILE_NAME),
            serde_json::to_string_pretty(self)?.as_bytes(),
        )
    }
}

/// Whether the raw profiles in `dir` of `workload` may be merged into a profile for the
/// `instrumented` build; if not, why, and what to run.
pub fn check(dir: &Path, workload: &Workload, instrumented: &StageManifest) -> Result<(), String> {
    let name = workload.name();
    let retrain = format!("run `pgo-build train {name}`");
    let Some(record) = TrainingRecord::load(dir) else {
        return Err(format!("`{name}` has not been trained yet: {retrain}"));
    };
    if !record.completed {
        let how = match &record.status {
            Some(status) => format!("failed ({status})"),
            None => "was interrupted".to_owned(),
        };
        return Err(format!(
            "the last training run of `{name}` ({}) {how}, so none of its profiles are used: fix \
             it and {retrain}",
            age(&dir.join(FILE_NAME))
        ));
    }
    if record.instrumented_build_ids != build_ids(instrumented) {
        return Err(format!(
            "`{name}` was trained against an earlier instrumented build: {retrain}"
        ));
    }
    if record.workload_fingerprint != workload.fingerprint() {
        return Err(format!(
            "`{name}` changed in the configuration since it was trained (command, env, cwd, \
             timeout or allow_failure): {retrain}"
        ));
    }
    let now = files_of(dir);
    if now != record.files {
        let changed = record
            .files
            .iter()
            .filter(|(file, size)| now.get(*file) != Some(size))
            .count();
        let added = now
            .keys()
            .filter(|file| !record.files.contains_key(*file))
            .count();
        return Err(format!(
            "the raw profiles of `{name}` changed after its training run completed ({changed} \
             of {} files removed or resized, {added} added) in {}: {retrain}",
            record.files.len(),
            dir.display()
        ));
    }
    Ok(())
}

fn build_ids(instrumented: &StageManifest) -> Vec<String> {
    let mut ids: Vec<String> = instrumented
        .binaries
        .iter()
        .filter_map(|b| b.build_id.clone())
        .collect();
    ids.sort();
    ids
}

/// Every file of a run directory but the record, with its size.
fn files_of(dir: &Path) -> BTreeMap<String, u64> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.file_name() != FILE_NAME)
        .filter_map(|entry| {
            let size = entry.metadata().ok()?.len();
            Some((entry.file_name().to_string_lossy().into_owned(), size))
        })
        .collect()
}
