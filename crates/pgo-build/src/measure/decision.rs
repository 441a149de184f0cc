//! The one rule that turns verdicts into a decision, for every command that decides: the
//! answer block (`run`, `compare`, `report`), `gate` and `explore`. Where one candidate stands
//! against a reference on one workload ([`Standing`]), from the verdict of the figure that
//! decides and the interval it was judged by, and what that means over several workloads
//! ([`Outcome`]). Because all of them call these two functions, the gate cannot pass what the
//! answer calls slower, nor the answer ship what the gate refuses.
//!
//! The margin (`[compare] margin`) is the difference too small to matter. "The same" is a
//! conclusion (the interval lies within ±margin), and so is "not slower by more than the
//! margin" (its upper end lies within it); a proven slowdown is never let through, however
//! small: the verdict measured it.

use super::stats::{PairedSummary, Verdict};

/// One candidate against a reference on one workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Proven faster (fewer instructions, better metric).
    Better,
    /// Proven slower.
    Worse,
    /// No difference larger than the margin, either way.
    Same,
    /// Not proven faster, but not slower by more than the margin.
    NotWorse,
    /// Not known yet: the interval reaches past the margin on the slower side, too few rounds,
    /// or figures too coarse to judge.
    Open,
}

impl Standing {
    /// Whether a build standing so may ship (the gate's question).
    pub fn may_ship(self) -> bool {
        matches!(self, Standing::Better | Standing::Same | Standing::NotWorse)
    }
}

/// Where `summary` (the deciding figure's, candidate/reference, judged in its family) puts the
/// candidate, with differences within `margin` too small to matter.
pub fn standing(summary: &PairedSummary, margin: f64) -> Standing {
    let (low, high) = summary.verdict_interval();
    match summary.verdict {
        Verdict::Faster => Standing::Better,
        Verdict::Slower => Standing::Worse,
        Verdict::TooFewRounds | Verdict::TooCoarse => Standing::Open,
        Verdict::NoDifference | Verdict::Inconclusive if !(low.is_finite() && high.is_finite()) => {
            Standing::Open
        }
        Verdict::NoDifference | Verdict::Inconclusive => {
            if high <= 1.0 + margin && low >= 1.0 - margin {
                Standing::Same
            } else if high <= 1.0 + margin {
                Standing::NotWorse
            } else {
                Standing::Open
            }
        }
    }
}

/// A candidate against a reference over several workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Better on some workloads, and the same or not worse on the rest: ship it.
    Better,
    /// The same on every workload: no measurable difference.
    Same,
    /// Not worse on every workload, not better on any: safe to ship, no gain shown.
    NotWorse,
    /// Worse on some workloads and better on none.
    Worse,
    /// Better on some workloads and worse on others.
    Mixed,
    /// Not worse anywhere, but some workload is still open.
    Open,
}

/// What the standings of one candidate on several workloads add up to; `None` without any.
pub fn outcome(standings: impl IntoIterator<Item = Standing>) -> Option<Outcome> {
    let standings: Vec<Standing> = standings.into_iter().collect();
    let any = |s: Standing| standings.contains(&s);
    Some(if standings.is_empty() {
        return None;
    } else if any(Standing::Worse) && any(Standing::Better) {
        Outcome::Mixed
    } else if any(Standing::Worse) {
        Outcome::Worse
    } else if any(Standing::Open) {
        Outcome::Open
    } else if any(Standing::Better) {
        Outcome::Better
    } else if standings.iter().all(|s| *s == Standing::Same) {
        Outcome::Same
    } else {
        Outcome::NotWorse
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::stats::summarize_counts;

    const MARGIN: f64 = 0.02;

    fn judged(ratios: &[f64]) -> Standing {
        standing(
            &crate::measure::stats::summarize(ratios).within_margin(MARGIN),
            MARGIN,
        )
    }

    #[test]
    fn a_proven_slowdown_never_ships_however_small() {
        // Instruction counts 1.9% higher, repeated within 0.01%: slower, inside the margin.
        let counts = summarize_counts(&[1.018, 1.0181], Some(0.0001));
        assert_eq!(counts.verdict, Verdict::Slower);
        assert!(counts.ci_high <= 1.0 + MARGIN, "{counts:?}");
        assert_eq!(standing(&counts, MARGIN), Standing::Worse);
        assert!(!standing(&counts, MARGIN).may_ship());
    }

    #[test]
    fn each_standing_follows_from_the_verdict_and_its_interval() {
        assert_eq!(judged(&[0.9; 10]), Standing::Better);
        assert_eq!(judged(&[1.1; 10]), Standing::Worse);
        let same = [
            1.0, 1.004, 0.996, 1.002, 0.998, 1.001, 0.999, 1.0, 1.003, 0.997,
        ];
        assert_eq!(judged(&same), Standing::Same);
        // Spread far below 1 and a little above: not slower beyond the margin, not the same.
        let not_worse = [0.9, 0.95, 1.01, 0.92, 1.005, 0.97, 0.88, 1.0, 0.93, 1.01];
        assert_eq!(judged(&not_worse), Standing::NotWorse);
        let wide = [0.8, 1.2, 0.9, 1.15, 0.85, 1.1, 0.95, 1.05, 0.9, 1.12];
        assert_eq!(judged(&wide), Standing::Open);
        assert_eq!(judged(&[0.9; 3]), Standing::Open);
    }

    #[test]
    fn outcomes_over_workloads() {
        use Standing::*;
        let of = |s: &[Standing]| outcome(s.iter().copied()).unwrap();
        assert_eq!(of(&[Better, Same, NotWorse]), Outcome::Better);
        assert_eq!(of(&[Same, Same]), Outcome::Same);
        assert_eq!(of(&[Same, NotWorse]), Outcome::NotWorse);
        assert_eq!(of(&[Better, Open]), Outcome::Open);
        assert_eq!(of(&[Worse, Open]), Outcome::Worse);
        assert_eq!(of(&[Better, Worse]), Outcome::Mixed);
        assert_eq!(outcome([]), None);
    }
}
