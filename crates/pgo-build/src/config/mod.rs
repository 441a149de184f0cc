//! `pgo-build.toml`: what to build and the workloads that train and measure it.
//!
//! Every error names the file and line (toml's own errors carry the span; our semantic checks
//! use `Spanned` values), so a typo never silently turns into a default.

pub mod cargo_config;
pub mod cargo_workload;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use toml::Spanned;

mod services;
mod values;

use crate::measure::memory::MemoryBudget;
use crate::measure::metric::{Decider, Rounds};
use crate::measure::metrics::MetricSpec;
pub use services::{ReadyWhen, Service};
pub use values::{CBuild, CROSS_LANGUAGE_THIN_LTO, Growth, parse_duration};
use values::{
    default_grace_period, default_timeout, deserialize_cross_language, deserialize_duration,
    deserialize_growth, deserialize_margin, deserialize_memory_budget, deserialize_rounds,
    deserialize_timeout,
};

pub const CONFIG_FILE_NAME: &str = "pgo-build.toml";
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);
const DEFAULT_GRACE_PERIOD: Duration = Duration::from_secs(10);

#[derive(Debug, Default, Clone)]
pub struct Config {
    /// The file it came from; `None` when there is no config file.
    pub path: Option<PathBuf>,
    pub build: BuildSection,
    pub pgo: PgoSection,
    pub bolt: BoltSection,
    pub compare: CompareSection,
    pub explore: ExploreSection,
    pub workloads: Vec<Workload>,
    pub services: Vec<Service>,
}

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

impl Config {
    /// The build settings `[build]` (and `[pgo] cross_language`) add to the workspace's own.
    pub fn variant(&self) -> BuildVariant {
        BuildVariant {
            profile_overrides: self.build.profile_overrides.clone(),
            rustflags: self.build.rustflags.clone(),
            c: self.pgo.cross_language,
        }
    }
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Train,
    Holdout,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum WorkloadCommand {
    /// Run with `sh -c`.
    Shell(String),
    /// Run directly; `${PGO_BUILD_…}` in the words is expanded.
    Argv(Vec<String>),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    pub name: Spanned<String>,
    pub role: Role,
    /// Empty when the workload is a `cargo` one (resolved per stage, see `cargo_workload.rs`).
    #[serde(default = "no_command")]
    pub command: WorkloadCommand,
    /// A cargo command (`["bench", "--bench", "parse"]`) run against the stage under test,
    /// with that stage's target dir, profile, target, features and rustflags.
    #[serde(default)]
    pub cargo: Option<Vec<String>>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Relative to the workspace root.
    pub cwd: Option<PathBuf>,
    #[serde(default = "default_timeout", deserialize_with = "deserialize_timeout")]
    pub timeout: Duration,
    #[serde(default)]
    pub allow_failure: bool,
    /// Between SIGTERM and SIGKILL when pgo-build stops the workload's processes.
    #[serde(
        default = "default_grace_period",
        deserialize_with = "deserialize_duration"
    )]
    pub grace_period: Duration,
    /// A train workload that splits itself: run this many times, each with
    /// `PGO_BUILD_SHARD_INDEX` (0-based) and `PGO_BUILD_SHARD_COUNT`, and each run a unit that
    /// `train --shard` can give to another job.
    #[serde(default = "one_shard")]
    pub shards: usize,
    /// Which of the `shards` runs this is (set by [`Workload::parts`], never read from the file).
    #[serde(skip)]
    pub part: Option<Part>,
    /// The `[[service]]`s started before each run and stopped after it, by name.
    #[serde(default)]
    pub services: Vec<String>,
    /// Those services' declarations (filled in at load, never read from the workload).
    #[serde(skip)]
    pub service_specs: Vec<Service>,
    /// What the workload reports (`[[workload.metric]]`).
    #[serde(default, rename = "metric")]
    pub metrics: Vec<MetricSpec>,
}

/// One run of a workload that declares `shards = K`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    /// 0-based.
    pub index: usize,
    pub count: usize,
}

fn no_command() -> WorkloadCommand {
    WorkloadCommand::Argv(Vec::new())
}

fn one_shard() -> usize {
    1
}

impl Workload {
    pub fn name(&self) -> &str {
        self.name.get_ref()
    }

