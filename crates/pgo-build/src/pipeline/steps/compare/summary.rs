//! The summaries of paired rounds: per candidate, the ratios of every measured figure and of
//! every workload metric to the reference's in the same round, with their verdicts, and the
//! tail regressions a distribution's median hides. Pure functions of the runs.

use std::collections::BTreeMap;

use crate::measure::family::{self, Hypothesis, Rank};
use crate::measure::metric::{Decider, Metric};
use crate::measure::reported_metrics::{Direction, MetricSpec};
use crate::measure::stats::{self, PairedSummary, Verdict};
use crate::report::{
    CandidateSummary, CompareResult, FamilyRule, MetricComparison, RunSample, WorkloadComparison,
};

/// The largest relative difference between two instruction counts of one variant, when some
/// variant was counted more than once.
fn repeat_spread(runs: &[RunSample]) -> Option<f64> {
    let mut by_variant: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for run in runs {
        if let Some(count) = run.instructions {
            by_variant.entry(&run.variant).or_default().push(count);
        }
    }
    by_variant
        .values()
        .filter(|counts| counts.len() > 1)
        .map(|counts| {
            let low = counts
                .iter()
                .min()
                .expect("filtered to more than one count");
            let high = counts
                .iter()
                .max()
                .expect("filtered to more than one count");
            (high - low) as f64 / (*low).max(1) as f64
        })
        .reduce(f64::max)
}

/// The most rounds any workload ran.
pub(super) fn comparisons_rounds(comparisons: &[WorkloadComparison]) -> usize {
    comparisons
        .iter()
        .flat_map(|c| c.runs.iter().map(|r| r.round))
        .max()
        .unwrap_or(0)
}

/// Per candidate: the summaries of its per-round ratios to `reference`.
pub(crate) fn summarize_candidates(
    runs: &[RunSample],
    reference: &str,
    candidates_of: &[&str],
    rounds: usize,
    (alpha, margin): (f64, f64),
    counted: bool,
    metrics: &[MetricSpec],
) -> BTreeMap<String, CandidateSummary> {
    // Criterion's per-benchmark estimates, read after each run of a cargo bench workload.
    let mut metrics = metrics.to_vec();
    let benchmarks: std::collections::BTreeSet<&String> = runs
        .iter()
        .flat_map(|r| r.metrics.keys())
        .filter(|name| name.starts_with(crate::measure::criterion::METRIC_PREFIX))
        .collect();
    for name in benchmarks {
        metrics.push(MetricSpec::read_by_pgo_build(
            name.clone(),
            Direction::Lower,
            "ns",
        ));
    }
    // Each service's own figures and the client's CPU time (see `compare::rounds`).
    let built_in: std::collections::BTreeSet<&String> = runs
        .iter()
        .flat_map(|r| r.metrics.keys())
        .filter(|name| crate::measure::metric::built_in_unit(name).is_some())
        .collect();
    for name in built_in {
        let unit = crate::measure::metric::built_in_unit(name).unwrap_or_default();
        metrics.push(MetricSpec::read_by_pgo_build(
            name.clone(),
            Direction::Lower,
            unit,
        ));
    }
    let metrics = &metrics[..];
    let mut candidates = BTreeMap::new();
    for &candidate in candidates_of {
        let ratios = |field: fn(&RunSample) -> f64| -> Vec<f64> {
            (1..=rounds)
                .map(|round| {
                    let value = |variant: &str| {
                        runs.iter()
                            .find(|r| r.round == round && r.variant == variant)
                            .map(field)
                            .unwrap_or(f64::NAN)
                    };
                    value(candidate) / value(reference)
                })
                .collect()
        };
        let walls = |variant: &str| -> Vec<f64> {
            runs.iter()
                .filter(|r| r.variant == variant)
                .map(|r| r.wall_secs)
                .collect()
        };
        candidates.insert(
            candidate.to_owned(),
            CandidateSummary {
                wall: stats::summarize_at(&ratios(|r| r.wall_secs), alpha).within_margin(margin),
                cpu: stats::summarize_at(&ratios(|r| r.cpu_secs), alpha).within_margin(margin),
                instructions: counted.then(|| {
                    stats::summarize_counts(
                        &ratios(|r| r.instructions.unwrap_or(0) as f64),
                        repeat_spread(runs),
                    )
                }),
                faults: runs.iter().all(|r| r.faults.is_some()).then(|| {
                    stats::summarize_at(&ratios(|r| r.faults.unwrap_or(0) as f64), alpha)
                        .within_margin(margin)
                }),
                reference_median_wall_secs: stats::median(&walls(reference)),
                candidate_median_wall_secs: stats::median(&walls(candidate)),
                metrics: summarize_metrics(
                    runs,
                    (reference, candidate),
                    rounds,
                    (alpha, margin),
                    metrics,
                ),
            },
        );
    }
    candidates
}

