//! The pipeline: one module per step or command family, and the dispatcher that runs a
//! command for every target it concerns.
//!
//! Every step is a function of the [`context::Context`] (what the command loaded once) and the
//! [`context::Run`] (what it changes), run inside [`context::timed_step`]. Steps communicate
//! through files under `target/pgo-build/` (see `layout`), so each command can run on its own
//! and `run` is all of them in order; within one process a step hands the next its result.
//!
//! Arrows point down only: this module (the dispatcher) → `run`, `explore`, `gate` → the step
//! modules (`doctor`, `build`, `train`, `optimize`, `bolt`, `compare`, `profile`, `shard`),
//! which never import each other → the shared modules (`workloads`, `accounting`,
//! `stage_build`, `rustc_budget`, `bundles`, `committed`, `state`) → `context` → the modules
//! outside `pipeline/`. ARCHITECTURE.md has the map; `tests/tidy.rs` checks it.

mod accounting;
mod bolt;
mod build;
mod bundles;
mod committed;
mod compare;
pub mod context;
mod doctor;
mod explore;
mod gate;
mod optimize;
mod profile;
mod release;
mod run;
mod rustc_budget;
mod shard;
mod stage_build;
mod state;
mod train;
mod workloads;

use std::path::PathBuf;

use anyhow::{Context as _, Result, bail};
use bolt::bolt;
use build::{build_baseline, instrument};
use compare::compare;
use context::{Context, Loaded, Run, timed_step};
use doctor::doctor;
use explore::explore;
use gate::gate;
use optimize::optimize;
use profile::{export, profile_check, profile_overlap, profile_show};
use run::{record_completed, run_all};
use shard::{merge, pack, unpack, write_bundle};
use train::train;

use crate::cli::{Cli, Command, ProfileCommand, RunArgs};
use crate::layout::step::Step;
use crate::util::printer::Printer;

