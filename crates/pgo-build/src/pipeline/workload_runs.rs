//! Resolving and running workloads against a stage's binaries, shared by every stage that runs
//! them (`train`, `bolt`, `compare`, `profile overlap`, `doctor`'s probe): what
//! `PGO_BUILD_BIN_*` name, a cargo workload's command line with the stage's settings, the
//! training loop with its checks, and the logs of workloads that are gone.

use std::path::Path;

use anyhow::{Context as _, Result, bail};

use super::context::{Context, Session};
use super::stage_build::StageEnvironment;
use crate::cargo::manifest::StageManifest;
use crate::config::{Role, Workload, WorkloadCommand, cargo_workload};
use crate::exec::{self, Job};
use crate::layout::{Layout, Stage};
use crate::measure::criterion;
use crate::profiles::{self, start_marker};
use crate::report::{ServiceRecord, WorkloadRecord};
use crate::toolchain::targets::{self, Execution};

/// How a service writes its profile when stopped.
pub(super) const SERVICE_FIX: &str = "A service writes its profile when it exits normally, or \
    on SIGTERM/SIGINT when it calls pgo_build_rt::install(); in continuous mode \
    ([pgo] continuous = true) any signal keeps what it ran. Set the [[service]]'s `stop = { \
    signal = \"SIGINT\" }` for a server that stops on Ctrl-C (or the signal it handles: SIGTERM, \
    the default, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2), or a `stop.command` that shuts it \
    down, and give it a long enough stop.grace_period";

/// A training loop: workloads run one after the other against a stage's binaries.
#[derive(Clone, Copy)]
pub(crate) struct Training<'a> {
    pub stage: Stage,
    pub manifest: &'a StageManifest,
    pub workloads: &'a [Workload],
    /// Logs are `logs/<prefix>-<workload>.log`.
    pub log_prefix: &'a str,
    /// Readies a workload's profile directory and says what its run gets.
    pub prepare: &'a dyn Fn(&Workload) -> Result<PreparedRun>,
    /// Records how a workload ended.
    pub finish: &'a dyn Fn(&Workload, &exec::Outcome) -> Result<()>,
}

/// What a training run of a workload gets: its variables, and for a run of instrumented
/// binaries the directory their raw profiles (and start records) are written to.
pub(crate) struct PreparedRun {
    pub env: exec::EnvVars,
    pub raw_profiles: Option<std::path::PathBuf>,
}

impl PreparedRun {
    /// Variables only: no raw profiles are written (BOLT's training).
    pub(crate) fn env(env: exec::EnvVars) -> PreparedRun {
        PreparedRun {
            env,
            raw_profiles: None,
        }
    }
}

