//! The sections of `pgo-build.toml` besides the workloads: `[build]`, `[pgo]`, `[bolt]`,
//! `[compare]`, `[explore]`, and [`BuildVariant`], what `[build]` (or an explore variant) adds
//! to the workspace's own build settings.

use std::path::PathBuf;

use anyhow::Result;
use serde::Deserialize;
use toml::Spanned;

use super::values::{
    CBuild, Growth, deserialize_cross_language, deserialize_growth, deserialize_margin,
    deserialize_memory_budget, deserialize_optional_duration, deserialize_rounds,
    deserialize_share,
};
use crate::measure::memory::MemoryBudget;
use crate::measure::metric::{Decider, Rounds};

/// `[pgo]`: how profiles are collected and used.
#[derive(Debug, Default, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PgoSection {
    /// Continuous-mode instrumentation: counters live in the memory-mapped profile, so
    /// processes killed by any signal still contribute. Costs value profiling (no
    /// indirect-call promotion). Same as `--continuous`.
    #[serde(default)]
    pub continuous: bool,
    /// What to do with corrupt or unreadable raw profiles: leave them out of the merge with a
    /// warning naming each (`"drop"`), or fail the stage (`"fail"`).
    #[serde(default)]
    #[schemars(extend("default" = "drop"))]
    pub on_corrupt: OnCorrupt,
    /// Keep every process's raw profile, instead of merging each binary's files as training
    /// runs (disk use then grows with the number of processes).
    #[serde(default)]
    pub keep_raw_profiles: bool,
    /// A committed profile (written by `pgo-build export`, relative to the workspace root):
    /// `optimize` and `run` build from it instead of instrumenting and training. `{target}`
    /// becomes the target triple.
    pub profile: Option<PathBuf>,
    /// With a committed profile: the share of its counts in functions that changed (or whose
    /// crate was renamed) above which the optimized build is refused as stale.
    #[serde(default, deserialize_with = "deserialize_share")]
    #[schemars(extend("default" = 0.2), range(min = 0.0, max = 1.0))]
    pub max_stale: Option<f64>,
    /// The edge-profile overlap of training and holdout below which `profile overlap` (and
    /// `run`, when its answer ships nothing and it measures the overlap) warns, and the answer
    /// calls training a poor match for the held-out work. Above it, a function with 5% of the
    /// held-out counts or more that training ran at most a tenth as much is warned of too (a
    /// warning: `--strict` fails on either).
    #[serde(default, deserialize_with = "deserialize_share")]
    #[schemars(extend("default" = 0.5), range(min = 0.0, max = 1.0))]
    pub min_overlap: Option<f64>,
    /// How much larger than the baseline an optimized (or BOLTed) binary may be, e.g. "5%":
    /// a larger one fails the stage, and `explore` never recommends it.
    #[serde(default, deserialize_with = "deserialize_growth")]
    #[schemars(with = "Option<super::described::Percentage>")]
    pub max_size_growth: Option<Growth>,
    /// Function order of the optimized link for start-up, from temporal profiles (the link
    /// must run lld).
    #[serde(default)]
    pub startup_order: StartupOrder,
    /// Symbol names that stay the same across version and dependency bumps, so a committed
    /// profile survives releases (every stage build gets them; turning it off, or on, needs a
    /// new training).
    #[schemars(extend("default" = true))]
    pub stable_names: Option<bool>,
    /// LLVM's inlining of small functions into their callers before instrumenting. Off
    /// (`false`), a function's profile record covers its own code only, so a committed profile
    /// survives a rustc upgrade that changes the standard library's small functions; the
    /// instrumented and optimized builds both get `-Cllvm-args=-disable-preinline` (turning
    /// it off, or on, needs a new training). What it keeps and costs is measured by
    /// `bench/toolchain-carry`.
    #[schemars(extend("default" = true))]
    pub preinline: Option<bool>,
    /// Cross-language PGO: the C and C++ that build scripts compile get the same profile as
    /// the Rust: `true`, or `"thin-lto"` for cross-language ThinLTO too. Same as
    /// `--cross-language`.
    #[serde(default, deserialize_with = "deserialize_cross_language")]
    #[schemars(with = "super::described::CrossLanguageValue", extend("default" = false))]
    pub cross_language: CBuild,
    /// Packages whose C/C++ keeps the user's own compiler, without profile, under
    /// cross-language PGO: for a build script's C or C++ that clang cannot compile (each
    /// stage says which it excluded).
    #[serde(default)]
    pub cross_language_exclude: Vec<String>,
}

/// How the optimized link orders functions for start-up (`[pgo] startup_order`).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
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

    pub fn preinline(&self) -> bool {
        self.preinline.unwrap_or(true)
    }

    pub fn min_overlap(&self) -> f64 {
        self.min_overlap.unwrap_or(0.5)
    }
}

/// `[bolt]`: post-link optimization of the optimized binaries with llvm-bolt.
#[derive(Debug, Default, Clone, Deserialize, schemars::JsonSchema)]
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

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnCorrupt {
    /// Exclude them from the merge, with a loud warning listing each.
    #[default]
    Drop,
    /// Fail the stage.
    Fail,
}