    /// The name of one run: the workload's name, or `name.part<I>of<K>` (1-based) for a part of
    /// a workload with `shards = K`. Raw profile directories and logs are named by it.
    pub fn run_name(&self) -> String {
        match self.part {
            None => self.name().to_owned(),
            Some(part) => format!("{}.part{}of{}", self.name(), part.index + 1, part.count),
        }
    }

    /// The runs of this workload: itself, or one per shard with `shards = K > 1`.
    pub fn parts(&self) -> Vec<Workload> {
        if self.shards <= 1 {
            return vec![self.clone()];
        }
        (0..self.shards)
            .map(|index| Workload {
                part: Some(Part {
                    index,
                    count: self.shards,
                }),
                ..self.clone()
            })
            .collect()
    }

    /// What of a workload decides its profile or timing: a profile recorded with another
    /// fingerprint is stale.
    pub fn fingerprint(&self) -> String {
        let mut print = format!(
            "{} {:?} {:?} {:?} {:?} {:?} {} {:?}",
            self.name(),
            self.role,
            self.command,
            self.env,
            self.cwd,
            self.timeout,
            self.allow_failure,
            self.grace_period
        );
        if let Some(cargo) = &self.cargo {
            print.push_str(&format!(" cargo {cargo:?}"));
        }
        // Unsharded workloads keep the fingerprint they had before `shards` existed.
        if self.shards > 1 {
            print.push_str(&format!(" shards {}", self.shards));
        }
        if let Some(part) = self.part {
            print.push_str(&format!(" part {}/{}", part.index, part.count));
        }
        // Workloads without services keep the fingerprint they had before services existed.
        for service in &self.service_specs {
            print.push(' ');
            print.push_str(&service.fingerprint());
        }
        print
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    build: BuildSection,
    #[serde(default)]
    pgo: PgoSection,
    #[serde(default)]
    bolt: BoltSection,
    #[serde(default)]
    compare: CompareSection,
    #[serde(default)]
    explore: ExploreSection,
    #[serde(default, rename = "workload")]
    workloads: Vec<Workload>,
    #[serde(default, rename = "service")]
    services: Vec<Service>,
}

impl Config {
    /// Loads `explicit` (which must exist) or `<workspace root>/pgo-build.toml` (optional).
    pub fn load(explicit: Option<&Path>, workspace_root: &Path) -> Result<Config> {
        let path = match explicit {
            Some(path) => {
                if !path.is_file() {
                    bail!(
                        "the configuration file {} given with --config does not exist",
                        path.display()
                    );
                }
                path.to_owned()
            }
            None => {
                let path = workspace_root.join(CONFIG_FILE_NAME);
                if !path.is_file() {
                    return Ok(Config::default());
                }
                path
            }
        };
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("could not read {}", path.display()))?;
        let config = Config::parse(&text, &path)?;
        config.check_cwds(&text, workspace_root)?;
        Ok(config)
    }

    /// Every workload's `cwd` exists (found now, not when the workload is about to run).
    fn check_cwds(&self, text: &str, workspace_root: &Path) -> Result<()> {
        for workload in &self.workloads {
            if let Some(cwd) = &workload.cwd
                && !workspace_root.join(cwd).is_dir()
            {
                bail!(
                    "invalid configuration in {}, line {}: workload {:?} has cwd = {:?}, but {} \
                     is not a directory (cwd is relative to the workspace root)",
                    self.display_path(),
                    line_of(text, workload.name.span().start),
                    workload.name(),
                    cwd.display(),
                    workspace_root.join(cwd).display()
                );
            }
        }
        Ok(())
    }

    pub fn parse(text: &str, path: &Path) -> Result<Config> {
        let file: ConfigFile = toml::from_str(text).map_err(|err| {
            let line = err
                .span()
                .map(|span| format!(", line {}", line_of(text, span.start)))
                .unwrap_or_default();
            anyhow::anyhow!(
                "invalid configuration in {}{line}: {}",
                path.display(),
                err.message()
            )
        })?;
        let config = Config {
            path: Some(path.to_owned()),
            build: file.build,
            pgo: file.pgo,
            bolt: file.bolt,
            compare: file.compare,
            explore: file.explore,
            workloads: file.workloads,
            services: file.services,
        };
        let mut config = config;
        config.validate(text)?;
        let services = config.services.clone();
        for workload in &mut config.workloads {
            workload.service_specs = workload
                .services
                .iter()
                .map(|name| {
                    services
                        .iter()
                        .find(|s| s.name() == name)
                        .cloned()
                        .expect("checked by validate")
                })
                .collect();
        }
        Ok(config)
    }

