//! The rounds of one workload: a warm-up, then paired rounds in an alternating order (ABBA),
//! each variant's run timed from outside (wall, CPU, page faults), counted (instructions) and
//! read (the workload's own metrics, criterion's estimates), looked at as planned.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context as _, Result, bail};

use super::checks::checked_run;
use super::summary::summarize_candidates;
use super::variant::Compared;
use crate::cli::CompareRole;
use crate::config::{Role, Workload};
use crate::exec;
use crate::measure::counter::Counter;
use crate::measure::criterion;
use crate::measure::metric::Decider;
use crate::measure::stats::{self};
use crate::pipeline::context::Context;
use crate::pipeline::workloads::{resolve_workload, runnable_bins, warn_about_error_lines};
use crate::report::{BenchmarkComparison, CandidateSummary, RunSample, WorkloadComparison};

/// The named workloads, or those of `role`, holdout first.
pub(super) fn compare_workloads(
    cx: &Context,
    names: &[String],
    role: CompareRole,
) -> Result<Vec<Workload>> {
    if !names.is_empty() {
        return names
            .iter()
            .map(|name| {
                cx.config.workload(name).cloned().ok_or_else(|| {
                    anyhow::anyhow!("no workload named `{name}` in {}", cx.config.display_path())
                })
            })
            .collect();
    }
    let holdout = role != CompareRole::Train;
    let train = role != CompareRole::Holdout;
    let workloads: Vec<Workload> = cx
        .config
        .workloads_with_role(Role::Holdout)
        .filter(|_| holdout)
        .chain(cx.config.workloads_with_role(Role::Train).filter(|_| train))
        .cloned()
        .collect();
    if workloads.is_empty() {
        bail!(
            "there are no workloads to compare on: add a [[workload]] with role = \"holdout\" \
             (work training never sees) to {}",
            cx.config.display_path()
        );
    }
    Ok(workloads)
}

pub(super) fn compare_workload(
    cx: &Context,
    workload: &Workload,
    variants: &[Compared],
    looks: &Looks,
    seed: u64,
    counter: Option<&Counter>,
) -> Result<WorkloadComparison> {
    let mut runs = Vec::new();
    let mut rounds = 0;
    let mut candidates = BTreeMap::new();
    // criterion results of an earlier comparison must not be read as this one's.
    let criterion_homes: Vec<std::path::PathBuf> = variants
        .iter()
        .map(|v| criterion::home(&v.layout.cargo_target_dir(v.stage)))
        .collect();
    if workload.cargo.is_some() {
        for home in &criterion_homes {
            if home.exists() {
                crate::util::files::remove_dir_all(home)?;
            }
        }
    }
    // Round 0 is the warm-up (page cache, CPU frequency); it is not counted, and not run
    // under the instruction counter. It also measures how many cores the workload keeps
    // busy (CPU time / wall time), which decides whether variants fit side by side.
    let cores_used = compare_round(cx, workload, variants, 0, None, false, &mut runs)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let side_by_side =
        counter.is_some() && cores >= variants.len() as f64 * cores_used.max(1.0).round();
    for &look in looks.at {
        while rounds < look {
            rounds += 1;
            compare_round(
                cx,
                workload,
                variants,
                rounds,
                counter,
                side_by_side,
                &mut runs,
            )?;
        }
        let names: Vec<&str> = variants.iter().map(|v| v.name.as_str()).collect();
        candidates = summarize_candidates(
            &runs,
            names[0],
            &names[1..],
            rounds,
            (looks.alpha, seed, looks.margin),
            counter.is_some(),
            &workload.metrics,
        );
        let settled = candidates
            .values()
            .all(|c: &CandidateSummary| c.judged(looks.decider).settled(stats::TARGET_HALF_WIDTH));
        if settled {
            break;
        }
    }
    let role = match workload.role {
        Role::Train => "train",
        Role::Holdout => "holdout",
    };
    cx.printer.info(format!(
        "compared on {} ({role}): {rounds} rounds",
        workload.name()
    ));
    for variant in variants {
        // Every counted run succeeded (a failed one is refused).
        warn_about_error_lines(&cx.printer, workload.name(), &variant.log(workload), None);
    }
    let benchmarks = if workload.cargo.is_some() {
        benchmark_comparisons(variants, &criterion_homes)
    } else {
        Vec::new()
    };
    Ok(WorkloadComparison {
        workload: workload.name().to_owned(),
        role: role.to_owned(),
        runs,
        candidates,
        benchmarks,
    })
}

