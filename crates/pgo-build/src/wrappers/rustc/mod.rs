//! rustc wrapper mode: pgo-build as cargo's `RUSTC_WRAPPER`, so the whole build, rustc
//! included, stays inside `[build] memory_budget` (cargo's jobserver counts CPUs, never memory:
//! rust-lang/cargo#12912, #9157).
//!
//! Each stage's cargo build runs with `RUSTC_WRAPPER` set to a symlink to pgo-build and
//! [`MODE_ENV`]. For every rustc that compiles a crate, the wrapper takes that crate's estimated
//! peak from what the stage admits by (its last measured peak, a carried or derived one: see
//! estimates.rs; else a guess by crate kind) and waits for admission in a ledger shared by
//! every pgo-build process of the target directory (a flock'ed file, like the link slots): at
//! most `cpus` rustc at once, and their
//! estimates together within the budget. Cargo gets twice as many job slots as cores, so while a
//! heavy crate waits for memory, light ones overtake it and the CPUs stay busy. A crate
//! estimated above the whole budget runs alone rather than never. The oldest waiter gets
//! priority after a few seconds, so a heavy crate is not overtaken forever.
//!
//! rustc runs as the wrapper's child (behind the user's own wrapper, say sccache, when one was
//! set: [`CHAINED_ENV`]); `wait4` gives the peak RSS of it and the processes it waited for (its
//! linker), which is logged to the stage's `rustc.jsonl` with the estimate, the wait and the
//! wall time. After the build, pgo-build reads the log, reports, and updates the estimates.

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::cargo::build::WRAPPER_NOTE_PREFIX;
use crate::report::{CrateFigures, RustcSummary};
use crate::util::units::human_bytes;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

pub mod estimates;
pub mod probation;
mod remote;

pub use estimates::{Estimates, read_estimates};

pub const MODE_ENV: &str = "PGO_BUILD_RUSTC_WRAPPER_MODE";
/// The user's own rustc wrapper (sccache, …), run in front of rustc.
pub const CHAINED_ENV: &str = "PGO_BUILD_CHAINED_RUSTC_WRAPPER";
pub const LEDGER_ENV: &str = "PGO_BUILD_MEMORY_LEDGER";
pub const BUDGET_ENV: &str = "PGO_BUILD_MEMORY_BUDGET";
pub const CPUS_ENV: &str = "PGO_BUILD_RUSTC_CPUS";
pub const ESTIMATES_ENV: &str = "PGO_BUILD_RUSTC_ESTIMATES";
pub const LOG_ENV: &str = "PGO_BUILD_RUSTC_LOG";
/// The workspace root, where cargo runs rustc for members (see `layout::absolute_own_path`).
pub const WORKSPACE_ROOT_ENV: &str = "PGO_BUILD_WORKSPACE_ROOT";

/// Kept out of the budget for cargo, pgo-build and the wrappers waiting in front of rustc: a
/// fixed allowance, not measured per build (bench/memory-budget checks the whole tree).
pub const OVERHEAD: u64 = 64 << 20;

/// After this long, a waiting rustc is admitted before any newer one, even when newer ones
/// would fit now and it would not: the bound on how long light crates may overtake a heavy
/// one. Before that, waiters go in order of arrival among those that fit (first fit), so a
/// heavy crate is never overtaken once it fits, and never blocks lighter ones while it does
/// not (blocking them would leave cores idle: measured in bench/memory-budget).
const PRIORITY_AFTER: Duration = Duration::from_secs(60);

/// Guesses of a crate's peak before any build measured it: generous for binaries (they are
/// codegen'd with every generic they instantiate, and link in the same rustc) and for
/// libraries, smaller for build scripts and proc macros. rustc's own floor is about 130 MiB
/// (the example's crates peaked at 126-213 MiB); a crate of large generated code or data can
/// exceed any guess, which is why measured peaks replace them after the first build and an
/// overrun is reported.
pub fn guess(kind: &str) -> u64 {
    match kind {
        "bin" => 1 << 30,
        "build-script" | "proc-macro" => 384 << 20,
        _ => 768 << 20,
    }
}

