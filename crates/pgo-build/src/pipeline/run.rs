//! `pgo-build run`: every step in order (doctor → build → instrument → train → optimize →
//! [bolt] → compare), reusing a step whose inputs have not changed since it completed and
//! whose outputs are intact ("cached"; fingerprints in `state.json`), then the step table.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Result, bail};

use super::bundles::merged_bundles;
use super::context::{Context, Session, timed_step};
use super::stage_build::plain_flags;
use super::steps::bolt::bolt;
use super::steps::compare::{compare, count_code};
use super::steps::doctor::{doctor, no_training};
use super::steps::optimize::optimize;
use super::steps::plain_builds::{build_baseline, instrument};
use super::steps::profile::profile_overlap;
use super::steps::train::{clear_raw_profiles, train};
use super::trained::{Trained, trained_workloads};
use crate::cargo::dep_info;
use crate::cargo::manifest::StageManifest;
use crate::config::Role;
use crate::layout::Stage;
use crate::layout::step::Step;
use crate::pipeline::requests::{CompareRequest, RunRequest, StepOptions, TrainRequest};
use crate::report::{StepResult, render};
use crate::util::fingerprint::Fingerprint;

/// doctor → build → instrument → train → optimize → compare, then the step table.
pub fn run_all(cx: &Context, session: &mut Session, args: &RunRequest) -> Result<()> {
    // Sections of steps that turn out to be cached stay; the step records start afresh.
    session.report.steps.clear();
    let result = run_steps(cx, session, args);
    // CI: GitHub Actions shows this file on the run's page.
    if let Some(summary) = std::env::var_os("GITHUB_STEP_SUMMARY") {
        // A comparison left from before this run (`--no-compare`) may be of other builds.
        let out_of_date = session.report.compare.as_ref().and_then(|compare| {
            compare.rebuilt_note(|variant| {
                crate::cargo::manifest::StageManifest::current_build(&cx.layout, variant)
            })
        });
        let summary_text = render::markdown(&session.report, out_of_date.as_deref());
        let appended = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&summary)
            .and_then(|mut file| std::io::Write::write_all(&mut file, summary_text.as_bytes()));
        if let Err(err) = appended {
            cx.printer.warn(format!(
                "could not append to GITHUB_STEP_SUMMARY ({}): {err}",
                PathBuf::from(summary).display()
            ));
        }
    }
    cx.printer.table(session.report.step_table());
    if !session.report.binaries.is_empty() {
        cx.printer.table(session.report.size_table());
    }
    // The answer last, on the screen a user sees when the run ends: only this run's.
    let compared = session
        .report
        .steps
        .iter()
        .any(|s| s.name == Step::Compare && s.result == StepResult::Ok);
    if compared && let Some(answer) = crate::report::answer::answer(&session.report) {
        cx.printer.table(answer.text());
    }
    if result.is_ok() {
        cx.printer.info(format!(
            "optimized binaries: {}",
            cx.layout.bin_dir(Stage::Optimized).display()
        ));
        cx.printer
            .info(format!("report: {}", cx.layout.report().display()));
    }
    result
}

fn run_steps(cx: &Context, session: &mut Session, args: &RunRequest) -> Result<()> {
    timed_step(cx, session, Step::Doctor, doctor)?;
    if let Some(problem) = no_training(cx) {
        bail!("{problem}; nothing was built");
    }
    pipeline_step(cx, session, Step::Build, args, None)?;
    let mut trained = None;
    if cx.config.pgo.profile.is_none() {
        pipeline_step(cx, session, Step::Instrument, args, None)?;
        trained = pipeline_step(cx, session, Step::Train, args, None)?;
    }
    pipeline_step(cx, session, Step::Optimize, args, trained.as_ref())?;
    if cx.config.bolt.enabled {
        pipeline_step(cx, session, Step::Bolt, args, None)?;
    }
    if !args.compare {
        return Ok(());
    }
    if cx
        .config
        .workloads_with_role(Role::Holdout)
        .next()
        .is_none()
    {
        cx.printer.warn(format!(
            "no holdout workloads in {}: the speedup is not measured. Add a [[workload]] with \
             role = \"holdout\" on inputs training never sees.",
            cx.config.display_path()
        ));
        return Ok(());
    }
    let request = run_compare_request(cx, &args.steps);
    cached_step(cx, session, Step::Compare, args, |cx, session| {
        compare(cx, session, &request)
    })?;
    why_nothing_ships(cx, session)
}

