//! The bundle a sharded `train --bundle` writes, and `merge`, which turns bundles into the
//! profile `optimize` uses.
//!
//! Invariants kept here:
//! - bundles are merged only when they come from one instrumented build (toolchain, target,
//!   settings fingerprint, build ids) that this checkout would build the same way, one bundle
//!   per shard;
//! - the default weighting (plain sums) gives exactly the profile one machine running every
//!   shard would have merged;
//! - the merge's record (`profiles/bundles.json`) is the training `optimize` uses until the
//!   next local `train`, `instrument` or `unpack`, which remove it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use comfy_table::Table;

use crate::cargo::manifest::StageManifest;
use crate::cargo::settings::check_same_settings;
use crate::layout::Stage;
use crate::pipeline::bundles::BundlesFile;
use crate::pipeline::context::{Context, Session};
use crate::pipeline::requests::MergeRequest;
use crate::pipeline::trained::{Trained, cargo_only_message, record_binary_figures};
use crate::profiles::bundle::{
    self, BUNDLE_FORMAT, BundleManifest, BundleProfile, BundleWorkload, FORMAT_VERSION, Weights,
};
use crate::profiles::{self, BinaryProfiles};
use crate::report::{MergedBundle, MergedBundles};
use crate::util::files::write_atomically;
use crate::util::printer::Fitted;
use crate::util::units::human_bytes;
/// Writes the bundle of a training shard: one merged profile per binary, and the manifest.
pub fn write_bundle(
    cx: &Context,
    session: &mut Session,
    path: &Path,
    trained: &Trained,
) -> Result<()> {
    let Trained {
        instrumented,
        shard,
        runs,
        accounting,
    } = trained;
    let shard = *shard;
    let scratch = cx.layout.profiles_dir().join("bundle");
    if scratch.exists() {
        crate::util::files::remove_dir_all(&scratch)?;
    }
    crate::util::files::create_dir_all(&scratch)?;
    let profdata = cx.profdata()?.clone();
    let mut profiles = Vec::new();
    let mut files = Vec::new();
    // Each binary's files, then each cargo workload's (its own bench/test binaries').
    let cargo = accounting.cargo_inputs();
    let sources = accounting
        .per_binary
        .keys()
        .map(|binary| {
            (
                Some(binary.as_str()),
                None,
                accounting.valid_inputs_of(binary),
            )
        })
        .chain(
            cargo
                .iter()
                .map(|(run, inputs)| (None, Some(*run), inputs.clone())),
        );
    // Binaries are `profiles/<binary>.profdata`, cargo workload runs
    // `profiles/cargo-<run>.profdata`: a binary named `cargo-<run>` would overwrite one.
    if let Some(binary) = accounting.per_binary.keys().find(|binary| {
        cargo
            .iter()
            .any(|(run, _)| **binary == format!("cargo-{run}"))
    }) {
        bail!(
            "binary `{binary}` and cargo workload run `{}` would have the same profile in \
             the bundle: rename the workload in {}",
            binary.trim_start_matches("cargo-"),
            cx.config.display_path()
        );
    }
    for (binary, cargo_workload, inputs) in sources {
        if inputs.is_empty() {
            continue;
        }
        let name = match (binary, cargo_workload) {
            (Some(binary), _) => binary.to_owned(),
            (None, run) => format!("cargo-{}", run.unwrap_or_default()),
        };
        let file = scratch.join(format!("{name}.profdata"));
        profiles::merge_to(&inputs, &file, &profdata, &cx.printer)?;
        let summary = profiles::summary(&file, &profdata, &cx.printer)?;
        let member = format!("profiles/{name}.profdata");
        profiles.push(BundleProfile {
            binary: binary.map(str::to_owned),
            cargo_workload: cargo_workload.map(str::to_owned),
            file: member.clone(),
            total_count: summary.total_count,
            functions: summary.functions,
            size_bytes: std::fs::metadata(&file)?.len(),
        });
        files.push((member, file));
    }
    let workloads = runs
        .iter()
        .map(|workload| {
            let record = session
                .report
                .training
                .iter()
                .find(|w| w.name == workload.run_name() && w.stage == Stage::Instrumented);
            BundleWorkload {
                run: workload.run_name(),
                workload: workload.name().to_owned(),
                fingerprint: workload.fingerprint(),
                status: record.map_or_else(|| "unknown".to_owned(), |r| r.status.clone()),
                duration_secs: record.map_or(0.0, |r| r.duration_secs),
            }
        })
        .collect();
    let manifest = BundleManifest {
        format: BUNDLE_FORMAT.to_owned(),
        format_version: FORMAT_VERSION,
        provenance: bundle::provenance(&cx.rustc, &cx.settings.target, &cx.workspace, &cx.printer),
        settings_fingerprint: bundle::settings_fingerprint(&instrumented.settings),
        instrumented: instrumented.clone(),
        shard,
        workloads,
        accounting: accounting.per_binary.clone(),
        profiles,
    };
    bundle::write(path, &manifest, &files)?;
    crate::util::files::remove_dir_all(&scratch)?;
    cx.printer.info(format!(
        "wrote the bundle of shard {shard} ({} workload runs, {} profiles) to {} ({})",
        manifest.workloads.len(),
        manifest.profiles.len(),
        path.display(),
        human_bytes(std::fs::metadata(path)?.len())
    ));
    Ok(())
}

