//! Raw profiles: finding them, checking every file before it is merged, attributing each to
//! the binary that wrote it, and merging them into one content-addressed `.profdata`.
//!
//! Invariants: a 0-byte file (left by a process killed before its exit handlers ran), a file
//! llvm-profdata rejects, and a file from a binary this stage did not build are never merged
//! silently: each is listed with the reason. `llvm-profdata merge` would skip 0-byte inputs and
//! exit 0, which is exactly the silent degradation this module exists to prevent.

pub mod bundle;
pub mod diagnostics;
pub mod insight;
pub mod start_marker;
pub mod startup_order;
pub mod training_record;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::cargo::build::StageManifest;
use crate::toolchain::LlvmTool;
use crate::util::command::Cmd;
use crate::util::printer::Printer;

pub mod compact;

/// The `LLVM_PROFILE_FILE` pattern inside a workload's raw directory. `%b` (the binary's build
/// id) attributes every file to the binary that wrote it; `%p` gives each process its own file,
/// which the runtime truncates at start-up, so a process killed before its exit handlers ran
/// leaves a 0-byte file and every process is accounted for. Online merging (`%m`) would keep
/// the file count down, but a killed process then leaves no trace at all (checked with LLVM 22):
/// "killed" could not be told from "never ran". A pid reused by the same binary within one
/// workload overwrites the earlier file: that takes more processes than `pid_max` (32768 on
/// these machines) within one workload.
pub const RAW_PATTERN: &str = "%b_%p.profraw";
/// In continuous mode (`%c`) the counters live in the mmapped file itself, so a process killed
/// by any signal still leaves them.
pub const CONTINUOUS_RAW_PATTERN: &str = "%b_%p%c.profraw";

/// Magic of a 64-bit LLVM raw profile (`\xfflprofr\x81`, little-endian u64 at offset 0); the
/// format version is the u64 at offset 8.
const RAW_MAGIC_64: u64 = 0xff6c_7072_6f66_7281;
/// Magic of an indexed profile (`.profdata`), as the little-endian u64 at offset 0.
const INDEXED_MAGIC: u64 = 0x8169_666f_7270_6cff;
/// The top byte of the version word holds variant flags (IR-level, context-sensitive, …).
const VERSION_MASK: u64 = 0x00ff_ffff_ffff_ffff;

