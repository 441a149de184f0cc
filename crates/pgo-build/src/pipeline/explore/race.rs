//! explore's sequential measurement (racing): every variant is measured for a first look of
//! rounds beside `baseline` and `pgo`; after each look a variant whose verdict against `pgo`
//! is reached (faster, slower, or the same within the margin) stops, and the ones still
//! undecided (with `pgo` while its verdict against the baseline is not reached) go on to the
//! next look, with twice the rounds. So rounds go where the decision is, and clear losers
//! cost one look.
//!
//! Invariants: the looks are planned in advance and the level is split over them and over
//! the variants tested (Bonferroni), so an A/A race (identical variants) calls one faster
//! than `pgo` no more often than a single verdict would (checked by simulation below). A
//! variant that stops never comes back, so the rounds it ran are always the first ones, and
//! every comparison pairs rounds in which both variants ran.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::Result;

use super::builds::Clock;
use super::decide::speed;
use super::variants::{BASELINE, PGO};
use crate::config;
use crate::measure::counter::Counter;
use crate::measure::metric::{CompareRole, Decider, INSTRUCTION_ROUNDS, Metric, Rounds};
use crate::measure::stats::{self, PairedSummary, Verdict};
use crate::pipeline::context::Context;
use crate::pipeline::requests::CompareRequest;
use crate::pipeline::steps::compare::{Compared, Family, measure, summarize_candidates};
use crate::report::{ExploreSpeed, RunSample};

/// When to look: after `looks[i]` rounds in all, each look at `alpha`.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub looks: Vec<usize>,
    pub alpha: f64,
}

impl Plan {
    /// Looks after `first`, twice and four times as many rounds; the level split over the
    /// looks and over the comparisons made at each (each candidate against `pgo`, and `pgo`
    /// against the baseline).
    pub fn new(first: usize, candidates: usize) -> Plan {
        let looks = vec![first, 2 * first, 4 * first];
        let tests = looks.len() * (candidates + 1);
        Plan {
            alpha: stats::ALPHA / tests as f64,
            looks,
        }
    }

    pub fn describe(&self) -> String {
        format!(
            "looks after {} rounds, each verdict at a {:.2}% level (5% split over the looks and \
             variants)",
            self.looks
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            self.alpha * 100.0
        )
    }
}

/// Runs by holdout workload, round numbers counted from 1 within the batch.
pub type Runs = BTreeMap<String, Vec<RunSample>>;

/// Where a variant stands after the race.
#[derive(Debug, Clone)]
pub struct Standing {
    /// The rounds it ran (its first ones).
    pub rounds: usize,
    pub vs_baseline: ExploreSpeed,
    /// `None` for `pgo` itself.
    pub vs_pgo: Option<ExploreSpeed>,
}

impl Standing {
    /// Whether more rounds could still decide it: against `pgo`, or for `pgo` against the
    /// baseline.
    pub fn undecided(&self) -> bool {
        let speed = self.vs_pgo.as_ref().unwrap_or(&self.vs_baseline);
        matches!(speed.verdict, Verdict::Inconclusive | Verdict::TooFewRounds)
    }
}

#[derive(Debug)]
pub struct Outcome {
    /// Every variant but the baseline.
    pub standings: BTreeMap<String, Standing>,
    /// The rounds the references ran.
    pub rounds: usize,
    /// Why the race stopped before its last look with variants undecided (the budget).
    pub cut_short: Option<String>,
}

/// Runs a batch of rounds of the variants named, or says `None` when the budget cannot
/// afford it.
pub type Measure<'a> = dyn FnMut(&[String], usize) -> Result<Option<Runs>> + 'a;

/// One paired comparison of `candidate` against `reference` on one workload's runs over
/// their first `rounds` rounds, at a level.
pub type Judge<'a> = dyn Fn(&str, &[RunSample], &str, &str, usize, f64) -> PairedSummary + 'a;

