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
//! estimated above the whole budget runs alone rather than never. A waiter that has waited a
//! minute (`ledger::PRIORITY_AFTER`) goes before every newer one, so a heavy crate is not
//! overtaken forever.
//!
//! rustc runs as the wrapper's child (behind the user's own wrapper, say sccache, when one was
//! set: [`CHAINED_ENV`]); `wait4` gives the peak RSS of it and the processes it waited for (its
//! linker), which is logged to the stage's `rustc.jsonl` with the estimate, the wait and the
//! wall time. After the build, pgo-build reads the log, reports, and updates the estimates.
//!
//! Here: the mode itself (`wrap`); `args`: what a rustc command line compiles; `ledger`: the
//! shared ledger and admission; `probation`: a guessed crate in what is left; `estimates`: the
//! peaks learned and carried; `remote`: the peak of sccache's rustc; `log`: `rustc.jsonl`;
//! `stable_names`: the `-C metadata` that keeps symbol names across releases.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result};

mod args;
pub mod crate_carry;
pub mod estimates;
mod ledger;
mod log;
pub mod probation;
mod remote;
pub mod stable_names;

use args::{compiled_crate, crate_root, links, metadata_path};
use crate_carry::{CarryRecord, CarrySetup, Carrying};
pub use estimates::{Estimates, read_estimates};
use ledger::{Admission, Request, admit, release};
pub use log::{RustcRecord, read_log};

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
            crate::util::printer::stderr_line(&format!("pgo-build (rustc wrapper): {err:#}"));
            1
        }
    })
}