pub fn raw_pattern(continuous: bool) -> &'static str {
    if continuous {
        CONTINUOUS_RAW_PATTERN
    } else {
        RAW_PATTERN
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RawProfile {
    pub path: PathBuf,
    pub workload: String,
    pub size_bytes: u64,
    /// The binary whose build id is in the file name, if it is one of the stage's.
    pub binary: Option<String>,
    /// The raw format version in the header, when the file starts with LLVM's raw magic.
    pub raw_version: Option<u64>,
    /// Why it is excluded from the merge; `None` for a valid file.
    pub rejected: Option<String>,
    /// The processes whose profiles it holds: 1 for a raw file, more for the profile their
    /// raw files were merged into while training ran (see [`compact`]).
    pub processes: usize,
}

/// The workload directories under `raw_dir`, by name.
pub fn workload_dirs(raw_dir: &Path) -> Vec<(String, PathBuf)> {
    let mut dirs: Vec<(String, PathBuf)> = std::fs::read_dir(raw_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.path().is_dir())
        .map(|entry| {
            (
                entry.file_name().to_string_lossy().into_owned(),
                entry.path(),
            )
        })
        .collect();
    dirs.sort();
    dirs
}

/// Every `*.profraw` in the given workload directories, attributed to binaries by build id.
/// In the directories of `cargo_runs` (cargo workloads), files of other binaries are the
/// workload's own bench, test or example binaries: usable, attributed to the workload.
pub fn collect(
    workload_dirs: &[(String, PathBuf)],
    instrumented: &StageManifest,
    cargo_runs: &BTreeSet<String>,
) -> Result<Vec<RawProfile>> {
    let by_build_id: BTreeMap<&str, &str> = instrumented
        .binaries
        .iter()
        .filter_map(|b| Some((b.build_id.as_deref()?, b.name.as_str())))
        .collect();
    let mut profiles = Vec::new();
    for (workload, workload_dir) in workload_dirs {
        let ledger = compact::Ledger::load(workload_dir)?;
        for path in sorted_entries(workload_dir)? {
            if let Some(build_id) = compact::merged_build_id(&path) {
                let merged = ledger.by_build_id.get(build_id);
                let binary = by_build_id.get(build_id).map(|b| b.to_string());
                let rejected = if merged.is_none() {
                    Some(format!(
                        "a merged profile {} does not count: the training run did not write \
                         it; re-run `pgo-build train`",
                        compact::LEDGER
                    ))
                } else if binary.is_none() && !cargo_runs.contains(workload) {
                    Some(foreign_build_id(build_id))
                } else {
                    None
                };
                profiles.push(RawProfile {
                    size_bytes: std::fs::metadata(&path)?.len(),
                    path,
                    workload: workload.clone(),
                    binary,
                    raw_version: merged.and_then(|m| m.raw_version),
                    rejected,
                    processes: merged.map_or(1, |m| m.files),
                });
                continue;
            }
            if path.extension().is_none_or(|ext| ext != "profraw") {
                continue;
            }
            let size_bytes = std::fs::metadata(&path)?.len();
            let name = file_name(&path);
            let build_id = name.split('_').next().unwrap_or_default();
            let binary = by_build_id.get(build_id).map(|b| b.to_string());
            let rejected = if binary.is_none() && !cargo_runs.contains(workload) {
                Some(foreign_build_id(build_id))
            } else if size_bytes == 0 {
                Some(
                    "0 bytes: no process of this binary exited through its exit handlers (killed \
                     by a signal, abort, or _exit), so none wrote its counters"
                        .to_owned(),
                )
            } else {
                None
            };
            profiles.push(RawProfile {
                raw_version: read_raw_version(&path),
                path,
                workload: workload.clone(),
                size_bytes,
                binary,
                rejected,
                processes: 1,
            });
        }
    }
    Ok(profiles)
}

fn foreign_build_id(build_id: &str) -> String {
    format!(
        "written by a binary that is not one of the current instrumented binaries (build id \
         {build_id}): a stale file from an older instrumented build, or another program run \
         with this LLVM_PROFILE_FILE; re-run `pgo-build train`"
    )
}

fn read_raw_version(path: &Path) -> Option<u64> {
    header_version(path, RAW_MAGIC_64)
}

/// The format version of an indexed profile, `None` when the file is not one.
pub fn indexed_version(path: &Path) -> Option<u64> {
    header_version(path, INDEXED_MAGIC)
}

/// The version word (flags masked off) of a profile file starting with `magic`.
fn header_version(path: &Path, magic: u64) -> Option<u64> {
    use std::io::Read;
    let mut header = [0u8; 16];
    std::fs::File::open(path)
        .ok()?
        .read_exact(&mut header)
        .ok()?;
    let found = u64::from_le_bytes(header[..8].try_into().ok()?);
    let version = u64::from_le_bytes(header[8..].try_into().ok()?);
    (found == magic).then_some(version & VERSION_MASK)
}

/// The indexed format version the given llvm-profdata writes (from merging an empty profile).
pub fn written_indexed_version(
    profdata: &LlvmTool,
    scratch_dir: &Path,
    printer: &Printer,
) -> Result<u64> {
    crate::util::files::create_dir_all(scratch_dir)?;
    let text = scratch_dir.join("empty.proftext");
    crate::util::files::write(&text, "# IR level Instrumentation Flag\n:ir\n")?;
    let output = scratch_dir.join("empty.profdata");
    Cmd::new(&profdata.path)
        .args(["merge", "-o"])
        .arg(&output)
        .arg(&text)
        .stdout_checked(printer)?;
    indexed_version(&output)
        .context("llvm-profdata wrote a profile pgo-build cannot read the version of")
}

/// Merges every not-yet-rejected file on its own with llvm-profdata, in parallel: the same
/// operation that will consume it, so a file that passes cannot fail the merge later. Files it
/// cannot merge (truncated, corrupt, another LLVM's format) are rejected with its message.
fn check_readable(
    profiles: &mut [RawProfile],
    profdata: &LlvmTool,
    scratch_dir: &Path,
    printer: &Printer,
) -> Result<()> {
    std::fs::create_dir_all(scratch_dir)
        .with_context(|| format!("could not create {}", scratch_dir.display()))?;
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let chunk = profiles.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        for (index, group) in profiles.chunks_mut(chunk).enumerate() {
            scope.spawn(move || {
                let output_file = scratch_dir.join(format!("check-{index}.profdata"));
                for profile in group.iter_mut().filter(|p| p.rejected.is_none()) {
                    let output = Cmd::new(&profdata.path)
                        .args(["merge", "-o"])
                        .arg(&output_file)
                        .arg(&profile.path)
                        .output(printer);
                    profile.rejected = match output {
                        Ok(output) if output.status.success() => None,
                        Ok(output) => Some(format!(
                            "llvm-profdata cannot read it (it said: \"{}\")",
                            quoted_tool_output(&String::from_utf8_lossy(&output.stderr))
                        )),
                        Err(err) => Some(format!("could not run llvm-profdata: {err:#}")),
                    };
                }
            });
        }
    });
    for index in 0..threads {
        let _ = std::fs::remove_file(scratch_dir.join(format!("check-{index}.profdata")));
    }
    Ok(())
}

