//! The pipeline: the shared context ([`Session`]) and one module per stage or command family.
//!
//! A stage is a method of [`Session`] defined in its own module and run inside
//! [`Session::stage`], which times it, samples its peak memory, prints its greppable start and
//! end lines and records it in the report. Stages communicate only through files under
//! `target/pgo-build/` (see `layout.rs`), so each command can run on its own and `run` is all
//! of them in order.
//!
//! - `doctor`: toolchain and configuration check.
//! - `build`: the cargo builds of every stage (baseline, instrumented, optimized) and staging.
//! - `train`: training workloads against instrumented binaries, and the profile accounting.
//! - `optimize`: merging the profile (or using a committed one) and the PGO build.
//! - `bolt`: post-link optimization of the optimized (or baseline) binaries.
//! - `compare`: paired A/B rounds of staged variants.
//! - `profile`: `profile show`, `profile overlap`, `export`, committed-profile checks.
//! - `shard`: training across machines: `pack`, `unpack`, bundles, `merge`.
//! - `run`: the whole pipeline, with stage fingerprints and caching.
//! - `offline`: `report` and `clean`, which need neither toolchain nor session.
//!
//! Arrows point down only: `run` → the stages → `train`/`build` → this module → the modules
//! outside `pipeline/` (records in `report`, plain data below it).

mod accounting;
mod bolt;
mod build;
mod bundles;
mod cargo_stage;
mod committed;
mod compare;
mod doctor;
mod explore;
mod gate;
mod init;
mod offline;
mod optimize;
mod profile;
mod release;
mod run;
mod rustc_budget;
mod shard;
pub mod state;
mod train;
mod workloads;

use std::cell::OnceCell;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::cargo::build::{BUILD_ID_FLAG, BuildSettings, StageManifest};
use crate::cargo::rustflags::{self, Sources, UserFlags};
use crate::cargo::workspace::{BinTarget, Selection, Workspace};
use crate::cli::GlobalArgs;
use crate::config::Config;
use crate::config::cargo_config::{self, CargoConfig};
use crate::exec;
use crate::layout::Layout;
use crate::measure::memory::PeakSampler;
use crate::pipeline::state::{RunLock, State};
use crate::profiles::Accounting;
use crate::report::Report;
use crate::toolchain::targets::{self, Platform};
use crate::toolchain::{self, LlvmTool, Rustc};
use crate::util::printer::Printer;

use crate::layout::step::Step;
pub use offline::{clean, init, show_report};

pub struct Session {
    pub printer: Printer,
    pub workspace: Workspace,
    pub config: Config,
    pub layout: Layout,
    pub rustc: Rustc,
    /// The target this session builds for, and how its binaries run here.
    pub platform: Platform,
    pub bins: Vec<BinTarget>,
    pub settings: BuildSettings,
    pub user_flags: UserFlags,
    pub jobs: Option<u32>,
    /// Cargo's config files.
    cargo_config: CargoConfig,
    /// `[profile]` of the workspace manifest.
    manifest_profiles: Option<toml::Value>,
    /// `--strict`: every warning fails the stage.
    pub strict: bool,
    /// Instrument in continuous mode (`--continuous` or `[pgo] continuous`).
    pub continuous: bool,
    pub report: Report,
    /// Fingerprints of completed stages.
    state: State,
    profdata: OnceCell<LlvmTool>,
    /// The last accounting, by a fingerprint of the raw profiles it read: `run`'s optimize
    /// stage reuses train's instead of checking every file again.
    accounting_cache: std::cell::RefCell<Option<(String, Accounting)>>,
    /// Rendered compiler warnings already shown in this session: each stage's build would
    /// print the same ones again.
    shown_warnings: std::collections::BTreeSet<String>,
    /// Cautions already printed in this session.
    shown_cautions: std::cell::RefCell<std::collections::BTreeSet<String>>,
    /// The per-binary training table last printed: `optimize` after `train` in one `run`
    /// would print it again.
    shown_accounting: std::cell::RefCell<Option<String>>,
    /// The step running now (inside `Session::stage`), and whether it passed its commit point.
    running: Option<RunningStep>,
    /// Held until the session ends.
    _lock: RunLock,
}

