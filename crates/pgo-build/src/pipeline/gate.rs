//! `pgo-build gate`: may this build ship? For release CI: the variant that ships (BOLT when
//! enabled, else optimized) must come from a current, complete pipeline (nothing `run` would
//! build again), be proven not slower than the baseline on every held-out workload within
//! `[compare] margin` (a fresh comparison, judged by `[compare] metric`), and pass
//! `[pgo] max_size_growth`. Where the deciding metric leaves a workload open (a busy runner's
//! noise), instruction counts decide it, within `--budget`, and the verdict says so. Each
//! binary is judged by the held-out workloads that run it; one that none runs is unmeasured,
//! not failed. One line per binary, then `target/pgo-build/provenance.json` (written whether
//! it passes or not), and a non-zero exit unless everything passed.

use anyhow::{Context as _, Result, bail};

use super::bundles::merged_bundles;
use super::context::{Context, Session};
use super::release::{
    GateVerdict, PROVENANCE_SCHEMA_VERSION, ProfileRecord, Provenance, ShippedBinary,
    TrainingRecord, shipped_stage,
};
use super::run::stale_steps;
use super::steps::compare::{PREVIOUS, compare};
use crate::cargo::manifest::StageManifest;
use crate::cargo::manifest::loaded_size;
use crate::config::Role;
use crate::exec;
use crate::layout::Stage;
use crate::measure::metric::{CompareRole, Decider, Metric};
use crate::pipeline::requests::{CompareRequest, GateRequest};
use crate::report::{CompareResult, PreviousComparison, decider_label};
use crate::util::units::human_bytes;

pub fn gate(cx: &Context, session: &mut Session, args: &GateRequest) -> Result<()> {
    let shipped = shipped_stage(cx);
    // An earlier gate's verdict never stands for this one's: gone before anything is judged.
    let path = cx.layout.provenance();
    if path.exists() {
        crate::util::files::remove_file(&path)?;
    }
    let judged = judge(cx, session, args, shipped);
    if let Err(err) = &judged
        && !path.exists()
    {
        // Refused before the evidence was gathered: the provenance says so, as it says
        // every other outcome.
        let refused = Provenance {
            failures: vec![format!("{err:#}")],
            ..provenance_without_evidence(cx, shipped)
        };
        let written = serde_json::to_string_pretty(&refused)
            .map_err(anyhow::Error::from)
            .and_then(|text| crate::util::files::write_atomically(&path, text.as_bytes()));
        match written {
            Ok(()) => cx
                .printer
                .info(format!("provenance (refused): {}", path.display())),
            // The refusal is what the job must see; a provenance it could not write is said.
            Err(write_err) => cx.printer.warn(format!(
                "could not write the refused gate's provenance {}: {write_err:#}",
                path.display()
            )),
        }
    }
    judged
}

/// A provenance's who and what, with no evidence and not passed: what a gate that refused
/// before judging writes, and what a judged one fills in.
fn provenance_without_evidence(cx: &Context, shipped: Stage) -> Provenance {
    Provenance {
        schema_version: PROVENANCE_SCHEMA_VERSION,
        pgo_build_version: env!("CARGO_PKG_VERSION").to_owned(),
        created: crate::util::printer::utc_text(std::time::SystemTime::now()),
        passed: false,
        failures: Vec::new(),
        workspace: cx.workspace.root.clone(),
        git_revision: crate::profiles::bundle::git_revision(&cx.workspace.root, &cx.printer),
        target: cx.platform.triple.clone(),
        variant: shipped.name().to_owned(),
        rustc: cx.rustc.version_line.clone(),
        llvm_version: cx.rustc.llvm_version.clone(),
        c_compiler: None,
        profile: None,
        training: Vec::new(),
        binaries: Vec::new(),
        metric: "-".to_owned(),
        margin: cx.config.compare.margin(),
        max_size_growth: cx
            .config
            .pgo
            .max_size_growth
            .as_ref()
            .map(|g| g.text.clone()),
        verdicts: Vec::new(),
    }
}

/// The shipped binaries against the last release on each holdout workload, judged by what
/// judged the same workload against the baseline.
fn add_previous_verdicts(
    comparison: &CompareResult,
    shipped: Stage,
    margin: f64,
    verdicts: &mut Vec<GateVerdict>,
) {
    for PreviousComparison {
        workload,
        candidate,
        summary,
    } in comparison.previous.clone()
    {
        let holdout = comparison
            .workloads
            .iter()
            .any(|w| w.workload == workload && w.role == Role::Holdout);
        if Stage::from_variant(&candidate) != Some(shipped) || !holdout {
            continue;
        }
        // Judged by what judged the same workload against the baseline, or by instruction
        // counts where they settled it.
        let metric = match &summary.left_open_by {
            Some(_) => decider_label(&Decider::Measured(Metric::Instructions)),
            None => verdicts
                .iter()
                .find(|v| v.workload == workload)
                .map_or_else(|| "-".to_owned(), |v| v.metric.clone()),
        };
        verdicts.push(GateVerdict::judge(
            workload,
            PREVIOUS.to_owned(),
            metric,
            &summary,
            margin,
        ));
    }
}

