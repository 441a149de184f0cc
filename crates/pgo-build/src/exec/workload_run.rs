//! Running a workload against the binaries of one stage.
//!
//! A workload finds the binaries through `PGO_BUILD_BIN_DIR` and `PGO_BUILD_BIN_<NAME>`, so the
//! same workload runs unchanged against baseline, instrumented and optimized binaries. Each
//! runs in its own process group, so a timeout stops everything it started and nothing it
//! started outlives it. Every process of a workload also inherits a token
//! (`PGO_BUILD_WORKLOAD_TOKEN`), by which processes that left the group (`setsid`, double
//! fork) are found too, and so are processes a killed pgo-build left behind: the running
//! workload is recorded in `running/<token>.json` until it has ended.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::interrupt;
use super::job::{Job, METRICS_FILE, RunSetup};
use super::process::{ExitWatch, Members, TOKEN_ENV, describe_stopped, reap, stop};
use super::running::{RunningWorkload, forget_running};
use super::service::{self, ServiceOutcome};
use crate::report::StoppedProcess;
use crate::util::printer::Printer;

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
    /// With `RunSetup::observe`: the executables its processes and its services' were seen to
    /// run (looked at every [`OBSERVE_EVERY`]: what ran for less may be missed).
    pub executables: std::collections::BTreeSet<PathBuf>,
}

/// How often an observed run's processes are looked at. Only the warm-up round is observed,
/// so looking often costs little, and a launcher's children that live a tenth of a second
/// (the example's workers on a quiet machine) are not missed.
const OBSERVE_EVERY: Duration = Duration::from_millis(10);

impl RunSetup<'_> {
    /// Runs `workload` against this stage: its services first, then its command, in its own
    /// process group, timed and logged.
    pub fn run(&self, workload: &Job, printer: &Printer) -> Result<Outcome> {
        let run_dir = RunDir::create()?;
        let vars = self.variables(workload, &run_dir.0);
        let cmd = self.command(workload, &vars)?;
        let log = self.open_log(workload)?;
        let token = super::running::new_token(self.running_dir, self.stage.name());
        let cmd = cmd.env(TOKEN_ENV, &token);
        let record = self.record_running(workload, &token)?;
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
        let exit = ExitWatch::new(group);
        exit.say_if_coarse(printer);
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
        let mut executables = std::collections::BTreeSet::new();
        let mut next_look = started;
        let (status, success, usage) = loop {
            if self.observe && Instant::now() >= next_look {
                executables.extend(members.executables());
                executables.extend(services.executables());
                next_look += OBSERVE_EVERY;
            }
            if let Some((status, usage)) = reap(group, false)? {
                break (status.to_string(), status.success(), usage);
            }
            if let Some(signal) = window.take_signal() {
                let stopped = stop(&members, workload.grace_period);
                let _ = reap(group, true);
                let mut described: Vec<String> = Vec::new();
                if !stopped.is_empty() {
                    described.push(describe_stopped(&stopped));
                }
                // The clients first, then what they talked to, as they were stopped.
                described.extend(services.abandon());
                bar.finish_and_clear();
                forget_running(record.as_deref());
                return Err(interrupt::Interrupted {
                    signal,
                    during: format!(
                        "workload `{}` ran against the {} binaries",
                        workload.name(),
                        self.stage.name()
                    ),
                    stopped: described.join(", "),
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
            exit.wait(Duration::from_millis(5));
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
            executables,
        })
    }

    /// The workload's log, created with a first line saying which command wrote it and when:
    /// logs of earlier runs sit beside fresh ones.
    fn open_log(&self, workload: &Job) -> Result<std::fs::File> {
        if let Some(dir) = self.log_path.parent() {
            crate::util::files::create_dir_all(dir)?;
        }
        let mut log = std::fs::File::create(&self.log_path)
            .with_context(|| format!("could not create {}", self.log_path.display()))?;
        let command_line: Vec<String> = crate::util::command::own_arguments();
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
        Ok(log)
    }

    /// The record of the running workload in the running directory (what a later pgo-build
    /// finds when this one was killed), when there is one.
    fn record_running(&self, workload: &Job, token: &str) -> Result<Option<std::path::PathBuf>> {
        let record = self
            .running_dir
            .map(|dir| dir.join(format!("{token}.json")));
        if let Some(record) = &record {
            let running = RunningWorkload {
                token: token.to_owned(),
                pgo_build_pid: std::process::id(),
                workload: workload.name().to_owned(),
                stage: self.stage,
                grace_period: workload.grace_period,
            };
            crate::util::files::write_atomically(
                record,
                serde_json::to_string_pretty(&running)?.as_bytes(),
            )?;
        }
        Ok(record)
    }
}

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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::layout::Stage;

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

    fn target(dir: &Path) -> RunSetup<'_> {
        RunSetup {
            stage: Stage::Baseline,
            bin_dir: dir,
            bin_names: vec!["app"],
            workspace_root: dir,
            extra_env: vec![("EXTRA".into(), "1".into())],
            wrapper: Vec::new(),
            log_path: dir.join("log.txt"),
            running_dir: None,
            observe: false,
            service_wrapper: None,
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
