//! What a command asks of its steps: one typed request per step, which the dispatcher
//! (`pipeline/mod.rs`, the only pipeline module that reads the command line) makes of the
//! flags, and where a flag and a configuration key name the same thing, which one wins,
//! decided here once (`GlobalOptions::amend`, `CompareRequest::settings`,
//! `ExploreRequest::rounds`, `decider`).
//!
//! Steps take these, never clap's structs: `gate`, `explore` and `run` call `compare` with a
//! `CompareRequest` they make, and what a step of `run` ran with is its `StepOptions`.

use std::path::PathBuf;

use anyhow::{Result, bail};

use crate::config::{CBuild, Config};
use crate::layout::step::Step;
use crate::measure::criterion;
use crate::measure::metric::{CompareRole, Decider, INSTRUCTION_ROUNDS, Metric, Rounds};
use crate::measure::metric::{DEFAULT_ROUNDS, SERVICES_CPU};
use crate::profiles::bundle::{Shard, Weights};

/// The flags every command takes: what to build and how (`--package`, `--bin`, `--target`,
/// …), read by `Loaded::load` and `Context::new`.
#[derive(Debug, Clone, Default)]
pub struct GlobalOptions {
    pub manifest_path: Option<PathBuf>,
    pub config: Option<PathBuf>,
    pub packages: Vec<String>,
    pub bins: Vec<String>,
    pub features: Vec<String>,
    pub profile: Option<String>,
    pub targets: Vec<String>,
    pub jobs: Option<u32>,
    pub strict: bool,
    pub continuous: bool,
    pub cross_language: bool,
    pub retrain: bool,
}

impl GlobalOptions {
    /// The configuration as the flags amend it, the one place a flag overrides a `[pgo]` key:
    /// `--cross-language` turns cross-language PGO on where the file leaves C to the user's
    /// compiler, `--continuous` turns on `[pgo] continuous`, `--retrain` sets `[pgo] profile`
    /// aside. What to build (`--target`, `--package`/`--bin`, `--features`, `--profile` over
    /// `[build]`) is resolved once too, into the context's targets, binaries and settings
    /// (`Loaded::targets`, `Context::new`), where an error can say which of the two named it.
    pub fn amend(&self, config: &mut Config) {
        if self.cross_language && config.pgo.cross_language == CBuild::User {
            config.pgo.cross_language = CBuild::Pgo;
        }
        if self.continuous {
            config.pgo.continuous = true;
        }
        if self.retrain {
            config.pgo.profile = None;
        }
    }
}

/// A command of the pipeline, as the dispatcher runs it for each target.
#[derive(Debug, Clone)]
pub enum Request {
    Doctor,
    Build,
    Instrument,
    Train(TrainRequest),
    Optimize(OptimizeRequest),
    /// `if_enabled`: nothing to do unless `[bolt] enabled = true`.
    Bolt {
        bolt: BoltRequest,
        if_enabled: bool,
    },
    ProfileShow(ShowRequest),
    ProfileCheck(CheckRequest),
    ProfileOverlap(OverlapRequest),
    Export(ExportRequest),
    Pack(PackRequest),
    Unpack(UnpackRequest),
    Merge(MergeRequest),
    Compare(CompareRequest),
    Run(RunRequest),
    Gate(GateRequest),
    Explore(ExploreRequest),
}

/// `pgo-build train`: the named train workloads (or all), one shard of them, the bundle to
/// write.
#[derive(Debug, Clone, Default)]
pub struct TrainRequest {
    pub workloads: Vec<String>,
    pub shard: Option<Shard>,
    pub bundle: Option<PathBuf>,
}

impl TrainRequest {
    /// All of training, as `run` trains: not a shard, not some workloads only.
    pub fn is_whole(&self) -> bool {
        self.shard.is_none() && self.workloads.is_empty()
    }
}

/// `pgo-build optimize`: the binaries allowed to build without profile data.
#[derive(Debug, Clone, Default)]
pub struct OptimizeRequest {
    pub allow_missing_profile: Vec<String>,
}

