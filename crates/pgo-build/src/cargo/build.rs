//! One `cargo build` for all selected binaries of a stage, and staging its executables.
//!
//! Artifacts are read from cargo's JSON message stream, never guessed from paths. rustc's
//! diagnostics come back in the same stream (`--message-format=json`; the
//! `json-render-diagnostics` format would keep them out of it) so stages can inspect them.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{Context, Result, bail};
use cargo_metadata::Message;
use serde::{Deserialize, Serialize};

use crate::cargo::timings::{self, TimedUnit};
use crate::cargo::workspace::{BinTarget, cargo_program};
use crate::exec::TrackedTree;
use crate::layout::{Layout, Stage};
use crate::util::command::Cmd;
use crate::util::files::{sha256_hex, sha256_of, write_atomically};
use crate::util::printer::Printer;

/// Added to every stage (so baseline and optimized stay comparable): `%b` in the profile file
/// pattern needs a build id, which not every linker adds by default.
pub const BUILD_ID_FLAG: &str = "-Clink-arg=-Wl,--build-id";
/// No value profiling (indirect call targets, memcpy sizes): in continuous-mode instrumented
/// builds, and in the optimized builds that use their profiles.
pub const VALUE_PROFILING_OFF: &str = "-Cllvm-args=-disable-vp";
/// Extra flags of a continuous-mode instrumented build: counters addressed through a bias so
/// they can live in the mmapped file (without it the file stays empty), no value profiling
/// (llvm-profdata rejects such files as truncated otherwise), and counters updated in memory
/// on every increment (else a process killed inside a loop loses that loop's counts).
pub const CONTINUOUS_FLAGS: [&str; 3] = [
    "-Cllvm-args=-runtime-counter-relocation",
    VALUE_PROFILING_OFF,
    "-Cllvm-args=-do-counter-promotion=false",
];

/// Everything that decides how cargo builds, apart from the stage's profile flags.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildSettings {
    pub profile: String,
    pub features: Vec<String>,
    /// The triple every build passes as `--target` (the host's unless `--target` says).
    #[serde(alias = "host")]
    pub target: String,
    pub rustc: String,
    /// The user's rustflags plus pgo-build's stage-independent ones.
    pub common_rustflags: Vec<String>,
    /// `[profile.*]` of the workspace manifest and `CARGO_PROFILE_*` variables: codegen-units,
    /// LTO and friends rename every function in a profile when they change.
    pub profile_settings: String,
    /// `cargo --config` values pgo-build adds (`profile.release.lto="fat"`, from `[build]
    /// profile_overrides` or an explore variant); also part of `profile_settings`.
    #[serde(default)]
    pub cargo_config: Vec<String>,
    /// The C compiler of cross-language builds (and the user's C variables then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub c: Option<crate::toolchain::cross_language::CSettings>,
}

pub struct BuildRequest<'a> {
    pub stage: Stage,
    pub bins: &'a [BinTarget],
    pub settings: &'a BuildSettings,
    /// Flags this stage adds to the common ones.
    pub stage_rustflags: &'a [String],
    pub jobs: Option<u32>,
    pub workspace_root: &'a Path,
    pub layout: &'a Layout,
    /// pgo-build in front of the linker (see linker.rs).
    pub linker: &'a LinkerSetup,
    /// pgo-build as cargo's rustc wrapper (see rustc_wrapper.rs): its variables.
    pub rustc_wrapper: &'a [(String, String)],
    /// pgo-build as the `cc` crate's C compiler (see cc_wrapper.rs): its variables.
    pub c_compiler: &'a [(String, String)],
    /// Binaries per cargo invocation (`None`: all in one).
    pub batch_size: Option<usize>,
}

/// How a build runs its links: the `-C linker` flag and the wrapper's variables.
#[derive(Debug, Clone)]
pub struct LinkerSetup {
    pub flag: String,
    pub env: Vec<(String, String)>,
}

/// A diagnostic rustc emitted while compiling one target.
#[derive(Debug, Clone)]
pub struct Diagnostic {
    /// The crate (target) being compiled.
    pub target: String,
    pub level: String,
    pub message: String,
    pub rendered: String,
}

