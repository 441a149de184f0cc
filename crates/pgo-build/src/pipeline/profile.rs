//! Profile insight and committed profiles: `profile show`, `profile overlap`, `export`, and the
//! checks `optimize` runs on a committed profile (`[pgo] profile`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use comfy_table::Table;

use super::accounting::{account, account_dirs};
use super::bundles::merged_bundles;
use super::committed::{self, ProfileMetadata, metadata_path};
use super::context::{Context, Run};
use super::workloads::{Training, instrumented_profile_env, run_training};
use crate::cargo::manifest::StageManifest;
use crate::cli::{CheckArgs, ExportArgs, OverlapArgs, ShowArgs};
use crate::config::{Role, StartupOrder};
use crate::layout::Stage;
use crate::profiles::{self, Accounting, insight, startup_order};
use crate::util::command::Cmd;
use crate::util::files::write_atomically;
use crate::util::printer::Fitted;
use crate::wrappers::cc;
use crate::wrappers::rustc::{self, estimates};

/// The instrumented stage and the accounting of its last training.
fn last_training(cx: &Context) -> Result<(StageManifest, Accounting)> {
    let instrumented = StageManifest::load(
        &cx.layout,
        Stage::Instrumented,
        "run `pgo-build instrument` and `pgo-build train` first",
    )?;
    let accounting = account(cx, &instrumented)?;
    Ok((instrumented, accounting))
}

/// `profile show --json`'s record of a profile: its functions' counts (`hot`, `shares`), the
/// C/C++ part's counts where a build script compiled any, the last training's coverage and
/// the temporal traces with the functions their order covers.
fn shown_profile(
    profile: &Path,
    functions: &[insight::FunctionCounts],
    (hot, shares): (&[&insight::FunctionCounts], &[(String, f64)]),
    c_total: Option<u64>,
    accounting: Option<&Accounting>,
    (traces, ordered): (crate::report::Traces, Option<usize>),
) -> crate::report::ShownProfile {
    use crate::report::{CrateShare, HotFunction, LanguageShares, ShownCoverage};
    let total: u64 = functions
        .iter()
        .fold(0, |sum, f| sum.saturating_add(f.total));
    let share = |count: u64| count as f64 / total.max(1) as f64;
    crate::report::ShownProfile {
        coverage: accounting
            .iter()
            .flat_map(|a| a.per_binary.iter())
            .map(|(name, f)| {
                let coverage = ShownCoverage {
                    covered: f.covered_functions,
                    instrumented: f.instrumented_functions,
                };
                (name.clone(), coverage)
            })
            .collect(),
        crates: shares
            .iter()
            .map(|(krate, share)| CrateShare {
                krate: krate.clone(),
                share: *share,
            })
            .collect(),
        functions: functions.len(),
        hottest: hot
            .iter()
            .map(|f| HotFunction {
                count: f.total,
                krate: f.krate.clone(),
                name: f.name.clone(),
                share: share(f.total),
            })
            .collect(),
        languages: c_total.map(|c| LanguageShares {
            c: share(c),
            rust: share(total - c),
        }),
        ordered_functions: ordered,
        profile: profile.to_owned(),
        temporal_traces: traces,
        total_count: total,
    }
}

