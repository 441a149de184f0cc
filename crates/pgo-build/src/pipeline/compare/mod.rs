//! `pgo-build compare`: is a variant really faster, on work it was not trained on?
//!
//! For each workload: one warm-up round that is not counted, then paired rounds in which every
//! variant runs once, in an order that alternates between rounds (ABBA), so slow drifts of a
//! shared, noisy machine hit both variants alike. Each run is the whole workload command,
//! timed from outside: wall-clock time, and the user+system CPU time of its process tree.
//! Holdout and train workloads are summarised separately; only holdout ones can fail
//! `--fail-if-slower`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context as _, Result, bail};

use super::compare::checks::{checked_run, decider, emulation_note};
use super::compare::previous::previous_variant;
use super::context::{Context, Run};
use super::workloads::{
    check_cargo_targets, remove_logs_of_unknown_workloads, resolve_workload, runnable_bins,
    warn_about_error_lines,
};
use crate::cargo::build::StageManifest;
use crate::cli::{CompareArgs, CompareRole};
use crate::config::{Role, Workload};
use crate::exec;
use crate::layout::{Layout, Stage};
use crate::measure::counter::Counter;
use crate::measure::criterion;
use crate::measure::metric::{DEFAULT_ROUNDS, Decider, INSTRUCTION_ROUNDS, Metric, Rounds};
use crate::measure::stats::{self, Verdict};
use crate::report::tables::{benchmark_table, compare_table, metrics_table};
use crate::report::{
    BenchmarkComparison, CandidateSummary, CompareResult, RunSample, WorkloadComparison,
};
use crate::util::files::age;

pub(super) mod checks;
mod previous;
mod summary;

pub(super) use previous::{PREVIOUS, against_previous};
use summary::comparisons_rounds;
pub(super) use summary::summarize_candidates;

/// Runs the comparison, prints its table and records it in the report.
pub fn compare(cx: &Context, run: &mut Run, args: &CompareArgs) -> Result<CompareResult> {
    let mut variants = compare_variants(cx, &args.variants)?;
    if let Some(dir) = &args.against {
        let previous = previous_variant(cx, dir, variants.last().expect("two variants"))?;
        variants.push(previous);
    }
    let result = measure(cx, &variants, args)?;
    let previous = match &args.against {
        Some(_) => against_previous(
            &result,
            (args.seed, cx.config.compare.margin()),
            &cx.config.workloads,
        ),
        None => Vec::new(),
    };
    for line in previous::describe(&result, &previous) {
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
                    metric.reference_median,
                    metric.candidate_median,
                    metric.unit
                ));
            }
        }
    }
    // Measured: the result stands, whatever --fail-if-slower says of it.
    run.begin_outputs(cx)?;
    run.report
        .record_compare(&result, crate::report::invocation());
    if args.fail_if_slower {
        let slower: Vec<String> = result
            .workloads
            .iter()
            .filter(|c| c.role == "holdout")
            .flat_map(|c| {
                c.candidates
                    .iter()
                    .filter(|(_, s)| s.judged(&decider).verdict == Verdict::Slower)
                    .map(|(candidate, s)| {
                        format!(
                            "{} is {:.1}% {} on `{}`",
                            candidate,
                            (s.judged(&decider).median_ratio - 1.0) * 100.0,
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
        let mut slower = slower;
        slower.extend(
            previous
                .iter()
                .filter(|(workload, _, s)| {
                    s.verdict == Verdict::Slower
                        && result
                            .workloads
                            .iter()
                            .any(|w| &w.workload == workload && w.role == "holdout")
                })
                .map(|(workload, candidate, s)| {
                    format!(
                        "{candidate} is {:.1}% slower than {PREVIOUS} (the last release) on `{workload}`",
                        (s.median_ratio - 1.0) * 100.0
                    )
                }),
        );
        if !slower.is_empty() {
            bail!("--fail-if-slower: {}", slower.join("; "));
        }
    }
    Ok(result)
}

/// The paired, interleaved rounds of `variants` (the first is the reference) on the
/// workloads `args` selects, summarised; prints progress, not the result.
pub(super) fn measure(
    cx: &Context,
    variants: &[Compared],
    args: &CompareArgs,
) -> Result<CompareResult> {
    let decider = decider(cx, args.metric.as_ref())?;
    let metric = decider.measured();
    let role = args.role.unwrap_or(match metric {
        Metric::Instructions => CompareRole::Holdout,
        _ => CompareRole::All,
    });
    let workloads = compare_workloads(cx, &args.workloads, role)?;
    check_cargo_targets(cx, &workloads)?;
    // Instruction counts are nearly deterministic: one run per variant and one repeat to
    // confirm it, instead of rounds against noise (which `[compare] rounds` is sized for).
    let default_rounds = match metric {
        Metric::Instructions => Rounds::Fixed(INSTRUCTION_ROUNDS),
        _ => cx
            .config
            .compare
            .rounds
            .unwrap_or(Rounds::Fixed(DEFAULT_ROUNDS)),
    };
    let plan = args.rounds.unwrap_or(default_rounds);
    let looks: Vec<usize> = match plan {
        Rounds::Fixed(rounds) => vec![rounds],
        Rounds::Auto => stats::AUTO_LOOKS.to_vec(),
    };
    // Each planned look is made at an equal share of the level (Bonferroni).
    let alpha = stats::ALPHA / looks.len() as f64;
    let rounds_text = match plan {
        Rounds::Fixed(rounds) => format!("{rounds} rounds"),
        Rounds::Auto => format!(
            "up to {} rounds (--rounds auto: looks after {} rounds, each with a {:.1}% \
             interval, until every verdict is reached or its interval is within ±{:.0}%)",
            looks[looks.len() - 1],
            looks
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            (1.0 - alpha) * 100.0,
            stats::TARGET_HALF_WIDTH * 100.0
        ),
    };
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
        "comparing {} over {} workloads: 1 warm-up + {rounds_text} each, order alternating (ABBA), bootstrap seed {}",
        names.join(" vs "),
        workloads.len(),
        args.seed
    ));
    // compare-<workload>-<variant>.log
    remove_logs_of_unknown_workloads(cx, "compare", |rest| {
        rest.rsplit_once('-').map(|(workload, _)| workload)
    });
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
                margin: cx.config.compare.margin(),
            },
            args.seed,
            counter.as_ref(),
        )?);
    }
    let reference = names[0].to_owned();
    let candidates: Vec<String> = names[1..].iter().map(|n| n.to_string()).collect();
    let mut geometric_mean: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
    for role in ["holdout", "train"] {
        for candidate in &candidates {
            let medians: Vec<f64> = comparisons
                .iter()
                .filter(|c| c.role == role)
                .map(|c| c.candidates[candidate].judged(&decider).median_ratio)
                .collect();
            if !medians.is_empty() {
                geometric_mean
                    .entry(role.to_owned())
                    .or_default()
                    .insert(candidate.clone(), stats::geometric_mean(&medians));
            }
        }
    }
    Ok(CompareResult {
        metric,
        decided_by: decider.reported().map(str::to_owned),
        counter: counter.as_ref().map(Counter::describe),
        rounds: comparisons_rounds(&comparisons),
        emulated,
        rounds_plan: Some(rounds_text.clone()),
        seed: args.seed,
        reference,
        candidates,
        workloads: comparisons,
        geometric_mean,
    })
}

