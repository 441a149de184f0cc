//! `pgo-build train`: runs the train workloads against the instrumented binaries, then checks
//! and accounts for every raw profile per binary (processes, profiles written, processes that
//! ended without writing, coverage). `run_training` is shared with BOLT's training and
//! `profile overlap`.

use std::path::Path;

use anyhow::{Context as _, Result};

use crate::cargo::manifest::StageManifest;
use crate::config::Workload;
use crate::layout::Stage;
use crate::pipeline::context::{Context, Session};
use crate::pipeline::requests::TrainRequest;
use crate::pipeline::trained::{
    ENDED_WITHOUT_WRITING, Trained, account_dirs, cargo_only_message, no_profile_message,
    print_accounting, print_cargo_coverage, refuse_idle_workloads, report_accounting,
    trained_workloads,
};
use crate::pipeline::workload_runs::{
    SERVICE_FIX, Training, instrumented_profile_env, run_training, training_workloads,
};
use crate::profiles::bundle::Shard;
use crate::profiles::training_record::TrainingRecord;
use crate::profiles::{self, start_marker};

/// Per binary: no profile at all (refused later unless a shard, or cargo workloads' binaries,
/// explain it), or processes that ended without writing theirs.
fn caution_per_binary(
    cx: &Context,
    accounting: &crate::profiles::Accounting,
    from_cargo: bool,
    sharded: bool,
) -> Result<()> {
    for (binary, figures) in &accounting.per_binary {
        if figures.valid_files == 0 && from_cargo {
            cx.caution(cargo_only_message(binary))?;
            continue;
        }
        if figures.valid_files == 0 {
            if sharded {
                // Another shard may well run it; `merge` judges the whole.
                cx.printer.info(format!(
                    "no profile of `{binary}` in this shard ({})",
                    crate::util::units::count(figures.processes, "process", "processes")
                ));
                continue;
            }
            cx.caution(format!(
                "{}; `pgo-build optimize` will refuse to build it with PGO (see --allow-missing-profile)",
                no_profile_message(binary, figures)
            ))?;
        } else if figures.died > 0 {
            // Their work is missing from the profile: code only they ran looks cold.
            cx.caution(format!(
                "{} of {} processes of `{binary}` ended without writing a profile: \
                 {ENDED_WITHOUT_WRITING}. What they ran is missing from its profile",
                figures.died, figures.processes
            ))?;
        }
    }
    Ok(())
}

/// Runs the train workloads (all, or those named; with `--shard`, that shard's runs)
/// against the instrumented binaries and accounts for their profiles. (`--bundle` is the
/// shard stage's: it writes the [`Trained`] result to a bundle for `pgo-build merge`.)
pub fn train(cx: &Context, session: &mut Session, args: &TrainRequest) -> Result<Trained> {
    let instrumented = StageManifest::load(
        &cx.layout,
        Stage::Instrumented,
        "run `pgo-build instrument` (or `pgo-build unpack` a packed instrumented stage) first",
    )?;
    instrumented.check_staged(Stage::Instrumented.name(), "instrument")?;
    let mut runs = training_workloads(cx, &args.workloads)?;
    if let Some(shard) = args.shard {
        runs = shard.select(runs);
        cx.printer.info(format!(
            "shard {shard}: {}",
            if runs.is_empty() {
                "no workload runs (more shards than runs); the bundle will be empty".to_owned()
            } else {
                runs.iter()
                    .map(Workload::run_name)
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ));
    }
    // Accounting needs it after the runs: a missing or mismatched one is refused first.
    cx.profdata()?;
    // Commit point: from here on the last training is being replaced (and with it any
    // profile merged from other machines' bundles).
    session.begin_outputs(cx)?;
    let raw_dir = cx.layout.raw_profiles_dir();
    remove_profiles_of_other_workloads(cx, &raw_dir)?;
    let continuous = instrumented.continuous();
    run_training(
        cx,
        session,
        Training {
            stage: Stage::Instrumented,
            manifest: &instrumented,
            workloads: &runs,
            log_prefix: "train",
            prepare: &|workload| {
                let env = instrumented_profile_env(&raw_dir, continuous, workload)?;
                TrainingRecord::start(&raw_dir.join(workload.run_name()), workload, &instrumented)?;
                Ok(env)
            },
            finish: &|workload, outcome| {
                TrainingRecord::finish(
                    &raw_dir.join(workload.run_name()),
                    &outcome.status,
                    outcome.success || workload.allow_failure,
                )
            },
        },
    )?;
    // A shard accounts for its own runs; a local training for every train run, where
    // runs not made now keep their last run if it is still usable.
    let scope = match args.shard {
        Some(_) => runs.clone(),
        None => cx.config.train_runs(),
    };
    let (usable, unusable) = trained_workloads(cx, &instrumented, &scope);
    for reason in unusable {
        cx.caution(format!(
            "{reason}; `pgo-build optimize` refuses until it is trained"
        ))?;
    }
    if let Some(test) = runs
        .iter()
        .find(|w| w.cargo.as_ref().is_some_and(|c| c[0] == "test"))
    {
        cx.printer.warn(format!(
            "workload `{}` trains on a test suite: tests exercise setup and error paths more \
             than the hot paths, so measure the optimized build with a holdout workload \
             before trusting this profile",
            test.name()
        ));
    }
    let accounting = account_dirs(cx, &usable, &instrumented)?;
    refuse_idle_workloads(cx, &usable, &accounting)?;
    print_accounting(cx, &accounting);
    report_accounting(cx, session, &accounting)?;
    let from_cargo = print_cargo_coverage(cx, &accounting)?;
    // Before the per-binary counts: this names which process and why.
    for silent in start_marker::silent_children(&usable) {
        let binary = silent.executable.file_name().map_or_else(
            || silent.executable.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        cx.caution(format!(
            "`{binary}` (workload `{}`): process {} wrote no profile while the `{binary}` \
             that started it (pid {}, its launcher) did, so the profile has the launcher's \
             work and not the process that did the work. {SERVICE_FIX}",
            silent.workload, silent.pid, silent.launcher_pid
        ))?;
    }
    caution_per_binary(cx, &accounting, from_cargo, args.shard.is_some())?;
    let shard = args.shard.unwrap_or(Shard::WHOLE);
    let runs = scope
        .into_iter()
        .filter(|run| usable.iter().any(|(name, _)| *name == run.run_name()))
        .collect();
    Ok(Trained {
        instrumented,
        shard,
        runs,
        accounting,
    })
}

/// Removes every raw profile, before a full training run.
pub fn clear_raw_profiles(cx: &Context) -> Result<()> {
    let raw = cx.layout.raw_profiles_dir();
    if raw.exists() {
        std::fs::remove_dir_all(&raw)
            .with_context(|| format!("could not remove {}", raw.display()))?;
    }
    Ok(())
}

/// Removes the raw profiles of workloads that are not train workloads any more (removed,
/// renamed, or made holdout), so nothing of them can be merged.
fn remove_profiles_of_other_workloads(cx: &Context, raw_dir: &Path) -> Result<()> {
    let runs = cx.config.train_runs();
    for (name, dir) in profiles::workload_dirs(raw_dir) {
        if !runs.iter().any(|run| run.run_name() == name) {
            cx.printer.info(format!(
                "removing the raw profiles of `{name}`: not a train workload in {}",
                cx.config.display_path()
            ));
            std::fs::remove_dir_all(&dir)
                .with_context(|| format!("could not remove {}", dir.display()))?;
        }
    }
    Ok(())
}
