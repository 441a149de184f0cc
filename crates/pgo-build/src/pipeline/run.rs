//! `pgo-build run`: every stage in order (doctor → build → instrument → train → optimize →
//! [bolt] → compare), reusing a stage whose inputs have not changed since it completed and
//! whose outputs are intact ("cached"; fingerprints in `state.json`), then the stage table.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Result, bail};

use super::Session;
use crate::cargo::build::StageManifest;
use crate::cargo::dep_info;
use crate::cli::{BoltArgs, CompareArgs, RunArgs};
use crate::config::Role;
use crate::layout::Stage;
use crate::layout::step::Step;
use crate::report::render;
use crate::util::fingerprint::Fingerprint;

impl Session {
    /// doctor → build → instrument → train → optimize → compare, then the stage table.
    pub fn run_all(&mut self, args: &RunArgs) -> Result<()> {
        // Sections of stages that turn out to be cached stay; the stage records start afresh.
        self.report.stages.clear();
        let result = self.run_stages(args);
        // CI: GitHub Actions shows this file on the run's page.
        if let Some(summary) = std::env::var_os("GITHUB_STEP_SUMMARY") {
            let appended = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(&summary)
                .and_then(|mut file| {
                    std::io::Write::write_all(&mut file, render::markdown(&self.report).as_bytes())
                });
            if let Err(err) = appended {
                self.printer.warn(format!(
                    "could not append to GITHUB_STEP_SUMMARY ({}): {err}",
                    PathBuf::from(summary).display()
                ));
            }
        }
        self.printer.table(self.report.stage_table());
        if !self.report.binaries.is_empty() {
            self.printer.table(self.report.size_table());
        }
        if result.is_ok() {
            self.printer.info(format!(
                "optimized binaries: {}",
                self.layout.bin_dir(Stage::Optimized).display()
            ));
            self.printer
                .info(format!("report: {}", self.layout.report().display()));
        }
        result
    }

    fn run_stages(&mut self, args: &RunArgs) -> Result<()> {
        self.stage(Step::Doctor, |s| s.doctor())?;
        if let Some(problem) = self.no_training() {
            bail!("{problem}; nothing was built");
        }
        self.pipeline_stage(Step::Build, args)?;
        if self.config.pgo.profile.is_none() {
            self.pipeline_stage(Step::Instrument, args)?;
            self.pipeline_stage(Step::Train, args)?;
        }
        self.pipeline_stage(Step::Optimize, args)?;
        if self.config.bolt.enabled {
            self.pipeline_stage(Step::Bolt, args)?;
        }
        if args.no_compare {
            return Ok(());
        }
        if self
            .config
            .workloads_with_role(Role::Holdout)
            .next()
            .is_none()
        {
            self.printer.warn(format!(
                "no holdout workloads in {}: the speedup is not measured. Add a [[workload]] with \
                 role = \"holdout\" on inputs training never sees.",
                self.config.display_path()
            ));
            return Ok(());
        }
        let compare = run_compare_args(self, args);
        self.cached_stage(Step::Compare, args, |s| s.compare(&compare).map(drop))
    }

    /// One build stage of `run` (not compare), cached as `cached_stage` says. BOLT post-processes
    /// the optimized binaries, or the baseline's when there is no PGO (`[pgo] profile` and
    /// training both absent is refused earlier; `explore` asks for it with `bolt_without_pgo`).
    pub(super) fn pipeline_stage(&mut self, stage: Step, args: &RunArgs) -> Result<()> {
        match stage {
            Step::Build => self.cached_stage(stage, args, |s| s.build_baseline()),
            Step::Instrument => self.cached_stage(stage, args, |s| s.instrument()),
            Step::Train => self.cached_stage(stage, args, |s| {
                s.clear_raw_profiles()?;
                s.train(&crate::cli::TrainArgs::default()).map(drop)
            }),
            Step::Optimize => self.cached_stage(stage, args, |s| s.optimize(&args.optimize)),
            Step::Bolt => self.cached_stage(stage, args, |s| {
                s.bolt(&BoltArgs {
                    without_pgo: args.bolt_without_pgo,
                })
            }),
            other => bail!("{} is not a build stage of `run`", other.name()),
        }
    }

