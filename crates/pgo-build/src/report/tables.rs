//! The terminal tables of the report's records: steps, sizes, comparisons, BOLT.

use std::collections::BTreeMap;

use comfy_table::{Cell, CellAlignment, Table};

use crate::util::printer::Fitted;
use crate::util::units::{figure, human_bytes};

use super::records::{
    BASELINE_VARIANT, BoltRecord, CompareResult, CrateFigures, ExploreResult, ExploreSpeed,
    PGO_VARIANT, SIZED_STAGES, SIZES_LEGEND, StepRecord, StepResult, decider_label, metric_label,
    verdict_text,
};
use super::report_file::Report;
use crate::layout::Stage;
use crate::layout::step::Step;
use crate::report::records::VariantStatus;

impl Report {
    /// The step table: duration and share of the total, like rustc's release pipeline prints.
    pub fn step_table(&self) -> String {
        // The total is what one pipeline run costs: other commands (pack, gate, …) and failed
        // retries of a step that has a good run are listed below it, not in it.
        let PipelineSteps {
            counted,
            other,
            total,
        } = self.pipeline_steps();
        let mut table = Table::new();
        // Only with sccache as rustc wrapper: hits of the step's last build.
        let cache = !self.sccache.is_empty();
        table.fitted().set_header(
            ["Step", "Result", "Duration", "Share", "Peak memory"]
                .into_iter()
                .chain(cache.then_some("sccache hits")),
        );
        let blank = || cache.then(|| Cell::new(""));
        let row = |step: &StepRecord, share: String| {
            [
                Cell::new(step.name.name()),
                Cell::new(step.result_text()),
                // A step reused from a run that left no record of its duration: unknown, not 0.
                Cell::new(
                    if step.result == StepResult::Cached && step.ran_at_unix.is_none() {
                        "-".to_owned()
                    } else {
                        format!("{:.2}s", step.duration_secs)
                    },
                )
                .set_alignment(CellAlignment::Right),
                Cell::new(share).set_alignment(CellAlignment::Right),
                Cell::new(step.peak_memory_bytes.map_or("-".to_owned(), human_bytes))
                    .set_alignment(CellAlignment::Right),
            ]
            .into_iter()
            .chain(cache.then(|| Cell::new(self.cache_hits_of(step.name))))
        };
        for step in &counted {
            let share = 100.0 * share_of(step, total);
            table.add_row(row(step, format!("{share:.1}%")));
        }
        table.add_row(
            [
                Cell::new("total"),
                Cell::new(""),
                Cell::new(format!("{total:.2}s")).set_alignment(CellAlignment::Right),
                Cell::new("100.0%").set_alignment(CellAlignment::Right),
                Cell::new(""),
            ]
            .into_iter()
            .chain(blank()),
        );
        let cached = counted
            .iter()
            .filter(|s| s.result == StepResult::Cached)
            .count();
        if cached > 0 {
            // What this run itself spent; the total is what the pipeline costs from scratch.
            let spent: f64 = counted
                .iter()
                .filter(|s| s.result != StepResult::Cached)
                .map(|s| s.duration_secs)
                .sum();
            table.add_row(
                [
                    Cell::new("this run"),
                    Cell::new(format!("{cached} steps cached")),
                    Cell::new(format!("{spent:.2}s")).set_alignment(CellAlignment::Right),
                    Cell::new(""),
                    Cell::new(""),
                ]
                .into_iter()
                .chain(blank()),
            );
        }
        for step in other {
            table.add_row(row(step, "not in the total".to_owned()));
        }
        crate::util::printer::rendered(table)
    }

