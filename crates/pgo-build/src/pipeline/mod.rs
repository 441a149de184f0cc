//! The pipeline: one module per step or command family, and the dispatcher that makes a
//! command's flags its typed request (`requests`; no other pipeline module reads `cli`) and
//! runs it for every target it concerns.
//!
//! Every step is a function of the [`context::Context`] (what the command loaded once) and the
//! [`context::Session`] (what it changes), run inside [`context::timed_step`]. Steps communicate
//! through files under `target/pgo-build/` (see `layout`), so each command can run on its own
//! and `run` is all of them in order; within one process a step hands the next its result.
//!
//! Arrows point down only: this module (the dispatcher) → `run`, `explore`, `gate` → the step
//! modules in `steps/` (`doctor`, `plain_builds`, `train`, `optimize`, `bolt`, `compare`,
//! `profile`, `shard`), which never import each other → the shared modules (`workload_runs`,
//! `trained`, `stage_build`, `rustc_budget`, `bundles`, `committed`, `state`) → `context` →
//! `requests` (plain data: what each step is asked) → the modules outside `pipeline/`.
//! ARCHITECTURE.md has the map; `tests/tidy.rs` checks it.

mod bundles;
mod committed;
pub mod context;
mod explore;
mod gate;
mod release;
mod requests;
mod run;
mod rustc_budget;
mod stage_build;
mod state;
mod steps;
mod trained;
mod workload_runs;

use std::path::PathBuf;

use anyhow::{Context as _, Result, bail};
use context::{Context, Loaded, Session, timed_step};
use explore::explore;
use gate::gate;
use run::{record_completed, run_all};
use steps::bolt::bolt;
use steps::compare::compare;
use steps::doctor::doctor;
use steps::optimize::optimize;
use steps::plain_builds::{build_baseline, instrument};
use steps::profile::{export, profile_check, profile_overlap, profile_show};
use steps::shard::{merge, pack, unpack, write_bundle};
use steps::train::train;

use requests::{
    BoltRequest, CheckRequest, CompareRequest, ExploreRequest, ExportRequest, GateRequest,
    GlobalOptions, MergeRequest, OptimizeRequest, OverlapRequest, PackRequest, Request, RunRequest,
    ShowRequest, StepOptions, TrainRequest, UnpackRequest,
};

use crate::cli::{Cli, Command, GlobalArgs, ProfileCommand};
use crate::layout::step::Step;
use crate::util::printer::Printer;

/// Runs the command `cli` names.
pub fn execute(cli: &Cli, printer: &Printer) -> Result<()> {
    let Some(request) = request_of(&cli.command) else {
        bail!("this command needs no workspace context: `offline::execute` runs it");
    };
    let global = global_options(&cli.global);
    let doctor = matches!(request, Request::Doctor);
    // `doctor` works anywhere: outside a workspace it reports the toolchain alone.
    if doctor && !steps::doctor::in_a_workspace(global.manifest_path.as_deref()) {
        steps::doctor::doctor_toolchain(printer)?;
        printer.info(
            "no cargo workspace here: run `pgo-build doctor` in one (or with --manifest-path) \
             to check its binaries and configuration too",
        );
        return Ok(());
    }
    let loaded = match Loaded::load(&global, printer) {
        // The toolchain is reported all the same, before what stops the workspace's checks.
        Err(err) if doctor => {
            if let Err(problem) = steps::doctor::doctor_toolchain(printer) {
                printer.error(&problem);
            }
            return Err(err);
        }
        loaded => loaded?,
    };
    let targets = loaded.targets(&global);
    // `doctor` checks every target before it fails; other commands stop at the first failure.
    let mut failed = Vec::new();
    for target in &targets {
        let Some(triple) = target else {
            let request = per_target_paths(&request, loaded.host(), false)?;
            let cx = Context::new(&global, printer, &loaded, None)?;
            dispatch(&request, &cx, &mut Session::start(&cx)?)?;
            continue;
        };
        printer.target_start(triple);
        let result = per_target_paths(&request, triple, targets.len() > 1)
            .and_then(|request| {
                let cx = Context::new(&global, printer, &loaded, Some(triple))?;
                dispatch(&request, &cx, &mut Session::start(&cx)?)
            })
            .with_context(|| format!("target {triple}"));
        match result {
            Err(err) if doctor => {
                printer.error(&err);
                failed.push(triple.as_str());
            }
            other => other?,
        }
    }
    if !failed.is_empty() {
        bail!("doctor found problems for {} (above)", failed.join(", "));
    }
    Ok(())
}