    /// Runs a stage of `run`, or reuses its last result when its inputs have not changed since
    /// it completed and its outputs are intact (shown as "cached").
    fn cached_stage(
        &mut self,
        stage: Step,
        args: &RunArgs,
        body: impl FnOnce(&mut Session) -> Result<()>,
    ) -> Result<()> {
        let name = stage.name();
        let started = Instant::now();
        let forced = args.force || args.from.is_some_and(|from| stage >= from);
        if !forced
            && let Some(fingerprint) = self.fingerprint(stage, args)?
            && self.state.stages.get(name) == Some(&fingerprint)
            && self.outputs_intact(stage)
        {
            self.printer.stage_end(name, "cached", started.elapsed());
            self.report
                .record_cached_stage(name, self.state.runs.get(name));
            return self.report.save(&self.layout.report());
        }
        self.stage(stage, body)?;
        if let Some(fingerprint) = self.fingerprint(stage, args)? {
            self.state.stages.insert(name.to_owned(), fingerprint);
            if let Some(record) = self.report.stage_record(name) {
                self.state.runs.insert(name.to_owned(), record.clone());
            }
            self.state.save(&self.layout)?;
        }
        Ok(())
    }

    /// Records a stage completed by its own command (`pgo-build optimize`, …) as `run` records
    /// its stages, so `run` reuses it while its inputs are unchanged and `gate` knows it is
    /// current.
    pub fn record_completed(&mut self, step: Step, args: &RunArgs) -> Result<()> {
        if let Some(fingerprint) = self.fingerprint(step, args)? {
            self.state
                .stages
                .insert(step.name().to_owned(), fingerprint);
            if let Some(record) = self.report.stage_record(step.name()) {
                self.state
                    .runs
                    .insert(step.name().to_owned(), record.clone());
            }
            self.state.save(&self.layout)?;
        }
        Ok(())
    }

    /// The stages `run` would build again now, each with why: not completed by `run`, inputs
    /// changed since (sources, settings, workloads, profiles), or outputs no longer intact. A
    /// training merged from bundles (`pgo-build merge`) stands for the train stage while it is
    /// the current training.
    pub(super) fn stale_stages(&self) -> Result<Vec<String>> {
        let args = RunArgs::default();
        let mut steps = vec![Step::Build];
        // Training merged from bundles was made against an instrumented build elsewhere.
        if self.config.pgo.profile.is_none() && self.merged_bundles()?.is_none() {
            steps.extend([Step::Instrument, Step::Train]);
        }
        steps.push(Step::Optimize);
        if self.config.bolt.enabled {
            steps.push(Step::Bolt);
        }
        let mut stale = Vec::new();
        for step in steps {
            let name = step.name();
            let now = self.fingerprint(step, &args)?;
            let recorded = self.state.stages.get(name);
            let reason = match (recorded, now) {
                (None, _) => Some("not completed in this target directory"),
                (Some(_), None) => Some("its inputs cannot be read (a build output is missing)"),
                (Some(recorded), Some(now)) if *recorded != now => Some(
                    "its inputs changed since it completed (sources, settings, workloads or \
                     profiles)",
                ),
                _ if !self.outputs_intact(step) => {
                    Some("its outputs changed or are incomplete since it completed")
                }
                _ => None,
            };
            if let Some(reason) = reason {
                stale.push(format!("{name}: {reason}"));
            }
        }
        Ok(stale)
    }

    fn outputs_intact(&self, stage: Step) -> bool {
        let manifest_intact =
            |stage: Stage| StageManifest::load(&self.layout, stage, "").is_ok_and(|m| m.intact());
        match stage {
            Step::Build => manifest_intact(Stage::Baseline),
            Step::Instrument => manifest_intact(Stage::Instrumented),
            // Every train workload's last run completed, and its files are as it left them.
            Step::Train => StageManifest::load(&self.layout, Stage::Instrumented, "").is_ok_and(
                |instrumented| {
                    self.trained_workloads(&instrumented, &self.config.train_runs())
                        .1
                        .is_empty()
                },
            ),
            Step::Optimize => manifest_intact(Stage::Optimized),
            Step::Bolt => manifest_intact(Stage::Bolt),
            Step::Compare => self.report.compare.is_some(),
            // Not a stage of `run`: never reused.
            _ => false,
        }
    }

