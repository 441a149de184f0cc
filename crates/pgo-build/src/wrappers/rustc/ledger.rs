//! The memory ledger: every rustc of every pgo-build of a target directory, running or waiting,
//! with its estimate, in one flock'ed file; who may run now (first fit in order of arrival,
//! priority after [`PRIORITY_AFTER`], probation for a guessed crate in what is left).
//!
//! Invariant: the charges of the running crates never exceed the budget, but for a crate
//! estimated above the whole budget, which runs alone.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::cargo::build::WRAPPER_NOTE_PREFIX;
use crate::util::units::human_bytes;

/// Less than this left beside the running crates is no room for a rustc (it takes about
/// 130 MiB doing nothing).
pub const MIN_ALLOWANCE: u64 = 192 << 20;

/// After this long, a waiting rustc is admitted before any newer one, even when newer ones
/// would fit now and it would not: the bound on how long light crates may overtake a heavy
/// one. Before that, waiters go in order of arrival among those that fit (first fit), so a
/// heavy crate is never overtaken once it fits, and never blocks lighter ones while it does
/// not (blocking them would leave cores idle: measured in bench/memory-budget).
const PRIORITY_AFTER: Duration = Duration::from_secs(60);

/// The ledger: rustc running now (admitted) and waiting, with their estimates.
#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq)]
pub struct Ledger {
    pub running: Vec<Entry>,
    pub waiting: Vec<Entry>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Entry {
    pub pid: u32,
    /// When the process started (clock ticks since boot, from `/proc/<pid>/stat`): after an
    /// owner died (an OOM kill), its pid can belong to another process, which is not this
    /// entry. Absent in entries of older pgo-builds, which are stale where /proc can tell.
    #[serde(default)]
    pub started: Option<u64>,
    pub krate: String,
    /// Its estimate; on probation, its allowance.
    pub bytes: u64,
    /// When it started waiting (seconds since 1970).
    pub since: f64,
    /// Its estimate is a guess by kind (no measured peak): it may run on probation.
    #[serde(default)]
    pub guessed: bool,
    /// The size of its crate's sources: the smallest guessed waiter goes on probation first.
    #[serde(default)]
    pub source_bytes: u64,
    /// Running on probation (see `probation.rs`): `bytes` is its allowance.
    #[serde(default)]
    pub probation: bool,
    /// Paused at its allowance: holds its memory, takes no CPU slot.
    #[serde(default)]
    pub paused: bool,
}

/// What the ledger says to a waiting rustc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Wait,
    /// Run, charged at its estimate.
    Run,
    /// Run on probation within this many bytes (see `probation.rs`).
    Probation(u64),
}

impl Ledger {
    /// Whether `pid` (already in `waiting`) may start now: fewer than `cpus` running, and its
    /// estimate fits beside theirs, or nothing runs (a crate above the whole budget runs
    /// alone); and no older waiter fits now, or has waited past [`PRIORITY_AFTER`].
    #[cfg(test)]
    pub fn admits(&self, pid: u32, budget: u64, cpus: usize, now: f64) -> bool {
        self.admission(pid, budget, cpus, now) == Admission::Run
    }

    /// What `pid` (already in `waiting`) may do now: run when [`Ledger::admits`] says so;
    /// else run on probation (see `probation.rs`) when it is the guessed waiter with the
    /// smallest sources, a CPU slot is free, nothing else is on probation, no waiter fits or
    /// has waited past [`PRIORITY_AFTER`], and the budget left beside what runs is at least
    /// [`MIN_ALLOWANCE`]; else wait.
    pub fn admission(&self, pid: u32, budget: u64, cpus: usize, now: f64) -> Admission {
        let Some(me) = self.waiting.iter().find(|e| e.pid == pid) else {
            return Admission::Wait;
        };
        let used: u64 = self
            .running
            .iter()
            .fold(0, |sum, e| sum.saturating_add(e.bytes));
        // A paused crate holds memory but no CPU.
        let active = self.running.iter().filter(|e| !e.paused).count();
        let fits = |entry: &Entry| {
            active < cpus && (self.running.is_empty() || used.saturating_add(entry.bytes) <= budget)
        };
        let overdue = |entry: &Entry| now - entry.since > PRIORITY_AFTER.as_secs_f64();
        let goes_first = self.waiting.iter().any(|other| {
            other.pid != pid
                && (other.since, other.pid) < (me.since, me.pid)
                && (fits(other) || overdue(other))
        });
        if fits(me) {
            return if goes_first {
                Admission::Wait
            } else {
                Admission::Run
            };
        }
        let allowance = budget.saturating_sub(used);
        let first_on_probation = self
            .waiting
            .iter()
            .filter(|e| e.guessed)
            .min_by_key(|e| (e.source_bytes, e.since.to_bits(), e.pid))
            .is_some_and(|e| e.pid == pid);
        if me.guessed
            && first_on_probation
            && active < cpus
            && !self.running.is_empty()
            && !self.running.iter().any(|e| e.probation)
            && !self.waiting.iter().any(|e| fits(e) || overdue(e))
            && allowance >= MIN_ALLOWANCE
        {
            Admission::Probation(allowance)
        } else {
            Admission::Wait
        }
    }