/// The command for one target: `{target}` in its file arguments (`export --output`, `pack
/// --output`, `train --bundle`, `unpack`, `merge`) replaced by the triple. With several
/// targets each of them must contain it, or every target would write (or read) the same file.
fn per_target_paths(request: &Request, triple: &str, several: bool) -> Result<Request> {
    let expand = |path: &mut PathBuf, flag: &str| -> Result<()> {
        let text = path.to_string_lossy();
        if several && !text.contains("{target}") {
            bail!(
                "{flag} {} would be the same file for every target: put {{target}} in it \
                 (e.g. profiles/{{target}}.profdata), which becomes each target's triple",
                path.display()
            );
        }
        *path = PathBuf::from(text.replace("{target}", triple));
        Ok(())
    };
    let mut request = request.clone();
    match &mut request {
        Request::Export(args) => {
            if let Some(output) = &mut args.output {
                expand(output, "export --output")?;
            }
        }
        Request::Pack(args) => expand(&mut args.output, "pack --output")?,
        Request::Train(args) => {
            if let Some(bundle) = &mut args.bundle {
                expand(bundle, "train --bundle")?;
            }
        }
        Request::Unpack(args) => expand(&mut args.archive, "unpack")?,
        Request::Merge(args) => {
            for bundle in &mut args.bundles {
                expand(bundle, "merge")?;
            }
        }
        _ => {}
    }
    Ok(request)
}

fn dispatch(request: &Request, cx: &Context, session: &mut Session) -> Result<()> {
    if let Request::Bolt {
        if_enabled: true, ..
    } = request
        && !cx.config.bolt.enabled
    {
        // Nothing ran, so nothing is recorded as completed either.
        cx.printer.info(format!(
            "BOLT is not enabled in {} ([bolt] enabled = true turns it on): nothing to do",
            cx.config.display_path()
        ));
        return Ok(());
    }
    match request {
        Request::Doctor => timed_step(cx, session, Step::Doctor, doctor),
        Request::Build => timed_step(cx, session, Step::Build, build_baseline),
        Request::Instrument => timed_step(cx, session, Step::Instrument, instrument),
        Request::Train(args) => timed_step(cx, session, Step::Train, |cx, session| {
            let trained = train(cx, session, args)?;
            match &args.bundle {
                Some(path) => write_bundle(cx, session, path, &trained),
                None => Ok(()),
            }
        }),
        Request::Pack(args) => timed_step(cx, session, Step::Pack, |cx, _| pack(cx, args)),
        Request::Unpack(args) => timed_step(cx, session, Step::Unpack, |cx, session| {
            // A baseline, optimized or bolt stage built in another job counts as built here:
            // the gate judges it (the sources and settings were checked to be the same). In
            // the order unpacked: a bolt stage's fingerprint reads its optimized one's record.
            for stage in unpack(cx, session, args)? {
                if crate::layout::Stage::VARIANTS.contains(&stage) {
                    record_completed(cx, session, Step::staging(stage), &StepOptions::default())?;
                }
            }
            Ok(())
        }),
        Request::Merge(args) => timed_step(cx, session, Step::Merge, |cx, session| {
            merge(cx, session, args)
        }),
        Request::Optimize(args) => timed_step(cx, session, Step::Optimize, |cx, session| {
            optimize(cx, session, args, None)
        }),
        Request::Bolt { bolt: args, .. } => timed_step(cx, session, Step::Bolt, |cx, session| {
            bolt(cx, session, args)
        }),
        Request::ProfileShow(show) => profile_show(cx, show),
        Request::ProfileCheck(check) => profile_check(cx, check),
        Request::ProfileOverlap(overlap) => {
            timed_step(cx, session, Step::Overlap, |cx, session| {
                profile_overlap(cx, session, overlap)
            })
        }
        Request::Export(args) => timed_step(cx, session, Step::Export, |cx, session| {
            export(cx, session, args)
        }),
        Request::Compare(args) => {
            let result = timed_step(cx, session, Step::Compare, |cx, session| {
                compare(cx, session, args).map(drop)
            });
            if result.is_ok()
                && let Some(answer) = crate::report::answer::answer(&session.report)
            {
                cx.printer.table(answer.text());
            }
            // Measuring chosen variants is not part of building the release.
            session.report.mark_standalone(Step::Compare);
            if let Err(err) = session.report.save(&cx.layout.report()) {
                cx.printer
                    .warn(format!("could not write the report: {err:#}"));
            }
            result
        }
        Request::Run(args) => run_all(cx, session, args),
        Request::Gate(args) => timed_step(cx, session, Step::Gate, |cx, session| {
            gate(cx, session, args)
        }),
        Request::Explore(args) => explore(cx, session, args),
    }?;

    // A step completed by its own command counts as `run`'s would, recorded with the
    // options it ran with.
    let completed = match request {
        Request::Build => Some((Step::Build, StepOptions::default())),
        Request::Instrument => Some((Step::Instrument, StepOptions::default())),
        // A shard, or some workloads only, is not the whole training `run` would do.
        Request::Train(args) if args.is_whole() => Some((Step::Train, StepOptions::default())),
        Request::Optimize(args) => Some((
            Step::Optimize,
            StepOptions {
                optimize: args.clone(),
                ..StepOptions::default()
            },
        )),
        Request::Bolt { bolt, .. } => Some((
            Step::Bolt,
            StepOptions {
                bolt: *bolt,
                ..StepOptions::default()
            },
        )),
        _ => None,
    };
    if let Some((step, options)) = completed {
        record_completed(cx, session, step, &options)?;
    }
    Ok(())
}

