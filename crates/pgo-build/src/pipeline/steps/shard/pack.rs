//! `pack` and `unpack`: a stage carried to another checkout (training jobs, a gate job that
//! builds nothing). Invariants: a pack never holds a stage beside another than its input, and
//! `unpack` replaces nothing before every binary in the archive is checked.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};

use crate::cargo::manifest::StageManifest;
use crate::cargo::settings::check_same_settings;
use crate::layout::PackedStage;
use crate::layout::Stage;
use crate::layout::step::Step;
use crate::pipeline::context::{Context, Session};
use crate::pipeline::release::shipped_stage;
use crate::pipeline::requests::{PackRequest, UnpackRequest};
use crate::profiles::bundle::{self, FORMAT_VERSION, PACK_FORMAT, PackManifest};
use crate::util::units::human_bytes;

/// `pgo-build pack STAGE --output FILE`. A bolt stage is packed with the optimized stage it
/// was made from: the gate that ships it compares both, and could not rebuild either.
pub fn pack(cx: &Context, args: &PackRequest) -> Result<()> {
    let stage = match args.stage {
        PackedStage::Shipped => shipped_stage(cx),
        PackedStage::Instrumented => Stage::Instrumented,
        PackedStage::Baseline => Stage::Baseline,
        PackedStage::Optimized => Stage::Optimized,
        PackedStage::Bolt => Stage::Bolt,
    };
    let manifest = packable(cx, stage)?;
    let upstream = match stage {
        Stage::Bolt => Some(bolt_upstream(cx, &manifest)?),
        _ => None,
    };
    let mut files: Vec<(String, PathBuf)> = manifest
        .binaries
        .iter()
        .map(|b| (format!("bin/{}", b.name), b.path.clone()))
        .collect();
    if let Some(upstream) = &upstream {
        files.extend(
            upstream
                .binaries
                .iter()
                .map(|b| (format!("{UPSTREAM_DIR}/bin/{}", b.name), b.path.clone())),
        );
    }
    // What the cargo build behind the binaries read: a bolt stage's binaries have no dep-info.
    let built = upstream.as_ref().unwrap_or(&manifest);
    let pack = PackManifest {
        format: PACK_FORMAT.to_owned(),
        format_version: FORMAT_VERSION,
        provenance: bundle::provenance(&cx.rustc, &cx.settings.target, &cx.workspace, &cx.printer),
        sources: bundle::workspace_sources(
            &built
                .binaries
                .iter()
                .map(|b| b.source.as_path())
                .collect::<Vec<_>>(),
            &cx.workspace.root,
            &[
                cx.layout.root(),
                &crate::profiles::checkout_independent_dir(),
            ],
        ),
        stage: manifest,
        upstream,
    };
    bundle::write(&args.output, &pack, &files)?;
    cx.printer.info(format!(
        "packed the {} stage ({}{}) into {} ({})",
        stage.name(),
        crate::util::units::count(pack.stage.binaries.len(), "binary", "binaries"),
        pack.upstream
            .as_ref()
            .map_or(String::new(), |upstream| format!(
                ", with the {} stage it was made from",
                upstream.stage
            )),
        args.output.display(),
        human_bytes(std::fs::metadata(&args.output)?.len())
    ));
    Ok(())
}

/// Where a pack keeps the stage its stage was made from.
const UPSTREAM_DIR: &str = "upstream";

/// `stage`'s manifest, when its binaries are the ones it staged and were built from the
/// sources the workspace holds now.
fn packable(cx: &Context, stage: Stage) -> Result<StageManifest> {
    let step = Step::staging(stage);
    let manifest = StageManifest::load(
        &cx.layout,
        stage,
        &format!("run `pgo-build {}` first", step.name()),
    )?;
    manifest.check_staged(stage.name(), step.name())?;
    manifest.check_sources_current(
        &cx.workspace.root,
        &[
            cx.layout.root(),
            &crate::profiles::checkout_independent_dir(),
        ],
        &format!("refusing to pack the {} stage", stage.name()),
        &format!(
            "Build it again (`pgo-build {}`), then pack it.",
            step.name()
        ),
    )?;
    Ok(manifest)
}