    /// Drops entries of processes that are gone (a killed build leaves its entries behind),
    /// including zombies and processes that took a dead owner's pid since.
    fn prune(&mut self) {
        let alive = |entry: &Entry| {
            // SAFETY: signal 0 only checks that the process exists.
            let exists = unsafe { libc::kill(entry.pid as libc::pid_t, 0) } == 0
                || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
            // Where /proc cannot say more, the pid alone has to do.
            exists
                && match crate::measure::memory::process(entry.pid as i32) {
                    // Ended, not yet reaped: it holds no memory.
                    Some(process) if process.state == 'Z' => false,
                    // An entry without a start time (an older pgo-build's) cannot be told
                    // from one whose pid another process took since: it is stale, or it
                    // would block builds for as long as that process lives.
                    Some(process) => entry.started == Some(process.started),
                    None => true,
                }
        };
        self.running.retain(alive);
        self.waiting.retain(alive);
    }

    /// Whether `pid` waits for memory (a CPU slot is free, but what runs leaves no room for it
    /// or for an older waiter); otherwise it waits for a CPU slot.
    fn waits_for_memory(&self, cpus: usize) -> bool {
        self.running.len() < cpus
    }

    /// What a waiting crate waits behind, for the message a long wait prints.
    fn describe_running(&self) -> String {
        if self.running.is_empty() {
            return "nothing is running; older waiters go first".to_owned();
        }
        let used: u64 = self
            .running
            .iter()
            .fold(0, |sum, e| sum.saturating_add(e.bytes));
        let crates: Vec<String> = self
            .running
            .iter()
            .map(|e| format!("{} (pid {}, {})", e.krate, e.pid, human_bytes(e.bytes)))
            .collect();
        format!(
            "{} running, {} estimated together: {}",
            self.running.len(),
            human_bytes(used),
            crates.join(", ")
        )
    }
}

/// A process's start time, which with its pid identifies it.
pub fn process_start(pid: u32) -> Option<u64> {
    crate::measure::memory::process(pid as i32).map(|process| process.started)
}

/// Runs `change` on the ledger under its lock and writes it back.
pub(super) fn with_ledger<T>(path: &Path, change: impl FnOnce(&mut Ledger) -> T) -> Result<T> {
    if let Some(dir) = path.parent() {
        crate::util::files::create_dir_all(dir)?;
    }
    let mut file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .with_context(|| format!("could not open the memory ledger {}", path.display()))?;
    // SAFETY: flock(2) on a descriptor we own; released when the file is closed.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(std::io::Error::last_os_error()).context("could not lock the memory ledger");
    }
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    let mut ledger = match serde_json::from_str::<Ledger>(&text) {
        Ok(ledger) => ledger,
        Err(_) if text.trim().is_empty() => Ledger::default(),
        Err(err) => rebuilt(path, &text, &err),
    };
    ledger.prune();
    let result = change(&mut ledger);
    let text = serde_json::to_string(&ledger)?;
    file.set_len(0)?;
    file.rewind()?;
    file.write_all(text.as_bytes())?;
    Ok(result)
}

/// The ledger that replaces an unreadable one (a write cut short, a hand edit): empty, with the
/// unreadable text kept beside it and both named. Every waiting rustc puts itself back at its
/// next look (see [`admit`]); crates running now are not charged until they end.
fn rebuilt(path: &Path, text: &str, err: &serde_json::Error) -> Ledger {
    let kept = path.with_extension("json.unreadable");
    let kept_note = match std::fs::write(&kept, text) {
        Ok(()) => format!("kept as {}", kept.display()),
        Err(write_err) => format!("could not keep it as {}: {write_err}", kept.display()),
    };
    // Unit tests read thousands of unreadable ledgers (util::fuzz): said in real builds only.
    if cfg!(test) {
        return Ledger::default();
    }
    crate::util::printer::stderr_line(&format!(
        "{WRAPPER_NOTE_PREFIX}the memory ledger {} could not be read ({err}; {kept_note}): \
         rebuilt empty. Waiting crates enter it again; crates running now are not counted \
         against the budget until they end",
        path.display()
    ));
    Ledger::default()
}

