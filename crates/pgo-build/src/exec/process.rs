//! The processes of a workload or service: waiting for them with their resource usage
//! (`wait4`), and stopping a tree (its process group and every process carrying its token)
//! the way production stops things: SIGTERM, a grace period, then SIGKILL.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::report::StoppedProcess;
use crate::util::printer::Printer;

/// What `wait4` accounts to a process and its waited-for descendants.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Usage {
    pub cpu: Duration,
    /// Minor and major page faults.
    pub faults: u64,
    /// The peak resident memory of the largest single process among them.
    pub max_rss_bytes: u64,
}

/// Waits for a child to exit, at most a given time, so a polling loop can check its timeout
/// and signals in between. With a pidfd (Linux 5.3+) the wait ends when the child exits, so
/// the workload's measured time ends there too: sleeping a fixed interval instead rounded
/// every run up to it (5 ms steps made two builds of a 20 ms command tie round after round,
/// and a comparison called builds 4% apart by the clock no different). Without one (an older
/// kernel, a sandbox that refuses the call), it sleeps, and the caller says once that wall
/// times are coarse ([`ExitWatch::say_if_coarse`]).
pub(super) struct ExitWatch {
    pidfd: Option<std::os::fd::OwnedFd>,
    /// Why there is no pidfd.
    refused: Option<std::io::Error>,
}

impl ExitWatch {
    pub fn new(pid: libc::pid_t) -> ExitWatch {
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        let pidfd = (fd >= 0).then(|| {
            // SAFETY: the descriptor was just opened and is owned by nothing else.
            unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd as i32) }
        });
        let refused = pidfd.is_none().then(std::io::Error::last_os_error);
        ExitWatch { pidfd, refused }
    }

    /// Without a pidfd, says (once per process, as a warning) that wall times are rounded up
    /// to the polling tick; true when it did.
    pub fn say_if_coarse(&self, printer: &Printer) -> bool {
        let Some(why) = &self.refused else {
            return false;
        };
        let mut said = false;
        COARSE_TIMING_SAID.call_once(|| {
            printer.warn(format!(
                "pidfd_open failed ({why}; Linux 5.3 or later has it, and a sandbox may \
                 refuse it): a workload's end is seen only at the next 5 ms tick, so wall \
                 times are rounded up to it and workloads of a few milliseconds may compare as \
                 no different; judge them with --metric instructions"
            ));
            said = true;
        });
        said
    }

    /// Returns once the child has exited (it is then ready to be reaped) or `most` has passed.
    pub fn wait(&self, most: Duration) {
        let Some(pidfd) = &self.pidfd else {
            std::thread::sleep(most);
            return;
        };
        let mut watched = libc::pollfd {
            fd: std::os::fd::AsRawFd::as_raw_fd(pidfd),
            events: libc::POLLIN,
            revents: 0,
        };
        let millis = most.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd, for the duration of the call. An interrupted or failed
        // poll returns early: the caller's loop looks again.
        unsafe { libc::poll(&mut watched, 1, millis) };
    }
}

/// Said once per process: without a pidfd a workload's end is seen at the next 5 ms tick.
static COARSE_TIMING_SAID: std::sync::Once = std::sync::Once::new();

/// Waits for `pid` with `wait4`, which also returns the CPU time and page faults of it and its
/// waited-for descendants. `None` while it is still running (only when not blocking).
pub(super) fn reap(
    pid: libc::pid_t,
    block: bool,
) -> Result<Option<(std::process::ExitStatus, Usage)>> {
    use std::os::unix::process::ExitStatusExt;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value; wait4 only writes to the two out-pointers.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let flags = if block { 0 } else { libc::WNOHANG };
    loop {
        // SAFETY: `status` and `usage` are valid for writes for the duration of the call.
        let reaped = unsafe { libc::wait4(pid, &mut status, flags, &mut usage) };
        if reaped == pid {
            let usage = Usage {
                cpu: timeval(usage.ru_utime) + timeval(usage.ru_stime),
                faults: (usage.ru_minflt + usage.ru_majflt) as u64,
                // Linux counts it in KiB.
                max_rss_bytes: (usage.ru_maxrss.max(0) as u64) << 10,
            };
            return Ok(Some((std::process::ExitStatus::from_raw(status), usage)));
        }
        if reaped == 0 {
            return Ok(None);
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err).context("waiting for a workload failed");
        }
    }
}

fn timeval(tv: libc::timeval) -> Duration {
    Duration::from_secs(tv.tv_sec as u64) + Duration::from_micros(tv.tv_usec as u64)
}

pub(super) fn send(pid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: kill(2) has no memory effects; a negative pid signals that process group.
    unsafe { libc::kill(pid, signal) };
}

/// The processes of one workload: its process group, and every process that carries its
/// token, which finds those that left the group (`setsid`, double fork).
pub(super) struct Members<'a> {
    /// 0: no group (its id may belong to someone else by now).
    pub group: libc::pid_t,
    pub token: &'a str,
}

impl Members<'_> {
    /// Live members (zombies excluded), by pid and name.
    pub fn live(&self) -> Vec<(i32, String)> {
        let needle = format!("{TOKEN_ENV}={}", self.token);
        let mut members: Vec<(i32, String)> = crate::measure::memory::processes()
            .into_iter()
            .filter(|p| p.state != 'Z')
            .filter(|p| {
                (self.group != 0 && p.pgrp == self.group)
                    || crate::measure::memory::has_env_entry(p.pid, &needle)
            })
            .map(|p| (p.pid, p.name))
            .collect();
        members.sort();
        members
    }

    /// The executables its live members run (`/proc/<pid>/exe`).
    pub fn executables(&self) -> Vec<std::path::PathBuf> {
        self.live()
            .into_iter()
            .filter_map(|(pid, _)| std::fs::read_link(format!("/proc/{pid}/exe")).ok())
            .collect()
    }

    pub fn signal(&self, pids: &[i32], signal: libc::c_int) {
        if self.group != 0 {
            send(-self.group, signal);
        }
        for pid in pids {
            send(*pid, signal);
        }
    }
}

