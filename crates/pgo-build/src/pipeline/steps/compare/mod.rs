//! `pgo-build compare`: is a variant really faster, on work it was not trained on?
//!
//! For each workload: one warm-up round that is not counted, then paired rounds in which every
//! variant runs once, in a random order drawn afresh each round from the seed, so nothing a
//! shared, noisy machine does can line up with one variant. Each run is the whole workload command,
//! timed from outside: wall-clock time, and the user+system CPU time of its process tree.
//! Holdout and train workloads are summarised separately; only holdout ones can fail
//! `--fail-if-slower`.

use std::collections::BTreeMap;

use anyhow::{Result, bail};

use crate::config::Role;
use crate::layout::Stage;
use crate::measure::counter::Counter;
use crate::measure::metric::{CompareRole, Decider, Metric, Rounds};
use crate::measure::stats::{self, Verdict};
use crate::pipeline::context::{Context, Session};
use crate::pipeline::requests::{CompareRequest, CompareSettings};
use crate::pipeline::workload_runs::{check_cargo_targets, remove_logs_of_unknown_workloads};
use crate::report::CompareResult;
use crate::report::tables::{benchmark_table, compare_table, metrics_table};
use checks::emulation_note;
use previous::{against, previous_variant};
use rounds::{Looks, compare_workload, compare_workloads};
use variant::compare_variants;

mod checks;
mod fallback;
mod previous;
mod rounds;
#[cfg(test)]
mod simulation;
mod summary;
mod variant;

pub(in crate::pipeline) use previous::{PREVIOUS, against_previous};
pub(in crate::pipeline) use rounds::run_once;
use summary::comparisons_rounds;
use summary::judge_family;
pub(in crate::pipeline) use summary::summarize_candidates;
pub(in crate::pipeline) use variant::Compared;

/// The variants `request` names (or the default ones), and with `--against` the last release's.
pub(crate) fn variants_of(cx: &Context, request: &CompareRequest) -> Result<Vec<Compared>> {
    let mut variants = compare_variants(cx, &request.variants)?;
    if let Some(dir) = &request.against {
        let previous = previous_variant(cx, dir, variants.last().expect("two variants"))?;
        variants.push(previous);
    }
    Ok(variants)
}