    /// The step records of one pipeline run (what its total counts), and the others: other
    /// commands (pack, gate, a standalone compare, …) and failed retries of a step that has
    /// a good run.
    pub fn pipeline_steps(&self) -> PipelineSteps<'_> {
        let (counted, other): (Vec<&StepRecord>, Vec<&StepRecord>) =
            self.steps.iter().partition(|step| {
                !step.standalone
                    && step.name.builds_the_release()
                    && self
                        .step_record(step.name)
                        .is_some_and(|record| std::ptr::eq(record, *step))
            });
        // + 0.0: a float sum of nothing is -0.0, printed "-0.00s".
        let total = counted.iter().map(|s| s.duration_secs).sum::<f64>() + 0.0;
        PipelineSteps {
            counted,
            other,
            total,
        }
    }

    /// "30/32" for a command whose build sccache served, else "-".
    fn cache_hits_of(&self, step: Step) -> String {
        let Some(stage) = step.cargo_build() else {
            return "-".to_owned();
        };
        match self.sccache.get(&stage) {
            Some(cache) => format!("{}/{}", cache.hits, cache.hits + cache.misses),
            None => "-".to_owned(),
        }
    }

    /// Binary sizes per stage.
    pub fn size_table(&self) -> String {
        let stages = SIZED_STAGES;
        let mut table = Table::new();
        table.fitted();
        table.set_header(std::iter::once("Binary").chain(stages.map(Stage::name)));
        // "zst": the loaded sections compressed with zstd -9, as a release archive of the
        // stripped binary would take.
        // A stage whose last build failed, or whose upstream's did since it was built (a
        // refused optimize beside an earlier build's BOLT binaries), keeps the binaries of an
        // earlier one: said so, never shown as if they were this build's.
        let earlier: Vec<(Stage, String)> = stages
            .into_iter()
            .filter_map(|stage| Some((stage, self.earlier_build(stage)?)))
            .collect();
        for (binary, per_stage) in &self.binaries {
            let mut row = vec![Cell::new(binary)];
            for stage in stages {
                let why = earlier
                    .iter()
                    .find(|(s, _)| *s == stage)
                    .map(|(_, why)| why);
                let text = match (per_stage.get(&stage), why) {
                    (Some(record), Some(why)) => {
                        format!("{} (an earlier build: {why})", record.size_text())
                    }
                    (record, _) => match record {
                        Some(record) if stage == Stage::Optimized && !record.pgo => {
                            format!("{} (no PGO)", record.size_text())
                        }
                        Some(record) if stage == Stage::Bolt && !record.bolted => {
                            format!("{} (not BOLTed)", record.size_text())
                        }
                        Some(record) => record.size_text(),
                        None => "-".to_owned(),
                    },
                };
                row.push(Cell::new(text).set_alignment(CellAlignment::Right));
            }
            table.add_row(row);
        }
        format!(
            "{}\n{}",
            crate::util::printer::rendered(table),
            crate::util::printer::fit_lines(SIZES_LEGEND)
        )
    }
}

impl Report {
    /// Why `stage`'s binaries are an earlier build's, if they are: the last attempt of the
    /// step that builds it failed ("this one failed"), or that of a step it is built from
    /// failed after it was built ("optimize failed").
    fn earlier_build(&self, stage: Stage) -> Option<String> {
        let built_from: &[Step] = match stage {
            Stage::Baseline => &[Step::Build],
            Stage::Instrumented => &[Step::Instrument],
            Stage::Optimized => &[Step::Instrument, Step::Optimize],
            Stage::BoltInstrumented | Stage::Bolt => {
                &[Step::Instrument, Step::Optimize, Step::Bolt]
            }
        };
        let own = built_from.last()?;
        let last = |step: &Step| self.steps.iter().rev().find(|r| r.name == *step);
        if last(own).is_some_and(|record| record.result == StepResult::Failed) {
            return Some("this one failed".to_owned());
        }
        let built_at = self
            .steps
            .iter()
            .rev()
            .find(|r| r.name == *own && r.result != StepResult::Failed)
            .and_then(|r| r.ran_at_unix);
        built_from.iter().rev().skip(1).find_map(|step| {
            let record = last(step)?;
            (record.result == StepResult::Failed && record.ran_at_unix >= built_at)
                .then(|| format!("{} failed", step.name()))
        })
    }
}

/// A report's step records split by [`Report::pipeline_steps`].
pub struct PipelineSteps<'a> {
    pub counted: Vec<&'a StepRecord>,
    pub other: Vec<&'a StepRecord>,
    /// The seconds of the counted stages.
    pub total: f64,
}

/// A stage's share of `total` (0 when nothing took time).
pub fn share_of(stage: &StepRecord, total: f64) -> f64 {
    if total > 0.0 {
        stage.duration_secs / total
    } else {
        0.0
    }
}

/// A ratio as a signed percentage change: 0.9 → "-10.0%".
pub fn percent(ratio: f64) -> String {
    format!("{:+.1}%", (ratio - 1.0) * 100.0)
}

