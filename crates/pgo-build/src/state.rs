//! Resumability: the fingerprint of every completed stage (`target/pgo-build/state.json`), and
//! the lock that keeps two pgo-build runs out of one `target/pgo-build/`.
//!
//! A stage's fingerprint covers its inputs - settings and flags, the selected binaries, the
//! workspace manifests and Cargo.lock, the source files cargo's dep-info lists for each binary,
//! the upstream stage's outputs (its stage.json), workloads, profiles - as paths with size and
//! modification time, like cargo's own freshness check. A stage is recorded only after it
//! completed, and outputs are written to temporary names and renamed, so an interrupted run
//! leaves nothing that looks complete: the next `run` resumes at the first stage that is not.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::files::write_atomically;
use crate::layout::Layout;
use crate::report::StageRecord;

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct State {
    pub schema_version: u32,
    /// Stage name → fingerprint of the inputs it completed with.
    pub stages: BTreeMap<String, String>,
    /// Stage name → its last completed run (duration, peak memory, when), shown for the runs
    /// that reuse it.
    #[serde(default)]
    pub runs: BTreeMap<String, StageRecord>,
}

impl State {
    /// The stage records, or none; with what was wrong with an unreadable file (the stages
    /// then run again rather than being trusted).
    pub fn load(layout: &Layout) -> (State, Option<String>) {
        let fresh = State {
            schema_version: 1,
            stages: BTreeMap::new(),
            runs: BTreeMap::new(),
        };
        let path = layout.state();
        let Ok(text) = std::fs::read_to_string(&path) else {
            return (fresh, None);
        };
        match serde_json::from_str::<State>(&text) {
            Ok(state) if state.schema_version == 1 => (state, None),
            Ok(_) => (fresh, None),
            Err(err) => (
                fresh,
                Some(format!(
                    "{} is corrupt ({err}): every stage of `pgo-build run` runs again and \
                     writes it anew",
                    path.display()
                )),
            ),
        }
    }

    pub fn save(&self, layout: &Layout) -> Result<()> {
        write_atomically(
            &layout.state(),
            serde_json::to_string_pretty(self)?.as_bytes(),
        )
    }
}

/// Builds a fingerprint from labelled parts.
pub struct Fingerprint(Sha256);

impl Fingerprint {
    pub fn new(stage: &str) -> Fingerprint {
        let mut fingerprint = Fingerprint(Sha256::new());
        fingerprint.text("stage", stage);
        fingerprint
    }

    pub fn text(&mut self, label: &str, value: &str) -> &mut Fingerprint {
        self.0.update(label.as_bytes());
        self.0.update([0]);
        self.0.update((value.len() as u64).to_le_bytes());
        self.0.update(value.as_bytes());
        self
    }

    /// A file by path, size and modification time; a missing file counts as such.
    pub fn file(&mut self, path: &Path) -> &mut Fingerprint {
        let meta = std::fs::metadata(path)
            .map(|m| {
                let modified = m
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos());
                format!("{} {modified}", m.len())
            })
            .unwrap_or_else(|_| "missing".to_owned());
        self.text(&path.display().to_string(), &meta)
    }

    /// A file by path and content; a missing file counts as such.
    pub fn content(&mut self, path: &Path) -> &mut Fingerprint {
        match std::fs::read(path) {
            Ok(bytes) => {
                let digest = Sha256::digest(&bytes);
                self.0.update(path.display().to_string().as_bytes());
                self.0.update([0]);
                self.0.update(digest);
                self
            }
            Err(_) => self.text(&path.display().to_string(), "missing"),
        }
    }

    /// Every regular file below `dir`, sorted.
    pub fn tree(&mut self, dir: &Path) -> &mut Fingerprint {
        let mut files = Vec::new();
        collect_files(dir, &mut files);
        files.sort();
        for file in files {
            self.file(&file);
        }
        self
    }

    pub fn finish(&self) -> String {
        self.0
            .clone()
            .finalize()
            .iter()
            .take(16)
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

fn collect_files(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => collect_files(&path, files),
            Ok(kind) if kind.is_file() => files.push(path),
            _ => {}
        }
    }
}

/// A fingerprint of what the executables were built from: the files their dep-info lists
/// (the workspace's own crates; registry crates are pinned by `lock_file`) and the lock file,
/// by content, so a file rewritten unchanged (a branch switched back) still matches. Files
/// under `generated` (build-script outputs and profiles in the stages' own directories, which
/// differ per stage) are left out. `None` when an executable has no dep-info.
pub fn sources_fingerprint(
    executables: &[&Path],
    lock_file: &Path,
    generated: &[&Path],
) -> Option<String> {
    let mut print = Fingerprint::new("sources");
    print.content(lock_file);
    let mut sources = Vec::new();
    for executable in executables {
        sources.extend(dep_info_sources(executable)?);
    }
    sources.sort();
    sources.dedup();
    for source in sources
        .iter()
        .filter(|s| !generated.iter().any(|dir| s.starts_with(dir)))
    {
        print.content(source);
    }
    Some(print.finish())
}

