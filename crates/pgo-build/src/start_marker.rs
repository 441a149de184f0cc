//! Records of process starts in instrumented binaries (see `start_marker.c` for why).
//!
//! pgo-build compiles the constructor with the C compiler rustc links with (`$CC`, else `cc`)
//! and links the object into the instrumented stage only (`-Clink-arg`: no effect on codegen,
//! so profile names are unaffected). Workloads get `PGO_BUILD_START_DIR`; each instrumented
//! process then leaves `<pid>.start` there with its executable's path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

use crate::command::Cmd;
use crate::printer::Printer;

pub const START_DIR_ENV: &str = "PGO_BUILD_START_DIR";
const SOURCE: &str = include_str!("start_marker.c");

/// The compiled constructor in `dir`, named by the source's hash so an upgrade relinks.
pub fn object(dir: &Path, printer: &Printer) -> Result<PathBuf> {
    let hash: String = Sha256::digest(SOURCE.as_bytes())
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect();
    let object = dir.join(format!("start-marker-{hash}.o"));
    if object.is_file() {
        return Ok(object);
    }
    std::fs::create_dir_all(dir)?;
    let source = dir.join("start-marker.c");
    std::fs::write(&source, SOURCE)?;
    let partial = dir.join("start-marker.o.partial");
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    Cmd::new(&cc)
        .args(["-c", "-O2", "-fPIC", "-o"])
        .arg(&partial)
        .arg(&source)
        .stdout_checked(printer)
        .with_context(|| {
            format!(
                "could not compile pgo-build's process-start marker with `{}` (the C compiler \
                 rustc links with); install one (e.g. `apt-get install gcc`) or set CC",
                cc.to_string_lossy()
            )
        })?;
    std::fs::rename(&partial, &object)?;
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
                && let Ok(executable) = std::fs::read_to_string(&path)
            {
                *starts.entry(PathBuf::from(executable)).or_default() += 1;
            }
        }
    }
    starts
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
    fn the_marker_compiles_and_records_a_start() {
        let dir = tempfile::tempdir().unwrap();
        let printer = Printer::new(crate::printer::Verbosity::Quiet);
        let object = object(dir.path(), &printer).unwrap();
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