/// One round: every variant once, in an order that alternates between rounds (ABBA), or
/// all at once (`side_by_side`: instruction counts do not mind sharing the machine, times
/// do). Returns the most cores a variant's run kept busy (CPU time / wall time).
pub(super) fn compare_round(
    cx: &Context,
    workload: &Workload,
    variants: &[Compared],
    round: usize,
    counter: Option<&Counter>,
    side_by_side: bool,
    runs: &mut Vec<RunSample>,
) -> Result<f64> {
    let mut order: Vec<&Compared> = variants.iter().collect();
    if round % 2 == 1 {
        order.reverse();
    }
    let running = cx.layout.running_dir();
    let bin_dirs: Vec<(PathBuf, exec::EnvVars)> = order
        .iter()
        .map(|v| runnable_bins(cx, &v.layout, v.stage, &v.bin_names()))
        .collect::<Result<_>>()?;
    // Each run's counts alone: callgrind writes one file per process.
    let count_dirs: Vec<PathBuf> = order
        .iter()
        .map(|v| cx.layout.root().join("counts").join(&v.name))
        .collect();
    if counter.is_some() {
        for dir in &count_dirs {
            if dir.exists() {
                crate::util::files::remove_dir_all(dir)?;
            }
            crate::util::files::create_dir_all(dir)?;
        }
    }
    let targets: Vec<exec::Target> = order
        .iter()
        .zip(&bin_dirs)
        .zip(&count_dirs)
        .map(|((variant, (bin_dir, env)), count_dir)| exec::Target {
            stage: variant.stage,
            bin_dir,
            bin_names: variant.bin_names(),
            workspace_root: &cx.workspace.root,
            extra_env: env.clone(),
            wrapper: counter.map(|c| c.wrapper(count_dir)).unwrap_or_default(),
            log_path: variant.log(workload),
            running_dir: Some(&running),
        })
        .collect();
    // A cargo workload builds and runs its benches with each variant's own build settings.
    let resolved: Vec<crate::exec::Job> = order
        .iter()
        .map(|v| {
            let job = resolve_workload(cx, &v.layout, v.stage, &v.manifest, workload)?;
            // Under the counter a run takes many times longer: so does its timeout.
            Ok(match counter {
                Some(counter) => job.slowed(counter.slowdown()),
                None => job,
            })
        })
        .collect::<Result<_>>()?;
    if let (Some(counter), Some(job), 1) = (counter, resolved.first(), round)
        && counter.slowdown() > 1
    {
        cx.printer.info(format!(
            "{}: timeout {}s under {} ({}× the workload's {}s)",
            workload.name(),
            job.timeout().as_secs(),
            counter.describe(),
            counter.slowdown(),
            workload.timeout.as_secs()
        ));
    }
    let printer = &cx.printer;
    let mut outcomes = Vec::new();
    if side_by_side {
        let results: Vec<Result<exec::Outcome>> = std::thread::scope(|scope| {
            let handles: Vec<_> = targets
                .iter()
                .zip(&resolved)
                .map(|(target, workload)| scope.spawn(|| target.run(workload, printer)))
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().expect("a workload thread panicked"))
                .collect()
        });
        for (result, variant) in results.into_iter().zip(&order) {
            outcomes.push(checked_run(cx, workload, &variant.name, result?)?);
        }
    } else {
        for ((target, running), variant) in targets.iter().zip(&resolved).zip(&order) {
            let outcome = target.run(running, printer)?;
            outcomes.push(checked_run(cx, workload, &variant.name, outcome)?);
        }
    }
    for ((outcome, variant), count_dir) in outcomes.iter().zip(&order).zip(&count_dirs) {
        let name = variant.name.as_str();
        let instructions = counter
            .map(|c| c.read(count_dir))
            .transpose()
            .with_context(|| {
                format!(
                    "could not read the instruction count of `{}` ({} binaries)",
                    workload.name(),
                    name
                )
            })?;
        let (wall, cpu) = (outcome.duration, outcome.cpu);
        let mut reported = if workload.metrics.is_empty() {
            crate::measure::metrics::RunMetrics::default()
        } else {
            crate::measure::metrics::read(
                &workload.metrics,
                &outcome.log_path,
                &outcome.metric_lines,
            )
            .map_err(|reason| {
                anyhow::anyhow!(
                    "workload `{}` against the {name} binaries: {reason}. Full log: {}",
                    workload.name(),
                    outcome.log_path.display()
                )
            })?
        };
        if workload.cargo.is_some() {
            // This run's estimates: each run rewrites criterion's `new/`.
            let home = criterion::home(&variant.layout.cargo_target_dir(variant.stage));
            reported.values.extend(criterion::run_metrics(&home));
        }
        if round == 0 && !reported.undeclared.is_empty() {
            cx.printer.warn(format!(
                "workload `{}` wrote metrics no [[workload.metric]] declares, so they are \
                 not compared: {} (declare each with its direction and unit)",
                workload.name(),
                reported.undeclared.join(", ")
            ));
        }
        cx.printer.detail(format!(
            "{} round {round}{} {}: {:.3}s wall, {:.3}s cpu{}",
            workload.name(),
            if round == 0 { " (warm-up)" } else { "" },
            name,
            wall.as_secs_f64(),
            cpu.as_secs_f64(),
            if side_by_side { " (side by side)" } else { "" }
        ));
        if round > 0 {
            runs.push(RunSample {
                round,
                variant: name.to_owned(),
                wall_secs: wall.as_secs_f64(),
                cpu_secs: cpu.as_secs_f64(),
                instructions,
                faults: Some(outcome.faults),
                metrics: reported.values,
            });
        }
    }
    Ok(outcomes
        .iter()
        .map(|o| o.cpu.as_secs_f64() / o.duration.as_secs_f64().max(1e-6))
        .fold(0.0, f64::max))
}

