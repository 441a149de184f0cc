//! `--against DIR`: the binaries of the last release (a downloaded artifact) as the `previous`
//! variant, so a release slower than the last one is caught even when it beats its own
//! baseline. They are copied into `target/pgo-build/previous/` (a layout of their own: their
//! logs and bin directory) and measured in the same rounds as the others.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context as _, Result, bail};

use super::summary::summarize_candidates;
use super::variant::Compared;
use crate::cargo::manifest::StageManifest;
use crate::cargo::manifest::StagedBinary;
use crate::layout::{Layout, Stage};
use crate::measure::reported_metrics::MetricSpec;
use crate::pipeline::context::Context;
use crate::report::{CandidatePair, CompareResult, PreviousComparison, decider_label};

/// The variant's name in tables, logs and the report.
pub const PREVIOUS: &str = "previous";

/// `dir`'s binaries as the `previous` variant: every binary `like` has, by name.
pub(in crate::pipeline) fn previous_variant(
    cx: &Context,
    dir: &Path,
    like: &Compared,
) -> Result<Compared> {
    if !dir.is_dir() {
        bail!(
            "--against {}: not a directory (give the directory holding the last release's binaries)",
            dir.display()
        );
    }
    let missing: Vec<&str> = like
        .manifest
        .binaries
        .iter()
        .map(|b| b.name.as_str())
        .filter(|name| !dir.join(name).is_file())
        .collect();
    if !missing.is_empty() {
        bail!(
            "--against {}: the last release has no {} (every binary compared must be there, by name)",
            dir.display(),
            missing.join(", ")
        );
    }
    let layout = Layout::at(cx.layout.root().join(PREVIOUS));
    // The layout's optimized slot holds them (they are somebody's release build).
    let stage = Stage::Optimized;
    let bin_dir = layout.bin_dir(stage);
    if bin_dir.exists() {
        crate::util::files::remove_dir_all(&bin_dir)?;
    }
    crate::util::files::create_dir_all(&bin_dir)?;
    let mut binaries = Vec::new();
    for binary in &like.manifest.binaries {
        let source = dir.join(&binary.name);
        let data = std::fs::read(&source)
            .with_context(|| format!("could not read {}", source.display()))?;
        let path = bin_dir.join(&binary.name);
        crate::util::files::write_atomically(&path, &data)?;
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
        binaries.push(StagedBinary {
            name: binary.name.clone(),
            package: binary.package.clone(),
            path,
            source,
            size_bytes: data.len() as u64,
            loaded_bytes: crate::cargo::manifest::loaded_size(&data).ok(),
            compressed_bytes: None,
            build_id: None,
            pgo: false,
            bolted: false,
            sha256: Some(crate::util::files::sha256_hex(&data)),
        });
    }
    let id = crate::util::files::sha256_hex(
        binaries
            .iter()
            .map(|b| b.sha256.clone().unwrap_or_default())
            .collect::<String>()
            .as_bytes(),
    );
    Ok(Compared {
        name: PREVIOUS.to_owned(),
        stage,
        layout,
        manifest: StageManifest {
            stage,
            settings: like.manifest.settings.clone(),
            stage_rustflags: Vec::new(),
            binaries,
            id: format!("{PREVIOUS}-{}", &id[..16]),
            sources: None,
            upstream: BTreeMap::new(),
        },
        log_prefix: "compare",
        rebuild: "compare --against",
    })
}

/// Each candidate against `previous` on each workload of `result`, from the same rounds,
/// by the figure verdicts rest on (the workload's metrics are in its runs).
pub fn against_previous(
    result: &CompareResult,
    (alpha, margin): (f64, f64),
) -> Vec<PreviousComparison> {
    let candidates: Vec<&str> = result
        .candidates
        .iter()
        .map(String::as_str)
        .filter(|c| *c != PREVIOUS)
        .collect();
    against(result, PREVIOUS, &candidates, (alpha, margin))
        .into_iter()
        .map(|pair| PreviousComparison {
            workload: pair.workload,
            candidate: pair.candidate,
            summary: pair.summary,
        })
        .collect()
}

/// Each of `candidates` against `reference` (another variant of the same rounds) on each
/// workload of `result`, by the figure verdicts rest on (the workload's metrics are in its
/// runs).
pub fn against(
    result: &CompareResult,
    reference: &str,
    candidates: &[&str],
    (alpha, margin): (f64, f64),
) -> Vec<CandidatePair> {
    let decider = result.decider();
    let mut found = Vec::new();
    for workload in &result.workloads {
        let rounds = workload.runs.iter().map(|r| r.round).max().unwrap_or(0);
        // The workload's metrics as its summaries against the reference declared them.
        let metrics: Vec<MetricSpec> = workload
            .candidates
            .values()
            .next()
            .map(|summary| {
                summary
                    .metrics
                    .iter()
                    .map(|(name, m)| {
                        MetricSpec::read_by_pgo_build(name.clone(), m.direction, &m.unit)
                    })
                    .collect()
            })
            .unwrap_or_default();
        let summaries = summarize_candidates(
            &workload.runs,
            reference,
            candidates,
            rounds,
            (alpha, margin),
            result.counter.is_some(),
            &metrics,
        );
        for (candidate, summary) in summaries {
            found.push(CandidatePair {
                workload: workload.workload.clone(),
                candidate,
                reference: reference.to_owned(),
                summary: summary.judged(&decider).clone(),
            });
        }
    }
    found
}

/// The lines `compare --against` prints: each candidate against the last release.
pub fn describe(result: &CompareResult) -> Vec<String> {
    let decider = result.decider();
    result
        .previous
        .iter()
        .map(|p| {
            let s = &p.summary;
            format!(
                "{}: {} vs {PREVIOUS} (the last release), by {}: {}, {}",
                p.workload,
                p.candidate,
                decider_label(&decider),
                crate::measure::stats::change_with_interval(s.median_ratio, s.verdict_interval()),
                crate::report::verdict_text(s, &decider)
            )
        })
        .collect()
}