pub struct BuildOutput {
    /// Binary name → the executable cargo reported.
    pub executables: BTreeMap<String, PathBuf>,
    pub diagnostics: Vec<Diagnostic>,
    /// The metadata hashes of every unit the build used, fresh or rebuilt (`foo-<hash>`):
    /// what [`prune_stale_units`] keeps. `None` when one of them could not be told.
    pub unit_hashes: Option<BTreeSet<String>>,
    /// Package → the libraries its build script links dynamically (for the target): C that no
    /// build of this workspace compiles (a system liblzma found by pkg-config, say).
    pub dynamic_libs: BTreeMap<String, Vec<String>>,
    /// The units of each cargo invocation's `--timings` report, in order (`None`: unreadable).
    pub timings: Vec<Option<Vec<TimedUnit>>>,
    /// The wall time of the cargo invocations, together.
    pub cargo_secs: f64,
}

impl BuildRequest<'_> {
    pub fn rustflags(&self) -> Vec<String> {
        let mut flags = self.settings.common_rustflags.clone();
        flags.extend(self.stage_rustflags.iter().cloned());
        // Last, so it wins over a user's `-C linker` (which the wrapper then runs).
        flags.push(self.linker.flag.clone());
        flags
    }

    fn command(&self, bins: &[BinTarget]) -> Cmd {
        let mut cmd = Cmd::new(cargo_program())
            .args(["build", "--profile", &self.settings.profile])
            // Always an explicit --target: rustflags then reach only target crates, not build
            // scripts and proc-macros, and symbol hashes stay the same in every stage.
            .args(["--target", &self.settings.target])
            .arg("--target-dir")
            .arg(self.layout.cargo_target_dir(self.stage))
            .arg("--message-format=json")
            // The dependency graph's bound on the build's time (see cargo_timings.rs).
            .arg("--timings")
            .env("CARGO_ENCODED_RUSTFLAGS", self.rustflags().join("\u{1f}"))
            .env_remove("RUSTFLAGS")
            .cwd(self.workspace_root);
        for value in &self.settings.cargo_config {
            cmd = cmd.args(["--config", value]);
        }
        for (key, value) in self
            .linker
            .env
            .iter()
            .chain(self.rustc_wrapper)
            .chain(self.c_compiler)
        {
            cmd = cmd.env(key, value);
        }
        let mut packages: Vec<&str> = bins.iter().map(|b| b.package.as_str()).collect();
        packages.sort();
        packages.dedup();
        for package in packages {
            cmd = cmd.args(["-p", package]);
        }
        for bin in bins {
            cmd = cmd.args(["--bin", &bin.name]);
        }
        if !self.settings.features.is_empty() {
            cmd = cmd.args(["--features", &self.settings.features.join(",")]);
        }
        if let Some(jobs) = self.jobs {
            cmd = cmd.args(["-j", &jobs.to_string()]);
        }
        cmd
    }
}

/// Runs the build: one cargo invocation, or one per batch with `[build] batch_size`.
/// `show_diagnostic` decides which rustc diagnostics are echoed as they arrive (errors always
/// are); all of them are returned.
pub fn build(
    request: &BuildRequest,
    printer: &Printer,
    show_diagnostic: &dyn Fn(&Diagnostic) -> bool,
) -> Result<BuildOutput> {
    let batch = request.batch_size.unwrap_or(request.bins.len()).max(1);
    let mut output = BuildOutput {
        executables: BTreeMap::new(),
        diagnostics: Vec::new(),
        unit_hashes: Some(BTreeSet::new()),
        dynamic_libs: BTreeMap::new(),
        timings: Vec::new(),
        cargo_secs: 0.0,
    };
    for bins in request.bins.chunks(batch) {
        let started = std::time::Instant::now();
        let part = build_batch(request, bins, printer, show_diagnostic)?;
        output.cargo_secs += started.elapsed().as_secs_f64();
        output.timings.push(timings::take(
            &request.layout.cargo_target_dir(request.stage),
        ));
        output.executables.extend(part.executables);
        output.diagnostics.extend(part.diagnostics);
        output.dynamic_libs.extend(part.dynamic_libs);
        output.unit_hashes = output
            .unit_hashes
            .zip(part.unit_hashes)
            .map(|(mut all, part)| {
                all.extend(part);
                all
            });
    }
    Ok(output)
}