/// `pgo-build merge BUNDLE…`.
pub fn merge(cx: &Context, session: &mut Session, args: &MergeRequest) -> Result<()> {
    let mut bundles = Vec::new();
    for path in &args.bundles {
        let manifest: BundleManifest = bundle::read_manifest(path, BUNDLE_FORMAT)?;
        bundles.push((path.clone(), manifest));
    }
    check_bundles(cx, &bundles)?;
    // Shard order, whatever the order given: the same merge on every machine.
    bundles.sort_by_key(|(_, manifest)| manifest.shard.index);
    let weights = bundle_weights(&bundles, args)?;
    let count = bundles[0].1.shard.count;
    let present: BTreeSet<usize> = bundles.iter().map(|(_, b)| b.shard.index).collect();
    let missing_shards: Vec<usize> = (1..=count).filter(|i| !present.contains(i)).collect();
    if !missing_shards.is_empty() {
        cx.caution(format!(
            "shard{} {} missing: the merged profile covers only the workload runs of the {} \
             bundles given, and code only the missing shards run will look cold. Pass every \
             shard's bundle (a failed matrix job leaves a hole)",
            if missing_shards.len() == 1 { "" } else { "s" },
            missing_shards
                .iter()
                .map(|i| format!("{i}/{count}"))
                .collect::<Vec<_>>()
                .join(", "),
            bundles.len()
        ))?;
    }
    check_bundle_workloads(cx, &bundles, missing_shards.is_empty())?;

    // Each bundle's profiles, extracted, with that bundle's weight.
    let extracted = cx.layout.profiles_dir().join("bundles");
    let inputs = extract_profiles(&bundles, &weights, &extracted)?;
    if inputs.is_empty() {
        bail!(
            "the bundles hold no profiles at all: no shard recorded a usable profile. Check \
             the training logs of the shard jobs"
        );
    }
    let profdata = cx.profdata()?.clone();
    let weighted: Vec<(u64, &Path)> = inputs
        .iter()
        .map(|(weight, _, file)| (*weight, file.as_path()))
        .collect();
    let merged =
        profiles::merge_weighted(&weighted, &cx.layout.profiles_dir(), &profdata, &cx.printer)?;
    if merged.total_functions == 0 {
        bail!(
            "the merged profile {} contains no functions",
            merged.path.display()
        );
    }

    let per_binary = per_binary_figures(cx, &bundles, &inputs, &profdata)?;
    crate::util::files::remove_dir_all(&extracted)?;

    let record = MergedBundles {
        merged: merged.clone(),
        weights: args.weights,
        bundles: bundles
            .iter()
            .zip(&weights)
            .map(|((path, manifest), weight)| MergedBundle {
                file: path.clone(),
                shard: manifest.shard,
                weight: *weight,
                total_count: manifest
                    .profiles
                    .iter()
                    .fold(0, |sum, p| sum.saturating_add(p.total_count)),
                git_revision: manifest.provenance.git_revision.clone(),
                created: manifest.provenance.created.clone(),
                workloads: manifest.workloads.clone(),
                accounting: manifest.accounting.clone(),
            })
            .collect(),
        per_binary,
        missing_shards,
        cargo_workloads: bundles
            .iter()
            .flat_map(|(_, b)| &b.profiles)
            .filter_map(|p| p.cargo_workload.clone())
            .collect(),
    };
    print_bundle_accounting(cx, &record);
    cx.printer.info(format!(
        "merged {} bundles ({} profiles) into {} ({}, {} functions)",
        bundles.len(),
        inputs.len(),
        merged.path.display(),
        human_bytes(merged.size_bytes),
        merged.total_functions
    ));
    session.begin_outputs(cx)?;
    let file = BundlesFile {
        instrumented: bundles[0].1.instrumented.clone(),
        merge: record,
    };
    write_atomically(
        &cx.layout.merged_bundles(),
        serde_json::to_string_pretty(&file)?.as_bytes(),
    )?;
    let record = file.merge;
    session.report.merged_profile = Some(merged.clone());
    session.report.bundles = Some(record.clone());
    record_binary_figures(session, &record.per_binary);
    for (binary, figures) in &record.per_binary {
        if figures.valid_files == 0 && !record.cargo_workloads.is_empty() {
            cx.caution(cargo_only_message(binary))?;
        } else if figures.valid_files == 0 {
            cx.caution(format!(
                "no bundle has a profile of `{binary}`; `pgo-build optimize` will refuse to \
                 build it with PGO (see --allow-missing-profile)"
            ))?;
        }
    }
    Ok(())
}

