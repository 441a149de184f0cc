//! `pgo-build explore`: build configurations ("variants": fat LTO, one codegen unit, machine
//! function splitting, BOLT, the user's own) built and measured side by side. For each: its
//! speed on the holdout workloads against the baseline and against plain PGO, its build time
//! and peak memory, its size; then the Pareto fronts and a recommendation, which `--apply`
//! writes to `pgo-build.toml`.
//!
//! Each set of build settings is a build of its own: a [`Layout`] under
//! `explore/builds/<key>/`, built by a [`Session`] with those settings through the same cached
//! stages as `run`. So a second `explore` rebuilds nothing that did not change, and the
//! settings of the pipeline itself are built in `target/pgo-build/` (a `run` before `explore`
//! is reused). BOLT variants link with relocations, a build of their own, optimized with the
//! profile of the variant with the same settings without BOLT (as a committed profile), so
//! training is not repeated; so are variants whose extra flags act only with a profile
//! (`pgo+split`). Measurements are cached (`explore/measurements.json`) by the
//! builds and workloads they measured: a second run measures only what changed or is missing.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::Session;
use super::compare::{Compared, summarize_candidates};
use crate::cargo_build::{StageManifest, write_atomically};
use crate::cli::{CompareArgs, CompareRole, ExploreArgs, Metric, PipelineStage, Rounds, RunArgs};
use crate::config::{self, BuildVariant, Role};
use crate::interrupt;
use crate::layout::{Layout, Stage};
use crate::report::tables::explore_table;
use crate::report::{
    ExploreRecommendation, ExploreResult, ExploreSpeed, ExploreStageCost, ExploreVariantRecord,
};
use crate::state::Fingerprint;
use crate::stats::{self, PairedSummary, Verdict};

/// Machine function splitting: the cold blocks of hot functions move out of the hot code, by
/// the profile (rustc 1.95 passes it to LLVM; whether it helps is what explore measures).
pub const SPLIT_FLAG: &str = "-Cllvm-args=-enable-split-machine-functions";

/// Flags that act only where there is a profile, so a build with them trains exactly as one
/// without: instrumentation is added before codegen, and LLVM's machine function splitter
/// returns early for functions without profile data. A variant that adds only these is
/// optimized with the profile trained without them (one training fewer).
const PROFILE_USE_ONLY: [&str; 1] = [SPLIT_FLAG];

/// The settings a variant trains with: its own, less [`PROFILE_USE_ONLY`] flags.
fn training_settings(settings: &BuildVariant) -> BuildVariant {
    BuildVariant {
        rustflags: settings
            .rustflags
            .iter()
            .filter(|flag| !PROFILE_USE_ONLY.contains(&flag.as_str()))
            .cloned()
            .collect(),
        ..settings.clone()
    }
}

/// The two variants every exploration measures: the others are judged against them.
const BASELINE: &str = "baseline";
const PGO: &str = "pgo";

/// A build configuration to measure.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    pub name: String,
    /// What it adds to the workspace's own settings.
    pub build: BuildVariant,
    /// Built with the profile of its training.
    pub pgo: bool,
    /// Post-link optimized with BOLT.
    pub bolt: bool,
}

/// The built-in variants, in the order they are built and listed.
pub fn builtin_variants() -> Vec<Variant> {
    let lto = || ("lto", toml::Value::String("fat".to_owned()));
    let cgu1 = || ("codegen-units", toml::Value::Integer(1));
    let variant =
        |name: &str, overrides: Vec<(&str, toml::Value)>, flags: &[&str], pgo, bolt| Variant {
            name: name.to_owned(),
            build: BuildVariant {
                profile_overrides: overrides
                    .into_iter()
                    .map(|(key, value)| (key.to_owned(), value))
                    .collect(),
                rustflags: flags.iter().map(|f| f.to_string()).collect(),
            },
            pgo,
            bolt,
        };
    vec![
        variant(BASELINE, vec![], &[], false, false),
        variant(PGO, vec![], &[], true, false),
        variant("pgo+lto", vec![lto()], &[], true, false),
        variant("pgo+cgu1", vec![cgu1()], &[], true, false),
        variant("pgo+lto+cgu1", vec![lto(), cgu1()], &[], true, false),
        variant("pgo+split", vec![], &[SPLIT_FLAG], true, false),
        variant("pgo+bolt", vec![], &[], true, true),
        variant("pgo+lto+cgu1+bolt", vec![lto(), cgu1()], &[], true, true),
    ]
}

