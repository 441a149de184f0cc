//! `pgo-build gate`: may this build ship? For release CI: the variant that ships (BOLT when
//! enabled, else optimized) must come from a current, complete pipeline (nothing `run` would
//! build again), be proven not slower than the baseline on every held-out workload within
//! `[compare] margin` (a fresh comparison, judged by `[compare] metric`), and pass
//! `[pgo] max_size_growth`. One line per binary, then `target/pgo-build/provenance.json`
//! (written whether it passes or not), and a non-zero exit unless everything passed.

use anyhow::{Context as _, Result, bail};

use super::bundles::merged_bundles;
use super::compare::{PREVIOUS, against_previous, compare};
use super::context::{Context, Run};
use super::release::{
    GateVerdict, PROVENANCE_SCHEMA_VERSION, ProfileRecord, Provenance, ShippedBinary,
    TrainingRecord,
};
use super::run::stale_steps;
use crate::cargo::manifest::StageManifest;
use crate::cargo::manifest::loaded_size;
use crate::cli::{CompareArgs, CompareRole, GateArgs};
use crate::config::Role;
use crate::layout::Stage;
use crate::report::{CompareResult, decider_label};
use crate::util::units::human_bytes;

pub fn gate(cx: &Context, run: &mut Run, args: &GateArgs) -> Result<()> {
    let shipped = if cx.config.bolt.enabled {
        Stage::Bolt
    } else {
        Stage::Optimized
    };
    let holdout: Vec<String> = cx.config.workload_names(Role::Holdout);
    if holdout.is_empty() {
        bail!(
            "the gate needs held-out workloads to judge the build on: add a [[workload]] with \
             role = \"holdout\" to {}",
            cx.config.display_path()
        );
    }
    let mut failures = Vec::new();
    let stale = stale_steps(cx, run)?;
    for reason in &stale {
        failures.push(format!("stale: {reason}"));
    }
    let manifest = StageManifest::load(
        &cx.layout,
        shipped,
        "run `pgo-build run` first (the gate judges what it staged)",
    )?;
    // Stale outputs are not worth measuring: the verdict would be about other binaries.
    let comparison = if stale.is_empty() {
        Some(compare(
            cx,
            run,
            &CompareArgs {
                variants: vec![Stage::Baseline.name().to_owned(), shipped.name().to_owned()],
                rounds: args.rounds,
                workloads: holdout.clone(),
                role: Some(CompareRole::Holdout),
                metric: args.metric.clone(),
                seed: 1,
                fail_if_slower: false,
                against: args.against.clone(),
            },
        )?)
    } else {
        None
    };
    let margin = cx.config.compare.margin();
    let mut verdicts = comparison
        .as_ref()
        .map(|c| gate_verdicts(c, shipped, margin))
        .unwrap_or_default();
    // Against the last release too: from the same rounds.
    if let (Some(comparison), Some(_)) = (&comparison, &args.against) {
        for (workload, candidate, summary) in
            against_previous(comparison, (1, margin), &cx.config.workloads)
        {
            let holdout = comparison
                .workloads
                .iter()
                .any(|w| w.workload == workload && w.role == "holdout");
            if candidate != shipped.name() || !holdout {
                continue;
            }
            // Judged by what judged the same workload against the baseline.
            let metric = verdicts
                .iter()
                .find(|v| v.workload == workload)
                .map_or_else(|| "-".to_owned(), |v| v.metric.clone());
            verdicts.push(GateVerdict::judge(
                workload,
                PREVIOUS.to_owned(),
                metric,
                &summary,
                margin,
            ));
        }
    }
    for verdict in verdicts.iter().filter(|v| !v.passed) {
        failures.push(format!(
            "`{}` against the {}{}: {}",
            verdict.workload,
            verdict.against,
            if verdict.against == PREVIOUS {
                " release"
            } else {
                ""
            },
            verdict.detail
        ));
    }
    let binaries = shipped_binaries(cx, &manifest, &mut failures)?;
    let provenance = Provenance {
        schema_version: PROVENANCE_SCHEMA_VERSION,
        pgo_build_version: env!("CARGO_PKG_VERSION").to_owned(),
        created: crate::util::printer::utc_text(std::time::SystemTime::now()),
        passed: failures.is_empty(),
        failures: failures.clone(),
        workspace: cx.workspace.root.clone(),
        git_revision: crate::profiles::bundle::git_revision(&cx.workspace.root, &cx.printer),
        target: cx.platform.triple.clone(),
        variant: shipped.name().to_owned(),
        rustc: cx.rustc.version_line.clone(),
        llvm_version: cx.rustc.llvm_version.clone(),
        c_compiler: manifest.settings.c.as_ref().map(|c| c.version.clone()),
        profile: profile_record(cx, &manifest)?,
        training: training_records(cx, run)?,
        binaries,
        metric: comparison
            .as_ref()
            .map_or_else(|| "-".to_owned(), |c| decider_label(&c.decider())),
        margin,
        max_size_growth: cx
            .config
            .pgo
            .max_size_growth
            .as_ref()
            .map(|g| g.text.clone()),
        verdicts,
    };
    let path = cx.layout.provenance();
    crate::util::files::write_atomically(
        &path,
        serde_json::to_string_pretty(&provenance)?.as_bytes(),
    )?;
    print_gate(cx, &provenance);
    cx.printer.info(format!("provenance: {}", path.display()));
    if !provenance.passed {
        bail!(
            "the gate refuses the {} binaries:\n  - {}",
            shipped.name(),
            failures.join("\n  - ")
        );
    }
    Ok(())
}