/// `pgo-build bolt`: post-link optimization of the optimized binaries, or with `without_pgo`
/// of the baseline's.
#[derive(Debug, Clone, Copy, Default)]
pub struct BoltRequest {
    pub without_pgo: bool,
}

/// What the build steps of `run` run with besides the configuration. Their fingerprints cover
/// it, so a step completed by its own command is recorded with the options it ran with.
#[derive(Debug, Clone, Default)]
pub struct StepOptions {
    pub optimize: OptimizeRequest,
    pub bolt: BoltRequest,
    pub compare_rounds: Option<Rounds>,
}

/// `pgo-build run`: every step, reusing those whose inputs have not changed unless `force`d
/// (or at and after `from`); `compare` false stops before the comparison.
#[derive(Debug, Clone)]
pub struct RunRequest {
    pub steps: StepOptions,
    pub force: bool,
    pub from: Option<Step>,
    pub compare: bool,
}

/// `pgo-build compare`: which variants, on which workloads, judged by what and for how long;
/// what is not asked for is decided by [`CompareRequest::settings`].
#[derive(Debug, Clone)]
pub struct CompareRequest {
    pub variants: Vec<String>,
    pub rounds: Option<Rounds>,
    pub budget_secs: Option<u64>,
    pub workloads: Vec<String>,
    pub role: Option<CompareRole>,
    pub metric: Option<Decider>,
    pub seed: u64,
    pub fail_if_slower: bool,
    /// The last release's staged binaries (`--against`), judged as the variant `previous`.
    pub against: Option<PathBuf>,
    /// How long instruction counts may take to decide what the deciding metric leaves open
    /// (`gate --budget`); `None`: `[compare] counting_budget`.
    pub counting_budget: Option<std::time::Duration>,
}

/// A comparison's choices once the flags, the configuration and the defaults have spoken.
#[derive(Debug, Clone)]
pub struct CompareSettings {
    pub decider: Decider,
    pub role: CompareRole,
    pub rounds: Rounds,
    pub budget_secs: u64,
    /// How long instruction counts may take to decide open held-out verdicts.
    pub counting_budget: std::time::Duration,
}

impl CompareRequest {
    /// The comparison of `variants` on `workloads` (none: by their role) with every other
    /// choice left to the configuration and the defaults, at seed 1.
    pub fn of(variants: Vec<String>, workloads: Vec<String>) -> CompareRequest {
        CompareRequest {
            variants,
            rounds: None,
            budget_secs: None,
            workloads,
            role: None,
            metric: None,
            seed: 1,
            fail_if_slower: false,
            against: None,
            counting_budget: None,
        }
    }

    /// What verdicts rest on (see [`decider`]); the held-out workloads for instruction counts,
    /// else all; rounds: the flag, else one count and a repeat for instructions (nearly
    /// deterministic), else `[compare] rounds`, else auto; the budget: the flag, else
    /// `[compare] budget`.
    pub fn settings(&self, config: &Config) -> Result<CompareSettings> {
        let decider = decider(config, self.metric.as_ref())?;
        let instructions = decider.measured() == Metric::Instructions;
        let role = self.role.unwrap_or(if instructions {
            CompareRole::Holdout
        } else {
            CompareRole::All
        });
        let default_rounds = if instructions {
            Rounds::Fixed(INSTRUCTION_ROUNDS)
        } else {
            config.compare.rounds.unwrap_or(Rounds::Auto)
        };
        Ok(CompareSettings {
            decider,
            role,
            rounds: self.rounds.unwrap_or(default_rounds),
            budget_secs: self
                .budget_secs
                .unwrap_or_else(|| config.compare.budget_secs()),
            counting_budget: self
                .counting_budget
                .unwrap_or_else(|| config.compare.counting_budget()),
        })
    }
}

/// `pgo-build gate`: the shipped build judged against the baseline (and the last release).
#[derive(Debug, Clone, Default)]
pub struct GateRequest {
    pub rounds: Option<Rounds>,
    pub against: Option<PathBuf>,
    pub metric: Option<Decider>,
    /// How long instruction counts may take to settle what times left open, as typed.
    pub budget: Option<String>,
}

