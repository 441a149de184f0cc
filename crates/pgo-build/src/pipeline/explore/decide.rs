//! The decision, from records only (pure, unit-tested): Pareto fronts of speed against build
//! time and size, and the recommendation with its evidence.

use std::collections::BTreeMap;

use super::variants::{BASELINE, PGO};
use crate::config::{self, Growth};
use crate::measure::decision::{Outcome, outcome, standing};
use crate::measure::stats::{self, PairedSummary, Verdict};
use crate::report::VariantStatus;
use crate::report::{ExploreRecommendation, ExploreSpeed, ExploreVariantRecord};

/// Marks the variants on the Pareto front of speed against each cost: no other measured
/// variant is at least as fast and at least as cheap, and better in one of the two.
pub fn mark_fronts(records: &mut [ExploreVariantRecord]) {
    type Cost = fn(&ExploreVariantRecord) -> Option<f64>;
    let costs: [(&str, Cost); 3] = [
        ("build time", |r| r.build_secs),
        ("peak memory", |r| r.peak_memory_bytes.map(|b| b as f64)),
        ("size", |r| r.loaded_bytes.map(|b| b as f64)),
    ];
    let points: Vec<Option<(f64, [Option<f64>; 3])>> = records
        .iter()
        .map(|r| {
            let speed = r.vs_baseline.as_ref().map(|s| s.ratio).or(
                // The baseline is the unit of speed.
                (r.name == BASELINE && r.status == VariantStatus::Measured).then_some(1.0),
            )?;
            Some((speed, costs.map(|(_, cost)| cost(r))))
        })
        .collect();
    for (i, record) in records.iter_mut().enumerate() {
        record.front.clear();
        let Some((speed, own)) = points[i] else {
            continue;
        };
        for (c, (name, _)) in costs.iter().enumerate() {
            let Some(cost) = own[c] else { continue };
            let dominated = points.iter().enumerate().any(|(j, other)| {
                let Some((other_speed, other_costs)) = other else {
                    return false;
                };
                let Some(other_cost) = other_costs[c] else {
                    return false;
                };
                j != i
                    && *other_speed <= speed
                    && other_cost <= cost
                    && (*other_speed < speed || other_cost < cost)
            });
            if !dominated {
                record.front.push((*name).to_owned());
            }
        }
    }
}

/// What explore concludes: a variant to ship, or why the measurements cannot decide yet.
#[derive(Debug, Clone)]
pub enum Decision {
    Recommend(ExploreRecommendation),
    /// An inconclusive measurement is never a reason to drop PGO: the reason, and what would
    /// resolve it.
    Undecided(String),
}

/// The variant to ship (see [`recommend_by_speed`]), its evidence with what the C compiler
/// switch alone did where the C variants were measured ([`compiler_switch`]).
pub fn recommend(
    records: &[ExploreVariantRecord],
    limit: Option<&config::Growth>,
    margin: f64,
) -> Decision {
    match (
        recommend_by_speed(records, limit, margin),
        compiler_switch(records),
    ) {
        // (clang recommended: its evidence is already the switch's.)
        (Decision::Recommend(mut recommendation), Some(switch))
            if recommendation.variant != super::variants::CLANG =>
        {
            recommendation.evidence = format!("{}; {switch}", recommendation.evidence);
            Decision::Recommend(recommendation)
        }
        (decision, _) => decision,
    }
}

/// Where `clang` (the C built by clang, no profile) and a profiled C variant were measured:
/// what the compiler switch alone did against the baseline, which the C variants' difference
/// from `pgo` includes (a slower clang is no fault of the profile).
fn compiler_switch(records: &[ExploreVariantRecord]) -> Option<String> {
    let measured = |name: &str| {
        records
            .iter()
            .find(|r| r.name == name && r.status == VariantStatus::Measured)
    };
    let clang = measured(super::variants::CLANG)?.vs_baseline.as_ref()?;
    let profiled_c = records
        .iter()
        .any(|r| r.name.starts_with(super::variants::PGO_C) && r.status == VariantStatus::Measured);
    let standing = match clang.verdict {
        Verdict::Faster => "faster than",
        Verdict::Slower => "slower than",
        _ => "not shown different from",
    };
    profiled_c.then(|| {
        format!(
            "the C compiler switch alone (clang, no profile) is {standing} the baseline \
             ({:+.1}%, {}), which the pgo+c variants' difference from pgo includes",
            (clang.ratio - 1.0) * 100.0,
            evidence_of(clang)
        )
    })
}

