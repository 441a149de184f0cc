//! The summaries of paired rounds: per candidate, the ratios of every measured figure and of
//! every workload metric to the reference's in the same round, with their verdicts, and the
//! tail regressions a distribution's median hides. Pure functions of the runs.

use std::collections::BTreeMap;

use crate::measure::metrics::{Direction, MetricSpec};
use crate::measure::stats::{self, Verdict};
use crate::report::{CandidateSummary, MetricComparison, RunSample, WorkloadComparison};

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
            let (low, high) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
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
    (alpha, seed, margin): (f64, u64, f64),
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
                wall: stats::summarize_at(&ratios(|r| r.wall_secs), seed, alpha)
                    .within_margin(margin),
                cpu: stats::summarize_at(&ratios(|r| r.cpu_secs), seed, alpha)
                    .within_margin(margin),
                instructions: counted.then(|| {
                    stats::summarize_counts(
                        &ratios(|r| r.instructions.unwrap_or(0) as f64),
                        repeat_spread(runs),
                    )
                }),
                faults: runs.iter().all(|r| r.faults.is_some()).then(|| {
                    stats::summarize_at(&ratios(|r| r.faults.unwrap_or(0) as f64), seed, alpha)
                        .within_margin(margin)
                }),
                reference_median_wall_secs: stats::median(&walls(reference)),
                candidate_median_wall_secs: stats::median(&walls(candidate)),
                metrics: summarize_metrics(
                    runs,
                    (reference, candidate),
                    rounds,
                    (alpha, seed, margin),
                    metrics,
                ),
            },
        );
    }
    candidates
}

/// Each workload metric of `candidate` against `reference`, paired per round as cost ratios
/// (below 1 is better whichever way the metric improves), and the tail regressions.
pub(super) fn summarize_metrics(
    runs: &[RunSample],
    (reference, candidate): (&str, &str),
    rounds: usize,
    (alpha, seed, margin): (f64, u64, f64),
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
            compared.insert(
                name,
                MetricComparison {
                    unit: spec.unit.clone(),
                    direction: spec.direction,
                    reference_median: stats::median(&of_reference),
                    candidate_median: stats::median(&of_candidate),
                    summary: stats::summarize_at(&costs, seed, alpha).within_margin(margin),
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
    fn a_higher_is_better_metric_reads_better_when_it_rises() {
        let spec = spec("name = \"rps\"\ndirection = \"higher\"\nunit = \"req/s\"");
        let mut runs = Vec::new();
        for round in 1..=10 {
            let noise = round as f64;
            runs.push(run(round, "base", &[("rps", 1000.0 + noise)]));
            runs.push(run(round, "pgo", &[("rps", 1200.0 + noise)]));
        }
        let compared = summarize_metrics(&runs, ("base", "pgo"), 10, (0.05, 1, 1.0), &[spec]);
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
            (0.05, 1, 1.0),
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
        let compared = summarize_metrics(&worse, ("base", "pgo"), 10, (0.05, 1, 1.0), &[spec]);
        assert!(!compared["latency.p99"].tail_regression);
    }
}