/// The variants named, or by default the baseline and the newest current variant (BOLT,
/// else optimized): one that is not current (an interrupted stage, binaries replaced, made
/// from an older build) is skipped and named with why, not a reason to compare nothing.
fn compare_variants(cx: &Context, names: &[String]) -> Result<Vec<Compared>> {
    if names.is_empty() {
        return default_variants(cx);
    }
    let stages: Vec<Stage> = names
        .iter()
        .map(|name| {
            Stage::from_variant(name).ok_or_else(|| {
                let known: Vec<&str> = Stage::VARIANTS.iter().map(|s| s.name()).collect();
                anyhow::anyhow!("unknown variant `{name}`; variants: {}", known.join(", "))
            })
        })
        .collect::<Result<_>>()?;
    if stages.len() < 2 {
        bail!("compare needs at least two variants, e.g. `pgo-build compare baseline optimized`");
    }
    let variants = stages
        .into_iter()
        .map(|stage| staged_variant(cx, stage))
        .collect::<Result<Vec<_>>>()?;
    check_comparable(&variants)?;
    Ok(variants)
}

fn default_variants(cx: &Context) -> Result<Vec<Compared>> {
    let mut skipped = Vec::new();
    for stage in Stage::VARIANTS[1..].iter().rev().copied() {
        let attempted =
            cx.layout.stage_manifest(stage).is_file() || cx.layout.stage_attempt(stage).is_file();
        if !attempted && stage != Stage::Optimized {
            continue;
        }
        let pair = staged_variant(cx, stage).and_then(|candidate| {
            let pair = vec![staged_variant(cx, Stage::Baseline)?, candidate];
            check_comparable(&pair)?;
            Ok(pair)
        });
        match pair {
            Ok(pair) => {
                for (name, reason) in skipped {
                    cx.caution(format!(
                        "not comparing the {name} variant, which is not current: {reason:#}"
                    ))?;
                }
                return Ok(pair);
            }
            Err(err) if skipped.is_empty() && stage == Stage::Optimized => return Err(err),
            Err(err) => skipped.push((stage.name(), err)),
        }
    }
    let reasons: Vec<String> = skipped
        .iter()
        .map(|(name, reason)| format!("{name}: {reason:#}"))
        .collect();
    bail!(
        "no variant is current enough to compare with the baseline:\n  - {}",
        reasons.join("\n  - ")
    )
}

