//! Probation: on a first (cold) build every crate is admitted by a guess by kind (768 MiB a
//! library), and in a tight budget two guesses do not fit, so light crates ran one after the
//! other beside a heavy one. A guessed crate may instead run *on probation* in the memory the
//! running crates leave ([`super::ledger::Ledger::admission`]): charged at that allowance, its rustc's
//! resident memory (with its children's) is sampled every [`SAMPLE_EVERY`], and one that
//! reaches [`PAUSE_AT`] of its allowance is paused (SIGSTOP) until its guess fits beside what
//! runs, or nothing else runs; then it goes on, charged at its guess (or what it holds, if
//! more).
//!
//! Invariant: a crate on probation never holds more than its allowance plus what it grows
//! within one sample, so the budget holds as it does for every other crate: as long as the
//! running crates stay within their estimates (an overrun is reported as before). One crate at
//! a time is on probation.

use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::ledger::{Entry, Ledger, with_ledger};
use crate::cargo::build::WRAPPER_NOTE_PREFIX;
use crate::util::units::human_bytes;

/// How often a crate on probation is sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(20);
/// The share of its allowance at which a crate on probation is paused.
const PAUSE_AT: f64 = 0.9;

/// How a crate's rustc ran on probation.
#[derive(Debug, Default, Clone, Copy)]
pub struct Probation {
    pub paused_secs: f64,
}

/// How a crate's rustc on probation ended.
pub enum Supervised {
    /// It ran to the end: exit code, peak RSS, and how it ran on probation (`None`: it was
    /// not on probation).
    Done(u8, u64, Option<Probation>),
    /// It outgrew its allowance before writing its metadata and was stopped: run it again,
    /// charged at its guess.
    Stopped,
}

/// Waits for rustc `pid` (admitted on probation within `allowance`). At its allowance, or
/// when all rustc together near the budget, it is stopped if it has not written `metadata`
/// yet (nothing depends on it: it runs again later, charged at its guess, and its memory is
/// free at once), else paused until `guess` fits.
pub fn supervise(
    ledger: &Path,
    pid: u32,
    krate: &str,
    (allowance, guess): (u64, u64),
    (budget, cpus): (u64, usize),
    metadata: Option<&Path>,
) -> Result<Supervised> {
    let me = std::process::id();
    stop_child_with_me(pid);
    let mut figures = Probation::default();
    // On probation: until it ends, is paused, or nothing else runs.
    let paused_at = loop {
        if let Some((code, peak)) = reaped(pid)? {
            stop_child_with_me(0);
            return Ok(Supervised::Done(code, peak, Some(figures)));
        }
        let held = crate::measure::memory::tree_rss(pid as i32);
        // What every running rustc holds now (a guessed one may grow past its guess); and,
        // under the same lock, off probation when nothing else runs: charged at its guess
        // like any crate.
        let (alone, all) = with_ledger(ledger, |ledger| {
            let alone = ledger.running.iter().all(|e| e.pid == me);
            if alone {
                set(ledger, me, |e| {
                    e.probation = false;
                    e.bytes = guess.max(held);
                });
            }
            let all: u64 = ledger
                .running
                .iter()
                .map(|e| crate::measure::memory::tree_rss(e.pid as i32))
                .sum();
            (alone, all)
        })?;
        if alone {
            break None;
        }
        if held as f64 >= allowance as f64 * PAUSE_AT || all as f64 >= budget as f64 * PAUSE_AT {
            if metadata.is_none_or(|path| !path.exists()) {
                // Its linker too, if it has started one.
                for descendant in descendants(pid) {
                    let _ = signal(descendant, libc::SIGKILL);
                }
                signal(pid, libc::SIGKILL)?;
                let _ = crate::wrappers::linker::wait_with_peak_rss(pid as libc::pid_t);
                stop_child_with_me(0);
                crate::util::printer::stderr_line(&format!(
                    "{WRAPPER_NOTE_PREFIX}crate `{krate}` ran on probation in the {} the running \
                     crates left and reached {} (all rustc: {}): stopped before anything \
                     depended on it, to run again when its guess ({}) fits",
                    human_bytes(allowance),
                    human_bytes(held),
                    human_bytes(all),
                    human_bytes(guess)
                ));
                return Ok(Supervised::Stopped);
            }
            signal(pid, libc::SIGSTOP)?;
            with_ledger(ledger, |ledger| set(ledger, me, |e| e.paused = true))?;
            crate::util::printer::stderr_line(&format!(
                "{WRAPPER_NOTE_PREFIX}crate `{krate}` ran on probation in the {} the running \
                 crates left and reached {} (all rustc: {}): paused until its guess ({}) fits",
                human_bytes(allowance),
                human_bytes(held),
                human_bytes(all),
                human_bytes(guess)
            ));
            break Some((Instant::now(), held));
        }
        std::thread::sleep(SAMPLE_EVERY);
    };
    // Paused: until its guess (or what it holds) fits beside what runs, or nothing else runs.
    if let Some((since, held)) = paused_at {
        let charge = guess.max(held);
        loop {
            let resumed = with_ledger(ledger, |ledger| {
                let others: Vec<&Entry> = ledger.running.iter().filter(|e| e.pid != me).collect();
                let active = others.iter().filter(|e| !e.paused).count();
                let used: u64 = others.iter().map(|e| e.bytes).sum();
                let fits =
                    others.is_empty() || (active < cpus && used.saturating_add(charge) <= budget);
                if fits {
                    set(ledger, me, |e| {
                        e.paused = false;
                        e.probation = false;
                        e.bytes = charge;
                    });
                }
                fits
            })?;
            if resumed {
                signal(pid, libc::SIGCONT)?;
                figures.paused_secs = since.elapsed().as_secs_f64();
                break;
            }
            std::thread::sleep(SAMPLE_EVERY);
        }
    }
    // Charged at its guess from here on, like any crate.
    let (code, peak) = crate::wrappers::linker::wait_with_peak_rss(pid as libc::pid_t)?;
    stop_child_with_me(0);
    Ok(Supervised::Done(code, peak, Some(figures)))
}

