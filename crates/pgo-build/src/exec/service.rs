//! Services (`[[service]]`): processes a workload needs running — a server, a daemon — started
//! before each run, polled until ready, and stopped after it however the run ended (the
//! client failed, timed out, or pgo-build was interrupted: [`Services`] stops them when
//! dropped).
//!
//! Each service runs in its own process group with its own token, recorded in `running/`
//! like a workload, so a killed pgo-build's next command stops it. Stopping is the user's
//! way (a signal, or a command such as `pueue shutdown`), then the grace period for the whole
//! tree to exit and write its profiles; what is still alive then is killed, and named: a
//! process killed by SIGKILL writes no profile.

use std::io::{BufRead, Seek};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::interrupt;
use super::job::{Job, RunSetup, expand};
use super::logs::log_tail;
use super::process::{Members, TOKEN_ENV, Usage, describe_stopped, reap, send, stop};
use super::running::{RunningWorkload, forget_running};
use crate::config::{ReadyWhen, Service};
use crate::report::StoppedProcess;
use crate::util::printer::Printer;

/// The first line of a service's log is pgo-build's, starting with this.
const LOG_HEADER: &str = "# pgo-build: ";

/// How a service's run ended.
#[derive(Debug, Clone)]
pub struct ServiceOutcome {
    pub name: String,
    pub log: PathBuf,
    /// `exit status: 0`, `signal: 9 (SIGKILL)`.
    pub status: String,
    /// It ended before pgo-build stopped it (a crash, or the client shut it down).
    pub ended_early: bool,
    /// The exit status was success (or the stop signal itself, which is how services end).
    pub clean: bool,
    /// How it was asked to stop: `SIGTERM`, `` `pueue shutdown` ``.
    pub asked_by: String,
    pub grace_period: Duration,
    /// Processes still alive after the grace period, killed with SIGKILL.
    pub killed: Vec<StoppedProcess>,
    /// Why it was not stopped the configured way, if it was not.
    pub stop_failure: Option<String>,
    /// Its processes when it was asked to stop (pid, name).
    pub processes: Vec<(i32, String)>,
    /// User + system CPU time of its process tree (as `wait4` accounts it).
    pub cpu: Duration,
    pub faults: u64,
    /// The peak resident memory of its largest process (as `wait4` accounts it).
    pub max_rss_bytes: u64,
}

struct RunningService {
    spec: Service,
    pid: libc::pid_t,
    token: String,
    record: Option<PathBuf>,
    log: PathBuf,
    exited: Option<(std::process::ExitStatus, Usage)>,
}

/// The services of one run, stopped in reverse order of starting.
pub(super) struct Services {
    running: Vec<RunningService>,
}

impl Services {
    /// Starts each of `job`'s services and waits until it is ready. On an error the ones
    /// started are stopped (when the returned value, or the partial one, is dropped).
    pub(super) fn start(
        target: &RunSetup,
        job: &Job,
        vars: &[(String, String)],
        token: &str,
        window: &interrupt::WorkloadWindow,
        printer: &Printer,
    ) -> Result<Services> {
        let mut services = Services {
            running: Vec::new(),
        };
        for spec in &job.services {
            let log = service_log(&target.log_path, spec.name());
            let mut file = std::fs::File::create(&log)
                .with_context(|| format!("could not create {}", log.display()))?;
            std::io::Write::write_all(
                &mut file,
                format!(
                    "{LOG_HEADER}service `{}` of workload `{}` against the {} binaries, started {}\n",
                    spec.name(),
                    job.name(),
                    target.stage.name(),
                    crate::util::printer::utc_text(std::time::SystemTime::now())
                )
                .as_bytes(),
            )?;
            let service_token = format!("{token}-service-{}", spec.name());
            let wrapper = target
                .service_wrapper
                .map(|wrapper| wrapper(spec.name()))
                .unwrap_or_default();
            let cmd = target
                .prepared(
                    &wrapper,
                    &spec.command,
                    spec.cwd.as_deref(),
                    &spec.env,
                    vars,
                    &format!("service `{}`", spec.name()),
                )?
                .env(TOKEN_ENV, &service_token);
            let record = target
                .running_dir
                .map(|dir| dir.join(format!("{service_token}.json")));
            if let Some(record) = &record {
                let running = RunningWorkload {
                    token: service_token.clone(),
                    pgo_build_pid: std::process::id(),
                    workload: format!("{} (service {})", job.name(), spec.name()),
                    stage: target.stage,
                    grace_period: spec.stop.grace_period,
                };
                crate::util::files::write_atomically(
                    record,
                    serde_json::to_string_pretty(&running)?.as_bytes(),
                )?;
            }
            let mut command = cmd.to_command();
            std::os::unix::process::CommandExt::process_group(&mut command, 0);
            printer.detail(format!("$ {} (service {})", cmd.display(), spec.name()));
            let child = command
                .stdin(Stdio::null())
                .stdout(file.try_clone()?)
                .stderr(file)
                .spawn();
            let child = match child {
                Ok(child) => child,
                Err(err) => {
                    forget_running(record.as_deref());
                    return Err(err).with_context(|| {
                        format!(
                            "service `{}` of workload `{}`: could not start `{}`",
                            spec.name(),
                            job.name(),
                            cmd.display()
                        )
                    });
                }
            };
            services.running.push(RunningService {
                spec: spec.clone(),
                pid: child.id() as libc::pid_t,
                token: service_token,
                record,
                log,
                exited: None,
            });
            let service = services.running.last_mut().expect("just pushed");
            wait_ready(target, job, service, vars, window, printer)?;
        }
        Ok(services)
    }