    fn validate(&self, text: &str) -> Result<()> {
        let path = self.display_path();
        if let Err(reason) = self.variant().check() {
            bail!("invalid configuration in {path}, [build]: {reason}");
        }
        for variant in &self.explore.variant {
            let line = line_of(text, variant.name.span().start);
            let name = variant.name.get_ref();
            if let Err(reason) = crate::util::names::check_variant(name) {
                bail!("invalid configuration in {path}, line {line}: {reason}");
            }
            let settings = BuildVariant {
                profile_overrides: variant.profile_overrides.clone(),
                rustflags: variant.rustflags.clone(),
                c: CBuild::User,
            };
            if let Err(reason) = settings.check() {
                bail!(
                    "invalid configuration in {path}, line {line}: explore variant {name:?}: {reason}"
                );
            }
        }
        let mut seen = BTreeMap::new();
        for workload in &self.workloads {
            let line = line_of(text, workload.name.span().start);
            let name = workload.name();
            if let Err(reason) = crate::util::names::check_workload(name) {
                bail!("invalid configuration in {path}, line {line}: {reason}");
            }
            if let Some(first) = seen.insert(name.to_owned(), line) {
                bail!(
                    "invalid configuration in {path}, line {line}: workload {name:?} is already \
                     defined at line {first}"
                );
            }
            let empty = match &workload.command {
                WorkloadCommand::Shell(line) => line.trim().is_empty(),
                WorkloadCommand::Argv(words) => words.is_empty(),
            };
            match &workload.cargo {
                Some(_) if !empty => bail!(
                    "invalid configuration in {path}, line {line}: workload {name:?} has both \
                     `command` and `cargo`; give one"
                ),
                Some(cargo) => crate::config::cargo_workload::check(cargo).map_err(|reason| {
                    anyhow::anyhow!(
                        "invalid configuration in {path}, line {line}: workload \
                                 {name:?}: {reason}"
                    )
                })?,
                None if empty => bail!(
                    "invalid configuration in {path}, line {line}: workload {name:?} has an \
                     empty `command` (give `command`, or `cargo` for a cargo bench/test/run)"
                ),
                None => {}
            }
            if workload.shards == 0 {
                bail!(
                    "invalid configuration in {path}, line {line}: workload {name:?} has shards \
                     = 0; it must run at least once (shards = 1, the default, runs it whole)"
                );
            }
            if workload.shards > 1 && workload.role != Role::Train {
                bail!(
                    "invalid configuration in {path}, line {line}: workload {name:?} has shards \
                     = {}, but only train workloads are split into shards (a holdout workload \
                     is measured whole)",
                    workload.shards
                );
            }
        }
        self.validate_services(text)?;
        let mut runs = BTreeMap::new();
        for run in self.workloads.iter().flat_map(Workload::parts) {
            if let Some(other) = runs.insert(run.run_name(), run.name().to_owned()) {
                bail!(
                    "invalid configuration in {path}: a run of workload {:?} and workload \
                     {other:?} are both named {:?} (parts of a workload with shards = K are \
                     named <name>.part<I>of<K>); rename one",
                    run.name(),
                    run.run_name()
                );
            }
        }
        Ok(())
    }

    /// The metric names the workloads report, as `--metric` takes them.
    pub fn reported_metrics(&self) -> Vec<String> {
        self.workloads
            .iter()
            .flat_map(|w| &w.metrics)
            .flat_map(MetricSpec::compared_names)
            .collect()
    }

    /// The file name for messages, or where the file would be.
    pub fn display_path(&self) -> String {
        match &self.path {
            Some(path) => path.display().to_string(),
            None => CONFIG_FILE_NAME.to_owned(),
        }
    }

    pub fn workloads_with_role(&self, role: Role) -> impl Iterator<Item = &Workload> {
        self.workloads.iter().filter(move |w| w.role == role)
    }

    /// The names of the workloads of `role`, in configuration order.
    pub fn workload_names(&self, role: Role) -> Vec<String> {
        self.workloads_with_role(role)
            .map(|w| w.name().to_owned())
            .collect()
    }