/// `[compare]`: how variants are measured against each other (`compare`, `run`'s closing
/// comparison, `gate`, `explore`).
#[derive(Debug, Default, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompareSection {
    /// Counted paired rounds per workload, or `"auto"` (rounds until the deciding verdicts are
    /// reached, within `budget`).
    #[serde(default, deserialize_with = "deserialize_rounds")]
    #[schemars(with = "Option<super::described::RoundsValue>", extend("default" = "auto"))]
    pub rounds: Option<Rounds>,
    /// With `rounds = "auto"`: the seconds the comparison's counted rounds may take together.
    /// A look whose rounds would end past it is not started (the first look always runs).
    #[schemars(extend("default" = 300))]
    pub budget: Option<u64>,
    /// The equivalence margin: "no difference" is claimed only when the interval lies within
    /// it.
    #[serde(default, deserialize_with = "deserialize_margin")]
    #[schemars(with = "Option<super::described::Percentage>", extend("default" = "2%"))]
    pub margin: Option<f64>,
    /// What verdicts rest on: `"wall"`, `"cpu"`, `"instructions"`, `"faults"`, or a metric
    /// the workloads report (`"p99_ms"`, `"latency.p99"`). Unset: `"services.cpu"` (the
    /// services' own CPU time) when a held-out workload has services, where a workload has
    /// them, and wall time for the others; else `"wall"`.
    #[serde(default)]
    #[schemars(with = "Option<String>", extend("default" = "wall, or services.cpu with services"))]
    pub metric: Option<Spanned<String>>,
    /// Where the deciding metric leaves a held-out verdict open (a busy machine's noise, too
    /// few rounds), instruction counts decide it, when counting them takes at most this long
    /// (estimated from a counted run of the workload an earlier `--metric instructions`
    /// comparison measured, else from the rounds' times and the counter's usual slowdown, then
    /// from the first workload counted; the estimate says which). `0` turns that off; `gate
    /// --budget` overrides it for the gate.
    #[serde(default, deserialize_with = "deserialize_optional_duration")]
    #[schemars(with = "Option<super::described::DurationValue>", extend("default" = "15m"))]
    pub counting_budget: Option<std::time::Duration>,
}

impl CompareSection {
    /// `budget`, else [`crate::measure::metric::DEFAULT_BUDGET_SECS`].
    pub fn budget_secs(&self) -> u64 {
        self.budget
            .unwrap_or(crate::measure::metric::DEFAULT_BUDGET_SECS)
    }

    pub fn margin(&self) -> f64 {
        self.margin
            .unwrap_or(crate::measure::metric::DEFAULT_MARGIN)
    }

    /// `counting_budget`, else [`crate::measure::metric::DEFAULT_COUNTING_BUDGET`].
    pub fn counting_budget(&self) -> std::time::Duration {
        self.counting_budget
            .unwrap_or(crate::measure::metric::DEFAULT_COUNTING_BUDGET)
    }

    /// `metric`, checked at load.
    pub fn decider(&self) -> Decider {
        self.metric
            .as_ref()
            .map(|m| m.get_ref().parse().expect("checked at load"))
            .unwrap_or_default()
    }
}

/// `[build]`: what is built, and how.
#[derive(Debug, Default, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BuildSection {
    /// The binary targets to build (default: every binary target of every workspace member).
    pub bins: Option<Vec<String>>,
    /// The cargo profile of every stage's build.
    #[schemars(extend("default" = "release"))]
    pub profile: Option<String>,
    /// Features passed to cargo.
    #[serde(default)]
    pub features: Vec<String>,
    /// The memory the links and rustc of one build may use together: "auto" (the memory
    /// available when the build starts, less a margin) or a size such as "8G".
    #[serde(default, deserialize_with = "deserialize_memory_budget")]
    #[schemars(with = "super::described::MemorySize", extend("default" = "auto"))]
    pub memory_budget: MemoryBudget,
    /// How many links may run at once: "auto" (from the budget and measured link sizes) or a
    /// number.
    #[schemars(extend("default" = "auto"))]
    pub link_jobs: Option<LinkJobs>,
    /// Build the binaries in groups of this many per cargo invocation instead of in one.
    pub batch_size: Option<usize>,
    /// rustc's measured memory peaks carried from another target directory or machine (a file
    /// written by `pgo-build export --rustc-estimates`, relative to the workspace root; say
    /// restored from a CI cache): each stage's build admits crates it has not measured itself
    /// by them. A file that does not exist yet is no error.
    pub rustc_estimates: Option<PathBuf>,
    /// Cargo profile settings for every stage's build, without editing the workspace
    /// (`{ lto = "fat", codegen-units = 1 }`, passed as `cargo --config profile.<name>.<key>`);
    /// written by `explore --apply`.
    #[serde(default)]
    #[schemars(with = "super::described::ProfileOverrides")]
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

/// `[explore]`: your own variants for `pgo-build explore`, beside its built-in ones.
#[derive(Debug, Default, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExploreSection {
    #[serde(default)]
    pub variant: Vec<ExploreVariant>,
}

/// `[[explore.variant]]`: a build variant `explore` measures (its settings, with or without
/// a profile, with or without BOLT).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExploreVariant {
    /// What `explore` calls the variant.
    #[schemars(with = "String")]
    pub name: Spanned<String>,
    /// Cargo profile settings of the variant (`{ opt-level = 2 }`).
    #[serde(default)]
    #[schemars(with = "super::described::ProfileOverrides")]
    pub profile_overrides: toml::Table,
    /// Rustflags of the variant, after the user's own.
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

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum LinkJobs {
    Count(usize),
    Auto(AutoKeyword),
}

#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AutoKeyword {
    Auto,
}