/// The rustc a wrapper supervises on probation, for [`on_signal`].
static SUPERVISED: AtomicI32 = AtomicI32::new(0);

/// A paused rustc whose wrapper is stopped by a signal would stay paused for good, holding its
/// memory: the wrapper takes it along (a process group's SIGKILL reaches both anyway).
/// `0`: none any more, and the default handlers back.
fn stop_child_with_me(pid: u32) {
    SUPERVISED.store(pid as i32, Ordering::SeqCst);
    let handler = match pid {
        0 => libc::SIG_DFL,
        _ => on_signal as *const () as libc::sighandler_t,
    };
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only calls async-signal-safe functions (kill, _exit).
        unsafe { libc::signal(signal, handler) };
    }
}

extern "C" fn on_signal(signal: libc::c_int) {
    let pid = SUPERVISED.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill(2) is async-signal-safe; SIGKILL ends it paused or not.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    // SAFETY: _exit(2) is async-signal-safe.
    unsafe { libc::_exit(128 + signal) };
}

/// The processes `pid` started, and theirs.
fn descendants(pid: u32) -> Vec<u32> {
    let processes = crate::measure::memory::processes();
    let mut found = Vec::new();
    let mut parents = vec![pid as i32];
    while let Some(parent) = parents.pop() {
        for child in processes.iter().filter(|p| p.ppid == parent) {
            found.push(child.pid as u32);
            parents.push(child.pid);
        }
    }
    found
}

fn set(ledger: &mut Ledger, pid: u32, change: impl FnOnce(&mut Entry)) {
    if let Some(entry) = ledger.running.iter_mut().find(|e| e.pid == pid) {
        change(entry);
    }
}

fn signal(pid: u32, signal: libc::c_int) -> Result<()> {
    // SAFETY: kill(2) on our own child, which we have not reaped yet.
    if unsafe { libc::kill(pid as libc::pid_t, signal) } != 0 {
        let err = std::io::Error::last_os_error();
        // Ended meanwhile: the next look reaps it.
        if err.raw_os_error() != Some(libc::ESRCH) {
            return Err(err).context("could not pause or resume rustc");
        }
    }
    Ok(())
}

/// The exit code and peak RSS of child `pid` once it has ended; `None` while it runs.
fn reaped(pid: u32) -> Result<Option<(u8, u64)>> {
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 writes only to the two out-pointers.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers for the duration of the call.
    let reaped = unsafe { libc::wait4(pid as libc::pid_t, &mut status, libc::WNOHANG, &mut usage) };
    if reaped == 0 {
        return Ok(None);
    }
    if reaped < 0 {
        let err = std::io::Error::last_os_error();
        if err.kind() == std::io::ErrorKind::Interrupted {
            return Ok(None);
        }
        return Err(err).context("waiting for rustc failed");
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    };
    // ru_maxrss is in KiB on Linux.
    Ok(Some((code as u8, usage.ru_maxrss.max(0) as u64 * 1024)))
}

/// The size of the sources of the crate whose root is `root` (its directory's `.rs` files,
/// at most a few thousand) and of the code its build script generated (`.rs` files in
/// `out_dir`, which `include!` brings in): what orders guessed crates for probation, smallest
/// first.
pub fn source_bytes(root: &Path, out_dir: Option<&Path>) -> u64 {
    root.parent().map_or(0, rs_bytes_under) + out_dir.map_or(0, rs_bytes_under)
}