/// criterion's per-benchmark estimates of held-out cargo benches: median time per iteration
/// and its interval per variant. `None` when no workload had any.
/// The workloads' own metrics: each candidate against the reference, in the metric's unit
/// and direction (a cost ratio below 1 is better), with tail regressions marked.
pub fn metrics_table(result: &CompareResult) -> Option<String> {
    let mut table = Table::new();
    table.fitted().set_header([
        "Workload",
        "Metric",
        "Variant",
        "Median of each side",
        "Change",
        "Cost ratio (CI)",
        "Wins",
        "Verdict",
    ]);
    let right = |text: String| Cell::new(text).set_alignment(CellAlignment::Right);
    let mut rows = 0;
    for comparison in &result.workloads {
        for (candidate, summary) in comparison.in_order(&result.candidates) {
            for (name, metric) in &summary.metrics {
                rows += 1;
                let direction = metric.direction_text();
                let s = &metric.summary;
                let mut verdict = metric.verdict_text();
                if result.decided_by.as_deref() == Some(name.as_str()) {
                    verdict.push_str(" *");
                }
                table.add_row([
                    Cell::new(&comparison.workload),
                    Cell::new(format!("{name} ({direction})")),
                    Cell::new(format!("{candidate} vs {}", result.reference)),
                    right(format!(
                        "{} → {} {}",
                        figure(metric.reference_median),
                        figure(metric.candidate_median),
                        metric.unit
                    )),
                    right(percent(metric.candidate_median / metric.reference_median)),
                    right({
                        let (low, high) = s.verdict_interval();
                        format!(
                            "{:.3} ({} … {})",
                            s.median_ratio,
                            crate::measure::stats::outward(low, 1.0, false, 3),
                            crate::measure::stats::outward(high, 1.0, true, 3)
                        )
                    }),
                    right(format!("{}/{}", s.wins, s.pairs)),
                    Cell::new(verdict),
                ]);
            }
        }
    }
    if rows == 0 {
        return None;
    }
    let mut text = crate::util::printer::rendered(table);
    text.push_str(
        "\nCost ratio: the median of the per-round ratios oriented so that below 1 is better \
         (candidate/reference for lower-is-better metrics, reference/candidate for higher). \
         Change: of the two medians.",
    );
    match &result.decided_by {
        Some(name) => text.push_str(&format!(
            "\n* decides the verdict: {name}; the other metrics' verdicts are secondary"
        )),
        None => text.push_str("\nThese verdicts are secondary: wall time decides."),
    }
    Some(crate::util::printer::fit_lines(&text))
}

pub fn benchmark_table(result: &CompareResult) -> Option<String> {
    let rows: Vec<_> = result
        .workloads
        .iter()
        .flat_map(|w| w.benchmarks.iter().map(move |b| (w, b)))
        .collect();
    if rows.is_empty() {
        return None;
    }
    let time = |e: &crate::measure::criterion::Estimate| {
        format!(
            "{} ({} … {})",
            nanos(e.median_ns),
            nanos(e.lower_ns),
            nanos(e.upper_ns)
        )
    };
    let mut table = Table::new();
    table.fitted().set_header([
        "Workload",
        "Benchmark (criterion)",
        "Variant",
        &format!("{} median (95% CI)", result.reference),
        "Candidate median (95% CI)",
        "Change",
    ]);
    for (workload, bench) in rows {
        table.add_row([
            workload.workload.clone(),
            bench.benchmark.clone(),
            bench.candidate.clone(),
            time(&bench.reference_estimate),
            time(&bench.candidate_estimate),
            percent(bench.ratio),
        ]);
    }
    Some(crate::util::printer::rendered(table))
}

fn nanos(ns: f64) -> String {
    match ns {
        n if n >= 1e9 => format!("{:.3} s", n / 1e9),
        n if n >= 1e6 => format!("{:.3} ms", n / 1e6),
        n if n >= 1e3 => format!("{:.3} µs", n / 1e3),
        n => format!("{n:.1} ns"),
    }
}

/// Where the instruction counts go in [`compare_table`].
const INSTRUCTIONS_COLUMN: usize = 6;

/// "-12.3% (-15.0% … -9.1%)": a summary's median ratio and the interval its verdict was
/// judged by, as changes.
fn ratio_with_interval(summary: &crate::measure::stats::PairedSummary) -> String {
    crate::measure::stats::change_with_interval(summary.median_ratio, summary.verdict_interval())
}