/// Runs a training loop. A failing workload fails the step unless `allow_failure` is set.
pub(crate) fn run_training(cx: &Context, session: &mut Session, training: Training) -> Result<()> {
    let Training {
        stage,
        manifest,
        workloads,
        log_prefix,
        prepare,
        finish,
    } = training;
    let bin_names: Vec<&str> = manifest.binaries.iter().map(|b| b.name.as_str()).collect();
    let (bin_dir, platform_env) = runnable_bins(cx, &cx.layout, stage, &bin_names)?;
    if emulated_start_hint(cx).is_some() {
        cx.printer.info(format!(
            "{} binaries run here only through the runner: a process they start must be \
             started through $PGO_BUILD_BIN_<NAME> (see `pgo-build doctor`)",
            cx.platform.arch
        ));
    }
    let running = cx.layout.running_dir();
    remove_logs_of_unknown_workloads(cx, log_prefix, |rest| Some(rest));
    for workload in workloads {
        let prepared = prepare(workload)?;
        let mut extra_env = platform_env.clone();
        extra_env.extend(prepared.env);
        let target = exec::RunSetup {
            stage,
            bin_dir: &bin_dir,
            bin_names: bin_names.clone(),
            workspace_root: &cx.workspace.root,
            extra_env,
            wrapper: Vec::new(),
            log_path: cx
                .layout
                .logs_dir()
                .join(format!("{log_prefix}-{}.log", workload.run_name())),
            running_dir: Some(&running),
            observe: false,
            service_wrapper: None,
        };
        cx.printer
            .info(format!("workload {} ...", workload.run_name()));
        let running = resolve_workload(cx, &cx.layout, stage, manifest, workload)?;
        let raw_dir = prepared
            .raw_profiles
            .clone()
            .filter(|_| !cx.config.pgo.keep_raw_profiles);
        let mut outcome = run_compacting(cx, &target, &running, raw_dir, workload)?;
        // Processes that exited normally but whose profiles the runtime could not write
        // (a full disk): not a training run to use, nor processes stopped by signals.
        if let Some(failure) = exec::ProfileWriteFailure::find(&outcome.log_path) {
            outcome.success = false;
            outcome.status = "could not write its profiles".to_owned();
            // On a full disk the record may not be written either; as started, it is
            // just as unusable.
            let _ = finish(workload, &outcome);
            bail!(
                "training workload `{}` against the {} binaries: {failure}. Nothing of this \
                 run is used. Full log: {}",
                workload.run_name(),
                stage.name(),
                outcome.log_path.display()
            );
        }
        // A service that ended on its own while the clients ran failed: the run trained (or
        // measured) clients talking to nothing, whatever the profiles say.
        if let Some(failed) = outcome.services.iter().find(|s| s.ended_early && !s.clean) {
            let message = format!(
                "service `{}` failed while workload `{}` ran against the {} binaries ({}), \
                 before pgo-build stopped it: the clients worked against a service that was \
                 gone, so nothing of this run is used. Its log: {}",
                failed.name,
                workload.run_name(),
                stage.name(),
                failed.status,
                failed.log.display()
            );
            outcome.success = false;
            outcome.status = format!("service `{}` failed", failed.name);
            finish(workload, &outcome)?;
            bail!(message);
        }
        finish(workload, &outcome)?;
        warn_about_error_lines(
            &cx.printer,
            &workload.run_name(),
            &outcome.log_path,
            (!outcome.success).then_some(outcome.status.as_str()),
        );
        cx.printer.info(format!(
            "workload {}: {} in {:.2}s (log: {})",
            workload.run_name(),
            outcome.status,
            outcome.duration.as_secs_f64(),
            outcome.log_path.display()
        ));
        record_training_run(session, stage, workload, &outcome);
        caution_lost_profiles(
            cx,
            stage,
            workload,
            &outcome,
            prepared.raw_profiles.as_deref(),
        )?;
        refuse_unless_allowed(cx, stage, workload, &outcome)?;
    }
    Ok(())
}

/// A workload's run against `target`, its raw profiles merged as they are written when they
/// go to `raw_dir` (disk use does not grow with the processes).
fn run_compacting(
    cx: &Context,
    target: &exec::RunSetup,
    running: &Job,
    raw_dir: Option<std::path::PathBuf>,
    workload: &Workload,
) -> Result<exec::Outcome> {
    Ok(match raw_dir {
        Some(raw_dir) => {
            let profdata = cx.profdata()?;
            let (outcome, merged) =
                profiles::compact::while_running(&raw_dir, profdata, &cx.printer, || {
                    target.run(running, &cx.printer)
                });
            let outcome = outcome?;
            let merged = merged.with_context(|| {
                format!(
                    "could not merge the raw profiles of workload `{}` in {}",
                    workload.run_name(),
                    raw_dir.display()
                )
            })?;
            if merged.files > 0 {
                cx.printer.detail(format!(
                    "merged {} raw profiles ({}) as they were written",
                    merged.files,
                    crate::util::units::human_bytes(merged.raw_bytes)
                ));
            }
            outcome
        }
        None => target.run(running, &cx.printer)?,
    })
}