/// A tool's stderr as one quoted line inside pgo-build's own message: its "error:" lines
/// must not read as pgo-build's, and a long one is cut.
pub fn quoted_tool_output(stderr: &str) -> String {
    let joined = stderr
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    let count = joined.chars().count();
    if count <= 400 {
        joined
    } else {
        format!("{}…", joined.chars().take(400).collect::<String>())
    }
}

/// Replaces the reason of files whose raw format version differs from the one our own
/// instrumented binaries wrote: they come from another LLVM, and the fix is not "re-train".
fn explain_other_llvm(profiles: &mut [RawProfile], llvm_major: u32) {
    let mut counts: BTreeMap<u64, usize> = BTreeMap::new();
    for profile in profiles
        .iter()
        .filter(|p| p.rejected.is_none() && p.binary.is_some())
    {
        if let Some(version) = profile.raw_version {
            *counts.entry(version).or_default() += profile.processes;
        }
    }
    let Some((&expected, _)) = counts.iter().max_by_key(|(_, n)| **n) else {
        return;
    };
    for profile in profiles.iter_mut() {
        if let Some(version) = profile.raw_version
            && version != expected
        {
            profile.rejected = Some(format!(
                "written by another LLVM than rustc's (raw profile format version {version}; the \
                 instrumented binaries of rustc's LLVM {llvm_major} write version {expected}). \
                 Usually C/C++ code compiled by the `cc` crate or a build system with a compiler \
                 that picked up profile flags (e.g. CFLAGS=-fprofile-generate): build that code \
                 without profile flags, or with clang {llvm_major}"
            ));
        }
    }
}

