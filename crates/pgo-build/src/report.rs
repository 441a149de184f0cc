//! `target/pgo-build/report.json` and the stage table.
//!
//! Each command updates the report of the last run in place (a stage's record replaces the
//! previous record of that stage); `run` starts a fresh one. The JSON is versioned
//! (`schema_version`) because CI scripts read it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use comfy_table::{Cell, CellAlignment, Table, presets::UTF8_FULL_CONDENSED};
use serde::{Deserialize, Serialize};

use crate::cargo_build::write_atomically;

pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Report {
    pub schema_version: u32,
    pub pgo_build_version: String,
    pub workspace: PathBuf,
    pub rustc: Option<String>,
    pub llvm_profdata: Option<String>,
    pub stages: Vec<StageRecord>,
    /// Binary → stage → figures.
    pub binaries: BTreeMap<String, BTreeMap<String, BinaryRecord>>,
    pub training: Vec<WorkloadRecord>,
    /// Per-binary profile accounting from the last training run.
    pub profiles: BTreeMap<String, serde_json::Value>,
    pub rejected_profiles: Vec<RejectedProfile>,
    pub merged_profile: Option<serde_json::Value>,
    /// Per-crate functions without data or with mismatched data in the optimized build.
    pub optimize_diagnostics: Option<serde_json::Value>,
    /// Stage → the links of its last build: slots, count, peak RSS, time waiting for a slot.
    #[serde(default)]
    pub links: BTreeMap<String, crate::linker::LinkSummary>,
    /// Per binary: what BOLT did (or why it did not).
    #[serde(default)]
    pub bolt: BTreeMap<String, crate::bolt::BoltRecord>,
    /// Per binary: how well the training profile represents the holdout workloads.
    #[serde(default)]
    pub overlap: BTreeMap<String, serde_json::Value>,
    /// Staleness of a committed profile against the current sources.
    #[serde(default)]
    pub staleness: Option<serde_json::Value>,
    /// The last A/B comparison, with every round.
    pub compare: Option<crate::compare::CompareResult>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StageRecord {
    pub name: String,
    /// ok | failed | cached
    pub result: String,
    pub duration_secs: f64,
    /// Peak resident memory of pgo-build's whole process tree during the stage.
    #[serde(default)]
    pub peak_memory_bytes: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BinaryRecord {
    pub size_bytes: u64,
    pub path: PathBuf,
    pub pgo: bool,
    #[serde(default)]
    pub bolted: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkloadRecord {
    pub name: String,
    pub stage: String,
    pub status: String,
    pub success: bool,
    pub duration_secs: f64,
    pub log: PathBuf,
    /// Processes pgo-build had to stop (timeout, or left running), and with which signal.
    pub stopped: Vec<crate::training::StoppedProcess>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RejectedProfile {
    pub path: PathBuf,
    pub binary: Option<String>,
    pub reason: String,
}

impl Report {
    pub fn new(workspace: &Path) -> Report {
        Report {
            schema_version: SCHEMA_VERSION,
            pgo_build_version: env!("CARGO_PKG_VERSION").to_owned(),
            workspace: workspace.to_owned(),
            ..Report::default()
        }
    }

    /// The last run's report, or a new one when there is none (or it has another schema).
    pub fn load_or_new(path: &Path, workspace: &Path) -> Report {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|text| serde_json::from_str::<Report>(&text).ok())
            .filter(|report| report.schema_version == SCHEMA_VERSION)
            .unwrap_or_else(|| Report::new(workspace))
    }

    pub fn save(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self).context("could not serialise the report")?;
        write_atomically(path, text.as_bytes())
    }

    pub fn record_stage(
        &mut self,
        name: &str,
        result: &str,
        duration: Duration,
        peak_memory_bytes: Option<u64>,
    ) {
        self.stages.retain(|stage| stage.name != name);
        self.stages.push(StageRecord {
            name: name.to_owned(),
            result: result.to_owned(),
            duration_secs: duration.as_secs_f64(),
            peak_memory_bytes,
        });
    }

    /// The stage table: duration and share of the total, like rustc's release pipeline prints.
    pub fn stage_table(&self) -> String {
        let total: f64 = self.stages.iter().map(|s| s.duration_secs).sum();
        let mut table = Table::new();
        table.load_preset(UTF8_FULL_CONDENSED).set_header([
            "Stage",
            "Result",
            "Duration",
            "Share",
            "Peak memory",
        ]);
        for stage in &self.stages {
            let share = if total > 0.0 {
                100.0 * stage.duration_secs / total
            } else {
                0.0
            };
            table.add_row([
                Cell::new(&stage.name),
                Cell::new(&stage.result),
                Cell::new(format!("{:.2}s", stage.duration_secs))
                    .set_alignment(CellAlignment::Right),
                Cell::new(format!("{share:.1}%")).set_alignment(CellAlignment::Right),
                Cell::new(stage.peak_memory_bytes.map_or("-".to_owned(), human_bytes))
                    .set_alignment(CellAlignment::Right),
            ]);
        }
        table.add_row([
            Cell::new("total"),
            Cell::new(""),
            Cell::new(format!("{total:.2}s")).set_alignment(CellAlignment::Right),
            Cell::new("100.0%").set_alignment(CellAlignment::Right),
            Cell::new(""),
        ]);
        table.to_string()
    }

    /// Binary sizes per stage.
    pub fn size_table(&self) -> String {
        let stages = ["baseline", "instrumented", "optimized", "bolt"];
        let mut table = Table::new();
        table.load_preset(UTF8_FULL_CONDENSED);
        table.set_header(std::iter::once("Binary").chain(stages));
        for (binary, per_stage) in &self.binaries {
            let mut row = vec![Cell::new(binary)];
            for stage in stages {
                let text = match per_stage.get(stage) {
                    Some(record) if stage == "optimized" && !record.pgo => {
                        format!("{} (no PGO)", human_bytes(record.size_bytes))
                    }
                    Some(record) if stage == "bolt" && !record.bolted => {
                        format!("{} (not BOLTed)", human_bytes(record.size_bytes))
                    }
                    Some(record) => human_bytes(record.size_bytes),
                    None => "-".to_owned(),
                };
                row.push(Cell::new(text).set_alignment(CellAlignment::Right));
            }
            table.add_row(row);
        }
        table.to_string()
    }
}

pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_table_shows_shares_and_total() {
        let mut report = Report::new(Path::new("/ws"));
        report.record_stage("build", "ok", Duration::from_secs(30), None);
        report.record_stage("train", "ok", Duration::from_secs(10), Some(1 << 20));
        report.record_stage("build", "ok", Duration::from_secs(30), None);
        let table = report.stage_table();
        assert_eq!(report.stages.len(), 2, "a re-run stage replaces its record");
        assert!(table.contains("75.0%"), "{table}");
        assert!(table.contains("25.0%"), "{table}");
        assert!(table.contains("40.00s"), "{table}");
    }

    #[test]
    fn report_round_trips_and_other_schemas_start_fresh() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        let mut report = Report::new(Path::new("/ws"));
        report.record_stage("build", "ok", Duration::from_millis(1500), None);
        report.save(&path).unwrap();
        let loaded = Report::load_or_new(&path, Path::new("/ws"));
        assert_eq!(loaded.stages[0].duration_secs, 1.5);
        std::fs::write(&path, r#"{"schema_version": 999}"#).unwrap();
        assert!(
            Report::load_or_new(&path, Path::new("/ws"))
                .stages
                .is_empty()
        );
    }

    #[test]
    fn sizes_are_human_readable() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(5 * 1024 * 1024), "5.0 MiB");
    }
}