fn wrap() -> Result<u8> {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let (rustc, rustc_args) = args
        .split_first()
        .context("run as a rustc wrapper without a rustc to run")?;
    let stable;
    let rustc_args = match std::env::var(stable_names::ENV) {
        Ok(duplicated) => {
            let identity = stable_names::CrateIdentity {
                package: std::env::var("CARGO_PKG_NAME").unwrap_or_default(),
                version: std::env::var("CARGO_PKG_VERSION").unwrap_or_default(),
            };
            stable = stable_names::rewrite(rustc_args, &identity, &duplicated);
            stable.as_slice()
        }
        Err(_) => rustc_args,
    };
    let carry_setup = CarrySetup::from_env();
    let carrying = match &carry_setup {
        Some(setup) => Carrying::prepare(rustc_args, setup)?,
        None => None,
    };
    let rustc_args = carrying.as_ref().map_or(rustc_args, |c| c.args.as_slice());
    // Outside the workspace root (registry crates), pgo-build's relative paths name nothing;
    // only a crate that links uses them, so only its command line changes (an rlib's stays
    // the same in every checkout, for a compile cache).
    let outside_root = std::env::var_os(WORKSPACE_ROOT_ENV)
        .map(PathBuf::from)
        .filter(|root| links(rustc_args) && std::env::current_dir().is_ok_and(|cwd| cwd != *root));
    let final_args: Vec<OsString> = rustc_args
        .iter()
        .map(|arg| {
            match outside_root
                .as_deref()
                .and_then(|root| crate::layout::absolute_own_path(&arg.to_string_lossy(), root))
            {
                Some(absolute) => absolute.into(),
                None => arg.clone(),
            }
        })
        .collect();
    let chained = std::env::var_os(CHAINED_ENV).filter(|w| !w.is_empty());
    let pinned_version =
        std::env::var_os(stable_names::ENV).is_some() && stable_names::pins_version(&final_args);
    let command_through = |wrapper: Option<&OsString>| {
        let mut command = match wrapper {
            Some(wrapper) => {
                let mut command = Command::new(wrapper);
                command.arg(rustc);
                command
            }
            None => Command::new(rustc),
        };
        command.args(&final_args).env_remove(MODE_ENV);
        if pinned_version {
            command.env(
                stable_names::FORCED_VERSION_ENV,
                stable_names::FORCED_VERSION,
            );
        }
        command
    };
    let mut command = command_through(chained.as_ref());
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
    // One compile within the budget; with `capture` (the artifact notices already passed on),
    // its stderr is kept rather than passed through.
    let mut compile = |command: &mut Command,
                       elsewhere: bool,
                       mut capture: Option<BTreeSet<String>>|
     -> Result<Compiled> {
        if capture.is_some() {
            command.stderr(Stdio::piped());
        }
        loop {
            let (waited, admission) = admit(&ledger, me, &request, budget, cpus)?;
            memory_wait_secs += waited;
            let start_unix = crate::wrappers::linker::unix_now();
            let started = Instant::now();
            let remote = elsewhere
                .then(|| remote::Unit::of(rustc_args).map(remote::RemoteSampler::start))
                .flatten();
            let mut reader = None;
            let outcome = command
                .spawn()
                .with_context(|| format!("could not start {}", rustc.to_string_lossy()))
                .and_then(|mut child| {
                    if let (Some(stderr), Some(already)) = (child.stderr.take(), capture.take()) {
                        reader = Some(crate_carry::read_output(stderr, already));
                    }
                    match admission {
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
                    }
                });
            let output = reader.map(|r| r.join().unwrap_or_default());
            let remote_peak = remote.and_then(remote::RemoteSampler::stop);
            release(&ledger, me)?;
            match outcome? {
                probation::Supervised::Done(code, peak, figures) => {
                    let peak = match elsewhere {
                        false => Measured::Waited(peak),
                        // Not cacheable, the client ran rustc itself and `wait4` saw it (on a
                        // hit it saw only the client, a few MiB): the larger of that and the
                        // samples.
                        true => match remote_peak {
                            Some(sampled) if sampled >= peak => Measured::Sampled(sampled),
                            _ if peak > estimates::FLOOR => Measured::Waited(peak),
                            _ => Measured::Nothing,
                        },
                    };
                    return Ok(Compiled {
                        code,
                        peak,
                        probation: figures,
                        start_unix,
                        started,
                        output,
                    });
                }
                // Stopped before cargo heard of it: again, charged at its guess this time.
                probation::Supervised::Stopped => {
                    request.guessed = false;
                    capture = output.map(|(_, notices)| notices);
                }
            }
        }
    };
    let mut compiled = compile(
        &mut command,
        elsewhere,
        carrying.as_ref().map(|_| BTreeSet::new()),
    )?;
    let (first_start_unix, first_started) = (compiled.start_unix, compiled.started);
    if let (Some(carrying), Some(setup)) = (&carrying, &carry_setup) {
        let (lines, notices) = compiled.output.take().unwrap_or_default();
        let mut shown = lines;
        if compiled.code == 0 {
            let first_compile_secs = first_started.elapsed().as_secs_f64();
            let mut record = CarryRecord {
                krate: krate.clone(),
                first_compile_secs,
                ..CarryRecord::default()
            };
            match carrying.plan(setup, &shown) {
                Ok(plan) => {
                    if plan.worth_recompiling() {
                        // Not through the user's wrapper: see crate_carry.rs.
                        let mut direct = command_through(None);
                        let first_peak = compiled.peak.bytes();
                        compiled = compile(&mut direct, false, Some(notices))?;
                        compiled.peak = compiled.peak.at_least(first_peak);
                        shown = compiled.output.take().unwrap_or_default().0;
                        record.recompiled = true;
                    }
                    record.plan = plan;
                }
                Err(err) => record.error = Some(format!("{err:#}")),
            }
            crate_carry::log(&setup.log, &record);
        }
        let mut err = std::io::stderr().lock();
        for line in shown.iter().filter(|line| carrying.passes(line)) {
            let _ = writeln!(err, "{line}");
        }
    }
    let Compiled {
        code,
        peak,
        probation,
        ..
    } = compiled;
    let wait_secs = waiting.elapsed().as_secs_f64() - first_started.elapsed().as_secs_f64();
    let record = RustcRecord {
        krate,
        version,
        kind,
        estimate_bytes: estimate,
        guessed: measured.is_none(),
        peak_bytes: peak.bytes(),
        wait_secs,
        memory_wait_secs,
        start_unix: first_start_unix,
        wall_secs: first_started.elapsed().as_secs_f64(),
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
        crate::util::printer::stderr_line(&format!(
            "pgo-build (rustc wrapper): could not record rustc in {}: {err:#}",
            Path::new(&log).display()
        ));
    }
    Ok(code)
}

/// One rustc run to its end.
struct Compiled {
    code: u8,
    peak: Measured,
    probation: Option<probation::Probation>,
    start_unix: f64,
    started: Instant,
    /// Its stderr, when kept (see `crate_carry::read_output`), and the artifact notices passed on.
    output: Option<(Vec<String>, BTreeSet<String>)>,
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

impl Measured {
    fn bytes(&self) -> Option<u64> {
        match self {
            Measured::Waited(bytes) | Measured::Sampled(bytes) => Some(*bytes),
            Measured::Nothing => None,
        }
    }

    /// The larger of this and an earlier compile's peak of the same crate.
    fn at_least(self, earlier: Option<u64>) -> Measured {
        match (self, earlier) {
            (Measured::Waited(now), Some(then)) => Measured::Waited(now.max(then)),
            (Measured::Nothing, Some(then)) => Measured::Waited(then),
            (measured, _) => measured,
        }
    }
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
