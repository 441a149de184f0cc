//! `pgo-build explore`: build configurations ("variants": fat LTO, one codegen unit, machine
//! function splitting, BOLT, the user's own) built and measured side by side. For each: its
//! speed on the holdout workloads against the baseline and against plain PGO, its build time
//! and peak memory, its size; then the Pareto fronts and a recommendation, which `--apply`
//! writes to `pgo-build.toml`.
//!
//! Each set of build settings is a build of its own: a [`Layout`] under
//! `explore/builds/<key>/`, built in a context ([`super::context::Context`]) with those settings through the same cached
//! stages as `run`. So a second `explore` rebuilds nothing that did not change, and the
//! settings of the pipeline itself are built in `target/pgo-build/` (a `run` before `explore`
//! is reused). BOLT variants link with relocations, a build of their own, optimized with the
//! profile of the variant with the same settings without BOLT (as a committed profile), so
//! training is not repeated; so are variants whose extra flags act only with a profile
//! (`pgo+split`). Measurements are cached (`explore/measurements.json`) by the
//! builds and workloads they measured: a second run measures only what changed or is missing.

mod apply;
mod builds;
mod decide;
mod race;
mod variant_measurements;
mod variants;

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{Result, bail};
use builds::{Built, Clock, budget_note};
use decide::{Decision, apply_margin, mark_fronts, mark_size_changes, recommend};
use variants::{BASELINE, PGO, describe, new_record, select_variants};

use super::context::{Context, Session};
use super::explore::apply::apply;
use super::explore::builds::{build_variant, publish};
use super::explore::variant_measurements::measure_variants;
use super::steps::compare::Compared;
use super::steps::doctor::no_training;
use crate::config::{self, Role};
use crate::exec::interrupt;
use crate::pipeline::requests::{ExploreRequest, decider};
use crate::report::VariantStatus;
use crate::report::tables::explore_table;
use crate::report::{ExploreResult, ExploreVariantRecord};

/// Whether the C variants (`clang`, `pgo+c`, `pgo+c+xlto`) are measured unasked: with
/// cross-language PGO on, or where a build script compiles C/C++ through a builder it covers
/// and the clang of rustc's LLVM, which they need, is installed.
fn measures_c_by_default(cx: &Context) -> bool {
    use crate::toolchain::cross_language::{COVERED_BUILDERS, locate};
    if cx.config.pgo.cross_language != config::CBuild::User {
        return true;
    }
    let compiled = cx
        .workspace
        .build_script_compilers(&cx.settings.target, &COVERED_BUILDERS, &cx.printer)
        .unwrap_or_default();
    if compiled.is_empty() {
        return false;
    }
    let clang = locate(
        config::CBuild::Pgo,
        &cx.settings.target,
        &cx.rustc.host,
        cx.rustc.llvm_major,
        &|key| std::env::var(key).ok(),
        &cx.printer,
    );
    let packages = compiled.keys().cloned().collect::<Vec<_>>().join(", ");
    match clang {
        Ok(Some(_)) => {
            cx.printer.info(format!(
                "C/C++ compiled by build scripts ({packages}): measuring the C variants too \
                 (clang alone, then with cross-language PGO)"
            ));
            true
        }
        Ok(None) => false,
        Err(err) => {
            cx.printer.info(format!(
                "C/C++ compiled by build scripts ({packages}): the C variants are not measured: \
                 {err:#}"
            ));
            false
        }
    }
}