/// Where the answer ships nothing, what its why line rests on is measured: how training
/// covers the held-out work, where training ran here (`profile overlap`: one instrumented run
/// of each held-out workload), and whose code the held-out work runs, where the comparison
/// counted none (`count_code`). A failure costs the answer that line, not the run: an
/// interruption still stops the command, and `--strict` still fails on a warning.
fn why_nothing_ships(cx: &Context, session: &mut Session) -> Result<()> {
    let ships = crate::report::answer::answer(&session.report).is_none_or(|a| a.ship.is_some());
    if ships {
        return Ok(());
    }
    // A comparison reused as it was keeps the overlap measured beside it.
    let reused = session
        .report
        .steps
        .iter()
        .any(|s| s.name == Step::Compare && s.result == StepResult::Cached);
    if cx.config.pgo.profile.is_none() && (!reused || session.report.overlap.is_empty()) {
        cx.printer.info(
            "nothing ships: measuring how training covers the held-out work (`pgo-build \
             profile overlap`: one instrumented run of each held-out workload), for the \
             answer's why",
        );
        let measured = timed_step(cx, session, Step::Overlap, |cx, session| {
            profile_overlap(
                cx,
                session,
                &crate::pipeline::requests::OverlapRequest { top: 10 },
            )
        });
        tolerated(cx, measured, "how training covers the held-out work")?;
    }
    // A reused comparison's answer was told by the run that measured it; counting is the
    // dearer measurement, not made for an answer this run does not print.
    if reused {
        return Ok(());
    }
    let counted = count_code(cx, session);
    tolerated(cx, counted, "whose code the held-out work runs")
}

/// `result` of measuring `what` for the answer's why: a failure is a warning, unless it was
/// an interruption or `--strict` is on.
fn tolerated(cx: &Context, result: Result<()>, what: &str) -> Result<()> {
    match result {
        Err(err)
            if cx.strict
                || err
                    .downcast_ref::<crate::exec::interrupt::Interrupted>()
                    .is_some() =>
        {
            Err(err)
        }
        Err(err) => {
            cx.printer
                .warn(format!("could not measure {what}: {err:#}"));
            Ok(())
        }
        Ok(()) => Ok(()),
    }
}

/// One build step of `run` (not compare), cached as `cached_step` says. BOLT post-processes
/// the optimized binaries, or the baseline's when there is no PGO (`[pgo] profile` and
/// training both absent is refused earlier; `explore` asks for it with `without_pgo`).
/// The train step returns what it trained (unless cached), which the optimize step after
/// it takes as `trained`.
pub(super) fn pipeline_step(
    cx: &Context,
    session: &mut Session,
    step: Step,
    args: &RunRequest,
    trained: Option<&Trained>,
) -> Result<Option<Trained>> {
    match step {
        Step::Build => cached_step(cx, session, step, args, build_baseline)?,
        Step::Instrument => cached_step(cx, session, step, args, instrument)?,
        Step::Train => {
            return cached_step(cx, session, step, args, |cx, session| {
                clear_raw_profiles(cx)?;
                train(cx, session, &TrainRequest::default())
            });
        }
        Step::Optimize => cached_step(cx, session, step, args, |cx, session| {
            optimize(cx, session, &args.steps.optimize, trained)
        })?,
        Step::Bolt => cached_step(cx, session, step, args, |cx, session| {
            bolt(cx, session, &args.steps.bolt)
        })?,
        other => bail!("{} is not a build step of `run`", other.name()),
    };
    Ok(None)
}

