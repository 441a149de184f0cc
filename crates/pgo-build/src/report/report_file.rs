//! `report.json`: the [`Report`], loaded and saved, and the records the steps write into it
//! (each step's record replaces its previous one; `run` starts a fresh report). The JSON is
//! versioned (`schema_version`) because CI scripts read it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::bundle_records::MergedBundles;
use super::profile_records::{
    BinaryProfiles, DiagnosticsSummary, MergedProfile, OverlapRecord, Staleness,
};
use super::records::{
    BinaryRecord, BoltRecord, CCompilerRecord, CompareResult, CompareRun, ExploreResult,
    LinkSummary, OrderRecord, RejectedProfile, RustcSummary, StageCache, StepRecord, StepResult,
    WorkloadRecord, now_unix,
};
use crate::layout::Stage;
use crate::layout::step::Step;
use crate::util::files::write_atomically;

/// 2: verdicts faster | slower | no_difference | inconclusive, Wilcoxon and bounds (see the
/// schema's description). 3: bundles, sccache, per-benchmark comparisons. 4: explore. 11:
/// `bundles` without the instrumented build's manifest; every section typed. 12: intervals
/// of the paired test inverted, `compare.between`, `margin`, `not_counted`, `left_open_by`.
/// 13: explore's per-variant `steps` (each a `step`), `stages` before.
pub const SCHEMA_VERSION: u32 = 13;

/// What each schema changed, newest first: the schema's description of `schema_version`.
pub const SCHEMA_HISTORY: &str = concat!(
    "13: an explore variant's costs are its steps (each named by its step, as steps are), ",
    "stages and stage before; pgo-build reads a report of schema 8 to 12 as 13. ",
    "12: stages renamed steps, each named by its step; verdict intervals (ci_low, ci_high, ",
    "family_ci) are the paired test inverted rather than a bootstrap of the median; ",
    "compare gained between (bolt against optimized from the same rounds, in the family), ",
    "margin and not_counted, and paired summaries left_open_by (instruction counts that ",
    "decided what the deciding figure left open); pgo-build reads a report of schema 8 to ",
    "11 as 12 (margin: 2%). ",
    "11: bundles no longer repeats the stage manifest of the instrumented build the ",
    "bundles trained (instrumented: profiles/bundles.json keeps it), and the profile ",
    "sections (profiles, merged_profile, optimize_diagnostics, overlap, staleness, ",
    "bundles) written in an older shape are dropped when read, the rest of the report ",
    "kept; pgo-build reads a report of schema 8 to 10 as 11. ",
    "10: a compare's verdicts judged as one family (family: the rule, its level, how many ",
    "verdicts; every paired summary's family_level), a too_coarse verdict for metrics ",
    "whose values come in steps larger than the margin, and previous (each candidate ",
    "against the last release, compare --against) added; pgo-build reads a report of ",
    "schema 8 or 9 as 10. ",
    "9: rustc_memory's build_secs and lower_bound (what the dependency graph and the cores ",
    "allowed) added; pgo-build reads a report of schema 8 as 9. ",
    "8: compare_history (every comparison with when and how it ran, failed ones too) and ",
    "earlier_compares (the last good comparison of each other set of variants) added; a ",
    "failed stage no longer replaces the stage's last good record in stages (both are ",
    "kept; the good one counts in the total); explore variants' rounds (the race) and ",
    "their speeds' decided_by (instruction counts where wall time could not decide) added. ",
    "7: workload metrics (compare runs' and candidates' metrics, compare.decided_by, ",
    "explore.decided_by) and training services added. ",
    "6: startup_order, binaries' compressed_bytes, page faults in compare runs and ",
    "summaries (metric faults) added. ",
    "5: target and compare.emulated added. ",
    "4: explore added. ",
    "3: bundles and sccache added. ",
    "2: paired summaries gained confidence, wilcoxon_p, bound, more_rounds and resolves, ",
    "and verdict became faster | slower | no_difference | inconclusive | too_few_rounds (1 ",
    "had no_detectable_difference)",
);

