//! What pgo-build has running besides itself, recorded in `running/<token>.json` while it
//! runs (a workload, a service, a stage's cargo build as a [`TrackedTree`]), so that an
//! interrupted pgo-build stops it and the next command stops what a killed one left behind.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Result, bail};

use super::interrupt;
use super::process::{Members, TOKEN_ENV, describe_stopped, stop};
use crate::layout::Stage;
use crate::report::StoppedProcess;
use crate::util::command::Cmd;
use crate::util::stop::{Stopper, stop_signal};

/// The workload running now, recorded while it runs (see [`stop_leftovers`]).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct RunningWorkload {
    pub(super) token: String,
    pub(super) pgo_build_pid: u32,
    /// The workload's name; empty for a stage's cargo build.
    pub(super) workload: String,
    pub(super) stage: Stage,
    pub(super) grace_period: Duration,
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

/// A new token for what pgo-build starts against `stage`: `<pgo-build pid>-<layout key>-<time>-
/// <stage>`. The layout key (of `running_dir`) lets the next command of the same target
/// directory find what a killed pgo-build left running even where no record says so.
pub(super) fn new_token(running_dir: Option<&Path>, stage: &str) -> String {
    format!(
        "{}-{}-{}-{stage}",
        std::process::id(),
        layout_key(running_dir),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    )
}

/// The key of a target directory's `running/` in tokens: a short hash of its path.
fn layout_key(running_dir: Option<&Path>) -> String {
    match running_dir {
        Some(dir) => {
            crate::util::files::sha256_hex(dir.as_os_str().as_encoded_bytes())[..12].to_owned()
        }
        None => "unrecorded".to_owned(),
    }
}

/// Whether `token` is a workload's or a service's of the target directory with `key`, started
/// by a pgo-build other than the one with pid `own` (`<pid>-<key>-<time>-<stage>…`; a
/// build's stage part is `build-<stage>`).
fn unrecorded_workload(token: &str, key: &str, own: &str) -> bool {
    let mut parts = token.splitn(4, '-');
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(pid), Some(token_key), Some(_time), Some(stage)) => {
            pid != own && token_key == key && !stage.starts_with("build-")
        }
        _ => false,
    }
}

/// Removes the record of a workload that has ended.
pub(super) fn forget_running(record: Option<&Path>) {
    if let Some(record) = record {
        let _ = std::fs::remove_file(record);
    }
}

/// A process tree pgo-build starts besides workloads (a stage's cargo build, with its rustc
/// and linkers): tagged with a token and recorded in `running/` like a workload, and stopped
/// (SIGTERM, grace period, SIGKILL) when pgo-build is asked to stop, so neither an interrupted
/// nor a killed pgo-build leaves it running (the next command stops what a killed one left).
pub struct TrackedTree {
    token: String,
    record: Option<PathBuf>,
    during: String,
    /// Dropped when the tree has ended: the watcher stops at once.
    done: Option<Stopper>,
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
        let token = new_token(running_dir, &format!("build-{}", stage.name()));
        let record = running_dir.map(|dir| dir.join(format!("{token}.json")));
        if let Some(record) = &record {
            let running = RunningWorkload {
                token: token.clone(),
                pgo_build_pid: std::process::id(),
                workload: String::new(),
                stage,
                grace_period: BUILD_GRACE_PERIOD,
            };
            crate::util::files::write_atomically(
                record,
                serde_json::to_string_pretty(&running)?.as_bytes(),
            )?;
        }
        let (done, stopped) = stop_signal();
        // Open before the tree starts: from now on a signal is recorded, not fatal.
        let window = interrupt::WorkloadWindow::open();
        let watcher = {
            let token = token.clone();
            std::thread::spawn(move || {
                loop {
                    if let Some(signal) = window.take_signal() {
                        let members = Members {
                            group: 0,
                            token: &token,
                        };
                        return Some((signal, stop(&members, BUILD_GRACE_PERIOD)));
                    }
                    if stopped.stopped_within(Duration::from_millis(50)) {
                        return None;
                    }
                }
            })
        };
        Ok(TrackedTree {
            token,
            record,
            during: format!("the cargo build of the {} stage ran", stage.name()),
            done: Some(done),
            watcher: Some(watcher),
        })
    }

    /// The command, with the token its processes inherit.
    pub fn tag(&self, cmd: Cmd) -> Cmd {
        cmd.env(TOKEN_ENV, &self.token)
    }

    /// Once the tree has ended: [`interrupt::Interrupted`] when a signal stopped it.
    pub fn finish(mut self) -> Result<()> {
        self.done.take();
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
        self.done.take();
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

/// Stops the processes of workloads that an earlier pgo-build left running when it was
/// killed (recorded in `running_dir`), and says which, one message each. Called before
/// anything else runs, under the target directory's lock: no process of this target
/// directory's may run now, so every one still carrying its layout key is a leftover, with a
/// record or without one.
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
    messages.extend(stop_unrecorded(running_dir)?);
    Ok(messages)
}