/// Where a comparison left nothing shipping and counted no instructions by callgrind: one
/// counted run (after an uncounted warm-up) of each held-out workload on its reference and on
/// the optimized build, for whose code they run in, the answer's why (`report/why.rs`). Only
/// where callgrind runs the binaries (not under an emulator), for workloads that are not
/// cargo benches (whose criterion results the comparison keeps), and within the counting
/// budget: estimated at callgrind's usual slowdown before it starts, and checked before each
/// workload. What it leaves out, it says.
pub(in crate::pipeline) fn count_code(cx: &Context, session: &mut Session) -> Result<()> {
    let Some(result) = session.report.compare.as_ref() else {
        return Ok(());
    };
    let optimized = Stage::Optimized.name();
    if !result.candidates.iter().any(|c| c == optimized) {
        return Ok(());
    }
    let uncounted = uncounted_holdout(cx, result, optimized);
    if uncounted.is_empty() {
        return Ok(());
    }
    let why = "for the answer's why";
    if checks::emulation_note(cx, Metric::Instructions).is_err() {
        cx.printer.info(format!(
            "not counting whose code the held-out work runs, {why}: its binaries run under an \
             emulator, which callgrind cannot run"
        ));
        return Ok(());
    }
    let Some(counter) = Counter::callgrind(&cx.printer) else {
        cx.printer.info(format!(
            "not counting whose code the held-out work runs, {why}: that needs valgrind's \
             callgrind (`apt-get install valgrind`)"
        ));
        return Ok(());
    };
    // A warm-up run, then a counted one, of each of the two variants.
    let estimate = |wall: f64| wall * 2.0 * f64::from(1 + counter.usual_slowdown());
    let whole: f64 = uncounted.iter().map(|(_, wall)| estimate(*wall)).sum();
    let budget = cx.config.compare.counting_budget();
    let duration = |secs: f64| {
        std::time::Duration::try_from_secs_f64(secs).map_or_else(
            |_| "an unknown time".to_owned(),
            crate::util::printer::duration,
        )
    };
    if !whole.is_finite() || whole > budget.as_secs_f64() {
        cx.printer.info(format!(
            "not counting whose code the held-out work runs, {why}: about {} at callgrind's \
             usual {}× slowdown, over the counting budget of {} ([compare] counting_budget)",
            duration(whole),
            counter.usual_slowdown(),
            duration(budget.as_secs_f64())
        ));
        return Ok(());
    }
    let (reference, seed) = (result.reference.clone(), result.seed);
    let variants = [reference.as_str(), optimized]
        .into_iter()
        .map(|name| {
            let stage = Stage::from_variant(name)
                .ok_or_else(|| anyhow::anyhow!("`{name}` is not a stage pgo-build builds"))?;
            // Logs of their own: the comparison's stay as it left them.
            Ok(Compared {
                log_prefix: "count",
                ..variant::staged_variant(cx, stage)?
            })
        })
        .collect::<Result<Vec<_>>>()?;
    cx.printer.info(format!(
        "nothing ships: counting whose code the held-out work runs (one run of each held-out \
         workload on {reference} and {optimized} under callgrind, about {}), {why}",
        duration(whole)
    ));
    let decider = Decider::Measured(Metric::Instructions);
    let started = std::time::Instant::now();
    let names: Vec<String> = uncounted.iter().map(|(name, _)| name.clone()).collect();
    for workload in compare_workloads(cx, &names, CompareRole::Holdout)? {
        if started.elapsed() > budget {
            cx.printer.info(format!(
                "the counting budget of {} ran out before `{}` was counted",
                duration(budget.as_secs_f64()),
                workload.name()
            ));
            break;
        }
        let counted = compare_workload(
            cx,
            &workload,
            &variants,
            &Looks {
                at: &[1],
                alpha: stats::ALPHA,
                decider: &decider,
                margin: cx.config.compare.margin(),
                deadline: None,
                deciding_level: stats::ALPHA,
                done: "counted whose code ran on",
            },
            seed,
            Some(&counter),
        )?;
        if let Some(compared) = session.report.compare.as_mut().and_then(|c| {
            c.workloads
                .iter_mut()
                .find(|w| w.workload == workload.name())
        }) {
            compared.code = counted.code;
        }
        // Not a step (whose end saves the report): saved as it goes, so an interruption keeps
        // what was counted and `report` says the same why.
        session.report.save(&cx.layout.report())?;
    }
    Ok(())
}

/// The held-out workloads `count_code` counts (no counts by code yet, not a cargo bench), each
/// with the longer median wall time of its two sides against `optimized`.
fn uncounted_holdout(cx: &Context, result: &CompareResult, optimized: &str) -> Vec<(String, f64)> {
    result
        .workloads
        .iter()
        .filter(|w| w.role == Role::Holdout && w.code.is_empty())
        .filter(|w| {
            cx.config
                .workload(&w.workload)
                .is_some_and(|workload| workload.cargo.is_none())
        })
        .filter_map(|w| {
            let summary = w.candidates.get(optimized)?;
            let wall = summary
                .reference_median_wall_secs
                .max(summary.candidate_median_wall_secs);
            Some((w.workload.clone(), wall))
        })
        .collect()
}

/// With cross-language PGO the baseline's C/C++ is the user's compiler's and a
/// cross-language stage's is clang's: what the comparison shows is the compiler switch as well
/// as PGO, which `explore`'s `clang` variant (clang without a profile) separates.
fn c_compilers_differ(cx: &Context, session: &Session, result: &CompareResult) -> Option<String> {
    let compiled_by = |variant: &str| {
        let stage = Stage::from_variant(variant)?;
        session
            .report
            .c_compilers
            .get(&stage)
            .map(|c| c.compiler.clone())
    };
    let reference = compiled_by(&result.reference);
    let (candidate, clang) = result
        .candidates
        .iter()
        .find_map(|c| Some((c, compiled_by(c)?)))
        .filter(|(_, clang)| reference.as_ref() != Some(clang))?;
    let users = reference.unwrap_or_else(|| {
        crate::toolchain::cross_language::users_own_compiler(
            "CC",
            &cx.platform.triple,
            &cx.rustc.host,
        )
    });
    Some(format!(
        "the C/C++ of build scripts is compiled by {users} in {} and by {clang} in {candidate}: \
         the comparison measures the compiler switch as well as PGO (`pgo-build explore \
         --variants clang,pgo,pgo+c` separates the two)",
        result.reference
    ))
}