/// A profile of a bundle, extracted: its bundle's weight, the binary that wrote it (none for a
/// cargo workload's), the file.
type Input = (u64, Option<String>, PathBuf);

/// Every bundle's profiles extracted below `extracted`, each with its bundle's weight; the same
/// profiles given twice under two labels, or a manifest that lists a missing member, refused.
fn extract_profiles(
    bundles: &[(PathBuf, BundleManifest)],
    weights: &[u64],
    extracted: &Path,
) -> Result<Vec<Input>> {
    let mut inputs: Vec<Input> = Vec::new();
    // Bundles are told apart by what they hold, not by what their manifests say: a bundle
    // given twice under two labels (a manifest edited, a job's artifact uploaded twice)
    // would double its counts.
    let mut contents: BTreeMap<String, &PathBuf> = BTreeMap::new();
    for (k, (path, manifest)) in bundles.iter().enumerate() {
        let dir = extracted.join(k.to_string());
        bundle::extract(path, &dir)?;
        let mut files: Vec<&str> = manifest.profiles.iter().map(|p| p.file.as_str()).collect();
        files.sort_unstable();
        let mut content = String::new();
        for file in files {
            let member = dir.join(file);
            if member.is_file() {
                content += &format!("{file} {}\n", crate::util::files::sha256_of(&member)?);
            }
        }
        let digest = crate::util::files::sha256_hex(content.as_bytes());
        if let Some(earlier) = contents.insert(digest.clone(), path)
            && !manifest.profiles.is_empty()
        {
            bail!(
                "refusing to merge: {} and {} hold the same profiles (content sha256 {}), \
             whatever their manifests say: one shard's bundle given twice would double \
             its counts. Pass each shard's own bundle once",
                earlier.display(),
                path.display(),
                &digest[..16]
            );
        }
        for profile in &manifest.profiles {
            let file = dir.join(&profile.file);
            if !file.is_file() {
                bail!(
                    "{}: its manifest lists {} but the archive has no such member; the \
                 bundle is damaged",
                    path.display(),
                    profile.file
                );
            }
            inputs.push((weights[k], profile.binary.clone(), file));
        }
    }
    Ok(inputs)
}

/// Per binary: the sums of every shard's figures, and the coverage of its merged profile.
fn per_binary_figures(
    cx: &Context,
    bundles: &[(PathBuf, BundleManifest)],
    inputs: &[Input],
    profdata: &crate::toolchain::LlvmTool,
) -> Result<BTreeMap<String, BinaryProfiles>> {
    let scratch = cx.layout.profiles_dir().join("scratch");
    let mut per_binary: BTreeMap<String, BinaryProfiles> = cx
        .bins
        .iter()
        .map(|b| (b.name.clone(), BinaryProfiles::default()))
        .collect();
    for (binary, figures) in per_binary.iter_mut() {
        for (_, manifest) in bundles {
            if let Some(shard) = manifest.accounting.get(binary) {
                // Saturating: the figures come from the bundles' manifests.
                figures.processes = figures.processes.saturating_add(shard.processes);
                figures.died = figures.died.saturating_add(shard.died);
                figures.files = figures.files.saturating_add(shard.files);
                figures.valid_files = figures.valid_files.saturating_add(shard.valid_files);
                figures.bytes = figures.bytes.saturating_add(shard.bytes);
                figures.empty_files = figures.empty_files.saturating_add(shard.empty_files);
            }
        }
        let files: Vec<&Path> = inputs
            .iter()
            .filter(|(_, b, _)| b.as_ref() == Some(binary))
            .map(|(_, _, file)| file.as_path())
            .collect();
        if !files.is_empty() {
            let (covered, total) = profiles::coverage(&files, profdata, &scratch, &cx.printer)?;
            figures.covered_functions = Some(covered);
            figures.instrumented_functions = Some(total);
        }
    }
    Ok(per_binary)
}