fn build_batch(
    request: &BuildRequest,
    bins: &[BinTarget],
    printer: &Printer,
    show_diagnostic: &dyn Fn(&Diagnostic) -> bool,
) -> Result<BuildOutput> {
    // cargo, rustc and the linkers stop with pgo-build (see TrackedTree).
    let tree = TrackedTree::start(Some(&request.layout.running_dir()), request.stage)?;
    let cmd = tree.tag(request.command(bins));
    printer.info(format!(
        "cargo build of {} binaries ({} stage)",
        bins.len(),
        request.stage.name()
    ));
    let mut child = cmd.spawn(printer, Stdio::piped(), Stdio::piped())?;
    let stderr = child.stderr.take().expect("stderr is piped");
    let quiet_printer = printer.clone();
    // cargo's own progress and errors; kept so a failure can show them even with -q.
    let stderr_thread = std::thread::spawn(move || {
        let mut tail = Vec::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            // pgo-build's own notes from its wrappers (a crate waiting for memory) are shown;
            // cargo's progress only with -v.
            match line.strip_prefix(WRAPPER_NOTE_PREFIX) {
                Some(note) => quiet_printer.info(note),
                None => quiet_printer.detail(&line),
            }
            tail.push(line);
        }
        tail
    });

    let bar = printer.spinner(format!("cargo build ({} stage)", request.stage.name()));
    let mut units = 0usize;
    let wanted: BTreeMap<&str, &BinTarget> = bins.iter().map(|b| (b.name.as_str(), b)).collect();
    let mut executables = BTreeMap::new();
    let mut diagnostics = Vec::new();
    let mut unit_hashes = BTreeSet::new();
    let mut unknown_units = false;
    let mut dynamic = BTreeMap::new();
    let target_units = request
        .layout
        .cargo_target_dir(request.stage)
        .join(&request.settings.target);
    let stdout = BufReader::new(child.stdout.take().expect("stdout is piped"));
    for message in Message::parse_stream(stdout) {
        match message.context("could not read cargo's JSON output")? {
            Message::CompilerArtifact(artifact) => {
                units += 1;
                for file in &artifact.filenames {
                    match artifact_unit_hash(file.as_std_path()) {
                        Some(hash) => {
                            unit_hashes.insert(hash);
                        }
                        None => unknown_units = true,
                    }
                }
                bar.set_message(format!(
                    "cargo build ({} stage): {units} units done, last {}",
                    request.stage.name(),
                    artifact.target.name
                ));
                if let Some(executable) = artifact.executable
                    && wanted.contains_key(artifact.target.name.as_str())
                {
                    executables
                        .insert(artifact.target.name.clone(), executable.into_std_path_buf());
                }
            }
            Message::CompilerMessage(message) => {
                let diagnostic = Diagnostic {
                    target: message.target.name.clone(),
                    level: format!("{:?}", message.message.level).to_lowercase(),
                    message: message.message.message.clone(),
                    rendered: message.message.rendered.clone().unwrap_or_default(),
                };
                if diagnostic.level.starts_with("error") {
                    bar.suspend(|| eprint!("{}", diagnostic.rendered));
                } else if show_diagnostic(&diagnostic) {
                    bar.suspend(|| printer.passthrough(&diagnostic.rendered));
                }
                diagnostics.push(diagnostic);
            }
            Message::BuildScriptExecuted(script) => {
                let libs = crate::toolchain::cross_language::dynamic_libs(&script.linked_libs);
                // `build/<package>-<hash>/out` of a target unit.
                if let Some(package) = script
                    .out_dir
                    .parent()
                    .filter(|_| script.out_dir.as_std_path().starts_with(&target_units))
                    .and_then(|dir| dir.file_name())
                    .filter(|name| unit_hash(name).is_some())
                    .and_then(|name| Some(&name[..name.len().checked_sub(17)?]))
                    && !libs.is_empty()
                {
                    dynamic.insert(package.to_owned(), libs);
                }
                // `build/<package>-<hash>/out`: the run of a build script is a unit of its own.
                if let Some(hash) = script
                    .out_dir
                    .parent()
                    .and_then(|dir| dir.file_name())
                    .and_then(unit_hash)
                {
                    unit_hashes.insert(hash.to_owned());
                }
            }
            _ => {}
        }
    }
    bar.finish_and_clear();
    let status = child.wait().context("could not wait for cargo")?;
    let stderr_tail = stderr_thread.join().unwrap_or_default();
    tree.finish()?;
    if !status.success() {
        let tail: Vec<&str> = stderr_tail
            .iter()
            .rev()
            .take(25)
            .rev()
            .map(String::as_str)
            .collect();
        let known = if stderr_tail
            .iter()
            .any(|line| line.contains(crate::toolchain::cross_language::CG_PROFILE_CLASH))
        {
            format!(
                "\n{}",
                crate::toolchain::cross_language::cg_profile_clash_help()
            )
        } else {
            String::new()
        };
        bail!(
            "cargo build for the {} stage failed ({status}). Command:\n  {}\ncargo said:\n{}{known}",
            request.stage.name(),
            cmd.display(),
            tail.join("\n")
        );
    }
    for bin in bins {
        if !executables.contains_key(&bin.name) {
            bail!(
                "cargo reported no executable for binary `{}` (package `{}`) in the {} stage",
                bin.name,
                bin.package,
                request.stage.name()
            );
        }
    }
    Ok(BuildOutput {
        executables,
        diagnostics,
        unit_hashes: (!unknown_units).then_some(unit_hashes),
        dynamic_libs: dynamic,
        timings: Vec::new(),
        cargo_secs: 0.0,
    })
}