/// Runs the comparison, prints its table and records it in the report.
pub fn compare(
    cx: &Context,
    session: &mut Session,
    request: &CompareRequest,
) -> Result<CompareResult> {
    let variants = variants_of(cx, request)?;
    let mut result = measure(cx, &variants, request, Family::Judged)?;
    let counting_budget = request.settings(&cx.config)?.counting_budget;
    let count = |workload: &str| {
        let counting = CompareRequest {
            workloads: vec![workload.to_owned()],
            metric: Some(Decider::Measured(Metric::Instructions)),
            rounds: None,
            ..request.clone()
        };
        measure(cx, &variants, &counting, Family::SplitByCaller)
    };
    let counted_before = fallback::counted_run_secs(&session.report);
    fallback::settle_by_instructions(
        cx,
        (variants.len(), &counted_before),
        &count,
        counting_budget,
        &mut result,
    )?;
    // What decides changed where counts settled a workload: the means follow.
    result.geometric_mean =
        geometric_means(&result.workloads, &result.candidates, &result.decider());
    result.c_compilers_differ = c_compilers_differ(cx, session, &result);
    if let Some(note) = &result.c_compilers_differ {
        cx.printer.warn(note);
    }
    for line in previous::describe(&result) {
        cx.printer.info(line);
    }
    let decider = result.decider();
    cx.printer.table(compare_table(&result));
    if let Some(table) = metrics_table(&result) {
        cx.printer.table(table);
    }
    if let Some(table) = benchmark_table(&result) {
        cx.printer.table(table);
    }
    for comparison in &result.workloads {
        for (candidate, summary) in &comparison.candidates {
            if let Some(note) = &summary.judged(&decider).resolution_note {
                cx.printer
                    .info(format!("{} ({candidate}): {note}", comparison.workload));
            }
            for (name, metric) in summary.metrics.iter().filter(|(_, m)| m.tail_regression) {
                cx.printer.warn(format!(
                    "{} ({candidate}): tail regression: {name} is {:.1}% worse ({} → {} {}) \
                     although the distribution's median is not",
                    comparison.workload,
                    (metric.summary.median_ratio - 1.0) * 100.0,
                    crate::util::units::figure(metric.reference_median),
                    crate::util::units::figure(metric.candidate_median),
                    metric.unit
                ));
            }
        }
    }
    // Which binaries each verdict is about, where a workload runs only some of them.
    let all: Vec<&str> = variants[0].bin_names();
    for comparison in &result.workloads {
        if let Some(runs) = &comparison.binaries {
            let others: Vec<&str> = all
                .iter()
                .copied()
                .filter(|b| !runs.iter().any(|r| r == b))
                .collect();
            if !others.is_empty() {
                cx.printer.info(format!(
                    "`{}` runs {}: its verdicts say nothing of {}",
                    comparison.workload,
                    runs.join(", "),
                    others.join(", ")
                ));
            }
        }
    }
    // Measured: the result stands, whatever --fail-if-slower says of it.
    session.begin_outputs(cx)?;
    session
        .report
        .record_compare(&result, crate::report::invocation());
    if request.fail_if_slower {
        fail_if_slower(&result, &decider)?;
    }
    Ok(result)
}