/// The source files a binary was built from, from cargo's dep-info beside the executable
/// (`<exe>.d`: `target: dep dep …`, spaces in paths escaped). `None` before the first build.
pub fn dep_info_sources(executable: &Path) -> Option<Vec<std::path::PathBuf>> {
    let text = std::fs::read_to_string(format!("{}.d", executable.display())).ok()?;
    let mut sources = Vec::new();
    for line in text.lines() {
        let Some((_, deps)) = line.split_once(": ") else {
            continue;
        };
        let mut current = String::new();
        let mut escaped = false;
        for c in deps.chars() {
            match c {
                '\\' if !escaped => escaped = true,
                ' ' if !escaped => {
                    if !current.is_empty() {
                        sources.push(std::mem::take(&mut current).into());
                    }
                }
                _ => {
                    current.push(c);
                    escaped = false;
                }
            }
        }
        if !current.is_empty() {
            sources.push(current.into());
        }
    }
    sources.sort();
    sources.dedup();
    Some(sources)
}

/// Held for as long as a pgo-build command works in `target/pgo-build/`.
pub struct RunLock {
    _file: File,
}

impl RunLock {
    pub fn acquire(layout: &Layout) -> Result<RunLock> {
        std::fs::create_dir_all(layout.root())
            .with_context(|| format!("could not create {}", layout.root().display()))?;
        let path = layout.root().join(".lock");
        let mut file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("could not open {}", path.display()))?;
        // SAFETY: flock(2) on a descriptor we own; released when the file is closed.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            bail!(
                "another pgo-build is working in {}: {}. Wait for it to finish or stop it; two \
                 runs in one target directory would overwrite each other's builds and profiles.",
                layout.root().display(),
                if holder.trim().is_empty() {
                    "holder unknown"
                } else {
                    holder.trim()
                }
            );
        }
        let args: Vec<String> = std::env::args().collect();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        file.set_len(0)?;
        file.rewind()?;
        write!(
            file,
            "pid {} (`{}`, started at unix time {now})",
            std::process::id(),
            args.join(" ")
        )?;
        Ok(RunLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_compared_by_content_not_mtime() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("main.rs");
        let lock = dir.path().join("Cargo.lock");
        let generated = dir.path().join("target");
        std::fs::create_dir_all(&generated).unwrap();
        std::fs::write(&source, "fn main() {}\n").unwrap();
        std::fs::write(&lock, "version = 4\n").unwrap();
        let out_file = generated.join("out.rs");
        std::fs::write(&out_file, "1").unwrap();
        let executable = dir.path().join("app");
        std::fs::write(
            format!("{}.d", executable.display()),
            format!(
                "{}: {} {}\n",
                executable.display(),
                source.display(),
                out_file.display()
            ),
        )
        .unwrap();
        let print = || sources_fingerprint(&[&executable], &lock, &[&generated]).unwrap();
        let first = print();
        // Rewritten with the same content (and another mtime), or a generated file changed.
        std::fs::write(&source, "fn main() {}\n").unwrap();
        std::fs::write(&out_file, "2").unwrap();
        assert_eq!(print(), first);
        std::fs::write(&source, "fn main() { println!(); }\n").unwrap();
        assert_ne!(print(), first);
        std::fs::write(&source, "fn main() {}\n").unwrap();
        std::fs::write(&lock, "version = 4\n# another dependency version\n").unwrap();
        assert_ne!(print(), first);
    }

    #[test]
    fn dep_info_lists_sources_with_escaped_spaces() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("app");
        std::fs::write(
            dir.path().join("app.d"),
            "/t/app: /w/src/main.rs /w/my\\ dir/lib.rs\n\n/w/src/main.rs:\n",
        )
        .unwrap();
        let sources = dep_info_sources(&exe).unwrap();
        assert_eq!(
            sources,
            [Path::new("/w/my dir/lib.rs"), Path::new("/w/src/main.rs")]
        );
        assert!(dep_info_sources(&dir.path().join("missing")).is_none());
    }

    #[test]
    fn fingerprints_change_with_file_metadata_and_text() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.rs");
        std::fs::write(&file, "one").unwrap();
        let print = || {
            Fingerprint::new("build")
                .file(&file)
                .text("flags", "-C x")
                .finish()
        };
        let first = print();
        assert_eq!(first, print());
        std::fs::write(&file, "three").unwrap();
        assert_ne!(first, print());
        assert_ne!(
            Fingerprint::new("build").text("a", "bc").finish(),
            Fingerprint::new("build").text("ab", "c").finish()
        );
    }

    #[test]
    fn a_second_lock_is_refused_naming_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let _held = RunLock::acquire(&layout).unwrap();
        let err = RunLock::acquire(&layout).err().expect("the lock is held");
        assert!(
            format!("{err}").contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
    }
}