/// The metadata hash of the unit that made an artifact file: from its name
/// (`deps/libfoo-<hash>.rlib`), its directory (`build/foo-<hash>/build-script-build`), or, for
/// files cargo uplifted out of `deps/` (`release/app`), from the `deps/` file it is a hard
/// link of.
fn artifact_unit_hash(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let name = path.file_name()?.to_str()?;
    if let Some(hash) = unit_hash(name) {
        return Some(hash.to_owned());
    }
    let dir = path.parent()?;
    if let Some(hash) = dir.file_name().and_then(|d| d.to_str()).and_then(unit_hash) {
        return Some(hash.to_owned());
    }
    let meta = std::fs::metadata(path).ok()?;
    std::fs::read_dir(dir.join("deps"))
        .ok()?
        .flatten()
        .find(|entry| {
            entry
                .metadata()
                .is_ok_and(|m| m.ino() == meta.ino() && m.dev() == meta.dev())
        })
        .and_then(|entry| unit_hash(entry.file_name().to_str()?).map(str::to_owned))
}

/// The metadata hash in the name of a unit's file or directory (`libfoo-0123456789abcdef.rlib`,
/// `app-0123456789abcdef`, `.fingerprint/foo-0123456789abcdef`), if it has one.
pub fn unit_hash(name: &str) -> Option<&str> {
    name.match_indices('-').rev().find_map(|(dash, _)| {
        let hash = name.get(dash + 1..dash + 17)?;
        let ends = name[dash + 17..].is_empty() || name[dash + 17..].starts_with('.');
        (ends && hash.bytes().all(|b| b.is_ascii_hexdigit())).then_some(hash)
    })
}

/// Removes the units of earlier builds from the cargo target dir that built `executable`:
/// entries of `deps/`, `.fingerprint/` and `build/` (for the target and the host) whose
/// metadata hash is not in `keep`. A stage whose flags change with every profile (optimize)
/// would otherwise keep a full set of units per training. Returns files and bytes removed.
pub fn prune_stale_units(executable: &Path, keep: &BTreeSet<String>) -> (usize, u64) {
    let Some(profile_dir) = executable.parent() else {
        return (0, 0);
    };
    // `<cargo-target>/<triple>/<profile>`; host units (build scripts, proc macros) live in
    // `<cargo-target>/<profile>`.
    let host_dir = profile_dir
        .file_name()
        .zip(profile_dir.parent().and_then(Path::parent))
        .map(|(profile, root)| root.join(profile));
    let (mut files, mut bytes) = (0, 0);
    for dir in std::iter::once(profile_dir.to_owned()).chain(host_dir) {
        for kind in ["deps", ".fingerprint", "build"] {
            for entry in std::fs::read_dir(dir.join(kind))
                .into_iter()
                .flatten()
                .flatten()
            {
                let name = entry.file_name();
                let Some(hash) = name.to_str().and_then(unit_hash) else {
                    continue;
                };
                if keep.contains(hash) {
                    continue;
                }
                let path = entry.path();
                let size = tree_size(&path);
                let removed = if path.is_dir() {
                    std::fs::remove_dir_all(&path)
                } else {
                    std::fs::remove_file(&path)
                };
                if removed.is_ok() {
                    files += 1;
                    bytes += size;
                }
            }
        }
    }
    (files, bytes)
}

