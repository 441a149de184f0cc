//! `pgo-build train`: runs the train workloads against the instrumented binaries, then checks
//! and accounts for every raw profile per binary (processes, profiles written, processes that
//! ended without writing, coverage). `run_training` is shared with BOLT's training and
//! `profile overlap`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};

use super::Session;
use crate::cargo_build::StageManifest;
use crate::cli::{Shard, TrainArgs};
use crate::config::{OnCorrupt, Role, Workload};
use crate::layout::Stage;
use crate::profiles::{self, Accounting, BinaryProfiles};
use crate::report::{RejectedProfile, WorkloadRecord, human_bytes};
use crate::start_marker;
use crate::state::Fingerprint;
use crate::training;
use crate::training_record::{self, TrainingRecord};

impl Session {
    /// Runs the train workloads (all, or those named; with `--shard`, that shard's runs)
    /// against the instrumented binaries, and with `--bundle` writes what it recorded to a
    /// bundle for `pgo-build merge`.
    pub fn train(&mut self, args: &TrainArgs) -> Result<()> {
        let instrumented = StageManifest::load(
            &self.layout,
            Stage::Instrumented,
            "run `pgo-build instrument` (or `pgo-build unpack` a packed instrumented stage) first",
        )?;
        let mut runs = self.training_workloads(&args.workloads)?;
        if let Some(shard) = args.shard {
            runs = shard.select(runs);
            self.printer.info(format!(
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
        // A local training supersedes profiles merged from other machines' bundles.
        self.forget_merged_bundles()?;
        let raw_dir = self.layout.raw_profiles_dir();
        self.remove_profiles_of_other_workloads(&raw_dir)?;
        let continuous = instrumented.continuous();
        self.run_training(
            Stage::Instrumented,
            &instrumented,
            &runs,
            "train",
            &|workload| {
                let env = instrumented_profile_env(&raw_dir, continuous, workload)?;
                TrainingRecord::start(&raw_dir.join(workload.run_name()), workload, &instrumented)?;
                Ok(env)
            },
            &|workload, outcome| {
                TrainingRecord::finish(
                    &raw_dir.join(workload.run_name()),
                    &outcome.status,
                    outcome.success || workload.allow_failure,
                )
            },
        )?;
        // A shard accounts for its own runs; a local training for every train run, where
        // runs not made now keep their last run if it is still usable.
        let scope = match args.shard {
            Some(_) => runs.clone(),
            None => self.config.train_runs(),
        };
        let (usable, unusable) = self.trained_workloads(&instrumented, &scope);
        for reason in unusable {
            self.caution(format!(
                "{reason}; `pgo-build optimize` refuses until it is trained"
            ))?;
        }
        if let Some(test) = runs
            .iter()
            .find(|w| w.cargo.as_ref().is_some_and(|c| c[0] == "test"))
        {
            self.printer.warn(format!(
                "workload `{}` trains on a test suite: tests exercise setup and error paths more \
                 than the hot paths, so measure the optimized build with a holdout workload \
                 before trusting this profile",
                test.name()
            ));
        }
        let accounting = self.account_dirs(&usable, &instrumented)?;
        self.print_accounting(&accounting);
        self.report_accounting(&accounting)?;
        let from_cargo = self.print_cargo_coverage(&accounting)?;
        for (binary, figures) in &accounting.per_binary {
            if figures.valid_files == 0 && from_cargo {
                self.caution(cargo_only_message(binary))?;
                continue;
            }
            if figures.valid_files == 0 {
                if args.shard.is_some() {
                    // Another shard may well run it; `merge` judges the whole.
                    self.printer.info(format!(
                        "no profile of `{binary}` in this shard ({} processes)",
                        figures.processes
                    ));
                    continue;
                }
                self.caution(format!(
                    "{}; `pgo-build optimize` will refuse to build it with PGO (see --allow-missing-profile)",
                    no_profile_message(binary, figures)
                ))?;
            } else if figures.died > 0 {
                // Their work is missing from the profile: code only they ran looks cold.
                self.caution(format!(
                    "{} of {} processes of `{binary}` ended without writing a profile: \
                     {ENDED_WITHOUT_WRITING}. What they ran is missing from its profile",
                    figures.died, figures.processes
                ))?;
            }
        }
        if let Some(path) = &args.bundle {
            let shard = args.shard.unwrap_or(Shard::WHOLE);
            let scope: Vec<&Workload> = scope
                .iter()
                .filter(|run| usable.iter().any(|(name, _)| *name == run.run_name()))
                .collect();
            self.write_bundle(path, shard, &scope, &accounting, &instrumented)?;
        }
        Ok(())
    }

    /// Runs training workloads against a stage's binaries, one after the other. `prepare`
    /// readies a workload's profile directory and returns the variables that point the
    /// binaries at it; `finish` records how it ended. A failing workload fails the stage
    /// unless `allow_failure` is set.
    pub(crate) fn run_training(
        &mut self,
        stage: Stage,
        manifest: &StageManifest,
        workloads: &[Workload],
        log_prefix: &str,
        prepare: &dyn Fn(&Workload) -> Result<training::EnvVars>,
        finish: &dyn Fn(&Workload, &training::Outcome) -> Result<()>,
    ) -> Result<()> {
        let bin_names: Vec<&str> = manifest.binaries.iter().map(|b| b.name.as_str()).collect();
        let (bin_dir, platform_env) = self.runnable_bins(&self.layout, stage, &bin_names)?;
        if self.emulated_start_hint().is_some() {
            self.printer.info(format!(
                "{} binaries run here only through the runner: a process they start must be \
                 started through $PGO_BUILD_BIN_<NAME> (see `pgo-build doctor`)",
                self.platform.arch
            ));
        }
        let running = self.layout.running_dir();
        self.remove_logs_of_unknown_workloads(log_prefix, |rest| Some(rest));
        for workload in workloads {
            let mut extra_env = platform_env.clone();
            extra_env.extend(prepare(workload)?);
            let target = training::Target {
                stage,
                bin_dir: &bin_dir,
                bin_names: bin_names.clone(),
                workspace_root: &self.workspace.root,
                extra_env,
                wrapper: Vec::new(),
                log_path: self
                    .layout
                    .logs_dir()
                    .join(format!("{log_prefix}-{}.log", workload.run_name())),
                running_dir: Some(&running),
            };
            self.printer
                .info(format!("workload {} ...", workload.run_name()));
            let running = self.resolve_workload(&self.layout, stage, manifest, workload)?;
            let outcome = target.run(&running, &self.printer)?;
            finish(workload, &outcome)?;
            warn_about_error_lines(&self.printer, &workload.run_name(), &outcome.log_path);
            self.printer.info(format!(
                "workload {}: {} in {:.2}s (log: {})",
                workload.run_name(),
                outcome.status,
                outcome.duration.as_secs_f64(),
                outcome.log_path.display()
            ));
            self.report
                .training
                .retain(|w| !(w.name == workload.run_name() && w.stage == stage.name()));
            self.report.training.push(WorkloadRecord {
                name: workload.run_name().to_owned(),
                stage: stage.name().to_owned(),
                status: outcome.status.clone(),
                success: outcome.success,
                duration_secs: outcome.duration.as_secs_f64(),
                log: outcome.log_path.clone(),
                stopped: outcome.stopped.clone(),
            });
            if !outcome.stopped.is_empty() {
                self.caution(format!(
                    "pgo-build had to stop processes of workload `{}`: {}. A process stopped by a \
                     signal writes no profile unless it calls pgo_build_rt::install() (SIGTERM, \
                     SIGINT) or training runs in continuous mode (any signal). Make the workload \
                     stop its own children.",
                    workload.run_name(),
                    training::describe_stopped(&outcome.stopped)
                ))?;
            }
            if !outcome.success {
                let tail = training::log_tail(&outcome.log_path, 20);
                if workload.allow_failure {
                    self.printer.warn(format!(
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
                        self.emulated_start_hint()
                            .map(|hint| format!("{hint}\n"))
                            .unwrap_or_default(),
                        self.config.display_path()
                    );
                }
            }
        }
        Ok(())
    }

    /// When the kernel cannot run the target's binaries itself (emulated, no binfmt_misc
    /// entry): what a process an instrumented binary started directly meets, and the fix.
    fn emulated_start_hint(&self) -> Option<String> {
        let arch = &self.platform.arch;
        if !self.platform.execution().emulated() || crate::targets::binfmt_registered(arch) {
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

    pub(crate) fn training_workloads(&self, names: &[String]) -> Result<Vec<Workload>> {
        if names.is_empty() {
            let workloads = self.config.train_runs();
            if workloads.is_empty() {
                bail!("{}", self.no_train_workloads());
            }
            return Ok(workloads);
        }
        let named: Vec<Workload> = names
            .iter()
            .map(|name| {
                let workload = self.config.workload(name).with_context(|| {
                    format!(
                        "no workload named `{name}` in {}; defined: {}",
                        self.config.display_path(),
                        self.config
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
                        self.config.display_path()
                    );
                }
                Ok(workload.clone())
            })
            .collect::<Result<_>>()?;
        Ok(named.iter().flat_map(Workload::parts).collect())
    }

    /// Removes every raw profile, before a full training run.
    pub fn clear_raw_profiles(&self) -> Result<()> {
        let raw = self.layout.raw_profiles_dir();
        if raw.exists() {
            std::fs::remove_dir_all(&raw)
                .with_context(|| format!("could not remove {}", raw.display()))?;
        }
        Ok(())
    }

    /// Removes `logs/<prefix>-….log` files whose workload (`name_of` the rest of the file
    /// name) is not in the configuration any more: a stale log beside fresh ones misleads.
    pub(super) fn remove_logs_of_unknown_workloads(
        &self,
        prefix: &str,
        name_of: impl Fn(&str) -> Option<&str>,
    ) {
        for entry in std::fs::read_dir(self.layout.logs_dir())
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
            if !self.config.has_run(workload) {
                self.printer.detail(format!(
                    "removing {}: workload `{workload}` is not configured any more",
                    entry.path().display()
                ));
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }

    /// Removes the raw profiles of workloads that are not train workloads any more (removed,
    /// renamed, or made holdout), so nothing of them can be merged.
    fn remove_profiles_of_other_workloads(&self, raw_dir: &Path) -> Result<()> {
        let runs = self.config.train_runs();
        for (name, dir) in profiles::workload_dirs(raw_dir) {
            if !runs.iter().any(|run| run.run_name() == name) {
                self.printer.info(format!(
                    "removing the raw profiles of `{name}`: not a train workload in {}",
                    self.config.display_path()
                ));
                std::fs::remove_dir_all(&dir)
                    .with_context(|| format!("could not remove {}", dir.display()))?;
            }
        }
        Ok(())
    }

    /// The raw profile directories of the current train workloads whose last run may be
    /// merged (see `training_record`), and for the others why not.
    pub(super) fn trained_workloads(
        &self,
        instrumented: &StageManifest,
        runs: &[Workload],
    ) -> (Vec<(String, PathBuf)>, Vec<String>) {
        let raw_dir = self.layout.raw_profiles_dir();
        let mut usable = Vec::new();
        let mut unusable = Vec::new();
        for workload in runs {
            let dir = raw_dir.join(workload.run_name());
            match training_record::check(&dir, workload, instrumented) {
                Ok(()) => usable.push((workload.run_name(), dir)),
                Err(reason) => unusable.push(reason),
            }
        }
        (usable, unusable)
    }

    /// The profile accounting of the last training: every current train workload's last run,
    /// refused when one of them has no usable run.
    pub(crate) fn account(&self, instrumented: &StageManifest) -> Result<Accounting> {
        let (usable, unusable) = self.trained_workloads(instrumented, &self.config.train_runs());
        if !unusable.is_empty() {
            bail!(
                "the training profiles are not complete and current, and a profile of part of \
                 the training would silently optimize for other work:\n  - {}\n(`pgo-build \
                 run` trains every workload again.)",
                unusable.join("\n  - ")
            );
        }
        if usable.is_empty() {
            bail!("{}", self.no_train_workloads());
        }
        self.account_dirs(&usable, instrumented)
    }

    /// Every raw profile in the given workload directories, checked and attributed, with
    /// coverage.
    pub(crate) fn account_dirs(
        &self,
        workload_dirs: &[(String, PathBuf)],
        instrumented: &StageManifest,
    ) -> Result<Accounting> {
        let mut key = Fingerprint::new("accounting");
        key.text("instrumented", &serde_json::to_string(instrumented)?)
            .text("bins", &format!("{:?}", self.bins));
        for (name, dir) in workload_dirs {
            key.text("workload", name).tree(dir);
        }
        let key = key.finish();
        if let Some((cached, accounting)) = self.accounting_cache.borrow().as_ref()
            && *cached == key
        {
            return Ok(accounting.clone());
        }
        let binaries: Vec<&str> = self.bins.iter().map(|b| b.name.as_str()).collect();
        let cargo_runs = self
            .config
            .workloads
            .iter()
            .filter(|w| w.cargo.is_some())
            .flat_map(Workload::parts)
            .map(|w| w.run_name())
            .collect();
        let accounting = profiles::account(
            &profiles::RawDirs {
                workloads: workload_dirs,
                cargo_runs: &cargo_runs,
            },
            instrumented,
            &binaries,
            self.profdata()?,
            self.rustc.llvm_major,
            &self.layout.profiles_dir().join("scratch"),
            &self.printer,
        )?;
        *self.accounting_cache.borrow_mut() = Some((key, accounting.clone()));
        Ok(accounting)
    }

    /// Prints the per-binary training table, unless this session just printed the same one.
    pub(super) fn print_accounting(&self, accounting: &Accounting) {
        let table = accounting_table(&accounting.per_binary);
        if self.shown_accounting.borrow().as_ref() == Some(&table) {
            self.printer
                .detail("the per-binary training table is the one shown above");
            return;
        }
        self.printer.table(&table);
        *self.shown_accounting.borrow_mut() = Some(table);
    }

    /// For every cargo workload run with profiles: how much of each binary's own workspace
    /// code (its crate and the members it depends on) its bench/test binaries ran. Returns
    /// whether any cargo workload contributed.
    pub(super) fn print_cargo_coverage(&self, accounting: &Accounting) -> Result<bool> {
        let runs = accounting.cargo_inputs();
        if runs.is_empty() {
            return Ok(false);
        }
        let profdata = self.profdata()?.clone();
        let scratch = self.layout.profiles_dir().join("scratch");
        let mut table = Table::new();
        table.load_preset(UTF8_FULL_CONDENSED).set_header([
            "Cargo workload",
            "Profile files",
            "Binary",
            "Functions of its workspace crates run",
        ]);
        for (run, inputs) in &runs {
            let merged = scratch.join(format!("cargo-{run}.profdata"));
            profiles::merge_to(inputs, &merged, &profdata, &self.printer)?;
            let functions = crate::insight::functions(&merged, &profdata, &self.printer)?;
            for bin in &self.bins {
                let crates = self.workspace.own_crates(bin);
                let own: Vec<_> = functions
                    .iter()
                    .filter(|f| crates.contains(&f.krate))
                    .collect();
                let run_count = own.iter().filter(|f| f.total > 0).count();
                table.add_row([
                    run.to_string(),
                    inputs.len().to_string(),
                    bin.name.clone(),
                    format!(
                        "{run_count}/{} ({})",
                        own.len(),
                        crates.iter().cloned().collect::<Vec<_>>().join(", ")
                    ),
                ]);
            }
        }
        self.printer.table(table);
        Ok(true)
    }

    /// Each binary's training figures into the report (`profiles`).
    pub(super) fn record_binary_figures(&mut self, per_binary: &BTreeMap<String, BinaryProfiles>) {
        self.report.profiles = per_binary
            .iter()
            .map(|(name, figures)| {
                (
                    name.clone(),
                    serde_json::to_value(figures).unwrap_or_default(),
                )
            })
            .collect();
    }

    /// Records the accounting in the report; corrupt or foreign files are a warning, or an
    /// error with `[pgo] on_corrupt = "fail"` or `--strict`. (0-byte files are not corrupt:
    /// they are processes that died, reported per binary.)
    pub(super) fn report_accounting(&mut self, accounting: &Accounting) -> Result<()> {
        self.record_binary_figures(&accounting.per_binary);
        self.report.rejected_profiles = accounting
            .rejected()
            .map(|profile| RejectedProfile {
                path: profile.path.clone(),
                binary: profile.binary.clone(),
                reason: profile.rejected.clone().unwrap_or_default(),
            })
            .collect();
        let excluded: Vec<String> = accounting
            .rejected()
            .filter(|profile| profile.size_bytes > 0)
            .map(|profile| {
                format!(
                    "  {}: {}",
                    profile.path.display(),
                    profile.rejected.as_deref().unwrap_or_default()
                )
            })
            .collect();
        if excluded.is_empty() {
            return Ok(());
        }
        let message = format!(
            "{} raw profile{} excluded from the merge:\n{}",
            excluded.len(),
            if excluded.len() == 1 { " is" } else { "s are" },
            excluded.join("\n")
        );
        if self.config.pgo.on_corrupt == OnCorrupt::Fail {
            bail!(
                "{message}\n([pgo] on_corrupt = \"fail\" in {})",
                self.config.display_path()
            );
        }
        self.caution(message)
    }
}

/// A binary no workload ran, whose profile data comes from cargo workloads only.
pub(super) fn cargo_only_message(binary: &str) -> String {
    format!(
        "`{binary}` itself ran in no train workload: its profile comes from benchmarks or tests \
         (cargo workloads) only, so the library code they share with it has data but its own \
         `main` paths look cold"
    )
}

/// Readies `raw_dir/<workload>/` for a run against the instrumented binaries and returns the
/// variables pointing them at it.
pub(crate) fn instrumented_profile_env(
    raw_dir: &Path,
    continuous: bool,
    workload: &Workload,
) -> Result<training::EnvVars> {
    let profile_dir = raw_dir.join(workload.run_name());
    // Profiles of an earlier run of this workload would be merged twice.
    if profile_dir.exists() {
        std::fs::remove_dir_all(&profile_dir)?;
    }
    // Created here: instrumented children inherit __LLVM_PROFILE_RT_INIT_ONCE and then do not
    // create it themselves.
    std::fs::create_dir_all(&profile_dir)?;
    Ok(vec![
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
    ])
}

pub(super) fn no_profile_message(binary: &str, figures: &profiles::BinaryProfiles) -> String {
    if figures.processes == 0 {
        format!("`{binary}` wrote no profile: no training workload ran it")
    } else if figures.died == figures.processes {
        format!(
            "`{binary}`: all {} process{} ended without writing a profile: \
             {ENDED_WITHOUT_WRITING}",
            figures.processes,
            if figures.processes == 1 { "" } else { "es" }
        )
    } else {
        format!(
            "`{binary}` has {} profile files, none of them usable (see the excluded files above)",
            figures.files
        )
    }
}

/// Why processes end without writing a profile, and the two fixes.
const ENDED_WITHOUT_WRITING: &str = "stopped by a signal (SIGTERM, SIGKILL) or by abort/_exit \
    before their exit handlers ran. Call pgo_build_rt::install() first thing in its main \
    (SIGTERM, SIGINT), or train in continuous mode (--continuous: any signal)";

fn accounting_table(table: &BTreeMap<String, profiles::BinaryProfiles>) -> String {
    let mut out = Table::new();
    out.load_preset(UTF8_FULL_CONDENSED).set_header([
        "Binary",
        "Processes",
        "Wrote a profile",
        "Ended without writing",
        "Profile bytes",
        "Functions run / instrumented",
    ]);
    for (binary, figures) in table {
        out.add_row([
            binary.clone(),
            figures.processes.to_string(),
            figures.valid_files.to_string(),
            figures.died.to_string(),
            human_bytes(figures.bytes),
            figures.coverage_text(),
        ]);
    }
    out.to_string()
}

/// Says when a workload's output has lines that look like errors: it may have failed at what
/// it was meant to do and still exited 0.
pub(super) fn warn_about_error_lines(
    printer: &crate::printer::Printer,
    workload: &str,
    log: &Path,
) {
    if let Some((count, first)) = training::error_lines(log) {
        printer.warn(format!(
            "workload `{workload}` printed {count} line{} that look{} like errors (first: \
             \"{first}\"); it exited successfully, so check that it did its work: {}",
            if count == 1 { "" } else { "s" },
            if count == 1 { "s" } else { "" },
            log.display()
        ));
    }
}