/// Processes of this target directory's workloads and services that no record named (a
/// record that could not be read, or a window its writer left open): stopped and named all
/// the same. Every workload's processes are stopped when it ends, so any still carrying its
/// token belong to a pgo-build that was killed. A build's are not looked for: a daemon a
/// finished build started (an sccache server) is meant to outlive it. Nor are this
/// process's own (explore's nested builds start here too).
fn stop_unrecorded(running_dir: &Path) -> Result<Option<String>> {
    let key = layout_key(Some(running_dir));
    let own = std::process::id().to_string();
    let mut tokens = std::collections::BTreeSet::new();
    for process in crate::measure::memory::processes() {
        if process.state != 'Z'
            && let Some(token) = crate::measure::memory::env_value(process.pid, TOKEN_ENV)
            && unrecorded_workload(&token, &key, &own)
        {
            tokens.insert(token);
        }
    }
    let mut stopped = Vec::new();
    for token in &tokens {
        let members = Members { group: 0, token };
        stopped.extend(stop(&members, BUILD_GRACE_PERIOD));
        if !members.live().is_empty() {
            bail!(
                "processes left running by an earlier pgo-build (token {token}) could not be \
                 stopped: {}. Stop them and try again.",
                members
                    .live()
                    .iter()
                    .map(|(pid, name)| format!("{name} (pid {pid})"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    Ok((!stopped.is_empty()).then(|| {
        format!(
            "an earlier pgo-build of this target directory ended without stopping what it ran, \
             and left no record of it; stopped: {}. That run did not complete and none of its \
             outputs are used.",
            describe_stopped(&stopped)
        )
    }))
}

/// [`stop_leftovers`] for one record.
fn stop_left_by(record: &Path) -> Result<Option<String>> {
    let Ok(text) = std::fs::read_to_string(record) else {
        return Ok(None);
    };
    let Ok(running) = serde_json::from_str::<RunningWorkload>(&text) else {
        // Its processes, if any, carry this target directory's key: `stop_unrecorded`
        // stops and names them.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_other_commands_workloads_of_this_target_directory_are_unrecorded_leftovers() {
        let dir = Path::new("/ws/target/pgo-build/running");
        let key = layout_key(Some(dir));
        let ours = new_token(Some(dir), "optimized");
        // Made by this process: never its own leftover.
        assert!(!unrecorded_workload(
            &ours,
            &key,
            &std::process::id().to_string()
        ));
        assert!(unrecorded_workload(&ours, &key, "1"));
        // A service's token extends its workload's.
        assert!(unrecorded_workload(
            &format!("{ours}-service-db"),
            &key,
            "1"
        ));
        // A build's daemons may outlive it; another target directory's are not ours.
        let build = new_token(Some(dir), "build-optimized");
        assert!(!unrecorded_workload(&build, &key, "1"));
        let elsewhere = new_token(Some(Path::new("/other/running")), "optimized");
        assert!(!unrecorded_workload(&elsewhere, &key, "1"));
        // Tokens of older pgo-builds (`<pid>-<time>-<stage>`) have no key.
        assert!(!unrecorded_workload(
            "12-1733000000000000000-optimized",
            &key,
            "1"
        ));
    }
}
