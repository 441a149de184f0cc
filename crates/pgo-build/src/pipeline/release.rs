//! What `pgo-build gate` decides and records: the rule for one held-out workload (proven not
//! slower within the margin), the size check, and `provenance.json`, the record that ships
//! beside the binaries (its schema: `docs/provenance.schema.json`). Plain data and pure
//! functions.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::context::Context;
use crate::layout::Stage;
use crate::measure::decision::{Standing, standing};
use crate::measure::stats::{PairedSummary, Verdict, change_bound, change_with_interval};

/// Bumped when a field changes meaning or goes; release tooling reads this file.
pub const PROVENANCE_SCHEMA_VERSION: u32 = 1;

/// Whether one held-out workload lets the variant ship against `against`, by the rule every
/// decision uses (`measure::decision`): faster, the same within `margin`, or not slower by
/// more than it; never a measured slowdown, and never a wide interval (missing evidence does
/// not ship).
pub fn workload_check(summary: &PairedSummary, margin: f64) -> (bool, String) {
    let (low, high) = summary.verdict_interval();
    let interval = change_with_interval(summary.median_ratio, (low, high));
    let standing = standing(summary, margin);
    let margin_text = format!("{:.1}%", margin * 100.0);
    let detail = match standing {
        Standing::Better => "faster".to_owned(),
        Standing::Same => format!("no difference beyond the ±{margin_text} margin"),
        Standing::NotWorse => {
            format!("not slower by more than the {margin_text} margin (and not shown faster)")
        }
        Standing::Worse if high <= 1.0 + margin => format!(
            "slower (by less than the {margin_text} margin, but measured: a proven slowdown \
             does not ship)"
        ),
        Standing::Worse => "slower".to_owned(),
        Standing::Open if summary.verdict == Verdict::TooFewRounds => {
            // The rounds this verdict needs at its level in the comparison's family, as the
            // comparison says (never fewer than a verdict needs alone).
            let needed = (summary.pairs + summary.more_rounds.unwrap_or_default())
                .max(crate::measure::stats::MIN_PAIRS);
            format!(
                "too few rounds for a verdict ({} ran; at least {needed}, --rounds {needed})",
                summary.pairs
            )
        }
        Standing::Open => {
            let more = summary
                .more_rounds
                .map(|n| format!("; ~{n} more rounds (--rounds) could settle it"))
                .unwrap_or_default();
            format!(
                "not shown within the {margin_text} margin (the interval reaches {}){more}",
                change_bound(high, true)
            )
        }
    };
    (standing.may_ship(), format!("{interval}: {detail}"))
}

