//! Where everything lives under `<target dir>/pgo-build/`. These paths are public interface:
//! workloads, CI scripts and people find binaries and reports there.
//!
//! ```text
//! target/pgo-build/
//!   <stage>/bin/            staged binaries (real files), stage = baseline|instrumented|optimized
//!                           |bolt-instrumented|bolt
//!   <stage>/run/            for a target with a runner: scripts that exec it with each staged
//!                           binary (what PGO_BUILD_BIN_* name there)
//!   <stage>/cargo-target/   that stage's own cargo target dir, so stages never clobber each other
//!   <stage>/stage.json      what the stage built, with which flags (read by later stages);
//!                           written last: without it the stage's outputs are not used
//!   <stage>/attempt.txt     the stage's last attempt, while it has not completed
//!   <stage>/links.jsonl, <stage>/rustc.jsonl   each link and each rustc of its last build
//!   <stage>/rustc-estimates.json  each crate's last measured rustc peak (rustc_wrapper.rs)
//!   <stage>/rustc-estimates.admission.json  what its build admits rustc by: its own, and the
//!                           baseline's peaks scaled for crates it has not measured
//!   linker/<name>, rustc-wrapper/rustc   symlinks to pgo-build: linker and rustc wrapper modes
//!   link-slots/, memory-ledger.json   what links and rustc run now, shared by pgo-build processes
//!   profiles/raw/<workload>/<build id>_<pid>.profraw   one per process, until merged into
//!   profiles/raw/<workload>/<build id>_merged.profdata + merged.json   (profiles/compact.rs)
//!   profiles/raw/<workload>/training.json   that run's record: only complete, current runs
//!                           are merged (see training_record.rs)
//!   profiles/merged-<content hash>.profdata
//!   profiles/bundles.json   what `pgo-build merge` merged; while present, `optimize` uses it
//!                           (removed by a local `train`, `instrument`, `unpack`)
//!   profiles/bolt/raw/<binary>/prof.<pid>.fdata, profiles/bolt/<binary>.fdata
//!   logs/<command>-<workload>[-<variant>].log   workload output, stamped with what wrote it
//!   counts/<variant>/       instruction counter output of the last counted run
//!   report.json
//!   explore/<variant>/bin/  `explore`'s binaries of each variant (copies)
//!   explore/builds/<key>/   a layout like this one per set of build settings explore needed
//!   explore/measurements.json  each variant's last measurement, by what it measured
//!   state.json              fingerprints of completed stages (see state.rs)
//!   running/<token>.json    the workloads running now (found by the next command if pgo-build
//!                           was killed: it stops what they left running)
//!   .lock                   held by the pgo-build working here
//!   <triple>/               a layout like this one per `--target` (link-slots/ and
//!                           memory-ledger.json stay here, shared)
//! ```

pub mod lock;
pub mod step;

use std::path::{Path, PathBuf};

/// What `pgo-build pack` packs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PackedStage {
    /// The instrumented binaries, for training on other machines
    Instrumented,
    /// The plain release build, the gate's reference
    Baseline,
    /// The PGO-optimized binaries
    Optimized,
    /// The BOLTed binaries, with the optimized ones they were made from
    Bolt,
    /// What `gate` ships: `bolt` when [bolt] is enabled, else `optimized`
    Shipped,
}

/// A build stage whose binaries get staged (by its name in `report.json` too).
/// Declaration order is pipeline order: the report's per-stage maps list them so.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Stage {
    Baseline,
    Instrumented,
    Optimized,
    BoltInstrumented,
    Bolt,
}

impl Stage {
    /// Stages whose binaries can be compared, in pipeline order (newest last).
    pub const VARIANTS: [Stage; 3] = [Stage::Baseline, Stage::Optimized, Stage::Bolt];

    pub fn from_variant(name: &str) -> Option<Stage> {
        Stage::VARIANTS
            .into_iter()
            .find(|stage| stage.name() == name)
    }

