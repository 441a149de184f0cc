//! Committed profiles (`[pgo] profile`, written by `export`): the metadata beside them, the
//! checks before one is used (LLVM version, target), and staleness against the current
//! sources, read from the optimized build's diagnostics.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};

use super::context::Context;
use crate::cargo::build::Diagnostic;
use crate::profiles;
use crate::profiles::diagnostics::{self, Kind};
use crate::profiles::insight::{self, FunctionCounts};

/// The metadata `export` writes beside a profile (`<name>.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProfileMetadata {
    pub pgo_build_version: String,
    pub rustc: String,
    pub llvm_version: String,
    pub llvm_major: u32,
    pub target: String,
    pub cargo_profile: String,
    /// The rustflags the profile's instrumented build used (user flags + pgo-build's common ones).
    pub rustflags: Vec<String>,
    pub workloads: Vec<String>,
    /// `git rev-parse HEAD`, with `-dirty-<hash of the diff>` when tracked files had changes.
    pub source_revision: Option<String>,
    pub content_hash: String,
    pub functions: usize,
}

pub fn metadata_path(profile: &Path) -> PathBuf {
    profile.with_extension("json")
}

/// Staleness of a committed profile, from the optimized build's diagnostics.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Staleness {
    pub profile_functions: usize,
    pub stale_functions: usize,
    pub share: f64,
    /// Crate → (stale functions, functions of that crate in the profile).
    pub per_crate: BTreeMap<String, (usize, usize)>,
    /// Demangled names of functions whose profile no longer matches their code.
    pub changed: Vec<String>,
}

pub(crate) fn staleness(functions: &[FunctionCounts], diagnostics: &[Diagnostic]) -> Staleness {
    let mut per_crate: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for function in functions {
        per_crate.entry(function.krate.clone()).or_default().1 += 1;
    }
    let mut stale = BTreeSet::new();
    let mut changed = BTreeSet::new();
    for diagnostic in diagnostics {
        let kind = diagnostics::classify(&diagnostic.message);
        if !matches!(kind, Some(Kind::HashMismatch | Kind::MissingFunction))
            || diagnostics::expected_to_differ(&diagnostic.target)
        {
            continue;
        }
        let Some(symbol) = diagnostic
            .message
            .split_whitespace()
            .find(|w| w.starts_with("_ZN") || w.starts_with("_R"))
        else {
            continue;
        };
        let (name, krate) = insight::demangle(symbol);
        if stale.insert(symbol.to_owned()) {
            per_crate.entry(krate).or_default().0 += 1;
        }
        if kind == Some(Kind::HashMismatch) {
            changed.insert(name);
        }
    }
    let profile_functions = functions.len();
    Staleness {
        profile_functions,
        stale_functions: stale.len(),
        share: stale.len() as f64 / profile_functions.max(1) as f64,
        per_crate: per_crate
            .into_iter()
            .filter(|(_, (stale, _))| *stale > 0)
            .collect(),
        changed: changed.into_iter().collect(),
    }
}

/// Checks a committed profile against this toolchain and target and returns its
/// content-addressed copy under `profiles/` (so cargo rebuilds when its content changes).
pub(crate) fn committed_profile(cx: &Context, relative: &Path) -> Result<PathBuf> {
    let path = cx.workspace.root.join(relative);
    let fix = "re-create it with this toolchain: `pgo-build run` (with [pgo] profile removed) and `pgo-build export`";
    if !path.is_file() {
        bail!(
            "[pgo] profile = {:?} in {}: {} does not exist",
            relative,
            cx.config.display_path(),
            path.display()
        );
    }
    let metadata_file = metadata_path(&path);
    if let Ok(text) = std::fs::read_to_string(&metadata_file) {
        let metadata: ProfileMetadata = serde_json::from_str(&text).with_context(|| {
            format!("{} is not valid profile metadata", metadata_file.display())
        })?;
        if metadata.llvm_major != cx.rustc.llvm_major {
            bail!(
                "the committed profile {} was made with LLVM {} ({}), but rustc uses LLVM {}: its \
                 function hashes and format may not match. Fix: {fix}.",
                path.display(),
                metadata.llvm_version,
                metadata.rustc,
                cx.rustc.llvm_version
            );
        }
        if metadata.target != cx.settings.target {
            bail!(
                "the committed profile {} was made for {}, this build is for {}. Fix: {fix}.",
                path.display(),
                metadata.target,
                cx.settings.target
            );
        }
    } else {
        cx.printer.warn(format!(
            "{} has no metadata ({}); only its format version is checked",
            path.display(),
            metadata_file.display()
        ));
    }
    let profdata = cx.profdata()?;
    let scratch = cx.layout.profiles_dir().join("scratch");
    let expected = profiles::written_indexed_version(profdata, &scratch, &cx.printer)?;
    match profiles::indexed_version(&path) {
        Some(version) if version == expected => {}
        Some(version) => bail!(
            "the committed profile {} was made by another LLVM than rustc's (indexed format \
             version {version}; LLVM {}'s llvm-profdata writes version {expected}). Fix: {fix}.",
            path.display(),
            cx.rustc.llvm_major
        ),
        None => bail!(
            "{} is not an indexed profile (.profdata from `llvm-profdata merge` or `pgo-build export`)",
            path.display()
        ),
    }
    let data = crate::util::files::read(&path)?;
    let dir = cx.layout.profiles_dir();
    crate::util::files::create_dir_all(&dir)?;
    let partial = dir.join("committed.profdata.partial");
    crate::util::files::write(&partial, &data)?;
    profiles::install_content_addressed(&partial, &data, &dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staleness_counts_changed_and_missing_functions_per_crate() {
        let functions = insight::parse_text_profile(
            "_ZN3app1f17h0123456789abcdefE\n# Func Hash:\n1\n# Num Counters:\n1\n# Counter Values:\n5\n\n\
             _ZN3app1g17h0123456789abcdefE\n# Func Hash:\n2\n# Num Counters:\n1\n# Counter Values:\n5\n\n\
             _ZN3lib1h17h0123456789abcdefE\n# Func Hash:\n3\n# Num Counters:\n1\n# Counter Values:\n5\n",
        );
        let diagnostic = |message: &str| Diagnostic {
            target: "app".into(),
            level: "warning".into(),
            message: message.into(),
            rendered: String::new(),
        };
        let diagnostics = [
            diagnostic(
                "app.x-cgu.0: function control flow change detected (hash mismatch) _ZN3app1f17h0123456789abcdefE Hash = 9",
            ),
            diagnostic(
                "app.x-cgu.0: no profile data available for function _ZN3app3new17h0123456789abcdefE Hash = 9",
            ),
            diagnostic("unused variable"),
        ];
        let result = staleness(&functions, &diagnostics);
        assert_eq!(result.profile_functions, 3);
        assert_eq!(result.stale_functions, 2);
        assert!((result.share - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(result.per_crate["app"], (2, 2));
        assert_eq!(result.changed, ["app::f"]);
    }
}
