//! The sections of `pgo-build.toml` besides the workloads: `[build]`, `[pgo]`, `[bolt]`,
//! `[compare]`, `[explore]`, and [`BuildVariant`], what `[build]` (or an explore variant) adds
//! to the workspace's own build settings.

use std::path::PathBuf;

use anyhow::Result;
use serde::Deserialize;
use toml::Spanned;

use super::values::{
    CBuild, Growth, deserialize_cross_language, deserialize_growth, deserialize_margin,
    deserialize_memory_budget, deserialize_rounds,
};
use crate::measure::memory::MemoryBudget;
use crate::measure::metric::{Decider, Rounds};

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PgoSection {
    /// Continuous mode: counters live in the mmapped profile, so processes killed by any signal
    /// still contribute (costs value profiling, so no indirect-call promotion).
    #[serde(default)]
    pub continuous: bool,
    /// What to do with corrupt or unreadable raw profiles.
    #[serde(default)]
    pub on_corrupt: OnCorrupt,
    /// Keep every process's raw profile instead of merging each binary's as training runs
    /// (see `profiles::compact`): disk use then grows with the number of processes.
    #[serde(default)]
    pub keep_raw_profiles: bool,
    /// A committed profile (from `pgo-build export`, relative to the workspace root): `optimize`
    /// and `run` use it instead of instrumenting and training.
    pub profile: Option<PathBuf>,
    /// Share of functions whose profile no longer matches (or is missing) above which a
    /// committed profile is refused as stale (default 0.2).
    pub max_stale: Option<f64>,
    /// Edge-profile overlap of training and holdout below which `profile overlap` warns
    /// (default 0.5).
    pub min_overlap: Option<f64>,
    /// How much larger than the baseline an optimized (or BOLTed) binary may be, e.g. "5%":
    /// a larger one fails the stage, and `explore` never recommends it.
    #[serde(default, deserialize_with = "deserialize_growth")]
    pub max_size_growth: Option<Growth>,
    /// Function order for start-up from temporal profiles (see `startup_order.rs`).
    #[serde(default)]
    pub startup_order: StartupOrder,
    /// Symbol names that do not change with the package version or dependencies' (see
    /// `wrappers::rustc::stable_names`), so a committed profile survives releases. Default on.
    pub stable_names: Option<bool>,
    /// Cross-language PGO: the C and C++ that build scripts compile get the same profile as
    /// the Rust (see `cross_language.rs`): `true`, or `"thin-lto"` for cross-language ThinLTO
    /// too. `CBuild::User` when off.
    #[serde(default, deserialize_with = "deserialize_cross_language")]
    pub cross_language: CBuild,
}

/// How the optimized link orders functions for start-up (`[pgo] startup_order`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StartupOrder {
    /// The linker's own order.
    #[default]
    Off,
    /// `llvm-profdata order` of the temporal traces, as lld's `--symbol-ordering-file`.
    OrderingFile,
    /// lld's balanced partitioning from the profile (`--irpgo-profile --bp-startup-sort`).
    Balanced,
    /// Balanced, and the rest ordered for a smaller compressed binary
    /// (`--bp-compression-sort=function`).
    BalancedCompression,
}

impl StartupOrder {
    pub fn name(self) -> &'static str {
        match self {
            StartupOrder::Off => "off",
            StartupOrder::OrderingFile => "ordering-file",
            StartupOrder::Balanced => "balanced",
            StartupOrder::BalancedCompression => "balanced-compression",
        }
    }
}

impl PgoSection {
    pub fn max_stale(&self) -> f64 {
        self.max_stale.unwrap_or(0.2)
    }

    pub fn stable_names(&self) -> bool {
        self.stable_names.unwrap_or(true)
    }