/// One rustc invocation, as the wrapper logged it (a JSON line in `<stage>/rustc.jsonl`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RustcRecord {
    pub krate: String,
    /// The package's version (cargo's `CARGO_PKG_VERSION`): estimates are kept per version.
    #[serde(default)]
    pub version: String,
    /// bin | lib | proc-macro | build-script | …
    pub kind: String,
    pub estimate_bytes: u64,
    /// The estimate was a guess by kind (no earlier measurement).
    pub guessed: bool,
    /// Peak RSS of rustc and the processes it waited for (its linker); behind sccache, of the
    /// rustc its server ran (see remote.rs), and `None` when none ran (a cache hit).
    pub peak_bytes: Option<u64>,
    pub wait_secs: f64,
    /// Of `wait_secs`, the time a CPU slot was free and memory was not: the budget's cost
    /// (the rest waited for one of the `cpus` slots, as cargo's own jobs would).
    #[serde(default)]
    pub memory_wait_secs: f64,
    /// When rustc started (seconds since 1970), after its wait.
    #[serde(default)]
    pub start_unix: f64,
    pub wall_secs: f64,
    /// Estimated above the whole budget: it ran alone.
    pub alone: bool,
    pub success: bool,
    /// It ran on probation (see [`probation`]) in what the running crates left.
    #[serde(default)]
    pub probation: bool,
    /// How long it was paused on probation, at its allowance.
    #[serde(default)]
    pub paused_secs: f64,
    /// `peak_bytes` came from samples of sccache's rustc (see remote.rs), which can miss the
    /// last moments of a short rustc: it is kept as an estimate with a margin.
    #[serde(default)]
    pub sampled: bool,
    /// The size of its `.rs` sources, generated ones included (see
    /// [`probation::source_bytes`]): with its peak, what a guess could learn from.
    #[serde(default)]
    pub source_bytes: u64,
}

/// How far a crate may peak over its estimate before it counts as an overrun: the same crate's
/// peak RSS varies by a few percent between builds (the example's: 1-3%), and a warning for
/// "212.1 MiB over 209.8 MiB" reports that noise, not an estimate that was wrong.
const OVERRUN_TOLERANCE: f64 = 0.05;

/// How crates are named in estimates and reports: with their package (cargo sets
/// `CARGO_PKG_NAME` for rustc), since every build script is `build_script_build`.
fn qualified(krate: String) -> String {
    match std::env::var("CARGO_PKG_NAME") {
        Ok(package) if !package.is_empty() => format!("{package}/{krate}"),
        _ => krate,
    }
}

/// When cargo started pgo-build as its rustc wrapper: runs rustc and returns its exit code.
pub fn run_if_wrapper() -> Option<u8> {
    std::env::var_os(MODE_ENV)?;
    Some(match wrap() {
        Ok(code) => code,
        Err(err) => {
            eprintln!("pgo-build (rustc wrapper): {err:#}");
            1
        }
    })
}