struct RunningStep {
    step: Step,
    outputs_begun: bool,
}

/// What every target's session shares: the workspace, `pgo-build.toml`, the toolchain and
/// cargo's configuration, loaded once per command.
pub struct Loaded {
    workspace: Workspace,
    config: Config,
    rustc: Rustc,
    cargo_config: CargoConfig,
    manifest_profiles: Option<toml::Value>,
}

impl Loaded {
    pub fn load(args: &GlobalArgs, printer: &Printer) -> Result<Loaded> {
        let workspace = Workspace::load(args.manifest_path.as_deref(), printer)?;
        let mut config = Config::load(args.config.as_deref(), &workspace.root)?;
        if args.cross_language && config.pgo.cross_language == crate::config::CBuild::User {
            config.pgo.cross_language = crate::config::CBuild::Pgo;
        }
        let rustc = Rustc::detect(&workspace.root, printer)?;
        let cargo_home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")));
        // Cargo reads config files from its working directory up; pgo-build runs cargo in the
        // workspace root, so that is where they are looked for.
        let cargo_config = CargoConfig::discover(&workspace.root, cargo_home.as_deref())?;
        let manifest_profiles = cargo_config::manifest_profiles(&workspace.root)?;
        Ok(Loaded {
            workspace,
            config,
            rustc,
            cargo_config,
            manifest_profiles,
        })
    }

    /// rustc's host triple.
    pub fn host(&self) -> &str {
        &self.rustc.host
    }

    /// The targets a command works on: `--target`s, else `[build] targets`, else the host
    /// (`None`: the layout of `target/pgo-build/` itself).
    pub fn targets(&self, args: &GlobalArgs) -> Vec<Option<String>> {
        let explicit = if args.targets.is_empty() {
            &self.config.build.targets
        } else {
            &args.targets
        };
        if explicit.is_empty() {
            return vec![None];
        }
        let mut targets: Vec<Option<String>> = Vec::new();
        for triple in explicit {
            if !targets.iter().flatten().any(|t| t == triple) {
                targets.push(Some(triple.clone()));
            }
        }
        targets
    }
}

