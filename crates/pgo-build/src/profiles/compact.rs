//! Raw profiles merged while a training workload runs, so that disk use does not grow with the
//! number of processes (a CLI run 200 times leaves 200 raw files, each as big as the binary's
//! counters) and the accounting afterwards checks a few files instead of hundreds.
//!
//! Invariants: only non-empty files of processes that have ended are merged (a running
//! process's file is still to be written; a 0-byte file is the trace of a process killed
//! before its exit handlers ran and stays for the accounting). A build id's merged files go
//! into `<build id>_merged.profdata`, and `merged.json` counts them with their pids and raw
//! format version, so the accounting still counts one file per process. A file llvm-profdata
//! cannot read is left as it is, for the accounting to reject with llvm-profdata's words. The
//! merge only adds counts (weight 1), so merging in batches gives the profile a single merge
//! of every file would.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::toolchain::LlvmTool;
use crate::util::command::Cmd;
use crate::util::files::{remove_file, rename, write, write_atomically};
use crate::util::printer::Printer;

/// The record of what was merged, beside the merged profiles.
pub const LEDGER: &str = "merged.json";
const MERGED_SUFFIX: &str = "_merged.profdata";
/// While a workload runs, files are merged once this many have piled up: one llvm-profdata
/// run per batch, and the disk holds at most about a batch of raw files per binary.
pub const BATCH: usize = 32;

/// What `merged.json` says of one build id's merged profile.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Merged {
    /// Raw files (one per process) merged into it.
    pub files: usize,
    /// Their bytes, as raw files.
    pub raw_bytes: u64,
    /// Their raw format version (the accounting tells other LLVMs' files apart by it).
    pub raw_version: Option<u64>,
    /// The processes whose files were merged: they wrote a profile.
    pub pids: BTreeSet<u32>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Ledger {
    pub by_build_id: BTreeMap<String, Merged>,
}

impl Ledger {
    /// The ledger in `dir`; empty when nothing was merged there.
    pub fn load(dir: &Path) -> Result<Ledger> {
        let path = dir.join(LEDGER);
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).with_context(|| {
                format!(
                    "{} is corrupt: it counts the processes whose profiles were merged while \
                     training ran; run the training again",
                    path.display()
                )
            }),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Ledger::default()),
            Err(err) => Err(err).with_context(|| format!("could not read {}", path.display())),
        }
    }

    fn save(&self, dir: &Path) -> Result<()> {
        write_atomically(
            &dir.join(LEDGER),
            serde_json::to_string_pretty(self)?.as_bytes(),
        )
    }
}

/// The build id of a merged profile, from its file name.
pub fn merged_build_id(path: &Path) -> Option<&str> {
    path.file_name()?.to_str()?.strip_suffix(MERGED_SUFFIX)
}

/// The pids of processes whose profile was merged in `dir`.
pub fn merged_pids(dir: &Path) -> BTreeSet<u32> {
    Ledger::load(dir)
        .map(|ledger| {
            ledger
                .by_build_id
                .into_values()
                .flat_map(|merged| merged.pids)
                .collect()
        })
        .unwrap_or_default()
}

/// What one [`compact`] merged.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Compacted {
    pub files: usize,
    pub raw_bytes: u64,
}

/// Runs `run` (a workload writing raw profiles into `dir`) while merging its processes' files
/// in batches as they end, then merges what is left. The workload's result comes back
/// whatever the merging did; a merge that could not run stops the merging and is the error.
pub fn while_running<T>(
    dir: &Path,
    profdata: &LlvmTool,
    printer: &Printer,
    run: impl FnOnce() -> T,
) -> (T, Result<Compacted>) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let finished = AtomicBool::new(false);
    let (result, during) = std::thread::scope(|scope| {
        let merging = scope.spawn(|| {
            let mut total = Compacted::default();
            while !finished.load(Ordering::Relaxed) {
                std::thread::sleep(std::time::Duration::from_millis(250));
                let batch = compact(dir, profdata, BATCH, printer)?;
                total.files += batch.files;
                total.raw_bytes += batch.raw_bytes;
            }
            Ok::<_, anyhow::Error>(total)
        });
        let result = run();
        finished.store(true, Ordering::Relaxed);
        let during = merging
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("merging raw profiles panicked")));
        (result, during)
    });
    let merged = during.and_then(|mut total| {
        let rest = compact(dir, profdata, 1, printer)?;
        total.files += rest.files;
        total.raw_bytes += rest.raw_bytes;
        Ok(total)
    });
    (result, merged)
}

/// A raw file that may be merged: `<build id>_<pid>.profraw`, not empty, its process ended.
struct Ready {
    path: PathBuf,
    pid: u32,
    size: u64,
    raw_version: Option<u64>,
}