/// `--fail-if-slower`: an error naming every held-out slowdown the result proves, against
/// the baseline or the last release.
fn fail_if_slower(result: &CompareResult, decider: &Decider) -> Result<()> {
    let mut slower: Vec<String> = result
        .workloads
        .iter()
        .filter(|c| c.role == Role::Holdout)
        .flat_map(|c| {
            c.candidates
                .iter()
                .filter(|(_, s)| s.judged(decider).verdict == Verdict::Slower)
                .map(|(candidate, s)| {
                    format!(
                        "{} is {:.1}% {} on `{}`",
                        candidate,
                        (s.judged(decider).median_ratio - 1.0) * 100.0,
                        if decider.reported().is_some() {
                            "worse"
                        } else {
                            "slower"
                        },
                        c.workload
                    )
                })
        })
        .collect();
    slower.extend(
        result
            .previous
            .iter()
            .filter(|p| {
                p.summary.verdict == Verdict::Slower
                    && result
                        .workloads
                        .iter()
                        .any(|w| w.workload == p.workload && w.role == Role::Holdout)
            })
            .map(|p| {
                format!(
                    "{} is {:.1}% slower than {PREVIOUS} (the last release) on `{}`",
                    p.candidate,
                    (p.summary.median_ratio - 1.0) * 100.0,
                    p.workload
                )
            }),
    );
    if !slower.is_empty() {
        bail!("--fail-if-slower: {}", slower.join("; "));
    }
    Ok(())
}

/// Whether a measurement's verdicts are judged as one family (see `measure::family`), or by
/// a caller that splits the level itself (`explore`'s race).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Family {
    Judged,
    SplitByCaller,
}

/// The paired, interleaved rounds of `variants` (the first is the reference; a variant named
/// `previous` is the last release, judged against every other candidate too) on the
/// workloads `request` selects, summarised; prints progress, not the result.
pub(crate) fn measure(
    cx: &Context,
    variants: &[Compared],
    request: &CompareRequest,
    family: Family,
) -> Result<CompareResult> {
    let CompareSettings {
        decider,
        role,
        rounds: plan,
        budget_secs,
        ..
    } = request.settings(&cx.config)?;
    let metric = decider.measured();
    let workloads = compare_workloads(cx, &request.workloads, role)?;
    check_cargo_targets(cx, &workloads)?;
    let looks: Vec<usize> = match plan {
        Rounds::Fixed(rounds) => vec![rounds],
        Rounds::Auto => stats::AUTO_LOOKS.to_vec(),
    };
    // Each planned look is made at an equal share of the level (Bonferroni).
    let alpha = stats::ALPHA / looks.len() as f64;
    let rounds_text = rounds_text(plan, &looks, alpha, budget_secs);
    let emulated = emulation_note(cx, metric)?;
    if let Some(note) = &emulated {
        cx.printer.warn(note);
    }
    let counter = match metric {
        Metric::Instructions => Some(Counter::detect(&cx.printer)?),
        _ => None,
    };
    if let Some(counter) = &counter {
        cx.printer
            .info(format!("counting instructions with {}", counter.describe()));
    }
    let names: Vec<&str> = variants.iter().map(|v| v.name.as_str()).collect();
    cx.printer.info(format!(
        "comparing {} over {}: 1 warm-up + {rounds_text} each, in a random order each round (seed {})",
        names.join(" vs "),
        crate::util::units::count(workloads.len(), "workload", "workloads"),
        request.seed
    ));
    // compare-<workload>-<variant>.log
    remove_logs_of_unknown_workloads(cx, "compare", |rest| {
        rest.rsplit_once('-').map(|(workload, _)| workload)
    });
    let margin = cx.config.compare.margin();
    let deadline = (plan == Rounds::Auto)
        .then(|| std::time::Instant::now() + std::time::Duration::from_secs(budget_secs));
    // A look settles a workload only when its verdicts are reached where the family puts
    // them, not merely at the look's own level.
    let pairs = made_from(variants);
    let deciding_level = rounds::deciding_level(alpha, workloads.len(), variants.len() - 1);
    let mut comparisons = Vec::new();
    for workload in &workloads {
        comparisons.push(compare_workload(
            cx,
            workload,
            variants,
            &Looks {
                at: &looks,
                alpha,
                decider: &decider,
                margin,
                deadline,
                deciding_level,
                done: "compared on",
            },
            request.seed,
            counter.as_ref(),
        )?);
    }
    let reference = names[0].to_owned();
    // The last release is judged against each candidate (`previous`), not as a candidate.
    let candidates: Vec<String> = names[1..]
        .iter()
        .filter(|n| **n != PREVIOUS)
        .map(|n| n.to_string())
        .collect();
    let geometric_mean = geometric_means(&comparisons, &candidates, &decider);
    let mut result = CompareResult {
        metric,
        decided_by: decider.reported().map(str::to_owned),
        counter: counter.as_ref().map(Counter::describe),
        rounds: comparisons_rounds(&comparisons),
        emulated,
        rounds_plan: Some(rounds_text.clone()),
        seed: request.seed,
        reference,
        candidates,
        workloads: comparisons,
        geometric_mean,
        previous: Vec::new(),
        family: None,
        c_compilers_differ: None,
        between: Vec::new(),
        margin,
        not_counted: None,
        builds: measured_builds(variants),
    };
    if names.contains(&PREVIOUS) {
        result.previous = against_previous(&result, (alpha, margin));
    }
    for (candidate, reference) in &pairs {
        result.between.extend(against(
            &result,
            reference,
            &[candidate.as_str()],
            (alpha, margin),
        ));
    }
    if family == Family::Judged {
        judge_family(&mut result, alpha);
    }
    Ok(result)
}

