//! When the deciding metric leaves held-out verdicts open (a busy machine's noise, a time
//! budget that ran out, too few rounds), instruction counts decide them, as they do for every
//! command that compares (`run`, `compare`, `gate`): the workloads are counted one at a time,
//! cheapest first, while the counting fits its budget, estimated from a counted run an earlier
//! comparison measured or from the rounds' own times, and then from what the first count took. What they settle keeps what the deciding metric
//! said (`left_open_by`); what they could not settle says what counting would cost.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::config::Role;
use crate::measure::counter::Counter;
use crate::measure::decision::{Standing, standing};
use crate::measure::metric::{INSTRUCTION_ROUNDS, Metric};
use crate::pipeline::context::Context;
use crate::report::{CompareResult, decider_label, verdict_text};
use crate::util::printer::duration;

/// The held-out workloads where some deciding verdict is open: a candidate against the
/// reference or against the last release. (A candidate against the one it was made from,
/// bolt against optimized, is not counted for: without a verdict the simpler build ships,
/// which is a conclusion, not an open question.)
fn open_workloads(result: &CompareResult) -> Vec<String> {
    let decider = result.decider();
    let open = |summary: &crate::measure::stats::PairedSummary| {
        standing(summary, result.margin) == Standing::Open
    };
    result
        .workloads
        .iter()
        .filter(|w| w.role == Role::Holdout)
        .filter(|w| {
            w.candidates.values().any(|c| open(c.judged(&decider)))
                || result
                    .previous
                    .iter()
                    .any(|p| p.workload == w.workload && open(&p.summary))
        })
        .map(|w| w.workload.clone())
        .collect()
}

/// What judged `workload`'s verdicts: the deciding metric, or wall time where the workload
/// does not report it.
fn judged_by(result: &CompareResult, workload: &str) -> String {
    let decider = result.decider();
    result
        .workloads
        .iter()
        .find(|w| w.workload == workload)
        .and_then(|w| w.candidates.values().next())
        .map_or_else(|| decider_label(&decider), |c| c.judged_by(&decider))
}

/// Per held-out workload, what one counted run took in the comparisons the report keeps that
/// were decided by instruction counts (their rounds ran under the counter): the measured basis
/// of what counting it again costs.
pub(super) fn counted_run_secs(report: &crate::report::Report) -> BTreeMap<String, f64> {
    let mut secs = BTreeMap::new();
    // Oldest first, so the latest measurement stands.
    for compare in report.earlier_compares.iter().chain(report.compare.iter()) {
        if compare.metric != Metric::Instructions {
            continue;
        }
        for workload in &compare.workloads {
            let longest = run_secs(compare, &workload.workload);
            if longest > 0.0 {
                secs.insert(workload.workload.clone(), longest);
            }
        }
    }
    secs
}

/// The longest median wall time of any variant on `workload`: what one run of it takes.
fn run_secs(result: &CompareResult, workload: &str) -> f64 {
    result
        .workloads
        .iter()
        .filter(|w| w.workload == workload)
        .flat_map(|w| w.candidates.values())
        .map(|s| {
            s.reference_median_wall_secs
                .max(s.candidate_median_wall_secs)
        })
        .fold(0.0, f64::max)
}

/// Decides the open held-out verdicts of `result` by instruction counts, within `budget`:
/// `count(workload)` counts the instructions of every one of the `variants` compared on it.
pub(super) fn settle_by_instructions(
    cx: &Context,
    (variants, counted_before): (usize, &BTreeMap<String, f64>),
    count: &dyn Fn(&str) -> Result<CompareResult>,
    budget: Duration,
    result: &mut CompareResult,
) -> Result<()> {
    if result.metric == Metric::Instructions && result.decided_by.is_none() {
        return Ok(());
    }
    let mut open = open_workloads(result);
    if open.is_empty() {
        return Ok(());
    }
    let label = decider_label(&result.decider());
    if budget.is_zero() {
        let note = format!(
            "{} left open by {label}; instruction counts would decide, but the counting budget \
             is 0 ([compare] counting_budget, gate --budget)",
            open.join(", ")
        );
        cx.printer.info(&note);
        result.not_counted = Some(note);
        return Ok(());
    }
    // Counts need the binaries to run here natively, and a counter.
    let counter = super::checks::emulation_note(cx, Metric::Instructions)
        .and_then(|_| Counter::detect(&cx.printer));
    let counter = match counter {
        Ok(counter) => counter,
        Err(err) => {
            let note = format!(
                "{} left open by {label}, and instruction counts cannot decide here: {err:#}",
                open.join(", ")
            );
            cx.printer.warn(&note);
            result.not_counted = Some(note);
            return Ok(());
        }
    };
    open.sort_by(|a, b| run_secs(result, a).total_cmp(&run_secs(result, b)));
    // A counted workload costs its warm-up uncounted and its rounds counted, for every
    // variant: a counted run's time where an earlier comparison measured one, else the
    // counter's usual slowdown, then what this command's counts took.
    // The slowdown this command's own counts showed, once they showed one.
    let mut measured: Option<f64> = None;
    let cost = |result: &CompareResult, workload: &str, measured: Option<f64>| {
        let secs = run_secs(result, workload);
        let counted = match measured {
            Some(slowdown) => secs * slowdown,
            None => counted_before
                .get(workload)
                .copied()
                .unwrap_or(secs * f64::from(counter.usual_slowdown())),
        };
        variants as f64 * (secs + counted * INSTRUCTION_ROUNDS as f64)
    };
    let started = Instant::now();
    for (index, workload) in open.iter().enumerate() {
        let secs = run_secs(result, workload);
        let estimate = Duration::from_secs_f64(cost(result, workload, measured));
        if started.elapsed() + estimate > budget {
            let rest = &open[index..];
            let whole: f64 = rest.iter().map(|w| cost(result, w, measured)).sum();
            let note = over_budget_note(
                (rest, &label, &counter),
                whole,
                budget.saturating_sub(started.elapsed()),
                estimate_basis(rest, measured.is_some(), counted_before, &counter),
            );
            cx.printer.warn(&note);
            result.not_counted = Some(note);
            break;
        }
        cx.printer.info(format!(
            "{workload} left open by {}: instruction counts decide (about {} with {})",
            judged_by(result, workload),
            duration(estimate),
            counter.describe()
        ));
        let counting = Instant::now();
        let counted = count(workload);
        let counts = match counted {
            Ok(counts) => counts,
            // An interruption stops the command; anything else only the fallback: what the
            // deciding metric measured stands, and the answer says the counts failed.
            Err(err)
                if err
                    .downcast_ref::<crate::exec::interrupt::Interrupted>()
                    .is_some() =>
            {
                return Err(err);
            }
            Err(err) => {
                let note = format!(
                    "{} left open by {label}, and counting its instructions failed: {err:#}",
                    open[index..].join(", ")
                );
                cx.printer.warn(&note);
                result.not_counted = Some(note);
                break;
            }
        };
        if secs > 0.0 {
            let per_run = counting.elapsed().as_secs_f64() / (secs * variants as f64);
            measured = Some(((per_run - 1.0) / INSTRUCTION_ROUNDS as f64).max(1.0));
        }
        let by = judged_by(result, workload);
        settle(result, &counts, workload, &by);
    }
    Ok(())
}

