//! The answer a user reads first: which variant to ship and why, then one line per held-out
//! workload with the speed-up, the interval its verdict was judged by and the rounds, the
//! geometric mean, what BOLT adds over the optimized build (its own paired verdict) against its
//! size, the size change and the build's cost against a plain build. The same sentences on
//! every surface (the end of `run` and `compare`, the top of `report`, the Markdown summary and
//! the HTML page), so a figure a user quotes is one the tool concluded. A pure function of the
//! [`Report`], deciding by `measure::decision`, the rule `gate` and `explore` apply too.

use crate::config::Role;
use crate::layout::Stage;
use crate::layout::step::Step;
use crate::measure::decision::{Outcome, Standing, outcome, standing};
use crate::measure::metric::{CLIENT_CPU, Decider, Metric, SERVICES_CPU};
use crate::measure::stats::{MIN_PAIRS, PairedSummary, Verdict, interval_text, outward};
use crate::report::records::{
    CandidatePair, CompareResult, StepResult, WorkloadComparison, decider_label,
};
use crate::report::report_file::Report;

/// The answer: a headline, then the lines that support it.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub headline: String,
    pub lines: Vec<String>,
    /// The variant it ships, when it ships one.
    pub ship: Option<String>,
}

impl Answer {
    /// For a terminal: the headline, then each line indented, wrapped at spaces to the width.
    /// The headline's own continuation is not indented: what is indented is the evidence.
    pub fn text(&self) -> String {
        let mut out = crate::util::printer::fit_lines(&self.headline);
        if !self.lines.is_empty() {
            let lines: Vec<String> = self.lines.iter().map(|line| format!("  {line}")).collect();
            out.push('\n');
            out.push_str(&crate::util::printer::fit_indented(&lines.join("\n")));
        }
        out
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
        .filter(|w| w.role == Role::Holdout)
        .collect();
    let (judged, on_training) = if held_out.is_empty() {
        (compare.workloads.iter().collect::<Vec<_>>(), true)
    } else {
        (held_out, false)
    };
    let role = if on_training {
        Role::Train
    } else {
        Role::Holdout
    };
    let means = compare.geometric_mean.get(&role);
    let mut lines = evidence_lines(compare, &judged, means, on_training);
    // Where each candidate stands over the judged workloads, by the one rule.
    let outcomes: Vec<(&String, Outcome)> = compare
        .candidates
        .iter()
        .filter_map(|c| {
            let standings = judged
                .iter()
                .filter_map(|w| w.candidates.get(c))
                .map(|s| standing(s.judged(&decider), compare.margin));
            Some((c, outcome(standings)?))
        })
        .collect();
    let better: Vec<&String> = outcomes
        .iter()
        .filter(|(_, o)| *o == Outcome::Better)
        .map(|(c, _)| *c)
        .collect();
    let ship = if better.is_empty() {
        None
    } else {
        Some(choose(report, compare, &judged, &better, means, &mut lines))
    };
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
        (None, false) => unshipped_headline(compare, &outcomes, &decider),
    };
    // Unproven, the size of a variant nobody should ship yet is beside the point.
    let ship = ship.filter(|_| !on_training);
    if ship.is_none() && !on_training {
        lines.push(super::why::why_it_does_not_pay(report, &judged));
    }
    lines.extend(closing_lines(report, compare, &judged, ship));
    Some(Answer {
        headline,
        lines,
        ship: ship.cloned(),
    })
}