/// The oldest schema read as the current one: the schemas since only added fields, each with
/// a default (9: the rustc summaries' `build_secs` and `lower_bound`; 10: the family of
/// verdicts, `previous`, `too_coarse`) or dropped one (11: `bundles.instrumented`, which
/// is ignored), so an older report keeps its history instead of being replaced.
const READS_SCHEMAS_FROM: u32 = 8;

/// How many comparisons the report's history keeps.
pub const COMPARE_HISTORY: usize = 50;

#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Report {
    pub schema_version: u32,
    pub pgo_build_version: String,
    /// The workspace root.
    pub workspace: PathBuf,
    /// The target triple given with `--target` (or `[build] targets`); absent for the host's
    /// own build in `target/pgo-build/`.
    #[serde(default)]
    pub target: Option<String>,
    /// The first line of `rustc -vV`.
    pub rustc: Option<String>,
    /// The llvm-profdata used: its path and LLVM version.
    pub llvm_profdata: Option<String>,
    /// Every step that ran, in order (`stages` before schema 12).
    #[serde(alias = "stages")]
    pub steps: Vec<StepRecord>,
    /// Binary → stage → figures.
    pub binaries: BTreeMap<String, BTreeMap<Stage, BinaryRecord>>,
    pub training: Vec<WorkloadRecord>,
    /// Per-binary profile accounting from the last training run.
    #[serde(default, deserialize_with = "typed_or_dropped")]
    pub profiles: BTreeMap<String, BinaryProfiles>,
    pub rejected_profiles: Vec<RejectedProfile>,
    /// The profile the optimized build used.
    #[serde(default, deserialize_with = "typed_or_dropped")]
    pub merged_profile: Option<MergedProfile>,
    /// Per-crate functions without data or with mismatched data in the optimized build.
    #[serde(default, deserialize_with = "typed_or_dropped")]
    pub optimize_diagnostics: Option<DiagnosticsSummary>,
    /// Stage → the links of its last build: slots, count, peak RSS, time waiting for a slot.
    #[serde(default)]
    pub links: BTreeMap<Stage, LinkSummary>,
    /// Per binary: what BOLT did (or why it did not).
    #[serde(default)]
    pub bolt: BTreeMap<String, BoltRecord>,
    /// Per binary: how well the training profile represents the holdout workloads.
    #[serde(default, deserialize_with = "typed_or_dropped")]
    pub overlap: BTreeMap<String, OverlapRecord>,
    /// Staleness of a committed profile against the current sources.
    #[serde(default, deserialize_with = "typed_or_dropped")]
    pub staleness: Option<Staleness>,
    /// The last good A/B comparison, with every round.
    pub compare: Option<CompareResult>,
    /// The last good comparison of each other set of variants than `compare`'s.
    #[serde(default)]
    pub earlier_compares: Vec<CompareResult>,
    /// Every `compare` as it ran, good or failed, oldest first (the last
    /// [`COMPARE_HISTORY`]).
    #[serde(default)]
    pub compare_history: Vec<CompareRun>,
    /// The training bundles `pgo-build merge` merged: each shard's workloads, weight and
    /// per-binary accounting, and the totals.
    #[serde(default, deserialize_with = "typed_or_dropped")]
    pub bundles: Option<MergedBundles>,
    /// Stage → what sccache (cargo's rustc wrapper, when it is sccache) did in its last build.
    #[serde(default)]
    pub sccache: BTreeMap<Stage, StageCache>,
    /// Stage → what its build's rustc did against the memory budget (rustc_wrapper.rs).
    #[serde(default)]
    pub rustc_memory: BTreeMap<Stage, RustcSummary>,
    /// Stage → the C compiler its build scripts used when pgo-build chose it (cross-language
    /// PGO, explore's clang variants); absent: the user's own.
    #[serde(default)]
    pub c_compilers: BTreeMap<Stage, CCompilerRecord>,
    /// The last `pgo-build explore`: variants, their costs and speeds, the recommendation.
    #[serde(default)]
    pub explore: Option<ExploreResult>,
    /// The optimized link's start-up order (`[pgo] startup_order`), when one was used.
    #[serde(default)]
    pub startup_order: Option<OrderRecord>,
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
    /// The report at `path`: `Ok(None)` when there is none, and what is wrong with it when it
    /// cannot be read (corrupt, or of another schema version).
    pub fn load(path: &Path) -> Result<Option<Report>, String> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(format!("could not read {}: {err}", path.display())),
        };
        let corrupt = |err: serde_json::Error| format!("{} is corrupt ({err})", path.display());
        let value: serde_json::Value = serde_json::from_str(&text).map_err(corrupt)?;
        match value
            .get("schema_version")
            .and_then(serde_json::Value::as_u64)
        {
            Some(version)
                if (u64::from(READS_SCHEMAS_FROM)..=u64::from(SCHEMA_VERSION))
                    .contains(&version) => {}
            version => {
                return Err(format!(
                    "{} has report schema {}, and this pgo-build writes schema {SCHEMA_VERSION}",
                    path.display(),
                    version.map_or("(none)".to_owned(), |v| v.to_string())
                ));
            }
        }
        let report: Report = serde_json::from_value(value).map_err(corrupt)?;
        Ok(Some(Report {
            schema_version: SCHEMA_VERSION,
            ..report
        }))
    }

    /// The report at `path`, or a new one; with what was wrong with an unreadable one, which
    /// the new report replaces.
    pub fn load_or_new(path: &Path, workspace: &Path) -> (Report, Option<String>) {
        match Report::load(path) {
            Ok(Some(report)) => (report, None),
            Ok(None) => (Report::new(workspace), None),
            Err(problem) => (Report::new(workspace), Some(problem)),
        }
    }

    pub fn save(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self).context("could not serialise the report")?;
        write_atomically(path, text.as_bytes())
    }

    pub fn record_step(
        &mut self,
        name: Step,
        result: StepResult,
        duration: Duration,
        peak_memory_bytes: Option<u64>,
    ) {
        // A failed attempt does not erase the step's last good run: both are shown, and
        // only the good one counts in the pipeline's total.
        let keeps_good = result == StepResult::Failed;
        self.steps
            .retain(|step| step.name != name || (keeps_good && step.result != StepResult::Failed));
        self.steps.push(StepRecord {
            name,
            result,
            duration_secs: duration.as_secs_f64(),
            peak_memory_bytes,
            ran_at_unix: Some(now_unix()),
            standalone: false,
        });
    }

    /// Marks the stage's latest record as run by its own command, outside the pipeline.
    pub fn mark_standalone(&mut self, name: Step) {
        if let Some(step) = self.steps.iter_mut().rev().find(|s| s.name == name) {
            step.standalone = true;
        }
    }

    /// The latest comparison's entry in the history failed after it measured (a gate that
    /// refused the binaries): said there, so no report lists it as ok.
    pub fn fail_last_compare_run(&mut self, why: &str) {
        if let Some(last) = self.compare_history.last_mut() {
            last.result = format!("failed: {}", why.lines().next().unwrap_or_default());
        }
    }

    /// Records a stage that was reused: with the duration, peak memory and time of the run
    /// that did its work (`earlier`), when known.
    pub fn record_cached_step(&mut self, name: Step, earlier: Option<&StepRecord>) {
        self.steps.retain(|step| step.name != name);
        self.steps.push(StepRecord {
            name,
            result: StepResult::Cached,
            duration_secs: earlier.map_or(0.0, |e| e.duration_secs),
            peak_memory_bytes: earlier.and_then(|e| e.peak_memory_bytes),
            ran_at_unix: earlier.and_then(|e| e.ran_at_unix),
            standalone: false,
        });
    }

    /// Drops what a stage wrote into the report, when it starts again: a stage that then
    /// fails or is interrupted leaves no section of an earlier run behind.
    pub fn forget_outputs_of(&mut self, step: Step) {
        match step {
            Step::Train | Step::Merge => {
                self.profiles.clear();
                self.rejected_profiles.clear();
                self.bundles = None;
                // Measured against the training replaced now.
                self.overlap.clear();
            }
            Step::Optimize => {
                self.merged_profile = None;
                self.optimize_diagnostics = None;
                self.staleness = None;
                self.startup_order = None;
            }
            Step::Bolt => self.bolt.clear(),
            Step::Overlap => self.overlap.clear(),
            // "compare" keeps its last good result: a new one replaces it (`record_compare`),
            // a failed one goes into the history only.
            _ => {}
        }
    }

    /// Records a comparison that ran: in the history, and as the latest good one (the one it
    /// replaces moves to `earlier_compares` when it compared another set of variants).
    pub fn record_compare(&mut self, result: &CompareResult, command: String) {
        self.record_compare_run(CompareRun::of(result, command, now_unix()));
        let variants = result.variants();
        self.earlier_compares.retain(|c| c.variants() != variants);
        if let Some(last) = self.compare.replace(result.clone())
            && last.variants() != variants
        {
            self.earlier_compares.push(last);
        }
    }

    /// Records a comparison in the history only (a failed one: the last good one stays).
    pub fn record_compare_run(&mut self, run: CompareRun) {
        self.compare_history.push(run);
        let excess = self.compare_history.len().saturating_sub(COMPARE_HISTORY);
        self.compare_history.drain(..excess);
    }

    /// The step's record: its last good run when it has one.
    pub fn step_record(&self, name: Step) -> Option<&StepRecord> {
        let mut records = self.steps.iter().filter(|step| step.name == name);
        let first = records.next()?;
        Some(
            std::iter::once(first)
                .chain(records)
                .find(|step| step.result != StepResult::Failed)
                .unwrap_or(first),
        )
    }
}

