//! `[[service]]` (a process a workload needs running: a server, a daemon) and the metrics a
//! workload reports (`[[workload.metric]]`): their configuration, checked at load so a bad
//! signal, regex or readiness fails every command with its line.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::values::WorkloadCommand;
use super::values::{default_grace_period, deserialize_duration};

/// How long a service gets to become ready when `ready.timeout` does not say.
const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(30);

/// `[[service]]`: a server or daemon started before each run of the workloads that name it,
/// and stopped after it; it runs the stage's binaries, and its profile counts.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Service {
    /// What workloads name it by (`services = ["db"]`).
    #[schemars(with = "String")]
    pub name: Spanned<String>,
    /// Like a workload's: a shell string, or an argv list run directly.
    pub command: WorkloadCommand,
    /// Variables added to its environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Its working directory, relative to the workspace root (default: the root).
    pub cwd: Option<PathBuf>,
    /// When the service accepts work; without it, as soon as it started.
    pub ready: Option<Readiness>,
    /// How it is stopped after each run (default: SIGTERM, then SIGKILL after 10 s).
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

/// `ready`: exactly one condition, polled until it holds or `timeout` passes. Values may use
/// `$PGO_BUILD_RUN_DIR` and the other workload variables.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
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
    /// How long the service has to become ready.
    #[serde(
        default = "default_ready_timeout",
        deserialize_with = "deserialize_duration"
    )]
    #[schemars(with = "super::described::DurationValue", extend("default" = "30s"))]
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

/// `stop`: how the service is stopped after each run: a signal, or a command (`pueue
/// shutdown`); then `grace_period` for its processes to exit (and write their profiles)
/// before SIGKILL.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StopSpec {
    /// The signal that makes the service exit normally, so it writes its profile: a server
    /// that stops on Ctrl-C needs "SIGINT" (SIGTERM would kill it without one). Accepted:
    /// SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2 (with or without "SIG").
    #[serde(default)]
    #[schemars(extend("default" = "SIGTERM"))]
    pub signal: Option<String>,
    /// A command that stops it instead of a signal (run like a workload's command).
    #[serde(default)]
    pub command: Option<WorkloadCommand>,
    /// How long its processes get to exit before SIGKILL.
    #[serde(
        default = "default_grace_period",
        deserialize_with = "deserialize_duration"
    )]
    #[schemars(with = "super::described::DurationValue", extend("default" = "10s"))]
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::Config;

    fn parse(text: &str) -> anyhow::Result<Config> {
        Config::parse(text, Path::new("/ws/pgo-build.toml"))
    }

    fn error(text: &str) -> String {
        format!("{:#}", parse(text).unwrap_err())
    }

    const SERVICE: &str = "[[service]]\nname = \"db\"\ncommand = \"db --serve\"\n";

    #[test]
    fn a_service_is_resolved_into_the_workloads_that_name_it() {
        let config = parse(&format!(
            "{SERVICE}ready = {{ tcp = \"127.0.0.1:5432\", timeout = \"5s\" }}\nstop = {{ command = \"db --shutdown\" }}\n\n\
             [[workload]]\nname = \"w\"\nrole = \"train\"\nservices = [\"db\"]\ncommand = \"client\"\n"
        ))
        .unwrap();
        let workload = &config.workloads[0];
        assert_eq!(workload.service_specs[0].name(), "db");
        let ready = workload.service_specs[0].ready.as_ref().unwrap();
        assert_eq!(ready.timeout, Duration::from_secs(5));
        assert!(matches!(ready.condition(), Ok(ReadyWhen::Tcp(addr)) if addr == "127.0.0.1:5432"));
        // The service is part of the workload's fingerprint: changing it makes training stale.
        let changed = parse(&format!(
            "{SERVICE}ready = {{ tcp = \"127.0.0.1:5433\" }}\n\n\
             [[workload]]\nname = \"w\"\nrole = \"train\"\nservices = [\"db\"]\ncommand = \"client\"\n"
        ))
        .unwrap();
        assert_ne!(workload.fingerprint(), changed.workloads[0].fingerprint());
    }

    #[test]
    fn bad_services_and_metrics_are_errors_with_their_line() {
        let unknown = error(&format!(
            "{SERVICE}\n[[workload]]\nname = \"w\"\nrole = \"train\"\nservices = [\"cache\"]\ncommand = \"c\"\n"
        ));
        assert!(unknown.contains("line 6: workload \"w\" needs service \"cache\", but no [[service]] has that name (defined: db)"), "{unknown}");
        let signal = error(&format!("{SERVICE}stop = {{ signal = \"KILL\" }}\n"));
        assert!(
            signal.contains("line 2: service \"db\": stop.signal = \"KILL\""),
            "{signal}"
        );
        let two = error(&format!(
            "{SERVICE}ready = {{ tcp = \"h:1\", log = \"up\" }}\n"
        ));
        assert!(two.contains("not several"), "{two}");
        let none = error(&format!("{SERVICE}ready = {{ timeout = \"5s\" }}\n"));
        assert!(
            none.contains("needs one of tcp, unix, log or command"),
            "{none}"
        );
        let workload = "[[workload]]\nname = \"w\"\nrole = \"holdout\"\ncommand = \"c\"\n[[workload.metric]]\n";
        let builtin = error(&format!(
            "{workload}name = \"wall\"\ndirection = \"lower\"\n"
        ));
        assert!(builtin.contains("line 6: metric \"wall\" of workload \"w\": \"wall\" is a name pgo-build measures itself"), "{builtin}");
        let group = error(&format!(
            "{workload}name = \"rps\"\ndirection = \"higher\"\npattern = \"rps: [0-9]+\"\n"
        ));
        assert!(group.contains("has no capture group"), "{group}");
        let direction = error(&format!("{workload}name = \"rps\"\ndirection = \"up\"\n"));
        assert!(direction.contains("line 7"), "{direction}");
        let decider = error(&format!(
            "[compare]\nmetric = \"rps\"\n\n{workload}name = \"latency\"\ndirection = \"lower\"\npercentiles = [50, 99]\n"
        ));
        assert!(decider.contains("line 2: [compare] metric = \"rps\", but no workload reports it (reported: latency.p50, latency.p99)"), "{decider}");
        assert!(parse(&format!(
            "[compare]\nmetric = \"latency.p99\"\n\n{workload}name = \"latency\"\ndirection = \"lower\"\npercentiles = [50, 99]\n"
        ))
        .is_ok());
    }
}