/// A staged stage of this session's layout as a variant, refused when it did not complete.
fn staged_variant(cx: &Context, stage: Stage) -> Result<Compared> {
    let hint = match stage {
        Stage::Baseline => "run `pgo-build build` first",
        Stage::Bolt => "run `pgo-build bolt` (or `run` with [bolt] enabled = true) first",
        _ => "run `pgo-build run` (or instrument, train, optimize) first",
    };
    Ok(Compared {
        name: stage.name().to_owned(),
        stage,
        manifest: StageManifest::load(&cx.layout, stage, hint)?,
        log_prefix: "compare",
        rebuild: "run",
        layout: cx.layout.clone(),
    })
}

/// Refuses variants that are not what their records say (a binary replaced in bin/), or
/// that do not belong together: built from other sources than each other (the comparison
/// would measure the source change), or made from a build of another variant that has been
/// rebuilt since (BOLT of an older optimized build).
pub(super) fn check_comparable(variants: &[Compared]) -> Result<()> {
    let built = |v: &Compared| age(&v.layout.stage_manifest(v.stage));
    for variant in variants {
        let manifest = &variant.manifest;
        // Workloads run what is in bin/: it must be what the stage staged.
        manifest.check_staged(&variant.name, variant.rebuild)?;
        for other in variants {
            if let (Some(ours), Some(theirs)) = (&manifest.sources, &other.manifest.sources)
                && ours != theirs
            {
                bail!(
                    "`{}` and `{}` were built from different sources (the sources changed \
                     between their builds: {} built {}, {} built {}), so comparing them would \
                     measure the change, not the optimization. Rebuild with `pgo-build {}`.",
                    variant.name,
                    other.name,
                    variant.name,
                    built(variant),
                    other.name,
                    built(other),
                    variant.rebuild
                );
            }
        }
        for (upstream, id) in &manifest.upstream {
            let Some(upstream_stage) = Stage::from_variant(upstream) else {
                continue;
            };
            let current = StageManifest::load(&variant.layout, upstream_stage, "").ok();
            if current.as_ref().is_none_or(|current| &current.id != id) {
                bail!(
                    "the {} binaries were made from an earlier {} build, which has been \
                     rebuilt or removed since: run `pgo-build {}` again (or `pgo-build {}`)",
                    variant.name,
                    upstream,
                    variant.stage.name(),
                    variant.rebuild
                );
            }
        }
    }
    Ok(())
}

/// The named workloads, or those of `role`, holdout first.
fn compare_workloads(cx: &Context, names: &[String], role: CompareRole) -> Result<Vec<Workload>> {
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

fn compare_workload(
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
fn compare_round(
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
pub(super) fn run_once(
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

/// One variant under comparison: the binaries a stage of some layout staged (the pipeline's
/// own, or one of `explore`'s builds), under the name results and logs use.
#[derive(Clone)]
pub(super) struct Compared {
    pub name: String,
    pub stage: Stage,
    pub layout: Layout,
    pub manifest: StageManifest,
    /// Logs are `<prefix>-<workload>-<name>.log`.
    pub log_prefix: &'static str,
    /// The pgo-build command that builds it again.
    pub rebuild: &'static str,
}

impl Compared {
    fn bin_names(&self) -> Vec<&str> {
        self.manifest
            .binaries
            .iter()
            .map(|b| b.name.as_str())
            .collect()
    }

    /// The log of a workload's last run against this variant.
    pub(super) fn log(&self, workload: &Workload) -> PathBuf {
        self.layout.logs_dir().join(format!(
            "{}-{}-{}.log",
            self.log_prefix,
            workload.name(),
            self.name
        ))
    }
}

/// When `compare_workload` looks at the data, and at which level.
struct Looks<'a> {
    /// Pairs after which to look (the last is the most that run).
    at: &'a [usize],
    alpha: f64,
    decider: &'a Decider,
    /// `[compare] margin`: "no difference" only within it.
    margin: f64,
}

/// Each criterion benchmark's estimate of every candidate against the reference (the first
/// variant), where both have one.
fn benchmark_comparisons(
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
