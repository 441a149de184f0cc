//! The profiles one step hands another, typed rather than as bare paths (opt-dist's
//! `LlvmPGOProfile`): [`PgoProfile`], the indexed profile an optimized build uses, whichever
//! step made it; [`ExportedProfile`], a trained profile as `pgo-build export` writes it, with
//! its metadata beside it, handed from the build that trained it to the builds that use it
//! (`explore`'s profiled and BOLT variants).

use std::path::{Path, PathBuf};

/// An indexed profile (`.profdata`) that `-Cprofile-use` takes: merged from a training's raw
/// profiles (`optimize`), from training bundles (`merge`), offered from a committed profile's
/// text (`optimize` with `[pgo] profile`), or the one an earlier optimized build named
/// (`explore`). Only those make one, so a raw profile's directory, a BOLT profile or a
/// committed file not yet checked cannot be handed where it is meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgoProfile(PathBuf);

impl PgoProfile {
    /// The profile llvm-profdata merged at `path` (a training's, or `merge`'s of bundles).
    pub fn merged_at(path: PathBuf) -> PgoProfile {
        PgoProfile(path)
    }

    /// The profile made of a committed one's text at `path`, its unprofiled functions
    /// offered to the compiler as such.
    pub fn offered_at(path: PathBuf) -> PgoProfile {
        PgoProfile(path)
    }

    /// The profile an optimized build's `-Cprofile-use` named.
    pub fn used_at(path: PathBuf) -> PgoProfile {
        PgoProfile(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

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
