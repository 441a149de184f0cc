//! Where the profile commands' profiles come from: the instrumented stage and the accounting of
//! its last training, a binary's profile merged on demand (`inspected_profile`), and merging
//! raw profiles into one file.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use crate::cargo::manifest::StageManifest;
use crate::layout::Stage;
use crate::pipeline::bundles::merged_bundles;
use crate::pipeline::context::Context;
use crate::pipeline::trained::account;
use crate::profiles::{self, Accounting};

/// The instrumented stage and the accounting of its last training.
pub(super) fn last_training(cx: &Context) -> Result<(StageManifest, Accounting)> {
    let instrumented = StageManifest::load(
        &cx.layout,
        Stage::Instrumented,
        "run `pgo-build instrument` and `pgo-build train` first",
    )?;
    let accounting = account(cx, &instrumented)?;
    Ok((instrumented, accounting))
}

/// The profile `profile show` looks at: the committed one when configured, else a merge of
/// the last training's usable files (of one binary, or all).
pub(super) fn inspected_profile(
    cx: &Context,
    binary: Option<&str>,
) -> Result<(PathBuf, Option<Accounting>)> {
    if binary.is_none()
        && let Some(committed) = &cx.config.pgo.profile
    {
        return Ok((cx.workspace.root.join(committed), None));
    }
    if let Some(record) = merged_bundles(cx)? {
        if let Some(binary) = binary {
            bail!(
                "the current training profile was merged from bundles by `pgo-build merge`, \
                 which keeps no per-binary profile: run `profile show` without --binary \
                 {binary} (its coverage is in the table), or `pgo-build train` here"
            );
        }
        let accounting = Accounting {
            profiles: Vec::new(),
            per_binary: record.merge.per_binary,
        };
        return Ok((record.merge.merged.path, Some(accounting)));
    }
    let (_, accounting) = last_training(cx)?;
    let inputs: Vec<&Path> = accounting
        .profiles
        .iter()
        .filter(|p| p.rejected.is_none() && binary.is_none_or(|b| p.binary.as_deref() == Some(b)))
        .map(|p| p.path.as_path())
        .collect();
    if inputs.is_empty() {
        bail!(
            "there is no usable training profile{}: run `pgo-build train` first",
            binary.map(|b| format!(" of `{b}`")).unwrap_or_default()
        );
    }
    let merged = cx
        .layout
        .profiles_dir()
        .join("scratch")
        .join(format!("show-{}.profdata", binary.unwrap_or("all")));
    merge_into(cx, &inputs, &merged)?;
    Ok((merged, Some(accounting)))
}

pub(super) fn merge_into(cx: &Context, inputs: &[&Path], output: &Path) -> Result<()> {
    profiles::merge_to(inputs, output, cx.profdata()?, &cx.printer)
}