/// A section that records the last step for the reader (profiles, staleness, overlap): one
/// written in an older shape (schema 10 wrote staleness per crate as pairs) is dropped, not
/// read as a corrupt report, which would start a fresh one and lose the comparisons' history.
fn typed_or_dropped<'de, D, T>(deserializer: D) -> std::result::Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned + Default,
{
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(serde_json::from_value(value).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_table_shows_shares_and_total() {
        let mut report = Report::new(Path::new("/ws"));
        report.record_step(Step::Build, StepResult::Ok, Duration::from_secs(30), None);
        report.record_step(
            Step::Train,
            StepResult::Ok,
            Duration::from_secs(10),
            Some(1 << 20),
        );
        report.record_step(Step::Build, StepResult::Ok, Duration::from_secs(30), None);
        let table = report.step_table();
        assert_eq!(report.steps.len(), 2, "a re-run stage replaces its record");
        assert!(table.contains("75.0%"), "{table}");
        assert!(table.contains("25.0%"), "{table}");
        assert!(table.contains("40.00s"), "{table}");
    }

    #[test]
    fn the_total_counts_one_pipeline_run_not_other_commands_or_failed_retries() {
        let mut report = Report::new(Path::new("/ws"));
        report.record_step(Step::Build, StepResult::Ok, Duration::from_secs(30), None);
        report.record_step(Step::Train, StepResult::Ok, Duration::from_secs(10), None);
        report.record_step(Step::Compare, StepResult::Ok, Duration::from_secs(60), None);
        report.record_step(Step::Pack, StepResult::Ok, Duration::from_secs(5), None);
        report.record_step(
            Step::Compare,
            StepResult::Failed,
            Duration::from_secs(1112),
            None,
        );
        let table = report.step_table();
        assert!(table.contains("100.00s"), "{table}");
        assert!(
            table.contains("1112.00s"),
            "the failed retry is shown: {table}"
        );
        assert!(table.contains("not in the total"), "{table}");
        assert_eq!(
            report.step_record(Step::Compare).unwrap().result,
            StepResult::Ok
        );
        // A good run replaces both.
        report.record_step(Step::Compare, StepResult::Ok, Duration::from_secs(50), None);
        assert_eq!(
            report
                .steps
                .iter()
                .filter(|s| s.name == Step::Compare)
                .count(),
            1
        );
        // A pipeline that failed at a stage with no good run: the failure is part of it.
        report.record_step(
            Step::Optimize,
            StepResult::Failed,
            Duration::from_secs(20),
            None,
        );
        assert!(
            report.step_table().contains("110.00s"),
            "{}",
            report.step_table()
        );
    }

    #[test]
    fn binaries_of_a_stage_whose_last_build_failed_are_said_to_be_an_earlier_builds() {
        let mut report = Report::new(Path::new("/ws"));
        for stage in [Stage::Baseline, Stage::Optimized] {
            report.binaries.entry("app".into()).or_default().insert(
                stage,
                BinaryRecord {
                    size_bytes: 3 << 20,
                    loaded_bytes: Some(2 << 20),
                    compressed_bytes: None,
                    path: "/ws/app".into(),
                    pgo: stage == Stage::Optimized,
                    bolted: false,
                },
            );
        }
        report.record_step(Step::Build, StepResult::Ok, Duration::from_secs(3), None);
        report.record_step(Step::Optimize, StepResult::Ok, Duration::from_secs(3), None);
        assert!(!report.size_table().contains("earlier build"));
        report.record_step(
            Step::Optimize,
            StepResult::Failed,
            Duration::from_secs(3),
            None,
        );
        let table = report.size_table();
        assert!(
            table.contains("2.0 MiB (file 3.0 MiB) (an earlier build: this one failed)"),
            "{table}"
        );
        assert_eq!(table.matches("earlier build").count(), 1, "{table}");
        // BOLT binaries built from an optimized build before it: an earlier build's too.
        report.binaries.get_mut("app").unwrap().insert(
            Stage::Bolt,
            BinaryRecord {
                size_bytes: 4 << 20,
                loaded_bytes: Some(3 << 20),
                compressed_bytes: None,
                path: "/ws/app".into(),
                pgo: true,
                bolted: true,
            },
        );
        report.record_step(Step::Bolt, StepResult::Ok, Duration::from_secs(3), None);
        report.steps.last_mut().unwrap().ran_at_unix = Some(1);
        let table = report.size_table();
        assert!(table.contains("optimize failed)"), "{table}");
        assert_eq!(table.matches("earlier").count(), 2, "{table}");
        // Built again after that, they are this build's.
        report.record_step(Step::Bolt, StepResult::Ok, Duration::from_secs(3), None);
        report.steps.last_mut().unwrap().ran_at_unix = Some(u64::MAX);
        assert!(!report.size_table().contains("optimize failed"));
    }

    #[test]
    fn a_stage_that_starts_again_drops_its_old_sections() {
        let mut report = Report::new(Path::new("/ws"));
        report.merged_profile = Some(crate::report::MergedProfile {
            path: "old".into(),
            size_bytes: 1,
            total_functions: 1,
        });
        report.overlap.insert(
            "app".into(),
            crate::report::OverlapRecord {
                edge_overlap: 0.9,
                min_overlap: None,
                missed_by_training: Vec::new(),
            },
        );
        report.forget_outputs_of(Step::Optimize);
        assert!(report.merged_profile.is_none());
        assert!(!report.overlap.is_empty(), "other stages' sections stay");
        let measured = report.overlap.clone();
        report.forget_outputs_of(Step::Overlap);
        assert!(report.overlap.is_empty());
        // Training again makes the overlap measured against the old training stale.
        report.overlap = measured;
        report.forget_outputs_of(Step::Train);
        assert!(report.overlap.is_empty());
    }

    #[test]
    fn report_round_trips_and_other_schemas_start_fresh() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        let mut report = Report::new(Path::new("/ws"));
        report.record_step(
            Step::Build,
            StepResult::Ok,
            Duration::from_millis(1500),
            None,
        );
        report.save(&path).unwrap();
        let (loaded, problem) = Report::load_or_new(&path, Path::new("/ws"));
        assert_eq!(loaded.steps[0].duration_secs, 1.5);
        assert_eq!(problem, None);
        // A report of the last schema that only lacked fields is kept, as the current one.
        let mut older: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        older["schema_version"] = READS_SCHEMAS_FROM.into();
        std::fs::write(&path, older.to_string()).unwrap();
        let (kept, problem) = Report::load_or_new(&path, Path::new("/ws"));
        assert_eq!((kept.steps.len(), problem), (1, None));
        assert_eq!(kept.schema_version, SCHEMA_VERSION);
        older["schema_version"] = (READS_SCHEMAS_FROM - 1).into();
        std::fs::write(&path, older.to_string()).unwrap();
        let (fresh, problem) = Report::load_or_new(&path, Path::new("/ws"));
        assert!(fresh.steps.is_empty());
        assert!(problem.unwrap().contains("has report schema 7"));
        std::fs::write(&path, r#"{"schema_version": 999}"#).unwrap();
        let (fresh, problem) = Report::load_or_new(&path, Path::new("/ws"));
        assert!(fresh.steps.is_empty());
        assert!(problem.unwrap().contains("has report schema 999"));
        // Garbled: called corrupt, with its path.
        std::fs::write(&path, "{ garbled").unwrap();
        let (fresh, problem) = Report::load_or_new(&path, Path::new("/ws"));
        assert!(fresh.steps.is_empty());
        let problem = problem.unwrap();
        assert!(problem.contains("report.json is corrupt"), "{problem}");
        assert!(matches!(
            Report::load(&dir.path().join("none.json")),
            Ok(None)
        ));
    }

    #[test]
    fn a_section_in_an_older_shape_is_dropped_and_the_history_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        let mut report = Report::new(Path::new("/ws"));
        report.record_step(
            Step::Build,
            StepResult::Ok,
            Duration::from_millis(1500),
            None,
        );
        report.save(&path).unwrap();
        let mut older: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        // Schema 10 before the staleness table: per crate [stale, total], names only.
        older["schema_version"] = 10.into();
        older["staleness"] = serde_json::json!({
            "profile_functions": 3, "profile_counts": 10, "stale_functions": 1, "share": 0.1,
            "per_crate": {"app": [1, 3]}, "changed": ["app::f"]
        });
        older["overlap"] = serde_json::json!({"app": 0.9});
        std::fs::write(&path, older.to_string()).unwrap();
        let (kept, problem) = Report::load_or_new(&path, Path::new("/ws"));
        assert_eq!(problem, None);
        assert_eq!(kept.steps.len(), 1, "the report was started afresh");
        assert!(kept.staleness.is_none() && kept.overlap.is_empty());
    }

    #[test]
    fn merged_bundles_of_schema_10_are_read_without_the_manifest_they_repeated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        Report::new(Path::new("/ws")).save(&path).unwrap();
        let mut older: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        older["schema_version"] = 10.into();
        older["bundles"] = serde_json::json!({
            "merged": {"path": "/t/merged.profdata", "size_bytes": 10, "total_functions": 3},
            "instrumented": {"stage": "instrumented", "binaries": []},
            "weights": "counts",
            "bundles": [{
                "file": "a.tar.zst", "shard": {"index": 1, "count": 2}, "weight": 5,
                "total_count": 5, "git_revision": null, "created": "2026-12-04",
                "workloads": [], "accounting": {}
            }],
            "per_binary": {}, "missing_shards": [2]
        });
        std::fs::write(&path, older.to_string()).unwrap();
        let (kept, problem) = Report::load_or_new(&path, Path::new("/ws"));
        assert_eq!(problem, None);
        let bundles = kept.bundles.expect("the merge is kept");
        assert_eq!(
            bundles.bundles[0].shard,
            crate::report::Shard { index: 1, count: 2 }
        );
        assert_eq!(bundles.missing_shards, [2]);
        let written = serde_json::to_value(&bundles).unwrap();
        assert!(written.get("instrumented").is_none(), "{written}");
    }

    proptest::proptest! {
        #![proptest_config(crate::util::fuzz::config())]

        /// Any report.json (the one a real run wrote, garbled): read, or a new report and
        /// what was wrong; never a panic or a hang. A report read is also drawn.
        #[test]
        fn any_report_loads_or_is_named_without_a_panic_or_hang(
            bytes in crate::util::fuzz::seed_mutants("report.json")
        ) {
            crate::util::fuzz::no_panic_or_hang(move || {
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("report.json");
                std::fs::write(&path, &bytes).unwrap();
                let (report, _) = Report::load_or_new(&path, Path::new("/ws"));
                serde_json::to_string(&report).map(|text| text.len()).unwrap_or(0)
            });
        }
    }
}