/// Per-binary figures after training. One raw file is one process (see [`RAW_PATTERN`]); a
/// merged one counts the processes whose files it holds.
#[derive(Debug, Default, Clone, Serialize, serde::Deserialize)]
pub struct BinaryProfiles {
    /// Processes that started: recorded starts, or profile files where more.
    pub processes: usize,
    /// Processes that ended without writing a profile: stopped by a signal, `abort`, `_exit`.
    pub died: usize,
    /// Profile files (one per process that got as far as creating one).
    pub files: usize,
    /// Files whose profile is usable.
    pub valid_files: usize,
    /// Bytes of the usable files (what is merged; excluded files are not counted).
    pub bytes: u64,
    /// 0-byte files: processes that were stopped after the runtime created their file.
    pub empty_files: usize,
    /// Non-empty files that cannot be merged (corrupt, written twice, another LLVM's): their
    /// processes wrote, but nothing usable.
    #[serde(default)]
    pub unusable_files: usize,
    /// Functions with non-zero counts in this binary's merged profile.
    pub covered_functions: Option<u64>,
    /// Instrumented functions in this binary's profile.
    pub instrumented_functions: Option<u64>,
}

impl BinaryProfiles {
    pub fn coverage_text(&self) -> String {
        match (self.covered_functions, self.instrumented_functions) {
            (Some(covered), Some(total)) if total > 0 => {
                format!(
                    "{covered}/{total} ({:.0}%)",
                    100.0 * covered as f64 / total as f64
                )
            }
            _ => "-".to_owned(),
        }
    }
}

/// Everything known about the raw profiles of the last training.
#[derive(Clone)]
pub struct Accounting {
    pub profiles: Vec<RawProfile>,
    pub per_binary: BTreeMap<String, BinaryProfiles>,
}

impl Accounting {
    pub fn valid_inputs(&self) -> Vec<&Path> {
        self.profiles
            .iter()
            .filter(|p| p.rejected.is_none())
            .map(|p| p.path.as_path())
            .collect()
    }

    /// The usable files of one binary.
    pub fn valid_inputs_of(&self, binary: &str) -> Vec<&Path> {
        valid_inputs_of(&self.profiles, binary)
    }

    /// Per cargo workload run: the usable files its own bench/test/example binaries wrote
    /// (they go into the profile of every binary, see [`collect`]).
    pub fn cargo_inputs(&self) -> BTreeMap<&str, Vec<&Path>> {
        let mut runs: BTreeMap<&str, Vec<&Path>> = BTreeMap::new();
        for profile in &self.profiles {
            if profile.binary.is_none() && profile.rejected.is_none() {
                runs.entry(profile.workload.as_str())
                    .or_default()
                    .push(profile.path.as_path());
            }
        }
        runs
    }

    pub fn rejected(&self) -> impl Iterator<Item = &RawProfile> {
        self.profiles.iter().filter(|p| p.rejected.is_some())
    }
}

/// The raw profile directories of a training: workload run name → directory, and which runs
/// are cargo workloads (see [`collect`]).
pub struct RawDirs<'a> {
    pub workloads: &'a [(String, PathBuf)],
    pub cargo_runs: &'a BTreeSet<String>,
}

/// Collects, attributes and checks every raw profile of the given workload directories, and
/// measures each binary's coverage.
pub fn account(
    dirs: &RawDirs,
    instrumented: &StageManifest,
    binaries: &[&str],
    profdata: &LlvmTool,
    llvm_major: u32,
    scratch_dir: &Path,
    printer: &Printer,
) -> Result<Accounting> {
    let workload_dirs = dirs.workloads;
    let mut profiles = collect(workload_dirs, instrumented, dirs.cargo_runs)?;
    check_readable(&mut profiles, profdata, scratch_dir, printer)?;
    explain_other_llvm(&mut profiles, llvm_major);
    let mut starts = BTreeMap::new();
    for (executable, count) in start_marker::starts_by_executable(workload_dirs) {
        if let Some(binary) = instrumented.binaries.iter().find(|b| b.path == executable) {
            *starts.entry(binary.name.clone()).or_default() += count;
        }
    }
    let mut per_binary = per_binary(&profiles, &starts, binaries.iter().copied());
    for (binary, figures) in per_binary.iter_mut() {
        let inputs = valid_inputs_of(&profiles, binary);
        if inputs.is_empty() {
            continue;
        }
        let (covered, total) = coverage(&inputs, profdata, scratch_dir, printer)
            .with_context(|| format!("could not measure the profile coverage of `{binary}`"))?;
        figures.covered_functions = Some(covered);
        figures.instrumented_functions = Some(total);
    }
    Ok(Accounting {
        profiles,
        per_binary,
    })
}

