//! The log of a stage's rustc (`<stage>/rustc.jsonl`, one [`RustcRecord`] a line: its crate,
//! estimate, wait, peak), and the report's summary of it.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::report::{CrateFigures, CrateKind, RustcSummary};

/// One rustc invocation, as the wrapper logged it (a JSON line in `<stage>/rustc.jsonl`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RustcRecord {
    pub krate: String,
    /// The package's version (cargo's `CARGO_PKG_VERSION`): estimates are kept per version.
    #[serde(default)]
    pub version: String,
    pub kind: CrateKind,
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
    /// It ran on probation (see `probation.rs`) in what the running crates left.
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
    /// `probation::source_bytes`): with its peak, what a guess could learn from.
    #[serde(default)]
    pub source_bytes: u64,
}

/// How far a crate may peak over its estimate before it counts as an overrun: the same crate's
/// peak RSS varies by a few percent between builds (the example's: 1-3%), and a warning for
/// "212.1 MiB over 209.8 MiB" reports that noise, not an estimate that was wrong.
const OVERRUN_TOLERANCE: f64 = 0.05;

impl RustcSummary {
    pub fn from_records(records: &[RustcRecord]) -> RustcSummary {
        let figures = |r: &RustcRecord| CrateFigures {
            krate: r.krate.clone(),
            kind: r.kind,
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

    #[test]
    fn only_a_peak_well_over_its_estimate_is_an_overrun() {
        let record = |krate: &str, estimate: u64, peak: u64| RustcRecord {
            krate: krate.to_owned(),
            kind: CrateKind::Lib,
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
}