pub fn profile_show(cx: &Context, args: &ShowArgs) -> Result<()> {
    if let Some(binary) = &args.binary
        && !cx.bins.iter().any(|b| &b.name == binary)
    {
        bail!("--binary {binary}: not a selected binary");
    }
    let (profile, accounting) = inspected_profile(cx, args.binary.as_deref())?;
    let profdata = cx.profdata()?.clone();
    let mut functions = insight::functions(&profile, &profdata, &cx.printer)?;
    // C compiled by build scripts in a cross-language training: named by its package.
    let origins = cc::COrigins::new(&cc::read_log(
        &cx.layout.c_compile_log(Stage::Instrumented),
        None,
    ));
    origins.attribute(&mut functions);
    let total: u64 = functions
        .iter()
        .fold(0, |sum, f| sum.saturating_add(f.total));
    let c_total: u64 = functions
        .iter()
        .filter(|f| f.krate.ends_with(cc::C_SUFFIX))
        .map(|f| f.total)
        .sum();
    let hot = insight::hottest(&functions, args.top);
    let shares = insight::crate_shares(&functions);
    let traces = startup_order::traces(&profdata, &profile, &cx.printer)?;
    let ordered = if traces.kept > 0 {
        let dir = cx.layout.profiles_dir();
        Some(startup_order::order_file(&profdata, &profile, &dir, &cx.printer)?.1)
    } else {
        None
    };
    if args.json {
        let shown = shown_profile(
            &profile,
            &functions,
            (&hot, &shares),
            (!origins.is_empty()).then_some(c_total),
            accounting.as_ref(),
            (traces, ordered),
        );
        cx.printer.table(serde_json::to_string_pretty(&shown)?);
        return Ok(());
    }
    let mut table = Table::new();
    table
        .fitted()
        .set_header(["#", "Function", "Crate", "Count", "Share"]);
    for (rank, function) in hot.iter().enumerate() {
        table.add_row([
            (rank + 1).to_string(),
            crate::util::units::shortened(&function.name, 90),
            function.krate.clone(),
            function.total.to_string(),
            format!(
                "{:.1}%",
                100.0 * function.total as f64 / total.max(1) as f64
            ),
        ]);
    }
    cx.printer.table(crate::util::printer::rendered(table));
    let mut crates = Table::new();
    crates.fitted().set_header(["Crate", "Share of all counts"]);
    for (krate, share) in &shares {
        crates.add_row([krate.clone(), format!("{:.1}%", share * 100.0)]);
    }
    cx.printer.table(crate::util::printer::rendered(crates));
    if !origins.is_empty() {
        let c_functions = functions.iter().filter(|f| f.krate.ends_with(cc::C_SUFFIX));
        let (c_run, c_all) = c_functions.fold((0, 0), |(run, all), f| {
            (run + usize::from(f.total > 0), all + 1)
        });
        cx.printer.info(format!(
            "languages: Rust {:.1}%, C/C++ {:.1}% of all counts; {c_run} of {c_all} C/C++ \
             functions in the profile ran",
            100.0 * (total - c_total) as f64 / total.max(1) as f64,
            100.0 * c_total as f64 / total.max(1) as f64,
        ));
    }
    if let Some(accounting) = &accounting {
        let mut coverage = Table::new();
        coverage
            .fitted()
            .set_header(["Binary", "Functions run / instrumented"]);
        for (binary, figures) in &accounting.per_binary {
            if args.binary.as_ref().is_none_or(|b| b == binary) {
                coverage.add_row([binary.clone(), figures.coverage_text()]);
            }
        }
        cx.printer.table(crate::util::printer::rendered(coverage));
    }
    match ordered {
        Some(functions) => cx.printer.info(format!(
            "temporal traces: {} kept of {} processes; the start-up order they give covers \
             {functions} functions",
            traces.kept, traces.seen
        )),
        None if cx.config.pgo.startup_order != StartupOrder::Off => cx.printer.warn(
            "no temporal traces in this profile: [pgo] startup_order needs a training with \
             binaries instrumented for them (`pgo-build instrument`, then `train`)",
        ),
        None => {}
    }
    Ok(())
}

/// The profile `profile show` looks at: the committed one when configured, else a merge of
/// the last training's usable files (of one binary, or all).
fn inspected_profile(cx: &Context, binary: Option<&str>) -> Result<(PathBuf, Option<Accounting>)> {
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
            per_binary: record.per_binary,
        };
        return Ok((record.merged.path, Some(accounting)));
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

fn merge_into(cx: &Context, inputs: &[&Path], output: &Path) -> Result<()> {
    profiles::merge_to(inputs, output, cx.profdata()?, &cx.printer)
}

/// Runs the holdout workloads against the instrumented binaries into a profile of their
/// own and reports, per binary, how well training's profile represents it.
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