fn rs_bytes_under(dir: &Path) -> u64 {
    let mut total = 0;
    let mut seen = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            seen += 1;
            if seen > 5000 {
                return total;
            }
            let path = entry.path();
            let name = entry.file_name();
            // Not into hidden directories or a package's target directory.
            let skipped = name.to_string_lossy().starts_with('.') || name == "target";
            match entry.file_type() {
                Ok(kind) if kind.is_dir() && !skipped => stack.push(path),
                Ok(kind) if kind.is_file() && path.extension().is_some_and(|e| e == "rs") => {
                    total += entry.metadata().map_or(0, |m| m.len());
                }
                _ => {}
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wrappers::rustc::ledger::release;

    /// A ledger in `dir` where another crate runs (a process that sleeps, returned), charged
    /// 64 MiB, and this process is on probation within 32 MiB.
    fn ledger_beside_another(dir: &Path) -> (std::path::PathBuf, std::process::Child) {
        let path = dir.join("ledger.json");
        let other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let entry = |pid: u32, bytes: u64, probation: bool| Entry {
            pid,
            started: crate::wrappers::rustc::ledger::process_start(pid),
            krate: format!("c{pid}"),
            bytes,
            since: 0.0,
            guessed: true,
            source_bytes: 1,
            probation,
            paused: false,
        };
        with_ledger(&path, |ledger: &mut Ledger| {
            ledger.running.push(entry(other.id(), 64 << 20, false));
            ledger
                .running
                .push(entry(std::process::id(), 32 << 20, true));
        })
        .unwrap();
        (path, other)
    }

    /// The pid of a process that comes to hold about 100 MB, then sleeps `then` seconds;
    /// `supervise` reaps it.
    #[expect(clippy::zombie_processes, reason = "supervise reaps it (wait4)")]
    fn grows_to_100_mb(then: &str) -> u32 {
        let child = std::process::Command::new("sh")
            .args([
                "-c",
                &format!("a=$(head -c 100000000 /dev/zero | tr '\\0' x); sleep {then}"),
            ])
            .spawn()
            .unwrap();
        child.id()
    }

    #[test]
    fn a_crate_on_probation_is_paused_at_its_allowance_and_resumed_when_its_guess_fits() {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut other) = ledger_beside_another(dir.path());
        let me = std::process::id();
        // A process that comes to hold about 100 MB, against an allowance of 32 MiB: paused;
        // its guess (256 MiB) fits beside the other's 64 MiB in 1 GiB, so it goes on.
        let pid = grows_to_100_mb("0.2");
        // Its metadata is written (a file that exists): paused, not stopped.
        let metadata = dir.path().join("libprobe.rmeta");
        std::fs::write(&metadata, "").unwrap();
        let Supervised::Done(code, peak, Some(figures)) = supervise(
            &path,
            pid,
            "probe",
            (32 << 20, 256 << 20),
            (1 << 30, 2),
            Some(&metadata),
        )
        .unwrap() else {
            panic!("not run to the end");
        };
        assert_eq!(code, 0);
        assert!(peak > 32 << 20, "{peak}");
        assert!(figures.paused_secs > 0.0, "{figures:?}");
        let mine = with_ledger(&path, |ledger| {
            ledger.running.iter().find(|e| e.pid == me).unwrap().clone()
        })
        .unwrap();
        assert!(!mine.probation && !mine.paused, "{mine:?}");
        assert!(mine.bytes >= 256 << 20, "charged at its guess: {mine:?}");
        release(&path, me).unwrap();
        other.kill().unwrap();
        other.wait().unwrap();
    }

    #[test]
    fn a_crate_on_probation_that_wrote_no_metadata_is_stopped_and_its_memory_freed() {
        let dir = tempfile::tempdir().unwrap();
        let (path, mut other) = ledger_beside_another(dir.path());
        let me = std::process::id();
        let pid = grows_to_100_mb("30");
        let outcome = supervise(
            &path,
            pid,
            "probe",
            (32 << 20, 256 << 20),
            (1 << 30, 2),
            Some(&dir.path().join("libprobe.rmeta")),
        )
        .unwrap();
        assert!(matches!(outcome, Supervised::Stopped));
        // Gone, not paused: its memory is free.
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
        release(&path, me).unwrap();
        other.kill().unwrap();
        other.wait().unwrap();
    }

    #[test]
    fn sources_are_measured_from_the_crate_roots_directory() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src/module")).unwrap();
        std::fs::create_dir_all(dir.path().join("src/target")).unwrap();
        std::fs::write(dir.path().join("src/lib.rs"), "x".repeat(100)).unwrap();
        std::fs::write(dir.path().join("src/module/a.rs"), "y".repeat(50)).unwrap();
        std::fs::write(dir.path().join("src/target/b.rs"), "z".repeat(1000)).unwrap();
        std::fs::write(dir.path().join("src/notes.txt"), "n".repeat(1000)).unwrap();
        assert_eq!(source_bytes(&dir.path().join("src/lib.rs"), None), 150);
        // With the code its build script generated.
        std::fs::create_dir_all(dir.path().join("out")).unwrap();
        std::fs::write(dir.path().join("out/table.rs"), "t".repeat(4000)).unwrap();
        std::fs::write(dir.path().join("out/lib.o"), "o".repeat(4000)).unwrap();
        let out = dir.path().join("out");
        assert_eq!(
            source_bytes(&dir.path().join("src/lib.rs"), Some(&out)),
            4150
        );
    }
}