pub fn compare_table(result: &CompareResult) -> String {
    // Only columns with figures: instructions only where they were counted.
    let counted = result
        .workloads
        .iter()
        .flat_map(|c| c.candidates.values())
        .any(|s| s.instructions.is_some());
    let mut table = Table::new();
    table.fitted().set_header(
        [
            "Workload",
            "Role",
            "Variant",
            "Median wall of each side",
            "Wall: median ratio (CI)",
            "CPU: median ratio (CI)",
            "Instructions: ratio (± noise)",
            "Page faults: median ratio (CI)",
            "Wins",
            "Verdict",
        ]
        .into_iter()
        .enumerate()
        .filter(|(i, _)| counted || *i != INSTRUCTIONS_COLUMN)
        .map(|(_, header)| header),
    );
    let right = |text: String| Cell::new(text).set_alignment(CellAlignment::Right);
    let decider = result.decider();
    for comparison in &result.workloads {
        for (candidate, summary) in comparison.in_order(&result.candidates) {
            let chosen = summary.judged(&decider);
            let mut row = vec![
                Cell::new(&comparison.workload),
                Cell::new(comparison.role),
                Cell::new(format!("{candidate} vs {}", result.reference)),
                right(format!(
                    "{:.3}s → {:.3}s",
                    summary.reference_median_wall_secs, summary.candidate_median_wall_secs
                )),
                right(ratio_with_interval(&summary.wall)),
                right(ratio_with_interval(&summary.cpu)),
                // "-" where this row's instructions were not counted.
                right(
                    summary
                        .instructions
                        .as_ref()
                        .map_or("-".to_owned(), ratio_with_interval),
                ),
                right(
                    summary
                        .faults
                        .as_ref()
                        .map_or("-".to_owned(), ratio_with_interval),
                ),
                right(format!("{}/{}", chosen.wins, chosen.pairs)),
                Cell::new(verdict_text(chosen, &decider)),
            ];
            if !counted {
                row.remove(INSTRUCTIONS_COLUMN);
            }
            table.add_row(row);
        }
    }
    let mut text = crate::util::printer::rendered(table);
    let confidence = result
        .workloads
        .iter()
        .flat_map(|c| c.candidates.values())
        .map(|s| s.wall.confidence)
        .next()
        .unwrap_or(0.95);
    // The two medians are easily read as the change; say which number is which.
    text.push_str(&format!(
        "\nMedian ratio: the median of the per-round candidate/reference ratios, with the \
         interval its verdict was judged by (CI: the paired test inverted, {:.1}% or wider \
         where many verdicts share the level; it leaves 0% out exactly when the test shows a \
         difference). Median wall of each side: each variant's median time, whose ratio can \
         differ.",
        confidence * 100.0
    ));
    if let Some(name) = &result.decided_by {
        text.push_str(&format!(
            "\nVerdicts and wins rest on the workload metric `{name}` (see the metrics table) \
             where a workload reports it, else on {} time.",
            metric_label(result.metric)
        ));
    }
    if let Some(family) = &result.family {
        text.push('\n');
        text.push_str(&family.legend());
    }
    for (role, per_candidate) in &result.geometric_mean {
        for (candidate, mean) in per_candidate {
            text.push_str(&format!(
                "\n{role}: {candidate} vs {}: geometric mean of median {} ratios {} ({})",
                result.reference,
                decider_label(&decider),
                format_args!("{mean:.3}"),
                percent(*mean)
            ));
        }
    }
    crate::util::printer::fit_lines(&text)
}

pub fn bolt_table(records: &BTreeMap<String, BoltRecord>) -> String {
    let mut table = Table::new();
    table.fitted().set_header([
        "Binary",
        "Input",
        "BOLTed",
        "BOLT time",
        "Size",
        "Functions with profile",
        "Taken branches",
    ]);
    for (binary, record) in records {
        table.add_row([
            binary.clone(),
            record.input.to_string(),
            if record.bolted {
                "yes".to_owned()
            } else {
                "no (no profile)".to_owned()
            },
            record
                .seconds
                .map_or("-".to_owned(), |s| format!("{s:.2}s")),
            format!(
                "{} → {}",
                human_bytes(record.size_before),
                human_bytes(record.size_after)
            ),
            record
                .functions_with_profile
                .clone()
                .unwrap_or_else(|| "-".to_owned()),
            record
                .taken_branches
                .clone()
                .unwrap_or_else(|| "-".to_owned()),
        ]);
    }
    crate::util::printer::rendered(table)
}

