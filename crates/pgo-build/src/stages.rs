//! The pipeline's stages - doctor, build, instrument, train, optimize (bolt and compare live in
//! their own modules) - each a method of [`Session`] run inside [`Session::stage`], which times
//! it, samples its peak memory, prints its greppable start and end lines and records it in the
//! report; and `run`, which reuses the stages whose inputs have not changed
//! ([`Session::cached_stage`]).
//!
//! Invariants kept here:
//! - instrumented and optimized builds differ only in the profile flags (checked: `optimize`
//!   refuses when the settings recorded by `instrument` differ from the current ones);
//! - a binary without profile data is never built with `-Cprofile-use`;
//! - a profile that rustc cannot use fails the optimize stage instead of yielding a build
//!   without PGO.

use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};

use crate::cargo_build::{
    self, BuildOutput, BuildRequest, BuildSettings, CONTINUOUS_FLAGS, LinkerSetup, StageInput,
    StageManifest,
};
use crate::cargo_config::CargoConfig;
use crate::cli::{
    BoltArgs, CompareArgs, GlobalArgs, OptimizeArgs, PipelineStage, ReportArgs, RunArgs,
};
use crate::config::{Config, LinkJobs, OnCorrupt, Role, Workload};
use crate::insight;
use crate::layout::{Layout, Stage};
use crate::linker::{self, LinkSummary};
use crate::memory::PeakSampler;
use crate::pgo_diagnostics::{self, Summary};
use crate::printer::Printer;
use crate::profile_commands;
use crate::profiles::{self, Accounting};
use crate::render;
use crate::report::{BinaryRecord, RejectedProfile, Report, WorkloadRecord, human_bytes};
use crate::rustflags::{self, Sources, UserFlags};
use crate::start_marker;
use crate::state::{self, Fingerprint, RunLock, State};
use crate::toolchain::{self, LlvmTool, Rustc};
use crate::training;
use crate::workspace::{BinTarget, Selection, Workspace};

/// Added to every stage (so baseline and optimized stay comparable): `%b` in the profile file
/// pattern needs a build id, which not every linker adds by default.
const BUILD_ID_FLAG: &str = "-Clink-arg=-Wl,--build-id";
/// Assumed peak memory of one link before any link was measured.
const DEFAULT_LINK_ESTIMATE: u64 = 2 << 30;
/// Added to the builds BOLT post-processes (see [`Session::plain_flags`]).
pub const BOLT_INPUT_FLAGS: [&str; 3] = [
    "-Clink-arg=-Wl,--emit-relocs",
    "--cfg",
    "pgo_build_bolt_input",
];

pub struct Session {
    pub printer: Printer,
    pub workspace: Workspace,
    pub config: Config,
    pub layout: Layout,
    pub rustc: Rustc,
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
    /// Held until the session ends.
    _lock: RunLock,
}

impl Session {
    pub fn new(args: &GlobalArgs, printer: Printer) -> Result<Session> {
        let workspace = Workspace::load(args.manifest_path.as_deref(), &printer)?;
        let config = Config::load(args.config.as_deref(), &workspace.root)?;
        let rustc = Rustc::detect(&workspace.root, &printer)?;
        let host_cfg = crate::command::Cmd::new(&rustc.program)
            .args(["--print", "cfg", "--target", &rustc.host])
            .cwd(&workspace.root)
            .stdout_checked(&printer)?;
        let cargo_home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")));
        // Cargo reads config files from its working directory up; pgo-build runs cargo in the
        // workspace root, so that is where they are looked for.
        let cargo_config = CargoConfig::discover(&workspace.root, cargo_home.as_deref())?;
        let manifest_profiles = manifest_profiles(&workspace.root)?;
        let user_flags = UserFlags::resolve(&Sources {
            env: &|key| std::env::var(key).ok(),
            config: &cargo_config,
            host: &rustc.host,
            host_cfg: &rustflags::host_cfg(&host_cfg),
        })?;
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
        let mut common_rustflags = user_flags.flags.clone();
        common_rustflags.push(BUILD_ID_FLAG.to_owned());
        let settings = BuildSettings {
            profile: args
                .profile
                .clone()
                .or_else(|| config.build.profile.clone())
                .unwrap_or_else(|| "release".to_owned()),
            features,
            host: rustc.host.clone(),
            rustc: rustc.version_line.clone(),
            common_rustflags,
            profile_settings: profile_settings(manifest_profiles.as_ref(), &cargo_config),
        };
        let layout = Layout::new(&workspace.target_dir);
        let lock = RunLock::acquire(&layout)?;
        let report = Report::load_or_new(&layout.report(), &workspace.root);
        let state = State::load(&layout);
        let continuous = args.continuous || config.pgo.continuous;
        Ok(Session {
            printer,
            workspace,
            config,
            layout,
            rustc,
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
            _lock: lock,
        })
    }