fn judge(cx: &Context, session: &mut Session, args: &GateRequest, shipped: Stage) -> Result<()> {
    let counting_budget = args
        .budget
        .as_deref()
        .map(|text| {
            crate::config::parse_duration(text).map_err(|err| anyhow::anyhow!("--budget: {err}"))
        })
        .transpose()?;
    let holdout: Vec<String> = cx.config.workload_names(Role::Holdout);
    if holdout.is_empty() {
        bail!(
            "the gate needs held-out workloads to judge the build on: add a [[workload]] with \
             role = \"holdout\" to {}",
            cx.config.display_path()
        );
    }
    let mut failures = Vec::new();
    let stale = stale_steps(cx, session)?;
    for reason in &stale {
        failures.push(format!("stale: {reason}"));
    }
    let manifest = StageManifest::load(
        &cx.layout,
        shipped,
        "run `pgo-build run` first (the gate judges what it staged), or, in a gate job that \
         builds nothing, unpack what the release job packed (`pgo-build pack shipped`)",
    )?;
    let compare_request = CompareRequest {
        rounds: args.rounds,
        role: Some(CompareRole::Holdout),
        metric: args.metric.clone(),
        against: args.against.clone(),
        counting_budget,
        ..CompareRequest::of(
            vec![Stage::Baseline.name().to_owned(), shipped.name().to_owned()],
            holdout.clone(),
        )
    };
    // Stale outputs are not worth measuring: the verdict would be about other binaries.
    let comparison = if stale.is_empty() {
        Some(compare(cx, session, &compare_request)?)
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
        add_previous_verdicts(comparison, shipped, margin, &mut verdicts);
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
    let mut binaries = shipped_binaries(cx, &manifest, &mut failures)?;
    for binary in &mut binaries {
        binary.measured_by = measured_by(cx, comparison.as_ref(), &binary.name);
    }
    let provenance = Provenance {
        passed: failures.is_empty(),
        failures: failures.clone(),
        c_compiler: manifest.settings.c.as_ref().map(|c| c.version.clone()),
        profile: profile_record(cx, &manifest)?,
        training: training_records(cx, session)?,
        binaries,
        metric: comparison
            .as_ref()
            .map_or_else(|| "-".to_owned(), |c| decider_label(&c.decider())),
        margin,
        verdicts,
        ..provenance_without_evidence(cx, shipped)
    };
    let path = cx.layout.provenance();
    crate::util::files::write_atomically(
        &path,
        serde_json::to_string_pretty(&provenance)?.as_bytes(),
    )?;
    print_gate(cx, &provenance);
    cx.printer.info(format!("provenance: {}", path.display()));
    if !provenance.passed {
        if comparison.is_some() {
            session
                .report
                .fail_last_compare_run(&format!("the gate refused: {}", failures[0]));
        }
        bail!(
            "the gate refuses the {} binaries:\n  - {}",
            shipped.name(),
            failures.join("\n  - ")
        );
    }
    Ok(())
}

/// The held-out workloads that run `binary`: as the comparison found (what their commands
/// name and what their warm-up ran), else as their commands name it (see
/// `exec::binaries_run`); a workload that may run any binary runs each.
fn measured_by(cx: &Context, comparison: Option<&CompareResult>, binary: &str) -> Vec<String> {
    let bins: Vec<&str> = cx.bins.iter().map(|b| b.name.as_str()).collect();
    cx.config
        .workloads_with_role(Role::Holdout)
        .filter(|w| {
            let found = comparison
                .and_then(|c| c.workloads.iter().find(|c| c.workload == w.name()))
                .map(|c| c.binaries.clone())
                .unwrap_or_else(|| {
                    exec::binaries_run(w, &bins, &cx.workspace.root)
                        .map(|set| set.into_iter().collect())
                });
            found.is_none_or(|run| run.iter().any(|b| b == binary))
        })
        .map(|w| w.name().to_owned())
        .collect()
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
            measured_by: Vec::new(),
        });
    }
    Ok(shipped)
}

/// The profile the optimized build used (`-Cprofile-use=`), with its hash.
fn profile_record(cx: &Context, manifest: &StageManifest) -> Result<Option<ProfileRecord>> {
    let optimized = match manifest.stage {
        Stage::Optimized => manifest.clone(),
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
fn training_records(cx: &Context, session: &Session) -> Result<Vec<TrainingRecord>> {
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
            // The report's record, else the run's own durable one (a report removed or
            // rewritten since, a CI job that restored only the stages).
            status: session
                .report
                .training
                .iter()
                .find(|w| w.name == workload.run_name() && w.stage == Stage::Instrumented)
                .map(|w| w.status.clone())
                .or_else(|| {
                    crate::profiles::training_record::TrainingRecord::status_in(
                        &cx.layout.raw_profiles_dir().join(workload.run_name()),
                    )
                })
                .unwrap_or_else(|| "unknown".to_owned()),
        })
        .collect())
}