fn wrap() -> Result<u8> {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let (rustc, rustc_args) = args
        .split_first()
        .context("run as a rustc wrapper without a rustc to run")?;
    let chained = std::env::var_os(CHAINED_ENV).filter(|w| !w.is_empty());
    let mut command = match &chained {
        Some(wrapper) => {
            let mut command = Command::new(wrapper);
            command.arg(rustc);
            command
        }
        None => Command::new(rustc),
    };
    // Outside the workspace root (registry crates), pgo-build's relative paths name nothing;
    // only a crate that links uses them, so only its command line changes (an rlib's stays
    // the same in every checkout, for a compile cache).
    let outside_root = std::env::var_os(WORKSPACE_ROOT_ENV)
        .map(PathBuf::from)
        .filter(|root| links(rustc_args) && std::env::current_dir().is_ok_and(|cwd| cwd != *root));
    for arg in rustc_args {
        match outside_root
            .as_deref()
            .and_then(|root| crate::layout::absolute_own_path(&arg.to_string_lossy(), root))
        {
            Some(absolute) => command.arg(absolute),
            None => command.arg(arg),
        };
    }
    command.env_remove(MODE_ENV);
    let Some((krate, kind)) = compiled_crate(rustc_args).map(|(k, kind)| (qualified(k), kind))
    else {
        // `rustc -vV`, `--print` queries: nothing to admit.
        let status = command
            .status()
            .with_context(|| format!("could not start {}", rustc.to_string_lossy()))?;
        return Ok(exit_code(status));
    };
    let budget: u64 = env_number(BUDGET_ENV).unwrap_or(u64::MAX);
    let cpus = env_number(CPUS_ENV).unwrap_or(1).max(1) as usize;
    let ledger =
        PathBuf::from(std::env::var_os(LEDGER_ENV).context("PGO_BUILD_MEMORY_LEDGER is not set")?);
    // pgo-build warned before the build when the file is unusable.
    let estimates = std::env::var_os(ESTIMATES_ENV)
        .and_then(|path| read_estimates(Path::new(&path)).ok())
        .unwrap_or_default();
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let measured = estimates::lookup(&estimates, &krate, &version, &kind);
    let estimate = measured.unwrap_or_else(|| guess(&kind));
    let waiting = Instant::now();
    let me = std::process::id();
    // cargo sets OUT_DIR for a package with a build script: code it generated is compiled too.
    let out_dir = std::env::var_os("OUT_DIR").map(PathBuf::from);
    let source_bytes =
        crate_root(rustc_args).map_or(0, |root| probation::source_bytes(&root, out_dir.as_deref()));
    // sccache compiles in its server, outside this process tree: the client's peak says
    // nothing, so the server's rustc of this unit is sampled instead (see remote.rs); and a
    // crate can run on probation only where its memory is watched (its own tree).
    let elsewhere = chained.as_ref().is_some_and(|w| {
        Path::new(w)
            .file_name()
            .is_some_and(|name| name.to_string_lossy().contains("sccache"))
    });
    let mut request = Request {
        krate: &krate,
        bytes: estimate,
        guessed: measured.is_none() && !elsewhere,
        source_bytes,
    };
    let metadata = metadata_path(rustc_args);
    let mut memory_wait_secs = 0.0;
    let (code, peak, probation, start_unix, started) = loop {
        let (waited, admission) = admit(&ledger, me, &request, budget, cpus)?;
        memory_wait_secs += waited;
        let start_unix = crate::wrappers::linker::unix_now();
        let started = Instant::now();
        let remote = elsewhere
            .then(|| remote::Unit::of(rustc_args).map(remote::RemoteSampler::start))
            .flatten();
        let outcome = command
            .spawn()
            .with_context(|| format!("could not start {}", rustc.to_string_lossy()))
            .and_then(|child| match admission {
                Admission::Probation(allowance) => probation::supervise(
                    &ledger,
                    child.id(),
                    &krate,
                    (allowance, estimate),
                    (budget, cpus),
                    metadata.as_deref(),
                ),
                _ => crate::wrappers::linker::wait_with_peak_rss(child.id() as libc::pid_t)
                    .map(|(code, peak)| probation::Supervised::Done(code, peak, None)),
            });
        let remote_peak = remote.and_then(remote::RemoteSampler::stop);
        release(&ledger, me)?;
        match outcome? {
            probation::Supervised::Done(code, peak, figures) => {
                let peak = match elsewhere {
                    false => Measured::Waited(peak),
                    // Not cacheable, the client ran rustc itself and `wait4` saw it (on a hit
                    // it saw only the client, a few MiB): the larger of that and the samples.
                    true => match remote_peak {
                        Some(sampled) if sampled >= peak => Measured::Sampled(sampled),
                        _ if peak > estimates::FLOOR => Measured::Waited(peak),
                        _ => Measured::Nothing,
                    },
                };
                break (code, peak, figures, start_unix, started);
            }
            // Stopped before cargo heard of it: again, charged at its guess this time.
            probation::Supervised::Stopped => request.guessed = false,
        }
    };
    let wait_secs = waiting.elapsed().as_secs_f64() - started.elapsed().as_secs_f64();
    let record = RustcRecord {
        krate,
        version,
        kind,
        estimate_bytes: estimate,
        guessed: measured.is_none(),
        peak_bytes: match peak {
            Measured::Waited(bytes) | Measured::Sampled(bytes) => Some(bytes),
            Measured::Nothing => None,
        },
        wait_secs,
        memory_wait_secs,
        start_unix,
        wall_secs: started.elapsed().as_secs_f64(),
        alone: estimate > budget,
        success: code == 0,
        probation: probation.is_some(),
        paused_secs: probation.map_or(0.0, |p| p.paused_secs),
        sampled: matches!(peak, Measured::Sampled(_)),
        source_bytes,
    };
    if let Some(log) = std::env::var_os(LOG_ENV)
        && let Err(err) = crate::wrappers::linker::append_record(Path::new(&log), &record)
    {
        // rustc's outcome is the build's: a log that cannot be written is only reported.
        eprintln!(
            "pgo-build (rustc wrapper): could not record rustc in {}: {err:#}",
            Path::new(&log).display()
        );
    }
    Ok(code)
}