/// One run of `workload` against `variant`, outside any round: `explore` checks with it
/// that every variant passes the holdout workloads before timing any.
pub(crate) fn run_once(
    cx: &Context,
    workload: &Workload,
    variant: &Compared,
) -> Result<exec::Outcome> {
    let running = cx.layout.running_dir();
    let (bin_dir, env) = runnable_bins(cx, &variant.layout, variant.stage, &variant.bin_names())?;
    let target = exec::Target {
        stage: variant.stage,
        bin_dir: &bin_dir,
        bin_names: variant.bin_names(),
        workspace_root: &cx.workspace.root,
        extra_env: env,
        wrapper: Vec::new(),
        log_path: variant.log(workload),
        running_dir: Some(&running),
    };
    let resolved = resolve_workload(
        cx,
        &variant.layout,
        variant.stage,
        &variant.manifest,
        workload,
    )?;
    target.run(&resolved, &cx.printer)
}

/// When `compare_workload` looks at the data, and at which level.
pub(super) struct Looks<'a> {
    /// Pairs after which to look (the last is the most that run).
    pub(super) at: &'a [usize],
    pub(super) alpha: f64,
    pub(super) decider: &'a Decider,
    /// `[compare] margin`: "no difference" only within it.
    pub(super) margin: f64,
}

/// Each criterion benchmark's estimate of every candidate against the reference (the first
/// variant), where both have one.
pub(super) fn benchmark_comparisons(
    variants: &[Compared],
    homes: &[std::path::PathBuf],
) -> Vec<BenchmarkComparison> {
    let estimates: Vec<_> = homes
        .iter()
        .map(|home| criterion::estimates(home))
        .collect();
    let mut comparisons = Vec::new();
    for (variant, candidate) in variants.iter().zip(&estimates).skip(1) {
        for (benchmark, reference) in &estimates[0] {
            if let Some(estimate) = candidate.get(benchmark) {
                comparisons.push(BenchmarkComparison {
                    benchmark: benchmark.clone(),
                    candidate: variant.name.clone(),
                    reference_estimate: *reference,
                    candidate_estimate: *estimate,
                    ratio: estimate.median_ns / reference.median_ns,
                });
            }
        }
    }
    comparisons
}
