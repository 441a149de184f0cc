//! [`ExportedProfile`]: a trained profile as `pgo-build export` writes it, with its metadata
//! beside it, handed from the build that trained it to the builds that use it (`explore`'s
//! profiled and BOLT variants), typed rather than as a bare path.

use std::path::PathBuf;

/// An indexed profile (`.profdata`) with its metadata file beside it (toolchain, target, the
/// sources it was trained on), usable as `[pgo] profile` is: checked like a committed one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportedProfile(PathBuf);

impl ExportedProfile {
    /// The profile `export` wrote at `path` (with its metadata).
    pub fn written_at(path: PathBuf) -> ExportedProfile {
        ExportedProfile(path)
    }

    /// As `[pgo] profile` names it.
    pub fn into_path(self) -> PathBuf {
        self.0
    }
}
