//! `pgo-build profile overlap`: how well training covers held-out work, by the edge-profile
//! overlap of their profiles per binary, with the functions holdout runs that training misses.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use comfy_table::Table;

use super::profile_inputs::merge_into;
use crate::cargo::manifest::StageManifest;
use crate::config::Role;
use crate::layout::Stage;
use crate::pipeline::context::{Context, Session};
use crate::pipeline::requests::OverlapRequest;
use crate::pipeline::trained::{account, account_dirs};
use crate::pipeline::workload_runs::{Training, instrumented_profile_env, run_training};
use crate::profiles::{self, Accounting, insight};
use crate::util::command::Cmd;
use crate::util::printer::Fitted;

/// The holdout workloads `profile overlap` runs; none is an error.
fn holdout_workloads(cx: &Context) -> Result<Vec<crate::config::Workload>> {
    let holdout: Vec<_> = cx
        .config
        .workloads_with_role(Role::Holdout)
        .cloned()
        .collect();
    if holdout.is_empty() {
        bail!(
            "there are no holdout workloads in {} to compare training with",
            cx.config.display_path()
        );
    }
    Ok(holdout)
}

/// The edge-profile overlap of one binary's training profiles with its holdout ones, merged
/// each into `scratch`, and the functions holdout runs that training misses.
fn measure_overlap(
    cx: &Context,
    name: &str,
    (train_inputs, test_inputs): (&[PathBuf], &[PathBuf]),
    scratch: &Path,
    top: usize,
) -> Result<crate::report::OverlapRecord> {
    let profdata = cx.profdata()?;
    // Overlap is only meaningful between profiles of the same instrumented binary.
    let base = scratch.join(format!("overlap-{}-train.profdata", name));
    let probe = scratch.join(format!("overlap-{}-holdout.profdata", name));
    merge_into(
        cx,
        &train_inputs
            .iter()
            .map(PathBuf::as_path)
            .collect::<Vec<_>>(),
        &base,
    )?;
    merge_into(
        cx,
        &test_inputs.iter().map(PathBuf::as_path).collect::<Vec<_>>(),
        &probe,
    )?;
    let text = Cmd::new(&profdata.path)
        .arg("overlap")
        .arg(&base)
        .arg(&probe)
        .stdout_checked(&cx.printer)?;
    let overlap = parse_edge_overlap(&text)
        .with_context(|| format!("`llvm-profdata overlap` printed no edge overlap:\n{text}"))?;
    let missed = insight::missed_by(
        &insight::functions(&base, profdata, &cx.printer)?,
        &insight::functions(&probe, profdata, &cx.printer)?,
        top,
    );
    Ok(crate::report::OverlapRecord {
        edge_overlap: overlap,
        min_overlap: Some(cx.config.pgo.min_overlap()),
        missed_by_training: missed,
    })
}