/// The variant to ship: the fastest that beat `pgo` (faster on some holdout workloads and the
/// same within `margin` on the rest, by the paired tests) within the size limit; else `pgo`
/// when it beat the baseline; else the baseline, when pgo is shown slower or the same within
/// the margin; else nothing yet.
fn recommend_by_speed(
    records: &[ExploreVariantRecord],
    limit: Option<&config::Growth>,
    margin: f64,
) -> Decision {
    let percent = |ratio: f64| (1.0 - ratio) * 100.0;
    let costs = |r: &ExploreVariantRecord, reference: Option<&ExploreVariantRecord>| {
        let mut words = Vec::new();
        if let (Some(own), Some(other)) = (r.build_secs, reference.and_then(|p| p.build_secs)) {
            words.push(format!("build time {:.1}x pgo's", own / other.max(1e-3)));
        }
        if let Some(change) = r.size_change {
            words.push(format!("size {:+.1}% over the baseline", change * 100.0));
        }
        words.join(", ")
    };
    let pgo = records.iter().find(|r| r.name == PGO);
    let better = records
        .iter()
        .filter(|r| r.name != PGO && r.name != BASELINE && r.status == VariantStatus::Measured)
        .filter(|r| !r.over_size_limit)
        .filter(|r| {
            r.vs_pgo
                .as_ref()
                .is_some_and(|s| s.verdict == Verdict::Faster)
        })
        .min_by(|a, b| {
            let ratio = |r: &ExploreVariantRecord| r.vs_pgo.as_ref().map_or(1.0, |s| s.ratio);
            ratio(a).total_cmp(&ratio(b))
        });
    if let Some(best) = better {
        let vs_pgo = best.vs_pgo.as_ref().expect("filtered on it");
        return Decision::Recommend(ExploreRecommendation {
            variant: best.name.clone(),
            better_than_pgo: true,
            evidence: format!(
                "{:.1}% {} than pgo ({}), {:.1}% {} than the baseline; {}",
                percent(vs_pgo.ratio),
                better_word(vs_pgo),
                evidence_of(vs_pgo),
                best.vs_baseline.as_ref().map_or(0.0, |s| percent(s.ratio)),
                best.vs_baseline.as_ref().map_or("faster", better_word),
                costs(best, pgo)
            ),
        });
    }
    let candidates = records
        .iter()
        .filter(|r| r.name != PGO && r.name != BASELINE && r.status == VariantStatus::Measured)
        .count();
    let none_better = format!(
        "no variant is better than pgo ({candidates} measured against it{})",
        limit
            .map(|l| format!(", [pgo] max_size_growth = {:?}", l.text))
            .unwrap_or_default()
    );
    match pgo.and_then(|p| p.vs_baseline.as_ref().map(|s| (p, s))) {
        Some((pgo, vs_baseline))
            if vs_baseline.verdict == Verdict::Faster && !pgo.over_size_limit =>
        {
            Decision::Recommend(ExploreRecommendation {
                variant: PGO.to_owned(),
                better_than_pgo: false,
                evidence: format!(
                    "{none_better}; pgo is {:.1}% {} than the baseline ({})",
                    percent(vs_baseline.ratio),
                    better_word(vs_baseline),
                    evidence_of(vs_baseline)
                ),
            })
        }
        Some((pgo, vs_baseline))
            if matches!(
                outcome_over(&vs_baseline.workloads, margin),
                Some(Outcome::Worse | Outcome::Mixed | Outcome::Same | Outcome::NotWorse)
            ) || pgo.over_size_limit =>
        {
            Decision::Recommend(ExploreRecommendation {
                variant: BASELINE.to_owned(),
                better_than_pgo: false,
                evidence: format!(
                    "{none_better}, and pgo is {} ({:+.1}%, {})",
                    if pgo.over_size_limit {
                        "over [pgo] max_size_growth".to_owned()
                    } else {
                        match outcome_over(&vs_baseline.workloads, margin) {
                            Some(Outcome::Worse) => "slower than the baseline".to_owned(),
                            Some(Outcome::Mixed) => {
                                "slower than the baseline on some workloads".to_owned()
                            }
                            Some(Outcome::NotWorse) => format!(
                                "not slower than the baseline by more than the margin of \
                                 {:.1}%, and not shown faster",
                                margin * 100.0
                            ),
                            _ => format!(
                                "the same as the baseline within the margin of {:.1}%",
                                margin * 100.0
                            ),
                        }
                    },
                    -percent(vs_baseline.ratio),
                    evidence_of(vs_baseline)
                ),
            })
        }
        Some((_, vs_baseline)) => Decision::Undecided(format!(
            "{none_better}, and whether pgo is faster than the baseline is not shown yet \
             ({:+.1}%, {}): neither faster nor the same within the margin of {:.1}%. \
             More rounds (`--rounds`) or a larger `--budget` would decide (with wall or CPU \
             time, so would instruction counts: valgrind installed, or `--metric \
             instructions`); an unclear result is no reason to drop PGO",
            -percent(vs_baseline.ratio),
            evidence_of(vs_baseline),
            margin * 100.0
        )),
        None => Decision::Undecided(format!("{none_better}, and pgo was not measured")),
    }
}

