//! `[[service]]` (a process a workload needs running: a server, a daemon) and the metrics a
//! workload reports (`[[workload.metric]]`): their configuration, checked at load so a bad
//! signal, regex or readiness fails every command with its line.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::WorkloadCommand;
use super::values::{default_grace_period, deserialize_duration};

/// How long a service gets to become ready when `ready.timeout` does not say.
const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(30);

/// A process started before each run of the workloads that name it, and stopped after it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Service {
    pub name: Spanned<String>,
    /// Like a workload's: `sh -c` for a string, run directly for a list.
    pub command: WorkloadCommand,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Relative to the workspace root.
    pub cwd: Option<PathBuf>,
    /// When the service accepts work; without it, as soon as it started.
    pub ready: Option<Readiness>,
    #[serde(default)]
    pub stop: StopSpec,
}

impl Service {
    pub fn name(&self) -> &str {
        self.name.get_ref()
    }

    /// What of the service decides a workload's profile: part of the workload's fingerprint.
    pub fn fingerprint(&self) -> String {
        format!(
            "service {} {:?} {:?} {:?} {:?} {:?}",
            self.name(),
            self.command,
            self.env,
            self.cwd,
            self.ready,
            self.stop
        )
    }
}

/// Exactly one condition, polled until it holds or `timeout` passes. Values may use
/// `$PGO_BUILD_RUN_DIR` and the other workload variables.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Readiness {
    /// `host:port` accepts a TCP connection.
    pub tcp: Option<String>,
    /// A Unix socket at this path accepts a connection.
    pub unix: Option<String>,
    /// A line of the service's output matches this regular expression.
    pub log: Option<String>,
    /// This command exits 0 (run like a workload's command, with the same variables).
    pub command: Option<WorkloadCommand>,
    #[serde(
        default = "default_ready_timeout",
        deserialize_with = "deserialize_duration"
    )]
    pub timeout: Duration,
}

fn default_ready_timeout() -> Duration {
    DEFAULT_READY_TIMEOUT
}

/// What the readiness condition is, once checked.
#[derive(Debug, Clone)]
pub enum ReadyWhen {
    Tcp(String),
    Unix(String),
    Log(regex::Regex),
    Command(WorkloadCommand),
}

impl Readiness {
    /// The one condition given, or why the declaration is wrong.
    pub fn condition(&self) -> Result<ReadyWhen, String> {
        let given: Vec<ReadyWhen> = [
            self.tcp.clone().map(ReadyWhen::Tcp),
            self.unix.clone().map(ReadyWhen::Unix),
            self.log
                .as_deref()
                .map(|pattern| {
                    regex::Regex::new(pattern)
                        .map(ReadyWhen::Log)
                        .map_err(|err| format!("ready.log is not a regular expression: {err}"))
                })
                .transpose()?,
            self.command.clone().map(ReadyWhen::Command),
        ]
        .into_iter()
        .flatten()
        .collect();
        match given.len() {
            1 => Ok(given.into_iter().next().expect("one")),
            0 => Err("`ready` needs one of tcp, unix, log or command".to_owned()),
            _ => Err("`ready` takes one of tcp, unix, log or command, not several".to_owned()),
        }
    }
}

/// How the service is stopped after each run: a signal, or a command (`pueue shutdown`);
/// then `grace_period` for its processes to exit (and write their profiles) before SIGKILL.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StopSpec {
    #[serde(default)]
    pub signal: Option<String>,
    #[serde(default)]
    pub command: Option<WorkloadCommand>,
    #[serde(
        default = "default_grace_period",
        deserialize_with = "deserialize_duration"
    )]
    pub grace_period: Duration,
}

impl Default for StopSpec {
    fn default() -> StopSpec {
        StopSpec {
            signal: None,
            command: None,
            grace_period: default_grace_period(),
        }
    }
}

impl StopSpec {
    /// The signal to send (SIGTERM unless `signal` says): its number and name.
    pub fn signal(&self) -> Result<(libc::c_int, &'static str), String> {
        let Some(name) = &self.signal else {
            return Ok((libc::SIGTERM, "SIGTERM"));
        };
        let bare = name.trim_start_matches("SIG");
        let known = [
            ("TERM", libc::SIGTERM, "SIGTERM"),
            ("INT", libc::SIGINT, "SIGINT"),
            ("HUP", libc::SIGHUP, "SIGHUP"),
            ("QUIT", libc::SIGQUIT, "SIGQUIT"),
            ("USR1", libc::SIGUSR1, "SIGUSR1"),
            ("USR2", libc::SIGUSR2, "SIGUSR2"),
        ];
        known
            .iter()
            .find(|(short, _, _)| *short == bare)
            .map(|(_, number, full)| (*number, *full))
            .ok_or_else(|| {
                format!(
                    "stop.signal = {name:?} is not one pgo-build sends to stop a service (TERM, \
                     INT, HUP, QUIT, USR1, USR2); SIGKILL comes anyway after grace_period, and \
                     a process killed by it writes no profile"
                )
            })
    }

    pub fn check(&self) -> Result<(), String> {
        if self.signal.is_some() && self.command.is_some() {
            return Err("`stop` takes a signal or a command, not both".to_owned());
        }
        self.signal().map(|_| ())
    }
}

/// A figure a workload reports: lines of its output matching `pattern` (the first capture
/// group is the value), or JSON lines `{"name": …, "value": …}` it writes to
/// `$PGO_BUILD_METRICS`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricSpec {
    pub name: Spanned<String>,
    pub direction: Direction,
    #[serde(default)]
    pub unit: String,
    pub pattern: Option<String>,
    /// A distribution (one value per request): these percentiles of each run's values are
    /// compared, each as `<name>.p<P>`. Without it, a run reports one value.
    #[serde(default)]
    pub percentiles: Vec<u8>,
}

impl MetricSpec {
    pub fn name(&self) -> &str {
        self.name.get_ref()
    }

    pub fn check(&self) -> Result<(), String> {
        crate::names::check_metric(self.name())?;
        if let Some(pattern) = &self.pattern {
            let regex = regex::Regex::new(pattern)
                .map_err(|err| format!("pattern is not a regular expression: {err}"))?;
            if regex.captures_len() < 2 {
                return Err(format!(
                    "pattern {pattern:?} has no capture group: put the number in parentheses, \
                     e.g. \"p99: ([0-9.]+) ms\""
                ));
            }
        }
        if let Some(p) = self.percentiles.iter().find(|p| **p == 0 || **p > 100) {
            return Err(format!("percentile {p} is not within 1..=100"));
        }
        Ok(())
    }

    pub fn regex(&self) -> Option<regex::Regex> {
        // Checked at load.
        self.pattern
            .as_deref()
            .map(|p| regex::Regex::new(p).expect("checked at load"))
    }
}

/// Which way a metric improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Latency, time, memory.
    Lower,
    /// Throughput.
    Higher,
}