fn valid_inputs_of<'a>(profiles: &'a [RawProfile], binary: &str) -> Vec<&'a Path> {
    profiles
        .iter()
        .filter(|p| p.rejected.is_none() && p.binary.as_deref() == Some(binary))
        .map(|p| p.path.as_path())
        .collect()
}

/// (functions with non-zero counts, all functions) of the merge of `inputs`.
pub fn coverage(
    inputs: &[&Path],
    profdata: &LlvmTool,
    scratch_dir: &Path,
    printer: &Printer,
) -> Result<(u64, u64)> {
    let merged = scratch_dir.join("coverage.profdata");
    merge_to(inputs, &merged, profdata, printer)?;
    let text = Cmd::new(&profdata.path)
        .args(["show", "--list-below-cutoff", "--value-cutoff=1"])
        .arg(&merged)
        .stdout_checked(printer)?;
    let count = |prefix: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(prefix))
            .and_then(|rest| rest.trim().parse::<u64>().ok())
    };
    let (Some(cold), Some(run)) = (
        count("Number of functions with maximum count (< 1):"),
        count("Number of functions with maximum count (>= 1):"),
    ) else {
        bail!("unexpected `llvm-profdata show --list-below-cutoff` output:\n{text}");
    };
    Ok((run, cold + run))
}

/// `starts`: recorded process starts per binary (see `start_marker`).
fn per_binary<'a>(
    profiles: &[RawProfile],
    starts: &BTreeMap<String, usize>,
    binaries: impl Iterator<Item = &'a str>,
) -> BTreeMap<String, BinaryProfiles> {
    let mut table: BTreeMap<String, BinaryProfiles> = binaries
        .map(|b| (b.to_owned(), BinaryProfiles::default()))
        .collect();
    for profile in profiles {
        let Some(entry) = profile.binary.as_ref().and_then(|b| table.get_mut(b)) else {
            continue;
        };
        entry.files += profile.processes;
        entry.empty_files += usize::from(profile.size_bytes == 0);
        if profile.rejected.is_none() {
            entry.valid_files += profile.processes;
            entry.bytes += profile.size_bytes;
        }
    }
    for (binary, figures) in table.iter_mut() {
        figures.processes = figures.files.max(starts.get(binary).copied().unwrap_or(0));
        figures.died = figures.processes - (figures.files - figures.empty_files);
        figures.unusable_files =
            (figures.files - figures.empty_files).saturating_sub(figures.valid_files);
    }
    table
}

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct MergedProfile {
    pub path: PathBuf,
    pub size_bytes: u64,
    pub total_functions: u64,
}

/// Merges `inputs` into `profiles_dir/merged-<content hash>.profdata`. An existing file with the
/// same content is left untouched: rewriting it would make cargo rebuild everything, and the
/// hash in the name is what makes cargo rebuild when the content does change.
pub fn merge(
    inputs: &[&Path],
    profiles_dir: &Path,
    profdata: &LlvmTool,
    printer: &Printer,
) -> Result<MergedProfile> {
    let weighted: Vec<(u64, &Path)> = inputs.iter().map(|path| (1, *path)).collect();
    merge_weighted(&weighted, profiles_dir, profdata, printer)
}