/// "faster", or "fewer instructions" where instruction counts decided.
fn better_word(speed: &ExploreSpeed) -> &'static str {
    match speed.decided_by {
        Some(_) => "fewer instructions",
        None => "faster",
    }
}

/// "interval 0.95-0.97 on `a`; 10/10 rounds faster on `b`".
pub(super) fn evidence_of(speed: &ExploreSpeed) -> String {
    let by = speed
        .decided_by
        .as_ref()
        .map(|by| format!("by {by}: "))
        .unwrap_or_default();
    by + &speed
        .workloads
        .iter()
        .map(|(workload, s)| {
            format!(
                "`{workload}`: {:.3} [{:.3}, {:.3}], {}/{} rounds faster",
                s.median_ratio, s.ci_low, s.ci_high, s.wins, s.pairs
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The verdict over several workloads, by the rule every decision uses
/// (`measure::decision`): faster when better on some and the same or not worse on the rest,
/// slower when worse on some and better on none, the same when the same on all; otherwise
/// inconclusive (or too few rounds).
pub(super) fn verdict_over(workloads: &BTreeMap<String, PairedSummary>, margin: f64) -> Verdict {
    if workloads
        .values()
        .any(|s| s.verdict == Verdict::TooFewRounds)
    {
        return Verdict::TooFewRounds;
    }
    match outcome_over(workloads, margin) {
        Some(Outcome::Better) => Verdict::Faster,
        Some(Outcome::Worse) => Verdict::Slower,
        Some(Outcome::Same) => Verdict::NoDifference,
        _ => Verdict::Inconclusive,
    }
}

/// Where a variant stands over the workloads (see `measure::decision`).
pub(super) fn outcome_over(
    workloads: &BTreeMap<String, PairedSummary>,
    margin: f64,
) -> Option<Outcome> {
    outcome(workloads.values().map(|s| standing(s, margin)))
}

/// A speed over several workloads: the geometric mean of their median ratios, and the
/// verdict over them (see [`verdict_over`]).
pub(super) fn speed(
    per_workload: impl Iterator<Item = (String, PairedSummary)>,
    margin: f64,
) -> ExploreSpeed {
    let workloads: BTreeMap<String, PairedSummary> = per_workload.collect();
    let ratios: Vec<f64> = workloads.values().map(|s| s.median_ratio).collect();
    ExploreSpeed {
        ratio: stats::geometric_mean(&ratios),
        verdict: verdict_over(&workloads, margin),
        workloads,
        decided_by: None,
    }
}

/// The verdicts of measurements made (and kept) earlier, under the margin now configured.
pub fn apply_margin(records: &mut [ExploreVariantRecord], margin: f64) {
    for record in records {
        for speed in [&mut record.vs_baseline, &mut record.vs_pgo]
            .into_iter()
            .flatten()
        {
            speed.verdict = verdict_over(&speed.workloads, margin);
        }
    }
}

/// Each built variant's loaded size against the baseline's, and whether a PGO variant grew
/// past `[pgo] max_size_growth` (such a variant is measured, but never recommended).
pub(super) fn mark_size_changes(records: &mut [ExploreVariantRecord], limit: Option<&Growth>) {
    let baseline_size = records
        .iter()
        .find(|r| r.name == BASELINE)
        .and_then(|r| r.loaded_bytes);
    for record in records {
        if let (Some(size), Some(baseline)) = (record.loaded_bytes, baseline_size) {
            let change = size as f64 / baseline.max(1) as f64 - 1.0;
            record.size_change = Some(change);
            record.over_size_limit =
                limit.is_some_and(|limit| record.pgo && change > limit.fraction);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::explore::variants::{
        Variant, builtin_variants, measured_record, new_record,
    };

    const MARGIN: f64 = 0.02;

    fn recommended(decision: Decision) -> ExploreRecommendation {
        match decision {
            Decision::Recommend(recommendation) => recommendation,
            Decision::Undecided(why) => panic!("undecided: {why}"),
        }
    }

    fn summary(ratio: f64, verdict: Verdict) -> PairedSummary {
        PairedSummary {
            pairs: 10,
            median_ratio: ratio,
            ci_low: ratio - 0.01,
            ci_high: ratio + 0.01,
            confidence: 0.95,
            wins: if ratio < 1.0 { 10 } else { 0 },
            wilcoxon_p: 0.002,
            sign_test_p: 0.002,
            p: 0.002,
            verdict,
            bound: None,
            more_rounds: None,
            resolves: None,
            resolution_note: None,
            family_level: None,
            family_ci: None,
            left_open_by: None,
            ratios: Vec::new(),
        }
    }

    fn measured(
        name: &str,
        vs_baseline: f64,
        vs_pgo: Option<(f64, Verdict)>,
        build_secs: f64,
        size: u64,
    ) -> ExploreVariantRecord {
        let mut record = measured_record(name);
        record.build_secs = Some(build_secs);
        record.peak_memory_bytes = Some(100);
        record.size_bytes = Some(size);
        record.loaded_bytes = Some(size);
        record.size_change = Some(size as f64 / 1000.0 - 1.0);
        let verdict = if vs_baseline < 0.98 {
            Verdict::Faster
        } else {
            Verdict::NoDifference
        };
        if name != BASELINE {
            record.vs_baseline = Some(speed(
                [("h".to_owned(), summary(vs_baseline, verdict))].into_iter(),
                MARGIN,
            ));
        }
        record.vs_pgo = vs_pgo.map(|(ratio, verdict)| {
            speed(
                [("h".to_owned(), summary(ratio, verdict))].into_iter(),
                MARGIN,
            )
        });
        record
    }

    #[test]
    fn the_fastest_variant_that_beat_pgo_within_the_size_limit_is_recommended() {
        let mut records = vec![
            measured("baseline", 1.0, None, 10.0, 1000),
            measured("pgo", 0.9, None, 30.0, 1010),
            measured("pgo+lto", 0.85, Some((0.94, Verdict::Faster)), 60.0, 900),
            measured("pgo+cgu1", 0.80, Some((0.89, Verdict::Faster)), 50.0, 1300),
            measured(
                "pgo+split",
                0.89,
                Some((0.99, Verdict::NoDifference)),
                31.0,
                1000,
            ),
        ];
        let chosen = recommended(recommend(&records, None, MARGIN));
        assert_eq!(chosen.variant, "pgo+cgu1");
        assert!(chosen.better_than_pgo);
        assert!(
            chosen.evidence.contains("11.0% faster than pgo"),
            "{}",
            chosen.evidence
        );
        // Over the size limit: the next best.
        records[3].over_size_limit = true;
        let chosen = recommended(recommend(&records, None, MARGIN));
        assert_eq!(chosen.variant, "pgo+lto");
        // Nothing beat pgo: pgo, said so.
        records[2].vs_pgo = Some(speed(
            [("h".to_owned(), summary(0.97, Verdict::Inconclusive))].into_iter(),
            MARGIN,
        ));
        let chosen = recommended(recommend(&records, None, MARGIN));
        assert_eq!(chosen.variant, "pgo");
        assert!(!chosen.better_than_pgo);
        assert!(
            chosen.evidence.starts_with("no variant is better than pgo"),
            "{}",
            chosen.evidence
        );
        // And pgo the same as the baseline within the margin: the baseline.
        records[1] = measured("pgo", 0.995, None, 30.0, 1010);
        let same = recommended(recommend(&records, None, MARGIN));
        assert_eq!(same.variant, "baseline");
        assert!(
            same.evidence.contains("within the margin of 2.0%"),
            "{}",
            same.evidence
        );
    }

    /// With clang and pgo+c measured, the evidence separates the compiler switch from the
    /// profile: pgo+c slower than pgo here, because clang alone is.
    #[test]
    fn the_compiler_switch_is_told_apart_from_the_profile() {
        let mut records = vec![
            measured("baseline", 1.0, None, 10.0, 1000),
            measured("pgo", 0.9, None, 30.0, 1010),
            measured("clang", 1.06, None, 10.0, 1000),
            measured("pgo+c", 0.95, Some((1.05, Verdict::Slower)), 30.0, 1010),
        ];
        records[2].vs_baseline = Some(speed(
            [("h".to_owned(), summary(1.06, Verdict::Slower))].into_iter(),
            MARGIN,
        ));
        let chosen = recommended(recommend(&records, None, MARGIN));
        assert_eq!(chosen.variant, "pgo");
        assert!(
            chosen.evidence.contains(
                "the C compiler switch alone (clang, no profile) is slower than the baseline \
                 (+6.0%"
            ),
            "{}",
            chosen.evidence
        );
        // Without a profiled C variant there is nothing to tell apart.
        let chosen = recommended(recommend(&records[..3], None, MARGIN));
        assert!(
            !chosen.evidence.contains("compiler switch"),
            "{}",
            chosen.evidence
        );
    }

    #[test]
    fn an_unclear_pgo_is_no_reason_to_drop_it() {
        let mut records = vec![
            measured("baseline", 1.0, None, 10.0, 1000),
            measured("pgo", 0.9, None, 30.0, 1010),
        ];
        // -10%, but the interval 0.80-1.03 neither excludes 1 nor lies within the margin.
        let mut wide = summary(0.9, Verdict::NoDifference);
        (wide.ci_low, wide.ci_high) = (0.80, 1.03);
        records[1].vs_baseline = Some(speed([("h".to_owned(), wide)].into_iter(), MARGIN));
        assert_eq!(
            records[1].vs_baseline.as_ref().unwrap().verdict,
            Verdict::Inconclusive
        );
        match recommend(&records, None, MARGIN) {
            Decision::Undecided(why) => {
                assert!(why.contains("--metric instructions"), "{why}");
                assert!(why.contains("no reason to drop PGO"), "{why}");
            }
            Decision::Recommend(r) => panic!("recommended {} from no evidence", r.variant),
        }
        // Shown slower: the baseline.
        records[1].vs_baseline = Some(speed(
            [("h".to_owned(), summary(1.05, Verdict::Slower))].into_iter(),
            MARGIN,
        ));
        assert_eq!(
            recommended(recommend(&records, None, MARGIN)).variant,
            "baseline"
        );
    }

    #[test]
    fn faster_on_some_workloads_and_the_same_on_the_rest_is_faster() {
        // ouch with cross-language PGO: bz2 and zst faster, xz (system C) unchanged.
        let workloads = [
            ("bz2", summary(0.885, Verdict::Faster)),
            ("zst", summary(0.758, Verdict::Faster)),
            ("xz", summary(0.9999, Verdict::NoDifference)),
        ];
        let over = |margin| {
            speed(
                workloads.iter().map(|(w, s)| (w.to_string(), s.clone())),
                margin,
            )
            .verdict
        };
        assert_eq!(over(MARGIN), Verdict::Faster);
        // A wide interval on one workload is not "the same".
        let mut wide = workloads.clone();
        (wide[2].1.ci_low, wide[2].1.ci_high) = (0.9, 1.1);
        let verdict = speed(wide.iter().map(|(w, s)| (w.to_string(), s.clone())), MARGIN).verdict;
        assert_eq!(verdict, Verdict::Inconclusive);
        // Faster on one, slower on another: not faster.
        let mut mixed = workloads.clone();
        mixed[2].1 = summary(1.05, Verdict::Slower);
        let verdict = speed(
            mixed.iter().map(|(w, s)| (w.to_string(), s.clone())),
            MARGIN,
        )
        .verdict;
        assert_eq!(verdict, Verdict::Inconclusive);
    }

    #[test]
    fn a_variant_is_on_a_front_unless_another_is_as_fast_and_as_cheap() {
        let mut records = vec![
            measured("baseline", 1.0, None, 10.0, 1000),
            measured("pgo", 0.9, None, 30.0, 1010),
            // Slower and costlier than pgo in every respect: on no front.
            measured("pgo+split", 0.95, None, 40.0, 1020),
            measured("pgo+lto", 0.85, None, 60.0, 900),
        ];
        records.push(new_record(&builtin_variants()[4]));
        mark_fronts(&mut records);
        let fronts: Vec<(&str, Vec<String>)> = records
            .iter()
            .map(|r| (r.name.as_str(), r.front.clone()))
            .collect();
        // Everything measured used the same peak memory: only the fastest is on that front.
        assert_eq!(fronts[0].1, ["build time"]);
        assert_eq!(fronts[1].1, ["build time"]);
        assert!(fronts[2].1.is_empty());
        assert_eq!(fronts[3].1, ["build time", "peak memory", "size"]);
        assert!(
            fronts[4].1.is_empty(),
            "unmeasured variants are on no front"
        );
    }

    #[test]
    fn only_pgo_variants_past_the_growth_limit_are_marked() {
        let sized = |variant: &Variant, bytes: u64| ExploreVariantRecord {
            loaded_bytes: Some(bytes),
            ..new_record(variant)
        };
        let variants = builtin_variants();
        let mut baseline_grown = variants[0].clone();
        baseline_grown.name = "opt3".to_owned();
        let mut records = vec![
            sized(&variants[0], 1000),
            sized(&variants[1], 1040),
            sized(&variants[2], 1100),
            sized(&baseline_grown, 1200),
        ];
        let limit = Growth {
            fraction: 0.05,
            text: "5%".to_owned(),
        };
        mark_size_changes(&mut records, Some(&limit));
        let marked: Vec<(f64, bool)> = records
            .iter()
            .map(|r| ((r.size_change.unwrap() * 100.0).round(), r.over_size_limit))
            .collect();
        assert_eq!(
            marked,
            [(0.0, false), (4.0, false), (10.0, true), (20.0, false)]
        );
        mark_size_changes(&mut records, None);
        assert!(records.iter().all(|r| !r.over_size_limit));
    }
}
