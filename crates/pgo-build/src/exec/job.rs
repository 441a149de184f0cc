//! What runs: a [`Job`] (a workload with its command resolved for a stage) and the [`RunSetup`]
//! it runs against (the stage's binaries), the variables a run sees (`PGO_BUILD_BIN_*`, the
//! run's directory and metrics file) and the command lines it starts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Result, bail};

use crate::config::{Part, Service, Workload, WorkloadCommand};
use crate::layout::Stage;
use crate::util::command::Cmd;

/// Left in the environment by an instrumented parent: children that inherit it skip creating
/// the profile directory and then fail to write their profile.
pub(super) const PROFILE_RT_INIT_ONCE: &str = "__LLVM_PROFILE_RT_INIT_ONCE";

/// Environment variables as (name, value) pairs.
pub type EnvVars = Vec<(String, String)>;

/// Every process of a run gets this run's scratch directory (sockets, state, configuration),
/// removed after the run.
pub const RUN_DIR_ENV: &str = "PGO_BUILD_RUN_DIR";

/// Where a workload may write its metrics, one JSON object per line.
pub const METRICS_ENV: &str = "PGO_BUILD_METRICS";

pub(super) const METRICS_FILE: &str = "metrics.jsonl";

/// What a run of a job is set up with: the stage it runs against, that stage's binaries, the
/// variables, the log. (Not a target triple, nor a cargo target: `BinTarget`.)
pub struct RunSetup<'a> {
    pub stage: Stage,
    pub bin_dir: &'a Path,
    pub bin_names: Vec<&'a str>,
    pub workspace_root: &'a Path,
    /// Extra variables (e.g. `LLVM_PROFILE_FILE` when training).
    pub extra_env: EnvVars,
    /// A program and arguments the workload runs under (an instruction counter), if any.
    pub wrapper: Vec<std::ffi::OsString>,
    pub log_path: PathBuf,
    /// Where the running workload is recorded while it runs (`running/`, one file per run:
    /// variants may be counted side by side).
    pub running_dir: Option<&'a Path>,
    /// Look at what the run's processes execute, every so often (`Outcome::executables`): which
    /// staged binaries a workload runs, its own children included.
    pub observe: bool,
    /// What each of the run's services runs under, by service name (an instruction counter
    /// with a directory of that service's own), when not nothing.
    pub service_wrapper: Option<&'a ServiceWrapper<'a>>,
}

/// What a service of a run runs under, given the service's name.
pub type ServiceWrapper<'a> = dyn Fn(&str) -> Vec<std::ffi::OsString> + Sync + 'a;

/// A workload as it runs against one stage: its configuration, with the command resolved
/// for that stage (a cargo workload's command line is made with the stage's settings by
/// `pipeline/workload_runs.rs`). Only a job runs, so no run meets an unresolved cargo workload.
#[derive(Debug, Clone)]
pub struct Job {
    /// The workload's name and, for a workload with `shards = K`, which of its runs this is.
    pub(super) name: String,
    pub(super) part: Option<Part>,
    pub(super) command: WorkloadCommand,
    /// The workload's `env`, and what the stage adds for a cargo workload.
    pub env: BTreeMap<String, String>,
    pub(super) cwd: Option<PathBuf>,
    pub(super) timeout: Duration,
    pub(super) grace_period: Duration,
    pub(super) services: Vec<Service>,
}

