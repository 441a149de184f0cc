//! `pgo-build export`: the merged profile of the last training, with its metadata and the
//! rustc peaks this target directory measured, written where a repository commits it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};

use super::profile_inputs::{last_training, merge_into};
use crate::layout::Stage;
use crate::pipeline::bundles::merged_bundles;
use crate::pipeline::committed::{self, ProfileMetadata, metadata_path};
use crate::pipeline::context::{Context, Session};
use crate::pipeline::requests::ExportRequest;
use crate::profiles::{self, insight};
use crate::util::files::write_atomically;
use crate::wrappers::rustc::{self, estimates};

/// Adds the rustc peaks this target directory measured (every cargo stage's) to the carried
/// file at `path`, for `[build] rustc_estimates` elsewhere.
fn export_rustc_estimates(cx: &Context, path: &Path) -> Result<()> {
    let mut stages = Vec::new();
    for stage in [Stage::Baseline, Stage::Instrumented, Stage::Optimized] {
        // A damaged stage file is rewritten by the stage's next build; the others go out.
        match rustc::read_estimates(&cx.layout.rustc_estimates(stage)) {
            Ok(stored) => stages.push((stage.name(), stored)),
            Err(err) => cx.caution(format!(
                "{err:#}: the {} stage's estimates are not exported ({} keeps what it \
                 carried for that stage)",
                stage.name(),
                path.display()
            ))?,
        }
    }
    let (measured, carried) =
        estimates::export(path, &cx.settings.target, &cx.settings.rustc, &stages)?;
    if measured == 0 {
        cx.caution(format!(
            "no rustc peaks are measured in {} yet (run a build first; behind sccache only \
             its cache misses compile, and only they are measured): {} keeps what it \
             carried",
            cx.layout.root().display(),
            path.display()
        ))?;
    }
    cx.printer.info(format!(
        "wrote the rustc estimates of {carried} crates to {} ({measured} measured here, for \
         {}); use it with [build] rustc_estimates",
        path.display(),
        cx.settings.target
    ));
    Ok(())
}

/// Writes the merged training profile and its metadata.
pub fn export(cx: &Context, session: &mut Session, args: &ExportRequest) -> Result<()> {
    if let Some(path) = &args.rustc_estimates {
        export_rustc_estimates(cx, path)?;
    }
    let Some(output) = &args.output else {
        return Ok(());
    };
    let TrainingToExport {
        settings,
        workloads,
        inputs,
    } = training_to_export(cx, session)?;
    if inputs.is_empty() {
        bail!("there is no usable training profile to export: run `pgo-build train` first");
    }
    let inputs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    let output = if output.is_absolute() {
        output.clone()
    } else {
        std::env::current_dir()?.join(output)
    };
    check_export_output(&output)?;
    if settings.rustc != cx.rustc.version_line {
        bail!(
            "refusing to export: the profile was trained with {}, and this is {}: its metadata \
             would describe the wrong toolchain (and the standard library's names with it). \
             Export with the toolchain that trained it, or train again with this one",
            settings.rustc,
            cx.rustc.version_line
        );
    }
    let name_scheme = crate::wrappers::rustc::stable_names::scheme_of(
        settings.stable_names,
        &settings.common_rustflags,
    );
    // Before anything is written: a probe that fails leaves the export as it was, said.
    let sysroot_crates = match name_scheme {
        2 => committed::sysroot_names(cx)
            .map(|names| names.crates)
            .unwrap_or_else(|err| {
                cx.printer.warn(format!(
                    "{err:#}; the profile is exported without them, and a build with another rustc \
                 will not find its records of the standard library's generics"
                ));
                Default::default()
            }),
        _ => Default::default(),
    };
    let data = write_merged(cx, &inputs, &output)?;
    let counted = insight::functions(&output, cx.profdata()?, &cx.printer)?;
    let functions = counted.len();
    // Per-file hashes only for crates with a share worth predicting (0.1% of the counts).
    let total: u64 = counted.iter().map(|f| f.total).sum();
    let mut per_crate: BTreeMap<&str, u64> = BTreeMap::new();
    for function in &counted {
        *per_crate.entry(function.krate.as_str()).or_default() += function.total;
    }
    let hot: std::collections::BTreeSet<String> = per_crate
        .into_iter()
        .filter(|(_, counts)| *counts as f64 >= total as f64 * 0.001)
        .map(|(krate, _)| krate.to_owned())
        .collect();
    let mut sources = cx
        .workspace
        .package_sources(&cx.settings.target, &cx.printer)?;
    crate::profiles::prediction::fingerprint_functions(&counted, &mut sources, 0.001);
    sources.keep_files_of(&hot);
    let metadata = ProfileMetadata {
        pgo_build_version: env!("CARGO_PKG_VERSION").to_owned(),
        rustc: cx.rustc.version_line.clone(),
        llvm_version: cx.rustc.llvm_version.clone(),
        llvm_major: cx.rustc.llvm_major,
        target: cx.settings.target.clone(),
        cargo_profile: settings.profile.clone(),
        rustflags: settings.common_rustflags.clone(),
        workloads,
        source_revision: crate::profiles::bundle::git_revision(&cx.workspace.root, &cx.printer),
        content_hash: profiles::content_hash(&data),
        functions,
        stable_names: settings.stable_names,
        name_scheme,
        sysroot_crates,
        sources: Some(sources),
    };
    let metadata_file = metadata_path(&output);
    write_atomically(
        &metadata_file,
        serde_json::to_string_pretty(&metadata)?.as_bytes(),
    )?;
    if args.internal {
        cx.printer.detail(format!(
            "exported {} ({functions} functions)",
            output.display()
        ));
        return Ok(());
    }
    cx.printer.info(format!(
        "exported {} ({} functions) and {}; commit both and set [pgo] profile = \"{}\" in {}",
        output.display(),
        functions,
        metadata_file.display(),
        output
            .strip_prefix(&cx.workspace.root)
            .unwrap_or(&output)
            .display(),
        cx.config.display_path()
    ));
    Ok(())
}