/// The report's record of a training run (replacing the last one of that workload and stage).
fn record_training_run(
    session: &mut Session,
    stage: Stage,
    workload: &Workload,
    outcome: &exec::Outcome,
) {
    session
        .report
        .training
        .retain(|w| !(w.name == workload.run_name() && w.stage == stage));
    session.report.training.push(WorkloadRecord {
        name: workload.run_name().to_owned(),
        stage,
        status: outcome.status.clone(),
        success: outcome.success,
        duration_secs: outcome.duration.as_secs_f64(),
        log: outcome.log_path.clone(),
        stopped: outcome.stopped.clone(),
        services: outcome
            .services
            .iter()
            .map(|s| ServiceRecord {
                name: s.name.clone(),
                status: s.status.clone(),
                asked_by: s.asked_by.clone(),
                ended_early: s.ended_early,
                killed: s.killed.clone(),
                stop_failure: s.stop_failure.clone(),
                log: s.log.clone(),
            })
            .collect(),
    });
}

/// Cautions for profiles a run may have lost: services that did not write one, or failed,
/// and processes pgo-build had to stop (what they wrote is known where profiles go).
fn caution_lost_profiles(
    cx: &Context,
    stage: Stage,
    workload: &Workload,
    outcome: &exec::Outcome,
    profile_dir: Option<&Path>,
) -> Result<()> {
    for service in &outcome.services {
        let unwritten: Vec<String> = profile_dir
            .iter()
            .flat_map(|dir| {
                let pids: Vec<u32> = service
                    .processes
                    .iter()
                    .map(|(pid, _)| *pid as u32)
                    .collect();
                start_marker::unwritten(dir, &pids)
            })
            .filter_map(|pid| {
                let (_, name) = service.processes.iter().find(|(p, _)| *p as u32 == pid)?;
                Some(format!("{name} (pid {pid})"))
            })
            .collect();
        if !unwritten.is_empty() && service.killed.is_empty() {
            cx.caution(format!(
                "workload `{}` against the {} binaries: service `{}` was asked to stop \
                 by {} and its process {} ended without writing a profile ({}). {SERVICE_FIX}",
                workload.run_name(),
                stage.name(),
                service.name,
                service.asked_by,
                unwritten.join(", "),
                service.status
            ))?;
        }
        if let Some(problem) = service.problem() {
            cx.caution(format!(
                "workload `{}` against the {} binaries: {problem}. What it ran is \
                 missing from its profile. {SERVICE_FIX}",
                workload.run_name(),
                stage.name()
            ))?;
        }
    }
    if !outcome.stopped.is_empty() {
        // What the stopped processes wrote is known where profiles go: say that, not
        // what a stopped process may fail to do.
        let pids: Vec<u32> = outcome.stopped.iter().map(|p| p.pid as u32).collect();
        let lost = match profile_dir {
            Some(dir) => match start_marker::unwritten(dir, &pids).len() {
                0 => "each wrote its profile (a signal handler, or continuous mode), \
                      but the workload must not leave them to pgo-build"
                    .to_owned(),
                n => format!(
                    "{n} of them wrote no profile: a process stopped by a signal writes \
                     none unless it calls pgo_build_rt::install() (SIGTERM, SIGINT) or \
                     training runs in continuous mode (any signal)"
                ),
            },
            None => "a process stopped by a signal may write no profile".to_owned(),
        };
        cx.caution(format!(
            "pgo-build had to stop processes of workload `{}`: {}; {lost}. Make the \
             workload stop its own children.",
            workload.run_name(),
            exec::describe_stopped(&outcome.stopped)
        ))?;
    }
    Ok(())
}