/// Merges the finished raw profiles in `dir` into their build id's merged profile, for every
/// build id with at least `at_least` of them (1 once the workload has ended). Returns what it
/// merged; an llvm-profdata that cannot be run is an error, a file it cannot read is left.
pub fn compact(
    dir: &Path,
    profdata: &LlvmTool,
    at_least: usize,
    printer: &Printer,
) -> Result<Compacted> {
    let mut by_build_id: BTreeMap<String, Vec<Ready>> = BTreeMap::new();
    for entry in std::fs::read_dir(dir)
        .with_context(|| format!("could not list {}", dir.display()))?
        .flatten()
    {
        let path = entry.path();
        let Some((build_id, pid)) = raw_name(&path) else {
            continue;
        };
        let size = entry.metadata().map_or(0, |m| m.len());
        if size == 0 || process_may_run(pid) {
            continue;
        }
        by_build_id.entry(build_id).or_default().push(Ready {
            raw_version: super::format::read_raw_version(&path),
            path,
            pid,
            size,
        });
    }
    let mut done = Compacted::default();
    let mut ledger = None;
    for (build_id, files) in by_build_id {
        if files.len() < at_least.max(1) {
            continue;
        }
        let ledger = match &mut ledger {
            Some(ledger) => ledger,
            None => ledger.insert(Ledger::load(dir)?),
        };
        let merged = merge_batch(dir, &build_id, files, profdata, printer)?;
        if merged.is_empty() {
            continue;
        }
        let record = ledger.by_build_id.entry(build_id).or_default();
        for file in &merged {
            record.files += 1;
            record.raw_bytes += file.size;
            record.raw_version = record.raw_version.or(file.raw_version);
            record.pids.insert(file.pid);
            done.files += 1;
            done.raw_bytes += file.size;
        }
        // Recorded before the raw files go: an interruption in between leaves files counted
        // twice, in a run the training record then says did not complete (never merged).
        ledger.save(dir)?;
        for file in &merged {
            remove_file(&file.path)?;
        }
    }
    Ok(done)
}

/// Merges `files` into `<build id>_merged.profdata` (with what it already holds) and returns
/// the files merged: all of them, or when llvm-profdata refuses the batch, those it reads
/// one by one.
fn merge_batch(
    dir: &Path,
    build_id: &str,
    files: Vec<Ready>,
    profdata: &LlvmTool,
    printer: &Printer,
) -> Result<Vec<Ready>> {
    let target = dir.join(format!("{build_id}{MERGED_SUFFIX}"));
    let partial = dir.join(format!("{build_id}{MERGED_SUFFIX}.partial"));
    let list = dir.join(format!("{build_id}.merge-inputs"));
    let merge = |inputs: &[Ready]| -> Result<bool> {
        let mut lines: Vec<String> = inputs
            .iter()
            .map(|f| f.path.display().to_string())
            .collect();
        if target.is_file() {
            lines.push(target.display().to_string());
        }
        write(&list, lines.join("\n") + "\n")?;
        let output = Cmd::new(&profdata.path)
            .args(["merge", "-o"])
            .arg(&partial)
            .arg(format!("--input-files={}", list.display()))
            .output(printer)?;
        let _ = std::fs::remove_file(&list);
        Ok(output.status.success())
    };
    if merge(&files)? {
        rename(&partial, &target)?;
        return Ok(files);
    }
    // One unreadable file fails the batch: keep the others, leave it for the accounting.
    let readable: Vec<Ready> = files
        .into_iter()
        .filter(|file| {
            Cmd::new(&profdata.path)
                .args(["merge", "-o"])
                .arg(&partial)
                .arg(&file.path)
                .output(printer)
                .is_ok_and(|output| output.status.success())
        })
        .collect();
    if readable.is_empty() || !merge(&readable)? {
        let _ = std::fs::remove_file(&partial);
        return Ok(Vec::new());
    }
    rename(&partial, &target)?;
    Ok(readable)
}

/// `<build id>_<pid>.profraw` → (build id, pid).
fn raw_name(path: &Path) -> Option<(String, u32)> {
    let stem = path.file_name()?.to_str()?.strip_suffix(".profraw")?;
    let (build_id, pid) = stem.rsplit_once('_')?;
    Some((build_id.to_owned(), pid.parse().ok()?))
}

/// Whether process `pid` may still be running (and writing its file). Without `/proc` no
/// process can be shown to have ended, so nothing is merged while a workload runs.
fn process_may_run(pid: u32) -> bool {
    !Path::new("/proc/self").exists() || Path::new(&format!("/proc/{pid}")).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_names_give_build_id_and_pid() {
        assert_eq!(
            raw_name(Path::new("/x/ab12_345.profraw")),
            Some(("ab12".to_owned(), 345))
        );
        assert_eq!(raw_name(Path::new("/x/ab12_merged.profdata")), None);
        assert_eq!(raw_name(Path::new("/x/345.start")), None);
        assert_eq!(
            merged_build_id(Path::new("/x/ab12_merged.profdata")),
            Some("ab12")
        );
    }

    #[test]
    fn a_running_process_is_never_taken_for_ended() {
        assert!(process_may_run(std::process::id()));
    }

    proptest::proptest! {
        #![proptest_config(crate::util::fuzz::config())]

        /// The records training leaves beside its raw profiles (`merged.json`, the ledger of
        /// profiles merged while it ran, and `training.json`), garbled: read or named
        /// corrupt; never a panic or a hang.
        #[test]
        fn any_training_records_are_read_or_named(
            merged in crate::util::fuzz::seed_mutants("merged.json"),
            training in crate::util::fuzz::seed_mutants("training.json"),
        ) {
            crate::util::fuzz::no_panic_or_hang(move || {
                let dir = tempfile::tempdir().unwrap();
                std::fs::write(dir.path().join(LEDGER), &merged).unwrap();
                std::fs::write(dir.path().join("training.json"), &training).unwrap();
                (
                    Ledger::load(dir.path()).map(|l| l.by_build_id.len()).ok(),
                    crate::profiles::training_record::TrainingRecord::status_in(dir.path()),
                )
            });
        }
    }
}