impl Session {
    /// The session of one target (`None`: the host, in `target/pgo-build/`).
    pub fn new(
        args: &GlobalArgs,
        printer: Printer,
        loaded: &Loaded,
        target: Option<&str>,
    ) -> Result<Session> {
        let Loaded {
            workspace,
            config,
            rustc,
            cargo_config,
            manifest_profiles,
        } = loaded;
        let (workspace, mut config, rustc) = (workspace.clone(), config.clone(), rustc.clone());
        let (cargo_config, manifest_profiles) = (cargo_config.clone(), manifest_profiles.clone());
        let triple = target.unwrap_or(&rustc.host).to_owned();
        let target_cfg = crate::util::command::Cmd::new(&rustc.program)
            .args(["--print", "cfg", "--target", &triple])
            .cwd(&workspace.root)
            .stdout_checked(&printer)
            .with_context(|| {
                format!(
                    "rustc does not know the target {triple}; `rustc --print target-list` \
                     lists the ones it does"
                )
            })?;
        let target_cfg = rustflags::target_cfg(&target_cfg);
        let user_flags = UserFlags::resolve(&Sources {
            env: &|key| std::env::var(key).ok(),
            config: &cargo_config,
            target: &triple,
            target_cfg: &target_cfg,
        })?;
        let libdir = crate::util::command::Cmd::new(&rustc.program)
            .args(["--print", "target-libdir", "--target", &triple])
            .cwd(&workspace.root)
            .stdout_checked(&printer)?;
        let platform = Platform::probe(&targets::Probe {
            triple: &triple,
            explicit: target.is_some(),
            cfg: &target_cfg,
            libdir: PathBuf::from(libdir.trim()),
            config: &cargo_config,
            env: &|key| std::env::var(key).ok(),
            linker: crate::wrappers::linker::real_linker(
                &user_flags.flags,
                &triple,
                &cargo_config,
            )?,
        })?;
        // A committed profile per target: `{target}` in `[pgo] profile` is the triple.
        if let Some(profile) = &mut config.pgo.profile {
            *profile = PathBuf::from(profile.to_string_lossy().replace("{target}", &triple));
        }
        let bins = workspace.select(&Selection {
            packages: &args.packages,
            cli_bins: &args.bins,
            config_bins: config.build.bins.as_deref(),
        })?;
        let features = if args.features.is_empty() {
            config.build.features.clone()
        } else {
            args.features.clone()
        };
        let profile = args
            .profile
            .clone()
            .or_else(|| config.build.profile.clone())
            .unwrap_or_else(|| "release".to_owned());
        let settings = variant_settings(
            BuildSettings {
                profile,
                features,
                target: triple.clone(),
                rustc: rustc.version_line.clone(),
                common_rustflags: Vec::new(),
                profile_settings: cargo_config::profile_settings(
                    manifest_profiles.as_ref(),
                    &cargo_config,
                ),
                cargo_config: Vec::new(),
                c: None,
            },
            &user_flags,
            &config.variant(),
            c_settings(config.variant().c, &triple, &rustc, &printer)?,
        );
        let layout = match target {
            Some(triple) => Layout::for_target(&workspace.target_dir, triple),
            None => Layout::new(&workspace.target_dir),
        };
        let lock = RunLock::acquire(&layout)?;
        for stopped in exec::stop_leftovers(&layout.running_dir())? {
            printer.warn(stopped);
        }
        let (mut report, problem) = Report::load_or_new(&layout.report(), &workspace.root);
        if let Some(problem) = problem {
            printer.warn(format!("{problem}: this command starts a new report"));
        }
        report.target = target.map(str::to_owned);
        let (state, problem) = State::load(&layout);
        if let Some(problem) = problem {
            printer.warn(problem);
        }
        let continuous = args.continuous || config.pgo.continuous;
        Ok(Session {
            printer,
            workspace,
            config,
            layout,
            rustc,
            platform,
            bins,
            settings,
            user_flags,
            jobs: args.jobs,
            cargo_config,
            manifest_profiles,
            strict: args.strict,
            continuous,
            report,
            state,
            profdata: OnceCell::new(),
            accounting_cache: Default::default(),
            shown_warnings: Default::default(),
            shown_cautions: Default::default(),
            shown_accounting: Default::default(),
            running: None,
            _lock: lock,
        })
    }

    /// A session that builds with other settings in a layout of its own (one of `explore`'s
    /// builds): the same workspace, toolchain, binaries and workloads, with `build` in place of
    /// what `[build]` adds, `bolt` in place of `[bolt] enabled`, and `profile` in place of
    /// `[pgo] profile`.
    pub(super) fn with_build(
        &self,
        layout: Layout,
        build: &crate::config::BuildVariant,
        bolt: bool,
        profile: Option<PathBuf>,
    ) -> Result<Session> {
        let mut config = self.config.clone();
        config.build.profile_overrides = build.profile_overrides.clone();
        config.build.rustflags = build.rustflags.clone();
        config.bolt.enabled = bolt;
        config.pgo.profile = profile;
        let base = BuildSettings {
            common_rustflags: Vec::new(),
            cargo_config: Vec::new(),
            profile_settings: cargo_config::profile_settings(
                self.manifest_profiles.as_ref(),
                &self.cargo_config,
            ),
            ..self.settings.clone()
        };
        let c = c_settings(build.c, &self.settings.target, &self.rustc, &self.printer)?;
        let settings = variant_settings(base, &self.user_flags, build, c);
        let lock = RunLock::acquire(&layout)?;
        for stopped in exec::stop_leftovers(&layout.running_dir())? {
            self.printer.warn(stopped);
        }
        Ok(Session {
            printer: self.printer,
            workspace: self.workspace.clone(),
            config,
            report: Report {
                target: self.report.target.clone(),
                ..Report::load_or_new(&layout.report(), &self.workspace.root).0
            },
            state: State::load(&layout).0,
            layout,
            rustc: self.rustc.clone(),
            platform: self.platform.clone(),
            bins: self.bins.clone(),
            settings,
            user_flags: self.user_flags.clone(),
            jobs: self.jobs,
            cargo_config: self.cargo_config.clone(),
            manifest_profiles: self.manifest_profiles.clone(),
            strict: self.strict,
            continuous: self.continuous,
            profdata: OnceCell::new(),
            accounting_cache: Default::default(),
            shown_warnings: self.shown_warnings.clone(),
            shown_cautions: self.shown_cautions.clone(),
            shown_accounting: Default::default(),
            running: None,
            _lock: lock,
        })
    }