/// Every shipped binary with its hash and size, checked against `[pgo] max_size_growth`.
fn shipped_binaries(
    cx: &Context,
    manifest: &StageManifest,
    failures: &mut Vec<String>,
) -> Result<Vec<ShippedBinary>> {
    let baseline = StageManifest::load(&cx.layout, Stage::Baseline, "").ok();
    let mut shipped = Vec::new();
    for binary in &manifest.binaries {
        let data = std::fs::read(&binary.path)
            .with_context(|| format!("could not read {}", binary.path.display()))?;
        let loaded = loaded_size(&data)?;
        let reference = baseline
            .as_ref()
            .and_then(|b| b.binaries.iter().find(|r| r.name == binary.name))
            .map(|r| match r.loaded_bytes {
                Some(bytes) => Ok(bytes),
                None => std::fs::read(&r.path)
                    .map_err(anyhow::Error::from)
                    .and_then(|d| loaded_size(&d)),
            })
            .transpose()?;
        let mut passed = true;
        if let (Some(limit), Some(reference)) = (&cx.config.pgo.max_size_growth, reference) {
            let growth = loaded as f64 / reference.max(1) as f64 - 1.0;
            if growth > limit.fraction {
                passed = false;
                failures.push(format!(
                    "`{}` grew {} -> {} ({:+.1}%, without debug info and symbols), more than \
                     [pgo] max_size_growth = {:?} allows",
                    binary.name,
                    human_bytes(reference),
                    human_bytes(loaded),
                    growth * 100.0,
                    limit.text
                ));
            }
        }
        shipped.push(ShippedBinary {
            name: binary.name.clone(),
            path: binary.path.clone(),
            sha256: crate::util::files::sha256_hex(&data),
            size_bytes: data.len() as u64,
            loaded_bytes: loaded,
            baseline_loaded_bytes: reference,
            passed,
        });
    }
    Ok(shipped)
}

/// The profile the optimized build used (`-Cprofile-use=`), with its hash.
fn profile_record(cx: &Context, manifest: &StageManifest) -> Result<Option<ProfileRecord>> {
    let optimized = match manifest.stage.as_str() {
        "optimized" => manifest.clone(),
        _ => match StageManifest::load(&cx.layout, Stage::Optimized, "") {
            Ok(optimized) => optimized,
            Err(_) => return Ok(None),
        },
    };
    let Some(path) = optimized
        .stage_rustflags
        .iter()
        .find_map(|flag| flag.strip_prefix("-Cprofile-use="))
    else {
        return Ok(None);
    };
    let path = std::path::PathBuf::from(path);
    Ok(Some(ProfileRecord {
        sha256: crate::util::files::sha256_of(&path)?,
        path,
    }))
}

/// The training the profile came from: merged bundles, or the local train runs.
fn training_records(cx: &Context, run: &Run) -> Result<Vec<TrainingRecord>> {
    if let Some(merged) = merged_bundles(cx)? {
        return Ok(merged
            .bundles
            .iter()
            .map(|b| TrainingRecord {
                name: b.file.display().to_string(),
                fingerprint: format!("shard {}/{}", b.shard.index, b.shard.count),
                status: b
                    .workloads
                    .iter()
                    .map(|w| format!("{}: {}", w.run, w.status))
                    .collect::<Vec<_>>()
                    .join(", "),
            })
            .collect());
    }
    Ok(cx
        .config
        .train_runs()
        .iter()
        .map(|workload| TrainingRecord {
            name: workload.run_name(),
            fingerprint: crate::util::files::sha256_hex(workload.fingerprint().as_bytes()),
            status: run
                .report
                .training
                .iter()
                .find(|w| w.name == workload.run_name() && w.stage == Stage::Instrumented.name())
                .map_or_else(|| "unknown".to_owned(), |w| w.status.clone()),
        })
        .collect())
}

/// One line per binary: passed or not, with the evidence.
fn print_gate(cx: &Context, provenance: &Provenance) {
    let evidence: Vec<String> = provenance
        .verdicts
        .iter()
        .map(|v| {
            format!(
                "`{}` vs {} by {}: {}",
                v.workload, v.against, v.metric, v.detail
            )
        })
        .collect();
    for binary in &provenance.binaries {
        let size = match binary.baseline_loaded_bytes {
            Some(reference) => format!(
                "size {} -> {} ({:+.1}%)",
                human_bytes(reference),
                human_bytes(binary.loaded_bytes),
                (binary.loaded_bytes as f64 / reference.max(1) as f64 - 1.0) * 100.0
            ),
            None => format!("size {}", human_bytes(binary.loaded_bytes)),
        };
        let passed = provenance.passed && binary.passed;
        cx.printer.info(format!(
            "gate: {} {} ({}): {}; {}",
            if passed { "PASS" } else { "FAIL" },
            binary.name,
            provenance.variant,
            if evidence.is_empty() {
                "not measured (stale)".to_owned()
            } else {
                evidence.join("; ")
            },
            size
        ));
    }
}

/// The shipped variant's verdict on every held-out workload of `comparison`.
fn gate_verdicts(comparison: &CompareResult, shipped: Stage, margin: f64) -> Vec<GateVerdict> {
    let decider = comparison.decider();
    comparison
        .workloads
        .iter()
        .filter(|w| w.role == "holdout")
        .filter_map(|w| {
            let candidate = w.candidates.get(shipped.name())?;
            Some(GateVerdict::judge(
                w.workload.clone(),
                comparison.reference.clone(),
                candidate.judged_by(&decider),
                candidate.judged(&decider),
                margin,
            ))
        })
        .collect()
}