/// Judges every verdict `result` holds as one family (see `measure::family`) at `alpha`:
/// each workload's candidates against the reference and against the last release, every
/// figure with a verdict. The figure verdicts rest on is primary, the others secondary.
/// Instruction counts are not tested (they are measured above their own noise, see
/// `stats::summarize_counts`) and stay as they are.
pub(crate) fn judge_family(result: &mut CompareResult, alpha: f64) {
    let decider = result.decider();
    let mut family = Vec::new();
    visit_family(result, &decider, &mut |summary, rank| {
        family.push(Hypothesis {
            p: summary.p_value(),
            rank,
        });
    });
    result.family = Some(FamilyRule {
        rule: "weighted Holm".to_owned(),
        level: alpha,
        verdicts: family.len(),
        primary: family.iter().filter(|h| h.rank == Rank::Primary).count(),
        primary_share: family::PRIMARY_SHARE,
    });
    let judged = family::judge(&family, alpha);
    let mut next = judged.into_iter();
    let margin = result.margin;
    visit_family_mut(result, &mut |summary| {
        let judged = next.next().expect("the same family, in the same order");
        *summary = summary
            .clone()
            .within_family(judged)
            .within_margin_of_family(margin);
    });
}

/// The summaries of the family, in a fixed order, with their rank.
pub(super) fn visit_family(
    result: &CompareResult,
    decider: &Decider,
    visit: &mut dyn FnMut(&PairedSummary, Rank),
) {
    for workload in &result.workloads {
        for summary in workload.candidates.values() {
            let primary = summary.judged_by(decider);
            for (name, figure) in figures(summary) {
                if !judgeable(figure) {
                    continue;
                }
                let rank = if name == primary {
                    Rank::Primary
                } else {
                    Rank::Secondary
                };
                visit(figure, rank);
            }
        }
    }
    for previous in result.previous.iter().filter(|p| judgeable(&p.summary)) {
        visit(&previous.summary, Rank::Primary);
    }
    // Which of two good builds ships: a question after the deciding ones, judged with what
    // the family leaves (without a verdict the simpler build ships).
    for pair in result.between.iter().filter(|p| judgeable(&p.summary)) {
        visit(&pair.summary, Rank::Secondary);
    }
}

/// [`visit_family`], to change each summary.
fn visit_family_mut(result: &mut CompareResult, visit: &mut dyn FnMut(&mut PairedSummary)) {
    for workload in &mut result.workloads {
        for summary in workload.candidates.values_mut() {
            for figure in figures_mut(summary) {
                if judgeable(figure) {
                    visit(figure);
                }
            }
        }
    }
    for previous in result.previous.iter_mut().filter(|p| judgeable(&p.summary)) {
        visit(&mut previous.summary);
    }
    for pair in result.between.iter_mut().filter(|p| judgeable(&p.summary)) {
        visit(&mut pair.summary);
    }
}

/// Whether a summary is judged at all: one too coarse to judge takes no share of the level.
fn judgeable(summary: &PairedSummary) -> bool {
    summary.verdict != Verdict::TooCoarse
}

