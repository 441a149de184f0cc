//! What every step works with, passed explicitly: the [`Context`] a command loaded once
//! (workspace, configuration, toolchain, target, selected binaries, build settings, layout,
//! printer), never changed while it runs, and the [`Session`], what the command changes as it runs
//! (the report, the step records, the step running now) under the target directory's lock.
//!
//! A step is a function `step(cx: &Context, session: &mut Session, args) -> Result<T>` run inside
//! [`timed_step`], which times it, samples its peak memory, prints its greppable start and end
//! lines and records it in the report. What one step gives the next is its return value
//! (`train` returns `Trained`, which `run` hands to `optimize`).

use std::cell::OnceCell;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context as _, Result, bail};

use super::state::State;
use crate::cargo::manifest::StageManifest;
use crate::cargo::rustflags::{self, Sources, UserFlags};
use crate::cargo::settings::BuildSettings;
use crate::cargo::settings::{BUILD_ID_FLAG, NO_PREINLINE_FLAG, preinline_in};
use crate::cargo::workspace::{BinTarget, Selection, Workspace};
use crate::config::cargo_config::{self, CargoConfig};
use crate::config::{BuildVariant, CBuild, Config};
use crate::exec;
use crate::layout::Layout;
use crate::layout::lock::TargetDirLock;
use crate::layout::step::Step;
use crate::measure::memory::PeakSampler;
use crate::pipeline::requests::GlobalOptions;
use crate::profiles::ExportedProfile;
use crate::report::{CompareRun, Report, StepResult, invocation, now_unix};
use crate::toolchain::cross_language::{self, CSettings};
use crate::toolchain::targets::{self, Platform};
use crate::toolchain::{self, LlvmTool, Rustc, TargetPrint};
use crate::util::command::Cmd;
use crate::util::printer::Printer;

/// What a command loaded once for one target. Never changed while the command runs; a build
/// with other settings (one of `explore`'s) is another context ([`Context::with_build`]).
#[derive(Clone)]
pub struct Context {
    pub printer: Printer,
    pub workspace: Workspace,
    pub config: Config,
    pub layout: Layout,
    pub rustc: Rustc,
    /// `--target`/`[build] targets`, when given (`None`: the host, in `target/pgo-build/`).
    pub target: Option<String>,
    /// The target this context builds for, and how its binaries run here.
    pub platform: Platform,
    pub bins: Vec<BinTarget>,
    pub settings: BuildSettings,
    pub user_flags: UserFlags,
    pub jobs: Option<u32>,
    /// Cargo's config files.
    pub cargo_config: CargoConfig,
    /// `[profile]` of the workspace manifest.
    pub manifest_profiles: Option<toml::Value>,
    /// `--strict`: every warning fails the step.
    pub strict: bool,
    /// Located on first use: commands that never read a profile do not need it.
    profdata: OnceCell<LlvmTool>,
}

/// What one command changes as it runs, held under the lock of its target directory.
pub struct Session {
    pub report: Report,
    /// Fingerprints of completed steps (`state.json`).
    pub state: State,
    /// The step running now (inside [`timed_step`]), and whether it passed its commit point.
    running: Option<RunningStep>,
    /// Held until the command ends.
    _lock: TargetDirLock,
}

struct RunningStep {
    step: Step,
    outputs_begun: bool,
}

/// What every target's context shares: the workspace, `pgo-build.toml`, the toolchain and
/// cargo's configuration, loaded once per command.
pub struct Loaded {
    workspace: Workspace,
    config: Config,
    rustc: Rustc,
    cargo_config: CargoConfig,
    manifest_profiles: Option<toml::Value>,
}