/// A stage's heaviest crates, a row each: peak against estimate, wall time and the waits.
fn add_heaviest(heaviest: &mut Table, stage: Stage, figures: &crate::report::RustcSummary) {
    for krate in &figures.heaviest {
        heaviest.add_row([
            Cell::new(stage.name()),
            Cell::new(&krate.krate),
            Cell::new(krate.kind),
            Cell::new(krate.peak_bytes.map_or("-".to_owned(), human_bytes))
                .set_alignment(CellAlignment::Right),
            Cell::new(human_bytes(krate.estimate_bytes)).set_alignment(CellAlignment::Right),
            Cell::new(format!("{:.1}s", krate.wall_secs)).set_alignment(CellAlignment::Right),
            Cell::new(format!("{:.1}s", krate.memory_wait_secs))
                .set_alignment(CellAlignment::Right),
            Cell::new(format!(
                "{:.1}s",
                (krate.wait_secs - krate.memory_wait_secs).max(0.0)
            ))
            .set_alignment(CellAlignment::Right),
        ]);
    }
}

/// What rustc did against the memory budget, per stage: the budget, the peak of the whole
/// process tree, the wait for memory, how good the estimates were; then the heaviest crates.
/// `None` when no build recorded any.
pub fn rustc_memory_tables(report: &Report) -> Option<String> {
    if report.rustc_memory.is_empty() {
        return None;
    }
    let mut stages = Table::new();
    stages.fitted().set_header([
        "Stage",
        "Budget (rustc)",
        "Peak, whole tree",
        "rustc at once",
        "Crates",
        "Build (at best)",
        "Waiting for memory",
        "Waiting for a CPU slot",
        "Estimate error",
        "Over estimate",
        "Ran alone",
    ]);
    let mut heaviest = Table::new();
    heaviest.fitted().set_header([
        "Stage",
        "Crate",
        "Kind",
        "Peak",
        "Estimate",
        "Wall",
        "Waited for memory",
        "Waited for a CPU",
    ]);
    let names = |crates: &[CrateFigures]| {
        if crates.is_empty() {
            "-".to_owned()
        } else {
            crates
                .iter()
                .map(|c| c.krate.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    for (stage, figures) in &report.rustc_memory {
        let peak = report
            .steps
            .iter()
            .filter(|s| s.name.cargo_build() == Some(*stage))
            .find_map(|s| s.peak_memory_bytes);
        stages.add_row([
            Cell::new(stage.name()),
            Cell::new(format!(
                "{} ({})",
                human_bytes(figures.budget_bytes),
                human_bytes(figures.rustc_budget_bytes)
            ))
            .set_alignment(CellAlignment::Right),
            Cell::new(peak.map_or("-".to_owned(), human_bytes)).set_alignment(CellAlignment::Right),
            Cell::new(format!(
                "{} (cargo -j {})",
                figures.cpus, figures.cargo_jobs
            )),
            Cell::new(figures.invocations).set_alignment(CellAlignment::Right),
            // The dependency graph's (or the cores') bound beside the build: how much of the
            // wall time the budget could have cost at most.
            Cell::new(match (figures.build_secs, &figures.lower_bound) {
                (Some(build), Some(bound)) => {
                    format!("{build:.1}s ({:.1}s, {})", bound.secs, bound.limit())
                }
                (Some(build), None) => format!("{build:.1}s"),
                _ => "-".to_owned(),
            })
            .set_alignment(CellAlignment::Right),
            // Summed over crates: a crate waits for memory (the budget) or, with memory to
            // spare, for one of the CPU slots.
            Cell::new(format!("{:.1}s", figures.memory_wait_secs))
                .set_alignment(CellAlignment::Right),
            Cell::new(format!(
                "{:.1}s",
                (figures.wait_secs - figures.memory_wait_secs).max(0.0)
            ))
            .set_alignment(CellAlignment::Right),
            Cell::new(
                figures
                    .estimate_error
                    .map_or("-".to_owned(), |e| format!("{:.0}%", e * 100.0)),
            )
            .set_alignment(CellAlignment::Right),
            Cell::new(names(&figures.overruns)),
            Cell::new(names(&figures.alone)),
        ]);
        add_heaviest(&mut heaviest, *stage, figures);
    }
    let bounds: Vec<String> = report
        .rustc_memory
        .iter()
        .filter_map(|(stage, figures)| {
            Some(format!(
                "{stage}: {}",
                figures.lower_bound.as_ref()?.describe()
            ))
        })
        .collect();
    let bounds = match bounds.is_empty() {
        true => String::new(),
        // A chain of crates is long: wrapped to the terminal like the verdict's lines.
        false => format!(
            "{}\n",
            crate::util::printer::fit_indented(&format!(
                "Build at best, by the dependency graph (cargo --timings) or the cores:\n  {}",
                bounds.join("\n  ")
            ))
        ),
    };
    Some(format!(
        "{}\n{bounds}{}",
        crate::util::printer::rendered(stages),
        crate::util::printer::rendered(heaviest)
    ))
}

/// `explore`'s table: one row per variant, fastest first, with its speed against the
/// baseline and against pgo, its build cost and size, and the fronts it is on.
pub fn explore_table(result: &ExploreResult) -> String {
    let mut table = Table::new();
    let metric = match &result.decided_by {
        Some(name) => name.clone(),
        None => metric_label(result.metric).to_owned(),
    };
    table.fitted().set_header([
        "Variant".to_owned(),
        format!("vs baseline ({metric})"),
        "vs pgo".to_owned(),
        "Build time".to_owned(),
        "Peak memory".to_owned(),
        "Size (loaded)".to_owned(),
        "Pareto front".to_owned(),
        "Status".to_owned(),
    ]);
    let speed = |speed: &Option<ExploreSpeed>| match speed {
        // Decided by another figure than the table's (instruction counts where wall time
        // could not decide): said in the cell.
        Some(s) if s.decided_by.is_some() => format!(
            "{} {} (instructions)",
            percent(s.ratio),
            verdict_word(s.verdict)
        ),
        Some(s) => format!("{} {}", percent(s.ratio), verdict_word(s.verdict)),
        None => "-".to_owned(),
    };
    for variant in &result.variants {
        table.add_row([
            Cell::new(&variant.name),
            Cell::new(
                if variant.name == BASELINE_VARIANT && variant.status == VariantStatus::Measured {
                    "reference".to_owned()
                } else {
                    speed(&variant.vs_baseline)
                },
            ),
            Cell::new(
                if variant.name == PGO_VARIANT && variant.status == VariantStatus::Measured {
                    "reference".to_owned()
                } else {
                    speed(&variant.vs_pgo)
                },
            ),
            Cell::new(variant.build_time_text()).set_alignment(CellAlignment::Right),
            Cell::new(variant.peak_memory_text()).set_alignment(CellAlignment::Right),
            Cell::new(variant.size_text()).set_alignment(CellAlignment::Right),
            Cell::new(variant.front.join(", ")),
            Cell::new(match variant.rounds {
                Some(rounds) if variant.status == VariantStatus::Measured => {
                    format!("measured ({rounds} rounds)")
                }
                _ => variant.status.name().to_owned(),
            }),
        ]);
    }
    crate::util::printer::rendered(table)
}

/// A verdict in one word, for narrow table cells.
fn verdict_word(verdict: crate::measure::stats::Verdict) -> &'static str {
    use crate::measure::stats::Verdict;
    match verdict {
        Verdict::Faster => "faster",
        Verdict::Slower => "slower",
        Verdict::NoDifference => "same",
        Verdict::Inconclusive => "unclear",
        Verdict::TooFewRounds => "too few rounds",
        Verdict::TooCoarse => "too coarse",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::metric::{Decider, Metric};
    use crate::measure::stats::summarize;
    use crate::report::{BenchmarkComparison, CandidateSummary, WorkloadComparison};

    fn comparison(instructions: bool) -> CompareResult {
        let ratios = [0.9, 0.91, 0.89, 0.9, 0.92, 0.9, 0.9];
        let summary = CandidateSummary {
            wall: summarize(&ratios),
            cpu: summarize(&ratios),
            instructions: instructions.then(|| summarize(&[0.8; 7])),
            faults: None,
            reference_median_wall_secs: 1.0,
            candidate_median_wall_secs: 0.9,
            metrics: BTreeMap::new(),
        };
        CompareResult {
            decided_by: None,
            metric: if instructions {
                Metric::Instructions
            } else {
                Metric::Wall
            },
            counter: None,
            emulated: None,
            rounds: 6,
            rounds_plan: None,
            seed: 1,
            reference: "baseline".into(),
            candidates: vec!["optimized".into()],
            workloads: vec![WorkloadComparison {
                workload: "w".into(),
                role: crate::config::Role::Holdout,
                runs: Vec::new(),
                candidates: [("optimized".to_owned(), summary)].into(),
                benchmarks: Vec::new(),
                binaries: None,
                budget_ran_out: false,
                code: Default::default(),
            }],
            geometric_mean: BTreeMap::new(),
            previous: Vec::new(),
            family: None,
            c_compilers_differ: None,
            between: Vec::new(),
            margin: 0.02,
            not_counted: None,
            builds: Default::default(),
        }
    }

    #[test]
    fn criterion_estimates_get_a_table_of_their_own() {
        let mut result = comparison(false);
        assert!(benchmark_table(&result).is_none(), "no criterion, no table");
        let estimate = |median_ns| crate::measure::criterion::Estimate {
            median_ns,
            lower_ns: median_ns - 1000.0,
            upper_ns: median_ns + 1000.0,
        };
        result.workloads[0].benchmarks.push(BenchmarkComparison {
            benchmark: "parse/small".into(),
            candidate: "optimized".into(),
            reference_estimate: estimate(200_000.0),
            candidate_estimate: estimate(150_000.0),
            ratio: 0.75,
        });
        let table = benchmark_table(&result).unwrap();
        let cells = row_cells(&table);
        assert_eq!(cells[1], "parse/small", "{table}");
        assert_eq!(cells[3], "200.000 µs (199.000 µs … 201.000 µs)", "{table}");
        assert_eq!(cells[5], "-25.0%", "{table}");
    }

    /// The cells of the table's one data row: its lines (cells wrap to fit the width) between
    /// the header's rule and the bottom border, each column's pieces joined by a space.
    fn row_cells(table: &str) -> Vec<String> {
        let mut cells: Vec<String> = Vec::new();
        let rows = table
            .lines()
            .skip_while(|l| !l.starts_with('╞'))
            .skip(1)
            .take_while(|l| !l.starts_with('└'));
        for line in rows {
            for (i, piece) in line.trim_matches('│').split('┆').enumerate() {
                if cells.len() <= i {
                    cells.push(String::new());
                }
                let piece = piece.trim();
                if !piece.is_empty() {
                    if !cells[i].is_empty() {
                        cells[i].push(' ');
                    }
                    cells[i].push_str(piece);
                }
            }
        }
        cells
    }

    #[test]
    fn fewer_page_faults_are_not_called_faster() {
        let fewer = summarize(&[0.9, 0.91, 0.89, 0.9, 0.92, 0.9, 0.9]);
        assert_eq!(
            super::verdict_text(&fewer, &Decider::Measured(Metric::Faults)),
            "fewer faults"
        );
        assert_eq!(
            super::verdict_text(&fewer, &Decider::Measured(Metric::Wall)),
            "faster"
        );
    }

    #[test]
    fn every_compare_row_fills_every_column_and_instructions_only_when_counted() {
        // Measured by wall time: no instructions column at all.
        let wall = row_cells(&compare_table(&comparison(false)));
        assert_eq!(wall.len(), 9, "{wall:?}");
        assert_eq!(wall[6], "-", "{wall:?}");
        assert_eq!(wall[7], "7/7", "{wall:?}");
        assert_eq!(wall[8], "faster", "{wall:?}");
        let counted = row_cells(&compare_table(&comparison(true)));
        assert_eq!(counted.len(), 10, "{counted:?}");
        assert!(counted[6].starts_with("-20.0%"), "{counted:?}");
        assert_eq!(counted[8], "7/7", "{counted:?}");
    }

    #[test]
    fn a_workload_without_the_deciding_metric_says_it_was_judged_by_the_measured_one() {
        let result = comparison(false);
        let summary = &result.workloads[0].candidates["optimized"];
        let p99 = Decider::Reported("p99_ms".to_owned());
        assert_eq!(summary.judged_by(&p99), "wall");
        assert_eq!(summary.judged(&p99).median_ratio, summary.wall.median_ratio);
        assert_eq!(summary.judged_by(&Decider::Measured(Metric::Cpu)), "CPU");
    }

    #[test]
    fn tables_fit_the_width() {
        let table = compare_table(&comparison(true));
        let widest = table.lines().map(|l| l.chars().count()).max().unwrap_or(0);
        assert!(
            widest <= usize::from(crate::util::printer::table_width()),
            "{table}"
        );
    }
}