/// A failed run fails training, with the end of its log, unless the workload allows failure.
fn refuse_unless_allowed(
    cx: &Context,
    stage: Stage,
    workload: &Workload,
    outcome: &exec::Outcome,
) -> Result<()> {
    if !outcome.success {
        let tail = exec::log_tail(&outcome.log_path, 20);
        if workload.allow_failure {
            cx.printer.warn(format!(
                "workload `{}` {} (allow_failure = true)",
                workload.run_name(),
                outcome.status
            ));
        } else {
            bail!(
                "training workload `{}` {} against the {} binaries. Its output ends \
                 with:\n{tail}\nFull log: {}\n{}Fix the workload, or set \
                 allow_failure = true for it in {} if failing is expected.",
                workload.run_name(),
                outcome.status,
                stage.name(),
                outcome.log_path.display(),
                emulated_start_hint(cx)
                    .map(|hint| format!("{hint}\n"))
                    .unwrap_or_default(),
                cx.config.display_path()
            );
        }
    }
    Ok(())
}

/// When the kernel cannot run the target's binaries itself (emulated, no binfmt_misc
/// entry): what a process an instrumented binary started directly meets, and the fix.
fn emulated_start_hint(cx: &Context) -> Option<String> {
    let arch = &cx.platform.arch;
    if !cx.platform.execution().emulated() || crate::toolchain::targets::binfmt_registered(arch) {
        return None;
    }
    Some(format!(
        "If it starts {arch} binaries itself: they run here only through the runner, and a \
         process started directly (a path, current_exe()) fails with 'Exec format error' \
         (exit status 127 from a spawn). Start them through $PGO_BUILD_BIN_<NAME>, which \
         runs the runner, or register qemu-{arch} with binfmt_misc (Debian: `apt-get \
         install qemu-user-binfmt`)."
    ))
}

