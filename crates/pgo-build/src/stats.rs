//! Statistics for paired A/B rounds: per-pair ratios, their median, a seeded bootstrap
//! confidence interval for the median, wins, a sign test and the verdict.
//!
//! A verdict of "faster" or "slower" needs both the 95% interval to exclude 1 and the sign
//! test to reject "either is equally likely to win" at 5%: small samples make bootstrap
//! intervals too narrow, and the sign test keeps a handful of lucky rounds from deciding.

use serde::{Deserialize, Serialize};

pub const BOOTSTRAP_RESAMPLES: usize = 4000;
/// Below this many pairs no verdict other than "too few rounds" is given.
pub const MIN_PAIRS: usize = 6;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Faster,
    Slower,
    NoDetectableDifference,
    TooFewRounds,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::NoDetectableDifference => "no detectable difference",
            Verdict::TooFewRounds => "too few rounds",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PairedSummary {
    pub pairs: usize,
    /// Median of candidate/reference; below 1 means the candidate is faster.
    pub median_ratio: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    /// Pairs where the candidate was faster.
    pub wins: usize,
    /// Two-sided sign-test p-value of wins vs losses (ties dropped).
    pub sign_test_p: f64,
    pub verdict: Verdict,
    /// Set when the interval is too wide to see small effects, with the smallest it can see.
    pub resolution_note: Option<String>,
}

/// Summarises candidate/reference ratios of paired rounds.
pub fn summarize(ratios: &[f64], seed: u64) -> PairedSummary {
    let pairs = ratios.len();
    let median_ratio = median(ratios);
    let (ci_low, ci_high) = bootstrap_median_ci(ratios, seed);
    let wins = ratios.iter().filter(|&&r| r < 1.0).count();
    let losses = ratios.iter().filter(|&&r| r > 1.0).count();
    let sign_test_p = sign_test(wins, losses);
    let verdict = if pairs < MIN_PAIRS {
        Verdict::TooFewRounds
    } else if ci_high < 1.0 && sign_test_p < 0.05 {
        Verdict::Faster
    } else if ci_low > 1.0 && sign_test_p < 0.05 {
        Verdict::Slower
    } else {
        Verdict::NoDetectableDifference
    };
    let half_width = (ci_high - ci_low) / 2.0;
    let resolution_note = match verdict {
        Verdict::TooFewRounds => Some(format!(
            "{pairs} pairs; at least {MIN_PAIRS} are needed for a verdict"
        )),
        Verdict::NoDetectableDifference if half_width > 0.01 => Some(format!(
            "the 95% interval is ±{:.1}%: effects smaller than that cannot be seen with {pairs} \
             pairs; about {} pairs would resolve 1% (or compare --metric cpu, often less noisy)",
            half_width * 100.0,
            ((pairs as f64) * (half_width / 0.01).powi(2)).ceil() as usize
        )),
        _ => None,
    };
    PairedSummary {
        pairs,
        median_ratio,
        ci_low,
        ci_high,
        wins,
        sign_test_p,
        verdict,
        resolution_note,
    }
}

pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    }
}

pub fn geometric_mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    (values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64).exp()
}

/// Percentile bootstrap of the median: resample the pairs with replacement.
fn bootstrap_median_ci(values: &[f64], seed: u64) -> (f64, f64) {
    if values.len() < 2 {
        let only = values.first().copied().unwrap_or(f64::NAN);
        return (only, only);
    }
    let mut rng = SplitMix64(seed);
    let mut medians = Vec::with_capacity(BOOTSTRAP_RESAMPLES);
    let mut sample = vec![0.0; values.len()];
    for _ in 0..BOOTSTRAP_RESAMPLES {
        for slot in sample.iter_mut() {
            *slot = values[(rng.next() % values.len() as u64) as usize];
        }
        medians.push(median(&sample));
    }
    medians.sort_by(f64::total_cmp);
    let at = |q: f64| medians[((medians.len() - 1) as f64 * q).round() as usize];
    (at(0.025), at(0.975))
}

