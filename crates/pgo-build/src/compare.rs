//! `pgo-build compare`: is a variant really faster, on work it was not trained on?
//!
//! For each workload: one warm-up round that is not counted, then paired rounds in which every
//! variant runs once, in an order that alternates between rounds (ABBA), so slow drifts of a
//! shared, noisy machine hit both variants alike. Each run is the whole workload command,
//! timed from outside: wall-clock time, and the user+system CPU time of its process tree.
//! Holdout and train workloads are summarised separately; only holdout ones can fail
//! `--fail-if-slower`.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Result, bail};
use comfy_table::{Cell, CellAlignment, Table, presets::UTF8_FULL_CONDENSED};
use serde::{Deserialize, Serialize};

use crate::cargo_build::StageManifest;
use crate::cli::{CompareArgs, Metric};
use crate::config::{Role, Workload};
use crate::layout::Stage;
use crate::stages::Session;
use crate::stats::{self, PairedSummary, Verdict};
use crate::training;

pub const DEFAULT_ROUNDS: usize = 10;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CompareResult {
    pub metric: Metric,
    pub rounds: usize,
    pub seed: u64,
    pub reference: String,
    pub candidates: Vec<String>,
    pub workloads: Vec<WorkloadComparison>,
    /// Role → candidate → geometric mean of the per-workload median ratios (of `metric`).
    pub geometric_mean: BTreeMap<String, BTreeMap<String, f64>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkloadComparison {
    pub workload: String,
    pub role: String,
    /// Every counted run, in the order they ran.
    pub runs: Vec<RunSample>,
    /// Candidate → summaries of candidate/reference ratios.
    pub candidates: BTreeMap<String, CandidateSummary>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunSample {
    pub round: usize,
    pub variant: String,
    pub wall_secs: f64,
    pub cpu_secs: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CandidateSummary {
    pub wall: PairedSummary,
    pub cpu: PairedSummary,
    pub reference_median_wall_secs: f64,
    pub candidate_median_wall_secs: f64,
}

impl WorkloadComparison {
    /// Candidates in the order they were given (the map is sorted by name).
    pub fn in_order<'a>(
        &'a self,
        candidates: &'a [String],
    ) -> impl Iterator<Item = (&'a String, &'a CandidateSummary)> {
        candidates
            .iter()
            .filter_map(|name| Some((name, self.candidates.get(name)?)))
    }
}

impl CandidateSummary {
    pub fn by(&self, metric: Metric) -> &PairedSummary {
        match metric {
            Metric::Wall => &self.wall,
            Metric::Cpu => &self.cpu,
        }
    }
}

impl Session {
    /// Runs the comparison, prints its table and records it in the report.
    pub fn compare(&mut self, args: &CompareArgs) -> Result<CompareResult> {
        let variants = self.compare_variants(&args.variants)?;
        let workloads = self.compare_workloads(&args.workloads)?;
        let rounds = args
            .rounds
            .or(self.config.compare.rounds)
            .unwrap_or(DEFAULT_ROUNDS);
        if rounds == 0 {
            bail!("--rounds must be at least 1");
        }
        let names: Vec<&str> = variants.iter().map(|(stage, _)| stage.name()).collect();
        self.printer.info(format!(
            "comparing {} over {} workloads: 1 warm-up + {rounds} rounds each, order alternating (ABBA), bootstrap seed {}",
            names.join(" vs "),
            workloads.len(),
            args.seed
        ));
        let mut comparisons = Vec::new();
        for workload in &workloads {
            comparisons.push(self.compare_workload(workload, &variants, rounds, args.seed)?);
        }
        let reference = names[0].to_owned();
        let candidates: Vec<String> = names[1..].iter().map(|n| n.to_string()).collect();
        let mut geometric_mean: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
        for role in ["holdout", "train"] {
            for candidate in &candidates {
                let medians: Vec<f64> = comparisons
                    .iter()
                    .filter(|c| c.role == role)
                    .map(|c| c.candidates[candidate].by(args.metric).median_ratio)
                    .collect();
                if !medians.is_empty() {
                    geometric_mean
                        .entry(role.to_owned())
                        .or_default()
                        .insert(candidate.clone(), stats::geometric_mean(&medians));
                }
            }
        }
        let result = CompareResult {
            metric: args.metric,
            rounds,
            seed: args.seed,
            reference,
            candidates,
            workloads: comparisons,
            geometric_mean,
        };
        self.printer.table(compare_table(&result));
        for comparison in &result.workloads {
            for (candidate, summary) in &comparison.candidates {
                if let Some(note) = &summary.by(args.metric).resolution_note {
                    self.printer
                        .info(format!("{} ({candidate}): {note}", comparison.workload));
                }
            }
        }
        self.report.compare = Some(result.clone());
        if args.fail_if_slower {
            let slower: Vec<String> = result
                .workloads
                .iter()
                .filter(|c| c.role == "holdout")
                .flat_map(|c| {
                    c.candidates
                        .iter()
                        .filter(|(_, s)| s.by(args.metric).verdict == Verdict::Slower)
                        .map(move |(candidate, s)| {
                            format!(
                                "{} is {:.1}% slower on `{}`",
                                candidate,
                                (s.by(args.metric).median_ratio - 1.0) * 100.0,
                                c.workload
                            )
                        })
                })
                .collect();
            if !slower.is_empty() {
                bail!("--fail-if-slower: {}", slower.join("; "));
            }
        }
        Ok(result)
    }

    fn compare_variants(&self, names: &[String]) -> Result<Vec<(Stage, StageManifest)>> {
        let stages: Vec<Stage> = if names.is_empty() {
            let newest = Stage::VARIANTS[1..]
                .iter()
                .rev()
                .find(|stage| self.layout.stage_manifest(**stage).is_file())
                .copied()
                .unwrap_or(Stage::Optimized);
            vec![Stage::Baseline, newest]
        } else {
            names
                .iter()
                .map(|name| {
                    Stage::from_variant(name).ok_or_else(|| {
                        let known: Vec<&str> = Stage::VARIANTS.iter().map(|s| s.name()).collect();
                        anyhow::anyhow!("unknown variant `{name}`; variants: {}", known.join(", "))
                    })
                })
                .collect::<Result<_>>()?
        };
        if stages.len() < 2 {
            bail!(
                "compare needs at least two variants, e.g. `pgo-build compare baseline optimized`"
            );
        }
        stages
            .into_iter()
            .map(|stage| {
                let hint = match stage {
                    Stage::Baseline => "run `pgo-build build` first",
                    Stage::Bolt => {
                        "run `pgo-build bolt` (or `run` with [bolt] enabled = true) first"
                    }
                    _ => "run `pgo-build run` (or instrument, train, optimize) first",
                };
                Ok((stage, StageManifest::load(&self.layout, stage, hint)?))
            })
            .collect()
    }

    fn compare_workloads(&self, names: &[String]) -> Result<Vec<Workload>> {
        if !names.is_empty() {
            return names
                .iter()
                .map(|name| {
                    self.config.workload(name).cloned().ok_or_else(|| {
                        anyhow::anyhow!(
                            "no workload named `{name}` in {}",
                            self.config.display_path()
                        )
                    })
                })
                .collect();
        }
        let workloads: Vec<Workload> = self
            .config
            .workloads_with_role(Role::Holdout)
            .chain(self.config.workloads_with_role(Role::Train))
            .cloned()
            .collect();
        if workloads.is_empty() {
            bail!(
                "there are no workloads to compare on: add a [[workload]] with role = \"holdout\" \
                 (work training never sees) to {}",
                self.config.display_path()
            );
        }
        Ok(workloads)
    }

    fn compare_workload(
        &self,
        workload: &Workload,
        variants: &[(Stage, StageManifest)],
        rounds: usize,
        seed: u64,
    ) -> Result<WorkloadComparison> {
        let mut runs = Vec::new();
        // Round 0 is the warm-up (page cache, CPU frequency); it is not counted.
        for round in 0..=rounds {
            let mut order: Vec<&(Stage, StageManifest)> = variants.iter().collect();
            if round % 2 == 1 {
                order.reverse();
            }
            for (stage, manifest) in order {
                let (wall, cpu) = self.time_workload(workload, *stage, manifest)?;
                self.printer.detail(format!(
                    "{} round {round}{} {}: {:.3}s wall, {:.3}s cpu",
                    workload.name(),
                    if round == 0 { " (warm-up)" } else { "" },
                    stage.name(),
                    wall.as_secs_f64(),
                    cpu.as_secs_f64()
                ));
                if round > 0 {
                    runs.push(RunSample {
                        round,
                        variant: stage.name().to_owned(),
                        wall_secs: wall.as_secs_f64(),
                        cpu_secs: cpu.as_secs_f64(),
                    });
                }
            }
        }
        let reference = variants[0].0.name();
        let mut candidates = BTreeMap::new();
        for (stage, _) in &variants[1..] {
            let candidate = stage.name();
            let ratios = |field: fn(&RunSample) -> f64| -> Vec<f64> {
                (1..=rounds)
                    .map(|round| {
                        let value = |variant: &str| {
                            runs.iter()
                                .find(|r| r.round == round && r.variant == variant)
                                .map(field)
                                .unwrap_or(f64::NAN)
                        };
                        value(candidate) / value(reference)
                    })
                    .collect()
            };
            let walls = |variant: &str| -> Vec<f64> {
                runs.iter()
                    .filter(|r| r.variant == variant)
                    .map(|r| r.wall_secs)
                    .collect()
            };
            candidates.insert(
                candidate.to_owned(),
                CandidateSummary {
                    wall: stats::summarize(&ratios(|r| r.wall_secs), seed),
                    cpu: stats::summarize(&ratios(|r| r.cpu_secs), seed),
                    reference_median_wall_secs: stats::median(&walls(reference)),
                    candidate_median_wall_secs: stats::median(&walls(candidate)),
                },
            );
        }
        let role = match workload.role {
            Role::Train => "train",
            Role::Holdout => "holdout",
        };
        self.printer
            .info(format!("compared on {} ({role})", workload.name()));
        Ok(WorkloadComparison {
            workload: workload.name().to_owned(),
            role: role.to_owned(),
            runs,
            candidates,
        })
    }

    /// One timed run of a workload against a variant's binaries; a failure is an error.
    fn time_workload(
        &self,
        workload: &Workload,
        stage: Stage,
        manifest: &StageManifest,
    ) -> Result<(Duration, Duration)> {
        let bin_dir = self.layout.bin_dir(stage);
        let target = training::Target {
            stage,
            bin_dir: &bin_dir,
            bin_names: manifest.binaries.iter().map(|b| b.name.as_str()).collect(),
            workspace_root: &self.workspace.root,
            extra_env: Vec::new(),
            log_path: self.layout.logs_dir().join(format!(
                "compare-{}-{}.log",
                workload.name(),
                stage.name()
            )),
        };
        let outcome = target.run(workload, &self.printer)?;
        if !outcome.stopped.is_empty() {
            self.printer.warn(format!(
                "workload `{}` against the {} binaries: pgo-build had to stop {}",
                workload.name(),
                stage.name(),
                training::describe_stopped(&outcome.stopped)
            ));
        }
        if !outcome.success && !workload.allow_failure {
            bail!(
                "workload `{}` {} against the {} binaries, so its time means nothing. Its output ends with:\n{}\nFull log: {}",
                workload.name(),
                outcome.status,
                stage.name(),
                training::log_tail(&outcome.log_path, 20),
                outcome.log_path.display()
            );
        }
        Ok((outcome.duration, outcome.cpu))
    }
}

fn percent(ratio: f64) -> String {
    format!("{:+.1}%", (ratio - 1.0) * 100.0)
}

pub fn compare_table(result: &CompareResult) -> String {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED).set_header([
        "Workload",
        "Role",
        "Variant",
        "Median wall",
        "Wall change (95% CI)",
        "CPU change (95% CI)",
        "Wins",
        "Verdict",
    ]);
    let right = |text: String| Cell::new(text).set_alignment(CellAlignment::Right);
    for comparison in &result.workloads {
        for (candidate, summary) in comparison.in_order(&result.candidates) {
            let chosen = summary.by(result.metric);
            table.add_row([
                Cell::new(&comparison.workload),
                Cell::new(&comparison.role),
                Cell::new(format!("{candidate} vs {}", result.reference)),
                right(format!(
                    "{:.3}s → {:.3}s",
                    summary.reference_median_wall_secs, summary.candidate_median_wall_secs
                )),
                right(format!(
                    "{} ({} … {})",
                    percent(summary.wall.median_ratio),
                    percent(summary.wall.ci_low),
                    percent(summary.wall.ci_high)
                )),
                right(format!(
                    "{} ({} … {})",
                    percent(summary.cpu.median_ratio),
                    percent(summary.cpu.ci_low),
                    percent(summary.cpu.ci_high)
                )),
                right(format!("{}/{}", chosen.wins, chosen.pairs)),
                Cell::new(chosen.verdict.label()),
            ]);
        }
    }
    let mut text = table.to_string();
    for (role, per_candidate) in &result.geometric_mean {
        for (candidate, mean) in per_candidate {
            text.push_str(&format!(
                "\n{role}: {candidate} vs {}: geometric mean of median {} ratios {} ({})",
                result.reference,
                match result.metric {
                    Metric::Wall => "wall",
                    Metric::Cpu => "CPU",
                },
                format_args!("{mean:.3}"),
                percent(*mean)
            ));
        }
    }
    text
}