    pub fn min_overlap(&self) -> f64 {
        self.min_overlap.unwrap_or(0.5)
    }
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoltSection {
    /// Run BOLT after optimize in `run`; links the baseline and optimized builds with
    /// relocations (`-Wl,--emit-relocs`), which BOLT needs.
    #[serde(default)]
    pub enabled: bool,
    /// Replaces pgo-build's default optimization flags.
    pub args: Option<Vec<String>>,
    /// Added to the (default or given) flags.
    #[serde(default)]
    pub extra_args: Vec<String>,
    /// Only optimize these functions (BOLT's `-funcs`, e.g. `["^_R.*"]` for Rust's own code):
    /// BOLT cannot rebuild some jump tables of C/C++ libraries linked into Rust programs.
    #[serde(default)]
    pub funcs: Vec<String>,
    /// Update debug info (`-update-debug-sections`): can take an hour on large binaries.
    #[serde(default)]
    pub keep_debug_info: bool,
    /// Align hot code to 2 MiB pages: pads small binaries to several MiB.
    #[serde(default)]
    pub huge_pages: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnCorrupt {
    /// Exclude them from the merge, with a loud warning listing each.
    #[default]
    Drop,
    /// Fail the stage.
    Fail,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompareSection {
    /// Counted rounds per workload (default 10), or `"auto"`.
    #[serde(default, deserialize_with = "deserialize_rounds")]
    pub rounds: Option<Rounds>,
    /// The equivalence margin (`"2%"`): within it a difference counts as none.
    #[serde(default, deserialize_with = "deserialize_margin")]
    pub margin: Option<f64>,
    /// What verdicts rest on: `wall` (default), `cpu`, `instructions`, `faults`, or a metric
    /// the workloads report (`p99_ms`, `latency.p99`).
    #[serde(default)]
    pub metric: Option<Spanned<String>>,
}

impl CompareSection {
    pub fn margin(&self) -> f64 {
        self.margin
            .unwrap_or(crate::measure::metric::DEFAULT_MARGIN)
    }

    /// `metric`, checked at load.
    pub fn decider(&self) -> Decider {
        self.metric
            .as_ref()
            .map(|m| m.get_ref().parse().expect("checked at load"))
            .unwrap_or_default()
    }
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildSection {
    /// Binary targets to build (default: every binary target of every workspace member).
    pub bins: Option<Vec<String>>,
    /// Cargo profile (default: release).
    pub profile: Option<String>,
    /// Features passed to cargo.
    #[serde(default)]
    pub features: Vec<String>,
    /// Memory the links and rustc of one build may use together: "auto" (available memory at
    /// the start, less a margin; the default) or a size such as "8G".
    #[serde(default, deserialize_with = "deserialize_memory_budget")]
    pub memory_budget: MemoryBudget,
    /// Links allowed at once: "auto" (from the budget and measured link sizes; the default)
    /// or a number.
    pub link_jobs: Option<LinkJobs>,
    /// Build the binaries in groups of this many per cargo invocation instead of in one.
    pub batch_size: Option<usize>,
    /// rustc estimates carried from another target directory or machine (a file written by
    /// `pgo-build export --rustc-estimates`, relative to the workspace root; say restored from
    /// a CI cache): each stage's build starts from them for crates it has not measured itself.
    /// A file that does not exist yet is no error.
    pub rustc_estimates: Option<PathBuf>,
    /// Cargo profile settings for every stage's build, without editing the workspace
    /// (`{ lto = "fat", codegen-units = 1 }`, passed as `cargo --config profile.<name>.<key>`);
    /// written by `explore --apply`.
    #[serde(default)]
    pub profile_overrides: toml::Table,
    /// Rustflags added to every stage's build, after the user's own (written by `explore
    /// --apply`).
    #[serde(default)]
    pub rustflags: Vec<String>,
    /// Target triples to build for (`--target` replaces them): each gets its own stages in
    /// `target/pgo-build/<triple>/`. Default: the host, in `target/pgo-build/`.
    #[serde(default)]
    pub targets: Vec<String>,
}

/// Build settings pgo-build adds to the workspace's own: `[build]` of `pgo-build.toml`, or an
/// `explore` variant's.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, Deserialize)]
pub struct BuildVariant {
    #[serde(default)]
    pub profile_overrides: toml::Table,
    #[serde(default)]
    pub rustflags: Vec<String>,
    /// How the C and C++ of build scripts are compiled.
    #[serde(default, skip_serializing_if = "is_user_c")]
    pub c: CBuild,
}

fn is_user_c(c: &CBuild) -> bool {
    *c == CBuild::User
}

/// Cargo profile keys `profile_overrides` may set: those that decide codegen or the binary.
pub const PROFILE_OVERRIDE_KEYS: [&str; 10] = [
    "opt-level",
    "lto",
    "codegen-units",
    "debug",
    "strip",
    "panic",
    "overflow-checks",
    "debug-assertions",
    "incremental",
    "split-debuginfo",
];

impl BuildVariant {
    /// `cargo --config` arguments for cargo profile `profile`, in key order.
    pub fn cargo_config_args(&self, profile: &str) -> Vec<String> {
        self.profile_overrides
            .iter()
            .map(|(key, value)| format!("profile.{profile}.{key}={value}"))
            .collect()
    }

    /// Why the overrides cannot be passed to cargo, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        for (key, value) in &self.profile_overrides {
            if !PROFILE_OVERRIDE_KEYS.contains(&key.as_str()) {
                return Err(format!(
                    "profile_overrides: unknown cargo profile key {key:?}; known: {}",
                    PROFILE_OVERRIDE_KEYS.join(", ")
                ));
            }
            if !matches!(
                value,
                toml::Value::String(_) | toml::Value::Integer(_) | toml::Value::Boolean(_)
            ) {
                return Err(format!(
                    "profile_overrides: {key} = {value} must be a string, integer or boolean"
                ));
            }
        }
        Ok(())
    }

    /// A short description: `lto="fat" codegen-units=1 -Cfoo`, or `none`.
    pub fn describe(&self) -> String {
        let words: Vec<String> = self
            .profile_overrides
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .chain(self.rustflags.iter().cloned())
            .chain(match self.c {
                CBuild::User => None,
                CBuild::Clang => Some("C by clang".to_owned()),
                CBuild::Pgo => Some("C with PGO".to_owned()),
                CBuild::PgoXlto => Some("C with PGO, cross-language ThinLTO".to_owned()),
            })
            .collect();
        if words.is_empty() {
            "none".to_owned()
        } else {
            words.join(" ")
        }
    }
}

/// `[explore]`: the user's own variants for `pgo-build explore`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExploreSection {
    #[serde(default)]
    pub variant: Vec<ExploreVariant>,
}

/// `[[explore.variant]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExploreVariant {
    pub name: Spanned<String>,
    #[serde(default)]
    pub profile_overrides: toml::Table,
    #[serde(default)]
    pub rustflags: Vec<String>,
    /// Post-link optimization with BOLT.
    #[serde(default)]
    pub bolt: bool,
    /// Built with a profile (default); `false` measures settings alone.
    #[serde(default = "yes")]
    pub pgo: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum LinkJobs {
    Count(usize),
    Auto(AutoKeyword),
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AutoKeyword {
    Auto,
}