/// Runs the command `cli` names.
pub fn execute(cli: &Cli, printer: &Printer) -> Result<()> {
    let doctor = matches!(cli.command, Command::Doctor);
    // `doctor` works anywhere: outside a workspace it reports the toolchain alone.
    if doctor && !doctor::in_a_workspace(cli.global.manifest_path.as_deref()) {
        doctor::doctor_toolchain(printer)?;
        printer.info(
            "no cargo workspace here: run `pgo-build doctor` in one (or with --manifest-path) \
             to check its binaries and configuration too",
        );
        return Ok(());
    }
    let loaded = match Loaded::load(&cli.global, printer) {
        // The toolchain is reported all the same, before what stops the workspace's checks.
        Err(err) if doctor => {
            if let Err(problem) = doctor::doctor_toolchain(printer) {
                printer.error(&problem);
            }
            return Err(err);
        }
        loaded => loaded?,
    };
    let targets = loaded.targets(&cli.global);
    // `doctor` checks every target before it fails; other commands stop at the first failure.
    let mut failed = Vec::new();
    for target in &targets {
        let Some(triple) = target else {
            let command = per_target_paths(&cli.command, loaded.host(), false)?;
            let cx = Context::new(&cli.global, printer, &loaded, None)?;
            dispatch(&command, &cx, &mut Run::start(&cx)?)?;
            continue;
        };
        printer.target_start(triple);
        let result = per_target_paths(&cli.command, triple, targets.len() > 1)
            .and_then(|command| {
                let cx = Context::new(&cli.global, printer, &loaded, Some(triple))?;
                dispatch(&command, &cx, &mut Run::start(&cx)?)
            })
            .with_context(|| format!("target {triple}"));
        match result {
            Err(err) if matches!(cli.command, Command::Doctor) => {
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
fn per_target_paths(command: &Command, triple: &str, several: bool) -> Result<Command> {
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
    let mut command = command.clone();
    match &mut command {
        Command::Export(args) => {
            if let Some(output) = &mut args.output {
                expand(output, "export --output")?;
            }
        }
        Command::Pack(args) => expand(&mut args.output, "pack --output")?,
        Command::Train(args) => {
            if let Some(bundle) = &mut args.bundle {
                expand(bundle, "train --bundle")?;
            }
        }
        Command::Unpack(args) => expand(&mut args.archive, "unpack")?,
        Command::Merge(args) => {
            for bundle in &mut args.bundles {
                expand(bundle, "merge")?;
            }
        }
        _ => {}
    }
    Ok(command)
}

fn dispatch(command: &Command, cx: &Context, run: &mut Run) -> Result<()> {
    if let Command::Bolt(args) = command
        && args.if_enabled
        && !cx.config.bolt.enabled
    {
        // Nothing ran, so nothing is recorded as completed either.
        cx.printer.info(format!(
            "BOLT is not enabled in {} ([bolt] enabled = true turns it on): nothing to do",
            cx.config.display_path()
        ));
        return Ok(());
    }
    match command {
        Command::Doctor => timed_step(cx, run, Step::Doctor, doctor),
        Command::Build => timed_step(cx, run, Step::Build, build_baseline),
        Command::Instrument => timed_step(cx, run, Step::Instrument, instrument),
        Command::Train(args) => timed_step(cx, run, Step::Train, |cx, run| {
            let trained = train(cx, run, args)?;
            match &args.bundle {
                Some(path) => write_bundle(cx, run, path, &trained),
                None => Ok(()),
            }
        }),
        Command::Pack(args) => timed_step(cx, run, Step::Pack, |cx, _| pack(cx, args)),
        Command::Unpack(args) => timed_step(cx, run, Step::Unpack, |cx, run| {
            // A baseline, optimized or bolt stage built in another job counts as built here:
            // the gate judges it (the sources and settings were checked to be the same). In
            // the order unpacked: a bolt stage's fingerprint reads its optimized one's record.
            for stage in unpack(cx, run, args)? {
                let step = match stage {
                    crate::layout::Stage::Baseline => Step::Build,
                    crate::layout::Stage::Optimized => Step::Optimize,
                    crate::layout::Stage::Bolt => Step::Bolt,
                    _ => continue,
                };
                record_completed(cx, run, step, &RunArgs::default())?;
            }
            Ok(())
        }),
        Command::Merge(args) => timed_step(cx, run, Step::Merge, |cx, run| merge(cx, run, args)),
        Command::Optimize(args) => timed_step(cx, run, Step::Optimize, |cx, run| {
            optimize(cx, run, args, None)
        }),
        Command::Bolt(args) => timed_step(cx, run, Step::Bolt, |cx, run| bolt(cx, run, args)),
        Command::Profile(args) => match &args.command {
            ProfileCommand::Show(show) => profile_show(cx, show),
            ProfileCommand::Check(check) => profile_check(cx, check),
            ProfileCommand::Overlap(overlap) => timed_step(cx, run, Step::Overlap, |cx, run| {
                profile_overlap(cx, run, overlap)
            }),
        },
        Command::Export(args) => timed_step(cx, run, Step::Export, |cx, run| export(cx, run, args)),
        Command::Compare(args) => {
            let result = timed_step(cx, run, Step::Compare, |cx, run| {
                compare(cx, run, args).map(drop)
            });
            if result.is_ok()
                && let Some(answer) = crate::report::answer::answer(&run.report)
            {
                cx.printer.table(answer.text());
            }
            // Measuring chosen variants is not part of building the release.
            run.report.mark_standalone(Step::Compare.name());
            if let Err(err) = run.report.save(&cx.layout.report()) {
                cx.printer
                    .warn(format!("could not write the report: {err:#}"));
            }
            result
        }
        Command::Run(args) => run_all(cx, run, args),
        Command::Gate(args) => timed_step(cx, run, Step::Gate, |cx, run| gate(cx, run, args)),
        Command::Explore(args) => explore(cx, run, args),
        Command::Clean | Command::Init | Command::Report(_) | Command::Generate(_) => {
            unreachable!("handled above")
        }
    }?;

    // A build stage completed by its own command counts as `run`'s would.
    let completed = match command {
        Command::Build => Some((Step::Build, RunArgs::default())),
        Command::Instrument => Some((Step::Instrument, RunArgs::default())),
        // A shard, or some workloads only, is not the whole training `run` would do.
        Command::Train(args) if args.shard.is_none() && args.workloads.is_empty() => {
            Some((Step::Train, RunArgs::default()))
        }
        Command::Optimize(args) => Some((
            Step::Optimize,
            RunArgs {
                optimize: args.clone(),
                ..RunArgs::default()
            },
        )),
        Command::Bolt(args) => Some((
            Step::Bolt,
            RunArgs {
                bolt_without_pgo: args.without_pgo,
                ..RunArgs::default()
            },
        )),
        _ => None,
    };
    if let Some((step, args)) = completed {
        record_completed(cx, run, step, &args)?;
    }
    Ok(())
}