impl Loaded {
    pub fn load(args: &GlobalOptions, printer: &Printer) -> Result<Loaded> {
        let workspace = Workspace::load(args.manifest_path.as_deref(), printer)?;
        let mut config = Config::load(args.config.as_deref(), &workspace.root)?;
        args.amend(&mut config);
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
    pub fn targets(&self, args: &GlobalOptions) -> Vec<Option<String>> {
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

impl Context {
    /// The context of one target (`None`: the host, in `target/pgo-build/`).
    pub fn new(
        args: &GlobalOptions,
        printer: &Printer,
        loaded: &Loaded,
        target: Option<&str>,
    ) -> Result<Context> {
        let printer = printer.with_fresh_memory();
        let Loaded {
            workspace,
            config,
            rustc,
            cargo_config,
            manifest_profiles,
        } = loaded;
        let mut config = config.clone();
        let triple = target.unwrap_or(&rustc.host).to_owned();
        let printed = target_print(rustc, &triple, &workspace.root, &printer)?;
        let (libdir, target_cfg) = printed.split();
        let target_cfg = rustflags::target_cfg(target_cfg);
        let user_flags = UserFlags::resolve(&Sources {
            env: &|key| std::env::var(key).ok(),
            config: cargo_config,
            target: &triple,
            target_cfg: &target_cfg,
        })?;
        let platform = Platform::probe(&targets::Probe {
            triple: &triple,
            explicit: target.is_some(),
            cfg: &target_cfg,
            libdir: PathBuf::from(libdir.trim()),
            config: cargo_config,
            env: &|key| std::env::var(key).ok(),
            linker: crate::wrappers::linker::real_linker(&user_flags.flags, &triple, cargo_config)?,
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
                    cargo_config,
                ),
                cargo_config: Vec::new(),
                c: None,
                stable_names: config.pgo.stable_names(),
                preinline: config.pgo.preinline(),
            },
            &user_flags,
            &config.variant(),
            c_settings(
                config.variant().c,
                &triple,
                rustc,
                &config.pgo.cross_language_exclude,
                &printer,
            )?,
        );
        let layout = match target {
            Some(triple) => Layout::for_target(&workspace.target_dir, triple),
            None => Layout::new(&workspace.target_dir),
        };
        Ok(Context {
            printer,
            workspace: workspace.clone(),
            config,
            layout,
            rustc: rustc.clone(),
            target: target.map(str::to_owned),
            platform,
            bins,
            settings,
            user_flags,
            jobs: args.jobs,
            cargo_config: cargo_config.clone(),
            manifest_profiles: manifest_profiles.clone(),
            strict: args.strict,
            profdata: OnceCell::new(),
        })
    }

    /// A context that builds with other settings in a layout of its own (one of `explore`'s
    /// builds): the same workspace, toolchain, binaries, workloads and printer, with `build`
    /// in place of what `[build]` adds, `bolt` in place of `[bolt] enabled`, and `profile` in
    /// place of `[pgo] profile`.
    pub fn with_build(
        &self,
        layout: Layout,
        build: &BuildVariant,
        bolt: bool,
        profile: Option<ExportedProfile>,
    ) -> Result<Context> {
        let mut config = self.config.clone();
        config.build.profile_overrides = build.profile_overrides.clone();
        config.build.rustflags = build.rustflags.clone();
        config.bolt.enabled = bolt;
        config.pgo.profile = profile.map(ExportedProfile::into_path);
        let base = BuildSettings {
            common_rustflags: Vec::new(),
            cargo_config: Vec::new(),
            profile_settings: cargo_config::profile_settings(
                self.manifest_profiles.as_ref(),
                &self.cargo_config,
            ),
            ..self.settings.clone()
        };
        let c = c_settings(
            build.c,
            &self.settings.target,
            &self.rustc,
            &self.config.pgo.cross_language_exclude,
            &self.printer,
        )?;
        let settings = variant_settings(base, &self.user_flags, build, c);
        Ok(Context {
            config,
            layout,
            settings,
            profdata: OnceCell::new(),
            ..self.clone()
        })
    }

    /// This context without `[pgo] max_size_growth`: `explore` measures and flags a variant
    /// over it rather than leaving it unbuilt.
    pub fn without_size_limit(&self) -> Context {
        let mut config = self.config.clone();
        config.pgo.max_size_growth = None;
        Context {
            config,
            ..self.clone()
        }
    }

    /// Starts reading this target's dependency graph while the caller does other work (a
    /// committed profile's checks): the build or the prediction that needs it then waits less.
    pub fn prefetch_dependency_graph(&self) {
        self.workspace
            .prefetch_full_metadata(&self.settings.target, &self.printer);
    }

    /// The llvm-profdata matching rustc's LLVM, or the error saying how to get one.
    pub fn profdata(&self) -> Result<&LlvmTool> {
        if let Some(tool) = self.profdata.get() {
            return Ok(tool);
        }
        let tool = toolchain::find_llvm_tool(toolchain::LLVM_PROFDATA, &self.rustc, &self.printer)
            .require(&self.rustc)?;
        Ok(self.profdata.get_or_init(|| tool))
    }

    /// The llvm-profdata `doctor` located: later steps need not look for it again.
    pub fn found_profdata(&self, tool: LlvmTool) {
        let _ = self.profdata.set(tool);
    }

    /// A warning, or with `--strict` an error. A warning given already in this command
    /// (`run`'s optimize repeating train's) is not printed again.
    pub fn caution(&self, message: String) -> Result<()> {
        if self.strict {
            bail!("{message}\n(--strict turns this warning into an error)");
        }
        self.printer.warn_once(message);
        Ok(())
    }

    /// What to say when the configuration has no train workload.
    pub fn no_train_workloads(&self) -> String {
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
    pub fn forget_merged_bundles(&self) -> Result<()> {
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
}

impl Session {
    /// Takes the lock of `cx`'s target directory, stops what a killed pgo-build left running
    /// there, and loads its report and step records.
    pub fn start(cx: &Context) -> Result<Session> {
        let lock = TargetDirLock::acquire(&cx.layout)?;
        for stopped in exec::stop_leftovers(&cx.layout.running_dir())? {
            cx.printer.warn(stopped);
        }
        let (mut report, problem) = Report::load_or_new(&cx.layout.report(), &cx.workspace.root);
        if let Some(problem) = problem {
            cx.printer
                .warn(format!("{problem}: this command starts a new report"));
        }
        report.target = cx.target.clone();
        let (state, problem) = State::load(&cx.layout);
        if let Some(problem) = problem {
            cx.printer.warn(problem);
        }
        Ok(Session {
            report,
            state,
            running: None,
            _lock: lock,
        })
    }

    /// The commit point of the running step: every precondition (tools, configuration,
    /// inputs, profile checks) holds, and its outputs are about to change. Until now a
    /// failure left everything as it was; from now on the step's record of completion no
    /// longer holds (`run` records it again once it completes), and the stages it rewrites
    /// count as attempted, not built, until it has staged them. Only the first call acts.
    pub fn begin_outputs(&mut self, cx: &Context) -> Result<()> {
        let Some(running) = &mut self.running else {
            return Ok(());
        };
        if running.outputs_begun {
            return Ok(());
        }
        running.outputs_begun = true;
        let step = running.step;
        self.forget_step(cx, step)?;
        for stage in step.rewrites() {
            StageManifest::begin(&cx.layout, *stage, step.name())?;
        }
        // A local training or a new instrumented build supersedes profiles merged from other
        // machines' bundles.
        if matches!(step, Step::Train | Step::Instrument) {
            cx.forget_merged_bundles()?;
        }
        Ok(())
    }

    /// Drops a step's record (its outputs are about to change).
    pub fn forget_step(&mut self, cx: &Context, step: Step) -> Result<()> {
        if self.state.steps.remove(&step).is_some() {
            self.state.save(&cx.layout)?;
        }
        Ok(())
    }
}

/// Runs one step in a timer section: start and end lines, a record in the report.
pub fn timed_step<T>(
    cx: &Context,
    session: &mut Session,
    step: Step,
    body: impl FnOnce(&Context, &mut Session) -> Result<T>,
) -> Result<T> {
    let name = step.name();
    // What the step will replace in the report goes now (the step fills it again), but
    // only in memory: a step that fails before its commit point (`begin_outputs`) gets
    // the report back as it was, so a refusal loses nothing.
    let report_before = session.report.clone();
    session.report.forget_outputs_of(step);
    for stage in step.rewrites() {
        for per_stage in session.report.binaries.values_mut() {
            per_stage.remove(stage);
        }
    }
    let outer = session.running.replace(RunningStep {
        step,
        outputs_begun: false,
    });
    cx.printer.step_start(name);
    let started = Instant::now();
    let started_unix = now_unix();
    let memory = PeakSampler::start();
    let result = body(cx, session);
    let peak = memory.stop();
    let running = std::mem::replace(&mut session.running, outer).expect("set above");
    let result = match result {
        Err(err) if !running.outputs_begun => {
            session.report = report_before;
            Err(err)
        }
        // A step that changed what it produces without a commit point: its record of
        // completion no longer holds (`run` records it again).
        Ok(value) if !running.outputs_begun => session.forget_step(cx, step).map(|()| value),
        other => other,
    };
    let outcome = if result.is_ok() {
        StepResult::Ok
    } else {
        StepResult::Failed
    };
    if let (Step::Compare, Err(err)) = (step, &result) {
        session
            .report
            .record_compare_run(CompareRun::failed(err, invocation(), started_unix));
    }
    let unusual = outcome != StepResult::Ok;
    cx.printer
        .step_end(name, outcome.name(), unusual, started.elapsed());
    session
        .report
        .record_step(step, outcome, started.elapsed(), Some(peak));
    if let Err(err) = session.report.save(&cx.layout.report()) {
        cx.printer
            .warn(format!("could not write the report: {err:#}"));
    }
    result
}

/// `base` (the workspace's own settings, no rustflags yet) with the user's rustflags and what
/// `variant` adds: its rustflags after the user's, its cargo profile overrides as `--config`
/// values, which `profile_settings` names too (so `optimize`'s settings check sees them).
pub fn variant_settings(
    base: BuildSettings,
    user_flags: &UserFlags,
    variant: &BuildVariant,
    c: Option<CSettings>,
) -> BuildSettings {
    let mut common_rustflags = user_flags.flags.clone();
    common_rustflags.extend(variant.rustflags.iter().cloned());
    if variant.c == CBuild::PgoXlto {
        common_rustflags.extend(cross_language::XLTO_RUSTFLAGS.map(str::to_owned));
    }
    common_rustflags.push(BUILD_ID_FLAG.to_owned());
    if !base.preinline && preinline_in(&common_rustflags) {
        common_rustflags.push(NO_PREINLINE_FLAG.to_owned());
    }
    // Names that survive rustc upgrades (`wrappers::rustc::stable_names`), unless the user
    // chose a mangling.
    if base.stable_names
        && !common_rustflags
            .iter()
            .any(|flag| flag.contains("symbol-mangling-version"))
    {
        common_rustflags.push(crate::wrappers::rustc::stable_names::V0_MANGLING.to_owned());
    }
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

/// The C compiler a build's C mode needs (none for the user's own), located once per context.
pub(super) fn c_settings(
    mode: CBuild,
    target: &str,
    rustc: &Rustc,
    exclude: &[String],
    printer: &Printer,
) -> Result<Option<CSettings>> {
    let located = cross_language::locate(
        mode,
        target,
        &rustc.host,
        rustc.llvm_major,
        &|key| std::env::var(key).ok(),
        printer,
    )?;
    Ok(located.map(|c| CSettings {
        exclude: exclude.to_vec(),
        ..c
    }))
}

/// rustc's `--print target-libdir --print cfg` for `triple`: the host's was asked beside
/// rustc's version; another target's needs one rustc more.
fn target_print(
    rustc: &Rustc,
    triple: &str,
    root: &std::path::Path,
    printer: &Printer,
) -> Result<TargetPrint> {
    if triple == rustc.host {
        return Ok(rustc.host_target.clone());
    }
    let text = Cmd::new(&rustc.program)
        .args([
            "--print",
            "target-libdir",
            "--print",
            "cfg",
            "--target",
            triple,
        ])
        .cwd(root)
        .stdout_checked(printer)
        .with_context(|| {
            format!(
                "rustc does not know the target {triple}; `rustc --print target-list` lists \
                 the ones it does"
            )
        })?;
    Ok(TargetPrint(text))
}