fn tree_size(path: &Path) -> u64 {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => std::fs::read_dir(path)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| tree_size(&entry.path()))
            .sum(),
        Ok(meta) => meta.len(),
        Err(_) => 0,
    }
}

/// What a stage left in `<stage>/bin/`, recorded in `<stage>/stage.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StageManifest {
    pub stage: String,
    pub settings: BuildSettings,
    pub stage_rustflags: Vec<String>,
    pub binaries: Vec<StagedBinary>,
    /// New for every completed build of the stage: later stages record the id of the build
    /// they were made from (`upstream`), so a consumer can tell an output older than its input.
    #[serde(default)]
    pub id: String,
    /// Fingerprint of the source files the binaries were built from (cargo's dep-info), so
    /// variants built from different sources are never compared. `None` where unknown.
    #[serde(default)]
    pub sources: Option<String>,
    /// Stage name → id of that stage's build this one was made from.
    #[serde(default)]
    pub upstream: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StagedBinary {
    pub name: String,
    pub package: String,
    pub path: PathBuf,
    /// The file it was copied from (for cargo stages, the executable whose `.d` dep-info
    /// lists its sources).
    #[serde(default)]
    pub source: PathBuf,
    pub size_bytes: u64,
    /// Without debug info and symbols (see [`loaded_size`]); absent in older records.
    #[serde(default)]
    pub loaded_bytes: Option<u64>,
    /// Its loaded part compressed with zstd -9 (see [`compressed_size`]): about what a release
    /// archive of the stripped binary takes. Absent in older records.
    #[serde(default)]
    pub compressed_bytes: Option<u64>,
    pub build_id: Option<String>,
    /// Built with `-Cprofile-use` (optimized stage only).
    pub pgo: bool,
    /// Post-processed by BOLT with a profile (bolt stage only).
    #[serde(default)]
    pub bolted: bool,
    /// Its SHA-256 when staged: a binary replaced by one of the same size is caught too.
    /// Absent in older records (the size alone is checked then).
    #[serde(default)]
    pub sha256: Option<String>,
}

impl StagedBinary {
    /// How the file in `bin/` differs from what was staged there, if it does.
    pub fn changed(&self) -> Option<String> {
        let Ok(meta) = std::fs::metadata(&self.path) else {
            return Some("it is gone".to_owned());
        };
        if !meta.is_file() {
            return Some("it is not a file".to_owned());
        }
        if meta.len() != self.size_bytes {
            return Some(format!(
                "{} bytes were staged, it has {} now",
                self.size_bytes,
                meta.len()
            ));
        }
        match &self.sha256 {
            Some(staged) if sha256_of(&self.path).ok().as_ref() != Some(staged) => {
                Some("the same size as what was staged, but other content".to_owned())
            }
            _ => None,
        }
    }
}

/// What to stage: the binary, the file to copy, and how it was made.
#[derive(Debug, Clone)]
pub struct StageInput {
    pub bin: BinTarget,
    pub source: PathBuf,
    pub pgo: bool,
    pub bolted: bool,
}

