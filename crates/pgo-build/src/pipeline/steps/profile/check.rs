//! `pgo-build profile check`: how much of a committed profile applies to this checkout, before
//! anything is built.

use anyhow::{Result, bail};
use comfy_table::Table;

use crate::pipeline::committed;
use crate::pipeline::context::Context;
use crate::pipeline::requests::CheckRequest;
use crate::profiles::prediction;
use crate::util::printer::Fitted;

/// Per crate, how much of the profile's counts is in unchanged, changed and renamed code, then
/// the `top` functions most at risk.
fn print_prediction(cx: &Context, predicted: &prediction::Prediction, top: usize) {
    use crate::profiles::prediction::Standing;
    use crate::util::units::percent;
    let mut table = Table::new();
    table.fitted().set_header([
        "Crate",
        "Share of the profile",
        "Unchanged (package, file or function)",
        "Changed function",
        "Changed file, function not told",
        "Of it generic, used by a changed package",
        "Renamed or gone",
    ]);
    let total = predicted.total_counts.max(1) as f64;
    let mut crates: Vec<_> = predicted.per_crate.iter().collect();
    crates.sort_by_key(|(_, by)| std::cmp::Reverse(by.values().sum::<u64>()));
    for (krate, by) in crates
        .iter()
        .filter(|(_, by)| by.keys().any(|s| *s != Standing::Unchanged))
    {
        let share = |standings: &[Standing]| {
            percent(
                standings
                    .iter()
                    .map(|s| by.get(s).copied().unwrap_or(0))
                    .sum::<u64>() as f64
                    / total,
            )
        };
        table.add_row([
            krate.to_string(),
            percent(by.values().sum::<u64>() as f64 / total),
            share(&[
                Standing::Unchanged,
                Standing::UnchangedFile,
                Standing::UnchangedFunction,
                Standing::UnchangedGeneric,
            ]),
            share(&[Standing::ChangedFunction]),
            share(&[Standing::ChangedFile]),
            share(&[Standing::UnchangedGeneric]),
            share(&[Standing::Renamed, Standing::Gone]),
        ]);
    }
    if table.row_count() > 0 {
        cx.printer.table(crate::util::printer::rendered(table));
    }
    for function in predicted.at_risk.iter().take(top) {
        cx.printer.info(format!(
            "  at risk: {} ({} of the counts; {})",
            function.name,
            percent(function.counts as f64 / total),
            match (&function.standing, &function.file) {
                (Standing::ChangedFunction, Some(file)) => format!("its source in {file} changed"),
                (Standing::ChangedFile, Some(file)) => format!("{file} changed"),
                (Standing::ChangedFile, None) => "its package changed".to_owned(),
                (Standing::Renamed, _) => "its crate is renamed".to_owned(),
                (Standing::UnchangedGeneric, _) => "generic, and a package that \
                    instantiates it changed"
                    .to_owned(),
                _ => "no longer built".to_owned(),
            }
        ));
    }
}

