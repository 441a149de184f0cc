//! Per-binary accounting of a training: every process of a binary (started, wrote a profile,
//! ended without writing), the profile files and bytes, and the coverage of its functions.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::profdata_merge::merge_to;
use super::raw::{RawProfile, check_readable, collect, explain_other_llvm};
use super::start_marker;
use crate::cargo::manifest::StageManifest;
pub use crate::report::BinaryProfiles;
use crate::toolchain::LlvmTool;
use crate::util::command::Cmd;
use crate::util::printer::Printer;

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
pub(super) fn per_binary<'a>(
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
        // Saturating: the counts come from files on disk (a merge ledger may say anything).
        let wrote = figures.files.saturating_sub(figures.empty_files);
        figures.died = figures.processes.saturating_sub(wrote);
        figures.unusable_files = wrote.saturating_sub(figures.valid_files);
    }
    table
}