/// Runs a step of `run`, or reuses its last result when its inputs have not changed since
/// it completed and its outputs are intact (shown as "cached"; then `None`).
fn cached_step<T>(
    cx: &Context,
    session: &mut Session,
    step: Step,
    args: &RunRequest,
    body: impl FnOnce(&Context, &mut Session) -> Result<T>,
) -> Result<Option<T>> {
    let name = step.name();
    let started = Instant::now();
    let forced = args.force || args.from.is_some_and(|from| step >= from);
    if !forced
        && let Some(fingerprint) = fingerprint(cx, step, &args.steps)?
        && session.state.steps.get(&step) == Some(&fingerprint.finish())
        && outputs_intact(cx, session, step)
    {
        let cached = StepResult::Cached;
        cx.printer
            .step_end(name, cached.name(), true, started.elapsed());
        session
            .report
            .record_cached_step(step, session.state.runs.get(&step));
        session.report.save(&cx.layout.report())?;
        return Ok(None);
    }
    let value = timed_step(cx, session, step, body)?;
    record_completed(cx, session, step, &args.steps)?;
    Ok(Some(value))
}

/// Records a step completed (by `run`, or by its own command: `pgo-build optimize`, …) with
/// the fingerprint of its inputs, so `run` reuses it while they are unchanged and `gate`
/// knows it is current. `options` are what it ran with.
pub fn record_completed(
    cx: &Context,
    session: &mut Session,
    step: Step,
    options: &StepOptions,
) -> Result<()> {
    if let Some(fingerprint) = fingerprint(cx, step, options)? {
        session.state.steps.insert(step, fingerprint.finish());
        session.state.parts.insert(step, fingerprint.parts());
        if let Some(record) = session.report.step_record(step) {
            session.state.runs.insert(step, record.clone());
        }
        session.state.save(&cx.layout)?;
    }
    Ok(())
}

/// The steps `run` would run again now, each with why: not completed by `run`, inputs
/// changed since (sources, settings, workloads, profiles), or outputs no longer intact. A
/// training merged from bundles (`pgo-build merge`) stands for the train step while it is
/// the current training.
pub(super) fn stale_steps(cx: &Context, session: &Session) -> Result<Vec<String>> {
    let options = StepOptions::default();
    let mut steps = vec![Step::Build];
    // Training merged from bundles was made against an instrumented build elsewhere.
    if cx.config.pgo.profile.is_none() && merged_bundles(cx)?.is_none() {
        steps.extend([Step::Instrument, Step::Train]);
    }
    steps.push(Step::Optimize);
    if cx.config.bolt.enabled {
        steps.push(Step::Bolt);
    }
    let mut stale = Vec::new();
    for step in steps {
        let name = step.name();
        let now = fingerprint(cx, step, &options)?;
        let recorded = session.state.steps.get(&step);
        let reason = match (recorded, now) {
            (None, _) => Some("not completed in this target directory".to_owned()),
            (Some(_), None) => {
                Some("its inputs cannot be read (a build output is missing)".to_owned())
            }
            (Some(recorded), Some(now)) if *recorded != now.finish() => {
                Some(what_changed(session.state.parts.get(&step), &now.parts()))
            }
            _ if !outputs_intact(cx, session, step) => {
                Some("its outputs changed or are incomplete since it completed".to_owned())
            }
            _ => None,
        };
        if let Some(reason) = reason {
            stale.push(format!("{name}: {reason}"));
        }
    }
    Ok(stale)
}