    /// Stops every service (reverse order) and says how each ended.
    /// The executables the services' processes run now.
    pub(super) fn executables(&self) -> Vec<PathBuf> {
        self.running
            .iter()
            .flat_map(|service| {
                Members {
                    group: service.pid,
                    token: &service.token,
                }
                .executables()
            })
            .collect()
    }

    pub(super) fn stop_all(
        &mut self,
        target: &RunSetup,
        vars: &[(String, String)],
    ) -> Vec<ServiceOutcome> {
        let mut outcomes = Vec::new();
        while let Some(service) = self.running.pop() {
            outcomes.push(stop_service(target, service, vars));
        }
        outcomes.reverse();
        outcomes
    }
}

impl Services {
    /// Stops every service without judging how it ended (an error or an interruption):
    /// its stop signal, then what is left as any workload's leftovers. Returns what was
    /// stopped, "service `db` (pid 12, SIGINT)", for the message that says so.
    pub(super) fn abandon(&mut self) -> Vec<String> {
        let mut stopped = Vec::new();
        while let Some(service) = self.running.pop() {
            let members = Members {
                group: service.pid,
                token: &service.token,
            };
            if service.exited.is_none() {
                let (signal, name) = service
                    .spec
                    .stop
                    .signal()
                    .unwrap_or((libc::SIGTERM, "SIGTERM"));
                members.signal(&[], signal);
                stopped.push(format!(
                    "service `{}` (pid {}, {name})",
                    service.spec.name(),
                    service.pid
                ));
            }
            let leftovers = stop(&members, service.spec.stop.grace_period);
            if !leftovers.is_empty() {
                stopped.push(describe_stopped(&leftovers));
            }
            let _ = reap(service.pid, true);
            forget_running(service.record.as_deref());
        }
        stopped
    }
}

impl Drop for Services {
    /// An error: the services are stopped all the same.
    fn drop(&mut self) {
        self.abandon();
    }
}

/// `compare-load-pgo.log` → `compare-load-pgo.<service>.log`.
fn service_log(workload_log: &Path, service: &str) -> PathBuf {
    let stem = workload_log
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    workload_log.with_file_name(format!("{stem}.{service}.log"))
}