    /// Every staged stage, in pipeline order.
    pub const ALL: [Stage; 5] = [
        Stage::Baseline,
        Stage::Instrumented,
        Stage::Optimized,
        Stage::BoltInstrumented,
        Stage::Bolt,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Stage::Baseline => "baseline",
            Stage::Instrumented => "instrumented",
            Stage::Optimized => "optimized",
            Stage::BoltInstrumented => "bolt-instrumented",
            Stage::Bolt => "bolt",
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `path` relative to `base` (both absolute), with `..` where needed. pgo-build's own files
/// are named this way on rustc's command line, relative to the workspace root where cargo runs
/// rustc: absolute paths there would make every checkout at another path miss a compile cache
/// (sccache keys on the whole command line).
pub fn relative_to(path: &Path, base: &Path) -> PathBuf {
    let path: Vec<_> = path.components().collect();
    let base: Vec<_> = base.components().collect();
    let common = path.iter().zip(&base).take_while(|(a, b)| a == b).count();
    if common == 0 {
        return path.iter().collect();
    }
    let mut relative = PathBuf::new();
    for _ in common..base.len() {
        relative.push("..");
    }
    relative.extend(&path[common..]);
    relative
}

/// A rustc argument that names one of pgo-build's files relative to the workspace root
/// (`-Clinker=target/pgo-build/linker/cc`, `-Clink-arg=target/…/start-marker.o`, or the
/// `linker=…` after a separate `-C`), with the path made absolute; `None` for every other
/// argument. Cargo runs rustc in the workspace root only for workspace members: a registry
/// crate that links (a `cdylib`) is compiled in its own directory, where the relative path
/// names nothing.
pub fn absolute_own_path(arg: &str, root: &Path) -> Option<String> {
    let (prefix, path) = ["-Clinker=", "-Clink-arg=", "linker=", "link-arg="]
        .iter()
        .find_map(|prefix| Some((*prefix, arg.strip_prefix(prefix)?)))?;
    let path = Path::new(path);
    let absolute = root.join(path);
    (path.is_relative() && !path.as_os_str().is_empty() && absolute.exists())
        .then(|| format!("{prefix}{}", absolute.display()))
}

#[derive(Debug, Clone)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    pub fn new(cargo_target_dir: &Path) -> Layout {
        Layout {
            root: cargo_target_dir.join("pgo-build"),
        }
    }

    /// The layout of one release target: `<target dir>/pgo-build/<triple>/`.
    pub fn for_target(cargo_target_dir: &Path, triple: &str) -> Layout {
        Layout {
            root: cargo_target_dir.join("pgo-build").join(triple),
        }
    }

    /// A layout rooted elsewhere: one of `explore`'s builds (`<root>/explore/builds/<key>`).
    pub fn at(root: PathBuf) -> Layout {
        Layout { root }
    }