pub(crate) fn training_workloads(cx: &Context, names: &[String]) -> Result<Vec<Workload>> {
    if names.is_empty() {
        let workloads = cx.config.train_runs();
        if workloads.is_empty() {
            bail!("{}", cx.no_train_workloads());
        }
        check_cargo_targets(cx, &workloads)?;
        return Ok(workloads);
    }
    let named: Vec<Workload> = names
        .iter()
        .map(|name| {
            let workload = cx.config.workload(name).with_context(|| {
                format!(
                    "no workload named `{name}` in {}; defined: {}",
                    cx.config.display_path(),
                    cx.config
                        .workloads
                        .iter()
                        .map(Workload::name)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
            if workload.role != Role::Train {
                bail!(
                    "workload `{name}` has role = \"holdout\": training on it would make the \
                     held-out comparison meaningless. Change its role in {} to train on it.",
                    cx.config.display_path()
                );
            }
            Ok(workload.clone())
        })
        .collect::<Result<_>>()?;
    let runs: Vec<Workload> = named.iter().flat_map(Workload::parts).collect();
    check_cargo_targets(cx, &runs)?;
    Ok(runs)
}

/// Refuses cargo workloads that name a bench, test, example or binary target the
/// workspace does not have: found before anything runs, not after the workloads before it.
pub(crate) fn check_cargo_targets(cx: &Context, workloads: &[Workload]) -> Result<()> {
    for workload in workloads {
        if let Some(args) = &workload.cargo
            && let Err(reason) = cargo_workload::check_targets(args, &cx.workspace.targets)
        {
            bail!(
                "cargo workload `{}` in {}: {reason}",
                workload.name(),
                cx.config.display_path()
            );
        }
    }
    Ok(())
}

/// Removes `logs/<prefix>-….log` files whose workload (`name_of` the rest of the file
/// name) is not in the configuration any more: a stale log beside fresh ones misleads.
pub(super) fn remove_logs_of_unknown_workloads(
    cx: &Context,
    prefix: &str,
    name_of: impl Fn(&str) -> Option<&str>,
) {
    for entry in std::fs::read_dir(cx.layout.logs_dir())
        .into_iter()
        .flatten()
        .flatten()
    {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let Some(workload) = file_name
            .strip_prefix(&format!("{prefix}-"))
            .and_then(|rest| rest.strip_suffix(".log"))
            .and_then(&name_of)
        else {
            continue;
        };
        if !cx.config.has_run(workload) {
            cx.printer.detail(format!(
                "removing {}: workload `{workload}` is not configured any more",
                entry.path().display()
            ));
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// A workload as it runs against `stage`: itself, or for a `cargo` workload that cargo
/// command with the stage's own build settings, as recorded in its `stage.json` (target
/// dir, cargo profile, target, features, rustflags, linker), so the units it shares with
/// the staged binaries are reused as they are.
pub(crate) fn resolve_workload(
    cx: &Context,
    layout: &Layout,
    stage: Stage,
    manifest: &StageManifest,
    workload: &Workload,
) -> Result<Job> {
    let Some(args) = &workload.cargo else {
        return Ok(Job::new(workload, workload.command.clone()));
    };
    if !matches!(
        stage,
        Stage::Baseline | Stage::Instrumented | Stage::Optimized
    ) {
        bail!(
            "workload `{}` is a cargo workload: it builds its own binaries, and the {} stage \
             is made by post-processing staged binaries (BOLT), so it cannot run against it",
            workload.name(),
            stage.name()
        );
    }
    let settings = &manifest.settings;
    cargo_workload::check_profile(args, &settings.profile).map_err(|reason| {
        anyhow::anyhow!(
            "workload `{}` in {}: {reason}",
            workload.name(),
            cx.config.display_path()
        )
    })?;
    let mut flags = settings.common_rustflags.clone();
    flags.extend(manifest.stage_rustflags.iter().cloned());
    for flag in &flags {
        // The optimized stage names its profile by a copy outside the checkout.
        if let Some(copy) = flag
            .strip_prefix("-Cprofile-use=")
            .map(std::path::Path::new)
            && !copy.is_file()
        {
            let original = layout
                .profiles_dir()
                .join(copy.file_name().unwrap_or_default());
            if !original.is_file() || profiles::checkout_independent(&original) != copy {
                bail!(
                    "the profile the {} stage was built with ({}) is gone; run `pgo-build \
                     optimize` again before running cargo workload `{}` against it",
                    stage.name(),
                    copy.display(),
                    workload.name()
                );
            }
        }
    }
    if stage == Stage::Instrumented {
        // Its flags link the start marker, which an unpacked stage (another machine's
        // build) does not bring: made again here, under the same content-addressed name.
        start_marker::object(&layout.stage_dir(stage), &cx.platform, &cx.printer)?;
    }
    let environment =
        StageEnvironment::new(cx, layout, stage, settings, &manifest.stage_rustflags)?;
    flags.push(environment.linker.flag.clone());
    // No rustc wrapper here to resolve them for registry crates that link (cdylibs): the
    // cache-friendly relative paths of pgo-build's files become absolute.
    for flag in &mut flags {
        if let Some(absolute) = crate::layout::absolute_own_path(flag, &cx.workspace.root) {
            *flag = absolute;
        }
    }
    let mut line = vec![
        crate::cargo::workspace::cargo_program()
            .to_string_lossy()
            .into_owned(),
    ];
    line.extend(cargo_workload::command_line(
        args,
        &settings.profile,
        &settings.target,
        &layout.cargo_target_dir(stage),
        &settings.features,
        &settings.cargo_config,
    ));
    let mut job = Job::new(workload, WorkloadCommand::Argv(line));
    job.env
        .insert("CARGO_ENCODED_RUSTFLAGS".to_owned(), flags.join("\u{1f}"));
    job.env.extend(environment.linker.env);
    // pgo-build's rustc wrapper as in the stage's build: whatever cargo compiles again gets
    // the same symbol names ([pgo] stable_names), and stays within the memory budget. Its
    // log is the workload's, not the stage build's.
    job.env.extend(environment.rustc.env);
    job.env.insert(
        crate::wrappers::rustc::LOG_ENV.to_owned(),
        layout
            .stage_dir(stage)
            .join(format!("rustc-{}.jsonl", workload.name()))
            .display()
            .to_string(),
    );
    // The stage's C as it was built: another CC would make cargo compile it again.
    if let Some(c) = environment.c_compiler {
        job.env.extend(c.env);
    }
    // criterion's results per stage, not one directory that mixes variants.
    job.env.insert(
        "CRITERION_HOME".to_owned(),
        criterion::home(&layout.cargo_target_dir(stage))
            .display()
            .to_string(),
    );
    Ok(job)
}

/// Where workloads find a stage's binaries, and the variables those need: the staged
/// binaries themselves, or for a target with a runner, scripts in `<stage>/run/` that exec
/// the runner with them (so `PGO_BUILD_BIN_<NAME>` runs directly for every target).
pub(crate) fn runnable_bins(
    cx: &Context,
    layout: &Layout,
    stage: Stage,
    names: &[&str],
) -> Result<(std::path::PathBuf, exec::EnvVars)> {
    let bin_dir = layout.bin_dir(stage);
    match cx.platform.execution() {
        Execution::Native => Ok((bin_dir, Vec::new())),
        Execution::Impossible(why) => bail!("{why}"),
        Execution::Runner { runner, .. } => {
            let dir = targets::write_runner_scripts(
                &layout.stage_dir(stage).join("run"),
                &bin_dir,
                names,
                &runner,
            )?;
            // Processes started directly (through binfmt_misc, without the runner's
            // arguments) find the target's libraries here.
            let env = runner
                .ld_prefix()
                .map(|prefix| vec![("QEMU_LD_PREFIX".to_owned(), prefix.to_owned())])
                .unwrap_or_default();
            Ok((dir, env))
        }
    }
}

/// Readies `raw_dir/<workload>/` for a run against the instrumented binaries: the variables
/// pointing them at it, and the directory.
pub(crate) fn instrumented_profile_env(
    raw_dir: &Path,
    continuous: bool,
    workload: &Workload,
) -> Result<PreparedRun> {
    let profile_dir = raw_dir.join(workload.run_name());
    // Profiles of an earlier run of this workload would be merged twice.
    if profile_dir.exists() {
        crate::util::files::remove_dir_all(&profile_dir)?;
    }
    // Created here: instrumented children inherit __LLVM_PROFILE_RT_INIT_ONCE and then do not
    // create it themselves.
    crate::util::files::create_dir_all(&profile_dir)?;
    let env = vec![
        (
            "LLVM_PROFILE_FILE".to_owned(),
            profile_dir
                .join(profiles::raw_pattern(continuous))
                .display()
                .to_string(),
        ),
        (
            start_marker::START_DIR_ENV.to_owned(),
            profile_dir.display().to_string(),
        ),
    ];
    Ok(PreparedRun {
        env,
        raw_profiles: Some(profile_dir),
    })
}

/// Says when a workload's output has lines that look like errors: one that exited
/// successfully may have failed at what it was meant to do. `failed`: how it ended, when it
/// did not end well.
pub(super) fn warn_about_error_lines(
    printer: &crate::util::printer::Printer,
    workload: &str,
    log: &Path,
    failed: Option<&str>,
) {
    if let Some((count, first)) = exec::error_lines(log) {
        let lines = format!(
            "{count} line{} that look{} like errors (first: \"{first}\")",
            if count == 1 { "" } else { "s" },
            if count == 1 { "s" } else { "" },
        );
        printer.warn(match failed {
            None => format!(
                "workload `{workload}` printed {lines}; it exited successfully, so check that \
                 it did its work: {}",
                log.display()
            ),
            Some(status) => format!(
                "workload `{workload}` {status} and printed {lines}: {}",
                log.display()
            ),
        });
    }
}