/// The flags every command takes, for `Loaded::load` and `Context::new`.
fn global_options(args: &GlobalArgs) -> GlobalOptions {
    GlobalOptions {
        manifest_path: args.manifest_path.clone(),
        config: args.config.clone(),
        packages: args.packages.clone(),
        bins: args.bins.clone(),
        features: args.features.clone(),
        profile: args.profile.clone(),
        targets: args.targets.clone(),
        jobs: args.jobs,
        strict: args.strict,
        continuous: args.continuous,
        cross_language: args.cross_language,
        retrain: args.retrain,
    }
}

/// The request the flags of a pipeline command make; `None` for those `offline` runs.
fn request_of(command: &Command) -> Option<Request> {
    let optimize = |args: &crate::cli::OptimizeArgs| OptimizeRequest {
        allow_missing_profile: args.allow_missing_profile.clone(),
    };
    Some(match command {
        Command::Doctor => Request::Doctor,
        Command::Build => Request::Build,
        Command::Instrument => Request::Instrument,
        Command::Train(args) => Request::Train(TrainRequest {
            workloads: args.workloads.clone(),
            shard: args.shard,
            bundle: args.bundle.clone(),
        }),
        Command::Optimize(args) => Request::Optimize(optimize(args)),
        Command::Bolt(args) => Request::Bolt {
            bolt: BoltRequest {
                without_pgo: args.without_pgo,
            },
            if_enabled: args.if_enabled,
        },
        Command::Profile(args) => match &args.command {
            ProfileCommand::Show(args) => Request::ProfileShow(ShowRequest {
                top: args.top,
                binary: args.binary.clone(),
                json: args.json,
            }),
            ProfileCommand::Check(args) => Request::ProfileCheck(CheckRequest {
                top: args.top,
                json: args.json,
            }),
            ProfileCommand::Overlap(args) => {
                Request::ProfileOverlap(OverlapRequest { top: args.top })
            }
        },
        Command::Export(args) => Request::Export(ExportRequest {
            output: args.output.clone(),
            rustc_estimates: args.rustc_estimates.clone(),
            internal: false,
        }),
        Command::Pack(args) => Request::Pack(PackRequest {
            stage: args.stage,
            output: args.output.clone(),
        }),
        Command::Unpack(args) => Request::Unpack(UnpackRequest {
            archive: args.archive.clone(),
        }),
        Command::Merge(args) => Request::Merge(MergeRequest {
            bundles: args.bundles.clone(),
            weights: args.weights,
            weight: args.weight.clone(),
        }),
        Command::Compare(args) => Request::Compare(CompareRequest {
            variants: args.variants.clone(),
            rounds: args.rounds,
            budget_secs: args.budget,
            workloads: args.workloads.clone(),
            role: args.role,
            metric: args.metric.clone(),
            seed: args.seed,
            fail_if_slower: args.fail_if_slower,
            against: args.against.clone(),
            counting_budget: None,
        }),
        Command::Run(args) => Request::Run(RunRequest {
            steps: StepOptions {
                optimize: optimize(&args.optimize),
                bolt: BoltRequest::default(),
                compare_rounds: args.compare_rounds,
            },
            force: args.force,
            from: args.from,
            compare: !args.no_compare,
        }),
        Command::Gate(args) => Request::Gate(GateRequest {
            rounds: args.rounds,
            against: args.against.clone(),
            metric: args.metric.clone(),
            budget: args.budget.clone(),
        }),
        Command::Explore(args) => Request::Explore(ExploreRequest {
            variants: args.variants.clone(),
            rounds: args.rounds,
            metric: args.metric.clone(),
            budget: args.budget.clone(),
            apply: args.apply,
        }),
        Command::Clean | Command::Init | Command::Report(_) | Command::Generate(_) => return None,
    })
}
