//! Files written so that a reader never sees half of one: through a temporary name and a
//! rename. Every state, record and report file pgo-build keeps is written this way.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Writes through a temporary file and a rename, so a reader never sees half a file.
pub fn write_atomically(path: &Path, contents: &[u8]) -> Result<()> {
    let dir = path.parent().context("path has no parent")?;
    std::fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))?;
    let partial = path.with_extension("partial");
    std::fs::write(&partial, contents)
        .with_context(|| format!("could not write {}", partial.display()))?;
    std::fs::rename(&partial, path)
        .inspect_err(|_| {
            // Nothing half-made stays behind.
            let _ = std::fs::remove_file(&partial);
        })
        .with_context(|| format!("could not move {} into place", path.display()))
}

/// The SHA-256 of `data`, in hex.
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(data)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// The SHA-256 of a file's content, read in pieces (raw profiles can be large).
pub fn sha256_of(path: &Path) -> Result<String> {
    use sha2::{Digest, Sha256};
    let mut file =
        std::fs::File::open(path).with_context(|| format!("could not open {}", path.display()))?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)
        .with_context(|| format!("could not read {}", path.display()))?;
    Ok(hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect())
}

// `std::fs`, with the path in the error: "Read-only file system (os error 30)" alone names
// neither the file nor what pgo-build was doing.

pub fn create_dir_all(path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    std::fs::create_dir_all(path)
        .with_context(|| format!("could not create the directory {}", path.display()))
}

pub fn remove_dir_all(path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    std::fs::remove_dir_all(path)
        .with_context(|| format!("could not remove the directory {}", path.display()))
}

pub fn remove_file(path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    std::fs::remove_file(path).with_context(|| format!("could not remove {}", path.display()))
}

pub fn write(path: impl AsRef<Path>, contents: impl AsRef<[u8]>) -> Result<()> {
    let path = path.as_ref();
    std::fs::write(path, contents).with_context(|| format!("could not write {}", path.display()))
}

pub fn read(path: impl AsRef<Path>) -> Result<Vec<u8>> {
    let path = path.as_ref();
    std::fs::read(path).with_context(|| format!("could not read {}", path.display()))
}

pub fn read_to_string(path: impl AsRef<Path>) -> Result<String> {
    let path = path.as_ref();
    std::fs::read_to_string(path).with_context(|| format!("could not read {}", path.display()))
}

pub fn rename(from: impl AsRef<Path>, to: impl AsRef<Path>) -> Result<()> {
    let (from, to) = (from.as_ref(), to.as_ref());
    std::fs::rename(from, to)
        .with_context(|| format!("could not move {} to {}", from.display(), to.display()))
}
/// "5 min ago": how long ago a file was written, for messages about earlier attempts.
pub fn age(path: &Path) -> String {
    let Some(elapsed) = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
    else {
        return "at an unknown time".to_owned();
    };
    crate::util::printer::ago(elapsed)
}

/// The entries of a directory, sorted.
pub fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut entries = std::fs::read_dir(dir)
        .with_context(|| format!("could not list {}", dir.display()))?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<std::io::Result<Vec<_>>>()?;
    entries.sort();
    Ok(entries)
}

/// The last component of a path, as text.
pub fn file_name(path: &Path) -> String {
    path.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

/// Tests of generated files: the repository's file at `relative` (from its root) holds
/// `generated`; with `PGO_BUILD_BLESS` set it is written first (`scripts/generate-docs` does
/// the same).
#[cfg(test)]
pub fn assert_current(relative: &str, generated: &str) {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(relative);
    if std::env::var_os("PGO_BUILD_BLESS").is_some() {
        std::fs::write(&file, generated).unwrap();
    }
    let committed = std::fs::read_to_string(&file).unwrap_or_default();
    assert!(
        committed == generated,
        "{relative} is not current: run `scripts/generate-docs` (or the tests with \
         PGO_BUILD_BLESS=1) and commit it"
    );
}