/// Why a step's inputs no longer match: the parts of its fingerprint that changed, and what
/// brings it back (the same flags, or `run`). Without recorded parts (a state written before
/// they were), the kinds of input it covers.
fn what_changed(
    recorded: Option<&BTreeMap<String, String>>,
    now: &BTreeMap<String, String>,
) -> String {
    let changed: Vec<&str> = match recorded {
        Some(recorded) => now
            .iter()
            .filter(|(part, hash)| recorded.get(*part) != Some(*hash))
            .map(|(part, _)| part.as_str())
            .collect(),
        None => Vec::new(),
    };
    if changed.is_empty() {
        return "its inputs changed since it completed (sources, settings, workloads or \
                profiles); `pgo-build run` redoes what changed"
            .to_owned();
    }
    let flags = if changed.contains(&SETTINGS_PART) {
        " If this command lacks a flag the build had (--cross-language, --continuous, \
         --target, --features, …), give it the same flags; otherwise"
    } else {
        ""
    };
    format!(
        "changed since it completed: {}.{flags} `pgo-build run` redoes what changed",
        changed.join(", ")
    )
}

fn outputs_intact(cx: &Context, session: &Session, step: Step) -> bool {
    let manifest_intact =
        |stage: Stage| StageManifest::load(&cx.layout, stage, "").is_ok_and(|m| m.intact());
    match step {
        Step::Build | Step::Instrument | Step::Optimize => {
            step.cargo_build().is_some_and(manifest_intact)
        }
        // BOLT's instrumented binaries are its means; the bolt stage is what it is for.
        Step::Bolt => manifest_intact(Stage::Bolt),
        // Every train workload's last run completed, and its files are as it left them.
        Step::Train => {
            StageManifest::load(&cx.layout, Stage::Instrumented, "").is_ok_and(|instrumented| {
                trained_workloads(cx, &instrumented, &cx.config.train_runs())
                    .1
                    .is_empty()
            })
        }
        Step::Compare => session.report.compare.is_some(),
        // Not a step of `run`: never reused.
        _ => false,
    }
}