impl Job {
    /// `workload` running `command`: its own for a plain workload, the resolved command
    /// line for a cargo one.
    pub fn new(workload: &Workload, command: WorkloadCommand) -> Job {
        Job {
            name: workload.name().to_owned(),
            part: workload.part,
            command,
            env: workload.env.clone(),
            cwd: workload.cwd.clone(),
            timeout: workload.timeout,
            grace_period: workload.grace_period,
            services: workload.service_specs.clone(),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The same job with its timeout multiplied by `factor` (it runs under a slow counter).
    pub fn slowed(mut self, factor: u32) -> Job {
        self.timeout = self.timeout.saturating_mul(factor);
        self
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}

impl RunSetup<'_> {
    pub(super) fn variables(&self, workload: &Job, run_dir: &Path) -> Vec<(String, String)> {
        let mut vars = vec![
            (RUN_DIR_ENV.to_owned(), run_dir.display().to_string()),
            (
                METRICS_ENV.to_owned(),
                run_dir.join(METRICS_FILE).display().to_string(),
            ),
            (BIN_DIR_ENV.to_owned(), self.bin_dir.display().to_string()),
            ("PGO_BUILD_STAGE".to_owned(), self.stage.name().to_owned()),
            ("PGO_BUILD_WORKLOAD".to_owned(), workload.name().to_owned()),
        ];
        if let Some(part) = workload.part {
            vars.push(("PGO_BUILD_SHARD_INDEX".to_owned(), part.index.to_string()));
            vars.push(("PGO_BUILD_SHARD_COUNT".to_owned(), part.count.to_string()));
        }
        for name in &self.bin_names {
            vars.push((
                bin_env_var(name),
                self.bin_dir.join(name).display().to_string(),
            ));
        }
        vars
    }

    /// The workload's command (under the wrapper, if any).
    pub(super) fn command(&self, workload: &Job, vars: &[(String, String)]) -> Result<Cmd> {
        self.prepared(
            &self.wrapper,
            &workload.command,
            workload.cwd.as_deref(),
            &workload.env,
            vars,
            &format!("workload `{}`", workload.name()),
        )
    }

    /// `command` as a process of this run: the run's variables, the stage's, then `env`, in
    /// `cwd` (relative to the workspace root). `what` names it in errors.
    pub(super) fn prepared(
        &self,
        wrapper: &[std::ffi::OsString],
        command: &WorkloadCommand,
        cwd: Option<&Path>,
        env: &BTreeMap<String, String>,
        vars: &[(String, String)],
        what: &str,
    ) -> Result<Cmd> {
        let words: Vec<std::ffi::OsString> = match command {
            WorkloadCommand::Shell(line) => shell_words(line),
            WorkloadCommand::Argv(words) => words.iter().map(|w| expand(w, vars).into()).collect(),
        };
        let mut words = wrapper.iter().chain(&words);
        // Commands read from a file are never empty (config::WorkloadCommand); a workload
        // without one runs `cargo`, which never gets here. Refused all the same, not a panic.
        let Some(program) = words.next() else {
            bail!("{what}: its command is empty: give the program to run");
        };
        let mut cmd = Cmd::new(program).args(words);
        let cwd = match cwd {
            Some(dir) => self.workspace_root.join(dir),
            None => self.workspace_root.to_owned(),
        };
        if !cwd.is_dir() {
            bail!("{what}: its cwd {} does not exist", cwd.display());
        }
        cmd = cmd.cwd(cwd).env_remove(PROFILE_RT_INIT_ONCE);
        for (key, value) in vars.iter().chain(&self.extra_env) {
            cmd = cmd.env(key, value);
        }
        for (key, value) in env {
            cmd = cmd.env(key, value);
        }
        Ok(cmd)
    }
}

/// How a shell-string command runs: bash with errexit and pipefail where bash exists, else
/// `sh -e`. A failing command inside the string then fails the workload instead of passing
/// unnoticed (a search that errors out, then `echo done`).
fn shell_words(line: &str) -> Vec<std::ffi::OsString> {
    let bash = ["/bin/bash", "/usr/bin/bash"]
        .into_iter()
        .find(|path| Path::new(path).is_file());
    match bash {
        Some(bash) => vec![
            bash.into(),
            "-eo".into(),
            "pipefail".into(),
            "-c".into(),
            line.into(),
        ],
        None => vec!["sh".into(), "-ec".into(), line.into()],
    }
}

/// Expands `${VAR}` and `$VAR` for the given variables (argv workloads have no shell).
pub(super) fn expand(word: &str, vars: &[(String, String)]) -> String {
    let mut out = word.to_owned();
    // Longest names first, so `$PGO_BUILD_BIN_A` does not eat the start of `$PGO_BUILD_BIN_AB`.
    let mut sorted: Vec<&(String, String)> = vars.iter().collect();
    sorted.sort_by_key(|(key, _)| std::cmp::Reverse(key.len()));
    for (key, value) in sorted {
        out = out
            .replace(&format!("${{{key}}}"), value)
            .replace(&format!("${key}"), value);
    }
    out
}

/// `PGO_BUILD_BIN_<NAME>`: the name upper-cased, anything but letters and digits as `_`.
/// The directory of the stage's binaries, for workloads; a binary named `dir` would shadow it.
pub const BIN_DIR_ENV: &str = "PGO_BUILD_BIN_DIR";

pub fn bin_env_var(name: &str) -> String {
    let suffix: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("PGO_BUILD_BIN_{suffix}")
}

/// The staged binaries a workload runs, read from its command and its services' (and from
/// the scripts they name that lie in the workspace): each `$PGO_BUILD_BIN_<NAME>` and
/// `$PGO_BUILD_BIN_DIR/<name>` it uses. `None` when that cannot be told (a cargo workload, a
/// command that names the directory only, or none of them): then it may run any of them.
pub fn binaries_run(
    workload: &Workload,
    bins: &[&str],
    workspace_root: &Path,
) -> Option<std::collections::BTreeSet<String>> {
    if workload.cargo.is_some() {
        return None;
    }
    let mut texts = vec![command_text(&workload.command)];
    texts.extend(
        workload
            .service_specs
            .iter()
            .map(|s| command_text(&s.command)),
    );
    // Scripts the commands run, one level deep: `./bench.sh`, `sh scripts/load.sh`.
    let words: Vec<String> = texts
        .iter()
        .flat_map(|text| {
            text.split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    for word in words {
        let word = word.trim_matches(|c| c == '"' || c == '\'' || c == ';');
        if word.starts_with('$') || word.is_empty() {
            continue;
        }
        let path = workspace_root.join(word);
        if path.is_file()
            && let Ok(text) = std::fs::read_to_string(&path)
        {
            texts.push(text);
        }
    }
    let mut found = std::collections::BTreeSet::new();
    let mut names_the_directory = false;
    for text in &texts {
        for name in bins {
            let variable = bin_env_var(name);
            let by_variable = [format!("${variable}"), format!("${{{variable}}}")]
                .iter()
                .any(|form| mentions(text, form));
            let by_path = ["$PGO_BUILD_BIN_DIR/", "${PGO_BUILD_BIN_DIR}/"]
                .iter()
                .any(|dir| mentions(text, &format!("{dir}{name}")));
            if by_variable || by_path {
                found.insert((*name).to_owned());
            }
        }
        names_the_directory |= text.contains("PGO_BUILD_BIN_DIR");
    }
    // A directory used without a name (`ls $PGO_BUILD_BIN_DIR`, a loop) may run any binary.
    let unnamed_directory = names_the_directory
        && texts.iter().any(|text| {
            text.match_indices("PGO_BUILD_BIN_DIR")
                .any(|(at, _)| !bins.iter().any(|name| names_at(text, at, name)))
        });
    (!found.is_empty() && !unnamed_directory).then_some(found)
}

/// Whether `text` holds `word` not followed by more of a name (`$X` is not `$X_Y`).
fn mentions(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        !text[at + word.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
    })
}

/// Whether the `PGO_BUILD_BIN_DIR` at `at` in `text` is followed by `/<name>`.
fn names_at(text: &str, at: usize, name: &str) -> bool {
    let rest = &text[at + "PGO_BUILD_BIN_DIR".len()..];
    let rest = rest.strip_prefix('}').unwrap_or(rest);
    rest.strip_prefix('/')
        .is_some_and(|rest| mentions(rest, name) && rest.starts_with(name))
}

fn command_text(command: &WorkloadCommand) -> String {
    match command {
        WorkloadCommand::Shell(line) => line.clone(),
        WorkloadCommand::Argv(words) => words.join(" "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binaries_a_workload_runs_are_read_from_its_commands_and_scripts() {
        let dir = tempfile::tempdir().unwrap();
        let bins = ["server", "server-cli", "tool"];
        let workload = |command: &str| -> Workload {
            toml::from_str(&format!(
                "name = \"w\"\nrole = \"holdout\"\ncommand = {command:?}\n"
            ))
            .unwrap()
        };
        let run = |command: &str| {
            binaries_run(&workload(command), &bins, dir.path())
                .map(|set| set.into_iter().collect::<Vec<_>>())
        };
        assert_eq!(
            run("$PGO_BUILD_BIN_SERVER --port 1"),
            Some(vec!["server".into()])
        );
        assert_eq!(
            run("${PGO_BUILD_BIN_SERVER_CLI} get k; $PGO_BUILD_BIN_DIR/tool x"),
            Some(vec!["server-cli".into(), "tool".into()])
        );
        // A directory without a name, or nothing at all: it may run any.
        assert_eq!(run("for b in $PGO_BUILD_BIN_DIR/*; do $b; done"), None);
        assert_eq!(run("redis-benchmark -q"), None);
        // A script in the workspace is read.
        std::fs::write(
            dir.path().join("load.sh"),
            "exec \"$PGO_BUILD_BIN_TOOL\" run\n",
        )
        .unwrap();
        assert_eq!(run("sh load.sh"), Some(vec!["tool".into()]));
        // A service's command counts as the workload's.
        let mut served = workload("redis-benchmark -q");
        served.service_specs =
            vec![toml::from_str("name = \"db\"\ncommand = \"$PGO_BUILD_BIN_SERVER\"\n").unwrap()];
        assert_eq!(
            binaries_run(&served, &bins, dir.path()).map(|s| s.into_iter().collect::<Vec<_>>()),
            Some(vec!["server".into()])
        );
    }

    #[test]
    fn bin_variables_are_upper_case_identifiers() {
        assert_eq!(bin_env_var("my-server"), "PGO_BUILD_BIN_MY_SERVER");
        assert_eq!(bin_env_var("x2.y"), "PGO_BUILD_BIN_X2_Y");
    }

    #[test]
    fn expansion_prefers_the_longest_name() {
        let vars = vec![
            ("PGO_BUILD_BIN_A".to_owned(), "/a".to_owned()),
            ("PGO_BUILD_BIN_AB".to_owned(), "/ab".to_owned()),
        ];
        assert_eq!(expand("$PGO_BUILD_BIN_AB", &vars), "/ab");
        assert_eq!(expand("${PGO_BUILD_BIN_A}/x", &vars), "/a/x");
    }
}