    /// The fingerprint of a stage's inputs as they are now; `None` when they cannot be known
    /// yet (a build that never ran has no dep-info).
    fn fingerprint(&self, stage: Step, args: &RunArgs) -> Result<Option<String>> {
        let mut print = Fingerprint::new(stage.name());
        print.text("pgo-build", env!("CARGO_PKG_VERSION"));
        let stage_json = |print: &mut Fingerprint, stage: Stage| -> bool {
            let text = std::fs::read_to_string(self.layout.stage_manifest(stage));
            print.text(stage.name(), text.as_deref().unwrap_or("missing"));
            text.is_ok()
        };
        let workloads = |print: &mut Fingerprint, role: Role| {
            for workload in self.config.workloads_with_role(role) {
                print.text("workload", &workload.fingerprint());
            }
        };
        match stage {
            Step::Build | Step::Instrument | Step::Optimize => {
                print.text("settings", &serde_json::to_string(&self.settings)?);
                print.text("bins", &format!("{:?}", self.bins));
                print.text("plain flags", &self.plain_flags().join(" "));
                print.text("continuous", &self.continuous.to_string());
                print.text("startup order", self.config.pgo.startup_order.name());
                for manifest in &self.workspace.manifests {
                    print.file(manifest);
                }
                print.file(&self.workspace.root.join("Cargo.lock"));
                let Some(built) = stage.cargo_build() else {
                    return Ok(None);
                };
                let Ok(manifest) = StageManifest::load(&self.layout, built, "") else {
                    return Ok(None);
                };
                for binary in &manifest.binaries {
                    let Some(sources) = dep_info::dep_info_sources(&binary.source) else {
                        return Ok(None);
                    };
                    for source in sources {
                        print.file(&source);
                    }
                }
                if stage == Step::Optimize {
                    print.text(
                        "allow missing",
                        &args.optimize.allow_missing_profile.join(","),
                    );
                    match &self.config.pgo.profile {
                        Some(profile) => print.file(&self.workspace.root.join(profile)),
                        None => print.tree(&self.layout.raw_profiles_dir()),
                    };
                }
            }
            Step::Train => {
                stage_json(&mut print, Stage::Instrumented);
                workloads(&mut print, Role::Train);
            }
            Step::Bolt => {
                if args.bolt_without_pgo {
                    print.text("without pgo", "true");
                    stage_json(&mut print, Stage::Baseline);
                } else {
                    stage_json(&mut print, Stage::Optimized);
                }
                print.text("bolt", &format!("{:?}", self.config.bolt));
                workloads(&mut print, Role::Train);
            }
            Step::Compare => {
                for stage in Stage::VARIANTS {
                    stage_json(&mut print, stage);
                }
                let compare = run_compare_args(self, args);
                print.text("compare", &format!("{:?}", compare));
                workloads(&mut print, Role::Holdout);
            }
            // Not a stage of `run`: nothing to compare with.
            _ => return Ok(None),
        }
        Ok(Some(print.finish()))
    }
}

/// The comparison `run` ends with: every staged variant on the holdout workloads.
fn run_compare_args(session: &Session, args: &RunArgs) -> CompareArgs {
    CompareArgs {
        variants: std::iter::once(Stage::Baseline)
            .chain(std::iter::once(Stage::Optimized))
            .chain(session.config.bolt.enabled.then_some(Stage::Bolt))
            .map(|stage| stage.name().to_owned())
            .collect(),
        rounds: args.compare_rounds,
        workloads: session.config.workload_names(Role::Holdout),
        seed: 1,
        ..CompareArgs::default()
    }
}