/// Runs the holdout workloads against the instrumented binaries into a profile of their
/// own and reports, per binary, how well training's profile represents it.
pub fn profile_overlap(cx: &Context, session: &mut Session, args: &OverlapRequest) -> Result<()> {
    let instrumented = StageManifest::load(
        &cx.layout,
        Stage::Instrumented,
        "run `pgo-build instrument` and `pgo-build train` first",
    )?;
    instrumented.check_staged(Stage::Instrumented.name(), "instrument")?;
    let holdout = holdout_workloads(cx)?;
    // Training's profile first: a holdout run against an incomplete one would be wasted.
    let train = account(cx, &instrumented)?;
    let holdout_raw = cx.layout.profiles_dir().join("holdout-raw");
    if holdout_raw.exists() {
        // Holdout workloads removed since the last overlap must not count.
        std::fs::remove_dir_all(&holdout_raw)
            .with_context(|| format!("could not remove {}", holdout_raw.display()))?;
    }
    let continuous = instrumented.continuous();
    run_training(
        cx,
        session,
        Training {
            stage: Stage::Instrumented,
            manifest: &instrumented,
            workloads: &holdout,
            log_prefix: "holdout",
            prepare: &|workload| instrumented_profile_env(&holdout_raw, continuous, workload),
            finish: &|_, _| Ok(()),
        },
    )?;

    let test = account_dirs(cx, &profiles::workload_dirs(&holdout_raw), &instrumented)?;
    cx.profdata()?;
    let scratch = cx.layout.profiles_dir().join("scratch");
    let threshold = cx.config.pgo.min_overlap();
    let mut table = Table::new();
    table.fitted().set_header([
        "Binary",
        "Edge profile overlap",
        "Hot in holdout, cold or absent in training",
    ]);
    session.report.overlap.clear();
    let mut warnings = Vec::new();
    for bin in cx.bins.clone() {
        // A binary's own files, and those of cargo workloads' bench/test binaries, whose
        // library functions carry the same names as the binary's.
        let inputs = |accounting: &Accounting| -> Vec<PathBuf> {
            let cargo = accounting.cargo_inputs();
            accounting
                .valid_inputs_of(&bin.name)
                .into_iter()
                .chain(cargo.values().flatten().copied())
                .map(Path::to_owned)
                .collect()
        };
        let (train_inputs, test_inputs) = (inputs(&train), inputs(&test));
        if train_inputs.is_empty() || test_inputs.is_empty() {
            let missing = if train_inputs.is_empty() {
                "training"
            } else {
                "holdout"
            };
            table.add_row([
                bin.name.clone(),
                format!("- (no {missing} profile)"),
                String::new(),
            ]);
            continue;
        }
        let record = measure_overlap(
            cx,
            &bin.name,
            (&train_inputs, &test_inputs),
            &scratch,
            args.top,
        )?;
        let (overlap, missed) = (record.edge_overlap, &record.missed_by_training);
        let listed: Vec<String> = missed
            .iter()
            .map(|m| {
                format!(
                    "{} ({:.1}% of holdout)",
                    crate::util::units::shortened(&m.name, 70),
                    m.test_share * 100.0
                )
            })
            .collect();
        table.add_row([
            bin.name.clone(),
            format!("{:.1}%", overlap * 100.0),
            listed
                .iter()
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n"),
        ]);
        warnings.extend(overlap_warnings(&bin.name, &record, &listed, threshold));
        session.begin_outputs(cx)?;
        session.report.overlap.insert(bin.name.clone(), record);
    }
    cx.printer.table(crate::util::printer::rendered(table));
    for warning in warnings {
        cx.caution(warning)?;
    }
    Ok(())
}

/// What the overlap of one binary warns of: training that represents the held-out work
/// poorly (under `threshold`, `[pgo] min_overlap`), and, judged where it matters too, a hot
/// held-out function training left cold, which a high share of overlap elsewhere hides.
/// `listed`: the missed functions as the table names them.
fn overlap_warnings(
    binary: &str,
    record: &crate::report::OverlapRecord,
    listed: &[String],
    threshold: f64,
) -> Vec<String> {
    let overlap = record.edge_overlap;
    let mut warnings = Vec::new();
    let cold: Vec<&str> = record
        .missed_by_training
        .iter()
        .zip(listed)
        .filter(|(m, _)| m.left_cold())
        .map(|(_, said)| said.as_str())
        .collect();
    if overlap >= threshold && !cold.is_empty() {
        warnings.push(format!(
            "training leaves cold what holdout runs most in `{binary}`: {}; the {:.1}% \
             edge-profile overlap is above {:.0}% ([pgo] min_overlap), but PGO lays such \
             functions out as cold: a train workload doing what the holdout does covers them",
            cold.join(", "),
            overlap * 100.0,
            threshold * 100.0
        ));
    }
    if overlap < threshold {
        warnings.push(format!(
            "training represents holdout poorly for `{binary}`: edge-profile overlap {:.1}% is \
             below {:.0}% ([pgo] min_overlap). Functions training misses: {}",
            overlap * 100.0,
            threshold * 100.0,
            if listed.is_empty() {
                "none stand out".to_owned()
            } else {
                listed.join(", ")
            }
        ));
    }
    warnings
}

/// "Edge profile overlap: 88.077%" → 0.88077.
fn parse_edge_overlap(text: &str) -> Option<f64> {
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("Edge profile overlap:"))?;
    let value = line.split(':').nth(1)?.trim().trim_end_matches('%');
    Some(value.parse::<f64>().ok()? / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edge_overlap_is_parsed() {
        let text =
            "Program level:\n  # of functions overlap: 219\n  Edge profile overlap: 88.077%\n";
        assert!((parse_edge_overlap(text).unwrap() - 0.88077).abs() < 1e-9);
        assert_eq!(parse_edge_overlap("nothing"), None);
    }
}
