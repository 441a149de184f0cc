//! Running a workload against the binaries of one stage.
//!
//! A workload finds the binaries through `PGO_BUILD_BIN_DIR` and `PGO_BUILD_BIN_<NAME>`, so the
//! same workload runs unchanged against baseline, instrumented and optimized binaries. Each
//! runs in its own process group, so a timeout stops everything it started and nothing it
//! started outlives it. Every process of a workload also inherits a token
//! (`PGO_BUILD_WORKLOAD_TOKEN`), by which processes that left the group (`setsid`, double
//! fork) are found too, and so are processes a killed pgo-build left behind: the running
//! workload is recorded in `running/<token>.json` until it has ended.

pub mod interrupt;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::config::{Part, Service, Workload, WorkloadCommand};
use crate::layout::Stage;
use crate::report::StoppedProcess;
use crate::util::command::Cmd;
use crate::util::printer::Printer;

mod process;
mod service;

pub use process::describe_stopped;
use process::{Members, reap, stop};
pub use service::ServiceOutcome;

/// Left in the environment by an instrumented parent: children that inherit it skip creating
/// the profile directory and then fail to write their profile.
const PROFILE_RT_INIT_ONCE: &str = "__LLVM_PROFILE_RT_INIT_ONCE";

/// Environment variables as (name, value) pairs.
pub type EnvVars = Vec<(String, String)>;

/// Inherited by every process of a workload: finds the ones that left its process group.
pub const TOKEN_ENV: &str = "PGO_BUILD_WORKLOAD_TOKEN";

/// The workload running now, recorded while it runs (see [`stop_leftovers`]).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct RunningWorkload {
    token: String,
    pgo_build_pid: u32,
    /// The workload's name; empty for a stage's cargo build.
    workload: String,
    stage: String,
    grace_period: Duration,
}

impl RunningWorkload {
    fn describe(&self) -> String {
        if self.workload.is_empty() {
            format!("the cargo build of the {} stage ran", self.stage)
        } else {
            format!(
                "workload `{}` ran against the {} binaries",
                self.workload, self.stage
            )
        }
    }
}

/// The stage a workload runs against.
pub struct Target<'a> {
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
}

#[derive(Debug)]
pub struct Outcome {
    pub duration: Duration,
    /// `exit status: 0`, `timed out after 30s`, …
    pub status: String,
    pub success: bool,
    /// User + system CPU time of the workload's process tree: the command and every descendant
    /// that was waited for (as `wait4` accounts it).
    pub cpu: Duration,
    /// Minor and major page faults of the process tree (as `wait4` accounts them, like `cpu`).
    pub faults: u64,
    pub log_path: PathBuf,
    /// Processes pgo-build had to stop: on timeout, or left running after the command ended.
    pub stopped: Vec<StoppedProcess>,
    /// How each of the workload's services ended (their CPU time is in `cpu`).
    pub services: Vec<ServiceOutcome>,
    /// The lines the workload wrote to `$PGO_BUILD_METRICS`.
    pub metric_lines: Vec<String>,
}

