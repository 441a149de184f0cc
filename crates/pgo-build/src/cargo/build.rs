//! One `cargo build` for all selected binaries of a stage (in batches when asked), its
//! artifacts and diagnostics.
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

use super::settings::BuildSettings;
use crate::cargo::timings::{self, TimedUnit};
use crate::cargo::workspace::{BinTarget, cargo_program};
use crate::exec::TrackedTree;
use crate::layout::{Layout, Stage};
use crate::util::command::Cmd;
use crate::util::printer::Printer;

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

/// What a build script's run tells: the dynamic libraries a target unit's script links (by
/// package), and its run's unit hash (`build/<package>-<hash>/out`: a unit of its own).
fn note_build_script(
    script: &cargo_metadata::BuildScript,
    target_units: &Path,
    dynamic: &mut BTreeMap<String, Vec<String>>,
    unit_hashes: &mut BTreeSet<String>,
) {
    let libs = crate::toolchain::cross_language::dynamic_libs(&script.linked_libs);
    // `build/<package>-<hash>/out` of a target unit.
    if let Some(package) = script
        .out_dir
        .parent()
        .filter(|_| script.out_dir.as_std_path().starts_with(target_units))
        .and_then(|dir| dir.file_name())
        .filter(|name| unit_hash(name).is_some())
        .and_then(|name| Some(&name[..name.len().checked_sub(17)?]))
        && !libs.is_empty()
    {
        dynamic.insert(package.to_owned(), libs);
    }
    if let Some(hash) = script
        .out_dir
        .parent()
        .and_then(|dir| dir.file_name())
        .and_then(unit_hash)
    {
        unit_hashes.insert(hash.to_owned());
    }
}

/// Why cargo failed: its last lines, with help for a failure pgo-build knows.
fn cargo_failed(
    request: &BuildRequest,
    status: std::process::ExitStatus,
    command: &str,
    stderr_tail: &[String],
) -> anyhow::Error {
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
    anyhow::anyhow!(
        "cargo build for the {} stage failed ({status}). Command:\n  {command}\ncargo said:\n{}{known}",
        request.stage.name(),
        tail.join("\n")
    )
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
        "cargo build of {} ({} stage)",
        crate::util::units::count(bins.len(), "binary", "binaries"),
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
                    bar.suspend(|| printer.passthrough_always(&diagnostic.rendered));
                } else if show_diagnostic(&diagnostic) {
                    bar.suspend(|| printer.passthrough(&diagnostic.rendered));
                }
                diagnostics.push(diagnostic);
            }
            Message::BuildScriptExecuted(script) => {
                note_build_script(&script, &target_units, &mut dynamic, &mut unit_hashes);
            }
            _ => {}
        }
    }
    bar.finish_and_clear();
    let status = child.wait().context("could not wait for cargo")?;
    let stderr_tail = stderr_thread.join().unwrap_or_default();
    tree.finish()?;
    if !status.success() {
        return Err(cargo_failed(request, status, &cmd.display(), &stderr_tail));
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

/// Lines with this prefix on cargo's stderr are pgo-build's own, from its rustc wrapper.
pub const WRAPPER_NOTE_PREFIX: &str = "pgo-build: ";

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