/// Every variant known: the built-in ones, then `[[explore.variant]]`.
fn known_variants(config: &config::Config) -> Result<Vec<Variant>> {
    let mut variants = builtin_variants();
    for own in &config.explore.variant {
        let name = own.name.get_ref();
        if variants.iter().any(|v| &v.name == name) {
            bail!(
                "[[explore.variant]] {name:?} in {} has the name of a built-in variant; built-in: \
                 {}. Rename it.",
                config.display_path(),
                builtin_variants()
                    .iter()
                    .map(|v| v.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        variants.push(Variant {
            name: name.clone(),
            build: BuildVariant {
                profile_overrides: own.profile_overrides.clone(),
                rustflags: own.rustflags.clone(),
            },
            pgo: own.pgo,
            bolt: own.bolt,
        });
    }
    Ok(variants)
}

/// The variants `--variants` names (all known ones when it names none), with `baseline` and
/// `pgo` always first: they are the references.
pub fn select_variants(config: &config::Config, names: &[String]) -> Result<Vec<Variant>> {
    let known = known_variants(config)?;
    for name in names {
        if !known.iter().any(|v| &v.name == name) {
            bail!(
                "unknown variant `{name}`; variants: {} (add your own with [[explore.variant]] \
                 in {})",
                known
                    .iter()
                    .map(|v| v.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                config.display_path()
            );
        }
    }
    Ok(known
        .into_iter()
        .filter(|v| {
            names.is_empty() || v.name == BASELINE || v.name == PGO || names.contains(&v.name)
        })
        .collect())
}

/// Which build a set of settings is made in.
#[derive(Debug, Clone, PartialEq)]
enum BuildKind {
    /// Baseline, instrumented and optimized stages.
    Plain,
    /// Optimized with the profile of a plain build whose settings train alike (see
    /// [`PROFILE_USE_ONLY`]).
    Profiled,
    /// Linked with relocations and post-processed by BOLT: of the optimized binaries (built
    /// from the plain build's profile) or, without PGO, of the baseline ones.
    Bolt { pgo: bool },
}

/// One of explore's builds.
struct Build<'a> {
    settings: &'a BuildVariant,
    kind: BuildKind,
}

/// A variant once built: what to measure, and what building it cost.
struct Built {
    compared: Compared,
    costs: Vec<ExploreStageCost>,
}

/// The clock of `--budget`.
struct Clock {
    started: Instant,
    budget: Option<Duration>,
}

impl Clock {
    fn exhausted(&self) -> bool {
        self.budget.is_some_and(|b| self.started.elapsed() >= b)
    }
}

/// `explore/measurements.json`: each variant's last measurement, by the key of what it
/// measured.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Measurements {
    variants: BTreeMap<String, Measurement>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Measurement {
    key: String,
    vs_baseline: ExploreSpeed,
    vs_pgo: Option<ExploreSpeed>,
}

impl Session {
    pub fn explore(&mut self, args: &ExploreArgs) -> Result<()> {
        let clock = Clock {
            started: Instant::now(),
            budget: args
                .budget
                .as_deref()
                .map(|text| {
                    config::parse_duration(text).map_err(|e| anyhow::anyhow!("--budget: {e}"))
                })
                .transpose()?,
        };
        // As `compare`: instruction counts are nearly deterministic (one count and a repeat);
        // times need rounds against noise.
        let rounds = match (args.rounds, args.metric) {
            (Some(rounds), _) => rounds,
            (None, Metric::Instructions) => super::compare::INSTRUCTION_ROUNDS,
            (None, _) => match self.config.compare.rounds {
                Some(Rounds::Fixed(n)) => n,
                _ => super::compare::DEFAULT_ROUNDS,
            },
        };
        if rounds == 0 {
            bail!("--rounds must be at least 1");
        }
        let variants = select_variants(&self.config, &args.variants)?;
        let holdout: Vec<String> = self
            .config
            .workloads_with_role(Role::Holdout)
            .map(|w| w.name().to_owned())
            .collect();
        if holdout.is_empty() {
            bail!(
                "explore measures speed on holdout workloads, and {} has none: add a [[workload]] \
                 with role = \"holdout\" (work training never sees)",
                self.config.display_path()
            );
        }
        if let Some(problem) = self.no_training() {
            bail!("{problem}; explore trains every PGO variant");
        }
        if self.config.pgo.profile.is_some() {
            bail!(
                "explore trains each PGO variant with its own settings, and {} sets [pgo] profile \
                 (a committed profile, which fits one set of settings only). Remove it while \
                 exploring, or explore in a checkout without it.",
                self.config.display_path()
            );
        }
        self.printer.info(format!(
            "exploring {} variants: {}{}",
            variants.len(),
            variants
                .iter()
                .map(|v| v.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            clock
                .budget
                .map(|b| format!(" (budget {})", crate::printer::duration(b)))
                .unwrap_or_default()
        ));
        let mut records: Vec<ExploreVariantRecord> = Vec::new();
        let mut built: BTreeMap<String, Compared> = BTreeMap::new();
        let mut stopped = None;
        for variant in &variants {
            let mut record = new_record(variant);
            if clock.exhausted() {
                record.status = "not built".to_owned();
                record.detail = Some("the budget ran out first".to_owned());
                stopped.get_or_insert_with(|| budget_note(&clock));
                records.push(record);
                continue;
            }
            self.printer
                .info(format!("variant {}: {}", variant.name, describe(variant)));
            match self.build_variant(variant, &clock) {
                Ok(Some(done)) => {
                    record.stages = done.costs;
                    record.build_secs = Some(record.stages.iter().map(|c| c.secs).sum());
                    record.peak_memory_bytes = record
                        .stages
                        .iter()
                        .filter_map(|c| c.peak_memory_bytes)
                        .max();
                    let binaries = &done.compared.manifest.binaries;
                    record.size_bytes = Some(binaries.iter().map(|b| b.size_bytes).sum());
                    // Binaries staged by an older pgo-build have no loaded size recorded.
                    record.loaded_bytes = binaries
                        .iter()
                        .map(|b| {
                            b.loaded_bytes.or_else(|| {
                                let data = std::fs::read(&b.path).ok()?;
                                crate::cargo_build::loaded_size(&data).ok()
                            })
                        })
                        .sum::<Option<u64>>();
                    record.bin_dir = Some(self.publish(&variant.name, &done.compared)?);
                    record.status = "not measured".to_owned();
                    built.insert(variant.name.clone(), done.compared);
                }
                Ok(None) => {
                    record.status = "not built".to_owned();
                    record.detail = Some("the budget ran out while building it".to_owned());
                    stopped.get_or_insert_with(|| budget_note(&clock));
                }
                Err(err) if err.downcast_ref::<interrupt::Interrupted>().is_some() => {
                    return Err(err);
                }
                Err(err) if variant.name == BASELINE || variant.name == PGO => {
                    return Err(err.context(format!(
                        "explore could not build `{}`, which every other variant is measured \
                         against",
                        variant.name
                    )));
                }
                Err(err) => {
                    self.caution(format!(
                        "variant `{}` could not be built, so it is left out: {err:#}",
                        variant.name
                    ))?;
                    record.status = "build failed".to_owned();
                    record.detail = Some(format!("{err:#}"));
                }
            }
            records.push(record);
        }
        let baseline_size = records
            .iter()
            .find(|r| r.name == BASELINE)
            .and_then(|r| r.loaded_bytes);
        for record in &mut records {
            if let (Some(size), Some(baseline)) = (record.loaded_bytes, baseline_size) {
                let change = size as f64 / baseline.max(1) as f64 - 1.0;
                record.size_change = Some(change);
                record.over_size_limit = self
                    .config
                    .pgo
                    .max_size_growth
                    .as_ref()
                    .is_some_and(|limit| record.pgo && change > limit.fraction);
            }
        }
        if stopped.is_none() {
            self.measure_variants(&built, &mut records, args.metric, rounds, &clock)?;
            if clock.exhausted() && records.iter().any(|r| r.status == "not measured") {
                stopped = Some(budget_note(&clock));
            }
        } else {
            for record in &mut records {
                if record.status == "not measured" {
                    record.detail = Some("the budget ran out first".to_owned());
                }
            }
        }
        mark_fronts(&mut records);
        records.sort_by(|a, b| {
            let speed = |r: &ExploreVariantRecord| {
                r.vs_baseline.as_ref().map_or(f64::INFINITY, |s| s.ratio)
            };
            speed(a).total_cmp(&speed(b))
        });
        let recommendation = if stopped.is_none() {
            Some(recommend(
                &records,
                self.config.pgo.max_size_growth.as_ref(),
            ))
        } else {
            None
        };
        let result = ExploreResult {
            metric: args.metric,
            rounds,
            workloads: holdout,
            variants: records,
            recommendation,
            stopped,
        };
        self.printer.table(explore_table(&result));
        self.print_outcome(&result);
        self.report.explore = Some(result.clone());
        self.report.save(&self.layout.report())?;
        if args.apply {
            self.apply(&result)?;
        }
        Ok(())
    }

    /// Builds what `variant` needs, through `run`'s cached stages; `None` when the budget ran
    /// out first.
    fn build_variant(&mut self, variant: &Variant, clock: &Clock) -> Result<Option<Built>> {
        let trains_alike = training_settings(&variant.build) == variant.build;
        let (kind, stages, stage): (BuildKind, &[PipelineStage], Stage) =
            match (variant.pgo, variant.bolt) {
                (false, false) => (BuildKind::Plain, &[PipelineStage::Build], Stage::Baseline),
                (true, false) if trains_alike => (
                    BuildKind::Plain,
                    &[
                        PipelineStage::Instrument,
                        PipelineStage::Train,
                        PipelineStage::Optimize,
                    ],
                    Stage::Optimized,
                ),
                (true, false) => (
                    BuildKind::Profiled,
                    &[PipelineStage::Optimize],
                    Stage::Optimized,
                ),
                (pgo, true) => (
                    BuildKind::Bolt { pgo },
                    if pgo {
                        &[PipelineStage::Optimize, PipelineStage::Bolt]
                    } else {
                        &[PipelineStage::Build, PipelineStage::Bolt]
                    },
                    Stage::Bolt,
                ),
            };
        let mut costs = Vec::new();
        let profile = match kind {
            BuildKind::Profiled | BuildKind::Bolt { pgo: true } => {
                let Some(profile) =
                    self.train_for(&training_settings(&variant.build), clock, &mut costs)?
                else {
                    return Ok(None);
                };
                Some(profile)
            }
            _ => None,
        };
        let build = Build {
            settings: &variant.build,
            kind,
        };
        let Some(layout) = self.run_build(&build, stages, profile, clock, &mut costs)? else {
            return Ok(None);
        };
        Ok(Some(Built {
            compared: compared(variant, layout, stage)?,
            costs,
        }))
    }

    /// The profile trained with `settings` (their plain build: instrument, train, and the
    /// optimize that merges the profile), exported; the training's costs are added to `costs`
    /// (not that optimize: its build is another variant's). `None` when the budget ran out.
    fn train_for(
        &mut self,
        settings: &BuildVariant,
        clock: &Clock,
        costs: &mut Vec<ExploreStageCost>,
    ) -> Result<Option<PathBuf>> {
        let plain = Build {
            settings,
            kind: BuildKind::Plain,
        };
        let training = [
            PipelineStage::Instrument,
            PipelineStage::Train,
            PipelineStage::Optimize,
        ];
        let mut plain_costs = Vec::new();
        let Some(layout) = self.run_build(&plain, &training, None, clock, &mut plain_costs)? else {
            return Ok(None);
        };
        costs.extend(plain_costs.into_iter().filter(|c| c.stage != "optimize"));
        Ok(Some(self.export_trained(&plain, &layout)?))
    }

    /// Runs `stages` of `build` (cached as in `run`), adding each one's cost to `costs`.
    /// Returns the build's layout, or `None` when the budget ran out first.
    fn run_build(
        &mut self,
        build: &Build,
        stages: &[PipelineStage],
        profile: Option<PathBuf>,
        clock: &Clock,
        costs: &mut Vec<ExploreStageCost>,
    ) -> Result<Option<Layout>> {
        let run_args = RunArgs {
            bolt_without_pgo: build.kind == BuildKind::Bolt { pgo: false },
            ..RunArgs::default()
        };
        let (done, layout) = self.in_build(build, profile, |session, label| {
            run_stages(session, label, stages, &run_args, clock, costs)
        })?;
        Ok(done.then_some(layout))
    }

    /// Runs `work` with the session of `build`: this one when the settings are the
    /// pipeline's own (built where `run` builds them), else one in `explore/builds/<key>/`.
    /// `work` gets the build's name for the report.
    fn in_build<T>(
        &mut self,
        build: &Build,
        profile: Option<PathBuf>,
        work: impl FnOnce(&mut Session, &str) -> Result<T>,
    ) -> Result<(T, Layout)> {
        let bolt = matches!(build.kind, BuildKind::Bolt { .. });
        let own = build.kind == BuildKind::Plain
            && *build.settings == self.config.build.variant()
            && !self.config.bolt.enabled
            && self.config.pgo.profile.is_none();
        if own {
            // explore judges size itself: a variant over [pgo] max_size_growth is measured and
            // flagged, not left unbuilt.
            let limit = self.config.pgo.max_size_growth.take();
            let result = work(self, "target/pgo-build");
            self.config.pgo.max_size_growth = limit;
            return Ok((result?, self.layout.clone()));
        }
        let key = build_key(build);
        let layout = Layout::at(self.layout.explore_dir().join("builds").join(&key));
        std::fs::create_dir_all(layout.root())?;
        write_atomically(
            &layout.root().join("settings.txt"),
            format!("{}\n", describe_build(build)).as_bytes(),
        )?;
        let mut session = self.with_build(layout.clone(), build.settings, bolt, profile)?;
        session.config.pgo.max_size_growth = None;
        let result = work(&mut session, &format!("explore/builds/{key}"));
        // Warnings it showed are not shown again by later builds.
        self.shown_warnings
            .extend(std::mem::take(&mut session.shown_warnings));
        self.shown_cautions
            .borrow_mut()
            .extend(session.shown_cautions.take());
        Ok((result?, layout))
    }

    /// The profile a plain build trained, exported with its metadata (toolchain, target) the
    /// way a committed profile is, so the BOLT build's `optimize` checks it like one. Exported
    /// once per profile: the name is the content-addressed one `optimize` merged.
    fn export_trained(&mut self, build: &Build, layout: &Layout) -> Result<PathBuf> {
        let trained = trained_profile(layout)?;
        let output = layout
            .root()
            .join("exported")
            .join(trained.file_name().unwrap_or_default());
        if output.is_file() && super::committed::metadata_path(&output).is_file() {
            return Ok(output);
        }
        std::fs::create_dir_all(output.parent().unwrap())?;
        let args = crate::cli::ExportArgs {
            output: output.clone(),
            internal: true,
        };
        self.in_build(build, None, |session, _| session.export(&args))?;
        Ok(output)
    }

    /// Copies a variant's binaries to `explore/<variant>/bin/` (hard links where possible).
    fn publish(&self, name: &str, variant: &Compared) -> Result<PathBuf> {
        let dir = self.layout.explore_dir().join(name).join("bin");
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .with_context(|| format!("could not clear {}", dir.display()))?;
        }
        std::fs::create_dir_all(&dir)?;
        for binary in &variant.manifest.binaries {
            let to = dir.join(&binary.name);
            if std::fs::hard_link(&binary.path, &to).is_err() {
                std::fs::copy(&binary.path, &to).with_context(|| {
                    format!(
                        "could not copy {} to {}",
                        binary.path.display(),
                        to.display()
                    )
                })?;
            }
        }
        Ok(dir)
    }

    /// Measures the built variants that have no current measurement: first one run of every
    /// holdout workload each (a variant that fails one is refused), then paired, interleaved
    /// rounds of them with `baseline` and `pgo`.
    fn measure_variants(
        &mut self,
        built: &BTreeMap<String, Compared>,
        records: &mut [ExploreVariantRecord],
        metric: Metric,
        rounds: usize,
        clock: &Clock,
    ) -> Result<()> {
        let (Some(baseline), Some(pgo)) = (built.get(BASELINE), built.get(PGO)) else {
            bail!("explore needs the baseline and pgo variants built to measure the others");
        };
        let workloads: Vec<config::Workload> = self
            .config
            .workloads_with_role(Role::Holdout)
            .cloned()
            .collect();
        let key_of = |variant: &Compared| {
            let mut print = Fingerprint::new("explore measurement");
            for (label, id) in [
                ("variant", &variant.manifest.id),
                ("baseline", &baseline.manifest.id),
                ("pgo", &pgo.manifest.id),
            ] {
                print.text(label, id);
            }
            for workload in &workloads {
                print.text("workload", &workload.fingerprint());
            }
            print.text("metric", &format!("{metric:?}"));
            print.text("rounds", &rounds.to_string());
            print.finish()
        };
        let path = self.layout.explore_dir().join("measurements.json");
        let mut cache: Measurements = std::fs::read_to_string(&path)
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default();
        let mut missing: Vec<&str> = built
            .iter()
            .filter(|(name, variant)| {
                name.as_str() != BASELINE
                    && cache
                        .variants
                        .get(name.as_str())
                        .is_none_or(|m| m.key != key_of(variant))
            })
            .map(|(name, _)| name.as_str())
            .collect();
        // In the order they were built.
        missing.sort_by_key(|name| records.iter().position(|r| &r.name == name));
        let cached = built.len() - 1 - missing.len();
        if cached > 0 {
            self.printer.info(format!(
                "{cached} variant{} measured before against the same builds and workloads: not \
                 measured again",
                if cached == 1 { "" } else { "s" }
            ));
        }
        if !missing.is_empty() && clock.exhausted() {
            for record in records.iter_mut() {
                if missing.contains(&record.name.as_str()) {
                    record.detail = Some("the budget ran out first".to_owned());
                }
            }
        } else if !missing.is_empty() {
            let mut measured: Vec<&Compared> = vec![baseline, pgo];
            measured.extend(
                missing
                    .iter()
                    .filter(|name| **name != PGO)
                    .map(|name| &built[*name]),
            );
            let refused = self.check_correctness(&measured, &workloads)?;
            for (name, reason) in &refused {
                let record = records.iter_mut().find(|r| &r.name == name).unwrap();
                record.status = "failed".to_owned();
                record.detail = Some(reason.clone());
            }
            measured.retain(|v| !refused.contains_key(&v.name));
            let compared: Vec<Compared> = measured.iter().map(|v| (*v).clone()).collect();
            let result = self.measure(
                &compared,
                &CompareArgs {
                    rounds: Some(Rounds::Fixed(rounds)),
                    workloads: workloads.iter().map(|w| w.name().to_owned()).collect(),
                    role: Some(CompareRole::Holdout),
                    metric,
                    seed: 1,
                    ..CompareArgs::default()
                },
            )?;
            for variant in &compared[1..] {
                let vs_baseline = speed(workloads.iter().map(|w| {
                    let comparison = result
                        .workloads
                        .iter()
                        .find(|c| c.workload == w.name())
                        .expect("every holdout workload was compared");
                    (
                        w.name().to_owned(),
                        comparison.candidates[&variant.name].by(metric).clone(),
                    )
                }));
                let vs_pgo = (variant.name != PGO).then(|| {
                    speed(result.workloads.iter().map(|comparison| {
                        let summaries = summarize_candidates(
                            &comparison.runs,
                            PGO,
                            &[variant.name.as_str()],
                            rounds,
                            stats::ALPHA,
                            1,
                            metric == Metric::Instructions,
                        );
                        (
                            comparison.workload.clone(),
                            summaries[&variant.name].by(metric).clone(),
                        )
                    }))
                });
                cache.variants.insert(
                    variant.name.clone(),
                    Measurement {
                        key: key_of(variant),
                        vs_baseline,
                        vs_pgo,
                    },
                );
            }
            write_atomically(&path, serde_json::to_string_pretty(&cache)?.as_bytes())?;
        }
        for record in records.iter_mut() {
            if record.name == BASELINE && built.contains_key(BASELINE) {
                record.status = "measured".to_owned();
                continue;
            }
            let Some(variant) = built.get(&record.name) else {
                continue;
            };
            if record.status == "failed" {
                continue;
            }
            if let Some(measurement) = cache
                .variants
                .get(&record.name)
                .filter(|m| m.key == key_of(variant))
            {
                record.status = "measured".to_owned();
                record.detail = None;
                record.vs_baseline = Some(measurement.vs_baseline.clone());
                record.vs_pgo = measurement.vs_pgo.clone();
            }
        }
        Ok(())
    }

    /// Runs every holdout workload once against each variant. Variants that fail one are
    /// refused (returned, by name, with what failed); the references failing is an error.
    fn check_correctness(
        &self,
        variants: &[&Compared],
        workloads: &[config::Workload],
    ) -> Result<BTreeMap<String, String>> {
        let mut refused = BTreeMap::new();
        for workload in workloads.iter().filter(|w| !w.allow_failure) {
            for variant in variants {
                if refused.contains_key(&variant.name) {
                    continue;
                }
                let outcome = self.run_once(workload, variant)?;
                if outcome.success {
                    continue;
                }
                let reason = format!(
                    "holdout workload `{}` {} against its binaries. Its output ends with:\n{}\n\
                     Full log: {}",
                    workload.name(),
                    outcome.status,
                    crate::training::log_tail(&outcome.log_path, 10),
                    outcome.log_path.display()
                );
                if variant.name == BASELINE || variant.name == PGO {
                    bail!(
                        "the `{}` variant failed: {reason}\nEvery other variant is measured \
                         against it; fix the workload first.",
                        variant.name
                    );
                }
                self.caution(format!(
                    "variant `{}` is refused: {reason}\nIts binaries do not do what the \
                     baseline's do, so it is neither measured nor recommended.",
                    variant.name
                ))?;
                refused.insert(variant.name.clone(), reason);
            }
        }
        Ok(refused)
    }

    /// The recommendation, and what the table means, in words.
    fn print_outcome(&self, result: &ExploreResult) {
        if let Some(stopped) = &result.stopped {
            self.printer.warn(format!(
                "{stopped}. Run `pgo-build explore` again to continue: what was built and \
                 measured is kept, and no variant is recommended until all are measured."
            ));
        }
        for record in &result.variants {
            if record.over_size_limit {
                self.printer.info(format!(
                    "{} is over [pgo] max_size_growth ({:+.1}% over the baseline): not \
                     recommended",
                    record.name,
                    record.size_change.unwrap_or(0.0) * 100.0
                ));
            }
        }
        if let Some(recommendation) = &result.recommendation {
            self.printer.info(format!(
                "recommended: {} - {}",
                recommendation.variant, recommendation.evidence
            ));
        }
        self.printer.info(format!(
            "variants' binaries: {}/<variant>/bin/",
            self.layout.explore_dir().display()
        ));
    }

    /// `--apply`: the recommended variant's settings into `pgo-build.toml`.
    fn apply(&mut self, result: &ExploreResult) -> Result<()> {
        let Some(recommendation) = &result.recommendation else {
            bail!(
                "--apply: nothing was applied, because not every variant was built and \
                 measured; run `pgo-build explore` again to finish first"
            );
        };
        let variants = known_variants(&self.config)?;
        let variant = variants
            .iter()
            .find(|v| v.name == recommendation.variant)
            .expect("the recommendation is a known variant");
        if !variant.pgo {
            bail!(
                "--apply: nothing was applied, because the recommendation is `{}`, without PGO: \
                 {}",
                variant.name,
                recommendation.evidence
            );
        }
        let path = self
            .config
            .path
            .clone()
            .unwrap_or_else(|| self.workspace.root.join(config::CONFIG_FILE_NAME));
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let updated = apply_to_config(&text, variant)
            .with_context(|| format!("--apply: could not edit {}", path.display()))?;
        // What is written must load: checked before it replaces the file.
        config::Config::parse(&updated, &path)
            .with_context(|| format!("--apply: the edited {} would not load", path.display()))?;
        write_atomically(&path, updated.as_bytes())?;
        self.printer.info(format!(
            "applied `{}` to {}: [build] profile_overrides = {{{}}}, rustflags = {:?}, [bolt] \
             enabled = {}. `pgo-build run` builds it from now on.",
            variant.name,
            path.display(),
            variant
                .build
                .profile_overrides
                .iter()
                .map(|(k, v)| format!("{k} = {v}"))
                .collect::<Vec<_>>()
                .join(", "),
            variant.build.rustflags,
            variant.bolt
        ));
        Ok(())
    }
}

/// Runs `stages` on `session`, cached as in `run`, each one's cost added to `costs`. Returns
/// false when the budget ran out before a stage.
fn run_stages(
    session: &mut Session,
    label: &str,
    stages: &[PipelineStage],
    args: &RunArgs,
    clock: &Clock,
    costs: &mut Vec<ExploreStageCost>,
) -> Result<bool> {
    for &stage in stages {
        if clock.exhausted() {
            return Ok(false);
        }
        session.pipeline_stage(stage, args)?;
        let record = session.report.stage_record(stage.name());
        costs.push(ExploreStageCost {
            build: label.to_owned(),
            stage: stage.name().to_owned(),
            secs: record.map_or(0.0, |r| r.duration_secs),
            peak_memory_bytes: record.and_then(|r| r.peak_memory_bytes),
            cached: record.is_some_and(|r| r.result == "cached"),
        });
    }
    Ok(true)
}

/// A variant's staged binaries, ready to compare.
fn compared(variant: &Variant, layout: Layout, stage: Stage) -> Result<Compared> {
    let manifest = StageManifest::load(&layout, stage, "run `pgo-build explore` again")?;
    Ok(Compared {
        name: variant.name.clone(),
        stage,
        layout,
        manifest,
        log_prefix: "explore",
        rebuild: "explore",
    })
}

/// The profile a plain build's optimize used (content-addressed, so it names one profile).
fn trained_profile(layout: &Layout) -> Result<PathBuf> {
    let manifest = StageManifest::load(layout, Stage::Optimized, "run `pgo-build explore` again")?;
    let used = manifest
        .stage_rustflags
        .iter()
        .find_map(|flag| flag.strip_prefix("-Cprofile-use="))
        .map(PathBuf::from)
        .with_context(|| {
            format!(
                "the optimized build in {} has no profile flag; run `pgo-build explore` again",
                layout.root().display()
            )
        })?;
    let original = layout
        .profiles_dir()
        .join(used.file_name().unwrap_or_default());
    Ok(if original.is_file() { original } else { used })
}

/// The directory name of a build: a hash of its settings.
fn build_key(build: &Build) -> String {
    let mut print = Fingerprint::new("explore build");
    print.text("settings", &describe_build(build));
    print.finish()[..12].to_owned()
}

fn describe_build(build: &Build) -> String {
    let kind = match build.kind {
        BuildKind::Plain => "plain",
        BuildKind::Profiled => "optimized with the profile trained without profile-use-only flags",
        BuildKind::Bolt { pgo: true } => "bolt of pgo",
        BuildKind::Bolt { pgo: false } => "bolt without pgo",
    };
    format!("{kind}: {}", build.settings.describe())
}

fn describe(variant: &Variant) -> String {
    let mut words = vec![if variant.pgo { "PGO" } else { "no PGO" }.to_owned()];
    if !variant.build.profile_overrides.is_empty() || !variant.build.rustflags.is_empty() {
        words.push(variant.build.describe());
    }
    if variant.bolt {
        words.push("BOLT".to_owned());
    }
    words.join(", ")
}

fn budget_note(clock: &Clock) -> String {
    format!(
        "the budget ({}) ran out after {}",
        clock
            .budget
            .map(crate::printer::duration)
            .unwrap_or_default(),
        crate::printer::duration(clock.started.elapsed())
    )
}

fn new_record(variant: &Variant) -> ExploreVariantRecord {
    ExploreVariantRecord {
        name: variant.name.clone(),
        pgo: variant.pgo,
        bolt: variant.bolt,
        profile_overrides: variant
            .build
            .profile_overrides
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect(),
        rustflags: variant.build.rustflags.clone(),
        status: String::new(),
        detail: None,
        bin_dir: None,
        stages: Vec::new(),
        build_secs: None,
        peak_memory_bytes: None,
        size_bytes: None,
        loaded_bytes: None,
        size_change: None,
        over_size_limit: false,
        vs_baseline: None,
        vs_pgo: None,
        front: Vec::new(),
    }
}

/// A speed over several workloads: the geometric mean of their median ratios; faster (or
/// slower) only when every workload's verdict is.
fn speed(per_workload: impl Iterator<Item = (String, PairedSummary)>) -> ExploreSpeed {
    let workloads: BTreeMap<String, PairedSummary> = per_workload.collect();
    let ratios: Vec<f64> = workloads.values().map(|s| s.median_ratio).collect();
    let verdicts: Vec<Verdict> = workloads.values().map(|s| s.verdict).collect();
    let all = |verdict: Verdict| verdicts.iter().all(|v| *v == verdict);
    let verdict = if all(Verdict::Faster) {
        Verdict::Faster
    } else if all(Verdict::Slower) {
        Verdict::Slower
    } else if verdicts.contains(&Verdict::TooFewRounds) {
        Verdict::TooFewRounds
    } else if all(Verdict::NoDifference) {
        Verdict::NoDifference
    } else {
        Verdict::Inconclusive
    };
    ExploreSpeed {
        ratio: stats::geometric_mean(&ratios),
        verdict,
        workloads,
    }
}

/// Marks the variants on the Pareto front of speed against each cost: no other measured
/// variant is at least as fast and at least as cheap, and better in one of the two.
pub fn mark_fronts(records: &mut [ExploreVariantRecord]) {
    type Cost = fn(&ExploreVariantRecord) -> Option<f64>;
    let costs: [(&str, Cost); 3] = [
        ("build time", |r| r.build_secs),
        ("peak memory", |r| r.peak_memory_bytes.map(|b| b as f64)),
        ("size", |r| r.loaded_bytes.map(|b| b as f64)),
    ];
    let points: Vec<Option<(f64, [Option<f64>; 3])>> = records
        .iter()
        .map(|r| {
            let speed = r.vs_baseline.as_ref().map(|s| s.ratio).or(
                // The baseline is the unit of speed.
                (r.name == BASELINE && r.status == "measured").then_some(1.0),
            )?;
            Some((speed, costs.map(|(_, cost)| cost(r))))
        })
        .collect();
    for (i, record) in records.iter_mut().enumerate() {
        record.front.clear();
        let Some((speed, own)) = points[i] else {
            continue;
        };
        for (c, (name, _)) in costs.iter().enumerate() {
            let Some(cost) = own[c] else { continue };
            let dominated = points.iter().enumerate().any(|(j, other)| {
                let Some((other_speed, other_costs)) = other else {
                    return false;
                };
                let Some(other_cost) = other_costs[c] else {
                    return false;
                };
                j != i
                    && *other_speed <= speed
                    && other_cost <= cost
                    && (*other_speed < speed || other_cost < cost)
            });
            if !dominated {
                record.front.push((*name).to_owned());
            }
        }
    }
}

/// The variant to ship: the fastest that beat `pgo` (faster on every holdout workload, by the
/// paired test) within the size limit; else `pgo` when it beat the baseline; else the
/// baseline.
pub fn recommend(
    records: &[ExploreVariantRecord],
    limit: Option<&config::Growth>,
) -> ExploreRecommendation {
    let percent = |ratio: f64| (1.0 - ratio) * 100.0;
    let costs = |r: &ExploreVariantRecord, reference: Option<&ExploreVariantRecord>| {
        let mut words = Vec::new();
        if let (Some(own), Some(other)) = (r.build_secs, reference.and_then(|p| p.build_secs)) {
            words.push(format!("build time {:.1}x pgo's", own / other.max(1e-3)));
        }
        if let Some(change) = r.size_change {
            words.push(format!("size {:+.1}% over the baseline", change * 100.0));
        }
        words.join(", ")
    };
    let pgo = records.iter().find(|r| r.name == PGO);
    let better = records
        .iter()
        .filter(|r| r.name != PGO && r.name != BASELINE && r.status == "measured")
        .filter(|r| !r.over_size_limit)
        .filter(|r| {
            r.vs_pgo
                .as_ref()
                .is_some_and(|s| s.verdict == Verdict::Faster)
        })
        .min_by(|a, b| {
            let ratio = |r: &ExploreVariantRecord| r.vs_pgo.as_ref().map_or(1.0, |s| s.ratio);
            ratio(a).total_cmp(&ratio(b))
        });
    if let Some(best) = better {
        let vs_pgo = best.vs_pgo.as_ref().expect("filtered on it");
        return ExploreRecommendation {
            variant: best.name.clone(),
            better_than_pgo: true,
            evidence: format!(
                "{:.1}% faster than pgo ({}), {:.1}% faster than the baseline; {}",
                percent(vs_pgo.ratio),
                evidence_of(vs_pgo),
                best.vs_baseline.as_ref().map_or(0.0, |s| percent(s.ratio)),
                costs(best, pgo)
            ),
        };
    }
    let candidates = records
        .iter()
        .filter(|r| r.name != PGO && r.name != BASELINE && r.status == "measured")
        .count();
    let none_better = format!(
        "no variant is better than pgo ({candidates} measured against it{})",
        limit
            .map(|l| format!(", [pgo] max_size_growth = {:?}", l.text))
            .unwrap_or_default()
    );
    match pgo.and_then(|p| p.vs_baseline.as_ref().map(|s| (p, s))) {
        Some((pgo, vs_baseline))
            if vs_baseline.verdict == Verdict::Faster && !pgo.over_size_limit =>
        {
            ExploreRecommendation {
                variant: PGO.to_owned(),
                better_than_pgo: false,
                evidence: format!(
                    "{none_better}; pgo is {:.1}% faster than the baseline ({})",
                    percent(vs_baseline.ratio),
                    evidence_of(vs_baseline)
                ),
            }
        }
        Some((_, vs_baseline)) => ExploreRecommendation {
            variant: BASELINE.to_owned(),
            better_than_pgo: false,
            evidence: format!(
                "{none_better}, and pgo is not shown faster than the baseline ({}: {:+.1}%, {})",
                vs_baseline
                    .workloads
                    .values()
                    .map(|s| s.verdict_text())
                    .collect::<Vec<_>>()
                    .join(", "),
                -percent(vs_baseline.ratio),
                evidence_of(vs_baseline)
            ),
        },
        None => ExploreRecommendation {
            variant: BASELINE.to_owned(),
            better_than_pgo: false,
            evidence: format!("{none_better}, and pgo was not measured"),
        },
    }
}

/// "interval 0.95-0.97 on `a`; 10/10 rounds faster on `b`".
fn evidence_of(speed: &ExploreSpeed) -> String {
    speed
        .workloads
        .iter()
        .map(|(workload, s)| {
            format!(
                "`{workload}`: {:.3} [{:.3}, {:.3}], {}/{} rounds faster",
                s.median_ratio, s.ci_low, s.ci_high, s.wins, s.pairs
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// `text` (pgo-build.toml, perhaps empty) with `[build] profile_overrides` and `rustflags`
/// and `[bolt] enabled` set to `variant`'s; comments and everything else are kept.
pub fn apply_to_config(text: &str, variant: &Variant) -> Result<String> {
    let mut document: toml_edit::DocumentMut = text.parse().context("it is not valid TOML")?;
    let build = document
        .entry("build")
        .or_insert(toml_edit::table())
        .as_table_like_mut()
        .context("`build` is not a table")?;
    if variant.build.profile_overrides.is_empty() {
        build.remove("profile_overrides");
    } else {
        let mut overrides = toml_edit::InlineTable::new();
        for (key, value) in &variant.build.profile_overrides {
            let value: toml_edit::Value = match value {
                toml::Value::String(s) => s.as_str().into(),
                toml::Value::Integer(i) => (*i).into(),
                toml::Value::Boolean(b) => (*b).into(),
                other => {
                    bail!("profile override {key} = {other} is not a string, integer or boolean")
                }
            };
            overrides.insert(key, value);
        }
        build.insert("profile_overrides", toml_edit::value(overrides));
    }
    if variant.build.rustflags.is_empty() {
        build.remove("rustflags");
    } else {
        let flags: toml_edit::Array = variant.build.rustflags.iter().map(String::as_str).collect();
        build.insert("rustflags", toml_edit::value(flags));
    }
    if build.is_empty() {
        document.remove("build");
    }
    let bolt = document
        .entry("bolt")
        .or_insert(toml_edit::table())
        .as_table_like_mut()
        .context("`bolt` is not a table")?;
    bolt.insert("enabled", toml_edit::value(variant.bolt));
    Ok(document.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> config::Config {
        config::Config::parse(text, std::path::Path::new("/ws/pgo-build.toml")).unwrap()
    }

    fn names(variants: &[Variant]) -> Vec<&str> {
        variants.iter().map(|v| v.name.as_str()).collect()
    }

    #[test]
    fn the_references_are_always_selected_and_unknown_names_are_refused() {
        let own = config(
            "[[explore.variant]]\nname = \"opt1\"\nprofile_overrides = { opt-level = 1 }\npgo = false\n",
        );
        let all = select_variants(&own, &[]).unwrap();
        assert_eq!(
            names(&all),
            [
                "baseline",
                "pgo",
                "pgo+lto",
                "pgo+cgu1",
                "pgo+lto+cgu1",
                "pgo+split",
                "pgo+bolt",
                "pgo+lto+cgu1+bolt",
                "opt1"
            ]
        );
        assert!(!all[8].pgo);
        let some = select_variants(&own, &["opt1".into(), "pgo+lto".into()]).unwrap();
        assert_eq!(names(&some), ["baseline", "pgo", "pgo+lto", "opt1"]);
        let err = select_variants(&own, &["pgo+lt0".into()]).unwrap_err();
        assert!(
            format!("{err:#}").contains("unknown variant `pgo+lt0`; variants: baseline, pgo,"),
            "{err:#}"
        );
        let clash = config("[[explore.variant]]\nname = \"pgo+lto\"\n");
        let err = select_variants(&clash, &[]).unwrap_err();
        assert!(
            format!("{err:#}").contains("name of a built-in variant"),
            "{err:#}"
        );
    }

    #[test]
    fn split_trains_with_pgos_settings_and_lto_with_its_own() {
        let variants = builtin_variants();
        let settings = |name: &str| &variants.iter().find(|v| v.name == name).unwrap().build;
        assert_eq!(training_settings(settings("pgo+split")), *settings("pgo"));
        assert_eq!(training_settings(settings("pgo+lto")), *settings("pgo+lto"));
    }

    #[test]
    fn builds_with_the_same_settings_share_a_key_and_others_do_not() {
        let variants = builtin_variants();
        let key = |name: &str, kind: BuildKind| {
            build_key(&Build {
                settings: &variants.iter().find(|v| v.name == name).unwrap().build,
                kind,
            })
        };
        assert_eq!(
            key("pgo", BuildKind::Plain),
            key("baseline", BuildKind::Plain)
        );
        assert_eq!(
            key("pgo+lto+cgu1", BuildKind::Plain),
            key("pgo+lto+cgu1+bolt", BuildKind::Plain)
        );
        assert_ne!(
            key("pgo", BuildKind::Plain),
            key("pgo+lto", BuildKind::Plain)
        );
        assert_ne!(
            key("pgo", BuildKind::Plain),
            key("pgo", BuildKind::Bolt { pgo: true })
        );
        assert_ne!(
            key("pgo", BuildKind::Bolt { pgo: false }),
            key("pgo", BuildKind::Bolt { pgo: true })
        );
    }

    fn summary(ratio: f64, verdict: Verdict) -> PairedSummary {
        PairedSummary {
            pairs: 10,
            median_ratio: ratio,
            ci_low: ratio - 0.01,
            ci_high: ratio + 0.01,
            confidence: 0.95,
            wins: if ratio < 1.0 { 10 } else { 0 },
            wilcoxon_p: 0.002,
            sign_test_p: 0.002,
            verdict,
            bound: None,
            more_rounds: None,
            resolves: None,
            resolution_note: None,
        }
    }

    fn measured(
        name: &str,
        vs_baseline: f64,
        vs_pgo: Option<(f64, Verdict)>,
        build_secs: f64,
        size: u64,
    ) -> ExploreVariantRecord {
        let mut record = new_record(&Variant {
            name: name.to_owned(),
            build: BuildVariant::default(),
            pgo: name != BASELINE,
            bolt: false,
        });
        record.status = "measured".to_owned();
        record.build_secs = Some(build_secs);
        record.peak_memory_bytes = Some(100);
        record.size_bytes = Some(size);
        record.loaded_bytes = Some(size);
        record.size_change = Some(size as f64 / 1000.0 - 1.0);
        let verdict = if vs_baseline < 0.98 {
            Verdict::Faster
        } else {
            Verdict::NoDifference
        };
        if name != BASELINE {
            record.vs_baseline = Some(speed(
                [("h".to_owned(), summary(vs_baseline, verdict))].into_iter(),
            ));
        }
        record.vs_pgo = vs_pgo
            .map(|(ratio, verdict)| speed([("h".to_owned(), summary(ratio, verdict))].into_iter()));
        record
    }

    #[test]
    fn the_fastest_variant_that_beat_pgo_within_the_size_limit_is_recommended() {
        let mut records = vec![
            measured("baseline", 1.0, None, 10.0, 1000),
            measured("pgo", 0.9, None, 30.0, 1010),
            measured("pgo+lto", 0.85, Some((0.94, Verdict::Faster)), 60.0, 900),
            measured("pgo+cgu1", 0.80, Some((0.89, Verdict::Faster)), 50.0, 1300),
            measured(
                "pgo+split",
                0.89,
                Some((0.99, Verdict::NoDifference)),
                31.0,
                1000,
            ),
        ];
        let chosen = recommend(&records, None);
        assert_eq!(chosen.variant, "pgo+cgu1");
        assert!(chosen.better_than_pgo);
        assert!(
            chosen.evidence.contains("11.0% faster than pgo"),
            "{}",
            chosen.evidence
        );
        // Over the size limit: the next best.
        records[3].over_size_limit = true;
        let chosen = recommend(&records, None);
        assert_eq!(chosen.variant, "pgo+lto");
        // Nothing beat pgo: pgo, said so.
        records[2].vs_pgo = Some(speed(
            [("h".to_owned(), summary(0.99, Verdict::Inconclusive))].into_iter(),
        ));
        let chosen = recommend(&records, None);
        assert_eq!(chosen.variant, "pgo");
        assert!(!chosen.better_than_pgo);
        assert!(
            chosen.evidence.starts_with("no variant is better than pgo"),
            "{}",
            chosen.evidence
        );
        // And pgo no faster than the baseline: the baseline.
        records[1] = measured("pgo", 0.995, None, 30.0, 1010);
        assert_eq!(recommend(&records, None).variant, "baseline");
    }

    #[test]
    fn a_variant_is_on_a_front_unless_another_is_as_fast_and_as_cheap() {
        let mut records = vec![
            measured("baseline", 1.0, None, 10.0, 1000),
            measured("pgo", 0.9, None, 30.0, 1010),
            // Slower and costlier than pgo in every respect: on no front.
            measured("pgo+split", 0.95, None, 40.0, 1020),
            measured("pgo+lto", 0.85, None, 60.0, 900),
        ];
        records.push(new_record(&builtin_variants()[4]));
        mark_fronts(&mut records);
        let fronts: Vec<(&str, Vec<String>)> = records
            .iter()
            .map(|r| (r.name.as_str(), r.front.clone()))
            .collect();
        // Everything measured used the same peak memory: only the fastest is on that front.
        assert_eq!(fronts[0].1, ["build time"]);
        assert_eq!(fronts[1].1, ["build time"]);
        assert!(fronts[2].1.is_empty());
        assert_eq!(fronts[3].1, ["build time", "peak memory", "size"]);
        assert!(
            fronts[4].1.is_empty(),
            "unmeasured variants are on no front"
        );
    }

    #[test]
    fn applying_a_variant_sets_its_settings_and_keeps_the_rest_of_the_file() {
        let text = "# our settings\n[build]\nbins = [\"app\"] # only this one\n\n[bolt]\nenabled = false\nfuncs = [\"^_R\"]\n";
        let variants = builtin_variants();
        let lto = variants
            .iter()
            .find(|v| v.name == "pgo+lto+cgu1+bolt")
            .unwrap();
        let applied = apply_to_config(text, lto).unwrap();
        assert!(
            applied.starts_with("# our settings\n[build]\nbins = [\"app\"] # only this one\n"),
            "{applied}"
        );
        assert!(
            applied.contains("profile_overrides = { codegen-units = 1, lto = \"fat\" }"),
            "{applied}"
        );
        assert!(applied.contains("enabled = true"), "{applied}");
        assert!(applied.contains("funcs = [\"^_R\"]"), "{applied}");
        let parsed =
            config::Config::parse(&applied, std::path::Path::new("/ws/pgo-build.toml")).unwrap();
        assert_eq!(parsed.build.variant(), lto.build);
        assert!(parsed.bolt.enabled);
        // Back to plain pgo: the overrides go, the rest stays.
        let pgo = variants.iter().find(|v| v.name == "pgo").unwrap();
        let back = apply_to_config(&applied, pgo).unwrap();
        assert!(!back.contains("profile_overrides"), "{back}");
        assert!(back.contains("enabled = false"), "{back}");
        assert!(back.contains("# only this one"), "{back}");
        // From no file at all.
        let split = variants.iter().find(|v| v.name == "pgo+split").unwrap();
        let fresh = apply_to_config("", split).unwrap();
        let parsed =
            config::Config::parse(&fresh, std::path::Path::new("/ws/pgo-build.toml")).unwrap();
        assert_eq!(parsed.build.rustflags, [SPLIT_FLAG]);
    }
}