/// A candidate's tested figures by the name `judged_by` gives them: wall, CPU, page faults
/// and every workload metric (instruction counts are not tested).
fn figures(summary: &CandidateSummary) -> Vec<(String, &PairedSummary)> {
    let mut figures = vec![
        (
            crate::report::metric_label(Metric::Wall).to_owned(),
            &summary.wall,
        ),
        (
            crate::report::metric_label(Metric::Cpu).to_owned(),
            &summary.cpu,
        ),
    ];
    if let Some(faults) = &summary.faults {
        figures.push((
            crate::report::metric_label(Metric::Faults).to_owned(),
            faults,
        ));
    }
    for (name, metric) in &summary.metrics {
        figures.push((name.clone(), &metric.summary));
    }
    figures
}

/// [`figures`], in the same order, to change.
fn figures_mut(summary: &mut CandidateSummary) -> Vec<&mut PairedSummary> {
    let mut figures = vec![&mut summary.wall, &mut summary.cpu];
    if let Some(faults) = &mut summary.faults {
        figures.push(faults);
    }
    for metric in summary.metrics.values_mut() {
        figures.push(&mut metric.summary);
    }
    figures
}

/// Each workload metric of `candidate` against `reference`, paired per round as cost ratios
/// (below 1 is better whichever way the metric improves), and the tail regressions.
pub(super) fn summarize_metrics(
    runs: &[RunSample],
    (reference, candidate): (&str, &str),
    rounds: usize,
    (alpha, margin): (f64, f64),
    metrics: &[MetricSpec],
) -> BTreeMap<String, MetricComparison> {
    let mut compared = BTreeMap::new();
    for spec in metrics {
        for name in spec.compared_names() {
            let values = |variant: &str| -> Vec<f64> {
                (1..=rounds)
                    .map(|round| {
                        runs.iter()
                            .find(|r| r.round == round && r.variant == variant)
                            .and_then(|r| r.metrics.get(&name).copied())
                            .unwrap_or(f64::NAN)
                    })
                    .collect()
            };
            let (of_reference, of_candidate) = (values(reference), values(candidate));
            let costs: Vec<f64> = of_reference
                .iter()
                .zip(&of_candidate)
                .map(|(r, c)| match spec.direction {
                    Direction::Lower => c / r,
                    Direction::Higher => r / c,
                })
                .collect();
            let mut summary = stats::summarize_at(&costs, alpha).within_margin(margin);
            let both: Vec<f64> = of_reference.iter().chain(&of_candidate).copied().collect();
            // Values in coarse steps bound nothing and show no difference smaller than a step:
            // only a difference of at least one step is judged.
            if let Some((step, share)) = stats::coarse_step(&both, margin)
                && !(summary.claims_a_difference() && (summary.median_ratio - 1.0).abs() >= share)
            {
                summary = summary.too_coarse(step, share, &spec.unit, margin);
            }
            compared.insert(
                name,
                MetricComparison {
                    unit: spec.unit.clone(),
                    direction: spec.direction,
                    reference_median: stats::median(&of_reference),
                    candidate_median: stats::median(&of_candidate),
                    summary,
                    tail_regression: false,
                },
            );
        }
        flag_tail_regressions(spec, &mut compared);
    }
    compared
}