/// A rustc's peak, and how it was measured.
enum Measured {
    /// By `wait4`: rustc ran in the wrapper's tree.
    Waited(u64),
    /// By samples of sccache's rustc (see remote.rs).
    Sampled(u64),
    /// Not at all: a cache hit ran no rustc.
    Nothing,
}

fn env_number(key: &str) -> Option<u64> {
    std::env::var(key).ok()?.parse().ok()
}

fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match status.code() {
        Some(code) => code as u8,
        None => 128 + status.signal().unwrap_or(0) as u8,
    }
}

/// The crate a rustc command line compiles and its kind; `None` for queries (`-vV`,
/// `--print`), which compile nothing.
pub fn compiled_crate(args: &[OsString]) -> Option<(String, String)> {
    let args: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if args
        .iter()
        .any(|a| a.starts_with("--print") || a == "-vV" || a == "-V")
    {
        return None;
    }
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
            .or_else(|| {
                args.iter()
                    .find_map(|a| a.strip_prefix(&format!("{flag}=")).map(str::to_owned))
            })
    };
    let krate = value("--crate-name")?;
    let kind = if krate.starts_with("build_script_") {
        "build-script".to_owned()
    } else {
        value("--crate-type").unwrap_or_else(|| "bin".to_owned())
    };
    Some((krate, kind))
}

/// Where rustc writes a library's metadata (`<out-dir>/lib<crate><extra-filename>.rmeta`):
/// once it exists, cargo may have started the crates that depend on it.
fn metadata_path(args: &[OsString]) -> Option<PathBuf> {
    let args: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let after = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
    };
    let out_dir = after("--out-dir")?;
    let krate = after("--crate-name")?;
    let extra = args
        .windows(2)
        .find_map(|pair| {
            (pair[0] == "-C")
                .then(|| pair[1].strip_prefix("extra-filename="))
                .flatten()
        })
        .unwrap_or_default();
    Some(PathBuf::from(out_dir).join(format!("lib{krate}{extra}.rmeta")))
}

/// The crate root a rustc command line compiles (its one `.rs` argument).
fn crate_root(args: &[OsString]) -> Option<PathBuf> {
    args.iter()
        .map(Path::new)
        .find(|arg| arg.extension().is_some_and(|e| e == "rs") && !arg.starts_with("-"))
        .map(Path::to_path_buf)
}

