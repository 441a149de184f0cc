//! Simulated comparisons on a shared machine under drifting load (tests only): how often the
//! verdicts of identical binaries claim a difference (calibration), and how often a real effect
//! is found in the same comparisons (power), with fixed rounds and with the looks of
//! `--rounds auto`, through the same summaries, stopping rule and family as `compare`.

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::previous::{PREVIOUS, against_previous};
    use super::super::rounds::{deciding_level, look_settles, round_order};
    use super::super::summary::{judge_family, summarize_candidates, visit_family};
    use crate::measure::metric::{Decider, Metric};
    use crate::measure::reported_metrics::MetricSpec;
    use crate::measure::stats::{self, Verdict};
    use crate::report::{CompareResult, WorkloadComparison};

    /// A shared machine under drifting load: each run's figures are its work times the load when
    /// it ran (a slow wave of random period, two rounds included, a random walk, and bursts of
    /// another job) times noise.
    struct Machine {
        rng: stats::SplitMix64,
        amplitude: f64,
        period: f64,
        phase: f64,
        walk: f64,
        time: f64,
    }

    impl Machine {
        fn new(rng: &mut stats::SplitMix64) -> Machine {
            let mut uniform = || rng.next() as f64 / u64::MAX as f64;
            Machine {
                amplitude: 0.4 * uniform(),
                period: 2.0 + 10.0 * uniform(),
                phase: std::f64::consts::TAU * uniform(),
                walk: 0.0,
                time: 0.0,
                rng: stats::SplitMix64(rng.next()),
            }
        }

        fn uniform(&mut self) -> f64 {
            self.rng.next() as f64 / u64::MAX as f64
        }

        fn normal(&mut self) -> f64 {
            let (u, v) = (self.uniform().max(1e-12), self.uniform());
            (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        }

        /// The load at the next run's time, which then advances.
        fn load(&mut self) -> f64 {
            self.walk += 0.02 * self.normal();
            let wave = self.amplitude
                * (std::f64::consts::TAU * self.time / self.period + self.phase).sin();
            let burst = if self.uniform() < 0.1 {
                1.2 + 0.8 * self.uniform()
            } else {
                1.0
            };
            self.time += 1.0;
            (1.0 + wave + self.walk).max(0.3) * burst
        }

        /// One run of a variant that does `work` times the baseline's work.
        fn run(&mut self, round: usize, variant: &str, work: f64) -> crate::report::RunSample {
            let load = self.load() * work;
            let mut noise = |sigma: f64| (sigma * self.normal()).exp();
            crate::report::RunSample {
                round,
                variant: variant.to_owned(),
                wall_secs: 0.5 * load * noise(0.03),
                cpu_secs: 0.4 * work * (1.0 + 0.3 * (load / work - 1.0)) * noise(0.03),
                instructions: None,
                faults: Some((5000.0 * noise(0.01)) as u64),
                metrics: [
                    ("rps".to_owned(), 20_000.0 / load * noise(0.04)),
                    ("latency.p99".to_owned(), 3.0 * load * noise(0.08)),
                ]
                .into(),
            }
        }
    }

    const VARIANTS: [&str; 3] = ["baseline", "optimized", PREVIOUS];

    /// One simulated command: baseline, optimized and the last release (byte-identical to
    /// optimized, as a release job's `--against` of an unchanged program is).
    struct Simulation {
        workloads: usize,
        /// The looks: one for fixed rounds, [`stats::AUTO_LOOKS`] for `--rounds auto`.
        looks: Vec<usize>,
        /// Optimized's (and the last release's) work against the baseline's: 1.0 makes all three
        /// identical.
        work: f64,
        /// Each round's order (variant indices), by workload and round.
        order: fn(&str, usize) -> Vec<usize>,
    }

    fn metrics() -> Vec<MetricSpec> {
        [
            "name = \"rps\"\ndirection = \"higher\"\nunit = \"req/s\"",
            "name = \"latency.p99\"\ndirection = \"lower\"\nunit = \"ms\"",
        ]
        .iter()
        .map(|text| toml::from_str(text).unwrap())
        .collect()
    }

    impl Simulation {
        /// The command's result, judged as a family (or one by one when `family` is false), with
        /// each workload's rounds stopped where `compare` would stop them.
        fn compare(&self, rng: &mut stats::SplitMix64, family: bool) -> CompareResult {
            let alpha = stats::ALPHA / self.looks.len() as f64;
            let level = deciding_level(alpha, self.workloads, VARIANTS.len() - 1);
            let metrics = metrics();
            let judged = [VARIANTS[1]];
            let work = [1.0, self.work, self.work];
            let mut comparisons = Vec::new();
            for w in 0..self.workloads {
                let name = format!("w{w}");
                let mut machine = Machine::new(rng);
                let (mut runs, mut rounds, mut candidates) = (Vec::new(), 0, BTreeMap::new());
                for &look in &self.looks {
                    while rounds < look {
                        rounds += 1;
                        for i in (self.order)(&name, rounds) {
                            runs.push(machine.run(rounds, VARIANTS[i], work[i]));
                        }
                    }
                    candidates = summarize_candidates(
                        &runs,
                        VARIANTS[0],
                        &judged,
                        rounds,
                        (alpha, 0.02),
                        false,
                        &metrics,
                    );
                    let judged: Vec<_> = candidates.values().cloned().collect();
                    if look_settles(&judged, &Decider::Measured(Metric::Wall), level) {
                        break;
                    }
                }
                comparisons.push(WorkloadComparison {
                    workload: name,
                    role: crate::config::Role::Holdout,
                    runs,
                    candidates,
                    benchmarks: Vec::new(),
                    binaries: None,
                    budget_ran_out: false,
                    code: Default::default(),
                });
            }
            let mut result = CompareResult {
                metric: Metric::Wall,
                counter: None,
                rounds: self.looks[self.looks.len() - 1],
                emulated: None,
                rounds_plan: None,
                seed: 1,
                reference: VARIANTS[0].to_owned(),
                candidates: vec![VARIANTS[1].to_owned()],
                workloads: comparisons,
                geometric_mean: BTreeMap::new(),
                decided_by: None,
                previous: Vec::new(),
                family: None,
                c_compilers_differ: None,
                between: Vec::new(),
                margin: 0.02,
                not_counted: None,
                builds: Default::default(),
            };
            result.previous = against_previous(&result, (alpha, 0.02));
            if family {
                judge_family(&mut result, alpha);
            }
            result
        }
    }

    /// What many simulated commands concluded.
    #[derive(Debug, Default)]
    struct Tally {
        commands: usize,
        /// Commands in which a verdict between identical binaries claimed a difference.
        false_alarms: usize,
        /// Deciding verdicts of optimized against the baseline, and how many said "faster".
        deciding: usize,
        faster: usize,
        /// Workloads settled at the first look.
        first_look: usize,
    }

    impl Tally {
        fn add(&mut self, result: &CompareResult, identical: bool) {
            self.commands += 1;
            let decider = result.decider();
            let mut claimed = false;
            if identical {
                visit_family(result, &decider, &mut |summary, _| {
                    claimed |= summary.claims_a_difference();
                });
            } else {
                // Only optimized against the last release is A/A.
                claimed = result
                    .previous
                    .iter()
                    .any(|p| p.summary.claims_a_difference());
            }
            self.false_alarms += usize::from(claimed);
            for workload in &result.workloads {
                let deciding = workload.candidates[VARIANTS[1]].judged(&decider);
                self.deciding += 1;
                self.faster += usize::from(deciding.verdict == Verdict::Faster);
                self.first_look += usize::from(workload.runs.iter().all(|r| r.round <= 10));
            }
        }

        fn merge(mut self, other: Tally) -> Tally {
            self.commands += other.commands;
            self.false_alarms += other.false_alarms;
            self.deciding += other.deciding;
            self.faster += other.faster;
            self.first_look += other.first_look;
            self
        }

        fn rate(&self) -> f64 {
            self.false_alarms as f64 / self.commands as f64
        }
    }

    /// `trials` commands of `simulation`, on every core.
    fn tally(simulation: &Simulation, trials: usize, seed: u64, family: bool) -> Tally {
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(8);
        let per_thread = trials.div_ceil(threads);
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|thread| {
                    scope.spawn(move || {
                        let mut rng = stats::SplitMix64(seed + thread as u64);
                        let mut tally = Tally::default();
                        for _ in 0..per_thread {
                            let result = simulation.compare(&mut rng, family);
                            tally.add(&result, simulation.work == 1.0);
                        }
                        tally
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap())
                .fold(Tally::default(), Tally::merge)
        })
    }

    fn seeded_order(workload: &str, round: usize) -> Vec<usize> {
        round_order(1, workload, round, VARIANTS.len())
    }

    #[test]
    fn a_and_a_comparisons_under_drifting_load_rarely_claim_any_difference() {
        // 3 workloads x (5 figures + 1 against the last release): 18 verdicts a command, under a
        // load that drifts, cycles and bursts. 1,000 commands.
        let fixed = Simulation {
            workloads: 3,
            looks: vec![10],
            work: 1.0,
            order: seeded_order,
        };
        let family = tally(&fixed, 1000, 2026, true).rate();
        assert!(
            family <= 0.05,
            "{family} of A/A comparisons claimed a difference"
        );
        // The same test fails with the rule before: verdicts judged one by one, the order
        // alternating between rounds.
        let alternating = Simulation {
            order: |_, round| {
                if round % 2 == 1 {
                    vec![2, 1, 0]
                } else {
                    vec![0, 1, 2]
                }
            },
            ..fixed
        };
        let one_by_one = tally(&alternating, 200, 7, false).rate();
        assert!(one_by_one > 0.05, "one by one: {one_by_one}");
        eprintln!("A/A: any false verdict in {family:.3} (family), {one_by_one:.3} (one by one)");
    }

    #[test]
    fn auto_rounds_hold_the_level_across_their_looks_and_find_more_than_ten_fixed_rounds() {
        // `--rounds auto`: looks after 10, 20 and 40 rounds, stopped where `compare` stops. Equal
        // binaries rarely settle early (their interval must come within the target first), so
        // most commands make every look: the family's level must hold across them.
        let identical = Simulation {
            workloads: 3,
            looks: stats::AUTO_LOOKS.to_vec(),
            work: 1.0,
            order: seeded_order,
        };
        let aa = tally(&identical, 200, 11, true);
        assert!(
            aa.rate() <= 0.05,
            "{} of {} A/A commands claimed a difference",
            aa.false_alarms,
            aa.commands
        );
        // Power in the same commands: optimized does 20% less work than the baseline (the
        // example's effect is larger), and the last release is optimized again (A/A). The load
        // here is harsher than a shared runner's (a wave that can halve a run's speed between two
        // runs of one round): found less often than on a real machine, but more often than 10
        // fixed rounds find it, at the same level.
        let effect = Simulation {
            work: 0.8,
            ..identical
        };
        let found = tally(&effect, 60, 13, true);
        let fixed = tally(
            &Simulation {
                looks: vec![stats::AUTO_LOOKS[0]],
                ..effect
            },
            60,
            13,
            true,
        );
        eprintln!(
            "auto rounds: A/A {}/{} commands claimed a difference; a 20% effect: {}/{} deciding \
             verdicts faster ({} with 10 fixed rounds), {}/{} settled at 10 rounds, {}/{} \
             commands with a false verdict against the identical last release",
            aa.false_alarms,
            aa.commands,
            found.faster,
            found.deciding,
            fixed.faster,
            found.first_look,
            found.deciding,
            found.false_alarms,
            found.commands
        );
        assert!(
            found.rate() <= 0.05,
            "optimized against its identical last release: {} false alarms in {} commands",
            found.false_alarms,
            found.commands
        );
        assert!(
            found.faster as f64 >= 0.7 * found.deciding as f64 && found.faster > fixed.faster,
            "a 20% effect found in only {} of {} deciding verdicts ({} with 10 fixed rounds)",
            found.faster,
            found.deciding,
            fixed.faster
        );
    }
}