impl StageManifest {
    /// The stage's record of its last completed build. After an attempt that failed or was
    /// interrupted there is none, and the error says so.
    pub fn load(layout: &Layout, stage: Stage, hint: &str) -> Result<StageManifest> {
        let path = layout.stage_manifest(stage);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(_) => match std::fs::read_to_string(layout.stage_attempt(stage)) {
                Ok(attempt) => bail!(
                    "the {} stage did not complete: its last attempt ({}, {}) failed or was \
                     interrupted, so its binaries in {} are not used; {hint}",
                    stage.name(),
                    attempt.trim(),
                    crate::util::files::age(&layout.stage_attempt(stage)),
                    layout.bin_dir(stage).display()
                ),
                Err(_) => bail!(
                    "the {} stage has not been built ({} is missing); {hint}",
                    stage.name(),
                    path.display()
                ),
            },
        };
        serde_json::from_str(&text)
            .with_context(|| format!("{} is corrupt; {hint}", path.display()))
    }

    /// Called before a stage's outputs start to change: its old record no longer holds, and
    /// until [`StageManifest::save`] the stage counts as attempted, not complete.
    pub fn begin(layout: &Layout, stage: Stage, command: &str) -> Result<()> {
        let path = layout.stage_manifest(stage);
        if path.exists() {
            std::fs::remove_file(&path)
                .with_context(|| format!("could not remove {}", path.display()))?;
        }
        write_atomically(
            &layout.stage_attempt(stage),
            format!("`pgo-build {command}`").as_bytes(),
        )
    }

    /// A new id for a build completed now.
    pub fn new_id() -> String {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!("{nanos:x}-{}", std::process::id())
    }

    pub fn save(&self, layout: &Layout, stage: Stage) -> Result<()> {
        let path = layout.stage_manifest(stage);
        write_atomically(&path, serde_json::to_string_pretty(self)?.as_bytes())?;
        let attempt = layout.stage_attempt(stage);
        if attempt.exists() {
            std::fs::remove_file(&attempt)
                .with_context(|| format!("could not remove {}", attempt.display()))?;
        }
        Ok(())
    }

    /// Whether an instrumented stage was built in continuous mode.
    pub fn continuous(&self) -> bool {
        self.stage_rustflags
            .iter()
            .any(|flag| flag == CONTINUOUS_FLAGS[0])
    }

    /// Whether every staged binary is still there, as recorded.
    pub fn intact(&self) -> bool {
        self.binaries.iter().all(|b| b.changed().is_none())
    }

    /// Refuses a stage whose staged binaries were removed or replaced after staging: every
    /// consumer of staged binaries (compare, explore, bolt, pack, `run`'s cache) checks this
    /// first, since workloads and tools take whatever is in `bin/`. `variant` names the stage
    /// in the message, `rebuild` the command that stages it again.
    pub fn check_staged(&self, variant: &str, rebuild: &str) -> Result<()> {
        for binary in &self.binaries {
            if let Some(how) = binary.changed() {
                bail!(
                    "{} is not the binary the {} stage staged ({how}): it was removed or \
                     replaced since, so the {variant} variant is not what its record says. \
                     Rebuild it with `pgo-build {rebuild}`.",
                    binary.path.display(),
                    self.stage
                );
            }
        }
        Ok(())
    }

    pub fn binary(&self, name: &str) -> Option<&StagedBinary> {
        self.binaries.iter().find(|b| b.name == name)
    }
}

/// Copies `executable` into `bin_dir` as a real file (never a symlink: programs that find
/// siblings through `current_exe()` would otherwise run another stage's binaries).
pub fn stage_binary(input: &StageInput, bin_dir: &Path) -> Result<StagedBinary> {
    let (bin, executable) = (&input.bin, &input.source);
    std::fs::create_dir_all(bin_dir)
        .with_context(|| format!("could not create {}", bin_dir.display()))?;
    let staged = bin_dir.join(&bin.name);
    let partial = bin_dir.join(format!(".{}.partial", bin.name));
    std::fs::copy(executable, &partial).with_context(|| {
        format!(
            "could not copy {} to {}",
            executable.display(),
            partial.display()
        )
    })?;
    std::fs::rename(&partial, &staged)
        .with_context(|| format!("could not move {} into place", staged.display()))?;
    let data = crate::util::files::read(&staged)?;
    Ok(StagedBinary {
        name: bin.name.clone(),
        package: bin.package.clone(),
        size_bytes: data.len() as u64,
        loaded_bytes: loaded_size(&data).ok(),
        compressed_bytes: compressed_size(&data).ok(),
        build_id: build_id(&data)
            .with_context(|| format!("could not read {} as an executable", staged.display()))?,
        path: staged,
        source: input.source.clone(),
        pgo: input.pgo,
        bolted: input.bolted,
        sha256: Some(sha256_hex(&data)),
    })
}