/// What a rustc asks the ledger for.
pub struct Request<'a> {
    pub krate: &'a str,
    /// Its estimate.
    pub bytes: u64,
    pub guessed: bool,
    pub source_bytes: u64,
}

/// Waits until the ledger admits `pid` (to run, or on probation), then records it as running.
/// Returns the seconds it waited for memory (see [`Ledger::waits_for_memory`]) and how it was
/// admitted.
pub fn admit(
    path: &Path,
    pid: u32,
    request: &Request,
    budget: u64,
    cpus: usize,
) -> Result<(f64, Admission)> {
    let (krate, bytes) = (request.krate, request.bytes);
    let me = Entry {
        pid,
        started: process_start(pid),
        krate: krate.to_owned(),
        bytes,
        since: crate::wrappers::linker::unix_now(),
        guessed: request.guessed,
        source_bytes: request.source_bytes,
        probation: false,
        paused: false,
    };
    let mut next_note = WAIT_NOTE_AFTER;
    let mut memory_wait = Duration::ZERO;
    let mut last_look = Instant::now();
    loop {
        let (admission, for_memory) = with_ledger(path, |ledger| {
            // Entered at the first look, and again whenever the entry is gone (a rebuilt
            // ledger): a waiter absent from the ledger would never be admitted.
            if !ledger.waiting.iter().any(|e| e.pid == pid) {
                ledger.waiting.push(me.clone());
            }
            let admission =
                ledger.admission(pid, budget, cpus, crate::wrappers::linker::unix_now());
            let position = ledger.waiting.iter().position(|e| e.pid == pid);
            let (Some(position), false) = (position, admission == Admission::Wait) else {
                return (Admission::Wait, ledger.waits_for_memory(cpus));
            };
            let mut entry = ledger.waiting.remove(position);
            if let Admission::Probation(allowance) = admission {
                entry.probation = true;
                entry.bytes = allowance;
            }
            ledger.running.push(entry);
            (admission, false)
        })?;
        if admission != Admission::Wait {
            return Ok((memory_wait.as_secs_f64(), admission));
        }
        // The time since the last look is put down to what blocks it now.
        if for_memory {
            memory_wait += last_look.elapsed();
        }
        last_look = Instant::now();
        // Said on stderr, which cargo passes on: a build that waits for memory is never silent.
        // Waiting for one of the CPU slots is what cargo's own jobs do, and says nothing.
        if memory_wait >= next_note {
            let behind = with_ledger(path, |ledger| ledger.describe_running())?;
            crate::util::printer::stderr_line(&format!(
                "{WRAPPER_NOTE_PREFIX}crate `{krate}` (estimated {}) has waited {}s for memory \
                 (rustc budget {}, {cpus} at once): {behind}",
                human_bytes(bytes),
                memory_wait.as_secs(),
                human_bytes(budget)
            ));
            next_note += WAIT_NOTE_EVERY;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A crate waiting this long says what it waits behind, and again every [`WAIT_NOTE_EVERY`].
const WAIT_NOTE_AFTER: Duration = Duration::from_secs(5);

const WAIT_NOTE_EVERY: Duration = Duration::from_secs(30);

/// Removes `pid` from the ledger.
pub fn release(path: &Path, pid: u32) -> Result<()> {
    with_ledger(path, |ledger| {
        ledger.running.retain(|e| e.pid != pid);
        ledger.waiting.retain(|e| e.pid != pid);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn entry(pid: u32, bytes: u64, since: f64) -> Entry {
        Entry {
            pid,
            started: process_start(pid),
            krate: format!("c{pid}"),
            bytes,
            since,
            guessed: false,
            source_bytes: 0,
            probation: false,
            paused: false,
        }
    }

    fn guessed(pid: u32, bytes: u64, since: f64, source_bytes: u64) -> Entry {
        Entry {
            guessed: true,
            source_bytes,
            ..entry(pid, bytes, since)
        }
    }

    #[test]
    fn a_guessed_crate_runs_on_probation_in_what_the_running_ones_leave() {
        // A heavy crate runs, charged at its guess; two guessed libraries wait. Budget 1.2 GiB:
        // neither guess fits beside it, 448 MiB is left.
        let budget = 1200 << 20;
        let mut ledger = Ledger {
            running: vec![guessed(1, 768 << 20, 0.0, 9 << 20)],
            waiting: vec![
                guessed(2, 768 << 20, 1.0, 2 << 20),
                guessed(3, 768 << 20, 1.5, 1 << 20),
            ],
        };
        // The smaller sources go first.
        assert_eq!(ledger.admission(2, budget, 2, 2.0), Admission::Wait);
        assert_eq!(
            ledger.admission(3, budget, 2, 2.0),
            Admission::Probation(budget - (768 << 20))
        );
        // One probation at a time, and never past the budget.
        let mut on_probation = ledger.waiting.remove(1);
        on_probation.probation = true;
        on_probation.bytes = budget - (768 << 20);
        ledger.running.push(on_probation);
        assert_eq!(ledger.admission(2, budget, 4, 2.0), Admission::Wait);
        // Not with the CPUs busy, nor with too little left, nor for a measured crate.
        let busy = Ledger {
            running: vec![entry(1, 768 << 20, 0.0), entry(4, 100 << 20, 0.0)],
            waiting: vec![guessed(2, 768 << 20, 1.0, 1)],
        };
        assert_eq!(busy.admission(2, budget, 2, 2.0), Admission::Wait);
        let full = Ledger {
            running: vec![entry(1, 1100 << 20, 0.0)],
            waiting: vec![guessed(2, 768 << 20, 1.0, 1)],
        };
        assert_eq!(full.admission(2, budget, 2, 2.0), Admission::Wait);
        let measured = Ledger {
            running: vec![entry(1, 768 << 20, 0.0)],
            waiting: vec![entry(2, 768 << 20, 1.0)],
        };
        assert_eq!(measured.admission(2, budget, 2, 2.0), Admission::Wait);
        // A paused crate holds memory but no CPU slot.
        let mut paused = guessed(5, 300 << 20, 0.0, 1);
        paused.probation = true;
        paused.paused = true;
        let light = Ledger {
            running: vec![entry(1, 500 << 20, 0.0), paused],
            waiting: vec![entry(2, 300 << 20, 1.0)],
        };
        assert_eq!(light.admission(2, budget, 2, 2.0), Admission::Run);
    }

    #[test]
    fn a_heavy_crate_waits_for_memory_while_light_ones_proceed() {
        // One heavy crate runs; a second heavy one and a light one wait; budget 1.5 GiB.
        let ledger = Ledger {
            running: vec![entry(1, GIB, 0.0)],
            waiting: vec![entry(2, GIB, 1.0), entry(3, 100 << 20, 1.5)],
        };
        assert!(!ledger.admits(2, 3 * GIB / 2, 4, 2.0));
        assert!(ledger.admits(3, 3 * GIB / 2, 4, 2.0));
        // Not with the CPUs all busy.
        assert!(!ledger.admits(3, 3 * GIB / 2, 1, 2.0));
        // Once the heavy waiter fits, it goes before the younger light one.
        let freed = Ledger {
            running: vec![entry(4, 100 << 20, 0.5)],
            ..ledger.clone()
        };
        assert!(freed.admits(2, 3 * GIB / 2, 4, 2.0));
        assert!(!freed.admits(3, 3 * GIB / 2, 4, 2.0));
        // After PRIORITY_AFTER, the heavy waiter goes first even while it does not fit.
        assert!(!ledger.admits(3, 3 * GIB / 2, 4, 1.0 + 61.0));
    }

    #[test]
    fn a_crate_above_the_whole_budget_runs_alone() {
        let alone = Ledger {
            running: vec![],
            waiting: vec![entry(1, 4 * GIB, 0.0)],
        };
        assert!(alone.admits(1, GIB, 2, 0.1));
        let busy = Ledger {
            running: vec![entry(2, 1 << 20, 0.0)],
            waiting: vec![entry(1, 4 * GIB, 0.0)],
        };
        assert!(!busy.admits(1, GIB, 2, 0.1));
    }

    #[test]
    fn the_ledger_is_shared_through_its_file_and_forgets_dead_processes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.json");
        let me = std::process::id();
        let request = Request {
            krate: "first",
            bytes: GIB,
            guessed: false,
            source_bytes: 0,
        };
        let (_, admission) = admit(&path, me, &request, GIB, 2).unwrap();
        assert_eq!(admission, Admission::Run);
        // A process that no longer exists holds nothing.
        with_ledger(&path, |l| l.running.push(entry(999_999_999, GIB, 0.0))).unwrap();
        let ledger = with_ledger(&path, |l| l.clone()).unwrap();
        assert_eq!(ledger.running.len(), 1);
        assert_eq!(ledger.running[0].krate, "first");
        release(&path, me).unwrap();
        assert!(with_ledger(&path, |l| l.running.is_empty()).unwrap());
    }

    #[test]
    fn an_unreadable_ledger_is_named_kept_and_rebuilt_and_its_waiters_are_admitted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memory-ledger.json");
        // A live process charged with more than the budget: this process waits behind it.
        let mut holder = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        with_ledger(&path, |l| {
            l.running = vec![entry(holder.id(), 64 * GIB, 0.0)]
        })
        .unwrap();
        let (sender, admitted) = std::sync::mpsc::channel();
        let waiter_path = path.clone();
        std::thread::spawn(move || {
            let request = Request {
                krate: "waiter",
                bytes: GIB,
                guessed: false,
                source_bytes: 0,
            };
            let _ = sender.send(admit(&waiter_path, std::process::id(), &request, GIB, 2));
        });
        // Wait until the waiter is in the ledger, then cut a write short (a killed wrapper).
        while !with_ledger(&path, |l| !l.waiting.is_empty()).unwrap() {
            std::thread::sleep(Duration::from_millis(10));
        }
        let garbage = "{\"running\":[{\"pid\":1,\"kra";
        std::fs::write(&path, garbage).unwrap();
        let result = admitted.recv_timeout(Duration::from_secs(30));
        holder.kill().unwrap();
        holder.wait().unwrap();
        let (_, admission) = result.expect("the waiter is admitted").unwrap();
        assert_eq!(admission, Admission::Run);
        let kept = dir.path().join("memory-ledger.json.unreadable");
        assert_eq!(std::fs::read_to_string(kept).unwrap(), garbage);
        let ledger: Ledger =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(ledger.running.len(), 1);
        assert_eq!(ledger.running[0].krate, "waiter");
    }

    #[test]
    fn an_entry_whose_pid_another_process_took_holds_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.json");
        // A live process (this one) under an entry recorded for another start: pid reuse
        // after its owner was killed. Its estimate would block every crate for ever.
        let me = std::process::id();
        let started = process_start(me).unwrap();
        let reused = Entry {
            started: Some(started + 1),
            ..entry(me, 64 * GIB, 0.0)
        };
        let owner = Entry {
            started: Some(started),
            ..entry(me, GIB, 0.0)
        };
        // A process that ended and is not reaped yet holds no memory either.
        let mut ended = std::process::Command::new("true").spawn().unwrap();
        while crate::measure::memory::process(ended.id() as i32).is_some_and(|p| p.state != 'Z') {
            std::thread::sleep(Duration::from_millis(10));
        }
        let zombie = entry(ended.id(), 64 * GIB, 0.0);
        with_ledger(&path, |l| l.running = vec![reused, zombie, owner.clone()]).unwrap();
        let ledger = with_ledger(&path, |l| l.clone()).unwrap();
        ended.wait().unwrap();
        assert_eq!(ledger.running, std::slice::from_ref(&owner));
        assert!(ledger.describe_running().contains("1 running"));
        // An older pgo-build's entry (no start time) for a live pid is stale too.
        let old_format = Entry {
            started: None,
            ..entry(me, 64 * GIB, 0.0)
        };
        with_ledger(&path, |l| l.running = vec![old_format, owner.clone()]).unwrap();
        let ledger = with_ledger(&path, |l| l.clone()).unwrap();
        assert_eq!(ledger.running, [owner]);
    }

    proptest::proptest! {
        #![proptest_config(crate::util::fuzz::config())]

        /// Any memory ledger: read or rebuilt (and kept aside), admitted from; never a panic
        /// or a hang.
        #[test]
        fn any_ledger_is_read_or_rebuilt_without_a_panic_or_hang(
            bytes in crate::util::fuzz::mutants(
                serde_json::to_string(&Ledger {
                    running: vec![entry(1, GIB, 5.0)],
                    waiting: vec![
                        entry(std::process::id(), 2 * GIB, 7.5),
                        Entry { guessed: true, probation: true, ..entry(3, GIB, 1.0) },
                    ],
                })
                .unwrap()
                .as_bytes()
            )
        ) {
            crate::util::fuzz::no_panic_or_hang(move || {
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("memory-ledger.json");
                std::fs::write(&path, &bytes).unwrap();
                with_ledger(&path, |ledger| {
                    (ledger.admission(std::process::id(), GIB, 2, 10.0), ledger.describe_running())
                })
                .is_ok()
            });
        }
    }
}