/// Variant → the stage build it measured, for `report` to tell a verdict on binaries rebuilt
/// since. The last release and explore's variants are not stages here: only the stages' builds
/// are looked up again.
fn measured_builds(variants: &[Compared]) -> BTreeMap<String, String> {
    variants
        .iter()
        .filter(|v| {
            crate::layout::Stage::from_variant(&v.name).is_some() && !v.manifest.id.is_empty()
        })
        .map(|v| (v.name.clone(), v.manifest.id.clone()))
        .collect()
}

/// The candidates made from another candidate (`bolt` from `optimized`: its stage manifest
/// names the other as its input), each with that one.
fn made_from(variants: &[Compared]) -> Vec<(String, String)> {
    let candidates: Vec<&str> = variants[1..]
        .iter()
        .map(|v| v.name.as_str())
        .filter(|name| *name != PREVIOUS)
        .collect();
    variants[1..]
        .iter()
        .filter(|v| v.name != PREVIOUS)
        .flat_map(|v| {
            v.manifest
                .upstream
                .keys()
                .map(|input| input.name())
                .filter(|input| *input != v.name && candidates.contains(input))
                .map(|input| (v.name.clone(), input.to_owned()))
        })
        .collect()
}

/// How the rounds are planned, in words: "10 rounds", or auto's looks, level and budget.
fn rounds_text(plan: Rounds, looks: &[usize], alpha: f64, budget_secs: u64) -> String {
    match plan {
        Rounds::Fixed(rounds) => format!("{rounds} rounds"),
        Rounds::Auto => format!(
            "up to {} rounds (--rounds auto: looks after {} rounds, each with a {:.1}% \
             interval, until every deciding verdict is reached or its interval is within \
             ±{:.0}%, within a budget of {} s)",
            looks[looks.len() - 1],
            looks
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            (1.0 - alpha) * 100.0,
            stats::TARGET_HALF_WIDTH * 100.0,
            budget_secs
        ),
    }
}

/// Per role (holdout, train) and candidate: the geometric mean of the workloads' median
/// ratios by what decides.
fn geometric_means(
    comparisons: &[crate::report::WorkloadComparison],
    candidates: &[String],
    decider: &crate::measure::metric::Decider,
) -> BTreeMap<Role, BTreeMap<String, f64>> {
    let mut geometric_mean: BTreeMap<Role, BTreeMap<String, f64>> = BTreeMap::new();
    for role in [Role::Holdout, Role::Train] {
        for candidate in candidates {
            let medians: Vec<f64> = comparisons
                .iter()
                .filter(|c| c.role == role)
                .map(|c| c.candidates[candidate].judged(decider).median_ratio)
                .collect();
            if !medians.is_empty() {
                geometric_mean
                    .entry(role)
                    .or_default()
                    .insert(candidate.clone(), stats::geometric_mean(&medians));
            }
        }
    }
    geometric_mean
}
