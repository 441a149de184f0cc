//! Measuring the built variants on the holdout workloads, against the baseline and `pgo`, in
//! the same rounds as their references, through `compare`'s machinery; measurements cached
//! in `explore/measurements.json` by what they measured.

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use super::builds::Clock;
use super::race;
use super::variants::{BASELINE, PGO};
use crate::config::{self, Role};
use crate::measure::metric::{Decider, Metric};
use crate::pipeline::context::Context;
use crate::pipeline::steps::compare::{Compared, run_once};
use crate::report::VariantStatus;
use crate::report::{ExploreSpeed, ExploreVariantRecord};
use crate::util::files::write_atomically;
use crate::util::fingerprint::Fingerprint;

/// `explore/measurements.json`: each variant's last measurement, by the key of what it
/// measured.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct Measurements {
    variants: BTreeMap<String, Measurement>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Measurement {
    key: String,
    vs_baseline: ExploreSpeed,
    vs_pgo: Option<ExploreSpeed>,
    /// The rounds it ran (racing stops a decided variant early).
    #[serde(default)]
    rounds: usize,
}

/// What a measurement of `variant` depends on: the builds compared, the workloads, what
/// decides and the rounds. A measurement under another key is measured again.
fn measurement_key(
    variant: &Compared,
    (baseline, pgo): (&Compared, &Compared),
    workloads: &[config::Workload],
    decider: &Decider,
    rounds: usize,
) -> String {
    let mut print = Fingerprint::new("explore measurement");
    for (label, id) in [
        ("variant", &variant.manifest.id),
        ("baseline", &baseline.manifest.id),
        ("pgo", &pgo.manifest.id),
    ] {
        print.text(label, id);
    }
    for workload in workloads {
        print.text("workload", &workload.fingerprint());
    }
    // Keys made before workload metrics existed stay valid.
    match decider {
        Decider::Measured(metric) => print.text("metric", &format!("{metric:?}")),
        Decider::Reported(name) => print.text("metric", &format!("reported {name}")),
    };
    print.text("rounds", &rounds.to_string());
    print.finish()
}

/// Each built variant's record from its measurement under the current key (the baseline is
/// measured by definition; a failed variant keeps its failure).
fn apply_measurements(
    records: &mut [ExploreVariantRecord],
    built: &BTreeMap<String, Compared>,
    cache: &Measurements,
    key_of: &dyn Fn(&Compared) -> String,
) {
    for record in records.iter_mut() {
        if record.name == BASELINE && built.contains_key(BASELINE) {
            record.status = VariantStatus::Measured;
            continue;
        }
        let Some(variant) = built.get(&record.name) else {
            continue;
        };
        if record.status == VariantStatus::Failed {
            continue;
        }
        if let Some(measurement) = cache
            .variants
            .get(&record.name)
            .filter(|m| m.key == key_of(variant))
        {
            record.status = VariantStatus::Measured;
            record.detail = None;
            record.vs_baseline = Some(measurement.vs_baseline.clone());
            record.vs_pgo = measurement.vs_pgo.clone();
            record.rounds = (measurement.rounds > 0).then_some(measurement.rounds);
        }
    }
}

/// Measures the built variants that have no current measurement: first one run of every
/// holdout workload each (a variant that fails one is refused), then paired, interleaved
/// rounds of them with `baseline` and `pgo`.
pub(super) fn measure_variants(
    cx: &Context,
    built: &BTreeMap<String, Compared>,
    records: &mut [ExploreVariantRecord],
    decider: &Decider,
    rounds: usize,
    clock: &Clock,
) -> Result<()> {
    let (Some(baseline), Some(pgo)) = (built.get(BASELINE), built.get(PGO)) else {
        bail!("explore needs the baseline and pgo variants built to measure the others");
    };
    let workloads: Vec<config::Workload> = cx
        .config
        .workloads_with_role(Role::Holdout)
        .cloned()
        .collect();
    let key_of =
        |variant: &Compared| measurement_key(variant, (baseline, pgo), &workloads, decider, rounds);
    let path = cx.layout.explore_dir().join("measurements.json");
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
        cx.printer.info(format!(
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
        let refused = check_correctness(cx, &measured, &workloads)?;
        for (name, reason) in &refused {
            let record = records
                .iter_mut()
                .find(|r| &r.name == name)
                .expect("every measured variant has a record");
            record.status = VariantStatus::Failed;
            record.detail = Some(reason.clone());
        }
        measured.retain(|v| !refused.contains_key(&v.name));
        let margin = cx.config.compare.margin();
        let (outcome, pace) =
            race::race_variants(cx, &measured, &workloads, decider, rounds, clock)?;
        let mut standings = outcome.standings;
        let undecided: Vec<String> = standings
            .iter()
            .filter(|(_, standing)| standing.undecided())
            .map(|(name, _)| name.clone())
            .collect();
        if let Some(why) = &outcome.cut_short {
            cx.printer.warn(format!("explore: {why}"));
        }
        if !undecided.is_empty() && matches!(decider, Decider::Measured(Metric::Wall | Metric::Cpu))
        {
            let by_name: BTreeMap<&str, &Compared> =
                measured.iter().map(|v| (v.name.as_str(), *v)).collect();
            race::count_undecided(
                cx,
                &by_name,
                &undecided,
                &workloads,
                (outcome.rounds, margin),
                (clock, pace),
                &mut standings,
            )?;
        }
        for (name, standing) in standings {
            let variant = &built[name.as_str()];
            cache.variants.insert(
                name,
                Measurement {
                    key: key_of(variant),
                    vs_baseline: standing.vs_baseline,
                    vs_pgo: standing.vs_pgo,
                    rounds: standing.rounds,
                },
            );
        }
        write_atomically(&path, serde_json::to_string_pretty(&cache)?.as_bytes())?;
    }
    apply_measurements(records, built, &cache, &key_of);
    Ok(())
}

/// Runs every holdout workload once against each variant. Variants that fail one are
/// refused (returned, by name, with what failed); the references failing is an error.
pub(super) fn check_correctness(
    cx: &Context,
    variants: &[&Compared],
    workloads: &[config::Workload],
) -> Result<BTreeMap<String, String>> {
    let mut refused = BTreeMap::new();
    for workload in workloads.iter().filter(|w| !w.allow_failure) {
        for variant in variants {
            if refused.contains_key(&variant.name) {
                continue;
            }
            let outcome = run_once(cx, workload, variant)?;
            if outcome.success {
                continue;
            }
            let reason = format!(
                "holdout workload `{}` {} against its binaries. Its output ends with:\n{}\n\
                 Full log: {}",
                workload.name(),
                outcome.status,
                crate::exec::log_tail(&outcome.log_path, 10),
                outcome.log_path.display()
            );
            if variant.name == BASELINE || variant.name == PGO {
                bail!(
                    "the `{}` variant failed: {reason}\nEvery other variant is measured \
                     against it; fix the workload first.",
                    variant.name
                );
            }
            cx.caution(format!(
                "variant `{}` is refused: {reason}\nIts binaries do not do what the \
                 baseline's do, so it is neither measured nor recommended.",
                variant.name
            ))?;
            refused.insert(variant.name.clone(), reason);
        }
    }
    Ok(refused)
}