    /// `explore/`: `<variant>/bin/` per variant, `builds/<key>/` per set of build settings
    /// (each a layout of its own), `measurements.json`.
    pub fn explore_dir(&self) -> PathBuf {
        self.root.join("explore")
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn stage_dir(&self, stage: Stage) -> PathBuf {
        self.root.join(stage.name())
    }

    pub fn bin_dir(&self, stage: Stage) -> PathBuf {
        self.stage_dir(stage).join("bin")
    }

    pub fn cargo_target_dir(&self, stage: Stage) -> PathBuf {
        self.stage_dir(stage).join("cargo-target")
    }

    pub fn stage_manifest(&self, stage: Stage) -> PathBuf {
        self.stage_dir(stage).join("stage.json")
    }

    /// Present while the stage's last attempt has not completed (see `StageManifest::begin`).
    pub fn stage_attempt(&self, stage: Stage) -> PathBuf {
        self.stage_dir(stage).join("attempt.txt")
    }

    /// Each rustc of the stage's last build, as the rustc wrapper logged it.
    /// Each link of the stage's last build (linker mode writes it; see linker.rs).
    pub fn links_log(&self, stage: Stage) -> PathBuf {
        self.stage_dir(stage).join("links.jsonl")
    }

    /// The link slots, shared by every layout of the cargo target directory (each target's,
    /// explore's builds) so that concurrent pgo-build processes share the bound.
    pub fn link_slots_dir(cargo_target_dir: &Path) -> PathBuf {
        cargo_target_dir.join("pgo-build").join("link-slots")
    }

    /// The rustc admitted now against the memory budget, shared like the link slots.
    pub fn memory_ledger(cargo_target_dir: &Path) -> PathBuf {
        cargo_target_dir
            .join("pgo-build")
            .join("memory-ledger.json")
    }

    /// The C compiles of a stage's build scripts in cross-language builds (cc_wrapper.rs).
    pub fn c_compile_log(&self, stage: Stage) -> PathBuf {
        self.stage_dir(stage).join("cc.jsonl")
    }

    /// The sources (relative path → sha256) an unpacked stage's binaries were built from.
    pub fn unpacked_sources(&self, stage: Stage) -> PathBuf {
        self.stage_dir(stage).join("unpacked-sources.json")
    }

    pub fn rustc_log(&self, stage: Stage) -> PathBuf {
        self.stage_dir(stage).join("rustc.jsonl")
    }

    /// Each crate's last measured rustc peak in the stage (rustc_wrapper.rs).
    pub fn rustc_estimates(&self, stage: Stage) -> PathBuf {
        self.stage_dir(stage).join("rustc-estimates.json")
    }

    /// What the stage's build admits rustc by: its own estimates, and for crates it has not
    /// measured, the baseline stage's peaks scaled (`rustc_wrapper::from_baseline`).
    pub fn rustc_admission_estimates(&self, stage: Stage) -> PathBuf {
        self.stage_dir(stage).join("rustc-estimates.admission.json")
    }

    pub fn profiles_dir(&self) -> PathBuf {
        self.root.join("profiles")
    }

    /// `merge`'s record of the training merged from bundles (see `pipeline/bundles.rs`).
    pub fn merged_bundles(&self) -> PathBuf {
        self.profiles_dir().join("bundles.json")
    }

    pub fn raw_profiles_dir(&self) -> PathBuf {
        self.profiles_dir().join("raw")
    }

    /// Where profiles of instrumented binaries run by hand (outside `train`) go: the directory
    /// embedded with `-Cprofile-generate`. `train` overrides it with `LLVM_PROFILE_FILE`.
    pub fn manual_profiles_dir(&self) -> PathBuf {
        self.profiles_dir().join("manual")
    }

    /// Where llvm-bolt puts a stage's outputs before they are staged.
    pub fn work_dir(&self, stage: Stage) -> PathBuf {
        self.stage_dir(stage).join("work")
    }

    /// BOLT profiles: `raw/<binary>/prof.<pid>.fdata`, merged into `<binary>.fdata`.
    pub fn bolt_profiles_dir(&self) -> PathBuf {
        self.profiles_dir().join("bolt")
    }

    pub fn logs_dir(&self) -> PathBuf {
        self.root.join("logs")
    }

    /// The workloads running now, one record each while they run (see
    /// `training::stop_leftovers`).
    pub fn running_dir(&self) -> PathBuf {
        self.root.join("running")
    }

    /// Fingerprints of completed stages.
    pub fn state(&self) -> PathBuf {
        self.root.join("state.json")
    }

    pub fn report(&self) -> PathBuf {
        self.root.join("report.json")
    }

    /// What `pgo-build gate` passed or refused, and the evidence (`release.rs`).
    pub fn provenance(&self) -> PathBuf {
        self.root.join("provenance.json")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stage_is_written_in_report_json_by_its_directory_name() {
        // report.json's training records and target/pgo-build/<stage>/ name a stage alike.
        for stage in Stage::ALL {
            let written = serde_json::to_string(&stage).unwrap();
            assert_eq!(written, format!("\"{}\"", stage.name()));
            assert_eq!(serde_json::from_str::<Stage>(&written).unwrap(), stage);
        }
    }

    #[test]
    fn paths_relative_to_the_workspace_root() {
        let root = Path::new("/w/repo");
        assert_eq!(
            relative_to(Path::new("/w/repo/target/pgo-build/linker/cc"), root),
            Path::new("target/pgo-build/linker/cc")
        );
        assert_eq!(
            relative_to(Path::new("/tmp/t/pgo-build/x.profdata"), root),
            Path::new("../../tmp/t/pgo-build/x.profdata")
        );
        assert_eq!(relative_to(root, root), Path::new(""));
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("target/pgo-build/linker")).unwrap();
        std::fs::write(dir.path().join("target/pgo-build/linker/cc"), "").unwrap();
        let absolute = format!("{}/target/pgo-build/linker/cc", dir.path().display());
        assert_eq!(
            absolute_own_path("-Clinker=target/pgo-build/linker/cc", dir.path()),
            Some(format!("-Clinker={absolute}"))
        );
        assert_eq!(
            absolute_own_path("linker=target/pgo-build/linker/cc", dir.path()),
            Some(format!("linker={absolute}"))
        );
        assert_eq!(
            absolute_own_path("-Clinker=cc", dir.path()),
            None,
            "not a file there"
        );
        assert_eq!(
            absolute_own_path(&format!("-Clinker={absolute}"), dir.path()),
            None
        );
        assert_eq!(absolute_own_path("--edition=2024", dir.path()), None);
    }
}
