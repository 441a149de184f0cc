//! The verdicts one command prints as one family: together they keep a 5% chance of any false
//! "faster", "slower", "better" or "worse" when nothing differs, however many workloads,
//! figures and variants they span.
//!
//! The rule is a weighted Holm procedure (Holm 1979): every hypothesis (a figure of a candidate
//! against a reference on a workload) has a weight; sorted by `p / weight`, each in turn is
//! rejected while `p <= alpha * weight / (the weight of those not yet rejected)`, and the first
//! that is not stops the procedure. The figure verdicts rest on (the deciding metric) holds
//! [`PRIMARY_SHARE`] of the weight, every other figure (secondary) the rest, so the deciding
//! metric gets the level first and a secondary figure is judged only with what is left; when
//! deciding verdicts are rejected, their weight passes on. This controls the chance of any
//! false rejection at `alpha` whatever the dependence between the tests (strong control).

/// The deciding metric's share of the level when other figures are judged too.
pub const PRIMARY_SHARE: f64 = 0.8;

/// What a hypothesis is to the family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rank {
    /// The figure verdicts rest on (`--metric`, `[compare] metric`, else wall time).
    Primary,
    /// Every other figure that gets a verdict.
    Secondary,
}

/// One test of the family: its p-value and rank.
#[derive(Debug, Clone, Copy)]
pub struct Hypothesis {
    pub p: f64,
    pub rank: Rank,
}

/// The outcome of one hypothesis.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Judged {
    /// Rejected by the procedure: a difference may be claimed (when its interval at `level`
    /// also excludes no difference).
    pub rejected: bool,
    /// The level it was tested at: where it was rejected, or where the procedure stopped.
    pub level: f64,
}

/// The weighted Holm procedure at `alpha` over `family`, in its order.
pub fn judge(family: &[Hypothesis], alpha: f64) -> Vec<Judged> {
    let primaries = family.iter().filter(|h| h.rank == Rank::Primary).count();
    let secondaries = family.len() - primaries;
    let (primary_share, secondary_share) = match (primaries, secondaries) {
        (_, 0) => (1.0, 0.0),
        (0, _) => (0.0, 1.0),
        _ => (PRIMARY_SHARE, 1.0 - PRIMARY_SHARE),
    };
    let weight = |h: &Hypothesis| match h.rank {
        Rank::Primary => primary_share / primaries as f64,
        Rank::Secondary => secondary_share / secondaries as f64,
    };
    let mut order: Vec<usize> = (0..family.len()).collect();
    // No data (a NaN p) goes last: it can never be rejected, so it must not stop the others.
    let key = |i: usize| match family[i].p {
        p if p.is_nan() => f64::INFINITY,
        p => p.max(0.0) / weight(&family[i]),
    };
    order.sort_by(|&a, &b| key(a).total_cmp(&key(b)));
    let mut judged = vec![
        Judged {
            rejected: false,
            level: 0.0,
        };
        family.len()
    ];
    let mut remaining: f64 = family.iter().map(weight).sum();
    let mut stopped = false;
    for &i in &order {
        let level = alpha * weight(&family[i]) / remaining;
        // A NaN p (no data) is never rejected, and stops the procedure like any other.
        let rejected = !stopped && family[i].p <= level;
        judged[i] = Judged { rejected, level };
        if rejected {
            remaining -= weight(&family[i]);
        } else {
            stopped = true;
        }
    }
    judged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn primary(p: f64) -> Hypothesis {
        Hypothesis {
            p,
            rank: Rank::Primary,
        }
    }

    fn secondary(p: f64) -> Hypothesis {
        Hypothesis {
            p,
            rank: Rank::Secondary,
        }
    }

    #[test]
    fn one_hypothesis_is_tested_at_the_whole_level() {
        let judged = judge(&[primary(0.04)], 0.05);
        assert!(judged[0].rejected);
        assert!((judged[0].level - 0.05).abs() < 1e-12);
        assert!(!judge(&[primary(0.06)], 0.05)[0].rejected);
    }

    #[test]
    fn holm_steps_down_and_stops_at_the_first_it_cannot_reject() {
        // Unweighted among primaries: 0.05/3, then 0.05/2, then 0.05.
        let judged = judge(&[primary(0.04), primary(0.001), primary(0.02)], 0.05);
        assert!(judged[1].rejected && judged[2].rejected && judged[0].rejected);
        let judged = judge(&[primary(0.03), primary(0.001), primary(0.02)], 0.05);
        assert!(judged[1].rejected);
        assert!(judged[2].rejected, "0.02 <= 0.05/2");
        assert!(judged[0].rejected, "0.03 <= 0.05/1");
        let judged = judge(&[primary(0.03), primary(0.001), primary(0.03)], 0.05);
        assert!(judged[1].rejected);
        assert!(
            !judged[0].rejected && !judged[2].rejected,
            "0.03 > 0.05/2 stops"
        );
    }

    #[test]
    fn the_deciding_metric_gets_the_level_first() {
        // Alone, each p = 0.03 would pass; beside four secondaries the primary gets 80%.
        let family = [
            primary(0.03),
            secondary(0.03),
            secondary(0.5),
            secondary(0.5),
            secondary(0.5),
        ];
        let judged = judge(&family, 0.05);
        assert!(judged[0].rejected, "0.03 <= 0.05 * 0.8");
        // Then the secondaries share what is left: 0.05 * 0.05 / 0.2 = 0.0125 each.
        assert!(!judged[1].rejected);
        assert!((judged[1].level - 0.0125).abs() < 1e-12, "{:?}", judged[1]);
    }

    #[test]
    fn no_data_is_never_a_verdict() {
        let judged = judge(&[primary(f64::NAN), primary(0.0001)], 0.05);
        assert!(!judged[0].rejected);
        assert!(judged[1].rejected);
    }
}
