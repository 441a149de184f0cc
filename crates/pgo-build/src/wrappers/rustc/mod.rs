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
//! Here: the mode itself (`wrap`: the command line, the crate's compiles, a carry's
//! recompile, the log record); `invocation`: the rustc command line it runs; `budgeted`: a
//! crate's compiles within the budget and their peaks; `args`: what a rustc command line
//! compiles; `ledger`: the shared ledger and admission; `probation`: a guessed crate in what is left; `estimates`: the
//! peaks learned and carried; `remote`: the peak of sccache's rustc; `log`: `rustc.jsonl`;
//! `stable_names`: the `-C metadata` that keeps symbol names across releases.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::Write as _;
use std::path::Path;
use std::time::Instant;

use anyhow::Result;

mod args;
mod budgeted;
pub mod crate_carry;
mod environment;
pub mod estimates;
mod invocation;
mod ledger;
mod log;
pub mod probation;
mod remote;
pub mod stable_names;

use args::compiled_crate;
use budgeted::{Budgeted, Compiled, CrateUnit, Measured};
use crate_carry::{CarryRecord, CarrySetup, Carrying};
pub use environment::{
    BUDGET_ENV, CHAINED_ENV, CPUS_ENV, ESTIMATES_ENV, LEDGER_ENV, LOG_ENV, MODE_ENV,
    WORKSPACE_ROOT_ENV,
};
pub use estimates::{Estimates, guess, read_estimates};
use invocation::Invocation;
pub use log::{RustcRecord, read_log};

/// Kept out of the budget for cargo, pgo-build and the wrappers waiting in front of rustc: a
/// fixed allowance, not measured per build (bench/memory-budget checks the whole tree).
pub const OVERHEAD: u64 = 64 << 20;

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
    let invocation = Invocation::from_args(&args)?;
    let Some((krate, kind)) =
        compiled_crate(&invocation.args).map(|(k, kind)| (qualified(k), kind))
    else {
        // `rustc -vV`, `--print` queries: nothing to admit.
        return invocation.run_unadmitted();
    };
    let unit = CrateUnit::new(
        krate,
        kind,
        &invocation.args,
        invocation.compiles_elsewhere(),
    );
    let waiting = Instant::now();
    let mut budgeted = Budgeted::from_env(&unit, &invocation.args)?;
    let capture = invocation.carrying.as_ref().map(|_| BTreeSet::new());
    let mut compiled = budgeted.compile(&mut invocation.command(), unit.elsewhere, capture)?;
    let (first_start_unix, first_started) = (compiled.start_unix, compiled.started);
    if let (Some(carrying), Some(setup)) = (&invocation.carrying, &invocation.carry_setup) {
        compiled = carried(&invocation, &mut budgeted, compiled, (carrying, setup))?;
    }
    let Compiled {
        code,
        peak,
        probation,
        ..
    } = compiled;
    let record = RustcRecord {
        estimate_bytes: unit.estimate,
        guessed: unit.measured.is_none(),
        peak_bytes: peak.bytes(),
        wait_secs: waiting.elapsed().as_secs_f64() - first_started.elapsed().as_secs_f64(),
        memory_wait_secs: budgeted.memory_wait_secs,
        start_unix: first_start_unix,
        wall_secs: first_started.elapsed().as_secs_f64(),
        alone: budgeted.alone(),
        success: code == 0,
        probation: probation.is_some(),
        paused_secs: probation.map_or(0.0, |p| p.paused_secs),
        sampled: matches!(peak, Measured::Sampled(_)),
        source_bytes: unit.source_bytes,
        krate: unit.krate,
        version: unit.version,
        kind: unit.kind,
    };
    log_rustc(&record);
    Ok(code)
}

/// A crate that takes part in a committed profile's carry: its first compile's output read
/// for the records it lacks, compiled again with them when worth it (not through the user's
/// wrapper: see crate_carry.rs), and the output shown as cargo would have shown it.
fn carried(
    invocation: &Invocation,
    budgeted: &mut Budgeted,
    mut compiled: Compiled,
    (carrying, setup): (&Carrying, &CarrySetup),
) -> Result<Compiled> {
    let (lines, notices) = compiled.output.take().unwrap_or_default();
    let mut shown = lines;
    if compiled.code == 0 {
        let mut record = CarryRecord {
            krate: budgeted.krate().to_owned(),
            first_compile_secs: compiled.started.elapsed().as_secs_f64(),
            ..CarryRecord::default()
        };
        match carrying.plan(setup, &shown) {
            Ok(plan) => {
                if plan.worth_recompiling() {
                    let first_peak = compiled.peak.bytes();
                    compiled =
                        budgeted.compile(&mut invocation.direct_command(), false, Some(notices))?;
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
    Ok(compiled)
}

/// Appends the record to the stage's `rustc.jsonl`: rustc's outcome is the build's, so a log
/// that cannot be written is only reported.
fn log_rustc(record: &RustcRecord) {
    if let Some(log) = std::env::var_os(LOG_ENV)
        && let Err(err) = crate::wrappers::linker::append_record(Path::new(&log), record)
    {
        crate::util::printer::stderr_line(&format!(
            "pgo-build (rustc wrapper): could not record rustc in {}: {err:#}",
            Path::new(&log).display()
        ));
    }
}
