//! The answer a user reads first: which variant to ship and why, then one line per held-out
//! workload with the speed-up, the interval its verdict was judged by and the rounds, the
//! geometric mean, what BOLT adds against its size, the size change and the build's cost
//! against a plain build. The same sentences on every surface (the end of `run` and
//! `compare`, the top of `report`, the Markdown summary and the HTML page), so a figure a
//! user quotes is one the tool concluded. A pure function of the [`Report`].

use crate::measure::metric::{CLIENT_CPU, Decider, Metric, SERVICES_CPU};
use crate::measure::stats::{MIN_PAIRS, PairedSummary, Verdict};
use crate::report::file::Report;
use crate::report::records::{CompareResult, WorkloadComparison, decider_label};

/// BOLT is worth shipping over the optimized build when it is at least this much faster
/// (geometric means)…
const BOLT_WORTH_GAIN: f64 = 0.02;
/// …or when it makes no binary's loaded code this much larger.
const BOLT_SIZE_TOLERATED: f64 = 0.10;

/// The answer: a headline, then the lines that support it.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub headline: String,
    pub lines: Vec<String>,
}

impl Answer {
    /// For a terminal: the headline, then each line indented, wrapped at spaces to the width.
    pub fn text(&self) -> String {
        let mut out = self.headline.clone();
        for line in &self.lines {
            out.push_str("\n  ");
            out.push_str(line);
        }
        crate::util::printer::fit_indented(&out)
    }

    /// For the Markdown summary: a heading, the headline in bold, the lines as a list.
    pub fn markdown(&self) -> String {
        let mut out = format!("### Verdict\n\n**{}**\n\n", self.headline);
        for line in &self.lines {
            out.push_str(&format!("- {line}\n"));
        }
        out.push('\n');
        out
    }
}

/// The answer of the report's last comparison; `None` when nothing was compared.
pub fn answer(report: &Report) -> Option<Answer> {
    let compare = report.compare.as_ref()?;
    let decider = compare.decider();
    let held_out: Vec<&WorkloadComparison> = compare
        .workloads
        .iter()
        .filter(|w| w.role == "holdout")
        .collect();
    let (judged, on_training) = if held_out.is_empty() {
        (compare.workloads.iter().collect::<Vec<_>>(), true)
    } else {
        (held_out, false)
    };
    let mut lines = Vec::new();
    for workload in &judged {
        for (candidate, summary) in workload.in_order(&compare.candidates) {
            let judged = summary.judged(&decider);
            let open = !matches!(
                judged.verdict,
                Verdict::Faster | Verdict::Slower | Verdict::NoDifference
            );
            lines.push(format!(
                "{}: {}{}",
                workload.workload,
                workload_line(
                    candidate,
                    &compare.reference,
                    judged,
                    &summary.judged_by(&decider),
                    &decider
                ),
                if open && workload.budget_ran_out {
                    " (stopped by the time budget: --budget or [compare] budget)"
                } else {
                    ""
                }
            ));
        }
    }
    let role = if on_training { "train" } else { "holdout" };
    let means = compare.geometric_mean.get(role);
    if judged.len() > 1
        && let Some(means) = means
    {
        let said: Vec<String> = compare
            .candidates
            .iter()
            .filter_map(|c| Some(format!("{c} {}", times(*means.get(c)?, &decider))))
            .collect();
        lines.push(format!(
            "Geometric mean over the {} {} workloads: {}",
            judged.len(),
            if on_training { "training" } else { "held-out" },
            said.join(", ")
        ));
    }
    let proven: Vec<&String> = compare
        .candidates
        .iter()
        .filter(|c| proven_faster(&judged, c, &decider))
        .collect();
    let ship = choose(report, compare, &proven, means, &mut lines);
    let headline = match (ship, on_training) {
        (_, true) => "Not proven: no held-out workload was compared, and training work \
                      flatters PGO; a [[workload]] with role = \"holdout\" judges the binaries \
                      on work training never saw"
            .to_owned(),
        (Some(ship), false) => match means.and_then(|m| m.get(ship)) {
            Some(mean) => format!(
                "Ship {ship}: {} than {} on held-out work{}",
                times(*mean, &decider),
                compare.reference,
                if judged.len() > 1 {
                    " (geometric mean)"
                } else {
                    ""
                }
            ),
            None => format!(
                "Ship {ship}: {} than {} on held-out work",
                words(&decider).0,
                compare.reference
            ),
        },
        (None, false) => not_proven_headline(compare, &judged, &decider),
    };
    // Unproven, the size of a variant nobody should ship yet is beside the point.
    let ship = ship.filter(|_| !on_training);
    if let Some(sizes) = ship.and_then(|ship| size_line(report, ship, &compare.reference)) {
        lines.push(sizes);
    }
    // The gate ships BOLT whenever it is enabled: say so where the answer differs.
    if ship.is_some_and(|s| s != "bolt")
        && !report.bolt.is_empty()
        && compare.candidates.iter().any(|c| c == "bolt")
    {
        lines.push(format!(
            "`pgo-build gate` ships bolt while [bolt] enabled = true: set it to false in \
             pgo-build.toml to ship {}",
            ship.map_or("optimized", |s| s.as_str())
        ));
    }
    if let Some(cost) = build_cost_line(report) {
        lines.push(cost);
    }
    let family_intervals = judged.iter().any(|w| {
        w.candidates
            .values()
            .any(|s| s.judged(&decider).family_ci.is_some())
    });
    if family_intervals {
        lines.push(
            "Intervals are the ones the verdicts were judged by: wider than 95% where many \
             verdicts share one 5% chance of any false one"
                .to_owned(),
        );
    }
    Some(Answer { headline, lines })
}

