//! Raw profiles: finding them, checking every file before it is merged, and attributing each
//! to the binary that wrote it.
//!
//! Invariants: a 0-byte file (left by a process killed before its exit handlers ran), a file
//! llvm-profdata rejects, and a file from a binary this stage did not build are never merged
//! silently: each is listed with the reason. `llvm-profdata merge` would skip 0-byte inputs and
//! exit 0, which is exactly the silent degradation this module exists to prevent.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;

use super::compact;
use super::format::read_raw_version;
use crate::cargo::manifest::StageManifest;
use crate::toolchain::LlvmTool;
use crate::util::command::Cmd;
use crate::util::files::{file_name, sorted_entries};
use crate::util::printer::Printer;

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

/// Merges every not-yet-rejected file on its own with llvm-profdata, in parallel: the same
/// operation that will consume it, so a file that passes cannot fail the merge later. Files it
/// cannot merge (truncated, corrupt, another LLVM's format) are rejected with its message.
pub(super) fn check_readable(
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
pub(super) fn explain_other_llvm(profiles: &mut [RawProfile], llvm_major: u32) {
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

#[cfg(test)]
mod tests {
    use super::super::accounting::per_binary;
    use super::super::format::raw_header;
    use super::*;
    use crate::cargo::manifest::StagedBinary;
    use crate::cargo::settings::BuildSettings;

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
            stage: crate::layout::Stage::Instrumented,
            settings: BuildSettings {
                profile: "release".into(),
                features: vec![],
                target: "h".into(),
                rustc: "r".into(),
                common_rustflags: vec![],
                profile_settings: String::new(),
                cargo_config: vec![],
                c: None,
                stable_names: true,
                preinline: true,
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
    fn a_tools_output_is_quoted_on_one_line_and_cut() {
        let said = "warning: /p/x.profraw: malformed instrumentation profile data\n\nerror: no profile can be merged\n";
        assert_eq!(
            quoted_tool_output(said),
            "warning: /p/x.profraw: malformed instrumentation profile data; error: no profile can be merged"
        );
        assert_eq!(quoted_tool_output(&"e".repeat(1000)).chars().count(), 401);
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