/// A distribution's high percentiles (p90 and above) that are worse while its lowest
/// percentile (the median, usually) is better or the same.
fn flag_tail_regressions(spec: &MetricSpec, compared: &mut BTreeMap<String, MetricComparison>) {
    let Some(&lowest) = spec.percentiles.iter().min() else {
        return;
    };
    let body = &compared[&MetricSpec::percentile_name(spec.name(), lowest)].summary;
    let body_fine = matches!(body.verdict, Verdict::Faster | Verdict::NoDifference)
        || (body.verdict != Verdict::Slower && body.median_ratio <= 1.0);
    for &p in spec
        .percentiles
        .iter()
        .filter(|p| **p >= 90 && **p > lowest)
    {
        let tail = compared
            .get_mut(&MetricSpec::percentile_name(spec.name(), p))
            .expect("every percentile was compared");
        tail.tail_regression = body_fine && tail.summary.verdict == Verdict::Slower;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(round: usize, variant: &str, metrics: &[(&str, f64)]) -> RunSample {
        RunSample {
            round,
            variant: variant.to_owned(),
            wall_secs: 1.0,
            cpu_secs: 1.0,
            instructions: None,
            faults: None,
            metrics: metrics.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
        }
    }

    fn spec(text: &str) -> MetricSpec {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn a_metric_in_steps_larger_than_the_margin_is_named_not_judged() {
        // redis-benchmark's p50 comes from histogram buckets: 0.023 or 0.031 ms.
        let spec = spec("name = \"p50\"\ndirection = \"lower\"\nunit = \"ms\"");
        let mut runs = Vec::new();
        for round in 1..=10 {
            let bucket = |odd: bool| if odd { 0.031 } else { 0.023 };
            runs.push(run(round, "base", &[("p50", bucket(round % 3 == 0))]));
            runs.push(run(round, "pgo", &[("p50", bucket(round % 4 == 0))]));
        }
        let compared = summarize_metrics(&runs, ("base", "pgo"), 10, (0.05, 0.02), &[spec]);
        let p50 = &compared["p50"].summary;
        assert_eq!(p50.verdict, Verdict::TooCoarse, "{p50:?}");
        let note = p50.resolution_note.as_deref().unwrap();
        assert!(note.contains("steps of 0.008 ms"), "{note}");
        assert!(note.contains("too coarse to judge"), "{note}");
        // Finely resolved values are judged as before.
        assert!(stats::coarse_step(&[1.0001, 1.0002, 0.9999, 1.0], 0.02).is_none());
        assert!(stats::coarse_step(&[5.0, 5.0, 5.0], 0.02).is_none());
    }

    #[test]
    fn a_higher_is_better_metric_reads_better_when_it_rises() {
        let spec = spec("name = \"rps\"\ndirection = \"higher\"\nunit = \"req/s\"");
        let mut runs = Vec::new();
        for round in 1..=10 {
            let noise = round as f64;
            runs.push(run(round, "base", &[("rps", 1000.0 + noise)]));
            runs.push(run(round, "pgo", &[("rps", 1200.0 + noise)]));
        }
        let compared = summarize_metrics(&runs, ("base", "pgo"), 10, (0.05, 1.0), &[spec]);
        let rps = &compared["rps"];
        assert_eq!(rps.summary.verdict, Verdict::Faster, "{rps:?}");
        assert!(rps.summary.median_ratio < 0.85, "{rps:?}");
        assert!(rps.candidate_median > rps.reference_median);
    }

    #[test]
    fn a_worse_tail_is_flagged_when_the_median_improved() {
        let spec = spec(
            "name = \"latency\"\ndirection = \"lower\"\nunit = \"ms\"\npercentiles = [50, 99]",
        );
        let mut runs = Vec::new();
        for round in 1..=10 {
            let noise = round as f64 / 100.0;
            runs.push(run(
                round,
                "base",
                &[("latency.p50", 10.0 + noise), ("latency.p99", 20.0 + noise)],
            ));
            runs.push(run(
                round,
                "pgo",
                &[("latency.p50", 8.0 + noise), ("latency.p99", 30.0 + noise)],
            ));
        }
        let compared = summarize_metrics(
            &runs,
            ("base", "pgo"),
            10,
            (0.05, 1.0),
            std::slice::from_ref(&spec),
        );
        assert_eq!(compared["latency.p50"].summary.verdict, Verdict::Faster);
        assert_eq!(compared["latency.p99"].summary.verdict, Verdict::Slower);
        assert!(compared["latency.p99"].tail_regression);
        assert!(!compared["latency.p50"].tail_regression);
        // Both worse: a plain regression, not a tail one.
        let worse: Vec<RunSample> = runs
            .iter()
            .map(|r| {
                let mut r = r.clone();
                if r.variant == "pgo" {
                    r.metrics
                        .insert("latency.p50".to_owned(), 12.0 + r.round as f64 / 100.0);
                }
                r
            })
            .collect();
        let compared = summarize_metrics(&worse, ("base", "pgo"), 10, (0.05, 1.0), &[spec]);
        assert!(!compared["latency.p99"].tail_regression);
    }
}