/// Every bundle from one instrumented build this checkout would build the same way, each
/// shard once.
fn check_bundles(cx: &Context, bundles: &[(PathBuf, BundleManifest)]) -> Result<()> {
    let (first_path, first) = &bundles[0];
    for (path, other) in &bundles[1..] {
        let what = format!("{}", path.display());
        let mut problems = bundle::differences(&other.provenance, &first.provenance, &what);
        for problem in &mut problems {
            *problem = problem.replace("this machine", &first_path.display().to_string());
        }
        if other.settings_fingerprint != first.settings_fingerprint {
            problems.push(format!(
                "settings_fingerprint: {what} has {}, {} {} (another cargo profile, \
                 features, rustflags or [profile] settings)",
                other.settings_fingerprint,
                first_path.display(),
                first.settings_fingerprint
            ));
        }
        if other.instrumented.id != first.instrumented.id
            || build_ids(&other.instrumented) != build_ids(&first.instrumented)
        {
            problems.push(format!(
                "instrumented build: {what} trained build {}, {} build {} (every shard \
                 must unpack the same `pgo-build pack`)",
                other.instrumented.id,
                first_path.display(),
                first.instrumented.id
            ));
        }
        if other.shard.count != first.shard.count {
            problems.push(format!(
                "shard count: {what} is shard {}, {} shard {}",
                other.shard,
                first_path.display(),
                first.shard
            ));
        }
        if !problems.is_empty() {
            bail!(
                "refusing to merge bundles of different trainings:\n  - {}",
                problems.join("\n  - ")
            );
        }
    }
    let mut seen: BTreeMap<usize, &PathBuf> = BTreeMap::new();
    for (path, manifest) in bundles {
        if let Some(earlier) = seen.insert(manifest.shard.index, path) {
            bail!(
                "refusing to merge: {} and {} are both shard {}; merging a shard twice \
                 doubles its counts. Pass each shard's bundle once",
                earlier.display(),
                path.display(),
                manifest.shard
            );
        }
    }
    // Another pgo-build may account or name runs differently; the profiles themselves are
    // LLVM's, so this is worth a warning, not a refusal.
    let versions: BTreeSet<&str> = bundles
        .iter()
        .map(|(_, b)| b.provenance.pgo_build_version.as_str())
        .chain([env!("CARGO_PKG_VERSION")])
        .collect();
    if versions.len() > 1 {
        cx.printer.warn(format!(
            "the bundles were written by pgo-build {} and this is {}: use one pgo-build in \
             every job",
            versions.into_iter().collect::<Vec<_>>().join(", "),
            env!("CARGO_PKG_VERSION")
        ));
    }
    // This checkout must build what the bundles' profiles describe.
    let here = bundle::provenance(&cx.rustc, &cx.settings.target, &cx.workspace, &cx.printer);
    let what = format!("{}", first_path.display());
    let mut problems = bundle::differences(&first.provenance, &here, &what);
    // Profiles of another commit's sources would silently miss what changed since.
    for (path, bundle) in bundles {
        let what = path.display().to_string();
        match bundle::compare_revisions(&bundle.provenance, &here, &what) {
            bundle::RevisionCheck::Same => {}
            bundle::RevisionCheck::Changed(note) => cx.printer.warn(format!(
                "{note}; its profile may not match this checkout's sources"
            )),
            bundle::RevisionCheck::Other(problem) => problems.push(problem),
        }
    }
    if !problems.is_empty() {
        bail!(
            "refusing to merge: {}.\nThe optimized build here would not match the profile's \
             functions; merge and optimize with the toolchain and the commit that instrumented.",
            problems.join("; ")
        );
    }
    check_same_settings(&first.instrumented.settings, &cx.settings)
        .with_context(|| format!("refusing to merge {what}"))?;
    let moved = bundle::moved_path_dependencies(&first.provenance, &here);
    if !moved.is_empty() {
        bail!(
            "refusing to merge: path dependencies outside the workspace root moved since \
             the instrumented build: {}. Cargo hashes such a package's absolute path into \
             its symbol names (and those of every crate using it), so the profile would miss \
             them here. Check out at the same path in the instrument and optimize jobs, or \
             move the package under the workspace root.",
            moved.join("; ")
        );
    }
    for bin in &cx.bins {
        if first.instrumented.binary(&bin.name).is_none() {
            bail!(
                "binary `{}` was not instrumented in the build the bundles trained; select \
                 the same binaries as the instrument job",
                bin.name
            );
        }
    }
    Ok(())
}