/// "optimized is 1.27× faster than baseline (1.13–1.43×), 10/10 rounds".
fn workload_line(
    candidate: &str,
    reference: &str,
    summary: &PairedSummary,
    judged_by: &str,
    decider: &Decider,
) -> String {
    let by = match decider {
        Decider::Measured(Metric::Wall) if judged_by == "wall" => String::new(),
        _ if judged_by == SERVICES_CPU => ", by the services' own CPU time".to_owned(),
        _ => match judged_by {
            "wall" => ", by wall time".to_owned(),
            "CPU" => ", by CPU time".to_owned(),
            other => format!(", by {other}"),
        },
    };
    // The rounds that agree with the verdict: won for a faster one, lost for a slower one.
    let agreeing = match summary.verdict {
        Verdict::Slower => summary.pairs.saturating_sub(summary.wins),
        _ => summary.wins,
    };
    let rounds = format!("{agreeing}/{} rounds", summary.pairs);
    let (low, high) = summary.verdict_interval();
    let (better, worse) = words(decider);
    match summary.verdict {
        Verdict::Faster => format!(
            "{candidate} is {:.2}× {better} than {reference} ({:.2}–{:.2}×), {rounds}{by}",
            1.0 / summary.median_ratio,
            1.0 / high,
            1.0 / low
        ),
        Verdict::Slower => format!(
            "{candidate} is {:.2}× {worse} than {reference} ({:.2}–{:.2}×), {rounds}{by}",
            summary.median_ratio, low, high
        ),
        Verdict::NoDifference => format!(
            "{candidate} is no different from {reference}: within ±{:.1}%, {} rounds{by}",
            summary.bound.unwrap_or_default() * 100.0,
            summary.pairs
        ),
        Verdict::Inconclusive => format!(
            "{candidate} is not proven {better}: {} in the median, but the interval the \
             verdict was judged by, {:.2}–{:.2}× of {reference}, reaches 1.00 ({} rounds; about \
             {} more would tell)",
            times(summary.median_ratio, decider),
            low,
            high,
            summary.pairs,
            summary.more_rounds.unwrap_or_default()
        ),
        Verdict::TooFewRounds => format!(
            "{candidate} is not judged: {} rounds are too few (at least {} are needed{}); {} \
             in the median, interval {:.2}–{:.2}× of {reference}",
            summary.pairs,
            summary.pairs
                + summary
                    .more_rounds
                    .unwrap_or(MIN_PAIRS.saturating_sub(summary.pairs)),
            if summary.more_rounds.is_some() {
                " where this many verdicts are judged together"
            } else {
                ""
            },
            times(summary.median_ratio, decider),
            low,
            high
        ),
        Verdict::TooCoarse => format!(
            "{candidate} is not judged: its figures come in steps too coarse ({})",
            summary
                .resolution_note
                .as_deref()
                .unwrap_or("see the table")
        ),
    }
}

/// The words of a better and a worse verdict for what decides.
fn words(decider: &Decider) -> (&'static str, &'static str) {
    match decider {
        Decider::Measured(Metric::Faults) => ("fewer page faults", "more page faults"),
        // CPU time a workload's processes spent: less of it reads "faster" like the CPU metric.
        Decider::Reported(name) if name == SERVICES_CPU || name == CLIENT_CPU => {
            ("faster", "slower")
        }
        Decider::Reported(_) => ("better", "worse"),
        Decider::Measured(_) => ("faster", "slower"),
    }
}