    pub fn workload(&self, name: &str) -> Option<&Workload> {
        self.workloads.iter().find(|w| w.name() == name)
    }

    /// Every run of the train workloads, in configuration order (see [`Workload::parts`]).
    pub fn train_runs(&self) -> Vec<Workload> {
        self.workloads_with_role(Role::Train)
            .flat_map(Workload::parts)
            .collect()
    }

    /// Whether `run_name` names a run of a configured workload (any role).
    pub fn has_run(&self, run_name: &str) -> bool {
        self.workloads
            .iter()
            .flat_map(Workload::parts)
            .any(|w| w.run_name() == run_name)
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config> {
        Config::parse(text, Path::new("/ws/pgo-build.toml"))
    }

    #[test]
    fn full_config_parses() {
        let config = parse(
            r#"
[build]
bins = ["a", "b"]
profile = "dist"
features = ["fast"]
memory_budget = "6G"
link_jobs = 2
batch_size = 4

[compare]
rounds = 12

[pgo]
continuous = true
on_corrupt = "fail"

[bolt]
enabled = true
funcs = ["^_R.*"]
extra_args = ["-v=1"]

[[workload]]
name = "small"
role = "train"
command = "$PGO_BUILD_BIN_A --small"
env = { SEED = "1" }
timeout = "2m"

[[workload]]
name = "big"
role = "holdout"
command = ["${PGO_BUILD_BIN_A}", "--big"]
cwd = "data"
allow_failure = true
"#,
        )
        .unwrap();
        assert_eq!(config.build.bins.as_deref().unwrap(), ["a", "b"]);
        assert_eq!(config.build.profile.as_deref(), Some("dist"));
        assert_eq!(config.compare.rounds, Some(Rounds::Fixed(12)));
        assert!(matches!(config.build.link_jobs, Some(LinkJobs::Count(2))));
        assert_eq!(config.build.batch_size, Some(4));
        assert!(config.pgo.continuous);
        assert_eq!(config.pgo.on_corrupt, OnCorrupt::Fail);
        assert!(config.bolt.enabled && !config.bolt.huge_pages && config.bolt.args.is_none());
        assert_eq!(config.bolt.funcs, ["^_R.*"]);
        assert_eq!(config.workloads.len(), 2);
        assert_eq!(config.workloads[0].timeout, Duration::from_secs(120));
        assert_eq!(config.workloads[1].timeout, DEFAULT_TIMEOUT);
        assert!(matches!(
            config.workloads[1].command,
            WorkloadCommand::Argv(_)
        ));
        assert_eq!(config.workloads_with_role(Role::Holdout).count(), 1);
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let err = parse("[build]\nprofile = \"release\"\nbinz = [\"a\"]\n").unwrap_err();
        let text = format!("{err:#}");
        assert!(text.contains("/ws/pgo-build.toml, line 3"), "{text}");
        assert!(text.contains("binz"), "{text}");
    }

    #[test]
    fn wrong_type_names_the_line() {
        let err = parse(
            "[[workload]]\nname = \"a\"\nrole = \"train\"\ncommand = \"x\"\ntimeout = true\n",
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("line 5"), "{err:#}");
    }

    #[test]
    fn bad_role_and_bad_duration_are_errors() {
        let err = parse("[[workload]]\nname = \"a\"\nrole = \"training\"\ncommand = \"x\"\n")
            .unwrap_err();
        assert!(format!("{err:#}").contains("line 3"), "{err:#}");
        let err = parse("[[workload]]\nname = \"a\"\nrole = \"train\"\ncommand = \"x\"\ntimeout = \"5 weeks\"\n")
            .unwrap_err();
        assert!(format!("{err:#}").contains("unknown unit"), "{err:#}");
    }

    #[test]
    fn timeouts_say_what_they_expect_and_refuse_zero() {
        let workload = |timeout: &str| {
            let text = format!(
                "[[workload]]\nname = \"a\"\nrole = \"train\"\ncommand = \"x\"\ntimeout = {timeout}\n"
            );
            format!("{:#}", parse(&text).unwrap_err())
        };
        for (value, expected) in [
            (
                "true",
                "expected a duration: whole seconds (90) or a string with a unit",
            ),
            ("-5", "-5 is negative"),
            ("\"0s\"", "timeout must be above 0"),
            ("0", "timeout must be above 0"),
        ] {
            let err = workload(value);
            assert!(err.contains(expected), "timeout = {value}: {err}");
            assert!(err.contains("line 5"), "timeout = {value}: {err}");
        }
    }

    #[test]
    fn compare_rounds_may_be_auto() {
        let config = parse("[compare]\nrounds = \"auto\"\n").unwrap();
        assert_eq!(config.compare.rounds, Some(Rounds::Auto));
        let err = format!("{:#}", parse("[compare]\nrounds = \"many\"\n").unwrap_err());
        assert!(err.contains("or `auto`"), "{err}");
    }

    #[test]
    fn zero_compare_rounds_are_refused_at_load() {
        let err = format!("{:#}", parse("[compare]\nrounds = 0\n").unwrap_err());
        assert!(err.contains("line 2"), "{err}");
        assert!(err.contains("at least 1 round"), "{err}");
        assert!(!err.contains("--rounds"), "{err}");
    }

    #[test]
    fn a_workload_cwd_that_does_not_exist_is_an_error_at_load() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("data")).unwrap();
        let config = |cwd: &str| {
            std::fs::write(
                root.path().join(CONFIG_FILE_NAME),
                format!("\n[[workload]]\nname = \"a\"\nrole = \"train\"\ncommand = \"x\"\ncwd = {cwd:?}\n"),
            )
            .unwrap();
            Config::load(None, root.path())
        };
        assert!(config("data").is_ok());
        let err = format!("{:#}", config("dat").unwrap_err());
        assert!(err.contains("line 3"), "{err}");
        assert!(err.contains("cwd = \"dat\""), "{err}");
        assert!(err.contains("is not a directory"), "{err}");
    }

    #[test]
    fn sharded_workloads_run_once_per_part_with_their_own_fingerprint() {
        let config = parse(
            "[[workload]]\nname = \"w\"\nrole = \"train\"\ncommand = \"x\"\nshards = 3\n\n\
             [[workload]]\nname = \"plain\"\nrole = \"train\"\ncommand = \"y\"\n",
        )
        .unwrap();
        let runs: Vec<String> = config.train_runs().iter().map(Workload::run_name).collect();
        assert_eq!(runs, ["w.part1of3", "w.part2of3", "w.part3of3", "plain"]);
        let fingerprints: std::collections::BTreeSet<String> = config
            .train_runs()
            .iter()
            .map(Workload::fingerprint)
            .collect();
        assert_eq!(fingerprints.len(), 4);
        assert!(config.has_run("w.part2of3") && config.has_run("plain") && !config.has_run("w"));
        for (text, expected) in [
            ("shards = 0", "shards = 0"),
            (
                "shards = 2\nrole = \"holdout\"",
                "only train workloads are split",
            ),
        ] {
            let err = parse(&format!(
                "[[workload]]\nname = \"h\"\ncommand = \"x\"\n{text}\n{}",
                if text.contains("role") {
                    ""
                } else {
                    "role = \"train\"\n"
                }
            ))
            .unwrap_err();
            assert!(format!("{err:#}").contains(expected), "{err:#}");
        }
        let err = parse(
            "[[workload]]\nname = \"w\"\nrole = \"train\"\ncommand = \"x\"\nshards = 2\n\n\
             [[workload]]\nname = \"w.part1of2\"\nrole = \"train\"\ncommand = \"y\"\n",
        )
        .unwrap_err();
        assert!(
            format!("{err:#}").contains("are both named \"w.part1of2\""),
            "{err:#}"
        );
    }

    #[test]
    fn a_workload_is_a_command_or_a_cargo_command() {
        let config =
            parse("[[workload]]\nname = \"b\"\nrole = \"train\"\ncargo = [\"bench\"]\n").unwrap();
        assert_eq!(
            config.workloads[0].cargo.as_deref(),
            Some(&["bench".to_owned()][..])
        );
        for (text, expected) in [
            (
                "command = \"x\"\ncargo = [\"bench\"]",
                "both `command` and `cargo`",
            ),
            ("", "give `command`, or `cargo`"),
            (
                "cargo = [\"bench\", \"--target-dir\", \"t\"]",
                "`--target-dir` in `cargo`",
            ),
        ] {
            let err = parse(&format!(
                "[[workload]]\nname = \"b\"\nrole = \"train\"\n{text}\n"
            ))
            .unwrap_err();
            assert!(format!("{err:#}").contains(expected), "{err:#}");
        }
    }

    #[test]
    fn duplicate_and_invalid_workload_names_are_errors() {
        let text = "[[workload]]\nname = \"a\"\nrole = \"train\"\ncommand = \"x\"\n\n[[workload]]\nname = \"a\"\nrole = \"train\"\ncommand = \"y\"\n";
        let err = parse(text).unwrap_err();
        assert!(
            format!("{err:#}").contains("line 7: workload \"a\" is already defined at line 2"),
            "{err:#}"
        );
        let err = parse("[[workload]]\nname = \"../x\"\nrole = \"train\"\ncommand = \"x\"\n")
            .unwrap_err();
        assert!(format!("{err:#}").contains("line 2"), "{err:#}");
        let err =
            parse("[[workload]]\nname = \"x\"\nrole = \"train\"\ncommand = []\n").unwrap_err();
        assert!(format!("{err:#}").contains("empty `command`"), "{err:#}");
    }

    #[test]
    fn the_readmes_example_configuration_parses() {
        let readme = include_str!("../../../../README.md");
        let start = readme
            .find("```toml\n[compare]")
            .expect("the README shows a pgo-build.toml")
            + 8;
        let end = start + readme[start..].find("```").unwrap();
        let config = parse(&readme[start..end]).unwrap();
        assert_eq!(config.workloads.len(), 1);
        assert!(matches!(config.build.link_jobs, Some(LinkJobs::Auto(_))));
        assert_eq!(config.build.memory_budget, MemoryBudget::Auto);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("3m").unwrap(), Duration::from_secs(180));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert!(parse_duration("m").is_err());
    }

    #[test]
    fn profile_overrides_become_cargo_config_values_and_bad_ones_are_refused() {
        let config = parse(
            "[build]\nprofile_overrides = { lto = \"fat\", codegen-units = 1, debug = false }\nrustflags = [\"-Ctarget-cpu=native\"]\n",
        )
        .unwrap();
        let variant = config.variant();
        assert_eq!(
            variant.cargo_config_args("dist"),
            [
                "profile.dist.codegen-units=1",
                "profile.dist.debug=false",
                "profile.dist.lto=\"fat\""
            ]
        );
        assert_eq!(variant.rustflags, ["-Ctarget-cpu=native"]);
        let err = parse("[build]\nprofile_overrides = { lot = \"fat\" }\n").unwrap_err();
        assert!(
            format!("{err:#}").contains("unknown cargo profile key \"lot\"; known: opt-level, lto"),
            "{err:#}"
        );
        let err = parse("[build]\nprofile_overrides = { lto = [1] }\n").unwrap_err();
        assert!(
            format!("{err:#}").contains("must be a string, integer or boolean"),
            "{err:#}"
        );
        let err = parse("[[explore.variant]]\nname = \"a b\"\n").unwrap_err();
        assert!(
            format!("{err:#}").contains("line 2: explore variant name"),
            "{err:#}"
        );
    }

    #[test]
    fn size_growth_is_a_percentage() {
        let config = parse("[pgo]\nmax_size_growth = \"5%\"\n").unwrap();
        assert_eq!(config.pgo.max_size_growth.unwrap().fraction, 0.05);
        for bad in ["\"5\"", "\"-1%\"", "5", "\"x%\""] {
            let err = parse(&format!("[pgo]\nmax_size_growth = {bad}\n")).unwrap_err();
            assert!(format!("{err:#}").contains("line 2"), "{bad}: {err:#}");
        }
    }

    #[test]
    fn a_bad_memory_budget_is_an_error_naming_its_line_at_load() {
        let config = parse("[build]\nmemory_budget = \"6G\"\n").unwrap();
        assert_eq!(config.build.memory_budget.resolve().0, 6 << 30);
        for bad in ["\"8Q\"", "\"0\"", "8"] {
            let err = parse(&format!("[build]\nbins = []\nmemory_budget = {bad}\n")).unwrap_err();
            let text = format!("{err:#}");
            assert!(text.contains("line 3"), "{bad}: {text}");
            assert!(text.contains("memory_budget"), "{bad}: {text}");
        }
    }
}