/// A workload as it runs against one stage: its configuration, with the command resolved
/// for that stage (a cargo workload's command line is made with the stage's settings by
/// `pipeline/workloads.rs`). Only a job runs, so no run meets an unresolved cargo workload.
#[derive(Debug, Clone)]
pub struct Job {
    /// The workload's name and, for a workload with `shards = K`, which of its runs this is.
    name: String,
    part: Option<Part>,
    command: WorkloadCommand,
    /// The workload's `env`, and what the stage adds for a cargo workload.
    pub env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    timeout: Duration,
    grace_period: Duration,
    services: Vec<Service>,
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

impl Target<'_> {
    fn variables(&self, workload: &Job, run_dir: &Path) -> Vec<(String, String)> {
        let mut vars = vec![
            (RUN_DIR_ENV.to_owned(), run_dir.display().to_string()),
            (
                METRICS_ENV.to_owned(),
                run_dir.join(METRICS_FILE).display().to_string(),
            ),
            (
                "PGO_BUILD_BIN_DIR".to_owned(),
                self.bin_dir.display().to_string(),
            ),
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
    fn command(&self, workload: &Job, vars: &[(String, String)]) -> Result<Cmd> {
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
    fn prepared(
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
        let mut cmd = Cmd::new(words.next().expect("commands are never empty")).args(words);
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

    pub fn run(&self, workload: &Job, printer: &Printer) -> Result<Outcome> {
        let run_dir = RunDir::create()?;
        let vars = self.variables(workload, &run_dir.0);
        let cmd = self.command(workload, &vars)?;
        if let Some(dir) = self.log_path.parent() {
            crate::util::files::create_dir_all(dir)?;
        }
        let mut log = std::fs::File::create(&self.log_path)
            .with_context(|| format!("could not create {}", self.log_path.display()))?;
        // Which command wrote this log, and when: logs of earlier runs sit beside fresh ones.
        let command_line: Vec<String> = std::env::args().skip(1).collect();
        std::io::Write::write_all(
            &mut log,
            format!(
                "# pgo-build {}: workload `{}` against the {} binaries, started {}\n",
                command_line.join(" "),
                workload.name(),
                self.stage.name(),
                crate::util::printer::utc_text(std::time::SystemTime::now())
            )
            .as_bytes(),
        )?;
        let token = format!(
            "{}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
            self.stage.name()
        );
        let cmd = cmd.env(TOKEN_ENV, &token);
        let record = self
            .running_dir
            .map(|dir| dir.join(format!("{token}.json")));
        if let Some(record) = &record {
            let running = RunningWorkload {
                token: token.clone(),
                pgo_build_pid: std::process::id(),
                workload: workload.name().to_owned(),
                stage: self.stage.name().to_owned(),
                grace_period: workload.grace_period,
            };
            crate::util::files::write_atomically(
                record,
                serde_json::to_string_pretty(&running)?.as_bytes(),
            )?;
        }
        let window = interrupt::WorkloadWindow::open();
        let services = service::Services::start(self, workload, &vars, &token, &window, printer);
        let mut services = match services {
            Ok(services) => services,
            Err(err) => {
                forget_running(record.as_deref());
                return Err(err);
            }
        };
        let mut command = cmd.to_command();
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        printer.detail(format!("$ {}", cmd.display()));
        let started = Instant::now();
        let child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| {
                format!(
                    "workload `{}`: could not start `{}`",
                    workload.name(),
                    cmd.display()
                )
            })?;
        let group = child.id() as libc::pid_t;
        let members = Members {
            group,
            token: &token,
        };
        let bar = printer.spinner(format!(
            "workload {} ({} binaries)",
            workload.name(),
            self.stage.name()
        ));
        let mut stopped = Vec::new();
        let (status, success, usage) = loop {
            if let Some((status, usage)) = reap(group, false)? {
                break (status.to_string(), status.success(), usage);
            }
            if let Some(signal) = window.take_signal() {
                let stopped = stop(&members, workload.grace_period);
                let _ = reap(group, true);
                bar.finish_and_clear();
                forget_running(record.as_deref());
                return Err(interrupt::Interrupted {
                    signal,
                    during: format!(
                        "workload `{}` ran against the {} binaries",
                        workload.name(),
                        self.stage.name()
                    ),
                    stopped: describe_stopped(&stopped),
                }
                .into());
            }
            if started.elapsed() >= workload.timeout {
                // Stopped the way production stops things: SIGTERM first, SIGKILL after the grace.
                stopped = stop(&members, workload.grace_period);
                let (_, usage) = reap(group, true)?.expect("a blocking wait returns the status");
                break (
                    format!("timed out after {}s", workload.timeout.as_secs()),
                    false,
                    usage,
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        bar.finish_and_clear();
        let duration = started.elapsed();
        let leftovers = stop(&members, workload.grace_period);
        stopped.extend(leftovers);
        forget_running(record.as_deref());
        let services = services.stop_all(self, &vars);
        drop(window);
        let metric_lines = std::fs::read_to_string(run_dir.0.join(METRICS_FILE))
            .map(|text| text.lines().map(str::to_owned).collect())
            .unwrap_or_default();
        Ok(Outcome {
            duration,
            status,
            success,
            cpu: usage.cpu + services.iter().map(|s| s.cpu).sum::<Duration>(),
            faults: usage.faults + services.iter().map(|s| s.faults).sum::<u64>(),
            log_path: self.log_path.clone(),
            stopped,
            services,
            metric_lines,
        })
    }
}

/// Every process of a run gets this run's scratch directory (sockets, state, configuration),
/// removed after the run.
pub const RUN_DIR_ENV: &str = "PGO_BUILD_RUN_DIR";

/// Where a workload may write its metrics, one JSON object per line.
pub const METRICS_ENV: &str = "PGO_BUILD_METRICS";
const METRICS_FILE: &str = "metrics.jsonl";

/// A run's `$PGO_BUILD_RUN_DIR`: under the system's temporary directory, because a Unix
/// socket's path must stay under 108 bytes, which a target directory often is not.
struct RunDir(PathBuf);

impl RunDir {
    fn create() -> Result<RunDir> {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "pgo-build-run-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        ));
        if dir.exists() {
            crate::util::files::remove_dir_all(&dir)?;
        }
        crate::util::files::create_dir_all(&dir)?;
        Ok(RunDir(dir))
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Removes the record of a workload that has ended.
/// A process tree pgo-build starts besides workloads (a stage's cargo build, with its rustc
/// and linkers): tagged with a token and recorded in `running/` like a workload, and stopped
/// (SIGTERM, grace period, SIGKILL) when pgo-build is asked to stop, so neither an interrupted
/// nor a killed pgo-build leaves it running (the next command stops what a killed one left).
pub struct TrackedTree {
    token: String,
    record: Option<PathBuf>,
    during: String,
    done: Arc<AtomicBool>,
    watcher: Option<std::thread::JoinHandle<StoppedBy>>,
}

/// The signal that stopped a tracked tree, and what was stopped.
type StoppedBy = Option<(i32, Vec<StoppedProcess>)>;

/// How long a build's processes get between SIGTERM and SIGKILL.
const BUILD_GRACE_PERIOD: Duration = Duration::from_secs(10);

impl TrackedTree {
    /// Records the tree about to start (`stage`'s cargo build) and starts watching for
    /// signals; [`TrackedTree::tag`] the command that starts it.
    pub fn start(running_dir: Option<&Path>, stage: Stage) -> Result<TrackedTree> {
        let token = format!(
            "{}-{}-build-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
            stage.name()
        );
        let record = running_dir.map(|dir| dir.join(format!("{token}.json")));
        if let Some(record) = &record {
            let running = RunningWorkload {
                token: token.clone(),
                pgo_build_pid: std::process::id(),
                workload: String::new(),
                stage: stage.name().to_owned(),
                grace_period: BUILD_GRACE_PERIOD,
            };
            crate::util::files::write_atomically(
                record,
                serde_json::to_string_pretty(&running)?.as_bytes(),
            )?;
        }
        let done = Arc::new(AtomicBool::new(false));
        // Open before the tree starts: from now on a signal is recorded, not fatal.
        let window = interrupt::WorkloadWindow::open();
        let watcher = {
            let (done, token) = (done.clone(), token.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::SeqCst) {
                    if let Some(signal) = window.take_signal() {
                        let members = Members {
                            group: 0,
                            token: &token,
                        };
                        return Some((signal, stop(&members, BUILD_GRACE_PERIOD)));
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                None
            })
        };
        Ok(TrackedTree {
            token,
            record,
            during: format!("the cargo build of the {} stage ran", stage.name()),
            done,
            watcher: Some(watcher),
        })
    }

    /// The command, with the token its processes inherit.
    pub fn tag(&self, cmd: Cmd) -> Cmd {
        cmd.env(TOKEN_ENV, &self.token)
    }

    /// Once the tree has ended: [`interrupt::Interrupted`] when a signal stopped it.
    pub fn finish(mut self) -> Result<()> {
        self.done.store(true, Ordering::SeqCst);
        let stopped = self.watcher.take().and_then(|w| w.join().ok()).flatten();
        forget_running(self.record.take().as_deref());
        match stopped {
            Some((signal, stopped)) => Err(interrupt::Interrupted {
                signal,
                during: self.during.clone(),
                stopped: describe_stopped(&stopped),
            }
            .into()),
            None => Ok(()),
        }
    }
}

impl Drop for TrackedTree {
    /// An error while the tree ran (pgo-build returns early): the tree is stopped too.
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(watcher) = self.watcher.take() {
            let _ = watcher.join();
            let members = Members {
                group: 0,
                token: &self.token,
            };
            stop(&members, BUILD_GRACE_PERIOD);
        }
        forget_running(self.record.as_deref());
    }
}

fn forget_running(record: Option<&Path>) {
    if let Some(record) = record {
        let _ = std::fs::remove_file(record);
    }
}

/// Stops the processes of workloads that an earlier pgo-build left running when it was
/// killed (recorded in `running_dir`), and says which, one message each. Called before
/// anything else runs.
pub fn stop_leftovers(running_dir: &Path) -> Result<Vec<String>> {
    let mut messages = Vec::new();
    for entry in std::fs::read_dir(running_dir)
        .into_iter()
        .flatten()
        .flatten()
    {
        if entry.path().extension().is_some_and(|ext| ext == "json")
            && let Some(message) = stop_left_by(&entry.path())?
        {
            messages.push(message);
        }
    }
    Ok(messages)
}

/// [`stop_leftovers`] for one record.
fn stop_left_by(record: &Path) -> Result<Option<String>> {
    let Ok(text) = std::fs::read_to_string(record) else {
        return Ok(None);
    };
    let Ok(running) = serde_json::from_str::<RunningWorkload>(&text) else {
        crate::util::files::remove_file(record)?;
        return Ok(None);
    };
    let members = Members {
        // The group id may have been reused since: the token alone identifies them.
        group: 0,
        token: &running.token,
    };
    let stopped = stop(&members, running.grace_period);
    let still_alive = members.live();
    if !still_alive.is_empty() {
        bail!(
            "processes left running by an earlier pgo-build (pid {}, while {}) could not be \
             stopped: {}. Stop them (kill -KILL {}) and try again.",
            running.pgo_build_pid,
            running.describe(),
            still_alive
                .iter()
                .map(|(pid, name)| format!("{name} (pid {pid})"))
                .collect::<Vec<_>>()
                .join(", "),
            still_alive
                .iter()
                .map(|(pid, _)| pid.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    crate::util::files::remove_file(record)?;
    Ok(Some(format!(
        "an earlier pgo-build (pid {}) ended while {}, without stopping it; {}. That run did \
         not complete and none of its outputs are used.",
        running.pgo_build_pid,
        running.describe(),
        if stopped.is_empty() {
            "none of its processes were left".to_owned()
        } else {
            format!(
                "stopped the processes it left running: {}",
                describe_stopped(&stopped)
            )
        }
    )))
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

/// Lines of a workload's log that look like errors (`error`, `panicked`, `fatal`, in any
/// case): how many, and the first, shortened. A workload can report failures and still exit 0.
pub fn error_lines(log: &Path) -> Option<(usize, String)> {
    let text = std::fs::read(log).ok()?;
    let text = String::from_utf8_lossy(&text);
    let mut matching = text.lines().filter(|line| looks_like_an_error(line));
    let first = matching.next()?;
    let first: String = first.trim().chars().take(160).collect();
    Some((1 + matching.count(), first))
}

/// Whether a log line reads as an error: "error", "errors", "panicked" or "fatal" as a word
/// (not inside a name such as `quick-error` or `thiserror`), outside cargo's progress lines,
/// which name crates.
fn looks_like_an_error(line: &str) -> bool {
    const CARGO_PROGRESS: [&str; 8] = [
        "Compiling ",
        "Checking ",
        "Downloaded ",
        "Downloading ",
        "Fresh ",
        "Running ",
        "Finished ",
        "Updating ",
    ];
    if CARGO_PROGRESS
        .iter()
        .any(|word| line.trim_start().starts_with(word))
    {
        return false;
    }
    let lower = line.to_ascii_lowercase();
    let part_of_a_name =
        |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || "-_".contains(c));
    ["error", "errors", "panicked", "fatal"].iter().any(|word| {
        lower.match_indices(word).any(|(at, _)| {
            !part_of_a_name(lower[..at].chars().next_back())
                && !part_of_a_name(lower[at + word.len()..].chars().next())
        })
    })
}

/// The profile runtime's own report that it could not write a profile, found in a
/// workload's log ("LLVM Profile Error: Failed to write file "…": No space left on device"):
/// the processes ended normally, but their profiles are missing or cut short.
pub struct ProfileWriteFailure {
    /// The runtime's first such line.
    pub line: String,
    /// How many such lines the log has.
    pub count: usize,
    /// The directory it could not write into, and the space free there now.
    pub dir: Option<(PathBuf, Option<u64>)>,
}

impl ProfileWriteFailure {
    pub fn find(log: &Path) -> Option<ProfileWriteFailure> {
        let text = std::fs::read(log).ok()?;
        let text = String::from_utf8_lossy(&text);
        let mut lines = text
            .lines()
            .filter(|line| line.contains("LLVM Profile Error") && line.contains("write"));
        let first = lines.next()?;
        let dir = first
            .split('"')
            .nth(1)
            .and_then(|file| Path::new(file).parent())
            .map(|dir| (dir.to_owned(), free_space(dir)));
        Some(ProfileWriteFailure {
            line: first.trim().chars().take(300).collect(),
            count: 1 + lines.count(),
            dir,
        })
    }
}

impl std::fmt::Display for ProfileWriteFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the profile runtime could not write profiles")?;
        if self.count > 1 {
            write!(f, " ({} times)", self.count)?;
        }
        write!(f, ": \"{}\"", self.line)?;
        if let Some((dir, free)) = &self.dir {
            write!(f, ". {} is on a filesystem with ", dir.display())?;
            match free {
                Some(bytes) => write!(f, "{} free", crate::util::units::human_bytes(*bytes))?,
                None => write!(f, "unknown free space")?,
            }
            write!(
                f,
                ": free space there, or give cargo a target directory on a larger disk \
                 (CARGO_TARGET_DIR or build.target-dir), and train again"
            )?;
        }
        Ok(())
    }
}

/// Bytes available to this user on the filesystem of `dir`.
fn free_space(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: a NUL-terminated path and a zeroed statvfs for the call to fill.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    Some(stat.f_bavail as u64 * stat.f_frsize as u64)
}

/// Expands `${VAR}` and `$VAR` for the given variables (argv workloads have no shell).
fn expand(word: &str, vars: &[(String, String)]) -> String {
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

/// The last `lines` lines of a log file, for error messages: read from the file's last 64 KiB
/// (a log can be gigabytes), invalid UTF-8 replaced, each line cut at 300 characters.
pub fn log_tail(path: &Path, lines: usize) -> String {
    use std::io::{Read, Seek, SeekFrom};
    const READ: u64 = 64 << 10;
    const LINE: usize = 300;
    let Ok(mut file) = std::fs::File::open(path) else {
        return String::new();
    };
    let size = file.metadata().map_or(0, |m| m.len());
    let mut bytes = Vec::new();
    if file
        .seek(SeekFrom::Start(size.saturating_sub(READ)))
        .is_err()
        || file.read_to_end(&mut bytes).is_err()
    {
        return String::new();
    }
    let text = String::from_utf8_lossy(&bytes);
    let mut all: Vec<&str> = text.lines().collect();
    if size > READ && !all.is_empty() {
        all.remove(0); // Most likely the end of a line that started before the window.
    }
    all[all.len().saturating_sub(lines)..]
        .iter()
        .map(|line| {
            let count = line.chars().count();
            if count <= LINE {
                (*line).to_owned()
            } else {
                let kept: String = line.chars().take(LINE).collect();
                format!("{kept}… ({} more characters)", count - LINE)
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `PGO_BUILD_BIN_<NAME>`: the name upper-cased, anything but letters and digits as `_`.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_tail_quotes_only_the_end_of_the_file_and_cuts_long_lines() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let mut text = "x".repeat(200 << 10);
        text.push_str("\nsecond to last\n");
        text.push_str(&"y".repeat(1000));
        text.push('\n');
        std::fs::write(&log, text).unwrap();
        let tail = log_tail(&log, 20);
        assert!(tail.starts_with("second to last\n"), "{}", &tail[..40]);
        assert!(tail.ends_with("… (700 more characters)"), "{tail}");
        assert!(tail.len() < 400);
        assert_eq!(log_tail(&dir.path().join("none"), 5), "");
    }

    #[test]
    fn a_failing_command_inside_a_shell_string_fails_the_workload() {
        let dir = tempfile::tempdir().unwrap();
        let printer = Printer::new(crate::util::printer::Verbosity::Quiet);
        let target = target(dir.path());
        let outcome = target
            .run(
                &workload("false; echo still ran", Duration::from_secs(10)),
                &printer,
            )
            .unwrap();
        assert!(!outcome.success, "{outcome:?}");
        let log = std::fs::read_to_string(dir.path().join("log.txt")).unwrap();
        assert!(!log.contains("still ran"), "{log}");
        // A failure early in a pipeline fails it too (pipefail, where bash exists).
        if Path::new("/bin/bash").is_file() || Path::new("/usr/bin/bash").is_file() {
            let outcome = target
                .run(&workload("false | cat", Duration::from_secs(10)), &printer)
                .unwrap();
            assert!(!outcome.success, "{outcome:?}");
        }
    }

    #[test]
    fn error_looking_lines_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        std::fs::write(
            &log,
            "ok\nError: no such file: a\nfine\nthread 'main' panicked at x\n",
        )
        .unwrap();
        let (count, first) = error_lines(&log).unwrap();
        assert_eq!(count, 2);
        assert_eq!(first, "Error: no such file: a");
        std::fs::write(&log, "all good\n").unwrap();
        assert_eq!(error_lines(&log), None);
        // Names that contain the word are not errors; the word is, in any case.
        std::fs::write(
            &log,
            "   Compiling quick-error v1.2.3\nusing thiserror and error_chain\nran 3 ERRORS\n",
        )
        .unwrap();
        assert_eq!(error_lines(&log), Some((1, "ran 3 ERRORS".to_owned())));
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

    fn workload(command: &str, timeout: Duration) -> Job {
        let text = format!(
            "[[workload]]\nname = \"w\"\nrole = \"train\"\ncommand = {command:?}\ntimeout = {}\n",
            timeout.as_secs()
        );
        let workload = crate::config::Config::parse(&text, Path::new("pgo-build.toml"))
            .unwrap()
            .workloads
            .remove(0);
        Job::new(&workload, workload.command.clone())
    }

    fn target(dir: &Path) -> Target<'_> {
        Target {
            stage: Stage::Baseline,
            bin_dir: dir,
            bin_names: vec!["app"],
            workspace_root: dir,
            extra_env: vec![("EXTRA".into(), "1".into())],
            wrapper: Vec::new(),
            log_path: dir.join("log.txt"),
            running_dir: None,
        }
    }

    #[test]
    fn workload_sees_the_stage_variables_and_its_output_is_logged() {
        let dir = tempfile::tempdir().unwrap();
        let printer = Printer::new(crate::util::printer::Verbosity::Quiet);
        let outcome = target(dir.path())
            .run(
                &workload(
                    "echo $PGO_BUILD_BIN_APP $PGO_BUILD_STAGE $EXTRA",
                    Duration::from_secs(60),
                ),
                &printer,
            )
            .unwrap();
        assert!(outcome.success, "{}", outcome.status);
        assert!(outcome.cpu < outcome.duration + Duration::from_secs(1));
        let log = std::fs::read_to_string(&outcome.log_path).unwrap();
        let (stamp, output) = log.split_once('\n').unwrap();
        assert!(
            stamp.starts_with("# pgo-build ")
                && stamp.contains("workload `w` against the baseline"),
            "{stamp}"
        );
        assert_eq!(
            output.trim(),
            format!("{}/app baseline 1", dir.path().display())
        );
    }

    #[test]
    fn cpu_time_includes_waited_for_children() {
        let dir = tempfile::tempdir().unwrap();
        let printer = Printer::new(crate::util::printer::Verbosity::Quiet);
        // Two busy children, waited for by the shell.
        let busy = "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done";
        let outcome = target(dir.path())
            .run(
                &workload(
                    &format!("({busy}) & ({busy}) & wait"),
                    Duration::from_secs(60),
                ),
                &printer,
            )
            .unwrap();
        assert!(outcome.success, "{}", outcome.status);
        assert!(
            outcome.cpu > Duration::from_millis(50),
            "cpu {:?}",
            outcome.cpu
        );
    }

    #[test]
    fn page_faults_include_waited_for_children() {
        let dir = tempfile::tempdir().unwrap();
        let printer = Printer::new(crate::util::printer::Verbosity::Quiet);
        let faults = |command: &str| {
            let outcome = target(dir.path())
                .run(&workload(command, Duration::from_secs(60)), &printer)
                .unwrap();
            assert!(outcome.success, "{}", outcome.status);
            outcome.faults
        };
        // A grandchild (the shell's child) touching a 64 MiB buffer: 16384 pages at least.
        let touching = faults("dd if=/dev/zero of=/dev/null bs=64M count=1 2>/dev/null; true");
        let idle = faults("true");
        assert!(touching > 16_000, "{touching} faults");
        assert!(idle < 2_000, "{idle} faults");
    }

    #[test]
    fn timeout_kills_the_whole_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let printer = Printer::new(crate::util::printer::Verbosity::Quiet);
        let outcome = target(dir.path())
            .run(
                &workload("sleep 30 & sleep 30", Duration::from_secs(1)),
                &printer,
            )
            .unwrap();
        assert!(!outcome.success);
        assert!(outcome.status.contains("timed out"), "{}", outcome.status);
        assert!(outcome.duration < Duration::from_secs(20));
    }

    #[test]
    fn processes_ignoring_sigterm_are_killed_after_the_grace_period() {
        let dir = tempfile::tempdir().unwrap();
        let printer = Printer::new(crate::util::printer::Verbosity::Quiet);
        let mut stubborn = workload("trap '' TERM; sleep 30 & wait", Duration::from_secs(1));
        stubborn.grace_period = Duration::from_millis(300);
        let outcome = target(dir.path()).run(&stubborn, &printer).unwrap();
        assert!(!outcome.success);
        assert!(outcome.status.contains("timed out"), "{}", outcome.status);
        let shell = outcome
            .stopped
            .iter()
            .find(|p| p.name == "sh" || p.name == "bash")
            .expect("the shell was stopped");
        assert_eq!(shell.signal, "SIGKILL", "{:?}", outcome.stopped);
    }

    #[test]
    fn leftover_children_are_stopped_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let printer = Printer::new(crate::util::printer::Verbosity::Quiet);
        let marker = dir.path().join("pid");
        let outcome = target(dir.path())
            .run(
                // The shell exits once its child runs `sleep` (a child still between fork and
                // exec is named like the shell: on a busy machine the name raced).
                &workload(
                    &format!(
                        "sleep 60 & echo $! > {}; until [ \"$(cat /proc/$!/comm)\" = sleep ]; do :; done",
                        marker.display()
                    ),
                    Duration::from_secs(60),
                ),
                &printer,
            )
            .unwrap();
        assert!(outcome.success);
        assert_eq!(outcome.stopped.len(), 1, "{:?}", outcome.stopped);
        assert_eq!(outcome.stopped[0].name, "sleep");
        assert_eq!(outcome.stopped[0].signal, "SIGTERM");
        let pid: i32 = std::fs::read_to_string(&marker)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // Gone, or exited and waiting to be reaped by init (a zombie).
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let running = !state.is_empty()
            && !state
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z');
        assert!(!running, "the leftover sleep is still running: {state:?}");
    }
}