/// A candidate/reference ratio as "1.27× faster" or "1.10× slower".
fn times(ratio: f64, decider: &Decider) -> String {
    let (better, worse) = words(decider);
    if ratio <= 1.0 {
        format!("{:.2}× {better}", 1.0 / ratio)
    } else {
        format!("{ratio:.2}× {worse}")
    }
}

/// Faster on at least one workload and slower on none, by what decides.
fn proven_faster(judged: &[&WorkloadComparison], candidate: &str, decider: &Decider) -> bool {
    let verdicts: Vec<Verdict> = judged
        .iter()
        .filter_map(|w| w.candidates.get(candidate))
        .map(|s| s.judged(decider).verdict)
        .collect();
    verdicts.contains(&Verdict::Faster) && !verdicts.contains(&Verdict::Slower)
}

/// Which proven candidate to ship, with the line saying why BOLT is or is not worth it.
fn choose<'a>(
    report: &Report,
    compare: &CompareResult,
    proven: &[&'a String],
    means: Option<&std::collections::BTreeMap<String, f64>>,
    lines: &mut Vec<String>,
) -> Option<&'a String> {
    let mean = |c: &str| means.and_then(|m| m.get(c)).copied();
    let best = proven
        .iter()
        .copied()
        .min_by(|a, b| mean(a).unwrap_or(1.0).total_cmp(&mean(b).unwrap_or(1.0)))?;
    let (Some(bolt), Some(optimized)) = (
        proven.iter().copied().find(|c| *c == "bolt"),
        proven.iter().copied().find(|c| *c == "optimized"),
    ) else {
        return Some(best);
    };
    let (Some(bolt_mean), Some(optimized_mean)) = (mean(bolt), mean(optimized)) else {
        return Some(best);
    };
    let gain = optimized_mean / bolt_mean - 1.0;
    let growth = largest_growth(report, bolt, optimized);
    let size = growth
        .as_ref()
        .map(|(binary, g)| format!("its loaded code {:+.0}% ({binary})", g * 100.0))
        .unwrap_or_else(|| "its size unknown".to_owned());
    let grew = growth.as_ref().map_or(0.0, |(_, g)| *g);
    let worth = gain >= BOLT_WORTH_GAIN || (gain > 0.0 && grew < BOLT_SIZE_TOLERATED);
    lines.push(format!(
        "BOLT against {optimized}: {:.1}% {} (geometric means against {}), {size}: {}",
        gain.abs() * 100.0,
        if gain >= 0.0 {
            words(&compare.decider()).0
        } else {
            words(&compare.decider()).1
        },
        compare.reference,
        if worth {
            "worth shipping"
        } else {
            "not worth shipping"
        }
    ));
    Some(if worth { bolt } else { optimized })
}