/// The optimized stage `bolt` was made from, as staged now: anything else would pack BOLT's
/// output beside binaries it was not made from.
fn bolt_upstream(cx: &Context, bolt: &StageManifest) -> Result<StageManifest> {
    let Some(id) = bolt.upstream.get(&Stage::Optimized) else {
        bail!(
            "refusing to pack the bolt stage: it was made from the {} stage (`pgo-build bolt \
             --without-pgo`), and a release gate ships BOLT on the optimized one. Run \
             `pgo-build bolt`, then pack it.",
            bolt.upstream
                .keys()
                .next()
                .map_or("baseline", |stage| stage.name())
        );
    };
    let optimized = packable(cx, Stage::Optimized)?;
    if &optimized.id != id {
        bail!(
            "refusing to pack the bolt stage: the optimized stage was built again since BOLT \
             ran on it ({}), so the pack would hold BOLT's output of other binaries. Run \
             `pgo-build bolt` again, then pack it.",
            cx.layout.bin_dir(Stage::Optimized).display()
        );
    }
    Ok(optimized)
}

/// Refuses a pack from another toolchain, target or commit (or, without git on both sides,
/// other sources): training its binaries would give a profile this checkout cannot use. A
/// changed revision with the same sources is a warning.
fn check_provenance(cx: &Context, pack: &PackManifest, what: &str) -> Result<()> {
    let here = bundle::provenance(&cx.rustc, &cx.settings.target, &cx.workspace, &cx.printer);
    let mut problems = bundle::differences(&pack.provenance, &here, what);
    // Without git on both sides, the sources the pack recorded say whether this checkout
    // has them.
    let git_on_both = pack.provenance.git_revision.is_some() && here.git_revision.is_some();
    let changed = bundle::changed_sources(&pack.sources, &cx.workspace.root);
    if !git_on_both && !changed.is_empty() {
        problems.push(format!(
            "sources: {} of the {} source files the packed binaries were built from differ \
             here or are missing ({}{})",
            changed.len(),
            pack.sources.len(),
            changed
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join(", "),
            if changed.len() > 5 { ", …" } else { "" }
        ));
    }
    match bundle::compare_revisions(&pack.provenance, &here, what) {
        bundle::RevisionCheck::Same => {}
        bundle::RevisionCheck::Changed(note) => cx.printer.warn(format!(
            "{note}; the binaries may not match this checkout's sources"
        )),
        bundle::RevisionCheck::Other(problem) => problems.push(problem),
    }
    if !problems.is_empty() {
        bail!(
            "refusing to unpack: {}.\nTraining the binaries of another toolchain or commit \
             gives a profile this checkout's optimized build cannot use. Unpack into a \
             checkout of the same commit, with the same toolchain (rust-toolchain.toml).",
            problems.join("; ")
        );
    }
    Ok(())
}