pub fn profile_overlap(cx: &Context, run: &mut Run, args: &OverlapArgs) -> Result<()> {
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
        run,
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
    let profdata = cx.profdata()?.clone();
    let scratch = cx.layout.profiles_dir().join("scratch");
    let threshold = cx.config.pgo.min_overlap();
    let mut table = Table::new();
    table.fitted().set_header([
        "Binary",
        "Edge profile overlap",
        "Hot in holdout, cold or absent in training",
    ]);
    run.report.overlap.clear();
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
        // Overlap is only meaningful between profiles of the same instrumented binary.
        let base = scratch.join(format!("overlap-{}-train.profdata", bin.name));
        let probe = scratch.join(format!("overlap-{}-holdout.profdata", bin.name));
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
            &insight::functions(&base, &profdata, &cx.printer)?,
            &insight::functions(&probe, &profdata, &cx.printer)?,
            args.top,
        );
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
        if overlap < threshold {
            warnings.push(format!(
                "training represents holdout poorly for `{}`: edge-profile overlap {:.1}% is below \
                 {:.0}% ([pgo] min_overlap). Functions training misses: {}",
                bin.name,
                overlap * 100.0,
                threshold * 100.0,
                if listed.is_empty() {
                    "none stand out".to_owned()
                } else {
                    listed.join(", ")
                }
            ));
        }
        run.begin_outputs(cx)?;
        run.report.overlap.insert(
            bin.name.clone(),
            crate::report::OverlapRecord {
                edge_overlap: overlap,
                missed_by_training: missed,
            },
        );
    }
    cx.printer.table(crate::util::printer::rendered(table));
    for warning in warnings {
        cx.caution(warning)?;
    }
    Ok(())
}

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

/// `profile check`: how much of the committed profile applies to the sources now (see
/// `profiles::prediction`), without building; an error when the share predicted stale is
/// above `[pgo] max_stale`, so a scheduled job can retrain on it.
pub fn profile_check(cx: &Context, args: &CheckArgs) -> Result<()> {
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
        for function in predicted.at_risk.iter().take(args.top) {
            cx.printer.info(format!(
                "  at risk: {} ({} of the counts; {})",
                function.name,
                percent(function.counts as f64 / total),
                match (&function.standing, &function.file) {
                    (Standing::ChangedFunction, Some(file)) =>
                        format!("its source in {file} changed"),
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
        cx.printer.warn(format!(
            "it was trained with {trained_with}, this is {}: what the sources tell holds for \
             names, but a new rustc also compiles some unchanged code differently, and those \
             functions are stale too; {} of the counts are in the standard library's code, \
             which changed with it. The optimized build tells the share that still matches \
             (`pgo-build optimize`)",
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

/// Writes the merged training profile and its metadata.
pub fn export(cx: &Context, run: &mut Run, args: &ExportArgs) -> Result<()> {
    if let Some(path) = &args.rustc_estimates {
        export_rustc_estimates(cx, path)?;
    }
    let Some(output) = &args.output else {
        return Ok(());
    };
    let (settings, workloads, inputs) = match merged_bundles(cx)? {
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
            (
                record.instrumented.settings,
                workloads,
                vec![record.merged.path],
            )
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
            let workloads = run
                .report
                .training
                .iter()
                // Holdout runs of `profile overlap` are recorded too, but did not train.
                .filter(|w| {
                    w.stage == Stage::Instrumented.name()
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
            (instrumented.settings, workloads, inputs)
        }
    };
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
        2 => committed::sysroot_crates(cx).unwrap_or_else(|err| {
            cx.printer.warn(format!(
                "{err:#}; the profile is exported without them, and a build with another rustc \
                 will not find its records of the standard library's generics"
            ));
            Default::default()
        }),
        _ => Default::default(),
    };
    let partial = output.with_extension("profdata.partial");
    // A failed merge or rename leaves no `.partial` behind, and the file it would replace as
    // it was.
    let written = merge_into(cx, &inputs, &partial).and_then(|()| {
        let data = crate::util::files::read(&partial)?;
        std::fs::rename(&partial, &output)
            .with_context(|| format!("could not write {}", output.display()))?;
        Ok(data)
    });
    let data = match written {
        Ok(data) => data,
        Err(err) => {
            let _ = std::fs::remove_file(&partial);
            return Err(err);
        }
    };
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
