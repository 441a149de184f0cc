//! Files written so that a reader never sees half of one: through a temporary name and a
//! rename. Every state, record and report file pgo-build keeps is written this way.

use std::path::Path;

use anyhow::{Context, Result};

/// Writes through a temporary file and a rename, so a reader never sees half a file.
pub fn write_atomically(path: &Path, contents: &[u8]) -> Result<()> {
    let dir = path.parent().context("path has no parent")?;
    std::fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))?;
    let partial = path.with_extension("partial");
    std::fs::write(&partial, contents)
        .with_context(|| format!("could not write {}", partial.display()))?;
    std::fs::rename(&partial, path)
        .with_context(|| format!("could not move {} into place", path.display()))
}
