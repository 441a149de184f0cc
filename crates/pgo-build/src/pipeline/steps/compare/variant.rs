//! The variants a comparison measures: a [`Compared`] is a stage of some layout under a name
//! (the pipeline's own stages, one of `explore`'s builds, the last release's binaries), and a
//! default comparison picks the newest current one; variants that do not belong together are
//! refused.

use std::path::PathBuf;

use anyhow::{Result, bail};

use crate::cargo::manifest::StageManifest;
use crate::config::Workload;
use crate::layout::{Layout, Stage};
use crate::pipeline::context::Context;
use crate::util::files::age;

/// The variants named, or by default the baseline and the newest current variant (BOLT,
/// else optimized): one that is not current (an interrupted step, binaries replaced, made
/// from an older build) is skipped and named with why, not a reason to compare nothing.
pub(super) fn compare_variants(cx: &Context, names: &[String]) -> Result<Vec<Compared>> {
    if names.is_empty() {
        return default_variants(cx);
    }
    let stages: Vec<Stage> = names
        .iter()
        .map(|name| {
            Stage::from_variant(name).ok_or_else(|| {
                let known: Vec<&str> = Stage::VARIANTS.iter().map(|s| s.name()).collect();
                anyhow::anyhow!("unknown variant `{name}`; variants: {}", known.join(", "))
            })
        })
        .collect::<Result<_>>()?;
    if stages.len() < 2 {
        bail!("compare needs at least two variants, e.g. `pgo-build compare baseline optimized`");
    }
    let variants = stages
        .into_iter()
        .map(|stage| staged_variant(cx, stage))
        .collect::<Result<Vec<_>>>()?;
    check_comparable(&variants)?;
    Ok(variants)
}

pub(super) fn default_variants(cx: &Context) -> Result<Vec<Compared>> {
    let mut skipped = Vec::new();
    for stage in Stage::VARIANTS[1..].iter().rev().copied() {
        let attempted =
            cx.layout.stage_manifest(stage).is_file() || cx.layout.stage_attempt(stage).is_file();
        if !attempted && stage != Stage::Optimized {
            continue;
        }
        let pair = staged_variant(cx, stage).and_then(|candidate| {
            let pair = vec![staged_variant(cx, Stage::Baseline)?, candidate];
            check_comparable(&pair)?;
            Ok(pair)
        });
        match pair {
            Ok(pair) => {
                for (name, reason) in skipped {
                    cx.caution(format!(
                        "not comparing the {name} variant, which is not current: {reason:#}"
                    ))?;
                }
                return Ok(pair);
            }
            Err(err) if skipped.is_empty() && stage == Stage::Optimized => return Err(err),
            Err(err) => skipped.push((stage.name(), err)),
        }
    }
    let reasons: Vec<String> = skipped
        .iter()
        .map(|(name, reason)| format!("{name}: {reason:#}"))
        .collect();
    bail!(
        "no variant is current enough to compare with the baseline:\n  - {}",
        reasons.join("\n  - ")
    )
}

/// A staged stage of this session's layout as a variant, refused when it did not complete.
pub(super) fn staged_variant(cx: &Context, stage: Stage) -> Result<Compared> {
    let hint = match stage {
        Stage::Baseline => "run `pgo-build build` first",
        Stage::Bolt => "run `pgo-build bolt` (or `run` with [bolt] enabled = true) first",
        _ => "run `pgo-build run` (or instrument, train, optimize) first",
    };
    Ok(Compared {
        name: stage.name().to_owned(),
        stage,
        manifest: StageManifest::load(&cx.layout, stage, hint)?,
        log_prefix: "compare",
        rebuild: "run",
        layout: cx.layout.clone(),
    })
}

/// Refuses variants that are not what their records say (a binary replaced in bin/), or
/// that do not belong together: built from other sources than each other (the comparison
/// would measure the source change), or made from a build of another variant that has been
/// rebuilt since (BOLT of an older optimized build).
pub(super) fn check_comparable(variants: &[Compared]) -> Result<()> {
    let built = |v: &Compared| age(&v.layout.stage_manifest(v.stage));
    for variant in variants {
        let manifest = &variant.manifest;
        // Workloads run what is in bin/: it must be what the stage staged.
        manifest.check_staged(&variant.name, variant.rebuild)?;
        for other in variants {
            if let (Some(ours), Some(theirs)) = (&manifest.sources, &other.manifest.sources)
                && ours != theirs
            {
                bail!(
                    "`{}` and `{}` were built from different sources (the sources changed \
                     between their builds: {} built {}, {} built {}), so comparing them would \
                     measure the change, not the optimization. Rebuild with `pgo-build {}`.",
                    variant.name,
                    other.name,
                    variant.name,
                    built(variant),
                    other.name,
                    built(other),
                    variant.rebuild
                );
            }
        }
        // The builds of compared stages only: the instrumented build a profile came from is
        // not a variant.
        for (&upstream, id) in &manifest.upstream {
            if !Stage::VARIANTS.contains(&upstream) {
                continue;
            }
            let current = StageManifest::load(&variant.layout, upstream, "").ok();
            if current.as_ref().is_none_or(|current| &current.id != id) {
                bail!(
                    "the {} binaries were made from an earlier {} build, which has been \
                     rebuilt or removed since: run `pgo-build {}` again (or `pgo-build {}`)",
                    variant.name,
                    upstream,
                    variant.stage.name(),
                    variant.rebuild
                );
            }
        }
    }
    Ok(())
}

/// One variant under comparison: the binaries a stage of some layout staged (the pipeline's
/// own, or one of `explore`'s builds), under the name results and logs use.
#[derive(Clone)]
pub(crate) struct Compared {
    pub name: String,
    pub stage: Stage,
    pub layout: Layout,
    pub manifest: StageManifest,
    /// Logs are `<prefix>-<workload>-<name>.log`.
    pub log_prefix: &'static str,
    /// The pgo-build command that builds it again.
    pub rebuild: &'static str,
}

impl Compared {
    pub(crate) fn bin_names(&self) -> Vec<&str> {
        self.manifest
            .binaries
            .iter()
            .map(|b| b.name.as_str())
            .collect()
    }

    /// The log of a workload's last run against this variant.
    pub(crate) fn log(&self, workload: &Workload) -> PathBuf {
        self.layout.logs_dir().join(format!(
            "{}-{}-{}.log",
            self.log_prefix,
            workload.name(),
            self.name
        ))
    }
}