/// `pgo-build unpack FILE`: the packed stage becomes this checkout's, with its id, so
/// bundles trained from any unpacked copy merge together. Returns the stages unpacked, in
/// the order they were: a stage's input before it.
pub fn unpack(cx: &Context, session: &mut Session, args: &UnpackRequest) -> Result<Vec<Stage>> {
    let pack: PackManifest = bundle::read_manifest(&args.archive, PACK_FORMAT)?;
    let what = format!("the pack {}", args.archive.display());
    check_provenance(cx, &pack, &what)?;
    check_same_settings(&pack.stage.settings, &cx.settings)
        .with_context(|| format!("refusing to unpack {}", args.archive.display()))?;
    let stage = pack.stage.stage;
    let upstream = match &pack.upstream {
        Some(manifest) => Some(
            Some(manifest.stage)
                .filter(|upstream| *upstream == Stage::Optimized && stage == Stage::Bolt)
                .with_context(|| {
                    format!(
                        "{what} holds the {} stage as the {} stage's input; pgo-build packs \
                         only a bolt stage with its optimized one. The archive was not \
                         written by `pgo-build pack`",
                        manifest.stage, pack.stage.stage
                    )
                })?,
        ),
        None if stage == Stage::Bolt => bail!(
            "{what} holds a bolt stage without the optimized stage it was made from; pack it \
             with this pgo-build (`pgo-build pack bolt`), which packs both"
        ),
        None => None,
    };
    if let Some(input) = &pack.upstream {
        // The bolt stage names the optimized build it was made from: it must be this one.
        if pack.stage.upstream.get(&Stage::Optimized) != Some(&input.id) {
            bail!(
                "{what}: its bolt stage was made from another optimized build than the one \
                 packed beside it; the archive was not written by `pgo-build pack bolt` as it \
                 is. Pack it again (`pgo-build pack bolt`)"
            );
        }
        check_same_settings(&input.settings, &cx.settings)
            .with_context(|| format!("refusing to unpack {}", args.archive.display()))?;
    }
    let unpacking = cx.layout.stage_dir(stage).join("unpacking");
    bundle::extract(&args.archive, &unpacking)?;
    let checked = (|| -> Result<Vec<(Stage, StageManifest, PathBuf)>> {
        let mut stages = Vec::new();
        if let (Some(upstream), Some(manifest)) = (upstream, pack.upstream.clone()) {
            let files = unpacking.join(UPSTREAM_DIR).join("bin");
            stages.push((
                upstream,
                checked_binaries(cx, upstream, manifest, &files, &what)?,
                files,
            ));
        }
        let files = unpacking.join("bin");
        stages.push((
            stage,
            checked_binaries(cx, stage, pack.stage.clone(), &files, &what)?,
            files,
        ));
        Ok(stages)
    })();
    let stages = match checked {
        Ok(stages) => stages,
        Err(err) => {
            let _ = std::fs::remove_dir_all(&unpacking);
            return Err(err);
        }
    };
    // Only now, with the archive read and checked, is a stage here replaced: a damaged or
    // refused pack leaves the current ones as they were. The input stage first: the stage
    // made from it records its id.
    let mut unpacked = Vec::new();
    for (stage, manifest, files) in stages {
        install_stage(cx, session, stage, &manifest, &files, &pack.sources)?;
        cx.printer.info(format!(
            // The pack records when it was packed, not when its binaries were built.
            "unpacked the {} stage ({}, packed {} from {}) into {}",
            stage.name(),
            crate::util::units::count(manifest.binaries.len(), "binary", "binaries"),
            pack.provenance.created,
            pack.provenance
                .git_revision
                .as_deref()
                .unwrap_or("an unknown revision"),
            cx.layout.bin_dir(stage).display()
        ));
        unpacked.push(stage);
    }
    crate::util::files::remove_dir_all(&unpacking)?;
    Ok(unpacked)
}

/// `manifest` with its binaries' paths made this checkout's, once each file in `files` is the
/// binary it records (by build id).
fn checked_binaries(
    cx: &Context,
    stage: Stage,
    mut manifest: StageManifest,
    files: &Path,
    what: &str,
) -> Result<StageManifest> {
    let bin_dir = cx.layout.bin_dir(stage);
    for binary in &mut manifest.binaries {
        let file = files.join(&binary.name);
        let build_id = std::fs::read(&file)
            .ok()
            .and_then(|data| crate::cargo::manifest::build_id(&data).ok().flatten());
        if build_id != binary.build_id {
            bail!(
                "{what}: binary `{}` of the {} stage is missing or is not the one recorded \
                 (build id {:?}, recorded {:?}); the archive is damaged",
                binary.name,
                stage.name(),
                build_id,
                binary.build_id
            );
        }
        binary.path = bin_dir.join(&binary.name);
        // The cargo executable it was copied from is on the packing machine.
        binary.source = binary.path.clone();
    }
    Ok(manifest)
}

/// `stage` replaced by the checked binaries in `files`, with its record and the sources the
/// pack recorded (see `run::fingerprint`: unpacked binaries have no dep-info here).
fn install_stage(
    cx: &Context,
    session: &mut Session,
    stage: Stage,
    manifest: &StageManifest,
    files: &Path,
    sources: &BTreeMap<String, String>,
) -> Result<()> {
    let bin_dir = cx.layout.bin_dir(stage);
    StageManifest::begin(&cx.layout, stage, "unpack")?;
    for per_stage in session.report.binaries.values_mut() {
        per_stage.remove(&stage);
    }
    if bin_dir.exists() {
        crate::util::files::remove_dir_all(&bin_dir)?;
    }
    crate::util::files::rename(files, &bin_dir)?;
    manifest.save(&cx.layout, stage)?;
    crate::util::files::write_atomically(
        &cx.layout.unpacked_sources(stage),
        serde_json::to_string_pretty(sources)?.as_bytes(),
    )?;
    if stage == Stage::Instrumented {
        // What was trained or merged against the previous instrumented build is now stale.
        session.forget_step(cx, Step::Instrument)?;
        session.forget_step(cx, Step::Train)?;
        cx.forget_merged_bundles()?;
    }
    Ok(())
}
