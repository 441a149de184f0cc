//! Records of process starts in instrumented binaries (see `start_marker.c` for why).
//!
//! pgo-build compiles the constructor with the target's C compiler (see [`c_compiler`]) and
//! links the object into the instrumented stage only (`-Clink-arg`: no effect on codegen,
//! so profile names are unaffected). Workloads get `PGO_BUILD_START_DIR`; each instrumented
//! process then leaves `<pid>.start` there with its executable's path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use std::ffi::OsString;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use crate::toolchain::targets::Platform;
use crate::util::command::Cmd;
use crate::util::printer::Printer;

pub const START_DIR_ENV: &str = "PGO_BUILD_START_DIR";
const SOURCE: &str = include_str!("start_marker.c");

/// The C compiler for the target, as the `cc` crate finds it: `CC_<triple>` (with `-` or `_`),
/// else for this machine's architecture `$CC` or `cc`, else the target's linker when it is a
/// C compiler driver (`aarch64-linux-gnu-gcc`).
fn c_compiler(platform: &Platform) -> Result<OsString> {
    for var in [
        format!("CC_{}", platform.triple),
        format!("CC_{}", platform.triple.replace('-', "_")),
    ] {
        if let Some(cc) = std::env::var_os(&var) {
            return Ok(cc);
        }
    }
    if platform.native_arch() {
        return Ok(std::env::var_os("CC").unwrap_or_else(|| "cc".into()));
    }
    let linker = Path::new(&platform.linker)
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    if ["gcc", "clang", "cc"]
        .iter()
        .any(|driver| linker.ends_with(driver))
        && linker != "cc"
    {
        return Ok(platform.linker.clone());
    }
    bail!(
        "no C compiler for {triple}, which pgo-build needs for its process-start marker in \
         instrumented binaries: set target.{triple}.linker to a C compiler driver (e.g. \
         `{arch}-linux-gnu-gcc` from `apt-get install gcc-{arch}-linux-gnu`) or set CC_{var}",
        triple = platform.triple,
        arch = platform.arch,
        var = platform.triple.replace('-', "_"),
    )
}

/// The compiled constructor in `dir`, named by the source's hash so an upgrade relinks.
pub fn object(dir: &Path, platform: &Platform, printer: &Printer) -> Result<PathBuf> {
    let hash: String = Sha256::digest(SOURCE.as_bytes())
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect();
    let object = dir.join(format!("start-marker-{hash}.o"));
    if object.is_file() {
        return Ok(object);
    }
    crate::util::files::create_dir_all(dir)?;
    let source = dir.join("start-marker.c");
    crate::util::files::write(&source, SOURCE)?;
    let partial = dir.join("start-marker.o.partial");
    let cc = c_compiler(platform)?;
    Cmd::new(&cc)
        .args(["-c", "-O2", "-fPIC", "-o"])
        .arg(&partial)
        .arg(&source)
        .stdout_checked(printer)
        .with_context(|| {
            format!(
                "could not compile pgo-build's process-start marker for {} with `{}`; install \
                 a C compiler for it (e.g. `apt-get install gcc`) or set CC_{}",
                platform.triple,
                cc.to_string_lossy(),
                platform.triple.replace('-', "_")
            )
        })?;
    crate::util::files::rename(&partial, &object)?;
    Ok(object)
}

/// Starts recorded in the given workload directories, counted per executable path.
pub fn starts_by_executable(workload_dirs: &[(String, PathBuf)]) -> BTreeMap<PathBuf, usize> {
    let mut starts = BTreeMap::new();
    for (_, dir) in workload_dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|ext| ext == "start")
                && let Ok(text) = std::fs::read_to_string(&path)
            {
                let executable = text.lines().next().unwrap_or_default();
                *starts.entry(PathBuf::from(executable)).or_default() += 1;
            }
        }
    }
    starts
}

/// A process that wrote no profile although the process of the same program that started
/// it did: a launcher (a daemon's front that forks the server and exits) wrote, the process
/// that did the work did not.
#[derive(Debug, PartialEq, Eq)]
pub struct SilentChild {
    pub executable: PathBuf,
    pub workload: String,
    pub launcher_pid: u32,
    pub pid: u32,
}

/// Every [`SilentChild`] in the workload directories: starts recorded with their parent, and
/// the pids that wrote a profile (see [`written`]).
pub fn silent_children(workload_dirs: &[(String, PathBuf)]) -> Vec<SilentChild> {
    let mut found = Vec::new();
    for (workload, dir) in workload_dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut starts: BTreeMap<u32, (String, Option<u32>)> = BTreeMap::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name.strip_suffix(".start").and_then(|p| p.parse().ok())
                && let Ok(text) = std::fs::read_to_string(entry.path())
            {
                let mut lines = text.lines();
                let executable = lines.next().unwrap_or_default().to_owned();
                let parent = lines.next().and_then(|p| p.trim().parse().ok());
                starts.insert(pid, (executable, parent));
            }
        }
        let wrote = written(dir);
        for (pid, (executable, parent)) in &starts {
            let Some(parent) = parent else { continue };
            if wrote.contains(pid) || !wrote.contains(parent) {
                continue;
            }
            if starts
                .get(parent)
                .is_some_and(|(launcher, _)| launcher == executable)
            {
                found.push(SilentChild {
                    executable: PathBuf::from(executable),
                    workload: workload.clone(),
                    launcher_pid: *parent,
                    pid: *pid,
                });
            }
        }
    }
    found
}