/// One line per binary: passed, failed or unmeasured, with the evidence of the workloads
/// that run it.
fn print_gate(cx: &Context, provenance: &Provenance) {
    for binary in &provenance.binaries {
        let evidence: Vec<String> = provenance
            .verdicts
            .iter()
            .filter(|v| binary.measured_by.contains(&v.workload))
            .map(|v| {
                format!(
                    "`{}` vs {} by {}{}: {}",
                    v.workload,
                    v.against,
                    v.metric,
                    v.left_open_by
                        .as_ref()
                        .map(|by| format!(" (left open by {by})"))
                        .unwrap_or_default(),
                    v.detail
                )
            })
            .collect();
        let size = match binary.baseline_loaded_bytes {
            Some(reference) => format!(
                "loaded size {} -> {} ({:+.1}%)",
                human_bytes(reference),
                human_bytes(binary.loaded_bytes),
                (binary.loaded_bytes as f64 / reference.max(1) as f64 - 1.0) * 100.0
            ),
            None => format!("loaded size {}", human_bytes(binary.loaded_bytes)),
        };
        let measured = provenance
            .verdicts
            .iter()
            .any(|v| binary.measured_by.contains(&v.workload));
        let verdicts_pass = provenance
            .verdicts
            .iter()
            .filter(|v| binary.measured_by.contains(&v.workload))
            .all(|v| v.passed);
        let stale = provenance.failures.iter().any(|f| f.starts_with("stale: "));
        let state = if !binary.passed || !verdicts_pass || stale {
            "FAIL"
        } else if measured {
            "PASS"
        } else {
            "PASS (unmeasured)"
        };
        cx.printer.info(format!(
            "gate: {state} {} ({}): {}; {}",
            binary.name,
            provenance.variant,
            if stale && provenance.verdicts.is_empty() {
                "not measured (stale)".to_owned()
            } else if binary.measured_by.is_empty() {
                "no held-out workload runs it, so no speed is claimed for it".to_owned()
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
        .filter(|w| w.role == Role::Holdout)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The answer and the gate judge the same comparison by the same rule: where the gate
    /// passes the optimized build, the answer ships it or says it is not slower beyond the
    /// margin; where the gate refuses it, the answer says not to ship it or that it is not
    /// proven yet. Over every kind of outcome (faster, the same, not slower, open, slower, a
    /// proven slowdown within the margin).
    #[test]
    fn the_answer_and_the_gate_agree_on_every_outcome() {
        let cases: [&[f64]; 6] = [
            &[0.8, 0.79, 0.81, 0.8, 0.78, 0.82, 0.8, 0.8, 0.79, 0.81],
            &[
                1.0, 1.004, 0.996, 1.002, 0.998, 1.001, 0.999, 1.0, 1.003, 0.997,
            ],
            &[0.9, 0.95, 1.01, 0.92, 1.005, 0.97, 0.88, 1.0, 0.93, 1.01],
            &[0.8, 1.2, 0.9, 1.15, 0.85, 1.1, 0.95, 1.05, 0.9, 1.12],
            &[1.2, 1.22, 1.19, 1.21, 1.2, 1.23, 1.2, 1.21, 1.19, 1.2],
            &[
                1.011, 1.012, 1.009, 1.01, 1.011, 1.012, 1.01, 1.009, 1.011, 1.01,
            ],
        ];
        let (mut passed, mut refused) = (0, 0);
        for ratios in cases {
            let report = crate::report::answer::fixtures::report(ratios, ratios, 1000);
            let comparison = report.compare.as_ref().unwrap();
            let verdicts = gate_verdicts(comparison, Stage::Optimized, comparison.margin);
            assert_eq!(verdicts.len(), 2);
            let gate_passes = verdicts.iter().all(|v| v.passed);
            let answer = crate::report::answer::answer(&report).unwrap();
            let ships = ["Ship ", "No measurable difference", "No proven gain"]
                .iter()
                .any(|start| answer.headline.starts_with(start));
            let refuses = ["Do not ship", "Not proven yet"]
                .iter()
                .any(|start| answer.headline.starts_with(start));
            assert!(ships != refuses, "{}", answer.headline);
            assert_eq!(
                gate_passes,
                ships,
                "{ratios:?}: the gate {} but the answer says {:?} ({:?})",
                if gate_passes { "passes" } else { "refuses" },
                answer.headline,
                verdicts.iter().map(|v| &v.detail).collect::<Vec<_>>()
            );
            if gate_passes {
                passed += 1;
            } else {
                refused += 1;
            }
        }
        // Both kinds of outcome were judged.
        assert_eq!((passed, refused), (3, 3));
    }
}