pub fn explore(cx: &Context, session: &mut Session, args: &ExploreRequest) -> Result<()> {
    let clock = started_clock(args.budget.as_deref())?;
    // As `compare`: instruction counts are nearly deterministic (one count and a repeat);
    // times need rounds against noise.
    let decider = decider(&cx.config, args.metric.as_ref())?;
    let rounds = args.rounds(&cx.config, &decider);
    if rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    // Named variants are what is measured: the C ones only when named.
    let c_by_default = args.variants.is_empty() && measures_c_by_default(cx);
    let variants = select_variants(&cx.config, &args.variants, c_by_default)?;
    let holdout = explorable(cx)?;
    cx.printer.info(format!(
        "exploring {} variants: {}{}",
        variants.len(),
        variants
            .iter()
            .map(|v| v.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        clock
            .budget
            .map(|b| format!(" (budget {})", crate::util::printer::duration(b)))
            .unwrap_or_default()
    ));
    let mut records: Vec<ExploreVariantRecord> = Vec::new();
    let mut built: BTreeMap<String, Compared> = BTreeMap::new();
    let mut stopped = None;
    for variant in &variants {
        let mut record = new_record(variant);
        if clock.exhausted() {
            record.status = VariantStatus::NotBuilt;
            record.detail = Some("the budget ran out first".to_owned());
            stopped.get_or_insert_with(|| budget_note(&clock));
            records.push(record);
            continue;
        }
        cx.printer
            .info(format!("variant {}: {}", variant.name, describe(variant)));
        match build_variant(cx, session, variant, &clock) {
            Ok(Some(done)) => {
                record_built(cx, &variant.name, &mut record, &done)?;
                record.status = VariantStatus::NotMeasured;
                built.insert(variant.name.clone(), done.compared);
            }
            Ok(None) => {
                record.status = VariantStatus::NotBuilt;
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
                cx.caution(format!(
                    "variant `{}` could not be built, so it is left out: {err:#}",
                    variant.name
                ))?;
                record.status = VariantStatus::BuildFailed;
                record.detail = Some(format!("{err:#}"));
            }
        }
        records.push(record);
    }
    mark_size_changes(&mut records, cx.config.pgo.max_size_growth.as_ref());
    if stopped.is_none() {
        measure_variants(cx, &built, &mut records, &decider, rounds, &clock)?;
        if clock.exhausted()
            && records
                .iter()
                .any(|r| r.status == VariantStatus::NotMeasured)
        {
            stopped = Some(budget_note(&clock));
        }
    } else {
        for record in &mut records {
            if record.status == VariantStatus::NotMeasured {
                record.detail = Some("the budget ran out first".to_owned());
            }
        }
    }
    // Verdicts of measurements kept from earlier runs, under the margin configured now.
    let margin = cx.config.compare.margin();
    apply_margin(&mut records, margin);
    mark_fronts(&mut records);
    sort_fastest_first(&mut records);
    let (recommendation, undecided) = match &stopped {
        Some(_) => (None, None),
        None => match recommend(&records, cx.config.pgo.max_size_growth.as_ref(), margin) {
            Decision::Recommend(recommendation) => (Some(recommendation), None),
            Decision::Undecided(why) => (None, Some(why)),
        },
    };
    let result = ExploreResult {
        metric: decider.measured(),
        decided_by: decider.reported().map(str::to_owned),
        rounds,
        workloads: holdout,
        variants: records,
        recommendation,
        undecided,
        stopped,
    };
    cx.printer.table(explore_table(&result));
    print_outcome(cx, &result);
    session.report.explore = Some(result.clone());
    session.report.save(&cx.layout.report())?;
    if args.apply {
        apply(cx, &result)?;
    }
    Ok(())
}

/// The clock of an explore starting now, within `--budget` (`90m`, `2h`) when given.
fn started_clock(budget: Option<&str>) -> Result<Clock> {
    Ok(Clock {
        started: Instant::now(),
        budget: budget
            .map(|text| config::parse_duration(text).map_err(|e| anyhow::anyhow!("--budget: {e}")))
            .transpose()?,
    })
}

/// The fastest against the baseline first; variants without a speed last.
fn sort_fastest_first(records: &mut [ExploreVariantRecord]) {
    records.sort_by(|a, b| {
        let speed =
            |r: &ExploreVariantRecord| r.vs_baseline.as_ref().map_or(f64::INFINITY, |s| s.ratio);
        speed(a).total_cmp(&speed(b))
    });
}

/// The held-out workloads explore measures on, or why it cannot run here: none of them, no
/// training, or a committed profile (which fits one set of settings only).
fn explorable(cx: &Context) -> Result<Vec<String>> {
    let holdout: Vec<String> = cx.config.workload_names(Role::Holdout);
    if holdout.is_empty() {
        bail!(
            "explore measures speed on holdout workloads, and {} has none: add a [[workload]] \
             with role = \"holdout\" (work training never sees)",
            cx.config.display_path()
        );
    }
    if let Some(problem) = no_training(cx) {
        bail!("{problem}; explore trains every PGO variant");
    }
    if cx.config.pgo.profile.is_some() {
        bail!(
            "explore trains each PGO variant with its own settings, and {} sets [pgo] profile \
             (a committed profile, which fits one set of settings only). Remove it while \
             exploring, or explore in a checkout without it.",
            cx.config.display_path()
        );
    }
    Ok(holdout)
}

/// A built variant's record: what its build cost, its sizes, where its binaries are published.
fn record_built(
    cx: &Context,
    name: &str,
    record: &mut ExploreVariantRecord,
    done: &Built,
) -> Result<()> {
    record.steps = done.costs.clone();
    record.build_secs = Some(record.steps.iter().map(|c| c.secs).sum());
    record.peak_memory_bytes = record
        .steps
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
                crate::cargo::manifest::loaded_size(&data).ok()
            })
        })
        .sum::<Option<u64>>();
    record.bin_dir = Some(publish(cx, name, &done.compared)?);
    Ok(())
}

/// The recommendation, and what the table means, in words.
fn print_outcome(cx: &Context, result: &ExploreResult) {
    if let Some(stopped) = &result.stopped {
        cx.printer.warn(format!(
            "{stopped}. Run `pgo-build explore` again to continue: what was built and \
             measured is kept, and no variant is recommended until all are measured."
        ));
    }
    for record in &result.variants {
        if record.over_size_limit {
            cx.printer.info(format!(
                "{} is over [pgo] max_size_growth ({:+.1}% over the baseline): not \
                 recommended",
                record.name,
                record.size_change.unwrap_or(0.0) * 100.0
            ));
        }
    }
    if let Some(recommendation) = &result.recommendation {
        cx.printer.info(format!(
            "recommended: {} - {}",
            recommendation.variant, recommendation.evidence
        ));
    }
    if let Some(why) = &result.undecided {
        cx.printer
            .warn(format!("no variant is recommended yet: {why}"));
    }
    cx.printer.info(format!(
        "variants' binaries: {}/<variant>/bin/",
        cx.layout.explore_dir().display()
    ));
}