/// The pids in `dir` whose raw profile (`*_<pid>.profraw`) is not empty, or was merged while
/// training ran.
fn written(dir: &Path) -> std::collections::BTreeSet<u32> {
    let mut pids = super::compact::merged_pids(dir);
    pids.extend(raw_written(dir));
    pids
}

fn raw_written(dir: &Path) -> impl Iterator<Item = u32> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.metadata().is_ok_and(|m| m.len() > 0))
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let (_, pid) = name.strip_suffix(".profraw")?.rsplit_once('_')?;
            pid.parse().ok()
        })
}

/// Of `pids`, those that are processes of an instrumented binary (a start recorded in
/// `dir`) that wrote no profile there.
pub fn unwritten(dir: &Path, pids: &[u32]) -> Vec<u32> {
    let wrote = written(dir);
    pids.iter()
        .copied()
        .filter(|pid| dir.join(format!("{pid}.start")).is_file() && !wrote.contains(pid))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_are_counted_per_executable() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("w1")).unwrap();
        std::fs::create_dir_all(dir.path().join("w2")).unwrap();
        std::fs::write(dir.path().join("w1/10.start"), "/bin/a").unwrap();
        std::fs::write(dir.path().join("w1/11.start"), "/bin/b").unwrap();
        std::fs::write(dir.path().join("w2/12.start"), "/bin/a").unwrap();
        std::fs::write(dir.path().join("w2/aa_12.profraw"), "").unwrap();
        let starts = starts_by_executable(&crate::profiles::workload_dirs(dir.path()));
        assert_eq!(starts[Path::new("/bin/a")], 2);
        assert_eq!(starts[Path::new("/bin/b")], 1);
    }

    #[test]
    fn a_child_that_wrote_nothing_while_its_launcher_of_the_same_program_did_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path().join("w");
        std::fs::create_dir_all(&w).unwrap();
        // 10 launched 11 (same program) and wrote; 11 did not. 12 (another program, child of
        // 10) did not write either, and 13 (child of 11, which wrote nothing) is not a case.
        std::fs::write(w.join("10.start"), "/bin/daemon\n1").unwrap();
        std::fs::write(w.join("11.start"), "/bin/daemon\n10").unwrap();
        std::fs::write(w.join("12.start"), "/bin/worker\n10").unwrap();
        std::fs::write(w.join("13.start"), "/bin/daemon\n11").unwrap();
        std::fs::write(w.join("abc_10.profraw"), "data").unwrap();
        // An old marker without a parent line counts as before and finds nothing.
        std::fs::write(w.join("14.start"), "/bin/daemon").unwrap();
        let found = silent_children(&crate::profiles::workload_dirs(dir.path()));
        assert_eq!(
            found,
            vec![SilentChild {
                executable: PathBuf::from("/bin/daemon"),
                workload: "w".to_owned(),
                launcher_pid: 10,
                pid: 11
            }]
        );
        assert_eq!(
            starts_by_executable(&crate::profiles::workload_dirs(dir.path()))
                [Path::new("/bin/daemon")],
            4
        );
    }

    #[test]
    fn a_foreign_target_compiles_the_marker_with_its_linker_driver_or_says_what_to_set() {
        let cross = Platform::for_tests(
            "aarch64-unknown-linux-gnu",
            "aarch64",
            "/usr/bin/aarch64-linux-gnu-gcc",
        );
        assert_eq!(
            c_compiler(&cross).unwrap(),
            "/usr/bin/aarch64-linux-gnu-gcc"
        );
        let unconfigured = Platform::for_tests("aarch64-unknown-linux-gnu", "aarch64", "cc");
        let err = c_compiler(&unconfigured).unwrap_err().to_string();
        assert!(err.contains("gcc-aarch64-linux-gnu"), "{err}");
        assert!(err.contains("CC_aarch64_unknown_linux_gnu"), "{err}");
    }

    #[test]
    fn the_marker_compiles_and_records_a_start() {
        let dir = tempfile::tempdir().unwrap();
        let printer = Printer::new(crate::util::printer::Verbosity::Quiet);
        let host = Platform::for_tests("x86_64-unknown-linux-gnu", std::env::consts::ARCH, "cc");
        let object = object(dir.path(), &host, &printer).unwrap();
        // Link it into a C program and run it: the constructor must leave `<pid>.start`.
        let program = dir.path().join("prog");
        let main = dir.path().join("main.c");
        std::fs::write(&main, "int main(void) { return 0; }\n").unwrap();
        Cmd::new("cc")
            .arg("-o")
            .arg(&program)
            .arg(&main)
            .arg(&object)
            .stdout_checked(&printer)
            .unwrap();
        let starts_dir = dir.path().join("starts");
        std::fs::create_dir_all(starts_dir.join("w")).unwrap();
        let status = std::process::Command::new(&program)
            .env(START_DIR_ENV, starts_dir.join("w"))
            .status()
            .unwrap();
        assert!(status.success());
        let starts = starts_by_executable(&crate::profiles::workload_dirs(&starts_dir));
        assert_eq!(starts.get(&program), Some(&1), "{starts:?}");
    }
}