/// `pgo-build explore`: which variants, how many rounds, judged by what, within which budget,
/// and whether the winner's settings are written to the configuration.
#[derive(Debug, Clone, Default)]
pub struct ExploreRequest {
    pub variants: Vec<String>,
    pub rounds: Option<usize>,
    pub metric: Option<Decider>,
    /// As typed (`90m`, `2h`).
    pub budget: Option<String>,
    pub apply: bool,
}

impl ExploreRequest {
    /// The rounds of the first look: the flag, else one count and a repeat for instructions,
    /// else `[compare] rounds` when it is a number, else the default.
    pub fn rounds(&self, config: &Config, decider: &Decider) -> usize {
        match (self.rounds, decider.measured()) {
            (Some(rounds), _) => rounds,
            (None, Metric::Instructions) => INSTRUCTION_ROUNDS,
            (None, _) => match config.compare.rounds {
                Some(Rounds::Fixed(n)) => n,
                _ => DEFAULT_ROUNDS,
            },
        }
    }
}

/// `pgo-build export`: where the trained profile (with its metadata) and the rustc memory
/// estimates go; `internal` for `explore`'s own exports, which say nothing.
#[derive(Debug, Clone, Default)]
pub struct ExportRequest {
    pub output: Option<PathBuf>,
    pub rustc_estimates: Option<PathBuf>,
    pub internal: bool,
}

/// `pgo-build pack`: a stage's binaries and records into one archive.
#[derive(Debug, Clone)]
pub struct PackRequest {
    pub stage: crate::layout::PackedStage,
    pub output: PathBuf,
}

/// `pgo-build unpack`: a packed stage into this target directory.
#[derive(Debug, Clone)]
pub struct UnpackRequest {
    pub archive: PathBuf,
}

/// `pgo-build merge`: training bundles into one profile, weighted.
#[derive(Debug, Clone)]
pub struct MergeRequest {
    pub bundles: Vec<PathBuf>,
    pub weights: Weights,
    /// `FILE=W`, as typed.
    pub weight: Vec<String>,
}

/// `pgo-build profile show`.
#[derive(Debug, Clone)]
pub struct ShowRequest {
    pub top: usize,
    pub binary: Option<String>,
    pub json: bool,
}

/// `pgo-build profile check`.
#[derive(Debug, Clone)]
pub struct CheckRequest {
    pub top: usize,
    pub json: bool,
}

/// `pgo-build profile overlap`.
#[derive(Debug, Clone)]
pub struct OverlapRequest {
    pub top: usize,
}

/// What verdicts rest on: `--metric`, else `[compare] metric`, else — when a held-out
/// workload has services — the services' own CPU time, else wall time. A workload metric
/// must be one the workloads report.
pub fn decider(config: &Config, flag: Option<&Decider>) -> Result<Decider> {
    let serves = config
        .workloads
        .iter()
        .any(|w| w.role == crate::config::Role::Holdout && !w.services.is_empty());
    let decider = match (flag, &config.compare.metric) {
        (Some(flag), _) => flag.clone(),
        (None, Some(_)) => config.compare.decider(),
        (None, None) if serves => Decider::Reported(SERVICES_CPU.to_owned()),
        (None, None) => Decider::default(),
    };
    if let Some(name) = decider.reported() {
        let reported = config.reported_metrics();
        // Benchmark ids are known once criterion has run: a cargo workload may report it.
        let benchmark = name.starts_with(criterion::METRIC_PREFIX)
            && config.workloads.iter().any(|w| w.cargo.is_some());
        if !benchmark && !reported.iter().any(|r| r == name) {
            bail!(
                "--metric {name}: no workload reports a metric of that name ({}). Declare it \
                 in {} with [[workload.metric]] name = {name:?} and its direction",
                if reported.is_empty() {
                    "no workload declares a metric".to_owned()
                } else {
                    format!("reported: {}", reported.join(", "))
                },
                config.display_path()
            );
        }
    }
    Ok(decider)
}