/// What is exported: the training's build settings, the workload runs that trained, and the
/// profiles to merge.
struct TrainingToExport {
    settings: crate::cargo::settings::BuildSettings,
    workloads: Vec<String>,
    inputs: Vec<PathBuf>,
}

/// The profile `pgo-build merge` made from other machines' bundles, or else the last local
/// training (refused when the sources changed since); binaries without data are cautioned.
fn training_to_export(cx: &Context, session: &Session) -> Result<TrainingToExport> {
    Ok(match merged_bundles(cx)? {
        // The profile `pgo-build merge` made from other machines' bundles.
        Some(record) => {
            for (binary, figures) in &record.per_binary {
                if figures.valid_files == 0 {
                    cx.caution(format!(
                        "`{binary}` has no profile data; the exported profile does not cover it"
                    ))?;
                }
            }
            let workloads = record
                .bundles
                .iter()
                .flat_map(|b| b.workloads.iter().map(|w| w.run.clone()))
                .collect();
            TrainingToExport {
                settings: record.instrumented.settings,
                workloads,
                inputs: vec![record.merge.merged.path],
            }
        }
        None => {
            let (instrumented, accounting) = last_training(cx)?;
            instrumented.check_sources_current(
                &cx.workspace.root,
                &[
                    cx.layout.root(),
                    &crate::profiles::checkout_independent_dir(),
                ],
                "refusing to export the training profile",
                "The profile describes the code training ran; train the code of now \
                 (`pgo-build instrument` and `pgo-build train`, or `pgo-build run`), then \
                 export.",
            )?;
            for (binary, figures) in &accounting.per_binary {
                if figures.valid_files == 0 {
                    cx.caution(format!(
                        "`{binary}` has no profile data; the exported profile does not cover it"
                    ))?;
                }
            }
            let runs = cx.config.train_runs();
            let workloads = session
                .report
                .training
                .iter()
                // Holdout runs of `profile overlap` are recorded too, but did not train.
                .filter(|w| {
                    w.stage == Stage::Instrumented
                        && w.success
                        && runs.iter().any(|run| run.run_name() == w.name)
                })
                .map(|w| w.name.clone())
                .collect();
            let inputs = accounting
                .valid_inputs()
                .into_iter()
                .map(Path::to_owned)
                .collect();
            TrainingToExport {
                settings: instrumented.settings,
                workloads,
                inputs,
            }
        }
    })
}

/// `inputs` merged into `output` (its bytes returned): a failed merge or rename leaves no
/// `.partial` behind, and the file it would replace as it was.
fn write_merged(cx: &Context, inputs: &[&Path], output: &Path) -> Result<Vec<u8>> {
    let partial = output.with_extension("profdata.partial");
    let written = merge_into(cx, inputs, &partial).and_then(|()| {
        let data = crate::util::files::read(&partial)?;
        std::fs::rename(&partial, output)
            .with_context(|| format!("could not write {}", output.display()))?;
        Ok(data)
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    written
}

/// Refuses an `export --output` that would overwrite its own metadata (`profile.json`: the
/// metadata is the profile's name with `.json`) or that names a directory.
fn check_export_output(output: &Path) -> Result<()> {
    if output.is_dir() {
        bail!(
            "export --output {}: a directory; name the profile file in it (e.g. {})",
            output.display(),
            output.join("profile.profdata").display()
        );
    }
    if metadata_path(output) == output {
        bail!(
            "export --output {}: the profile's metadata is written beside it under the same \
             name with .json, which is this file: the two would overwrite each other. Name the \
             profile with .profdata (e.g. {})",
            output.display(),
            output.with_extension("profdata").display()
        );
    }
    Ok(())
}