    /// Runs one stage in a timer section: start and end lines, a record in the report.
    pub fn stage<T>(
        &mut self,
        step: Step,
        body: impl FnOnce(&mut Session) -> Result<T>,
    ) -> Result<T> {
        let name = step.name();
        // What the step will replace in the report goes now (the step fills it again), but
        // only in memory: a step that fails before its commit point (`begin_outputs`) gets
        // the report back as it was, so a refusal loses nothing.
        let report_before = self.report.clone();
        self.report.forget_outputs_of(name);
        for stage in step.rewrites() {
            for per_stage in self.report.binaries.values_mut() {
                per_stage.remove(stage.name());
            }
        }
        let outer = self.running.replace(RunningStep {
            step,
            outputs_begun: false,
        });
        self.printer.stage_start(name);
        let started = Instant::now();
        let started_unix = crate::report::now_unix();
        let memory = PeakSampler::start();
        let result = body(self);
        let peak = memory.stop();
        let running = std::mem::replace(&mut self.running, outer).expect("set above");
        let result = match result {
            Err(err) if !running.outputs_begun => {
                self.report = report_before;
                Err(err)
            }
            // A step that changed what it produces without a commit point: its record of
            // completion no longer holds (`run` records it again).
            Ok(value) if !running.outputs_begun => self.forget_stage(step).map(|()| value),
            other => other,
        };
        let outcome = if result.is_ok() { "ok" } else { "failed" };
        if let (Step::Compare, Err(err)) = (step, &result) {
            self.report
                .record_compare_run(crate::report::CompareRun::failed(
                    err,
                    crate::report::invocation(),
                    started_unix,
                ));
        }
        self.printer.stage_end(name, outcome, started.elapsed());
        self.report
            .record_stage(name, outcome, started.elapsed(), Some(peak));
        if let Err(err) = self.report.save(&self.layout.report()) {
            self.printer
                .warn(format!("could not write the report: {err:#}"));
        }
        result
    }

    /// The commit point of the running step: every precondition (tools, configuration,
    /// inputs, profile checks) holds, and its outputs are about to change. Until now a
    /// failure left everything as it was; from now on the step's record of completion no
    /// longer holds (`run` records it again once it completes), and the stages it rewrites
    /// count as attempted, not built, until it has staged them. Only the first call acts.
    pub(crate) fn begin_outputs(&mut self) -> Result<()> {
        let Some(running) = &mut self.running else {
            return Ok(());
        };
        if running.outputs_begun {
            return Ok(());
        }
        running.outputs_begun = true;
        let step = running.step;
        self.forget_stage(step)?;
        for stage in step.rewrites() {
            StageManifest::begin(&self.layout, *stage, step.name())?;
        }
        // A local training or a new instrumented build supersedes profiles merged from other
        // machines' bundles.
        if matches!(step, Step::Train | Step::Instrument) {
            self.forget_merged_bundles()?;
        }
        Ok(())
    }