/// The binary whose loaded size grows most from `from` to `to`, and by how much.
fn largest_growth(report: &Report, to: &str, from: &str) -> Option<(String, f64)> {
    report
        .binaries
        .iter()
        .filter_map(|(binary, stages)| {
            let (to, from) = (stages.get(to)?, stages.get(from)?);
            let growth = to.judged_bytes() as f64 / from.judged_bytes().max(1) as f64 - 1.0;
            Some((binary.clone(), growth))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// "Loaded size against baseline: coordinator -0.9%, worker +0.7%".
fn size_line(report: &Report, ship: &str, reference: &str) -> Option<String> {
    let changes: Vec<String> = report
        .binaries
        .iter()
        .filter_map(|(binary, stages)| {
            let (shipped, base) = (stages.get(ship)?, stages.get(reference)?);
            let change = shipped.judged_bytes() as f64 / base.judged_bytes().max(1) as f64 - 1.0;
            Some(format!("{binary} {:+.1}%", change * 100.0))
        })
        .collect();
    (!changes.is_empty()).then(|| {
        format!(
            "Loaded size of {ship} against {reference}: {}",
            changes.join(", ")
        )
    })
}

/// "Build time: the plain build 3.2 s; instrument, train and optimize 10.7 s (3.3×)".
fn build_cost_line(report: &Report) -> Option<String> {
    let took = |name: &str| {
        report
            .stages
            .iter()
            .rev()
            .find(|s| s.name == name && s.result != "failed")
            .map(|s| s.duration_secs)
    };
    let plain = took("build").filter(|secs| *secs > 0.0)?;
    let steps: Vec<(&str, f64)> = ["instrument", "train", "optimize", "bolt"]
        .into_iter()
        .filter_map(|name| Some((name, took(name)?)))
        .collect();
    if steps.is_empty() {
        return None;
    }
    let total: f64 = steps.iter().map(|(_, secs)| secs).sum();
    let names: Vec<&str> = steps.iter().map(|(name, _)| *name).collect();
    Some(format!(
        "Build time: {} took {total:.1} s, {:.1}× the plain build's {plain:.1} s",
        names.join(" + "),
        total / plain
    ))
}

/// Why nothing is shipped: a candidate slower somewhere, or verdicts still open.
fn not_proven_headline(
    compare: &CompareResult,
    judged: &[&WorkloadComparison],
    decider: &Decider,
) -> String {
    let slower = judged.iter().any(|w| {
        w.candidates
            .values()
            .any(|s| s.judged(decider).verdict == Verdict::Slower)
    });
    if slower {
        return format!(
            "Do not ship: a candidate is {} than {} on held-out work",
            words(decider).1,
            compare.reference
        );
    }
    format!(
        "Not proven yet: no candidate is {} than {} on held-out work by {} within these \
         rounds (see each line for what would tell)",
        words(decider).0,
        compare.reference,
        decider_label(decider)
    )
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::report::records::{BinaryRecord, CandidateSummary, StepRecord};

    fn summary(ratios: &[f64]) -> CandidateSummary {
        CandidateSummary::of_ratios(ratios)
    }

    fn binary(loaded: u64) -> BinaryRecord {
        BinaryRecord {
            size_bytes: loaded * 2,
            loaded_bytes: Some(loaded),
            compressed_bytes: None,
            path: "bin".into(),
            pgo: true,
            bolted: false,
        }
    }

    /// Two held-out workloads; `bolt` gains `bolt_gain` over optimized at `bolt_size` loaded
    /// bytes (optimized and baseline: 1000).
    fn report(optimized: &[f64], bolt: &[f64], bolt_size: u64) -> Report {
        let mut report = Report::new(std::path::Path::new("/w"));
        let workload = |name: &str| WorkloadComparison {
            workload: name.into(),
            role: "holdout".into(),
            runs: Vec::new(),
            candidates: [
                ("optimized".to_owned(), summary(optimized)),
                ("bolt".to_owned(), summary(bolt)),
            ]
            .into(),
            benchmarks: Vec::new(),
            binaries: None,
            budget_ran_out: false,
        };
        let median = |r: &[f64]| crate::measure::stats::summarize(r).median_ratio;
        report.compare = Some(CompareResult {
            decided_by: None,
            metric: Metric::Wall,
            counter: None,
            emulated: None,
            rounds: optimized.len(),
            rounds_plan: None,
            seed: 1,
            reference: "baseline".into(),
            candidates: vec!["optimized".into(), "bolt".into()],
            workloads: vec![workload("holdout"), workload("serve-holdout")],
            geometric_mean: [(
                "holdout".to_owned(),
                [
                    ("optimized".to_owned(), median(optimized)),
                    ("bolt".to_owned(), median(bolt)),
                ]
                .into(),
            )]
            .into(),
            previous: Vec::new(),
            family: None,
            c_compilers_differ: None,
        });
        report.binaries.insert(
            "server".into(),
            [
                ("baseline".to_owned(), binary(1000)),
                ("optimized".to_owned(), binary(1000)),
                ("bolt".to_owned(), binary(bolt_size)),
            ]
            .into(),
        );
        for (name, secs) in [
            ("build", 3.0),
            ("instrument", 3.0),
            ("train", 4.0),
            ("optimize", 3.0),
        ] {
            report.stages.push(StepRecord {
                name: name.into(),
                result: "ok".into(),
                duration_secs: secs,
                peak_memory_bytes: None,
                ran_at_unix: None,
                standalone: false,
            });
        }
        report
    }

    const FASTER: [f64; 10] = [0.8, 0.79, 0.81, 0.8, 0.78, 0.82, 0.8, 0.8, 0.79, 0.81];

    #[test]
    fn the_headline_names_what_to_ship_and_each_workload_says_how_much_faster() {
        // BOLT 1% faster than optimized but 40% larger: optimized is shipped, and why.
        let bolt: Vec<f64> = FASTER.iter().map(|r| r * 0.99).collect();
        let answer = super::answer(&report(&FASTER, &bolt, 1400)).unwrap();
        // The whole block, as every surface leads with it (unwrapped: the width is the
        // terminal's).
        insta::assert_snapshot!(
            "answer_ship_optimized_bolt_not_worth_its_size",
            format!("{}\n{}", answer.headline, answer.lines.join("\n"))
        );
        assert_eq!(
            answer.headline,
            "Ship optimized: 1.25× faster than baseline on held-out work (geometric mean)"
        );
        assert!(
            answer.lines[0].starts_with("holdout: optimized is 1.25× faster than baseline (1.2"),
            "{answer:#?}"
        );
        assert!(answer.lines[0].ends_with("×), 10/10 rounds"), "{answer:#?}");
        let text = answer.lines.join("\n");
        assert!(
            text.contains("BOLT against optimized: 1.0% faster"),
            "{text}"
        );
        assert!(
            text.contains("its loaded code +40% (server): not worth shipping"),
            "{text}"
        );
        assert!(
            text.contains("Loaded size of optimized against baseline: server +0.0%"),
            "{text}"
        );
        assert!(
            text.contains("Build time: instrument + train + optimize took 10.0 s, 3.3× the plain build's 3.0 s"),
            "{text}"
        );
        assert!(!text.contains("gate"), "{text}");
        // The same with BOLT run (it is enabled): the gate would ship it, and the answer says
        // how to ship what it recommends instead.
        let mut bolted = report(&FASTER, &bolt, 1400);
        bolted.bolt.insert(
            "server".into(),
            crate::report::records::BoltRecord {
                input: "optimized".into(),
                bolted: true,
                reason: None,
                profile_files: 1,
                seconds: Some(1.0),
                size_before: 1000,
                size_after: 1400,
                functions_with_profile: None,
                taken_branches: None,
            },
        );
        let text = super::answer(&bolted).unwrap().lines.join("\n");
        assert!(
            text.contains(
                "`pgo-build gate` ships bolt while [bolt] enabled = true: set it to false in \
                 pgo-build.toml to ship optimized"
            ),
            "{text}"
        );
        // 5% faster than optimized at the same size: BOLT is worth it.
        let bolt: Vec<f64> = FASTER.iter().map(|r| r * 0.95).collect();
        let answer = super::answer(&report(&FASTER, &bolt, 1000)).unwrap();
        assert!(answer.headline.starts_with("Ship bolt: "), "{answer:#?}");
    }

    #[test]
    fn unproven_on_training_work_names_no_size_and_a_cpu_verdict_says_cpu_time() {
        let mut trained = report(&FASTER, &FASTER, 1000);
        let compare = trained.compare.as_mut().unwrap();
        for workload in &mut compare.workloads {
            workload.role = "train".into();
        }
        compare.geometric_mean = [(
            "train".to_owned(),
            compare.geometric_mean["holdout"].clone(),
        )]
        .into();
        let answer = super::answer(&trained).unwrap();
        assert!(
            answer
                .headline
                .starts_with("Not proven: no held-out workload"),
            "{answer:#?}"
        );
        assert!(!answer.text().contains("Loaded size"), "{}", answer.text());
        let mut by_cpu = report(&FASTER, &FASTER, 1000);
        by_cpu.compare.as_mut().unwrap().metric = Metric::Cpu;
        let line = &super::answer(&by_cpu).unwrap().lines[0];
        assert!(line.ends_with("10/10 rounds, by CPU time"), "{line}");
    }

    #[test]
    fn nothing_is_shipped_when_a_candidate_is_slower_or_nothing_concluded() {
        let slower: Vec<f64> = FASTER.iter().map(|r| 1.0 / r).collect();
        let answer = super::answer(&report(&slower, &slower, 1000)).unwrap();
        insta::assert_snapshot!(
            "answer_do_not_ship_slower",
            format!("{}\n{}", answer.headline, answer.lines.join("\n"))
        );
        assert!(answer.headline.starts_with("Do not ship"), "{answer:#?}");
        assert!(
            answer.lines[0].starts_with("holdout: optimized is 1.25× slower than baseline")
                && answer.lines[0].ends_with("10/10 rounds"),
            "{answer:#?}"
        );
        let even = [1.02, 0.97, 1.05, 0.95, 1.01, 0.99, 1.04, 0.96, 1.0, 1.03];
        let answer = super::answer(&report(&even, &even, 1000)).unwrap();
        assert!(answer.headline.starts_with("Not proven yet"), "{answer:#?}");
        assert!(!answer.text().contains("Ship"), "{}", answer.text());
    }

    #[test]
    fn without_a_comparison_there_is_no_answer() {
        assert_eq!(answer(&Report::new(std::path::Path::new("/w"))), None);
    }
}