/// What an estimate of counting `rest` rests on, in words.
fn estimate_basis(
    rest: &[String],
    measured_here: bool,
    counted_before: &BTreeMap<String, f64>,
    counter: &Counter,
) -> String {
    if measured_here {
        "from what this command's counting took".to_owned()
    } else if rest.iter().all(|w| counted_before.contains_key(w)) {
        "from the counted runs of an earlier comparison".to_owned()
    } else {
        format!(
            "from the counter's usual {}× slowdown: no counted run of {} measured here yet \
             (`pgo-build compare --metric instructions` measures one)",
            counter.usual_slowdown(),
            if rest.len() == 1 { "it" } else { "them" }
        )
    }
}

/// Why the open workloads `rest` are not counted: what counting them would take, `whole`
/// seconds by `basis`, against what is `left` of the budget.
fn over_budget_note(
    (rest, label, counter): (&[String], &str, &Counter),
    whole: f64,
    left: Duration,
    basis: String,
) -> String {
    format!(
        "{} left open by {label}; counting their instructions ({}) would take about {} \
         ({basis}), over the counting budget of {} ([compare] counting_budget, gate --budget)",
        rest.join(", "),
        counter.describe(),
        duration(Duration::from_secs_f64(whole)),
        duration(left)
    )
}

/// Puts the counts of `workload` in place of the open verdicts, each with what the deciding
/// metric had said.
fn settle(result: &mut CompareResult, counts: &CompareResult, workload: &str, label: &str) {
    let decider = result.decider();
    let margin = result.margin;
    let said = |summary: &crate::measure::stats::PairedSummary| {
        format!("{label}: {}", verdict_text(summary, &decider))
    };
    let Some(counted) = counts.workloads.iter().find(|w| w.workload == workload) else {
        return;
    };
    let Some(comparison) = result.workloads.iter_mut().find(|w| w.workload == workload) else {
        return;
    };
    if comparison.code.is_empty() {
        comparison.code = counted.code.clone();
    }
    for (candidate, summary) in comparison.candidates.iter_mut() {
        let Some(mut instructions) = counted
            .candidates
            .get(candidate)
            .and_then(|c| c.instructions.clone())
        else {
            continue;
        };
        if standing(summary.judged(&decider), margin) != Standing::Open {
            continue;
        }
        instructions.left_open_by = Some(said(summary.judged(&decider)));
        summary.instructions = Some(instructions);
    }
    for pair in result.between.iter_mut().filter(|p| p.workload == workload) {
        if standing(&pair.summary, margin) != Standing::Open {
            continue;
        }
        if let Some(count) = counts.between.iter().find(|c| {
            c.workload == pair.workload
                && c.candidate == pair.candidate
                && c.reference == pair.reference
        }) {
            let mut summary = count.summary.clone();
            summary.left_open_by = Some(said(&pair.summary));
            pair.summary = summary;
        }
    }
    for previous in result
        .previous
        .iter_mut()
        .filter(|p| p.workload == workload)
    {
        if standing(&previous.summary, margin) != Standing::Open {
            continue;
        }
        if let Some(count) = counts
            .previous
            .iter()
            .find(|c| c.workload == workload && c.candidate == previous.candidate)
        {
            let mut summary = count.summary.clone();
            summary.left_open_by = Some(said(&previous.summary));
            previous.summary = summary;
        }
    }
}