/// `profile check`: how much of the committed profile applies to the sources now (see
/// `profiles::prediction`), without building; an error when the share predicted stale is
/// above `[pgo] max_stale`, so a scheduled job can retrain on it.
pub fn profile_check(cx: &Context, args: &CheckRequest) -> Result<()> {
    use crate::profiles::prediction::{self, Standing};
    use crate::util::units::percent;
    let Some(relative) = cx.config.pgo.profile.clone() else {
        bail!(
            "there is no committed profile to check: set [pgo] profile in {} (`pgo-build \
             export --output pgo/profile.profdata` writes one)",
            cx.config.display_path()
        );
    };
    cx.prefetch_dependency_graph();
    // The toolchain, target and symbol names first: the same refusals as `optimize`'s.
    let (_, metadata) = committed::committed_profile(cx, &relative)?;
    let path = cx.workspace.root.join(&relative);
    if metadata.as_ref().is_some_and(|m| !m.stable_names) {
        bail!(
            "{} was made without stable symbol names ([pgo] stable_names = false): a version \
             bump of any package renames the functions of every package that depends on it, \
             which its sources cannot tell. Retrain with stable names to check it",
            path.display()
        );
    }
    let renames = committed::toolchain_renames(cx, metadata.as_ref())?;
    let trained_with = metadata
        .as_ref()
        .map(|m| m.rustc.clone())
        .filter(|rustc| *rustc != cx.rustc.version_line);
    let Some(then) = metadata.and_then(|m| m.sources) else {
        bail!(
            "{} does not record the sources the profile was trained on (exported by an older \
             pgo-build, or without its .json): export it again to check it",
            path.display()
        );
    };
    let (_, functions) = committed::committed_text(cx, &path, &renames)?;
    let (now, graph) = cx
        .workspace
        .package_sources_and_graph(&cx.settings.target, &cx.printer)?;
    let used_by_changed = prediction::used_by_changed(&graph, &then, &now);
    let predicted = prediction::predict(&functions, &then, &now, &used_by_changed);
    let max = cx.config.pgo.max_stale();
    let stale = 1.0 - predicted.applies();
    if args.json {
        let value = serde_json::json!({
            "profile": relative,
            "applies": predicted.applies(),
            "applies_at_least": predicted.applies_at_least(),
            "unchanged": predicted.share(&[Standing::Unchanged]),
            "max_stale": max,
            "retrain": stale > max,
            "prediction": predicted,
        });
        let mut json = serde_json::to_string_pretty(&value)?;
        json.push('\n');
        crate::util::printer::stdout_data(json.as_bytes())?;
    } else {
        print_prediction(cx, &predicted, args.top);
    }
    let generic = predicted.share(&[Standing::UnchangedGeneric]);
    let summary = format!(
        "the committed profile {}: {} of its counts are in code unchanged since it was trained \
         ({} in packages that did not change at all{}); {} are in functions that changed or \
         may have",
        relative.display(),
        percent(predicted.applies()),
        percent(predicted.share(&[Standing::Unchanged])),
        match generic > 0.0 {
            true => format!(
                "; {} in generic code that changed packages instantiate, which keeps its data \
                 unless the types it is instantiated with changed, so at least {} applies",
                percent(generic),
                percent(predicted.applies_at_least())
            ),
            false => String::new(),
        },
        percent(stale)
    );
    if let Some(trained_with) = trained_with {
        // The sources say nothing of how another rustc compiles them.
        let std_counts: u64 = functions
            .iter()
            .filter(|f| crate::profiles::prediction::TOOLCHAIN_CRATES.contains(&f.krate.as_str()))
            .map(|f| f.total)
            .sum();
        let inlined = if crate::cargo::settings::preinline_in(&cx.settings.common_rustflags) {
            " With LLVM's pre-instrumentation inlining on (the default), any function that \
             inlined a small function of the standard library the new rustc changed is stale \
             as well, and those are often the hottest: [pgo] preinline = false keeps records \
             to their own code (a new training; see the committed profiles guide)."
        } else {
            ""
        };
        cx.printer.warn(format!(
            "it was trained with {trained_with}, this is {}: what the sources tell holds for \
             names, but a new rustc also compiles some unchanged code differently, and those \
             functions are stale too; {} of the counts are in the standard library's code, \
             which changed with it.{inlined} The optimized build tells the share that still \
             matches (`pgo-build optimize`), and a share of counts overstates the share of the \
             win kept",
            cx.rustc.version_line,
            percent(std_counts as f64 / predicted.total_counts.max(1) as f64)
        ));
    }
    if stale > max {
        bail!(
            "{summary}. That is above [pgo] max_stale = {max}: retrain (`pgo-build run` without \
             [pgo] profile, then `pgo-build export` over the committed file)"
        );
    }
    cx.printer.info(format!(
        "{summary}. Within [pgo] max_stale = {max}: usable without training"
    ));
    Ok(())
}