/// `provenance.json`: what shipped, from what, and the evidence it may.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Provenance {
    pub schema_version: u32,
    pub pgo_build_version: String,
    pub created: String,
    /// Every check passed.
    pub passed: bool,
    /// Why not, one line each.
    pub failures: Vec<String>,
    pub workspace: PathBuf,
    /// `git rev-parse HEAD` of the workspace (`-dirty-<hash>` with uncommitted changes).
    pub git_revision: Option<String>,
    pub target: String,
    /// The staged variant that ships (`bolt` or `optimized`).
    pub variant: String,
    pub rustc: String,
    pub llvm_version: String,
    /// The C compiler of a cross-language build, if any (`compiler version`).
    pub c_compiler: Option<String>,
    /// The profile the variant was built with.
    pub profile: Option<ProfileRecord>,
    /// The training the profile came from: local train runs, or merged bundles.
    pub training: Vec<TrainingRecord>,
    pub binaries: Vec<ShippedBinary>,
    /// What verdicts rest on (`wall`, `p99_ms`, …) and the equivalence margin.
    pub metric: String,
    pub margin: f64,
    pub max_size_growth: Option<String>,
    pub verdicts: Vec<GateVerdict>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProfileRecord {
    pub path: PathBuf,
    pub sha256: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrainingRecord {
    /// A train run (`name`, or `name.part<I>of<K>`), or a merged bundle's file.
    pub name: String,
    /// The workload's fingerprint, or the bundle's shard (`I/N`).
    pub fingerprint: String,
    pub status: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShippedBinary {
    pub name: String,
    pub path: PathBuf,
    pub sha256: String,
    pub size_bytes: u64,
    /// Loaded size (without debug info and symbols) of it and of the baseline's.
    pub loaded_bytes: u64,
    pub baseline_loaded_bytes: Option<u64>,
    pub passed: bool,
    /// The held-out workloads that run it (see `exec::binaries_run`), whose verdicts judge
    /// it; empty when none does, and then it is unmeasured rather than failed.
    #[serde(default)]
    pub measured_by: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GateVerdict {
    pub workload: String,
    /// `baseline`, or `previous` (`--against DIR`).
    pub against: String,
    /// What judged it: the deciding metric, or wall time where the workload does not report it.
    pub metric: String,
    pub median_ratio: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    pub verdict: Verdict,
    pub passed: bool,
    pub detail: String,
    /// Set when instruction counts decided: what the deciding metric said when it left the
    /// workload open (a busy machine's noise, or too few rounds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_open_by: Option<String>,
}

impl GateVerdict {
    /// The verdict of `summary` (a candidate against `against` on `workload`) under the rule of
    /// [`workload_check`].
    pub fn judge(
        workload: String,
        against: String,
        metric: String,
        summary: &PairedSummary,
        margin: f64,
    ) -> GateVerdict {
        let (passed, detail) = workload_check(summary, margin);
        GateVerdict {
            workload,
            against,
            metric,
            median_ratio: summary.median_ratio,
            ci_low: summary.ci_low,
            ci_high: summary.ci_high,
            verdict: summary.verdict,
            passed,
            detail,
            left_open_by: summary.left_open_by.clone(),
        }
    }
}

/// The stage `gate` ships: bolt when `[bolt] enabled`, else optimized.
pub fn shipped_stage(cx: &Context) -> Stage {
    if cx.config.bolt.enabled {
        Stage::Bolt
    } else {
        Stage::Optimized
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::stats::summarize;

    fn summary(ratios: &[f64]) -> PairedSummary {
        summarize(ratios)
    }

    #[test]
    fn only_an_interval_below_the_margin_ships() {
        let faster = summary(&[0.80, 0.82, 0.79, 0.81, 0.80, 0.83, 0.80, 0.81, 0.79, 0.80]);
        assert!(workload_check(&faster, 0.02).0);
        let same = summary(&[
            1.0, 1.005, 0.995, 1.002, 0.998, 1.001, 0.999, 1.0, 1.003, 0.997,
        ]);
        let (passed, detail) = workload_check(&same, 0.02);
        assert!(passed, "{detail}");
        assert!(
            detail.contains("no difference beyond the ±2.0% margin"),
            "{detail}"
        );
        // Not shown faster, and not slower by more than the margin: it may ship, and says so.
        let not_worse = summary(&[0.9, 0.95, 1.01, 0.92, 1.005, 0.97, 0.88, 1.0, 0.93, 1.01]);
        let (passed, detail) = workload_check(&not_worse, 0.02);
        assert!(passed, "{detail}");
        assert!(
            detail.contains("not slower by more than the 2.0% margin (and not shown faster)"),
            "{detail}"
        );
        // Instruction counts 1.8% higher, repeated within 0.01%: slower, though inside the
        // margin. The answer calls it slower, and so does the gate.
        let counted = crate::measure::stats::summarize_counts(&[1.018, 1.0181], Some(0.0001));
        let (passed, detail) = workload_check(&counted, 0.02);
        assert!(!passed, "{detail}");
        assert!(
            detail.starts_with("+1.8% (+1.7% … +2.0%): slower (by less than the 2.0% margin"),
            "{detail}"
        );
        let slower = summary(&[1.2, 1.22, 1.19, 1.21, 1.2, 1.23, 1.2, 1.21, 1.19, 1.2]);
        let (passed, detail) = workload_check(&slower, 0.02);
        assert!(!passed && detail.ends_with("slower"), "{detail}");
        // Noisy: neither faster nor inside the margin. Missing evidence does not ship.
        let noisy = summary(&[0.8, 1.2, 0.9, 1.15, 0.85, 1.1, 0.95, 1.05, 0.9, 1.12]);
        let (passed, detail) = workload_check(&noisy, 0.02);
        assert!(
            !passed && detail.contains("not shown within the 2.0% margin"),
            "{detail}"
        );
        let few = summary(&[0.8, 0.8, 0.8]);
        let (passed, detail) = workload_check(&few, 0.02);
        assert!(!passed && detail.contains("3 ran; at least 7"), "{detail}");
        // Seven rounds that a place among many verdicts needs more of: the number the
        // comparison gives, not the seven a verdict needs alone.
        let seven = summary(&[0.8; 7]).within_family(crate::measure::family::Judged {
            level: 0.005,
            rejected: true,
        });
        assert_eq!(seven.verdict, Verdict::TooFewRounds);
        let needed = 7 + seven.more_rounds.unwrap();
        assert!(needed > 7);
        let (passed, detail) = workload_check(&seven, 0.02);
        assert!(
            !passed && detail.contains(&format!("7 ran; at least {needed}")),
            "{detail}"
        );
    }
}