/// One line per judged workload and candidate (its verdict, interval and rounds), then the
/// geometric mean over them.
fn evidence_lines(
    compare: &CompareResult,
    judged: &[&WorkloadComparison],
    means: Option<&std::collections::BTreeMap<String, f64>>,
    on_training: bool,
) -> Vec<String> {
    let decider = compare.decider();
    let mut lines = Vec::new();
    for workload in judged {
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
                    &summary.judged_decider(&decider),
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
    lines
}

/// What follows the evidence: the shipped build's size, what the gate would ship instead,
/// why instruction counts did not decide, the build's cost and what the intervals are.
fn closing_lines(
    report: &Report,
    compare: &CompareResult,
    judged: &[&WorkloadComparison],
    ship: Option<&String>,
) -> Vec<String> {
    let decider = compare.decider();
    let mut lines = Vec::new();
    if let Some(sizes) = ship.and_then(|ship| size_line(report, ship, &compare.reference)) {
        lines.push(sizes);
    }
    // The gate ships BOLT whenever it is enabled: say so where the answer differs.
    if ship.is_some_and(|s| !is_stage(s, Stage::Bolt))
        && !report.bolt.is_empty()
        && compare.candidates.iter().any(|c| is_stage(c, Stage::Bolt))
    {
        lines.push(format!(
            "`pgo-build gate` ships bolt while [bolt] enabled = true: set it to false in \
             pgo-build.toml to ship {}",
            ship.map_or("optimized", |s| s.as_str())
        ));
    }
    if let Some(note) = compare.not_counted.as_ref().filter(|_| ship.is_none()) {
        lines.push(format!("Instruction counts did not decide: {note}"));
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
    lines
}

/// The factor a faster interval's ends read as ("1.13–1.43"): the reciprocals of its bounds,
/// rounded outward and never onto 1.
fn speedup_interval(low: f64, high: f64) -> String {
    format!(
        "{}–{}",
        outward(1.0 / high, 1.0, false, 2),
        outward(1.0 / low, 1.0, true, 2)
    )
}

/// "optimized is 1.27× faster than baseline (1.13–1.43×), 10/10 rounds".
fn workload_line(
    candidate: &str,
    reference: &str,
    summary: &PairedSummary,
    judged_by: &Decider,
    decider: &Decider,
) -> String {
    let by = match decider {
        _ if summary.left_open_by.is_some() => format!(
            ", by instructions ({} left it open)",
            summary
                .left_open_by
                .as_deref()
                .and_then(|said| said.split_once(':'))
                .map_or("the deciding metric", |(by, _)| by)
        ),
        Decider::Measured(Metric::Wall) if *judged_by == Decider::Measured(Metric::Wall) => {
            String::new()
        }
        _ => match judged_by {
            Decider::Reported(name) if name == SERVICES_CPU => {
                ", by the services' own CPU time".to_owned()
            }
            Decider::Measured(Metric::Wall) => ", by wall time".to_owned(),
            Decider::Measured(Metric::Cpu) => ", by CPU time".to_owned(),
            other => format!(", by {}", decider_label(other)),
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
            "{candidate} is {:.2}× {better} than {reference} ({}×), {rounds}{by}",
            1.0 / summary.median_ratio,
            speedup_interval(low, high)
        ),
        Verdict::Slower => format!(
            "{candidate} is {:.2}× {worse} than {reference} ({}×), {rounds}{by}",
            summary.median_ratio,
            interval_text(low, high)
        ),
        Verdict::NoDifference => format!(
            "{candidate} is no different from {reference}: within ±{:.1}%, {} rounds{by}",
            summary.bound.unwrap_or_default() * 100.0,
            summary.pairs
        ),
        // With what to run for those rounds: the next step, not only the number.
        Verdict::Inconclusive => format!(
            "{candidate} is not proven {better}: {} in the median, but the interval the \
             verdict was judged by, {}× of {reference}, reaches 1 ({} rounds; about {} more \
             would tell: `pgo-build compare --rounds {}`, or a larger [compare] budget){by}",
            times(summary.median_ratio, decider),
            interval_text(low, high),
            summary.pairs,
            summary.more_rounds.unwrap_or_default(),
            summary.pairs + summary.more_rounds.unwrap_or_default()
        ),
        // No interval is implied (no outcome of these rounds could be claimed): the rounds'
        // range, said as such.
        Verdict::TooFewRounds => format!(
            "{candidate} is not judged: {} rounds are too few (at least {} are needed{}); {} \
             in the median, its rounds {}× of {reference}{by}",
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
            interval_text(low, high)
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

/// A candidate/reference ratio as "1.27× faster" or "1.10× slower", with as many digits as
/// it takes not to read 1.00 ("1.004× faster").
fn times(ratio: f64, decider: &Decider) -> String {
    let (better, worse) = words(decider);
    let factor = if ratio <= 1.0 { 1.0 / ratio } else { ratio };
    let digits = match (factor - 1.0).abs() {
        d if d >= 0.005 => 2,
        d if d >= 0.0005 => 3,
        _ => 4,
    };
    let word = if ratio <= 1.0 { better } else { worse };
    format!("{factor:.digits$}× {word}")
}

/// Which of the candidates proven better to ship, with the line saying whether BOLT is worth
/// it: only by its own paired verdict against the build it was made from, with its size cost
/// beside it; otherwise the simpler build ships.
fn choose<'a>(
    report: &Report,
    compare: &CompareResult,
    judged: &[&WorkloadComparison],
    better: &[&'a String],
    means: Option<&std::collections::BTreeMap<String, f64>>,
    lines: &mut Vec<String>,
) -> &'a String {
    let mean = |c: &str| means.and_then(|m| m.get(c)).copied().unwrap_or(1.0);
    let best = better
        .iter()
        .copied()
        .min_by(|a, b| mean(a).total_cmp(&mean(b)))
        .expect("at least one candidate is better");
    let (Some(bolt), Some(optimized)) = (
        better.iter().copied().find(|c| is_stage(c, Stage::Bolt)),
        better
            .iter()
            .copied()
            .find(|c| is_stage(c, Stage::Optimized)),
    ) else {
        return best;
    };
    let decider = compare.decider();
    let pairs: Vec<&CandidatePair> = compare
        .between
        .iter()
        .filter(|p| p.candidate == *bolt && p.reference == *optimized)
        .filter(|p| judged.iter().any(|w| w.workload == p.workload))
        .collect();
    let growth = largest_growth(report, bolt, optimized);
    let size = growth
        .as_ref()
        .map(|(binary, g)| format!("its loaded code {:+.0}% ({binary})", g * 100.0))
        .unwrap_or_else(|| "its size unknown".to_owned());
    let Some(bolt_outcome) = outcome(pairs.iter().map(|p| standing(&p.summary, compare.margin)))
    else {
        lines.push(format!(
            "BOLT against {optimized}: not compared in the same rounds, so no gain of it is \
             proven; {size}: ship {optimized}, the simpler build"
        ));
        return optimized;
    };
    let evidence: Vec<String> = pairs
        .iter()
        .map(|p| {
            let standing = standing(&p.summary, compare.margin);
            format!(
                "{}{}",
                if pairs.len() > 1 {
                    format!("{}: ", p.workload)
                } else {
                    String::new()
                },
                pair_words(&p.summary, standing, compare.margin, &decider)
            )
        })
        .collect();
    let worth = bolt_outcome == Outcome::Better;
    lines.push(format!(
        "BOLT against {optimized}: {}; {size}: {}",
        evidence.join("; "),
        if worth {
            "worth shipping".to_owned()
        } else {
            format!(
                "ship {optimized}, the simpler build ({})",
                why_not_bolt(bolt_outcome, &pairs, compare.margin, &decider)
            )
        }
    ));
    if worth { bolt } else { optimized }
}

/// Why BOLT does not ship, in the words of its verdicts: a gain proven on one workload does
/// not ship it while another is open or worse, and the reason must not deny that gain.
fn why_not_bolt(
    outcome: Outcome,
    pairs: &[&CandidatePair],
    margin: f64,
    decider: &Decider,
) -> String {
    let (better, worse) = words(decider);
    let named = |wanted: Standing| -> String {
        pairs
            .iter()
            .filter(|p| standing(&p.summary, margin) == wanted)
            .map(|p| p.workload.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (gained, lost, open) = (
        named(Standing::Better),
        named(Standing::Worse),
        named(Standing::Open),
    );
    match outcome {
        Outcome::Mixed => format!("BOLT: {better} on {gained} but {worse} on {lost}"),
        Outcome::Worse => format!("BOLT: {worse} on {lost}"),
        Outcome::Open if !gained.is_empty() => {
            format!("BOLT: {better} on {gained} only, with {open} still open")
        }
        Outcome::Open | Outcome::Same | Outcome::NotWorse => "no proven gain from BOLT".to_owned(),
        // `choose` ships BOLT on this outcome and asks for no reason.
        Outcome::Better => "BOLT is worth shipping".to_owned(),
    }
}

/// One pair's verdict in words: "1.03× faster (1.01–1.05×)", "no proven difference
/// (0.98–1.01×)".
fn pair_words(
    summary: &PairedSummary,
    standing: Standing,
    margin: f64,
    decider: &Decider,
) -> String {
    let (low, high) = summary.verdict_interval();
    match standing {
        Standing::Better => format!(
            "{} ({}×)",
            times(summary.median_ratio, decider),
            speedup_interval(low, high)
        ),
        Standing::Worse => format!(
            "{} ({}×)",
            times(summary.median_ratio, decider),
            interval_text(low, high)
        ),
        Standing::Same => format!(
            "no difference beyond ±{:.1}% ({}×)",
            margin * 100.0,
            interval_text(low, high)
        ),
        Standing::NotWorse | Standing::Open => format!(
            "no proven difference ({}×, {} rounds)",
            interval_text(low, high),
            summary.pairs
        ),
    }
}

/// A compared variant is `stage`'s binaries (explore's variants have names of their own).
fn is_stage(variant: &str, stage: Stage) -> bool {
    Stage::from_variant(variant) == Some(stage)
}

/// The binary whose loaded size grows most from `from` to `to`, and by how much.
fn largest_growth(report: &Report, to: &str, from: &str) -> Option<(String, f64)> {
    let (to, from) = (Stage::from_variant(to)?, Stage::from_variant(from)?);
    report
        .binaries
        .iter()
        .filter_map(|(binary, stages)| {
            let (to, from) = (stages.get(&to)?, stages.get(&from)?);
            let growth = to.judged_bytes() as f64 / from.judged_bytes().max(1) as f64 - 1.0;
            Some((binary.clone(), growth))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// "Loaded size against baseline: coordinator -0.9%, worker +0.7%".
fn size_line(report: &Report, ship: &str, reference: &str) -> Option<String> {
    let (shipped_stage, reference_stage) =
        (Stage::from_variant(ship)?, Stage::from_variant(reference)?);
    let changes: Vec<String> = report
        .binaries
        .iter()
        .filter_map(|(binary, stages)| {
            let (shipped, base) = (stages.get(&shipped_stage)?, stages.get(&reference_stage)?);
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

/// "Build time: the plain build 3.2 s; instrument, train and optimize 10.7 s (3.3×)". Against
/// the plain build only when it compiled: a build cargo found up to date took no time worth
/// a ratio.
fn build_cost_line(report: &Report) -> Option<String> {
    let took = |name: Step| {
        report
            .steps
            .iter()
            .rev()
            .find(|s| s.name == name && s.result != StepResult::Failed)
            .map(|s| s.duration_secs)
    };
    let steps: Vec<(&str, f64)> = [Step::Instrument, Step::Train, Step::Optimize, Step::Bolt]
        .into_iter()
        .filter_map(|step| Some((step.name(), took(step)?)))
        .collect();
    if steps.is_empty() {
        return None;
    }
    let total: f64 = steps.iter().map(|(_, secs)| secs).sum();
    let names: Vec<&str> = steps.iter().map(|(name, _)| *name).collect();
    let compiled = report
        .rustc_memory
        .get(&Stage::Baseline)
        .is_none_or(|rustc| rustc.invocations > 0);
    match took(Step::Build).filter(|secs| *secs > 0.0) {
        Some(plain) if compiled => Some(format!(
            "Build time: {} took {total:.1} s, {:.1}× the plain build's {plain:.1} s",
            names.join(" + "),
            total / plain
        )),
        Some(_) => Some(format!(
            "Build time: {} took {total:.1} s (the plain build was up to date, so it took \
             no time to set this against)",
            names.join(" + ")
        )),
        None => None,
    }
}

/// Why nothing is shipped, by what the candidates' outcomes say: slower somewhere, no
/// measurable difference, not slower but no gain, or verdicts still open.
fn unshipped_headline(
    compare: &CompareResult,
    outcomes: &[(&String, Outcome)],
    decider: &Decider,
) -> String {
    let (better, worse) = words(decider);
    let reference = &compare.reference;
    if let Some((candidate, outcome)) = outcomes
        .iter()
        .find(|(_, o)| matches!(o, Outcome::Worse | Outcome::Mixed))
    {
        return format!(
            "Do not ship {candidate}: {worse} than {reference} on held-out work{}",
            if *outcome == Outcome::Mixed {
                format!(" (though {better} on some)")
            } else {
                String::new()
            }
        );
    }
    if outcomes.iter().any(|(_, o)| *o == Outcome::Open) || outcomes.is_empty() {
        return format!(
            "Not proven yet: no candidate is {better} than {reference} on held-out work by {} \
             within these rounds (see each line for what would tell)",
            decider_label(decider)
        );
    }
    let names: Vec<&str> = outcomes.iter().map(|(c, _)| c.as_str()).collect();
    let are = if names.len() == 1 { "is" } else { "are" };
    let names = names.join(" and ");
    let margin = compare.margin * 100.0;
    if outcomes.iter().all(|(_, o)| *o == Outcome::Same) {
        format!(
            "No measurable difference: {names} {are} within ±{margin:.1}% of {reference} on \
             held-out work (the [compare] margin); PGO does not pay here, and shipping \
             {reference} loses nothing"
        )
    } else {
        format!(
            "No proven gain: {names} {are} not {worse} than {reference} by more than \
             {margin:.1}% on held-out work, and not shown {better}"
        )
    }
}

/// Reports of comparisons made up of per-round ratios, for the tests of everything that
/// decides from a report (the answer here, the gate's rule beside it).
#[cfg(test)]
pub(crate) mod fixtures {
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

    /// Two held-out workloads whose rounds gave `optimized` and `bolt` these ratios to the
    /// baseline, with bolt's own verdict against optimized from the same rounds; bolt at
    /// `bolt_size` loaded bytes (optimized and baseline: 1000).
    pub fn report(optimized: &[f64], bolt: &[f64], bolt_size: u64) -> Report {
        let mut report = Report::new(std::path::Path::new("/w"));
        let workload = |name: &str| WorkloadComparison {
            workload: name.into(),
            role: Role::Holdout,
            runs: Vec::new(),
            candidates: [
                ("optimized".to_owned(), summary(optimized)),
                ("bolt".to_owned(), summary(bolt)),
            ]
            .into(),
            benchmarks: Vec::new(),
            binaries: None,
            budget_ran_out: false,
            code: Default::default(),
        };
        let over_optimized: Vec<f64> = bolt.iter().zip(optimized).map(|(b, o)| b / o).collect();
        let between = |name: &str| CandidatePair {
            workload: name.into(),
            candidate: "bolt".into(),
            reference: "optimized".into(),
            summary: crate::measure::stats::summarize(&over_optimized).within_margin(0.02),
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
                Role::Holdout,
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
            between: vec![between("holdout"), between("serve-holdout")],
            margin: 0.02,
            not_counted: None,
            builds: Default::default(),
        });
        report.binaries.insert(
            "server".into(),
            [
                (Stage::Baseline, binary(1000)),
                (Stage::Optimized, binary(1000)),
                (Stage::Bolt, binary(bolt_size)),
            ]
            .into(),
        );
        for (name, secs) in [
            (Step::Build, 3.0),
            (Step::Instrument, 3.0),
            (Step::Train, 4.0),
            (Step::Optimize, 3.0),
        ] {
            report.steps.push(StepRecord {
                name,
                result: StepResult::Ok,
                duration_secs: secs,
                peak_memory_bytes: None,
                ran_at_unix: None,
                standalone: false,
            });
        }
        report
    }
}

#[cfg(test)]
mod tests {

    use super::fixtures::report;
    use super::*;

    const FASTER: [f64; 10] = [0.8, 0.79, 0.81, 0.8, 0.78, 0.82, 0.8, 0.8, 0.79, 0.81];
    /// BOLT against optimized, round by round: about the same, either way.
    const BOLT_NOISE: [f64; 10] = [0.99, 1.01, 0.98, 1.02, 1.0, 0.97, 1.01, 0.99, 1.03, 0.98];

    fn text(answer: &Answer) -> String {
        format!("{}\n{}", answer.headline, answer.lines.join("\n"))
    }

    #[test]
    fn the_headline_names_what_to_ship_and_each_workload_says_how_much_faster() {
        // BOLT no different from optimized in the same rounds, and 40% larger: optimized
        // ships, the simpler build, and the line says why.
        let bolt: Vec<f64> = FASTER.iter().zip(BOLT_NOISE).map(|(r, b)| r * b).collect();
        let answer = super::answer(&report(&FASTER, &bolt, 1400)).unwrap();
        // The whole block, as every surface leads with it (unwrapped: the width is the
        // terminal's).
        insta::assert_snapshot!("answer_ship_optimized_bolt_no_proven_gain", text(&answer));
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
            text.contains(
                "BOLT against optimized: holdout: no difference beyond ±2.0% (0.98–1.02×)"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "its loaded code +40% (server): ship optimized, the simpler build (no proven \
                 gain from BOLT)"
            ),
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
                input: crate::layout::Stage::Optimized,
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
    }

    /// Where nothing ships, one line says why from what was measured, with what addresses it.
    #[test]
    fn an_answer_that_ships_nothing_says_why() {
        const NOISE: [f64; 10] = [1.02, 0.97, 1.01, 0.99, 1.03, 0.98, 1.0, 1.02, 0.97, 1.01];
        let why = |report: &Report| {
            let answer = super::answer(report).unwrap();
            assert!(!answer.headline.starts_with("Ship"), "{answer:#?}");
            answer
                .lines
                .iter()
                .find(|l| {
                    l.starts_with("Why")
                        || l.starts_with("To see why")
                        || l.starts_with("Training covers")
                })
                .cloned()
                .unwrap_or_else(|| panic!("{answer:#?}"))
        };
        // No overlap measured: how to find out.
        let mut report = report(&NOISE, &NOISE, 1000);
        assert!(why(&report).starts_with("To see why: `pgo-build profile overlap`"));
        // Held-out hot code training left cold: named, with the fix.
        let missed = |name: &str, test: f64, base: f64| crate::report::Missed {
            name: name.into(),
            krate: "engine".into(),
            test_share: test,
            base_share: base,
        };
        report.overlap.insert(
            "server".into(),
            crate::report::OverlapRecord {
                edge_overlap: 0.58,
                min_overlap: None,
                missed_by_training: vec![
                    missed("engine::parse_options", 0.15, 0.001),
                    missed("engine::render_table", 0.06, 0.0),
                    missed("engine::warm", 0.20, 0.10),
                ],
            },
        );
        assert_eq!(
            why(&report),
            "Why it may not pay here: training left cold what held-out work runs most: \
             `engine::parse_options` (engine) is 15% of `server`'s held-out counts and 0.1% of \
             training's, and 1 more like it; a train workload doing what the held-out one does \
             addresses it (one more workload each training)"
        );
        // Covered: said so, with the next thing to try.
        report
            .overlap
            .get_mut("server")
            .unwrap()
            .missed_by_training
            .clear();
        assert!(why(&report).starts_with(
            "Training covers the held-out work (58% overlap or more, no hot held-out function"
        ));
        // Under the floor it was measured against: poorly covered, not "covers".
        report.overlap.get_mut("server").unwrap().min_overlap = Some(0.7);
        assert!(
            why(&report).starts_with(
                "Why it may not pay here: training represents the held-out work of `server` \
                 poorly (58% overlap, under [pgo] min_overlap 70%)"
            ),
            "{}",
            why(&report)
        );
        report.overlap.get_mut("server").unwrap().min_overlap = None;
        // Runs of a millisecond: process start is what they time.
        for workload in &mut report.compare.as_mut().unwrap().workloads {
            for summary in workload.candidates.values_mut() {
                summary.reference_median_wall_secs = 0.0012;
                summary.candidate_median_wall_secs = 0.0011;
            }
        }
        assert!(why(&report).starts_with("Why it may not pay here: a held-out run takes 1.2 ms"));
        // And never where something ships.
        let shipped = super::answer(&super::fixtures::report(&FASTER, &FASTER, 1000)).unwrap();
        assert!(
            !shipped
                .lines
                .iter()
                .any(|l| l.contains("Why it may not pay")),
            "{shipped:#?}"
        );
    }

    #[test]
    fn bolt_ships_only_on_its_own_verdict_against_optimized_with_its_size_beside_it() {
        // 3% faster than optimized in every round: proven, so worth shipping, size stated.
        let bolt: Vec<f64> = FASTER.iter().map(|r| r * 0.97).collect();
        let answer = super::answer(&report(&FASTER, &bolt, 1100)).unwrap();
        assert!(answer.headline.starts_with("Ship bolt: "), "{answer:#?}");
        let said = text(&answer);
        assert!(
            said.contains("BOLT against optimized: holdout: 1.03× faster (1.03–1.04×)"),
            "{said}"
        );
        assert!(
            said.contains("its loaded code +10% (server): worth shipping"),
            "{said}"
        );
        // The geometric means alone say BOLT is 2.3% faster, but its rounds against optimized
        // do not prove it: no proven gain, whatever the means say (the rule that flipped
        // between two runs of the example).
        let leaning: Vec<f64> = FASTER
            .iter()
            .zip([0.95, 1.01, 0.96, 1.0, 0.94, 0.99, 1.02, 0.93, 0.97, 1.01])
            .map(|(r, b)| r * b)
            .collect();
        let answer = super::answer(&report(&FASTER, &leaning, 1000)).unwrap();
        assert!(
            answer.headline.starts_with("Ship optimized: "),
            "{answer:#?}"
        );
        assert!(
            text(&answer).contains("no proven difference ("),
            "{}",
            text(&answer)
        );
    }

    #[test]
    fn the_reason_bolt_does_not_ship_never_denies_a_gain_it_proved() {
        // Seen on the example: BOLT proven 1.07× faster on one workload, the other still open.
        // "No proven gain from BOLT" beside "1.07× faster" contradicted the line it ends.
        let pair = |workload: &str, ratios: &[f64]| CandidatePair {
            workload: workload.to_owned(),
            candidate: "bolt".to_owned(),
            reference: "optimized".to_owned(),
            summary: crate::measure::stats::summarize(ratios).within_margin(0.02),
        };
        let faster = pair("holdout", &[0.93; 10]);
        let open = pair(
            "serve",
            &[0.9, 1.1, 0.95, 1.05, 0.9, 1.1, 0.97, 1.03, 0.92, 1.08],
        );
        let slower = pair("serve", &[1.07; 10]);
        let same = pair(
            "serve",
            &[1.0, 1.001, 0.999, 1.0, 1.002, 0.998, 1.0, 1.001, 0.999, 1.0],
        );
        let why = |pairs: &[&CandidatePair], decider: &Decider| {
            let standings = pairs.iter().map(|p| standing(&p.summary, 0.02));
            why_not_bolt(outcome(standings).unwrap(), pairs, 0.02, decider)
        };
        let wall = Decider::Measured(Metric::Wall);
        assert_eq!(
            why(&[&faster, &open], &wall),
            "BOLT: faster on holdout only, with serve still open"
        );
        assert_eq!(
            why(&[&faster, &slower], &wall),
            "BOLT: faster on holdout but slower on serve"
        );
        assert_eq!(why(&[&slower], &wall), "BOLT: slower on serve");
        assert_eq!(why(&[&open], &wall), "no proven gain from BOLT");
        assert_eq!(why(&[&same], &wall), "no proven gain from BOLT");
        // In the decider's own words: fewer page faults is not "faster".
        assert_eq!(
            why(&[&faster, &open], &Decider::Measured(Metric::Faults)),
            "BOLT: fewer page faults on holdout only, with serve still open"
        );
    }

    #[test]
    fn unproven_on_training_work_names_no_size_and_a_cpu_verdict_says_cpu_time() {
        let mut trained = report(&FASTER, &FASTER, 1000);
        let compare = trained.compare.as_mut().unwrap();
        for workload in &mut compare.workloads {
            workload.role = Role::Train;
        }
        compare.geometric_mean =
            [(Role::Train, compare.geometric_mean[&Role::Holdout].clone())].into();
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
        insta::assert_snapshot!("answer_do_not_ship_slower", text(&answer));
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
    fn no_difference_within_the_margin_is_a_conclusion_and_says_so() {
        let same = [
            1.0, 1.004, 0.996, 1.002, 0.998, 1.001, 0.999, 1.0, 1.003, 0.997,
        ];
        let answer = super::answer(&report(&same, &same, 1000)).unwrap();
        assert!(
            answer.headline.starts_with(
                "No measurable difference: optimized and bolt are within ±2.0% of baseline on \
                 held-out work"
            ),
            "{answer:#?}"
        );
        // Far below 1 and a little above, in every round: not slower beyond the margin, and
        // no gain proven either.
        let not_worse = [0.9, 0.95, 1.01, 0.92, 1.005, 0.97, 0.88, 1.0, 0.93, 1.01];
        let answer = super::answer(&report(&not_worse, &not_worse, 1000)).unwrap();
        assert!(
            answer.headline.starts_with(
                "No proven gain: optimized and bolt are not slower than baseline by more than \
                 2.0%"
            ),
            "{answer:#?}"
        );
    }

    #[test]
    fn no_printed_bound_contradicts_its_verdict() {
        // Inconclusive with an interval from just under 1 to 5% over: its lower bound may
        // not print as 1.01 beside "reaches 1".
        let leaning = [1.03, 1.05, 0.995, 1.04, 0.99, 1.06, 0.98, 1.03, 1.01, 1.04];
        let summary = crate::measure::stats::summarize(&leaning).within_margin(0.02);
        let (low, _) = summary.verdict_interval();
        assert!(low < 1.0, "{summary:?}");
        let line = workload_line(
            "optimized",
            "baseline",
            &summary,
            &Decider::Measured(Metric::Wall),
            &Decider::Measured(Metric::Wall),
        );
        assert!(line.contains("0.99–1.05× of baseline, reaches 1"), "{line}");
        assert_eq!(
            crate::measure::stats::interval_text(0.9996, 1.0503),
            "0.99–1.06"
        );
        assert_eq!(
            crate::measure::stats::interval_text(1.0004, 1.05),
            "1.0004–1.05"
        );
        assert_eq!(speedup_interval(0.8, 0.9995), "1.0005–1.25");
    }

    #[test]
    fn the_build_time_is_not_set_against_a_plain_build_cargo_found_up_to_date() {
        let mut fresh = report(&FASTER, &FASTER, 1000);
        fresh.rustc_memory.insert(
            Stage::Baseline,
            serde_json::from_value(serde_json::json!({
                "budget_bytes": 1, "rustc_budget_bytes": 1, "budget_reason": "",
                "cpus": 2, "cargo_jobs": 2, "invocations": 0, "heaviest": [],
                "wait_secs": 0.0, "memory_wait_secs": 0.0, "estimate_error": null,
                "overruns": [], "alone": [], "unmeasured": 0
            }))
            .unwrap(),
        );
        let text = super::answer(&fresh).unwrap().lines.join("\n");
        assert!(
            text.contains("the plain build was up to date, so it took no time"),
            "{text}"
        );
        assert!(!text.contains("× the plain build"), "{text}");
    }

    /// A wrapped headline continues at the margin; only the evidence under it is indented, so
    /// the two are told apart at any width.
    #[test]
    fn a_wrapped_headline_is_not_indented_like_the_evidence() {
        let answer = Answer {
            headline: "headline ".repeat(600).trim_end().to_owned(),
            lines: vec!["evidence ".repeat(600).trim_end().to_owned()],
            ship: None,
        };
        let text = answer.text();
        let lines: Vec<&str> = text.lines().collect();
        let first_evidence = lines.iter().position(|l| l.contains("evidence")).unwrap();
        assert!(first_evidence > 1, "the headline wraps: {text}");
        assert!(
            lines[..first_evidence]
                .iter()
                .all(|l| l.starts_with("headline")),
            "{text}"
        );
        assert!(lines[first_evidence].starts_with("  evidence"), "{text}");
        assert!(
            lines[first_evidence + 1..]
                .iter()
                .all(|l| l.starts_with("    evidence")),
            "{text}"
        );
    }

    #[test]
    fn without_a_comparison_there_is_no_answer() {
        assert_eq!(answer(&Report::new(std::path::Path::new("/w"))), None);
    }
}