/// Polls the service's readiness until it holds, the service ends, the timeout passes or
/// pgo-build is asked to stop.
fn wait_ready(
    target: &RunSetup,
    job: &Job,
    service: &mut RunningService,
    vars: &[(String, String)],
    window: &interrupt::WorkloadWindow,
    printer: &Printer,
) -> Result<()> {
    let Some(readiness) = &service.spec.ready else {
        return Ok(());
    };
    let condition = readiness.condition().map_err(anyhow::Error::msg)?;
    let name = service.spec.name().to_owned();
    let what = match &condition {
        ReadyWhen::Tcp(addr) => format!("a TCP connection to {}", expand(addr, vars)),
        ReadyWhen::Unix(path) => format!("a connection to the Unix socket {}", expand(path, vars)),
        ReadyWhen::Log(regex) => format!("a line of its output matching /{}/", regex.as_str()),
        ReadyWhen::Command(command) => format!("`{}` exiting 0", describe_command(command)),
    };
    let bar = printer.spinner(format!("service {name}: waiting for {what}"));
    let started = Instant::now();
    let mut log_offset = 0;
    loop {
        if let Some(signal) = window.take_signal() {
            bar.finish_and_clear();
            return Err(interrupt::Interrupted {
                signal,
                during: format!(
                    "service `{name}` of workload `{}` was starting against the {} binaries",
                    job.name(),
                    target.stage.name()
                ),
                stopped: format!("service `{name}`"),
            }
            .into());
        }
        if service.exited.is_none()
            && let Some(done) = reap(service.pid, false)?
        {
            service.exited = Some(done);
        }
        // A launcher that exited 0 leaving its server running (a daemon) is still starting.
        let members = Members {
            group: service.pid,
            token: &service.token,
        };
        let gone = service
            .exited
            .is_some_and(|(status, _)| !status.success() || members.live().is_empty());
        if let Some((status, _)) = service.exited.filter(|_| gone) {
            bar.finish_and_clear();
            bail!(
                "service `{name}` of workload `{}` ended before it was ready ({status}), against \
                 the {} binaries. Its output ends with:\n{}\nFull log: {}",
                job.name(),
                target.stage.name(),
                log_tail(&service.log, 20),
                service.log.display()
            );
        }
        let ready = match &condition {
            ReadyWhen::Tcp(addr) => tcp_accepts(&expand(addr, vars)),
            ReadyWhen::Unix(path) => {
                std::os::unix::net::UnixStream::connect(expand(path, vars)).is_ok()
            }
            ReadyWhen::Log(regex) => log_matches(&service.log, &mut log_offset, regex),
            ReadyWhen::Command(command) => {
                let remaining = readiness.timeout.saturating_sub(started.elapsed());
                probe_succeeds(
                    target,
                    command,
                    vars,
                    remaining.min(Duration::from_secs(10)),
                )?
            }
        };
        if ready {
            bar.finish_and_clear();
            printer.detail(format!(
                "service {name} ready after {:.2}s ({what})",
                started.elapsed().as_secs_f64()
            ));
            return Ok(());
        }
        if started.elapsed() >= readiness.timeout {
            bar.finish_and_clear();
            bail!(
                "service `{name}` of workload `{}` was not ready within {}s against the {} \
                 binaries: waited for {what}. Its output ends with:\n{}\nFull log: {}\nCheck \
                 the service's `ready` (the address or path it listens on; $PGO_BUILD_RUN_DIR \
                 is this run's directory), or raise ready.timeout (instrumented binaries start \
                 slower).",
                job.name(),
                readiness.timeout.as_secs(),
                target.stage.name(),
                log_tail(&service.log, 20),
                service.log.display()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn tcp_accepts(addr: &str) -> bool {
    use std::net::ToSocketAddrs;
    let Ok(addrs) = addr.to_socket_addrs() else {
        return false;
    };
    addrs
        .into_iter()
        .any(|a| std::net::TcpStream::connect_timeout(&a, Duration::from_millis(200)).is_ok())
}

/// Whether a line written to `log` since `offset` matches; moves `offset` past whole lines.
fn log_matches(log: &Path, offset: &mut u64, regex: &regex::Regex) -> bool {
    let Ok(mut file) = std::fs::File::open(log) else {
        return false;
    };
    if file.seek(std::io::SeekFrom::Start(*offset)).is_err() {
        return false;
    }
    let mut reader = std::io::BufReader::new(file);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return false,
            Ok(n) => {
                if line.last() != Some(&b'\n') {
                    // A line still being written: looked at again once complete.
                    return false;
                }
                *offset += n as u64;
                let text = String::from_utf8_lossy(&line);
                // pgo-build's own header line is not the service's output.
                if text.starts_with(LOG_HEADER) {
                    continue;
                }
                if regex.is_match(text.trim_end_matches(['\n', '\r'])) {
                    return true;
                }
            }
        }
    }
}

/// Runs a readiness command once; true when it exits 0 within `limit`.
fn probe_succeeds(
    target: &RunSetup,
    command: &crate::config::WorkloadCommand,
    vars: &[(String, String)],
    limit: Duration,
) -> Result<bool> {
    let cmd = target.prepared(
        &[],
        command,
        None,
        &Default::default(),
        vars,
        "a readiness command",
    )?;
    let mut child = cmd
        .to_command()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("could not run the readiness command `{}`", cmd.display()))?;
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status.success());
        }
        if started.elapsed() >= limit {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn describe_command(command: &crate::config::WorkloadCommand) -> String {
    match command {
        crate::config::WorkloadCommand::Shell(line) => line.clone(),
        crate::config::WorkloadCommand::Argv(words) => words.join(" "),
    }
}

/// Runs a service's stop command until it ends or `deadline`; an error says why it did not
/// succeed.
fn run_stop_command(
    target: &RunSetup,
    spec: &Service,
    command: &crate::config::WorkloadCommand,
    vars: &[(String, String)],
    deadline: Instant,
) -> Result<()> {
    let cmd = target.prepared(
        &[],
        command,
        spec.cwd.as_deref(),
        &spec.env,
        vars,
        "a stop command",
    )?;
    let mut child = cmd
        .to_command()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    while child.try_wait()?.is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    match child.wait()? {
        status if status.success() => Ok(()),
        status => Err(anyhow::anyhow!("it ended with {status}")),
    }
}

/// Asks the service to stop its way, waits the grace period for its whole tree to exit, and
/// kills what is left.
fn stop_service(
    target: &RunSetup,
    mut service: RunningService,
    vars: &[(String, String)],
) -> ServiceOutcome {
    let spec = &service.spec;
    let grace = spec.stop.grace_period;
    let members = Members {
        group: service.pid,
        token: &service.token,
    };
    let (signal, signal_name) = spec.stop.signal().unwrap_or((libc::SIGTERM, "SIGTERM"));
    let mut asked_by = match &spec.stop.command {
        Some(command) => format!("`{}`", describe_command(command)),
        None => signal_name.to_owned(),
    };
    if service.exited.is_none()
        && let Ok(Some(done)) = reap(service.pid, false)
    {
        service.exited = Some(done);
    }
    let ended_early = service.exited.is_some();
    let deadline = super::process::deadline_after(grace);
    let mut stop_failure = None;
    let processes = members.live();
    // Asked even when its first process has ended: a launcher leaves the server running.
    if !ended_early || !processes.is_empty() {
        match &spec.stop.command {
            Some(command) => {
                if let Err(err) = run_stop_command(target, spec, command, vars, deadline) {
                    stop_failure = Some(format!(
                        "its stop command {asked_by} could not run ({err:#}), so pgo-build sent \
                         {signal_name} instead"
                    ));
                    asked_by = signal_name.to_owned();
                    members.signal(&[], signal);
                }
            }
            None => {
                send(-service.pid, signal);
                for (pid, _) in members.live() {
                    send(pid, signal);
                }
            }
        }
    }
    while Instant::now() < deadline {
        if service.exited.is_none()
            && let Ok(Some(done)) = reap(service.pid, false)
        {
            service.exited = Some(done);
        }
        if service.exited.is_some() && members.live().is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // What is left gets SIGKILL (no second SIGTERM: the user's stop was the polite one).
    let left = members.live();
    let killed: Vec<StoppedProcess> = left
        .iter()
        .map(|(pid, name)| StoppedProcess {
            pid: *pid,
            name: name.clone(),
            signal: "SIGKILL".to_owned(),
        })
        .collect();
    if !left.is_empty() {
        let pids: Vec<i32> = left.iter().map(|(pid, _)| *pid).collect();
        members.signal(&pids, libc::SIGKILL);
    }
    if service.exited.is_none()
        && let Ok(Some(done)) = reap(service.pid, true)
    {
        service.exited = Some(done);
    }
    forget_running(service.record.as_deref());
    let (status, usage) = service
        .exited
        .map(|(status, usage)| (Some(status), usage))
        .unwrap_or((None, Usage::default()));
    let clean = status.is_some_and(|s| {
        s.success()
            || (!ended_early && std::os::unix::process::ExitStatusExt::signal(&s) == Some(signal))
            || (!ended_early && s.code() == Some(128 + signal))
    }) && killed.is_empty();
    ServiceOutcome {
        name: spec.name().to_owned(),
        log: service.log.clone(),
        status: status.map_or("not reaped".to_owned(), |s| s.to_string()),
        ended_early,
        clean,
        asked_by,
        grace_period: grace,
        killed,
        stop_failure,
        processes,
        cpu: usage.cpu,
        faults: usage.faults,
        max_rss_bytes: usage.max_rss_bytes,
    }
}

impl ServiceOutcome {
    /// What went wrong for its profile, if anything: ended by itself with a failure or a
    /// signal, or killed after the grace period.
    pub fn problem(&self) -> Option<String> {
        if let Some(failure) = &self.stop_failure {
            return Some(format!("service `{}`: {failure}", self.name));
        }
        if !self.killed.is_empty() {
            return Some(format!(
                "service `{}` did not exit within {}s of {}: pgo-build killed {} with SIGKILL, \
                 which writes no profile",
                self.name,
                self.grace_period.as_secs(),
                self.asked_by,
                describe_stopped(&self.killed)
            ));
        }
        if self.ended_early && !self.clean {
            return Some(format!(
                "service `{}` ended while the workload ran ({}), before pgo-build stopped it \
                 (log: {})",
                self.name,
                self.status,
                self.log.display()
            ));
        }
        if !self.clean {
            return Some(format!(
                "service `{}` ended with {} when asked to stop by {} (log: {})",
                self.name,
                self.status,
                self.asked_by,
                self.log.display()
            ));
        }
        None
    }
}