/// [`merge`] with an integer weight (>= 1) per input: each input's counts are multiplied by
/// it (`llvm-profdata merge --weighted-input`).
pub fn merge_weighted(
    inputs: &[(u64, &Path)],
    profiles_dir: &Path,
    profdata: &LlvmTool,
    printer: &Printer,
) -> Result<MergedProfile> {
    crate::util::files::create_dir_all(profiles_dir)?;
    let list = profiles_dir.join("merge-inputs.txt");
    // One input per line, `weight,path` (llvm-profdata's --input-files format).
    let lines: Vec<String> = inputs
        .iter()
        .map(|(weight, path)| format!("{weight},{}", path.display()))
        .collect();
    crate::util::files::write(&list, lines.join("\n") + "\n")?;
    let partial = profiles_dir.join("merged.profdata.partial");
    // No --sparse: it drops zero-count functions, and with them the "cold" marking.
    Cmd::new(&profdata.path)
        .args(["merge", "-o"])
        .arg(&partial)
        .arg(format!("--input-files={}", list.display()))
        .stdout_checked(printer)
        .context("llvm-profdata could not merge the profiles")?;
    let data = crate::util::files::read(&partial)?;
    let path = install_content_addressed(&partial, &data, profiles_dir)?;
    let total_functions = total_functions(&path, profdata, printer)?;
    Ok(MergedProfile {
        path,
        size_bytes: data.len() as u64,
        total_functions,
    })
}

/// Moves `partial` (whose content is `data`) to `profiles_dir/merged-<content hash>.profdata`,
/// leaving an existing file of the same content untouched, and removes other merged files.
pub fn install_content_addressed(
    partial: &Path,
    data: &[u8],
    profiles_dir: &Path,
) -> Result<PathBuf> {
    let path = profiles_dir.join(format!("merged-{}.profdata", content_hash(data)));
    if path.is_file() {
        crate::util::files::remove_file(partial)?;
    } else {
        crate::util::files::rename(partial, &path)?;
    }
    for stale in sorted_entries(profiles_dir)? {
        let name = file_name(&stale);
        if name.starts_with("merged-") && name.ends_with(".profdata") && stale != path {
            crate::util::files::remove_file(&stale)?;
        }
    }
    Ok(path)
}

/// The profile `-Cprofile-use` names: a copy of `profile` (a content-addressed
/// `merged-<hash>.profdata`) in a per-user directory outside every checkout, so the flag is the
/// same in every checkout of the workspace and a compile cache (sccache keys on the command
/// line) can serve another checkout. Copied only when missing or different: a rewritten file
/// would make cargo rebuild everything. Falls back to `profile` itself when that directory
/// cannot be used safely.
pub fn checkout_independent(profile: &Path) -> PathBuf {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let Some(name) = profile.file_name() else {
        return profile.to_owned();
    };
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    let dir = checkout_independent_dir();
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
    // Another user's directory (or a symlink planted there) is never used.
    let ours = std::fs::symlink_metadata(&dir)
        .is_ok_and(|m| m.is_dir() && m.uid() == uid && m.mode() & 0o022 == 0);
    let Ok(data) = std::fs::read(profile) else {
        return profile.to_owned();
    };
    if !ours {
        return profile.to_owned();
    }
    let copy = dir.join(name);
    if std::fs::read(&copy).is_ok_and(|existing| existing == data) {
        return copy;
    }
    let partial = dir.join(format!(
        "{}.{}.partial",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = std::fs::write(&partial, &data).and_then(|()| std::fs::rename(&partial, &copy));
    match written {
        Ok(()) => copy,
        Err(_) => {
            let _ = std::fs::remove_file(&partial);
            profile.to_owned()
        }
    }
}

/// Where [`checkout_independent`] copies profiles: one directory per user.
pub fn checkout_independent_dir() -> PathBuf {
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    std::env::temp_dir().join(format!("pgo-build-{uid}"))
}

/// 16 hex digits of SHA-256.
pub fn content_hash(data: &[u8]) -> String {
    crate::util::files::sha256_hex(data)[..16].to_owned()
}

/// Merges `inputs` into `output` (no content addressing: an intermediate file).
pub fn merge_to(
    inputs: &[&Path],
    output: &Path,
    profdata: &LlvmTool,
    printer: &Printer,
) -> Result<()> {
    if let Some(dir) = output.parent() {
        crate::util::files::create_dir_all(dir)?;
    }
    Cmd::new(&profdata.path)
        .args(["merge", "-o"])
        .arg(output)
        .args(inputs)
        .stdout_checked(printer)
        .context("llvm-profdata could not merge the profiles")
        .map(drop)
}

/// The size of an indexed profile's data.
pub struct Summary {
    /// Sum of every counter.
    pub total_count: u64,
    pub functions: u64,
}

/// "Total count" and "Total functions" from `llvm-profdata show --detailed-summary`.
pub fn summary(profile: &Path, profdata: &LlvmTool, printer: &Printer) -> Result<Summary> {
    let text = Cmd::new(&profdata.path)
        .args(["show", "--detailed-summary"])
        .arg(profile)
        .stdout_checked(printer)?;
    let field = |prefix: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(prefix))
            .and_then(|rest| rest.trim().parse::<u64>().ok())
    };
    match (field("Total count:"), field("Total functions:")) {
        (Some(total_count), Some(functions)) => Ok(Summary {
            total_count,
            functions,
        }),
        _ => bail!(
            "unexpected `llvm-profdata show --detailed-summary` output for {}:\n{text}",
            profile.display()
        ),
    }
}