/// Exact two-sided binomial test of `wins` against `losses` with p = 1/2.
fn sign_test(wins: usize, losses: usize) -> f64 {
    let n = wins + losses;
    if n == 0 {
        return 1.0;
    }
    let k = wins.min(losses);
    let mut tail = 0.0;
    let mut coefficient = 1.0f64; // C(n, 0)
    for i in 0..=k {
        if i > 0 {
            coefficient = coefficient * (n - i + 1) as f64 / i as f64;
        }
        tail += coefficient;
    }
    (2.0 * tail / 2f64.powi(n as i32)).min(1.0)
}

/// A small seeded generator: the bootstrap must give the same interval for the same data.
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_wins_is_faster() {
        let ratios = [0.90, 0.92, 0.91, 0.93, 0.89, 0.90, 0.94, 0.91, 0.92, 0.90];
        let summary = summarize(&ratios, 1);
        assert_eq!(summary.wins, 10);
        assert_eq!(summary.verdict, Verdict::Faster);
        assert!((summary.median_ratio - 0.91).abs() < 1e-9);
        assert!(summary.ci_high < 1.0 && summary.ci_low > 0.85);
        assert!(summary.sign_test_p < 0.01);
    }

    #[test]
    fn all_losses_is_slower() {
        let ratios = [1.2, 1.1, 1.15, 1.3, 1.12, 1.18, 1.2, 1.25];
        let summary = summarize(&ratios, 1);
        assert_eq!(summary.wins, 0);
        assert_eq!(summary.verdict, Verdict::Slower);
    }

    #[test]
    fn ties_are_no_detectable_difference() {
        let summary = summarize(&[1.0; 10], 1);
        assert_eq!(summary.wins, 0);
        assert_eq!(summary.sign_test_p, 1.0);
        assert_eq!(summary.verdict, Verdict::NoDetectableDifference);
        assert!(
            summary.resolution_note.is_none(),
            "a zero-width interval resolves everything"
        );
    }

    #[test]
    fn one_outlier_does_not_flip_the_verdict() {
        let mut ratios = vec![0.95; 9];
        ratios.push(3.0);
        let summary = summarize(&ratios, 1);
        assert_eq!(summary.verdict, Verdict::Faster);
        assert!((summary.median_ratio - 0.95).abs() < 1e-9);
    }

    #[test]
    fn mixed_noise_is_no_detectable_difference_with_a_resolution_note() {
        let ratios = [0.97, 1.04, 0.99, 1.05, 0.96, 1.02, 1.03, 0.98];
        let summary = summarize(&ratios, 1);
        assert_eq!(summary.verdict, Verdict::NoDetectableDifference);
        assert!(summary.resolution_note.unwrap().contains("cannot be seen"));
    }

    #[test]
    fn few_pairs_give_no_verdict() {
        assert_eq!(
            summarize(&[0.5, 0.5, 0.5], 1).verdict,
            Verdict::TooFewRounds
        );
    }

    #[test]
    fn bootstrap_is_reproducible_for_a_seed() {
        let ratios = [0.97, 1.04, 0.99, 1.05, 0.96, 1.02, 1.03, 0.98];
        let a = summarize(&ratios, 7);
        let b = summarize(&ratios, 7);
        assert_eq!((a.ci_low, a.ci_high), (b.ci_low, b.ci_high));
    }

    #[test]
    fn sign_test_matches_the_binomial_distribution() {
        // 8 of 8: 2 * (1/2)^8
        assert!((sign_test(8, 0) - 2.0 / 256.0).abs() < 1e-12);
        // 9 of 10: 2 * (1 + 10) / 1024
        assert!((sign_test(1, 9) - 22.0 / 1024.0).abs() < 1e-12);
        assert_eq!(sign_test(5, 5), 1.0);
    }

    #[test]
    fn medians_and_geometric_means() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!((geometric_mean(&[0.5, 2.0]) - 1.0).abs() < 1e-12);
    }
}