/// The fingerprint of a step's inputs as they are now; `None` when they cannot be known
/// yet (a build that never ran has no dep-info).
fn fingerprint(cx: &Context, step: Step, options: &StepOptions) -> Result<Option<Fingerprint>> {
    let mut print = Fingerprint::new(step.name());
    print.part("pgo-build's version");
    print.text("pgo-build", env!("CARGO_PKG_VERSION"));
    let stage_json = |print: &mut Fingerprint, stage: Stage| -> bool {
        print.part(&format!("the {} build", stage.name()));
        let text = std::fs::read_to_string(cx.layout.stage_manifest(stage));
        print.text(step.name(), text.as_deref().unwrap_or("missing"));
        text.is_ok()
    };
    let workloads = |print: &mut Fingerprint, role: Role| {
        print.part(&format!("the {} workloads", role.name()));
        for workload in cx.config.workloads_with_role(role) {
            print.text("workload", &workload.fingerprint());
        }
    };
    match step {
        Step::Build | Step::Instrument | Step::Optimize => {
            print.part(SETTINGS_PART);
            print.text("settings", &serde_json::to_string(&cx.settings)?);
            print.text("bins", &format!("{:?}", cx.bins));
            print.text("plain flags", &plain_flags(cx).join(" "));
            print.text("continuous", &cx.config.pgo.continuous.to_string());
            print.text("startup order", cx.config.pgo.startup_order.name());
            print.part("Cargo.toml or Cargo.lock");
            for manifest in &cx.workspace.manifests {
                print.file(manifest);
            }
            print.file(&cx.workspace.root.join("Cargo.lock"));
            let Some(built) = step.cargo_build() else {
                return Ok(None);
            };
            let Ok(manifest) = StageManifest::load(&cx.layout, built, "") else {
                return Ok(None);
            };
            print.part("the sources");
            // An unpacked stage's binaries have no dep-info here: the sources its pack
            // recorded (checked against this checkout when unpacked) stand in.
            let unpacked: Option<BTreeMap<String, String>> =
                std::fs::read_to_string(cx.layout.unpacked_sources(built))
                    .ok()
                    .and_then(|text| serde_json::from_str(&text).ok());
            for binary in &manifest.binaries {
                match (dep_info::dep_info_sources(&binary.source), &unpacked) {
                    (Some(sources), _) => {
                        for source in sources {
                            print.file(&source);
                        }
                    }
                    (None, Some(recorded)) if binary.source == binary.path => {
                        for relative in recorded.keys() {
                            print.file(&cx.workspace.root.join(relative));
                        }
                    }
                    (None, _) => return Ok(None),
                }
            }
            if step == Step::Optimize {
                print.part("the profile");
                print.text(
                    "allow missing",
                    &options.optimize.allow_missing_profile.join(","),
                );
                match &cx.config.pgo.profile {
                    Some(profile) => print.file(&cx.workspace.root.join(profile)),
                    None => print.tree(&cx.layout.raw_profiles_dir()),
                };
            }
        }
        Step::Train => {
            stage_json(&mut print, Stage::Instrumented);
            workloads(&mut print, Role::Train);
        }
        Step::Bolt => {
            if options.bolt.without_pgo {
                print.part("--without-pgo");
                print.text("without pgo", "true");
                stage_json(&mut print, Stage::Baseline);
            } else {
                stage_json(&mut print, Stage::Optimized);
            }
            print.part("[bolt] settings");
            print.text("bolt", &format!("{:?}", cx.config.bolt));
            workloads(&mut print, Role::Train);
        }
        Step::Compare => {
            for stage in Stage::VARIANTS {
                stage_json(&mut print, stage);
            }
            // What the comparison asks, named: not a struct's Debug, which changes with it.
            let compare = run_compare_request(cx, options);
            print.part("what is compared");
            print.text("compare variants", &compare.variants.join(","));
            print.text("compare rounds", &format!("{:?}", compare.rounds));
            print.text("compare workloads", &compare.workloads.join(","));
            print.text("compare seed", &compare.seed.to_string());
            workloads(&mut print, Role::Holdout);
        }
        // Not a step of `run`: nothing to compare with.
        _ => return Ok(None),
    }
    Ok(Some(print))
}

/// The part of a build's fingerprint that a command's flags can change.
const SETTINGS_PART: &str = "the build settings (flags given to the command, [build] and [pgo] \
     settings, rustflags)";

/// The comparison `run` ends with: every staged variant on the holdout workloads.
fn run_compare_request(cx: &Context, options: &StepOptions) -> CompareRequest {
    let variants = std::iter::once(Stage::Baseline)
        .chain(std::iter::once(Stage::Optimized))
        .chain(cx.config.bolt.enabled.then_some(Stage::Bolt))
        .map(|stage| stage.name().to_owned())
        .collect();
    CompareRequest {
        rounds: options.compare_rounds,
        ..CompareRequest::of(variants, cx.config.workload_names(Role::Holdout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_step_names_the_parts_that_changed_and_a_flag_it_may_lack() {
        let parts = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let before = parts(&[
            (SETTINGS_PART, "a"),
            ("the sources", "b"),
            ("the profile", "c"),
        ]);
        let sources = parts(&[
            (SETTINGS_PART, "a"),
            ("the sources", "x"),
            ("the profile", "c"),
        ]);
        assert_eq!(
            what_changed(Some(&before), &sources),
            "changed since it completed: the sources. `pgo-build run` redoes what changed"
        );
        let flags = parts(&[
            (SETTINGS_PART, "y"),
            ("the sources", "b"),
            ("the profile", "c"),
        ]);
        let said = what_changed(Some(&before), &flags);
        assert!(
            said.starts_with("changed since it completed: the build settings"),
            "{said}"
        );
        assert!(said.contains("give it the same flags"), "{said}");
        // A state written before parts were recorded says what kinds of input it covers.
        assert!(what_changed(None, &flags).contains("(sources, settings, workloads or profiles)"));
    }
}
