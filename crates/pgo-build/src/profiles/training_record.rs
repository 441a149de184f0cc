//! The record of a workload's last training run, kept beside its raw profiles
//! (`profiles/raw/<workload>/training.json`).
//!
//! Raw profiles count only together with a record that says the run completed, against the
//! current instrumented build, with the workload defined as it is now, and with the files as
//! they were when it completed (sizes and SHA-256). So a run that failed or was interrupted, a
//! workload that was removed, changed or made a holdout, and files truncated, changed in
//! place, removed or added afterwards (by a process left running) are never merged.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::cargo::manifest::StageManifest;
use crate::config::Workload;
use crate::util::files::age;
use crate::util::files::{sha256_of, write_atomically};

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
    /// File name → SHA-256 of its content when the run completed, so a file changed in place
    /// (same size) is caught too. Empty in the records of older pgo-builds.
    #[serde(default)]
    pub sha256: BTreeMap<String, String>,
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
            sha256: BTreeMap::new(),
        }
        .save(dir)
    }

    /// Records how the run in `dir` ended; `usable` when its profiles may be merged.
    pub fn finish(dir: &Path, status: &str, usable: bool) -> Result<()> {
        let mut record = TrainingRecord::load(dir)
            .map_err(anyhow::Error::msg)?
            .with_context(|| format!("the training record in {} is gone", dir.display()))?;
        record.status = Some(status.to_owned());
        record.completed = usable;
        record.files = files_of(dir);
        record.sha256 = record
            .files
            .keys()
            .map(|file| Ok((file.clone(), sha256_of(&dir.join(file))?)))
            .collect::<Result<_>>()?;
        record.save(dir)
    }

    /// How the run in `dir` ended, by its own record (which outlives `report.json`): `None`
    /// when it has none or it cannot be read.
    pub fn status_in(dir: &Path) -> Option<String> {
        TrainingRecord::load(dir).ok().flatten()?.status
    }

    /// The record in `dir`; `None` when there is none, an error when it cannot be read.
    fn load(dir: &Path) -> Result<Option<TrainingRecord>, String> {
        let path = dir.join(FILE_NAME);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(format!("could not read {}: {err}", path.display())),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|err| format!("{} is corrupt ({err})", path.display()))
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
    let record = match TrainingRecord::load(dir) {
        Ok(Some(record)) => record,
        Ok(None) => return Err(format!("`{name}` has not been trained yet: {retrain}")),
        Err(problem) => {
            return Err(format!(
                "the training record of `{name}`: {problem}, so its profiles cannot be \
                 trusted: {retrain}"
            ));
        }
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
    if record.sha256.is_empty() && !record.files.is_empty() {
        return Err(format!(
            "the training record of `{name}` was written by an older pgo-build, without the \
             content hashes that show its raw profiles are as the run left them: {retrain}"
        ));
    }
    let changed: Vec<String> = record
        .sha256
        .iter()
        .filter(|(file, hash)| sha256_of(&dir.join(file)).ok().as_ref() != Some(*hash))
        .map(|(file, _)| dir.join(file).display().to_string())
        .collect();
    if !changed.is_empty() {
        return Err(format!(
            "the raw profiles of `{name}` changed in place after its training run completed \
             (same size, other content): {}: {retrain}",
            changed.join(", ")
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
