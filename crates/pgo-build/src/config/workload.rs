//! `[[workload]]`: a command (or a cargo command) that trains or measures the binaries, its
//! role, environment, limits, services and metrics, and the runs it splits into.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::services::Service;
use super::values::{
    WorkloadCommand, default_grace_period, default_timeout, deserialize_duration,
    deserialize_timeout,
};
use crate::measure::reported_metrics::MetricSpec;

/// What a workload is for.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Deserialize,
    serde::Serialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Run against the instrumented binaries: its profile trains the optimized build.
    Train,
    /// Measured, never trained on: what comparisons and the gate judge by.
    Holdout,
}

impl Role {
    /// As `pgo-build.toml`, `report.json` and the tables write it.
    pub fn name(self) -> &'static str {
        match self {
            Role::Train => "train",
            Role::Holdout => "holdout",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `[[workload]]`: a command pgo-build runs against a stage's binaries
/// (`$PGO_BUILD_BIN_<NAME>`), to train or to measure.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// What logs, tables and `train WORKLOAD` call it.
    #[schemars(with = "String")]
    pub name: Spanned<String>,
    /// `"train"` or `"holdout"`.
    pub role: Role,
    /// A shell string (`bash -eo pipefail -c`), or an argv list run directly. Required unless
    /// `cargo` is given.
    // Empty for a `cargo` workload (resolved per stage, see `cargo_workload.rs`).
    #[serde(default = "no_command")]
    pub command: WorkloadCommand,
    /// A cargo command (`["bench", "--bench", "parse"]`) run against the stage under test,
    /// with that stage's target dir, profile, target, features and rustflags.
    #[serde(default)]
    pub cargo: Option<Vec<String>>,
    /// Variables added to its environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Its working directory, relative to the workspace root (default: the root).
    pub cwd: Option<PathBuf>,
    /// How long a run may take before it is stopped (and fails).
    #[serde(default = "default_timeout", deserialize_with = "deserialize_timeout")]
    #[schemars(with = "super::described::DurationValue", extend("default" = "30m"))]
    pub timeout: Duration,
    /// A run that exits with an error does not fail the step (its profile still counts).
    #[serde(default)]
    pub allow_failure: bool,
    /// Between SIGTERM and SIGKILL when pgo-build stops the workload's processes.
    #[serde(
        default = "default_grace_period",
        deserialize_with = "deserialize_duration"
    )]
    #[schemars(with = "super::described::DurationValue", extend("default" = "10s"))]
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