/// Whether rustc links this crate (a binary or a dynamic library): only then does it run
/// the linker its `-C linker` names.
fn links(args: &[OsString]) -> bool {
    const LINKED: [&str; 3] = ["bin", "cdylib", "dylib"];
    args.windows(2)
        .any(|pair| pair[0] == "--crate-type" && LINKED.iter().any(|t| pair[1] == *t))
        || args.iter().any(|arg| {
            arg.to_str()
                .and_then(|a| a.strip_prefix("--crate-type="))
                .is_some_and(|t| LINKED.contains(&t))
        })
}

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
    /// entry. Absent in entries of older pgo-builds.
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
    /// Running on probation (see [`probation`]): `bytes` is its allowance.
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
    /// Run on probation within this many bytes (see [`probation`]).
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
    /// else run on probation (see [`probation`]) when it is the guessed waiter with the
    /// smallest sources, a CPU slot is free, nothing else is on probation, no waiter fits or
    /// has waited past [`PRIORITY_AFTER`], and the budget left beside what runs is at least
    /// [`probation::MIN_ALLOWANCE`]; else wait.
    pub fn admission(&self, pid: u32, budget: u64, cpus: usize, now: f64) -> Admission {
        let Some(me) = self.waiting.iter().find(|e| e.pid == pid) else {
            return Admission::Wait;
        };
        let used: u64 = self.running.iter().map(|e| e.bytes).sum();
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
            && allowance >= probation::MIN_ALLOWANCE
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
                    Some(process) => entry
                        .started
                        .is_none_or(|started| started == process.started),
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
        let used: u64 = self.running.iter().map(|e| e.bytes).sum();
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
fn with_ledger<T>(path: &Path, change: impl FnOnce(&mut Ledger) -> T) -> Result<T> {
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
    let mut ledger: Ledger = serde_json::from_str(&text).unwrap_or_default();
    ledger.prune();
    let result = change(&mut ledger);
    let text = serde_json::to_string(&ledger)?;
    file.set_len(0)?;
    file.rewind()?;
    file.write_all(text.as_bytes())?;
    Ok(result)
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
    with_ledger(path, |ledger| {
        ledger.waiting.push(Entry {
            pid,
            started: process_start(pid),
            krate: krate.to_owned(),
            bytes,
            since: crate::wrappers::linker::unix_now(),
            guessed: request.guessed,
            source_bytes: request.source_bytes,
            probation: false,
            paused: false,
        })
    })?;
    let mut next_note = WAIT_NOTE_AFTER;
    let mut memory_wait = Duration::ZERO;
    let mut last_look = Instant::now();
    loop {
        let (admission, for_memory) = with_ledger(path, |ledger| {
            let admission =
                ledger.admission(pid, budget, cpus, crate::wrappers::linker::unix_now());
            if admission == Admission::Wait {
                return (admission, ledger.waits_for_memory(cpus));
            }
            let position = ledger.waiting.iter().position(|e| e.pid == pid).unwrap();
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
            eprintln!(
                "{WRAPPER_NOTE_PREFIX}crate `{krate}` (estimated {}) has waited {}s for memory \
                 (rustc budget {}, {cpus} at once): {behind}",
                human_bytes(bytes),
                memory_wait.as_secs(),
                human_bytes(budget)
            );
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

impl RustcSummary {
    pub fn from_records(records: &[RustcRecord]) -> RustcSummary {
        let figures = |r: &RustcRecord| CrateFigures {
            krate: r.krate.clone(),
            kind: r.kind.clone(),
            peak_bytes: r.peak_bytes,
            estimate_bytes: r.estimate_bytes,
            wall_secs: r.wall_secs,
            wait_secs: r.wait_secs,
            memory_wait_secs: r.memory_wait_secs,
        };
        let mut measured: Vec<&RustcRecord> =
            records.iter().filter(|r| r.peak_bytes.is_some()).collect();
        measured.sort_by_key(|r| std::cmp::Reverse(r.peak_bytes));
        let errors: Vec<f64> = measured
            .iter()
            .filter(|r| !r.guessed)
            .map(|r| {
                let peak = r.peak_bytes.unwrap_or(0).max(1) as f64;
                (peak - r.estimate_bytes as f64).abs() / peak
            })
            .collect();
        RustcSummary {
            invocations: records.len(),
            heaviest: measured.iter().take(10).map(|r| figures(r)).collect(),
            wait_secs: records.iter().map(|r| r.wait_secs).sum::<f64>() + 0.0,
            memory_wait_secs: records.iter().map(|r| r.memory_wait_secs).sum::<f64>() + 0.0,
            estimate_error: (!errors.is_empty())
                .then(|| errors.iter().sum::<f64>() / errors.len() as f64),
            overruns: measured
                .iter()
                .filter(|r| {
                    !r.guessed
                        && r.peak_bytes.unwrap_or(0) as f64
                            > r.estimate_bytes as f64 * (1.0 + OVERRUN_TOLERANCE)
                })
                .map(|r| figures(r))
                .collect(),
            alone: records.iter().filter(|r| r.alone).map(figures).collect(),
            unmeasured: records.len() - measured.len(),
            ..RustcSummary::default()
        }
    }
}

/// The rustc invocations a stage's build logged.
pub fn read_log(path: &Path) -> Vec<RustcRecord> {
    crate::wrappers::linker::read_log(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(pid: u32, bytes: u64, since: f64) -> Entry {
        Entry {
            pid,
            started: None,
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

    const GIB: u64 = 1 << 30;

    #[test]
    fn only_a_peak_well_over_its_estimate_is_an_overrun() {
        let record = |krate: &str, estimate: u64, peak: u64| RustcRecord {
            krate: krate.to_owned(),
            kind: "lib".to_owned(),
            estimate_bytes: estimate,
            peak_bytes: Some(peak),
            wall_secs: 1.0,
            success: true,
            ..RustcRecord::default()
        };
        let summary = RustcSummary::from_records(&[
            // 212.1 MiB over 209.8 MiB: the same crate's run-to-run variation.
            record("libc", 2098 << 17, 2121 << 17),
            record("heavy", 400 << 20, 600 << 20),
            record("under", 400 << 20, 300 << 20),
        ]);
        let names: Vec<&str> = summary.overruns.iter().map(|c| c.krate.as_str()).collect();
        assert_eq!(names, ["heavy"]);
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
        assert_eq!(ledger.running, [owner]);
        assert!(ledger.describe_running().contains("1 running"));
    }

    #[test]
    fn only_crates_that_link_are_said_to() {
        let args = |line: &str| -> Vec<OsString> { line.split(' ').map(OsString::from).collect() };
        assert!(links(&args(
            "--crate-name s --crate-type cdylib --crate-type rlib"
        )));
        assert!(links(&args("--crate-name app --crate-type=bin")));
        assert!(!links(&args("--crate-name libc --crate-type lib")));
        assert!(!links(&args("--crate-name m --crate-type proc-macro")));
    }

    #[test]
    fn compiled_crates_are_named_and_queries_are_not() {
        let args = |line: &str| -> Vec<OsString> { line.split(' ').map(OsString::from).collect() };
        assert_eq!(
            compiled_crate(&args(
                "--crate-name app --edition=2024 src/main.rs --crate-type bin"
            )),
            Some(("app".into(), "bin".into()))
        );
        assert_eq!(
            compiled_crate(&args(
                "--crate-name build_script_build build.rs --crate-type bin"
            )),
            Some(("build_script_build".into(), "build-script".into()))
        );
        assert_eq!(
            compiled_crate(&args("--crate-name=serde --crate-type=lib x.rs")),
            Some(("serde".into(), "lib".into()))
        );
        assert_eq!(compiled_crate(&args("-vV")), None);
        assert_eq!(
            compiled_crate(&args("- --crate-name ___ --print=file-names")),
            None
        );
    }
}