    /// Runs one stage in a timer section: start and end lines, a record in the report.
    pub fn stage<T>(
        &mut self,
        name: &str,
        body: impl FnOnce(&mut Session) -> Result<T>,
    ) -> Result<T> {
        // The stage's outputs are about to change: its record of completion no longer holds
        // (`run` records it again once the stage completes).
        self.forget_stage(name)?;
        self.printer.stage_start(name);
        let started = Instant::now();
        let memory = PeakSampler::start();
        let result = body(self);
        let peak = memory.stop();
        let outcome = if result.is_ok() { "ok" } else { "failed" };
        self.printer.stage_end(name, outcome, started.elapsed());
        self.report
            .record_stage(name, outcome, started.elapsed(), Some(peak));
        if let Err(err) = self.report.save(&self.layout.report()) {
            self.printer
                .warn(format!("could not write the report: {err:#}"));
        }
        result
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

    /// A warning, or with `--strict` an error.
    pub(crate) fn caution(&self, message: String) -> Result<()> {
        if self.strict {
            bail!("{message}\n(--strict turns this warning into an error)");
        }
        self.printer.warn(message);
        Ok(())
    }

    /// Every raw profile of the last training, checked and attributed, with coverage.
    pub(crate) fn account(&self, instrumented: &StageManifest) -> Result<Accounting> {
        self.account_in(&self.layout.raw_profiles_dir(), instrumented)
    }

    /// The same for the raw profiles under `raw_dir`.
    pub(crate) fn account_in(
        &self,
        raw_dir: &Path,
        instrumented: &StageManifest,
    ) -> Result<Accounting> {
        let key = Fingerprint::new("accounting")
            .text("instrumented", &serde_json::to_string(instrumented)?)
            .text("bins", &format!("{:?}", self.bins))
            .tree(raw_dir)
            .finish();
        if let Some((cached, accounting)) = self.accounting_cache.borrow().as_ref()
            && *cached == key
        {
            return Ok(accounting.clone());
        }
        let binaries: Vec<&str> = self.bins.iter().map(|b| b.name.as_str()).collect();
        let accounting = profiles::account(
            raw_dir,
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

    /// Records the accounting in the report; corrupt or foreign files are a warning, or an
    /// error with `[pgo] on_corrupt = "fail"` or `--strict`. (0-byte files are not corrupt:
    /// they are processes that died, reported per binary.)
    fn report_accounting(&mut self, accounting: &Accounting) -> Result<()> {
        self.report.profiles = accounting
            .per_binary
            .iter()
            .map(|(name, figures)| {
                (
                    name.clone(),
                    serde_json::to_value(figures).unwrap_or_default(),
                )
            })
            .collect();
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

    pub fn doctor(&mut self) -> Result<()> {
        let printer = self.printer;
        printer.info(format!(
            "rustc: {} (host {}, LLVM {})",
            self.rustc.version_line, self.rustc.host, self.rustc.llvm_version
        ));
        printer.info(format!("workspace: {}", self.workspace.root.display()));
        printer.info(format!(
            "binaries: {}",
            self.bins
                .iter()
                .map(|b| b.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        printer.info(format!(
            "user rustflags ({}): {:?}",
            self.user_flags.source, self.user_flags.flags
        ));
        printer.info(format!(
            "config: {} ({} train, {} holdout workloads)",
            self.config
                .path
                .as_ref()
                .map_or("none".to_owned(), |p| p.display().to_string()),
            self.config.workloads_with_role(Role::Train).count(),
            self.config.workloads_with_role(Role::Holdout).count()
        ));
        let search = toolchain::find_llvm_tool(toolchain::LLVM_PROFDATA, &self.rustc, &printer);
        for candidate in &search.considered {
            printer.detail(format!(
                "llvm-profdata candidate {}: {}",
                candidate.path.display(),
                candidate.outcome
            ));
        }
        for spec in [toolchain::LLVM_BOLT, toolchain::MERGE_FDATA] {
            let found = toolchain::find_llvm_tool(spec, &self.rustc, &printer);
            match (&found.tool, self.config.bolt.enabled) {
                (Some(tool), _) => printer.info(format!(
                    "{}: {} (LLVM {})",
                    spec.name,
                    tool.path.display(),
                    tool.version
                )),
                (None, true) => {
                    found
                        .require(&self.rustc)
                        .context("[bolt] enabled = true needs it")?;
                }
                (None, false) => printer.info(format!(
                    "{}: not found (only needed for BOLT: `apt-get install {}-{}`)",
                    spec.name, spec.apt_package, self.rustc.llvm_major
                )),
            }
        }
        let tool = search.require(&self.rustc)?;
        printer.info(format!(
            "llvm-profdata: {} (LLVM {})",
            tool.path.display(),
            tool.version
        ));
        self.report.rustc = Some(self.rustc.version_line.clone());
        self.report.llvm_profdata =
            Some(format!("{} (LLVM {})", tool.path.display(), tool.version));
        let _ = self.profdata.set(tool);
        Ok(())
    }

    /// One stage's cargo build of `bins`, with the links bounded (see linker.rs) and their
    /// figures recorded in the report.
    fn cargo_build(
        &mut self,
        stage: Stage,
        bins: &[BinTarget],
        stage_rustflags: &[String],
        show_diagnostic: &dyn Fn(&cargo_build::Diagnostic) -> bool,
    ) -> Result<BuildOutput> {
        let (slots, slots_reason) = self.link_slots()?;
        let log = self.layout.stage_dir(stage).join("links.jsonl");
        if log.exists() {
            std::fs::remove_file(&log)?;
        }
        let real =
            linker::real_linker(&self.user_flags.flags, &self.rustc.host, &self.cargo_config)?;
        let wrapper = linker::wrapper(&self.layout.root().join("linker"), &real)?;
        let setup = LinkerSetup {
            flag: format!("-Clinker={}", wrapper.display()),
            env: vec![
                (linker::MODE_ENV.to_owned(), "1".to_owned()),
                (
                    linker::REAL_LINKER_ENV.to_owned(),
                    real.to_string_lossy().into_owned(),
                ),
                (linker::SLOTS_ENV.to_owned(), slots.to_string()),
                // Shared by every stage, so concurrent pgo-build processes share the bound too.
                (
                    linker::SLOTS_DIR_ENV.to_owned(),
                    self.layout.root().join("link-slots").display().to_string(),
                ),
                (linker::LOG_ENV.to_owned(), log.display().to_string()),
            ],
        };
        self.printer.detail(format!(
            "links: {slots} at a time ({slots_reason}); linker {}",
            real.to_string_lossy()
        ));
        let request = BuildRequest {
            stage,
            bins,
            settings: &self.settings,
            stage_rustflags,
            jobs: self.jobs,
            workspace_root: &self.workspace.root,
            layout: &self.layout,
            linker: &setup,
            batch_size: self.config.build.batch_size,
        };
        let output = cargo_build::build(&request, &self.printer, show_diagnostic)?;
        let records = linker::read_log(&log);
        self.report.links.insert(
            stage.name().to_owned(),
            LinkSummary::from_records(slots, slots_reason, &records),
        );
        Ok(output)
    }

    /// How many links may run at once: `[build] link_jobs`, or the memory budget divided by
    /// the largest link measured so far (a conservative guess before the first build).
    fn link_slots(&self) -> Result<(usize, String)> {
        let jobs = self
            .jobs
            .map(|j| j as usize)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
        if let Some(LinkJobs::Count(count)) = self.config.build.link_jobs {
            return Ok((count.max(1), format!("[build] link_jobs = {count}")));
        }
        let budget = match self.config.build.memory_budget.as_deref() {
            None | Some("auto") => {
                let available = linker::available_memory().unwrap_or(4 << 30);
                available.saturating_sub((available / 10).max(1 << 30))
            }
            Some(text) => linker::parse_size(text).with_context(|| {
                format!("[build] memory_budget = {text:?} in {}: expected \"auto\" or a size like \"8G\"", self.config.display_path())
            })?,
        };
        let measured = std::fs::read_dir(self.layout.root())
            .into_iter()
            .flatten()
            .flatten()
            .flat_map(|entry| linker::read_log(&entry.path().join("links.jsonl")))
            .map(|link| link.max_rss_bytes)
            .max();
        let (per_link, basis) = match measured {
            Some(bytes) if bytes > 0 => (bytes + bytes / 4, "largest link measured so far + 25%"),
            _ => (
                DEFAULT_LINK_ESTIMATE,
                "no link measured yet: conservative guess",
            ),
        };
        let slots = ((budget / per_link.max(1)) as usize).clamp(1, jobs.max(1));
        Ok((
            slots,
            format!(
                "memory budget {} / {} per link ({basis})",
                human_bytes(budget),
                human_bytes(per_link)
            ),
        ))
    }

    /// Replaces `<stage>/bin/` with the given executables and records them.
    pub(crate) fn stage_binaries(
        &mut self,
        stage: Stage,
        stage_rustflags: Vec<String>,
        executables: Vec<StageInput>,
    ) -> Result<StageManifest> {
        let bin_dir = self.layout.bin_dir(stage);
        if bin_dir.exists() {
            std::fs::remove_dir_all(&bin_dir)
                .with_context(|| format!("could not clear {}", bin_dir.display()))?;
        }
        let mut binaries = Vec::new();
        for input in executables {
            let bin = &input.bin;
            let staged = cargo_build::stage_binary(&input, &bin_dir)?;
            self.report
                .binaries
                .entry(bin.name.clone())
                .or_default()
                .insert(
                    stage.name().to_owned(),
                    BinaryRecord {
                        size_bytes: staged.size_bytes,
                        path: staged.path.clone(),
                        pgo: staged.pgo,
                        bolted: staged.bolted,
                    },
                );
            self.printer.info(format!(
                "{} -> {} ({})",
                bin.name,
                staged.path.display(),
                human_bytes(staged.size_bytes)
            ));
            binaries.push(staged);
        }
        let manifest = StageManifest {
            stage: stage.name().to_owned(),
            settings: self.settings.clone(),
            stage_rustflags,
            binaries,
        };
        manifest.save(&self.layout, stage)?;
        Ok(manifest)
    }

    fn build_and_stage(
        &mut self,
        stage: Stage,
        stage_rustflags: Vec<String>,
    ) -> Result<StageManifest> {
        let output = self.cargo_build(stage, &self.bins.clone(), &stage_rustflags, &|_| true)?;
        let executables = executables_of(&self.bins, output, false);
        self.stage_binaries(stage, stage_rustflags, executables)
    }

    /// Flags of builds without profile flags beyond the user's: with BOLT enabled, links keep
    /// relocations (BOLT needs them) and pgo-build-rt learns that BOLT may post-process it.
    /// Link arguments and that cfg leave the profiled code's control flow untouched.
    fn plain_flags(&self) -> Vec<String> {
        if self.config.bolt.enabled {
            BOLT_INPUT_FLAGS.map(str::to_owned).to_vec()
        } else {
            Vec::new()
        }
    }

    /// With BOLT enabled, refuses a cargo profile that strips symbols before any build: the
    /// linker rejects `--strip-all` with `--emit-relocs`, and BOLT needs the symbols anyway.
    fn check_bolt_compatible_profile(&self) -> Result<()> {
        if !self.config.bolt.enabled {
            return Ok(());
        }
        if let Some((strip, origin)) = strip_setting(
            self.manifest_profiles.as_ref(),
            &self.cargo_config,
            &self.settings.profile,
        ) && strip != "none"
            && strip != "false"
            && strip != "debuginfo"
        {
            bail!(
                "[bolt] enabled = true in {}, but the `{}` profile strips symbols (strip = {strip} \
                 in {origin}): BOLT needs the symbol table, and linking with relocations \
                 (-Wl,--emit-relocs) cannot be combined with stripping. Remove `strip` (or use \
                 strip = \"debuginfo\") for the profile, and strip the BOLTed binaries afterwards \
                 if needed.",
                self.config.display_path(),
                self.settings.profile
            );
        }
        Ok(())
    }

    /// The baseline: a plain release build with the user's flags.
    pub fn build_baseline(&mut self) -> Result<()> {
        self.check_bolt_compatible_profile()?;
        let flags = self.plain_flags();
        self.build_and_stage(Stage::Baseline, flags)?;
        Ok(())
    }

    pub fn instrument(&mut self) -> Result<()> {
        let mut flags = vec![
            format!(
                "-Cprofile-generate={}",
                self.layout.manual_profiles_dir().display()
            ),
            // Lets pgo-build-rt (and the product) compile signal handling into this build only.
            "--cfg".to_owned(),
            "pgo_build_instrument".to_owned(),
        ];
        if self.continuous {
            flags.extend(CONTINUOUS_FLAGS.map(str::to_owned));
        }
        let marker =
            start_marker::object(&self.layout.stage_dir(Stage::Instrumented), &self.printer)?;
        flags.push(format!("-Clink-arg={}", marker.display()));
        let manifest = self.build_and_stage(Stage::Instrumented, flags)?;
        for binary in &manifest.binaries {
            if binary.build_id.is_none() {
                bail!(
                    "the instrumented binary {} has no build id, so its profiles cannot be told \
                     apart from other binaries'. pgo-build passes {BUILD_ID_FLAG}; the linker \
                     configured for this workspace ignored it. Use a linker that supports \
                     --build-id (GNU ld, lld, mold).",
                    binary.path.display()
                );
            }
        }
        Ok(())
    }

    /// Runs the train workloads (all, or those named) against the instrumented binaries.
    pub fn train(&mut self, names: &[String]) -> Result<()> {
        let instrumented = StageManifest::load(
            &self.layout,
            Stage::Instrumented,
            "run `pgo-build instrument` first",
        )?;
        let workloads = self.training_workloads(names)?;
        let raw_dir = self.layout.raw_profiles_dir();
        let continuous = instrumented.continuous();
        self.run_training(
            Stage::Instrumented,
            &instrumented,
            &workloads,
            "train",
            &|workload| instrumented_profile_env(&raw_dir, continuous, workload),
        )?;
        let accounting = self.account(&instrumented)?;
        self.printer.table(accounting_table(&accounting.per_binary));
        self.report_accounting(&accounting)?;
        for (binary, figures) in &accounting.per_binary {
            if figures.valid_files == 0 {
                self.caution(format!(
                    "{}; `pgo-build optimize` will refuse to build it with PGO (see --allow-missing-profile)",
                    no_profile_message(binary, figures)
                ))?;
            }
        }
        Ok(())
    }

    /// Runs training workloads against a stage's binaries, one after the other. `prepare`
    /// readies a workload's profile directory and returns the variables that point the
    /// binaries at it. A failing workload fails the stage unless `allow_failure` is set.
    pub(crate) fn run_training(
        &mut self,
        stage: Stage,
        manifest: &StageManifest,
        workloads: &[Workload],
        log_prefix: &str,
        prepare: &dyn Fn(&Workload) -> Result<training::EnvVars>,
    ) -> Result<()> {
        let bin_dir = self.layout.bin_dir(stage);
        for workload in workloads {
            let target = training::Target {
                stage,
                bin_dir: &bin_dir,
                bin_names: manifest.binaries.iter().map(|b| b.name.as_str()).collect(),
                workspace_root: &self.workspace.root,
                extra_env: prepare(workload)?,
                wrapper: Vec::new(),
                log_path: self
                    .layout
                    .logs_dir()
                    .join(format!("{log_prefix}-{}.log", workload.name())),
            };
            self.printer
                .info(format!("workload {} ...", workload.name()));
            let outcome = target.run(workload, &self.printer)?;
            self.printer.info(format!(
                "workload {}: {} in {:.2}s (log: {})",
                workload.name(),
                outcome.status,
                outcome.duration.as_secs_f64(),
                outcome.log_path.display()
            ));
            self.report
                .training
                .retain(|w| !(w.name == workload.name() && w.stage == stage.name()));
            self.report.training.push(WorkloadRecord {
                name: workload.name().to_owned(),
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
                     stop its own children, and see the per-binary table below.",
                    workload.name(),
                    training::describe_stopped(&outcome.stopped)
                ))?;
            }
            if !outcome.success {
                let tail = training::log_tail(&outcome.log_path, 20);
                if workload.allow_failure {
                    self.printer.warn(format!(
                        "workload `{}` {} (allow_failure = true)",
                        workload.name(),
                        outcome.status
                    ));
                } else {
                    bail!(
                        "training workload `{}` {} against the {} binaries. Its output ends \
                         with:\n{tail}\nFull log: {}\nFix the workload, or set allow_failure = \
                         true for it in {} if failing is expected.",
                        workload.name(),
                        outcome.status,
                        stage.name(),
                        outcome.log_path.display(),
                        self.config.display_path()
                    );
                }
            }
        }
        Ok(())
    }

    pub(crate) fn training_workloads(&self, names: &[String]) -> Result<Vec<Workload>> {
        if names.is_empty() {
            let workloads: Vec<Workload> = self
                .config
                .workloads_with_role(Role::Train)
                .cloned()
                .collect();
            if workloads.is_empty() {
                bail!(
                    "there are no training workloads: add a [[workload]] with role = \"train\" to {}",
                    self.config.display_path()
                );
            }
            return Ok(workloads);
        }
        names
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
            .collect()
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

    pub fn optimize(&mut self, args: &OptimizeArgs) -> Result<()> {
        for name in &args.allow_missing_profile {
            if !self.bins.iter().any(|b| &b.name == name) {
                bail!("--allow-missing-profile {name}: no such selected binary");
            }
        }
        let inputs = match self.config.pgo.profile.clone() {
            Some(relative) => self.committed_profile_inputs(&relative)?,
            None => self.trained_profile_inputs()?,
        };
        let refused: Vec<&String> = inputs
            .missing
            .iter()
            .filter(|(bin, _)| !args.allow_missing_profile.contains(&bin.name))
            .map(|(_, reason)| reason)
            .collect();
        if !refused.is_empty() {
            bail!(
                "refusing to build with PGO: {} binar{} no usable profile data, and a binary \
                 built with -Cprofile-use but no data for it is treated as all-cold - slower than \
                 no PGO at all.\n  - {}\nFix: make a training workload in {} run {} to a normal \
                 exit (return from main or std::process::exit), or pass --allow-missing-profile \
                 BIN to ship {} as a plain release build.",
                refused.len(),
                if refused.len() == 1 {
                    "y has"
                } else {
                    "ies have"
                },
                refused
                    .iter()
                    .map(|r| r.as_str())
                    .collect::<Vec<_>>()
                    .join("\n  - "),
                self.config.display_path(),
                if refused.len() == 1 { "it" } else { "them" },
                if refused.len() == 1 { "it" } else { "them" },
            );
        }
        let without_data: Vec<BinTarget> =
            inputs.missing.iter().map(|(bin, _)| bin.clone()).collect();
        let with_data: Vec<BinTarget> = self
            .bins
            .iter()
            .filter(|b| !without_data.contains(b))
            .cloned()
            .collect();
        if with_data.is_empty() {
            bail!("no binary has usable profile data; nothing can be built with PGO");
        }
        let profile = inputs.path;

        self.check_bolt_compatible_profile()?;
        let mut flags = vec![
            format!("-Cprofile-use={}", profile.display()),
            "-Cllvm-args=-pgo-warn-missing-function".to_owned(),
        ];
        flags.extend(self.plain_flags());
        let verbose = self.printer.is_verbose();
        let output = self.cargo_build(Stage::Optimized, &with_data, &flags, &|d| {
            verbose || pgo_diagnostics::classify(&d.message).is_none()
        })?;
        let summary = Summary::from_diagnostics(&output.diagnostics);
        self.report.optimize_diagnostics = serde_json::to_value(&summary).ok();
        if !summary.unusable_profile.is_empty() {
            bail!(
                "rustc could not use the profile {} and would have built without PGO:\n  {}\n\
                 The profile is empty or was written by another LLVM version than rustc's ({}).",
                profile.display(),
                summary.unusable_profile.join("\n  "),
                self.rustc.llvm_version
            );
        }
        self.print_diagnostic_summary(&summary);
        match &inputs.committed_functions {
            Some(functions) => self.check_staleness(functions, &output.diagnostics)?,
            None if summary.total_mismatched() > 0 => self.caution(format!(
                "{} functions changed since the profile was recorded and get no profile data; \
                 re-run `pgo-build instrument` and `pgo-build train` to refresh it",
                summary.total_mismatched()
            ))?,
            None => {}
        }

        let mut executables = executables_of(&with_data, output, true);
        if !without_data.is_empty() {
            self.printer.warn(format!(
                "building {} without PGO (--allow-missing-profile): a plain release build is \
                 staged in its place",
                without_data
                    .iter()
                    .map(|b| b.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            let plain_flags = self.plain_flags();
            let plain =
                self.cargo_build(Stage::Baseline, &without_data, &plain_flags, &|_| true)?;
            executables.extend(executables_of(&without_data, plain, false));
        }
        self.stage_binaries(Stage::Optimized, flags, executables)?;
        Ok(())
    }

    /// The profile of the last training: checked, merged under its content hash.
    fn trained_profile_inputs(&mut self) -> Result<ProfileInputs> {
        let instrumented = StageManifest::load(
            &self.layout,
            Stage::Instrumented,
            "run `pgo-build instrument` and `pgo-build train` first (or commit a profile: \
             `pgo-build export` and [pgo] profile)",
        )?;
        check_same_settings(&instrumented.settings, &self.settings)?;
        for bin in &self.bins {
            if instrumented.binary(&bin.name).is_none() {
                bail!(
                    "binary `{}` was not instrumented (the instrumented stage built: {}); run \
                     `pgo-build instrument` and `pgo-build train` with the same selection",
                    bin.name,
                    instrumented
                        .binaries
                        .iter()
                        .map(|b| b.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
        let accounting = self.account(&instrumented)?;
        if accounting.profiles.is_empty() {
            bail!(
                "there are no raw profiles under {}: run `pgo-build train` (with the training \
                 workloads in {}) before optimizing",
                self.layout.raw_profiles_dir().display(),
                self.config.display_path()
            );
        }
        self.printer.table(accounting_table(&accounting.per_binary));
        self.report_accounting(&accounting)?;
        let missing = self
            .bins
            .iter()
            .filter(|bin| accounting.per_binary[&bin.name].valid_files == 0)
            .map(|bin| {
                (
                    bin.clone(),
                    no_profile_message(&bin.name, &accounting.per_binary[&bin.name]),
                )
            })
            .collect();
        let inputs = accounting.valid_inputs();
        if inputs.is_empty() {
            return Ok(ProfileInputs {
                path: PathBuf::new(),
                missing,
                committed_functions: None,
            });
        }
        let merged = profiles::merge(
            &inputs,
            &self.layout.profiles_dir(),
            self.profdata()?,
            &self.printer,
        )?;
        self.printer.info(format!(
            "merged {} profile files into {} ({}, {} functions)",
            inputs.len(),
            merged.path.display(),
            human_bytes(merged.size_bytes),
            merged.total_functions
        ));
        self.report.merged_profile = serde_json::to_value(&merged).ok();
        if merged.total_functions == 0 {
            bail!(
                "the merged profile {} contains no functions; rustc would build without PGO. \
                 Check the training workloads' logs under {}.",
                merged.path.display(),
                self.layout.logs_dir().display()
            );
        }
        Ok(ProfileInputs {
            path: merged.path,
            missing,
            committed_functions: None,
        })
    }

    /// A committed profile (`[pgo] profile`), checked; binaries whose crate has no counts in
    /// it are the ones without data.
    fn committed_profile_inputs(&mut self, relative: &Path) -> Result<ProfileInputs> {
        let path = self.committed_profile(relative)?;
        let functions = insight::functions(&path, self.profdata()?, &self.printer)?;
        if functions.is_empty() {
            bail!(
                "the committed profile {} contains no functions",
                self.workspace.root.join(relative).display()
            );
        }
        self.printer.info(format!(
            "using the committed profile {} ({} functions)",
            relative.display(),
            functions.len()
        ));
        let ran: BTreeSet<&str> = functions
            .iter()
            .filter(|f| f.total > 0)
            .map(|f| f.krate.as_str())
            .collect();
        let missing = self
            .bins
            .iter()
            .filter(|bin| !ran.contains(bin.name.replace('-', "_").as_str()))
            .map(|bin| {
                let reason = format!(
                    "`{}`: the committed profile has no counts for its crate (the training that \
                     produced it did not run it)",
                    bin.name
                );
                (bin.clone(), reason)
            })
            .collect();
        Ok(ProfileInputs {
            path,
            missing,
            committed_functions: Some(functions),
        })
    }

    /// Fails above `[pgo] max_stale`, warns below it.
    fn check_staleness(
        &mut self,
        functions: &[insight::FunctionCounts],
        diagnostics: &[cargo_build::Diagnostic],
    ) -> Result<()> {
        let staleness = profile_commands::staleness(functions, diagnostics);
        self.report.staleness = serde_json::to_value(&staleness).ok();
        self.printer.info(format!(
            "committed profile: {} of {} functions stale ({:.1}%)",
            staleness.stale_functions,
            staleness.profile_functions,
            staleness.share * 100.0
        ));
        if staleness.stale_functions == 0 {
            return Ok(());
        }
        let mut table = Table::new();
        table.load_preset(UTF8_FULL_CONDENSED).set_header([
            "Crate",
            "Stale functions",
            "Functions in profile",
        ]);
        for (krate, (stale, total)) in &staleness.per_crate {
            table.add_row([krate.clone(), stale.to_string(), total.to_string()]);
        }
        self.printer.table(table);
        let changed = if staleness.changed.is_empty() {
            String::new()
        } else {
            format!(
                " Changed since the profile was recorded: {}.",
                staleness.changed.join(", ")
            )
        };
        let max = self.config.pgo.max_stale();
        if staleness.share > max {
            bail!(
                "the committed profile is stale: {:.1}% of its functions no longer match the code \
                 or have no data, above [pgo] max_stale = {max}.{changed} Re-train: run `pgo-build \
                 run` without [pgo] profile, then `pgo-build export` over the committed file.",
                staleness.share * 100.0
            );
        }
        self.caution(format!(
            "{:.1}% of the committed profile's functions are stale.{changed} Re-train soon.",
            staleness.share * 100.0
        ))
    }

    fn print_diagnostic_summary(&self, summary: &Summary) {
        if summary.per_crate.is_empty() {
            self.printer
                .info("rustc reported no functions without profile data");
            return;
        }
        let mut table = Table::new();
        table.load_preset(UTF8_FULL_CONDENSED).set_header([
            "Crate",
            "Functions without data",
            "Changed since training (hash mismatch)",
        ]);
        for (krate, counts) in &summary.per_crate {
            table.add_row([
                krate.clone(),
                counts.missing_functions.to_string(),
                counts.mismatched_functions.to_string(),
            ]);
        }
        self.printer.table(table);
    }

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
        self.stage("doctor", |s| s.doctor())?;
        self.cached_stage(PipelineStage::Build, args, |s| s.build_baseline())?;
        if self.config.pgo.profile.is_none() {
            self.cached_stage(PipelineStage::Instrument, args, |s| s.instrument())?;
            self.cached_stage(PipelineStage::Train, args, |s| {
                s.clear_raw_profiles()?;
                s.train(&[])
            })?;
        }
        self.cached_stage(PipelineStage::Optimize, args, |s| {
            s.optimize(&args.optimize)
        })?;
        if self.config.bolt.enabled {
            self.cached_stage(PipelineStage::Bolt, args, |s| s.bolt(&BoltArgs::default()))?;
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
        self.cached_stage(PipelineStage::Compare, args, |s| {
            s.compare(&compare).map(drop)
        })
    }

    /// Runs a stage of `run`, or reuses its last result when its inputs have not changed since
    /// it completed and its outputs are intact (shown as "cached").
    fn cached_stage(
        &mut self,
        stage: PipelineStage,
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
                .record_stage(name, "cached", started.elapsed(), None);
            return self.report.save(&self.layout.report());
        }
        self.stage(name, body)?;
        if let Some(fingerprint) = self.fingerprint(stage, args)? {
            self.state.stages.insert(name.to_owned(), fingerprint);
            self.state.save(&self.layout)?;
        }
        Ok(())
    }

    /// Drops a stage's record (its outputs are about to change).
    pub fn forget_stage(&mut self, name: &str) -> Result<()> {
        if self.state.stages.remove(name).is_some() {
            self.state.save(&self.layout)?;
        }
        Ok(())
    }

    fn outputs_intact(&self, stage: PipelineStage) -> bool {
        let manifest_intact =
            |stage: Stage| StageManifest::load(&self.layout, stage, "").is_ok_and(|m| m.intact());
        match stage {
            PipelineStage::Build => manifest_intact(Stage::Baseline),
            PipelineStage::Instrument => manifest_intact(Stage::Instrumented),
            PipelineStage::Train => self
                .config
                .workloads_with_role(Role::Train)
                .all(|w| self.layout.raw_profiles_dir().join(w.name()).is_dir()),
            PipelineStage::Optimize => manifest_intact(Stage::Optimized),
            PipelineStage::Bolt => manifest_intact(Stage::Bolt),
            PipelineStage::Compare => self.report.compare.is_some(),
        }
    }

    /// The fingerprint of a stage's inputs as they are now; `None` when they cannot be known
    /// yet (a build that never ran has no dep-info).
    fn fingerprint(&self, stage: PipelineStage, args: &RunArgs) -> Result<Option<String>> {
        let mut print = Fingerprint::new(stage.name());
        print.text("pgo-build", env!("CARGO_PKG_VERSION"));
        let stage_json = |print: &mut Fingerprint, stage: Stage| -> bool {
            let text = std::fs::read_to_string(self.layout.stage_manifest(stage));
            print.text(stage.name(), text.as_deref().unwrap_or("missing"));
            text.is_ok()
        };
        let workloads = |print: &mut Fingerprint, role: Role| {
            for workload in self.config.workloads_with_role(role) {
                print.text("workload", &workload_fingerprint(workload));
            }
        };
        match stage {
            PipelineStage::Build | PipelineStage::Instrument | PipelineStage::Optimize => {
                print.text("settings", &serde_json::to_string(&self.settings)?);
                print.text("bins", &format!("{:?}", self.bins));
                print.text("plain flags", &self.plain_flags().join(" "));
                print.text("continuous", &self.continuous.to_string());
                for manifest in &self.workspace.manifests {
                    print.file(manifest);
                }
                print.file(&self.workspace.root.join("Cargo.lock"));
                let built = match stage {
                    PipelineStage::Build => Stage::Baseline,
                    PipelineStage::Instrument => Stage::Instrumented,
                    _ => Stage::Optimized,
                };
                let Ok(manifest) = StageManifest::load(&self.layout, built, "") else {
                    return Ok(None);
                };
                for binary in &manifest.binaries {
                    let Some(sources) = state::dep_info_sources(&binary.source) else {
                        return Ok(None);
                    };
                    for source in sources {
                        print.file(&source);
                    }
                }
                if stage == PipelineStage::Optimize {
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
            PipelineStage::Train => {
                stage_json(&mut print, Stage::Instrumented);
                workloads(&mut print, Role::Train);
            }
            PipelineStage::Bolt => {
                stage_json(&mut print, Stage::Optimized);
                print.text("bolt", &format!("{:?}", self.config.bolt));
                workloads(&mut print, Role::Train);
            }
            PipelineStage::Compare => {
                for stage in Stage::VARIANTS {
                    stage_json(&mut print, stage);
                }
                let compare = run_compare_args(self, args);
                print.text("compare", &format!("{:?}", compare));
                workloads(&mut print, Role::Holdout);
            }
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
        workloads: session
            .config
            .workloads_with_role(Role::Holdout)
            .map(|w| w.name().to_owned())
            .collect(),
        seed: 1,
        ..CompareArgs::default()
    }
}

/// What of a workload decides its profile or timing.
fn workload_fingerprint(workload: &Workload) -> String {
    format!(
        "{} {:?} {:?} {:?} {:?} {:?} {} {:?}",
        workload.name(),
        workload.role,
        workload.command,
        workload.env,
        workload.cwd,
        workload.timeout,
        workload.allow_failure,
        workload.grace_period
    )
}

/// Where `optimize` gets its profile from, and which binaries have no data in it.
struct ProfileInputs {
    path: PathBuf,
    missing: Vec<(BinTarget, String)>,
    /// The committed profile's functions, for the staleness check after building.
    committed_functions: Option<Vec<insight::FunctionCounts>>,
}

/// Readies `raw_dir/<workload>/` for a run against the instrumented binaries and returns the
/// variables pointing them at it.
pub(crate) fn instrumented_profile_env(
    raw_dir: &Path,
    continuous: bool,
    workload: &Workload,
) -> Result<training::EnvVars> {
    let profile_dir = raw_dir.join(workload.name());
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

/// Pairs each binary with the executable cargo reported for it.
fn executables_of(bins: &[BinTarget], mut output: BuildOutput, pgo: bool) -> Vec<StageInput> {
    bins.iter()
        .filter_map(|bin| {
            Some(StageInput {
                bin: bin.clone(),
                source: output.executables.remove(&bin.name)?,
                pgo,
                bolted: false,
            })
        })
        .collect()
}

fn no_profile_message(binary: &str, figures: &profiles::BinaryProfiles) -> String {
    if figures.processes == 0 {
        format!("`{binary}` wrote no profile: no training workload ran it")
    } else if figures.died == figures.processes {
        format!(
            "`{binary}`: all {} process{} ended without writing a profile: stopped by a signal \
             (SIGTERM, SIGKILL) or by abort/_exit before their exit handlers ran. Call \
             pgo_build_rt::install() first thing in its main (SIGTERM, SIGINT), or train in \
             continuous mode (--continuous: any signal)",
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

fn check_same_settings(instrumented: &BuildSettings, now: &BuildSettings) -> Result<()> {
    if instrumented == now {
        return Ok(());
    }
    let mut differences = Vec::new();
    let mut compare = |what: &str, then: String, current: String| {
        if then != current {
            differences.push(format!("  {what}: instrumented with {then}, now {current}"));
        }
    };
    compare(
        "cargo profile",
        instrumented.profile.clone(),
        now.profile.clone(),
    );
    compare(
        "features",
        format!("{:?}", instrumented.features),
        format!("{:?}", now.features),
    );
    compare("target", instrumented.host.clone(), now.host.clone());
    compare("rustc", instrumented.rustc.clone(), now.rustc.clone());
    compare(
        "rustflags",
        format!("{:?}", instrumented.common_rustflags),
        format!("{:?}", now.common_rustflags),
    );
    compare(
        "profile settings",
        format!("{:?}", instrumented.profile_settings),
        format!("{:?}", now.profile_settings),
    );
    bail!(
        "the build settings changed since the instrumented build:\n{}\nProfiles name functions by \
         crate hash and codegen unit, so an optimized build with other settings would silently \
         drop most of the profile. Re-run `pgo-build instrument` and `pgo-build train`, or \
         restore the settings.",
        differences.join("\n")
    )
}

/// The `[profile]` table of the workspace manifest, if any.
fn manifest_profiles(workspace_root: &Path) -> Result<Option<toml::Value>> {
    let manifest = workspace_root.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .with_context(|| format!("could not read {}", manifest.display()))?;
    let table: toml::Table =
        toml::from_str(&text).with_context(|| format!("could not parse {}", manifest.display()))?;
    Ok(table.get("profile").cloned())
}

/// The cargo profile settings that affect codegen: `[profile]` of the workspace manifest and of
/// cargo config files, and `CARGO_PROFILE_*` variables.
fn profile_settings(manifest_profiles: Option<&toml::Value>, cargo_config: &CargoConfig) -> String {
    let mut parts: Vec<String> = manifest_profiles
        .map(|p| format!("Cargo.toml: {p}"))
        .into_iter()
        .collect();
    for (file, table) in cargo_config.files() {
        if let Some(profile) = table.get("profile") {
            parts.push(format!("{}: {profile}", file.display()));
        }
    }
    let mut vars: Vec<String> = std::env::vars()
        .filter(|(key, _)| key.starts_with("CARGO_PROFILE_"))
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    vars.sort();
    parts.extend(vars);
    parts.join("; ")
}

/// The `strip` setting of cargo profile `profile` and where it comes from:
/// `CARGO_PROFILE_<NAME>_STRIP`, else cargo config files (deepest first), else the workspace
/// manifest. Custom profiles inheriting `strip` are not followed.
fn strip_setting(
    manifest_profiles: Option<&toml::Value>,
    cargo_config: &CargoConfig,
    profile: &str,
) -> Option<(String, String)> {
    let var = format!(
        "CARGO_PROFILE_{}_STRIP",
        profile.to_uppercase().replace('-', "_")
    );
    if let Ok(value) = std::env::var(&var) {
        return Some((value, var));
    }
    let (origin, strip) = match cargo_config.lookup(&["profile", profile, "strip"]) {
        Some((file, strip)) => (file.display().to_string(), strip),
        None => (
            "Cargo.toml".to_owned(),
            manifest_profiles?.get(profile)?.get("strip")?,
        ),
    };
    let value = strip
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| strip.to_string());
    Some((value, origin))
}

/// `pgo-build report`: renders the last run's report.json; needs no toolchain and no lock.
pub fn show_report(args: &GlobalArgs, report_args: &ReportArgs, printer: &Printer) -> Result<()> {
    let workspace = Workspace::load(args.manifest_path.as_deref(), printer)?;
    let layout = Layout::new(&workspace.target_dir);
    let text = std::fs::read_to_string(layout.report()).with_context(|| {
        format!(
            "there is no report at {}: run `pgo-build run` first",
            layout.report().display()
        )
    })?;
    let report: Report = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a report of this pgo-build version",
            layout.report().display()
        )
    })?;
    if let Some(file) = &report_args.html {
        cargo_build::write_atomically(file, render::html(&report).as_bytes())?;
        printer.info(format!("wrote {}", file.display()));
    }
    if report_args.json {
        printer.table(text.trim_end());
    } else if report_args.markdown {
        printer.table(render::markdown(&report));
    } else if report_args.html.is_none() {
        printer.table(report.stage_table());
        printer.table(report.size_table());
        if let Some(compare) = &report.compare {
            printer.table(crate::compare::compare_table(compare));
        }
    }
    Ok(())
}

/// Removes everything under `target/pgo-build/`.
pub fn clean(args: &GlobalArgs, printer: &Printer) -> Result<()> {
    let workspace = Workspace::load(args.manifest_path.as_deref(), printer)?;
    let layout = Layout::new(&workspace.target_dir);
    // Refused while another run works there; held while the directory goes away.
    let _lock = RunLock::acquire(&layout)?;
    if layout.root().exists() {
        std::fs::remove_dir_all(layout.root())
            .with_context(|| format!("could not remove {}", layout.root().display()))?;
        printer.info(format!("removed {}", layout.root().display()));
    } else {
        printer.info(format!(
            "nothing to remove: {} does not exist",
            layout.root().display()
        ));
    }
    Ok(())
}