/// Warns about train runs of the configuration that no bundle ran, and runs whose
/// definition changed since (with every shard present, a missing run means the
/// configurations differ).
fn check_bundle_workloads(
    cx: &Context,
    bundles: &[(PathBuf, BundleManifest)],
    all_shards: bool,
) -> Result<()> {
    let ran: BTreeMap<&str, &str> = bundles
        .iter()
        .flat_map(|(_, b)| &b.workloads)
        .map(|w| (w.run.as_str(), w.fingerprint.as_str()))
        .collect();
    let mut notes = Vec::new();
    for run in cx.config.train_runs() {
        match ran.get(run.run_name().as_str()) {
            None if all_shards => notes.push(format!(
                "`{}` is a train workload run in {} but no bundle ran it",
                run.run_name(),
                cx.config.display_path()
            )),
            Some(fingerprint) if *fingerprint != run.fingerprint() => notes.push(format!(
                "`{}` changed in {} since the shards ran it",
                run.run_name(),
                cx.config.display_path()
            )),
            _ => {}
        }
    }
    if notes.is_empty() {
        return Ok(());
    }
    cx.caution(format!(
        "the bundles do not match this configuration's training: {}. Train with the same \
         pgo-build.toml in every job",
        notes.join("; ")
    ))
}

fn print_bundle_accounting(cx: &Context, record: &MergedBundles) {
    let mut table = Table::new();
    table.fitted().set_header([
        "Binary",
        "Shard",
        "Weight",
        "Processes",
        "Ended without profile",
        "Profiles used",
        "Functions run",
    ]);
    for (binary, total) in &record.per_binary {
        for bundle in &record.bundles {
            let figures = bundle.accounting.get(binary).cloned().unwrap_or_default();
            table.add_row([
                binary.clone(),
                bundle.shard.to_string(),
                bundle.weight.to_string(),
                figures.processes.to_string(),
                figures.died.to_string(),
                figures.valid_files.to_string(),
                figures.coverage_text(),
            ]);
        }
        table.add_row([
            binary.clone(),
            "all".to_owned(),
            String::new(),
            total.processes.to_string(),
            total.died.to_string(),
            total.valid_files.to_string(),
            total.coverage_text(),
        ]);
    }
    cx.printer.table(crate::util::printer::rendered(table));
}

fn build_ids(manifest: &StageManifest) -> BTreeMap<&str, Option<&str>> {
    manifest
        .binaries
        .iter()
        .map(|b| (b.name.as_str(), b.build_id.as_deref()))
        .collect()
}

/// Each bundle's integer weight: 1 (`counts`), or inversely proportional to its total count
/// (`equal`; `--weighted-input` takes integers, so the smallest bundle's total is scaled to
/// the largest's, rounded), then `--weight FILE=W` for the bundles named.
fn bundle_weights(bundles: &[(PathBuf, BundleManifest)], args: &MergeRequest) -> Result<Vec<u64>> {
    let totals: Vec<u64> = bundles
        .iter()
        .map(|(_, b)| {
            b.profiles
                .iter()
                .fold(0u64, |sum, p| sum.saturating_add(p.total_count))
        })
        .collect();
    let largest = totals.iter().copied().max().unwrap_or(0);
    let mut weights: Vec<u64> = totals
        .iter()
        .map(|&total| match args.weights {
            Weights::Counts => 1,
            Weights::Equal if total == 0 => 1,
            Weights::Equal => ((largest as f64 / total as f64).round() as u64).max(1),
        })
        .collect();
    for spec in &args.weight {
        let (file, weight) = spec
            .rsplit_once('=')
            .with_context(|| format!("--weight {spec}: expected FILE=W"))?;
        let weight: u64 = weight
            .parse()
            .ok()
            .filter(|w| *w >= 1)
            .with_context(|| format!("--weight {spec}: the weight must be an integer >= 1"))?;
        let position = bundles
            .iter()
            .position(|(path, _)| path == Path::new(file))
            .with_context(|| format!("--weight {spec}: {file} is not one of the bundles given"))?;
        weights[position] = weight;
    }
    Ok(weights)
}
