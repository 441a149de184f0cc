//! The records `report.json` holds: plain, serialisable data that steps produce and
//! `render` and the tables read. Nothing here imports a step's code (the closed sets it
//! names, `Step` and `Stage`, come from `layout`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::config::{Role, StartupOrder};
use crate::layout::Stage;
use crate::layout::step::Step;
use crate::measure::metric::{Decider, Metric};
use crate::measure::reported_metrics::Direction;
use crate::measure::stats::PairedSummary;
use crate::util::units::human_bytes;

pub use super::build_records::{
    CCompilerRecord, CrateFigures, CrateKind, GraphBound, LinkSummary, RustcSummary, StageCache,
};
pub use super::explore_records::{
    BASELINE_VARIANT, ExploreRecommendation, ExploreResult, ExploreSpeed, ExploreStepCost,
    ExploreVariantRecord, PGO_VARIANT, VariantStatus,
};

/// How a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StepResult {
    Ok,
    Failed,
    /// Reused: `run` found its inputs and outputs unchanged since the run that did its work.
    Cached,
}

impl std::fmt::Display for StepResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl StepResult {
    pub fn name(self) -> &'static str {
        match self {
            StepResult::Ok => "ok",
            StepResult::Failed => "failed",
            StepResult::Cached => "cached",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StepRecord {
    pub name: Step,
    pub result: StepResult,
    /// How long the step's work took; for a cached step, the run that did the work.
    pub duration_secs: f64,
    /// Peak resident memory of pgo-build's whole process tree during the step.
    #[serde(default)]
    pub peak_memory_bytes: Option<u64>,
    /// When the step's work ran (seconds since 1970); for a cached step, the earlier run.
    #[serde(default)]
    pub ran_at_unix: Option<u64>,
    /// Run by its own command outside `run`'s pipeline (a `pgo-build compare` of chosen
    /// variants): shown, not counted in the pipeline's total.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub standalone: bool,
}

impl StepRecord {
    /// "ok", or "cached (ran 5 min ago)".
    pub fn result_text(&self) -> String {
        match (self.result, self.ran_at_unix) {
            (StepResult::Cached, Some(ran_at)) => {
                let elapsed = std::time::Duration::from_secs(now_unix().saturating_sub(ran_at));
                format!("cached (ran {})", crate::util::printer::ago(elapsed))
            }
            (result, _) => result.name().to_owned(),
        }
    }
}

/// This pgo-build's command line, as the report records how something ran.
pub fn invocation() -> String {
    std::iter::once("pgo-build".to_owned())
        .chain(crate::util::command::own_arguments())
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BinaryRecord {
    /// The file's size, debug info and symbol tables included.
    pub size_bytes: u64,
    /// Its loaded sections (about what `strip` leaves): the size `gate`, `[pgo]
    /// max_size_growth` and the size table go by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loaded_bytes: Option<u64>,
    /// Its loaded sections compressed with zstd -9 (about a release archive of it, stripped).
    #[serde(default)]
    pub compressed_bytes: Option<u64>,
    pub path: PathBuf,
    /// Built with `-Cprofile-use`.
    pub pgo: bool,
    /// Post-processed by BOLT with a profile.
    #[serde(default)]
    pub bolted: bool,
}

/// The stages whose binaries' sizes every table and chart of them shows, in this order.
pub const SIZED_STAGES: [Stage; 4] = [
    Stage::Baseline,
    Stage::Instrumented,
    Stage::Optimized,
    Stage::Bolt,
];

/// What the size figures are, said under every table and chart of them.
pub const SIZES_LEGEND: &str = "Sizes: the loaded sections (about what `strip` leaves; what \
    the gate and [pgo] max_size_growth judge), then the whole file and the loaded part \
    compressed with zstd -9.";

impl BinaryRecord {
    /// The size bars and comparisons go by: the loaded size, else the file's.
    pub fn judged_bytes(&self) -> u64 {
        self.loaded_bytes.unwrap_or(self.size_bytes)
    }

    /// "2.2 MiB (file 3.2 MiB, zst 0.9 MiB)": the loaded size first (the one the gate judges),
    /// then the file and the loaded part compressed, when known.
    pub fn size_text(&self) -> String {
        let file = human_bytes(self.size_bytes);
        let compressed = self
            .compressed_bytes
            .map(|c| format!("zst {}", human_bytes(c)));
        match (self.loaded_bytes, compressed) {
            (Some(loaded), Some(compressed)) => {
                format!("{} (file {file}, {compressed})", human_bytes(loaded))
            }
            (Some(loaded), None) => format!("{} (file {file})", human_bytes(loaded)),
            (None, Some(compressed)) => format!("file {file} ({compressed})"),
            (None, None) => format!("file {file}"),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorkloadRecord {
    pub name: String,
    pub stage: Stage,
    pub status: String,
    pub success: bool,
    pub duration_secs: f64,
    pub log: PathBuf,
    /// Processes pgo-build had to stop (timeout, or left running), and with which signal.
    pub stopped: Vec<StoppedProcess>,
    /// How the workload's services ended.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<ServiceRecord>,
}

/// A service of a training run, as it ended.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ServiceRecord {
    pub name: String,
    pub status: String,
    /// How it was asked to stop (`SIGTERM`, `` `pueue shutdown` ``).
    pub asked_by: String,
    /// It ended before pgo-build stopped it.
    pub ended_early: bool,
    /// Processes still alive after the grace period, killed with SIGKILL.
    pub killed: Vec<StoppedProcess>,
    /// Why it was not stopped the configured way (its stop command failed), if so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_failure: Option<String>,
    pub log: PathBuf,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RejectedProfile {
    pub path: PathBuf,
    pub binary: Option<String>,
    pub reason: String,
}

/// What BOLT did to one binary.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BoltRecord {
    /// The stage whose binary was the input (optimized or baseline).
    pub input: Stage,
    pub bolted: bool,
    /// Why it was not BOLTed.
    pub reason: Option<String>,
    pub profile_files: usize,
    pub seconds: Option<f64>,
    pub size_before: u64,
    pub size_after: u64,
    /// "155 of 781 functions"
    pub functions_with_profile: Option<String>,
    /// "41691 → 22095 (-47.0%)", from `-dyno-stats`.
    pub taken_branches: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CompareResult {
    pub metric: Metric,
    /// With `--metric instructions`: the tool that counted them.
    #[serde(default)]
    pub counter: Option<String>,
    /// The most rounds a workload ran.
    pub rounds: usize,
    /// Set when the binaries ran under an emulator (a foreign target through cargo's runner):
    /// what ran them, and that the times measure the emulator, not the target's processor.
    #[serde(default)]
    pub emulated: Option<String>,
    /// How rounds were chosen: "10 rounds", or `--rounds auto`'s plan.
    #[serde(default)]
    pub rounds_plan: Option<String>,
    pub seed: u64,
    pub reference: String,
    pub candidates: Vec<String>,
    pub workloads: Vec<WorkloadComparison>,
    /// Role → candidate → geometric mean of the per-workload median ratios (of what decides:
    /// `metric`, or `decided_by` where a workload reports it).
    pub geometric_mean: BTreeMap<Role, BTreeMap<String, f64>>,
    /// The workload metric verdicts rest on (`--metric NAME`, `[compare] metric`), if any;
    /// workloads that do not report it are judged by `metric`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// With `--against`: each candidate against the last release, from the same rounds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub previous: Vec<PreviousComparison>,
    /// How its verdicts were judged together (absent for explore's race, which splits its
    /// level itself, and in reports before schema 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<FamilyRule>,
    /// Set when the variants' C/C++ was compiled by different compilers (the baseline's by the
    /// user's, a cross-language stage's by clang): what the figures measure besides PGO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub c_compilers_differ: Option<String>,
    /// Each candidate against the candidate it was made from (bolt against optimized), on
    /// each workload, by the figure verdicts rest on: from the same rounds, judged in the same
    /// family. What decides whether BOLT is worth shipping over the optimized build.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub between: Vec<CandidatePair>,
    /// `[compare] margin` when it ran: differences within it are too small to matter (absent
    /// in reports before schema 12: the default, 2%).
    #[serde(default = "default_margin")]
    pub margin: f64,
    /// Held-out verdicts the deciding metric left open and instruction counts did not decide:
    /// why not, and what counting them would cost ("counting instructions on holdout would
    /// take about 18 min, over the budget of 15 min ([compare] counting_budget)").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_counted: Option<String>,
    /// Variant → the id of the stage build it measured (`<stage>/stage.json`'s `id`): what
    /// `report` checks the staged binaries against, so a verdict on binaries rebuilt since is
    /// never shown as theirs. Absent in reports before it was recorded.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub builds: BTreeMap<String, String>,
}

fn default_margin() -> f64 {
    crate::measure::metric::DEFAULT_MARGIN
}

/// A candidate against another candidate on one workload (see [`CompareResult::between`]).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CandidatePair {
    pub workload: String,
    /// The later build (`bolt`)…
    pub candidate: String,
    /// …and the one it was made from (`optimized`).
    pub reference: String,
    pub summary: PairedSummary,
}

/// The rule that keeps the verdicts of one comparison together at one level (see
/// `measure::family`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FamilyRule {
    /// `weighted Holm`.
    pub rule: String,
    /// The chance of any false faster/slower/better/worse among all of them.
    pub level: f64,
    /// How many verdicts were judged together.
    pub verdicts: usize,
    /// Of those, how many rest on the deciding figure (primary).
    pub primary: usize,
    /// The deciding figure's share of the level.
    pub primary_share: f64,
}

impl FamilyRule {
    /// The legend line tables and pages print under a comparison.
    pub fn legend(&self) -> String {
        let level = self.level * 100.0;
        match (self.verdicts, self.primary) {
            (0, _) => "No verdict rests on a test here.".to_owned(),
            (1, _) => format!(
                "One verdict, with a {level:.0}% chance of being wrong when nothing differs."
            ),
            (n, 0) => format!(
                "The verdicts rest on instruction counts, which barely vary (a difference counts \
                 above three times their repeat spread); the {n} verdicts of the other figures \
                 are secondary and keep a {level:.0}% chance of any false one between them ({}).",
                self.rule
            ),
            (n, primary) if primary == n => format!(
                "Verdicts are judged together: the {n} of this comparison keep a {level:.0}% \
                 chance of any false faster or slower between them ({}).",
                self.rule
            ),
            (n, primary) => format!(
                "Verdicts are judged together: the {n} faster/slower/better/worse verdicts of \
                 this comparison keep a {level:.0}% chance of any false one between them ({}: \
                 the {primary} on the deciding figure hold {:.0}% of that level; the other \
                 figures' verdicts are secondary and share the rest).",
                self.rule,
                self.primary_share * 100.0
            ),
        }
    }
}

/// A candidate against the last release (`compare --against DIR`) on one workload, by the
/// figure verdicts rest on, from the same rounds as the rest of the comparison.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PreviousComparison {
    pub workload: String,
    pub candidate: String,
    pub summary: PairedSummary,
}

impl CompareResult {
    /// The variants compared, reference first.
    pub fn variants(&self) -> Vec<String> {
        std::iter::once(self.reference.clone())
            .chain(self.candidates.iter().cloned())
            .collect()
    }

    /// What verdicts rest on.
    pub fn decider(&self) -> Decider {
        match &self.decided_by {
            Some(name) => Decider::Reported(name.clone()),
            None => Decider::Measured(self.metric),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorkloadComparison {
    pub workload: String,
    pub role: Role,
    /// Every counted run, in the order they ran.
    pub runs: Vec<RunSample>,
    /// Candidate → summaries of candidate/reference ratios.
    pub candidates: BTreeMap<String, CandidateSummary>,
    /// A cargo bench workload using criterion: each benchmark's own estimate per variant,
    /// from the last round.
    #[serde(default)]
    pub benchmarks: Vec<BenchmarkComparison>,
    /// The staged binaries it runs (named by its commands and its services', or seen running
    /// in its warm-up round): what its verdicts judge. Absent: it may run any of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binaries: Option<Vec<String>>,
    /// `--rounds auto` stopped before its next look because the time budget would run out:
    /// an open verdict here is the budget's, not the rounds' planned end.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub budget_ran_out: bool,
    /// Variant → whose code its last counted run ran its instructions in (the program's Rust,
    /// C/C++ compiled into it, or outside it), and its own hottest functions: where callgrind
    /// counted (a service's own counts are not in it).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub code: BTreeMap<String, crate::measure::code_counts::CodeCounts>,
}

/// One criterion benchmark of a held-out cargo bench workload, candidate against reference.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BenchmarkComparison {
    pub benchmark: String,
    pub candidate: String,
    pub reference_estimate: crate::measure::criterion::Estimate,
    pub candidate_estimate: crate::measure::criterion::Estimate,
    /// candidate median / reference median.
    pub ratio: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunSample {
    pub round: usize,
    pub variant: String,
    pub wall_secs: f64,
    pub cpu_secs: f64,
    /// Instructions of the whole process tree (`--metric instructions`).
    #[serde(default)]
    pub instructions: Option<u64>,
    /// Minor and major page faults of the whole process tree (`wait4`).
    #[serde(default)]
    pub faults: Option<u64>,
    /// What the workload reported (`[[workload.metric]]`), by compared name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, f64>,
}

impl RunSample {
    /// The run's figure of what decides, when it was measured or reported.
    pub fn judged_value(&self, decider: &Decider) -> Option<f64> {
        match decider {
            Decider::Measured(metric) => self.value(*metric),
            Decider::Reported(name) => self.metrics.get(name).copied(),
        }
    }

    /// The run's figure for `metric`, when it was measured.
    pub fn value(&self, metric: Metric) -> Option<f64> {
        match metric {
            Metric::Wall => Some(self.wall_secs),
            Metric::Cpu => Some(self.cpu_secs),
            Metric::Instructions => self.instructions.map(|n| n as f64),
            Metric::Faults => self.faults.map(|n| n as f64),
        }
    }
}

/// A summary's verdict in the words of its metric: fewer page faults are not "faster".
pub fn verdict_text(summary: &crate::measure::stats::PairedSummary, decider: &Decider) -> String {
    use crate::measure::stats::Verdict;
    match (decider, summary.verdict) {
        (Decider::Measured(Metric::Faults), Verdict::Faster) => "fewer faults".to_owned(),
        (Decider::Measured(Metric::Faults), Verdict::Slower) => "more faults".to_owned(),
        (Decider::Reported(_), Verdict::Faster) => "better".to_owned(),
        (Decider::Reported(_), Verdict::Slower) => "worse".to_owned(),
        _ => summary.verdict_text(),
    }
}

/// How what decides is named: the metric label, or the workload metric's own name.
pub fn decider_label(decider: &Decider) -> String {
    match decider {
        Decider::Measured(metric) => metric_label(*metric).to_owned(),
        Decider::Reported(name) => name.clone(),
    }
}

/// How a decider is named in a sentence ("by wall time", "by instructions"): a table's
/// column may say "wall", prose says what it is.
pub fn decider_words(decider: &Decider) -> String {
    match decider {
        Decider::Measured(Metric::Wall) => "wall time".to_owned(),
        other => decider_label(other),
    }
}

/// How a metric is named in tables and reports ("wall", "page faults").
pub fn metric_label(metric: Metric) -> &'static str {
    match metric {
        Metric::Wall => "wall",
        Metric::Cpu => "CPU",
        Metric::Instructions => "instructions",
        Metric::Faults => "page faults",
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CandidateSummary {
    pub wall: PairedSummary,
    pub cpu: PairedSummary,
    #[serde(default)]
    pub instructions: Option<PairedSummary>,
    /// Page faults (every run counts them; absent in older reports).
    #[serde(default)]
    pub faults: Option<PairedSummary>,
    pub reference_median_wall_secs: f64,
    pub candidate_median_wall_secs: f64,
    /// The workload's own metrics, by compared name (`p99_ms`, `latency.p99`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, MetricComparison>,
}

/// One workload metric of a candidate against the reference, paired per round.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MetricComparison {
    pub unit: String,
    pub direction: Direction,
    pub reference_median: f64,
    pub candidate_median: f64,
    /// Of the per-round cost ratios: candidate/reference for a `lower` metric,
    /// reference/candidate for a `higher` one, so that below 1 is better either way and
    /// "faster" reads "better".
    pub summary: PairedSummary,
    /// A high percentile (p90 and above) worse while the distribution's median is better or
    /// the same: a tail regression a median hides.
    #[serde(default)]
    pub tail_regression: bool,
}

impl WorkloadComparison {
    /// Candidates in the order they were given (the map is sorted by name).
    pub fn in_order<'a>(
        &'a self,
        candidates: &'a [String],
    ) -> impl Iterator<Item = (&'a String, &'a CandidateSummary)> {
        candidates
            .iter()
            .filter_map(|name| Some((name, self.candidates.get(name)?)))
    }
}

impl MetricComparison {
    /// "lower is better" / "higher is better".
    pub fn direction_text(&self) -> &'static str {
        match self.direction {
            Direction::Lower => "lower is better",
            Direction::Higher => "higher is better",
        }
    }

    /// better / worse / no difference …, and a tail regression when it is one.
    pub fn verdict_text(&self) -> String {
        let mut text = verdict_text(&self.summary, &Decider::Reported(String::new()));
        if self.tail_regression {
            text.push_str(" (tail regression)");
        }
        text
    }
}

#[cfg(test)]
impl CandidateSummary {
    /// For tests: wall and CPU summaries of these per-round ratios, the reference taking 1 s.
    pub fn of_ratios(ratios: &[f64]) -> CandidateSummary {
        CandidateSummary {
            wall: crate::measure::stats::summarize(ratios),
            cpu: crate::measure::stats::summarize(ratios),
            instructions: None,
            faults: None,
            reference_median_wall_secs: 1.0,
            candidate_median_wall_secs: ratios[0],
            metrics: BTreeMap::new(),
        }
    }
}

impl CandidateSummary {
    /// The summary verdicts rest on: instruction counts where they decided what the deciding
    /// metric left open, else the workload metric `decider` names when this workload reports
    /// it, else what the rounds measured.
    pub fn judged(&self, decider: &Decider) -> &PairedSummary {
        if let Some(counted) = self.settled_by_instructions() {
            return counted;
        }
        match decider.reported().and_then(|name| self.metrics.get(name)) {
            Some(metric) => &metric.summary,
            None => self.by(decider.measured()),
        }
    }

    /// What [`CandidateSummary::judged`] rests on for this workload: instruction counts where
    /// they settled it, the workload metric, or the measured one when the workload does not
    /// report it.
    pub fn judged_decider(&self, decider: &Decider) -> Decider {
        if self.settled_by_instructions().is_some() {
            return Decider::Measured(Metric::Instructions);
        }
        match decider
            .reported()
            .filter(|name| self.metrics.contains_key(*name))
        {
            Some(name) => Decider::Reported(name.to_owned()),
            None => Decider::Measured(decider.measured()),
        }
    }

    /// [`CandidateSummary::judged_decider`] as a table's column names it ("wall", "p99_ms").
    pub fn judged_by(&self, decider: &Decider) -> String {
        decider_label(&self.judged_decider(decider))
    }

    /// The instruction counts that decided in place of the deciding metric, if they did.
    pub fn settled_by_instructions(&self) -> Option<&PairedSummary> {
        self.instructions
            .as_ref()
            .filter(|counted| counted.left_open_by.is_some())
    }

    pub fn by(&self, metric: Metric) -> &PairedSummary {
        match (metric, &self.instructions, &self.faults) {
            (Metric::Instructions, Some(instructions), _) => instructions,
            (Metric::Faults, _, Some(faults)) => faults,
            (Metric::Cpu, _, _) => &self.cpu,
            _ => &self.wall,
        }
    }
}

/// One `compare` as it ran, kept in the report's history whether it succeeded or not.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CompareRun {
    /// When it started (seconds since 1970).
    pub ran_at_unix: u64,
    /// The command line that ran it (`pgo-build compare …`, or `pgo-build run`).
    pub command: String,
    /// "ok", or "failed: " and the first line of why.
    pub result: String,
    /// The variants it compared, reference first; empty when it failed before measuring.
    #[serde(default)]
    pub variants: Vec<String>,
    /// What its verdicts rest on ("wall", or a workload metric).
    #[serde(default)]
    pub decided_by: Option<String>,
    #[serde(default)]
    pub rounds: usize,
    /// Role → candidate → geometric mean of the per-workload median ratios.
    #[serde(default)]
    pub geometric_mean: BTreeMap<Role, BTreeMap<String, f64>>,
}

impl CompareRun {
    pub fn of(result: &CompareResult, command: String, ran_at_unix: u64) -> CompareRun {
        CompareRun {
            ran_at_unix,
            command,
            result: "ok".to_owned(),
            variants: result.variants(),
            decided_by: Some(decider_label(&result.decider())),
            rounds: result.rounds,
            geometric_mean: result.geometric_mean.clone(),
        }
    }

    pub fn failed(error: &anyhow::Error, command: String, ran_at_unix: u64) -> CompareRun {
        let why = format!("{error:#}");
        CompareRun {
            ran_at_unix,
            command,
            result: format!("failed: {}", why.lines().next().unwrap_or_default()),
            variants: Vec::new(),
            decided_by: None,
            rounds: 0,
            geometric_mean: BTreeMap::new(),
        }
    }
}

/// The temporal traces a merged profile keeps.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
pub struct Traces {
    /// Traces kept in the profile (a reservoir sample of what was seen).
    pub kept: u64,
    /// Processes that recorded one.
    pub seen: u64,
}

/// What `optimize` did for start-up order: the report's `startup_order`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OrderRecord {
    pub mode: StartupOrder,
    pub traces: Traces,
    /// With `ordering-file`: the file it linked by…
    pub order_file: Option<PathBuf>,
    /// …and how many functions it orders.
    pub ordered_functions: Option<usize>,
}

/// A process of the workload that pgo-build stopped, and the signal that stopped it.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct StoppedProcess {
    pub pid: i32,
    pub name: String,
    /// SIGTERM when it ended within the grace period, else SIGKILL.
    pub signal: String,
}