/// The size of an ELF executable without its sections that are not loaded (debug info, symbol
/// and string tables), which is about what `strip` leaves and a stripped release ships.
/// Comparable across stages where file sizes are not (BOLT drops debug info); padding that
/// aligns loaded code (BOLT's huge pages) counts, as it does on disk.
pub fn loaded_size(data: &[u8]) -> Result<u64> {
    use object::{Object, ObjectSection, SectionFlags, SectionKind};
    let file = object::File::parse(data)?;
    let unloaded: u64 = file
        .sections()
        .filter(|section| {
            matches!(section.flags(), SectionFlags::Elf { sh_flags }
                if sh_flags & u64::from(object::elf::SHF_ALLOC) == 0)
                && section.kind() != SectionKind::UninitializedData
        })
        .filter_map(|section| section.file_range().map(|(_, size)| size))
        .sum();
    Ok((data.len() as u64).saturating_sub(unloaded))
}

/// The size of an ELF executable's loaded sections (what [`loaded_size`] counts) compressed
/// with zstd at level 9, about what a release archive takes: function order changes it
/// (`[pgo] startup_order = "balanced-compression"` aims at it) where the file size does not
/// move. Level 9, not 19: within 10% of its size on ripgrep at a fourteenth of the time
/// (0.2 s against 2.9 s for 4.8 MB), and this runs for every staged binary.
pub fn compressed_size(data: &[u8]) -> Result<u64> {
    use object::{Object, ObjectSection, SectionFlags};
    let file = object::File::parse(data)?;
    let mut loaded = Vec::new();
    for section in file.sections() {
        let allocated = matches!(section.flags(), SectionFlags::Elf { sh_flags }
            if sh_flags & u64::from(object::elf::SHF_ALLOC) != 0);
        if allocated && let Some((offset, size)) = section.file_range() {
            let range = offset as usize..(offset + size) as usize;
            loaded.extend_from_slice(data.get(range).context("a section lies outside the file")?);
        }
    }
    Ok(zstd::bulk::compress(&loaded, 9)?.len() as u64)
}

/// The GNU build id of an ELF executable, as lowercase hex.
pub fn build_id(data: &[u8]) -> Result<Option<String>> {
    use object::Object;
    let file = object::File::parse(data)?;
    Ok(file
        .build_id()?
        .map(|id| id.iter().map(|byte| format!("{byte:02x}")).collect()))
}

/// Lines with this prefix on cargo's stderr are pgo-build's own, from its rustc wrapper.
pub const WRAPPER_NOTE_PREFIX: &str = "pgo-build: ";

/// Refuses a profile-use build whose settings differ from the instrumented build's: the
/// profile's function names and hashes would not match, naming each setting that changed.
pub fn check_same_settings(instrumented: &BuildSettings, now: &BuildSettings) -> Result<()> {
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
    compare("target", instrumented.target.clone(), now.target.clone());
    compare("rustc", instrumented.rustc.clone(), now.rustc.clone());
    compare(
        "rustflags",
        format!("{:?}", instrumented.common_rustflags),
        format!("{:?}", now.common_rustflags),
    );
    let c = |settings: &BuildSettings| match &settings.c {
        Some(c) => {
            let variables: Vec<String> = c
                .user_env
                .iter()
                .map(|(k, v)| format!("{k}={v:?}"))
                .collect();
            format!(
                "{} ({}; mode {:?}{}; {})",
                c.clang.display(),
                c.version,
                c.mode,
                c.llvm_ar
                    .as_ref()
                    .map(|ar| format!(", archiver {}", ar.display()))
                    .unwrap_or_default(),
                if variables.is_empty() {
                    "no C variables".to_owned()
                } else {
                    variables.join(" ")
                }
            )
        }
        None => "the user's C compiler".to_owned(),
    };
    compare("C compiler", c(instrumented), c(now));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_hashes_are_read_from_file_and_directory_names() {
        assert_eq!(
            unit_hash("libfoo_bar-0123456789abcdef.rlib"),
            Some("0123456789abcdef")
        );
        assert_eq!(unit_hash("app-5052f5fef6385d06"), Some("5052f5fef6385d06"));
        assert_eq!(
            unit_hash("app-5052f5fef6385d06.d"),
            Some("5052f5fef6385d06")
        );
        assert_eq!(
            unit_hash("my-app-5052f5fef6385d06"),
            Some("5052f5fef6385d06")
        );
        assert_eq!(unit_hash("app"), None);
        assert_eq!(unit_hash("my-app"), None);
        assert_eq!(unit_hash("app-5052f5fef6385d06x"), None);
    }
}