    /// The llvm-profdata matching rustc's LLVM, or the error saying how to get one.
    pub(crate) fn profdata(&self) -> Result<&LlvmTool> {
        if let Some(tool) = self.profdata.get() {
            return Ok(tool);
        }
        let tool = toolchain::find_llvm_tool(toolchain::LLVM_PROFDATA, &self.rustc, &self.printer)
            .require(&self.rustc)?;
        Ok(self.profdata.get_or_init(|| tool))
    }

    /// A warning, or with `--strict` an error. A warning this session gave already (`run`'s
    /// optimize repeating train's) is not printed again.
    pub(crate) fn caution(&self, message: String) -> Result<()> {
        if self.strict {
            bail!("{message}\n(--strict turns this warning into an error)");
        }
        if self.shown_cautions.borrow_mut().insert(message.clone()) {
            self.printer.warn(message);
        }
        Ok(())
    }

    /// What to say when the configuration has no train workload.
    fn no_train_workloads(&self) -> String {
        format!(
            "there are no training workloads in {}: `train`, `optimize` and `run` need a \
             [[workload]] with role = \"train\" (or a committed profile, [pgo] profile){}",
            self.config.display_path(),
            if self.config.path.is_none() {
                "; `pgo-build init` writes a commented pgo-build.toml to start from"
            } else {
                ""
            }
        )
    }

    /// A local training or a new instrumented build supersedes merged bundles.
    pub(crate) fn forget_merged_bundles(&mut self) -> Result<()> {
        let path = self.layout.merged_bundles();
        if path.exists() {
            self.printer.detail(format!(
                "removing {}: the profile merged from bundles is superseded",
                path.display()
            ));
            std::fs::remove_file(&path)
                .with_context(|| format!("could not remove {}", path.display()))?;
        }
        Ok(())
    }

    /// Drops a stage's record (its outputs are about to change).
    pub fn forget_stage(&mut self, step: Step) -> Result<()> {
        if self.state.stages.remove(step.name()).is_some() {
            self.state.save(&self.layout)?;
        }
        Ok(())
    }
}

/// `base` (the workspace's own settings, no rustflags yet) with the user's rustflags and what
/// `variant` adds: its rustflags after the user's, its cargo profile overrides as `--config`
/// values, which `profile_settings` names too (so `optimize`'s settings check sees them).
pub(crate) fn variant_settings(
    base: BuildSettings,
    user_flags: &UserFlags,
    variant: &crate::config::BuildVariant,
    c: Option<crate::toolchain::cross_language::CSettings>,
) -> BuildSettings {
    let mut common_rustflags = user_flags.flags.clone();
    common_rustflags.extend(variant.rustflags.iter().cloned());
    if variant.c == crate::config::CBuild::PgoXlto {
        common_rustflags
            .extend(crate::toolchain::cross_language::XLTO_RUSTFLAGS.map(str::to_owned));
    }
    common_rustflags.push(BUILD_ID_FLAG.to_owned());
    let cargo_config = variant.cargo_config_args(&base.profile);
    let mut profile_settings = base.profile_settings;
    if !cargo_config.is_empty() {
        if !profile_settings.is_empty() {
            profile_settings.push_str("; ");
        }
        profile_settings.push_str(&format!("pgo-build --config: {}", cargo_config.join(" ")));
    }
    BuildSettings {
        common_rustflags,
        cargo_config,
        profile_settings,
        c,
        ..base
    }
}

/// The C compiler a build's C mode needs (none for the user's own), located once per session.
fn c_settings(
    mode: crate::toolchain::cross_language::CBuild,
    target: &str,
    rustc: &Rustc,
    printer: &Printer,
) -> Result<Option<crate::toolchain::cross_language::CSettings>> {
    crate::toolchain::cross_language::locate(
        mode,
        target,
        &rustc.host,
        rustc.llvm_major,
        &|key| std::env::var(key).ok(),
        printer,
    )
}