/// Races `variants` (`baseline` and `pgo` first). `measure(variants, rounds)` runs a batch of
/// rounds of those variants, or says `None` when the budget cannot afford it; `looked(rounds,
/// standings)` hears where they stand after each look.
pub fn race(
    variants: &[String],
    plan: &Plan,
    margin: f64,
    measure: &mut Measure,
    judge: &Judge,
    looked: &mut dyn FnMut(usize, &BTreeMap<String, Standing>),
) -> Result<Outcome> {
    debug_assert!(variants[0] == BASELINE && variants[1] == PGO);
    let mut all: Runs = Runs::new();
    let mut open: Vec<String> = variants.to_vec();
    let mut rounds_of: BTreeMap<String, usize> = BTreeMap::new();
    let mut standings = BTreeMap::new();
    let mut done = 0;
    let mut cut_short = None;
    for (look, &target) in plan.looks.iter().enumerate() {
        let Some(batch) = measure(&open, target - done)? else {
            cut_short = Some(format!(
                "the budget could not afford look {} of {} ({target} rounds of {}), so {} \
                 stayed undecided",
                look + 1,
                plan.looks.len(),
                open.join(", "),
                open[2..]
                    .iter()
                    .chain(std::iter::once(&open[1]))
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            break;
        };
        for (workload, runs) in batch {
            all.entry(workload)
                .or_default()
                .extend(runs.into_iter().map(|mut run| {
                    run.round += done;
                    run
                }));
        }
        done = target;
        for name in &open {
            rounds_of.insert(name.clone(), done);
        }
        standings = variants[1..]
            .iter()
            .map(|name| {
                let rounds = rounds_of[name];
                let against = |reference: &str| {
                    let per_workload = all.iter().map(|(workload, runs)| {
                        let summary = judge(workload, runs, reference, name, rounds, plan.alpha);
                        (workload.clone(), summary)
                    });
                    speed(per_workload, margin)
                };
                let standing = Standing {
                    rounds,
                    vs_baseline: against(BASELINE),
                    vs_pgo: (name != PGO).then(|| against(PGO)),
                };
                (name.clone(), standing)
            })
            .collect();
        looked(done, &standings);
        let pgo_open = standings.get(PGO).is_some_and(|s: &Standing| s.undecided());
        open = variants[..2]
            .iter()
            .chain(variants[2..].iter().filter(|name| {
                open.contains(name) && standings.get(*name).is_some_and(Standing::undecided)
            }))
            .cloned()
            .collect();
        if open.len() == 2 && !pgo_open {
            break;
        }
    }
    Ok(Outcome {
        standings,
        rounds: done,
        cut_short,
    })
}

/// Races the variants (`baseline` and `pgo` first) on the holdout workloads: looks of
/// `first`, twice and four times as many rounds (one look for instruction counts, which
/// need no more), within the budget. Also returns the seconds a variant-round took.
pub(super) fn race_variants(
    cx: &Context,
    measured: &[&Compared],
    workloads: &[config::Workload],
    decider: &Decider,
    first: usize,
    clock: &Clock,
) -> Result<(Outcome, Option<f64>)> {
    let names: Vec<String> = measured.iter().map(|v| v.name.clone()).collect();
    let plan = match decider.measured() {
        Metric::Instructions => Plan {
            looks: vec![first],
            alpha: stats::ALPHA,
        },
        _ => Plan::new(first, names.len() - 2),
    };
    if plan.looks.len() > 1 {
        cx.printer.info(format!(
            "measuring {} variants in a race: {}; a variant stops once its verdict against \
                 pgo is reached",
            names.len(),
            plan.describe()
        ));
    }
    let by_name: BTreeMap<&str, &Compared> =
        measured.iter().map(|v| (v.name.as_str(), *v)).collect();
    let margin = cx.config.compare.margin();
    // Seconds per variant-round of the last batch: what the budget is checked against.
    let mut pace: Option<f64> = None;
    let mut look = 0;
    let mut measure = |open: &[String], rounds: usize| -> Result<Option<Runs>> {
        if let (Some(budget), Some(pace)) = (clock.budget, pace) {
            let needed = pace * (open.len() * rounds) as f64;
            if clock.started.elapsed().as_secs_f64() + needed > budget.as_secs_f64() {
                return Ok(None);
            }
        }
        look += 1;
        if look > 1 {
            cx.printer.info(format!(
                "look {look}: {rounds} more rounds of {}",
                open.join(", ")
            ));
        }
        let started = Instant::now();
        let variants: Vec<Compared> = open.iter().map(|n| by_name[n.as_str()].clone()).collect();
        let result = measure(
            cx,
            &variants,
            &holdout_args(workloads, decider, rounds, look as u64),
            Family::SplitByCaller,
        )?;
        pace = Some(started.elapsed().as_secs_f64() / (open.len() * rounds) as f64);
        Ok(Some(
            result
                .workloads
                .into_iter()
                .map(|c| (c.workload, c.runs))
                .collect(),
        ))
    };
    let counted = decider.measured() == Metric::Instructions;
    let judge = |workload: &str,
                 runs: &[RunSample],
                 reference: &str,
                 candidate: &str,
                 rounds: usize,
                 alpha: f64| {
        let specs = workloads
            .iter()
            .find(|w| w.name() == workload)
            .map(|w| w.metrics.clone())
            .unwrap_or_default();
        summarize_candidates(
            runs,
            reference,
            &[candidate],
            rounds,
            (alpha, margin),
            counted,
            &specs,
        )[candidate]
            .judged(decider)
            .clone()
    };
    let mut looked = |rounds: usize, standings: &BTreeMap<String, Standing>| {
        cx.printer.info(format!(
            "after {rounds} rounds: {}",
            standings
                .iter()
                .filter(|(_, s)| s.rounds == rounds)
                .map(|(name, s)| describe_standing(name, s))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    };
    let outcome = race(&names, &plan, margin, &mut measure, &judge, &mut looked)?;
    Ok((outcome, pace))
}

/// Decides by instruction counts (noise-free, through callgrind where perf cannot count)
/// what wall time could not decide in the race, when the budget allows: the undecided
/// variants with the references, one count and a repeat each. Their standings then say
/// they were decided by instructions; without a counter or budget they stay undecided.
pub(super) fn count_undecided(
    cx: &Context,
    by_name: &BTreeMap<&str, &Compared>,
    undecided: &[String],
    workloads: &[config::Workload],
    (raced, margin): (usize, f64),
    (clock, pace): (&Clock, Option<f64>),
    standings: &mut BTreeMap<String, Standing>,
) -> Result<()> {
    let counter = match Counter::detect(&cx.printer) {
        Ok(counter) => counter,
        Err(err) => {
            cx.printer.warn(format!(
                "wall time left {} undecided after {raced} rounds, and instructions cannot \
                     be counted here to decide instead: {err:#}",
                undecided.join(", ")
            ));
            return Ok(());
        }
    };
    let open: Vec<Compared> = [BASELINE, PGO]
        .into_iter()
        .chain(undecided.iter().map(String::as_str).filter(|n| *n != PGO))
        .map(|name| by_name[name].clone())
        .collect();
    if let (Some(budget), Some(pace)) = (clock.budget, pace) {
        // A round of every holdout workload per variant and count, and the warm-up, at
        // the race's pace, slowed by the counter (its timeout allows twice this).
        let needed = pace * f64::from(counter.slowdown()) / 2.0
            * (open.len() * (INSTRUCTION_ROUNDS + 1)) as f64;
        if clock.started.elapsed().as_secs_f64() + needed > budget.as_secs_f64() {
            cx.printer.warn(format!(
                "wall time left {} undecided after {raced} rounds, and counting their \
                     instructions ({}, about {}) would not finish within the budget",
                undecided.join(", "),
                counter.describe(),
                crate::util::printer::duration(std::time::Duration::from_secs_f64(needed))
            ));
            return Ok(());
        }
    }
    cx.printer.info(format!(
        "wall time left {} undecided after {raced} rounds: deciding by instruction counts",
        undecided.join(", "),
    ));
    let decider = Decider::Measured(Metric::Instructions);
    let result = measure(
        cx,
        &open,
        &holdout_args(workloads, &decider, INSTRUCTION_ROUNDS, 100),
        Family::SplitByCaller,
    )?;
    let why = format!("instructions (wall time undecided after {raced} rounds)");
    for name in undecided {
        let against = |reference: &str| {
            let per_workload = result.workloads.iter().map(|comparison| {
                let summary = summarize_candidates(
                    &comparison.runs,
                    reference,
                    &[name.as_str()],
                    INSTRUCTION_ROUNDS,
                    (stats::ALPHA, margin),
                    true,
                    &[],
                )[name.as_str()]
                .judged(&decider)
                .clone();
                (comparison.workload.clone(), same_within(summary, margin))
            });
            let mut speed = speed(per_workload, margin);
            speed.decided_by = Some(why.clone());
            speed
        };
        let standing = standings.get_mut(name).expect("raced");
        if name == PGO {
            standing.vs_baseline = against(BASELINE);
        } else {
            standing.vs_pgo = Some(against(PGO));
            standing.vs_baseline = against(BASELINE);
        }
    }
    Ok(())
}

/// "pgo+lto -3.1% vs pgo (faster, 0.950-0.990): decided": where a variant stands, against
/// `pgo`, or for `pgo` against the baseline.
fn describe_standing(name: &str, standing: &Standing) -> String {
    let (speed, against) = match &standing.vs_pgo {
        Some(speed) => (speed, PGO),
        None => (&standing.vs_baseline, BASELINE),
    };
    let intervals: Vec<String> = speed
        .workloads
        .values()
        .map(|s| format!("{:.3}-{:.3}", s.ci_low, s.ci_high))
        .collect();
    format!(
        "{name} {:+.1}% vs {against} ({}, {}): {}",
        (speed.ratio - 1.0) * 100.0,
        match speed.verdict {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::NoDifference => "the same",
            Verdict::Inconclusive => "unclear",
            Verdict::TooFewRounds => "too few rounds",
            Verdict::TooCoarse => "too coarse",
        },
        intervals.join(", "),
        if standing.undecided() {
            "goes on"
        } else {
            "decided"
        }
    )
}

/// The comparison of a batch of rounds on the holdout workloads.
fn holdout_args(
    workloads: &[config::Workload],
    decider: &Decider,
    rounds: usize,
    seed: u64,
) -> CompareRequest {
    CompareRequest {
        rounds: Some(Rounds::Fixed(rounds)),
        role: Some(CompareRole::Holdout),
        metric: Some(decider.clone()),
        seed,
        ..CompareRequest::of(
            Vec::new(),
            workloads.iter().map(|w| w.name().to_owned()).collect(),
        )
    }
}

/// A count difference inside the margin is no reason to change a build: "the same".
fn same_within(mut summary: PairedSummary, margin: f64) -> PairedSummary {
    if matches!(summary.verdict, Verdict::Faster | Verdict::Slower)
        && summary.ci_low >= 1.0 - margin
        && summary.ci_high <= 1.0 + margin
    {
        summary.verdict = Verdict::NoDifference;
    }
    summary
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::explore::decide::{Decision, recommend};
    use crate::pipeline::explore::variants::measured_record;
    use crate::report::ExploreVariantRecord;

    /// A tiny deterministic generator (xorshift), so the simulation needs no dependency.
    struct Noise(u64);

    impl Noise {
        fn uniform(&mut self) -> f64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 >> 11) as f64 / (1u64 << 53) as f64
        }

        /// A run's time around `mean`: log-normal noise of `spread`, and now and then a run
        /// slowed by another job on the machine (a busy CI runner).
        fn time(&mut self, mean: f64, spread: f64) -> f64 {
            let normal = (-2.0 * self.uniform().max(1e-12).ln()).sqrt()
                * (2.0 * std::f64::consts::PI * self.uniform()).cos();
            let busy = if self.uniform() < 0.1 {
                1.0 + self.uniform()
            } else {
                1.0
            };
            mean * (spread * normal).exp() * busy
        }
    }

    fn wall_judge(
        _: &str,
        runs: &[RunSample],
        reference: &str,
        candidate: &str,
        rounds: usize,
        alpha: f64,
    ) -> PairedSummary {
        let ratios: Vec<f64> = (1..=rounds)
            .map(|round| {
                let wall = |variant: &str| {
                    runs.iter()
                        .find(|r| r.round == round && r.variant == variant)
                        .map(|r| r.wall_secs)
                        .expect("both ran every round counted")
                };
                wall(candidate) / wall(reference)
            })
            .collect();
        stats::summarize_at(&ratios, alpha)
    }

    /// Simulated runs of variants with the given mean times.
    fn simulate(
        means: &BTreeMap<String, f64>,
        spread: f64,
        seed: u64,
    ) -> impl FnMut(&[String], usize) -> Result<Option<Runs>> {
        let mut noise = Noise(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let means = means.clone();
        move |variants: &[String], rounds: usize| {
            let runs = (1..=rounds)
                .flat_map(|round| variants.iter().map(move |v| (round, v)))
                .map(|(round, variant)| RunSample {
                    round,
                    variant: variant.clone(),
                    wall_secs: noise.time(means[variant], spread),
                    cpu_secs: 0.0,
                    instructions: None,
                    faults: None,
                    metrics: BTreeMap::new(),
                })
                .collect();
            Ok(Some(Runs::from([("holdout".to_owned(), runs)])))
        }
    }

    fn record(name: &str, standing: Option<&Standing>) -> ExploreVariantRecord {
        let mut record = measured_record(name);
        if let Some(standing) = standing {
            record.vs_baseline = Some(standing.vs_baseline.clone());
            record.vs_pgo = standing.vs_pgo.clone();
        }
        record
    }

    fn names(n: usize) -> Vec<String> {
        [BASELINE, PGO]
            .into_iter()
            .map(str::to_owned)
            .chain((0..n).map(|i| format!("variant{i}")))
            .collect()
    }

    #[test]
    fn an_a_a_race_recommends_nothing_new_in_at_least_95_percent_of_seeds() {
        // pgo 10% faster than the baseline, five variants exactly as fast as pgo, 5% noise.
        let variants = names(5);
        let means: BTreeMap<String, f64> = variants
            .iter()
            .map(|v| (v.clone(), if v == BASELINE { 1.0 } else { 0.9 }))
            .collect();
        let plan = Plan::new(10, 5);
        let seeds = 200;
        let mut new = 0;
        for seed in 0..seeds {
            let outcome = race(
                &variants,
                &plan,
                0.02,
                &mut simulate(&means, 0.05, seed),
                &wall_judge,
                &mut |_, _| {},
            )
            .unwrap();
            let records: Vec<ExploreVariantRecord> = variants
                .iter()
                .map(|v| record(v, outcome.standings.get(v)))
                .collect();
            if let Decision::Recommend(r) = recommend(&records, None, 0.02)
                && r.better_than_pgo
            {
                new += 1;
            }
        }
        assert!(
            new * 100 <= seeds * 5,
            "{new} of {seeds} A/A races recommended a variant over pgo"
        );
    }

    #[test]
    fn clear_losers_stop_after_the_first_look_and_close_ones_go_on() {
        let variants = names(2);
        let means = BTreeMap::from([
            (BASELINE.to_owned(), 1.0),
            (PGO.to_owned(), 0.9),
            ("variant0".to_owned(), 1.2),
            ("variant1".to_owned(), 0.89),
        ]);
        let outcome = race(
            &variants,
            &Plan::new(10, 2),
            0.02,
            &mut simulate(&means, 0.02, 7),
            &wall_judge,
            &mut |_, _| {},
        )
        .unwrap();
        let loser = &outcome.standings["variant0"];
        assert_eq!(loser.rounds, 10, "{loser:?}");
        assert_eq!(loser.vs_pgo.as_ref().unwrap().verdict, Verdict::Slower);
        assert!(outcome.standings["variant1"].rounds > 10);
        assert_eq!(outcome.standings[PGO].rounds, outcome.rounds);
        // pgo's 10% over the baseline was shown at the first look.
        assert_eq!(outcome.standings[PGO].vs_baseline.verdict, Verdict::Faster);
    }

    #[test]
    fn a_budget_that_cannot_afford_a_look_leaves_what_was_measured() {
        let variants = names(1);
        let means = BTreeMap::from([
            (BASELINE.to_owned(), 1.0),
            (PGO.to_owned(), 0.99),
            ("variant0".to_owned(), 0.99),
        ]);
        let mut inner = simulate(&means, 0.05, 3);
        let mut looks = 0;
        let outcome = race(
            &variants,
            &Plan::new(10, 1),
            0.02,
            &mut |v: &[String], rounds: usize| {
                looks += 1;
                if looks > 1 {
                    Ok(None)
                } else {
                    inner(v, rounds)
                }
            },
            &wall_judge,
            &mut |_, _| {},
        )
        .unwrap();
        assert_eq!(outcome.rounds, 10);
        let why = outcome.cut_short.expect("cut short");
        assert!(why.contains("look 2 of 3"), "{why}");
        assert!(outcome.standings[PGO].undecided());
    }
}