/// "Total functions" from `llvm-profdata show`.
pub fn total_functions(profile: &Path, profdata: &LlvmTool, printer: &Printer) -> Result<u64> {
    let text = Cmd::new(&profdata.path)
        .arg("show")
        .arg(profile)
        .stdout_checked(printer)?;
    let Some(count) = text
        .lines()
        .find_map(|line| line.strip_prefix("Total functions:"))
        .and_then(|n| n.trim().parse().ok())
    else {
        bail!(
            "`llvm-profdata show {}` printed no function count:\n{text}",
            profile.display()
        );
    };
    Ok(count)
}

fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut entries = std::fs::read_dir(dir)
        .with_context(|| format!("could not list {}", dir.display()))?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<std::io::Result<Vec<_>>>()?;
    entries.sort();
    Ok(entries)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tools_output_is_quoted_on_one_line_and_cut() {
        let said = "warning: /p/x.profraw: malformed instrumentation profile data\n\nerror: no profile can be merged\n";
        assert_eq!(
            quoted_tool_output(said),
            "warning: /p/x.profraw: malformed instrumentation profile data; error: no profile can be merged"
        );
        assert_eq!(quoted_tool_output(&"e".repeat(1000)).chars().count(), 401);
    }
    use crate::cargo::build::{BuildSettings, StagedBinary};

    fn raw_header(version: u64) -> Vec<u8> {
        let mut bytes = RAW_MAGIC_64.to_le_bytes().to_vec();
        // With the IR-level flag in the top byte, as rustc's runtime writes it.
        bytes.extend((version | 1 << 56).to_le_bytes());
        bytes.extend([0u8; 64]);
        bytes
    }

    #[test]
    fn files_of_another_llvm_are_named_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path().join("raw/w");
        std::fs::create_dir_all(&raw).unwrap();
        std::fs::write(raw.join("aaaa_1.profraw"), raw_header(10)).unwrap();
        std::fs::write(raw.join("bbbb_2.profraw"), raw_header(10)).unwrap();
        // A C program built with an older clang, writing into the same directory.
        std::fs::write(raw.join("%b_3.profraw"), raw_header(8)).unwrap();
        let mut profiles = collect(
            &workload_dirs(&dir.path().join("raw")),
            &manifest(),
            &BTreeSet::new(),
        )
        .unwrap();
        assert_eq!(
            profiles
                .iter()
                .filter_map(|p| p.raw_version)
                .collect::<Vec<_>>(),
            [8, 10, 10]
        );
        explain_other_llvm(&mut profiles, 22);
        let other = profiles.iter().find(|p| p.raw_version == Some(8)).unwrap();
        let reason = other.rejected.as_deref().unwrap();
        assert!(reason.contains("another LLVM"), "{reason}");
        assert!(
            reason.contains("version 8") && reason.contains("write version 10"),
            "{reason}"
        );
        assert!(
            profiles
                .iter()
                .filter(|p| p.raw_version == Some(10))
                .all(|p| p.rejected.is_none())
        );
    }

    #[test]
    fn raw_version_is_read_only_from_raw_profiles() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("x.profraw");
        std::fs::write(&file, raw_header(10)).unwrap();
        assert_eq!(read_raw_version(&file), Some(10));
        std::fs::write(&file, b"garbage that is long enough").unwrap();
        assert_eq!(read_raw_version(&file), None);
        std::fs::write(&file, b"").unwrap();
        assert_eq!(read_raw_version(&file), None);
    }

    fn manifest() -> StageManifest {
        let bin = |name: &str, id: &str| StagedBinary {
            name: name.into(),
            package: "p".into(),
            path: PathBuf::from("/bin").join(name),
            source: PathBuf::new(),
            size_bytes: 1,
            loaded_bytes: None,
            compressed_bytes: None,
            build_id: Some(id.into()),
            pgo: false,
            bolted: false,
            sha256: None,
        };
        StageManifest {
            stage: "instrumented".into(),
            settings: BuildSettings {
                profile: "release".into(),
                features: vec![],
                target: "h".into(),
                rustc: "r".into(),
                common_rustflags: vec![],
                profile_settings: String::new(),
                cargo_config: vec![],
                c: None,
            },
            stage_rustflags: vec![],
            binaries: vec![
                bin("server", "aaaa"),
                bin("worker", "bbbb"),
                bin("idle", "cccc"),
            ],
            id: "1".into(),
            sources: None,
            upstream: Default::default(),
        }
    }

    #[test]
    fn files_are_attributed_and_bad_ones_rejected_with_reasons() {
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path().join("raw/w1");
        std::fs::create_dir_all(&raw).unwrap();
        std::fs::write(raw.join("aaaa_123_0.profraw"), b"data").unwrap();
        std::fs::write(raw.join("bbbb_456_0.profraw"), b"").unwrap();
        std::fs::write(raw.join("dddd_789_0.profraw"), b"data").unwrap();
        std::fs::write(raw.join("notes.txt"), b"ignored").unwrap();
        let profiles = collect(
            &workload_dirs(&dir.path().join("raw")),
            &manifest(),
            &BTreeSet::new(),
        )
        .unwrap();
        assert_eq!(profiles.len(), 3);
        assert_eq!(profiles[0].binary.as_deref(), Some("server"));
        assert!(profiles[0].rejected.is_none());
        assert!(
            profiles[1]
                .rejected
                .as_deref()
                .unwrap()
                .starts_with("0 bytes")
        );
        assert!(
            profiles[2]
                .rejected
                .as_deref()
                .unwrap()
                .contains("build id dddd")
        );

        let starts = BTreeMap::from([("worker".to_owned(), 3), ("idle".to_owned(), 0)]);
        let table = per_binary(&profiles, &starts, ["server", "worker", "idle"].into_iter());
        assert_eq!(table["server"].coverage_text(), "-");
        assert_eq!(table["server"].valid_files, 1);
        assert_eq!(table["worker"].empty_files, 1);
        assert_eq!(table["worker"].valid_files, 0);
        assert_eq!(table["idle"].files, 0);
        assert_eq!(table["idle"].processes, 0);
        // Three recorded starts, one 0-byte file, no profile: all three died.
        assert_eq!((table["worker"].processes, table["worker"].died), (3, 3));
        assert_eq!((table["server"].processes, table["server"].died), (1, 0));
    }
}