/// Whether `pid` is a process that has not exited (a zombie has).
pub(super) fn running(pid: i32) -> bool {
    crate::measure::memory::process(pid).is_some_and(|p| p.state != 'Z')
}

/// Stops every live member: SIGTERM, then SIGKILL for those still alive after `grace`. A
/// process that has exited but not been reaped (a zombie) counts as stopped. Members are
/// looked for again after each signal: one forked between a look and the signal (a shell's
/// next command, a coordinator's next worker) is stopped too. Returns what was stopped and how.
pub(super) fn stop(members: &Members, grace: Duration) -> Vec<StoppedProcess> {
    let mut found: Vec<(i32, String)> = Vec::new();
    let deadline = deadline_after(grace);
    loop {
        let new: Vec<(i32, String)> = members
            .live()
            .into_iter()
            .filter(|(pid, _)| !found.iter().any(|(known, _)| known == pid))
            .collect();
        if new.is_empty() {
            break;
        }
        let pids: Vec<i32> = new.iter().map(|(pid, _)| *pid).collect();
        if found.is_empty() {
            members.signal(&pids, libc::SIGTERM);
        } else {
            // The newcomers alone: the group had its SIGTERM, and a second one means "force
            // quit" to some programs.
            for pid in &pids {
                send(*pid, libc::SIGTERM);
            }
        }
        found.extend(new);
        while Instant::now() < deadline && found.iter().any(|(pid, _)| running(*pid)) {
            std::thread::sleep(Duration::from_millis(10));
        }
        if Instant::now() >= deadline {
            break;
        }
    }
    let mut killed: Vec<i32> = Vec::new();
    // Twice: a process forked just before its parent's SIGKILL is found by the second look.
    for _ in 0..2 {
        for (pid, name) in members.live() {
            if !found.iter().any(|(known, _)| *known == pid) {
                found.push((pid, name));
            }
            if !killed.contains(&pid) {
                killed.push(pid);
            }
        }
        let alive: Vec<i32> = killed.iter().copied().filter(|pid| running(*pid)).collect();
        if alive.is_empty() {
            break;
        }
        members.signal(&alive, libc::SIGKILL);
        // Until they are gone (the kernel frees a large process's memory first), at most 2 s.
        let killed_by = Instant::now() + Duration::from_secs(2);
        while Instant::now() < killed_by && alive.iter().any(|pid| running(*pid)) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    found
        .into_iter()
        .map(|(pid, name)| StoppedProcess {
            pid,
            signal: if killed.contains(&pid) {
                "SIGKILL"
            } else {
                "SIGTERM"
            }
            .to_owned(),
            name,
        })
        .collect()
}

/// Now plus `grace`, however long: configured durations are at most a year, but a record
/// left by an older pgo-build may say anything, and `Instant + Duration` panics on overflow.
pub(super) fn deadline_after(grace: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(grace)
        .unwrap_or_else(|| now + Duration::from_secs(crate::config::MAX_DURATION_SECS))
}

pub fn describe_stopped(stopped: &[StoppedProcess]) -> String {
    stopped
        .iter()
        .map(|p| format!("{} (pid {}, {})", p.name, p.pid, p.signal))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Inherited by every process of a workload: finds the ones that left its process group.
pub const TOKEN_ENV: &str = "PGO_BUILD_WORKLOAD_TOKEN";

#[cfg(test)]
mod tests {
    use super::*;

    /// Where pidfd_open fails (here: no such process), the watch sleeps the whole interval and
    /// the coarse timing is said (once per process).
    #[test]
    fn without_a_pidfd_the_watch_sleeps_and_says_times_are_coarse() {
        let printer = Printer::new(crate::util::printer::Verbosity::Quiet);
        let watch = ExitWatch::new(-1);
        assert!(watch.pidfd.is_none() && watch.refused.is_some());
        // Said here, or already by another test's workload on a kernel without pidfds.
        watch.say_if_coarse(&printer);
        assert!(COARSE_TIMING_SAID.is_completed());
        // Once per process.
        assert!(!ExitWatch::new(-1).say_if_coarse(&printer));
        let started = Instant::now();
        watch.wait(Duration::from_millis(30));
        assert!(started.elapsed() >= Duration::from_millis(30));
    }

    /// The wait ends when the child exits, not when its time is up: a workload's time is not
    /// rounded up to the polling interval (here 20 s, so a sleep would show).
    #[test]
    fn an_exit_watch_returns_when_the_child_exits() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as libc::pid_t;
        let watch = ExitWatch::new(pid);
        assert!(watch.pidfd.is_some(), "no pidfd on this kernel");
        let printer = Printer::new(crate::util::printer::Verbosity::Quiet);
        assert!(!watch.say_if_coarse(&printer));
        let started = Instant::now();
        watch.wait(Duration::from_secs(20));
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "waited {:?}",
            started.elapsed()
        );
        // Ready to be reaped at once.
        assert!(
            child
                .try_wait()
                .unwrap()
                .is_some_and(|status| status.success())
        );
    }
}
