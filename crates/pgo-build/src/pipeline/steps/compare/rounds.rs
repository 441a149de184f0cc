//! The rounds of one workload: a warm-up, then paired rounds in a random order each round,
//! each variant's run timed from outside (wall, CPU, page faults), counted (instructions) and
//! read (the workload's own metrics, criterion's estimates), looked at as planned.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context as _, Result, bail};

use super::checks::checked_run;
use super::previous::PREVIOUS;
use super::summary::summarize_candidates;
use super::variant::Compared;
use crate::config::{Role, Workload};
use crate::exec;
use crate::measure::counter::Counter;
use crate::measure::criterion;
use crate::measure::metric::{CLIENT_CPU, CompareRole, Decider, SERVICES_CPU, service_metric};
use crate::measure::stats::{self};
use crate::pipeline::context::Context;
use crate::pipeline::workload_runs::{resolve_workload, runnable_bins, warn_about_error_lines};
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
    let criterion_homes = fresh_criterion_homes(workload, variants)?;
    // Round 0 is the warm-up (page cache, CPU frequency); it is not counted, and not run
    // under the instruction counter. It also measures how many cores the workload keeps
    // busy (CPU time / wall time), which decides whether variants fit side by side.
    let warm_up = RoundPlan {
        number: 0,
        order: (0..variants.len()).collect(),
        side_by_side: false,
    };
    let mut seen = std::collections::BTreeSet::new();
    let cores_used = compare_round(cx, workload, variants, &warm_up, None, &mut runs, &mut seen)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let side_by_side =
        counter.is_some() && cores >= variants.len() as f64 * cores_used.max(1.0).round();
    let counted_from = std::time::Instant::now();
    let mut budget_ran_out = false;
    for &look in looks.at {
        // After the first look: only a look that ends within the budget, at the pace so far.
        if rounds > 0
            && let Some(deadline) = looks.deadline
        {
            let per_round = counted_from.elapsed() / rounds as u32;
            if std::time::Instant::now() + per_round * (look - rounds) as u32 > deadline {
                budget_ran_out = true;
                break;
            }
        }
        while rounds < look {
            rounds += 1;
            let plan = RoundPlan {
                number: rounds,
                order: round_order(seed, workload.name(), rounds, variants.len()),
                side_by_side,
            };
            compare_round(cx, workload, variants, &plan, counter, &mut runs, &mut seen)?;
        }
        let names: Vec<&str> = variants.iter().map(|v| v.name.as_str()).collect();
        // The last release is judged against each candidate afterwards, not as a candidate.
        let judged: Vec<&str> = names[1..]
            .iter()
            .copied()
            .filter(|n| *n != PREVIOUS)
            .collect();
        candidates = summarize_candidates(
            &runs,
            names[0],
            &judged,
            rounds,
            (looks.alpha, looks.margin),
            counter.is_some(),
            &workload.metrics,
        );
        // Against the reference only: a candidate against the one it was made from (bolt
        // against optimized) decides which of two good builds ships, and without a verdict
        // the simpler one does, so it never keeps the rounds going.
        let judged: Vec<CandidateSummary> = candidates.values().cloned().collect();
        if look_settles(&judged, looks.decider, looks.deciding_level) {
            break;
        }
    }
    cx.printer.info(format!(
        "{} {} ({}): {}{}",
        looks.done,
        workload.name(),
        workload.role,
        crate::util::units::count(rounds, "round", "rounds"),
        if budget_ran_out {
            " (the time budget, --budget or [compare] budget, ran out before the next look)"
        } else {
            ""
        }
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
    let binaries = binaries_of(cx, workload, variants, seen);
    let code = match counter {
        Some(counter) if rounds > 0 => code_counts(cx, workload, variants, counter),
        _ => BTreeMap::new(),
    };
    Ok(WorkloadComparison {
        workload: workload.name().to_owned(),
        role: workload.role,
        runs,
        candidates,
        benchmarks,
        binaries,
        budget_ran_out,
        code,
    })
}

/// Whose code each variant's last counted run ran in: its files stay in `counts/<variant>/`
/// until the next round. The program's code is what a variant's stage directory holds (its
/// staged binaries and its cargo target directory), paths resolved, so a symlinked target
/// directory or another release's binaries (`--against`) count as the program too.
/// One that cannot be read costs the answer its why line, said here, not the comparison.
fn code_counts(
    cx: &Context,
    workload: &Workload,
    variants: &[Compared],
    counter: &Counter,
) -> BTreeMap<String, crate::measure::code_counts::CodeCounts> {
    let resolved = |path: &std::path::Path| std::fs::canonicalize(path).unwrap_or(path.to_owned());
    let stage_dirs: Vec<PathBuf> = variants
        .iter()
        .map(|v| resolved(&v.layout.stage_dir(v.stage)))
        .collect();
    let own = |object: &str| {
        let object = resolved(std::path::Path::new(object));
        stage_dirs.iter().any(|dir| object.starts_with(dir))
    };
    let counts = cx.layout.root().join("counts");
    let mut code = BTreeMap::new();
    for variant in variants {
        match counter.code_counts(&counts.join(&variant.name), &own) {
            Some(Ok(counted)) => {
                code.insert(variant.name.clone(), counted);
            }
            Some(Err(err)) => cx.printer.warn(format!(
                "could not read whose code `{}` ran in ({} binaries), so the answer cannot say \
                 where its instructions went: {err:#}",
                workload.name(),
                variant.name
            )),
            None => {}
        }
    }
    code
}

/// Each variant's criterion directory, emptied for a cargo bench workload: results of an
/// earlier comparison must not be read as this one's.
fn fresh_criterion_homes(workload: &Workload, variants: &[Compared]) -> Result<Vec<PathBuf>> {
    let homes: Vec<PathBuf> = variants
        .iter()
        .map(|v| criterion::home(&v.layout.cargo_target_dir(v.stage)))
        .collect();
    if workload.cargo.is_some() {
        for home in &homes {
            if home.exists() {
                crate::util::files::remove_dir_all(home)?;
            }
        }
    }
    Ok(homes)
}

/// The binaries a workload ran: what its commands name, with what its warm-up was seen to run
/// (a launcher's children); `None` when its commands cannot be read for names.
fn binaries_of(
    cx: &Context,
    workload: &Workload,
    variants: &[Compared],
    seen: std::collections::BTreeSet<String>,
) -> Option<Vec<String>> {
    let bins: Vec<&str> = variants
        .iter()
        .flat_map(|v| v.bin_names())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    exec::binaries_run(workload, &bins, &cx.workspace.root).map(|named| {
        named
            .into_iter()
            .chain(seen)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect()
    })
}

/// The level a deciding verdict gets in the family at the least: Bonferroni over the deciding
/// verdicts (one per workload and candidate, the last release included), which Holm never
/// does worse than, at the deciding figure's share of the look's level.
pub(super) fn deciding_level(look_alpha: f64, workloads: usize, verdicts_each: usize) -> f64 {
    let deciding_verdicts = (workloads * verdicts_each).max(1);
    look_alpha * crate::measure::family::PRIMARY_SHARE / deciding_verdicts as f64
}

/// Whether a look settles a workload: every candidate's deciding verdict is reached, or its
/// interval is within the target half-width, at `level` (a verdict reached only at the look's
/// own level could still be overruled by the family, so stopping would not conclude).
pub(super) fn look_settles(candidates: &[CandidateSummary], decider: &Decider, level: f64) -> bool {
    candidates.iter().all(|c| {
        stats::summarize_at(&c.judged(decider).ratios, level).settled(stats::TARGET_HALF_WIDTH)
    })
}

/// How one round runs.
pub(super) struct RoundPlan {
    /// 0 for the warm-up, which is not counted.
    pub(super) number: usize,
    /// The variants' indices in the order they run.
    pub(super) order: Vec<usize>,
    /// All at once: instruction counts do not mind sharing the machine, times do.
    pub(super) side_by_side: bool,
}

/// The order the variants run in counted round `round` of `workload`: a random permutation,
/// a fresh one each round, drawn from the comparison's seed (so a comparison can be run
/// again in the same orders). Random rather than alternating: a variant's place in a round is
/// then independent of whatever else the machine does, which is what lets the paired tests
/// hold their level on a busy machine. An alternating order lines up with load that cycles
/// every two rounds, and with what one run leaves for the next (a warm cache, a busy core),
/// and then measures those instead of the binaries.
pub(super) fn round_order(seed: u64, workload: &str, round: usize, variants: usize) -> Vec<usize> {
    let mut key = seed ^ (round as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for byte in workload.bytes() {
        key = (key ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01B3);
    }
    let mut rng = stats::SplitMix64(key);
    let mut order: Vec<usize> = (0..variants).collect();
    // Fisher-Yates.
    for i in (1..variants).rev() {
        let j = (rng.next() % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

/// The staged binaries of `variant` among `executables` (what a run's processes ran).
fn staged_binaries_among(
    variant: &Compared,
    executables: &std::collections::BTreeSet<PathBuf>,
) -> Vec<String> {
    let bin_dir = variant.layout.bin_dir(variant.stage);
    variant
        .bin_names()
        .into_iter()
        .filter(|name| {
            let staged = bin_dir.join(name);
            let staged = std::fs::canonicalize(&staged).unwrap_or(staged);
            executables.contains(&staged)
        })
        .map(str::to_owned)
        .collect()
}

/// Every run of a comparison gets its round's number (0 the warm-up, then 1, 2, ...): the
/// same for every variant within a round, so a workload can vary its input by round and keep
/// the pairs alike.
pub const ROUND_ENV: &str = "PGO_BUILD_ROUND";

/// One round: every variant once, in the plan's order or all at once; the staged binaries
/// the observed (warm-up) runs ran go into `seen`. Returns the most cores a variant's run
/// kept busy (CPU time / wall time).
pub(super) fn compare_round(
    cx: &Context,
    workload: &Workload,
    variants: &[Compared],
    plan: &RoundPlan,
    counter: Option<&Counter>,
    runs: &mut Vec<RunSample>,
    seen: &mut std::collections::BTreeSet<String>,
) -> Result<f64> {
    let order: Vec<&Compared> = plan.order.iter().map(|&i| &variants[i]).collect();
    let (round, side_by_side) = (plan.number, plan.side_by_side);
    let running = cx.layout.running_dir();
    let bin_dirs: Vec<(PathBuf, exec::EnvVars)> = order
        .iter()
        .map(|v| runnable_bins(cx, &v.layout, v.stage, &v.bin_names()))
        .collect::<Result<_>>()?;
    // Each run's counts alone: callgrind writes one file per process. A service's go to a
    // directory of its own beside its client's.
    let counts = cx.layout.root().join("counts");
    let count_dirs: Vec<PathBuf> = order.iter().map(|v| counts.join(&v.name)).collect();
    let service_dir =
        |variant: &str, service: &str| counts.join(format!("{variant}.service.{service}"));
    if counter.is_some() {
        let services = order.iter().flat_map(|variant| {
            workload
                .service_specs
                .iter()
                .map(|service| service_dir(&variant.name, service.name()))
        });
        for dir in count_dirs.iter().cloned().chain(services) {
            if dir.exists() {
                crate::util::files::remove_dir_all(&dir)?;
            }
            crate::util::files::create_dir_all(&dir)?;
        }
    }
    let service_wrappers = service_wrappers(&order, counter, &counts);
    let targets: Vec<exec::RunSetup> = order
        .iter()
        .zip(&bin_dirs)
        .zip(&count_dirs)
        .zip(&service_wrappers)
        .map(
            |(((variant, (bin_dir, env)), count_dir), service_wrapper)| exec::RunSetup {
                stage: variant.stage,
                bin_dir,
                bin_names: variant.bin_names(),
                workspace_root: &cx.workspace.root,
                extra_env: env
                    .iter()
                    .cloned()
                    .chain([(ROUND_ENV.to_owned(), round.to_string())])
                    .collect(),
                wrapper: counter.map(|c| c.wrapper(count_dir)).unwrap_or_default(),
                log_path: variant.log(workload),
                running_dir: Some(&running),
                // The warm-up looks at what runs: which staged binaries the workload runs.
                observe: round == 0,
                service_wrapper: counter.map(|_| &**service_wrapper as &exec::ServiceWrapper<'_>),
            },
        )
        .collect();
    let resolved = resolved_jobs(cx, workload, &order, counter, round)?;
    let outcomes = run_targets(cx, workload, &order, &targets, &resolved, side_by_side)?;
    for ((outcome, variant), count_dir) in outcomes.iter().zip(&order).zip(&count_dirs) {
        let name = variant.name.as_str();
        seen.extend(staged_binaries_among(variant, &outcome.executables));
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
        let mut reported = reported_metrics(workload, name, outcome)?;
        add_service_figures(&mut reported, outcome, (counter, name), &|service| {
            service_dir(name, service)
        })?;
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
    Ok(cores_used(&outcomes))
}

/// The most cores a run of the round kept busy: its CPU time over its wall time.
fn cores_used(outcomes: &[exec::Outcome]) -> f64 {
    outcomes
        .iter()
        .map(|o| o.cpu.as_secs_f64() / o.duration.as_secs_f64().max(1e-6))
        .fold(0.0, f64::max)
}

/// Per variant: what each of its services runs under (the counter, into a directory of the
/// service's own beside the client's counts), or nothing.
fn service_wrappers<'a>(
    order: &[&Compared],
    counter: Option<&'a Counter>,
    counts: &std::path::Path,
) -> Vec<Box<exec::ServiceWrapper<'a>>> {
    order
        .iter()
        .map(|variant| -> Box<exec::ServiceWrapper<'a>> {
            let variant = variant.name.clone();
            let counts = counts.to_path_buf();
            match counter {
                Some(counter) => Box::new(move |service: &str| {
                    counter.wrapper(&counts.join(format!("{variant}.service.{service}")))
                }),
                None => Box::new(|_: &str| Vec::new()),
            }
        })
        .collect()
}

/// Each variant's job of `workload`: a cargo workload builds and runs its benches with each
/// variant's own build settings; under the counter a run takes many times longer, and so does
/// its timeout (said once, in the first round).
fn resolved_jobs(
    cx: &Context,
    workload: &Workload,
    order: &[&Compared],
    counter: Option<&Counter>,
    round: usize,
) -> Result<Vec<crate::exec::Job>> {
    let resolved: Vec<crate::exec::Job> = order
        .iter()
        .map(|v| {
            let job = resolve_workload(cx, &v.layout, v.stage, &v.manifest, workload)?;
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
    Ok(resolved)
}

/// The metrics a run of `workload` against the `name` binaries reported.
fn reported_metrics(
    workload: &Workload,
    name: &str,
    outcome: &exec::Outcome,
) -> Result<crate::measure::reported_metrics::RunMetrics> {
    if workload.metrics.is_empty() {
        return Ok(crate::measure::reported_metrics::RunMetrics::default());
    }
    crate::measure::reported_metrics::read(
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
    })
}

/// Each service's own cost (CPU, faults, peak memory, instructions under the counter, read
/// from `service_dir(service)`), and the client's CPU time without them.
fn add_service_figures(
    reported: &mut crate::measure::reported_metrics::RunMetrics,
    outcome: &exec::Outcome,
    (counter, variant): (Option<&Counter>, &str),
    service_dir: &dyn Fn(&str) -> PathBuf,
) -> Result<()> {
    for service in &outcome.services {
        let figure = |figure: &str| service_metric(&service.name, figure);
        reported
            .values
            .insert(figure("cpu"), service.cpu.as_secs_f64());
        reported
            .values
            .insert(figure("faults"), service.faults as f64);
        reported.values.insert(
            figure("peak_rss"),
            service.max_rss_bytes as f64 / (1 << 20) as f64,
        );
        if let Some(counter) = counter {
            let count = counter.read(&service_dir(&service.name)).with_context(|| {
                format!(
                    "could not read the instruction count of service `{}` ({variant} binaries)",
                    service.name
                )
            })?;
            reported.values.insert(figure("instructions"), count as f64);
        }
    }
    if !outcome.services.is_empty() {
        let services: std::time::Duration = outcome.services.iter().map(|s| s.cpu).sum();
        reported.values.insert(
            CLIENT_CPU.to_owned(),
            outcome.cpu.saturating_sub(services).as_secs_f64(),
        );
        reported
            .values
            .insert(SERVICES_CPU.to_owned(), services.as_secs_f64());
    }
    Ok(())
}

/// Runs each variant's target of one round, one after another, or all at once when
/// `side_by_side`; every outcome checked.
fn run_targets(
    cx: &Context,
    workload: &Workload,
    order: &[&Compared],
    targets: &[exec::RunSetup<'_>],
    resolved: &[crate::exec::Job],
    side_by_side: bool,
) -> Result<Vec<exec::Outcome>> {
    let printer = &cx.printer;
    let mut outcomes = Vec::new();
    if side_by_side {
        let results: Vec<Result<exec::Outcome>> = std::thread::scope(|scope| {
            let handles: Vec<_> = targets
                .iter()
                .zip(resolved)
                .map(|(target, workload)| scope.spawn(|| target.run(workload, printer)))
                .collect();
            handles
                .into_iter()
                .map(|handle| handle.join().expect("a workload thread panicked"))
                .collect()
        });
        for (result, variant) in results.into_iter().zip(order) {
            outcomes.push(checked_run(cx, workload, &variant.name, result?)?);
        }
    } else {
        for ((target, running), variant) in targets.iter().zip(resolved).zip(order) {
            let outcome = target.run(running, printer)?;
            outcomes.push(checked_run(cx, workload, &variant.name, outcome)?);
        }
    }
    Ok(outcomes)
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
    let target = exec::RunSetup {
        stage: variant.stage,
        bin_dir: &bin_dir,
        bin_names: variant.bin_names(),
        workspace_root: &cx.workspace.root,
        extra_env: env,
        wrapper: Vec::new(),
        log_path: variant.log(workload),
        running_dir: Some(&running),
        observe: false,
        service_wrapper: None,
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
    /// With `--rounds auto`: when the budget runs out; a look whose rounds would end past it
    /// is not started.
    pub(super) deadline: Option<std::time::Instant>,
    /// The level a deciding verdict must be reached at for a look to settle the workload.
    pub(super) deciding_level: f64,
    /// What the rounds were, as the line after them says ("compared on").
    pub(super) done: &'a str,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_orders_are_seeded_permutations_that_change_between_rounds() {
        let orders: Vec<Vec<usize>> = (1..=20).map(|r| round_order(7, "w", r, 3)).collect();
        for order in &orders {
            let mut sorted = order.clone();
            sorted.sort();
            assert_eq!(sorted, [0, 1, 2]);
        }
        assert_eq!(
            orders[4],
            round_order(7, "w", 5, 3),
            "the same seed, the same order"
        );
        let distinct: std::collections::BTreeSet<&Vec<usize>> = orders.iter().collect();
        assert!(distinct.len() >= 4, "{orders:?}");
        // Each variant runs first about as often as the others.
        for variant in 0..3 {
            let first = orders.iter().filter(|o| o[0] == variant).count();
            assert!((3..=11).contains(&first), "{orders:?}");
        }
        assert_ne!(
            (1..=10)
                .map(|r| round_order(7, "a", r, 2))
                .collect::<Vec<_>>(),
            (1..=10)
                .map(|r| round_order(7, "b", r, 2))
                .collect::<Vec<_>>(),
            "workloads get orders of their own"
        );
    }
}
