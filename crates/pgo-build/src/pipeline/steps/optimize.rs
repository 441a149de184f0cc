//! `pgo-build optimize`: the profile-guided build, from the last training's merged profile or
//! a committed one.
//!
//! Invariants kept here:
//! - a binary without profile data is never built with `-Cprofile-use` (refused, or with
//!   `--allow-missing-profile` built with the baseline's flags and staged with `pgo: false`);
//! - the settings recorded by `instrument` must equal the current ones;
//! - a profile that rustc cannot use fails the stage instead of yielding a build without PGO.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use comfy_table::Table;

use crate::cargo::build;
use crate::cargo::manifest::StageManifest;
use crate::cargo::settings::VALUE_PROFILING_OFF;
use crate::cargo::settings::check_same_settings;
use crate::cargo::workspace::BinTarget;
use crate::config::StartupOrder;
use crate::layout::Stage;
use crate::pipeline::bundles::{BundlesFile, merged_bundles};
use crate::pipeline::committed::{self, committed_profile};
use crate::pipeline::context::{Context, Session};
use crate::pipeline::requests::OptimizeRequest;
use crate::pipeline::stage_build::{
    cargo_build, check_bolt_compatible_profile, executables_of, plain_flags, stage_binaries,
};
use crate::pipeline::trained::{
    Trained, account_dirs, cargo_only_message, no_profile_message, print_accounting,
    refuse_idle_workloads, report_accounting, usable_training,
};
use crate::profiles::diagnostics::{self, Summary};
use crate::profiles::{self, PgoProfile, insight, startup_order};
use crate::util::printer::Fitted;
use crate::util::units::human_bytes;
use crate::wrappers::rustc::crate_carry::{self, CarryRecord};

/// Refuses binaries without usable profile data (unless allowed): built with
/// `-Cprofile-use` but no data, a binary is treated as all-cold, slower than no PGO at all.
fn refuse_missing_profiles(
    cx: &Context,
    missing: &[(BinTarget, String)],
    allowed: &[String],
) -> Result<()> {
    let refused: Vec<&String> = missing
        .iter()
        .filter(|(bin, _)| !allowed.contains(&bin.name))
        .map(|(_, reason)| reason)
        .collect();
    if !refused.is_empty() {
        bail!(
            "refusing to build with PGO: {} binar{} no usable profile data, and a binary \
             built with -Cprofile-use but no data for it is treated as all-cold - slower than \
             no PGO at all.\n  - {}\nFix: make a training workload in {} run {} to a normal \
             exit (return from main or std::process::exit){}, or pass --allow-missing-profile \
             BIN to ship {} as a plain release build.",
            refused.len(),
            if refused.len() == 1 {
                "y has"
            } else {
                "ies have"
            },
            refused
                .iter()
                .map(|r| r.as_str())
                .collect::<Vec<_>>()
                .join("\n  - "),
            cx.config.display_path(),
            if refused.len() == 1 { "it" } else { "them" },
            if cx.config.services.is_empty() {
                String::new()
            } else {
                // A server killed by the stop signal is the usual cause with services.
                "; a [[service]] exits normally only on a signal it handles: `stop = { signal \
                 = \"SIGINT\" }` for one that stops on Ctrl-C (accepted: SIGTERM, the default, \
                 SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2), or a `stop.command`"
                    .to_owned()
            },
            if refused.len() == 1 { "it" } else { "them" },
        );
    }
    Ok(())
}

/// What rustc said of the profile in the optimized build: refused when it could not use it at
/// all; then per crate what did not match, and, for a committed profile, its staleness.
fn check_profile_use(
    cx: &Context,
    session: &mut Session,
    inputs: &ProfileInputs,
    profile: &PgoProfile,
    (output, carry): (&build::BuildOutput, Option<&(PathBuf, PathBuf)>),
) -> Result<()> {
    let summary = Summary::from_diagnostics(&output.diagnostics);
    session.report.optimize_diagnostics = Some(summary.clone());
    if !summary.unusable_profile.is_empty() {
        bail!(
            "rustc could not use the profile {} and would have built without PGO:\n  {}\n\
             The profile is empty or was written by another LLVM version than rustc's ({}).",
            profile.path().display(),
            summary.unusable_profile.join("\n  "),
            cx.rustc.llvm_version
        );
    }
    print_diagnostic_summary(cx, &summary);
    for (krate, functions) in &summary.expected {
        cx.printer.detail(format!(
            "{functions} functions of {krate} differ from the profile by design (code \
             compiled into instrumented builds only) and are left out of the counts"
        ));
    }
    match (&inputs.committed, carry) {
        (Some(committed), Some((_, log))) => check_staleness(
            cx,
            session,
            &committed.functions,
            &output.diagnostics,
            &carried_by_crate(log),
        )?,
        _ if summary.total_mismatched() > 0 => cx.caution(format!(
            "{} functions changed since the profile was recorded and get no profile data; \
             re-run `pgo-build instrument` and `pgo-build train` to refresh it",
            summary.total_mismatched()
        ))?,
        _ => {}
    }
    Ok(())
}

/// Builds the optimized stage from the committed profile, or the last training's (`trained`:
/// what `train` returned earlier in this command, whose accounting is not read again).
pub fn optimize(
    cx: &Context,
    session: &mut Session,
    args: &OptimizeRequest,
    trained: Option<&Trained>,
) -> Result<()> {
    for name in &args.allow_missing_profile {
        if !cx.bins.iter().any(|b| &b.name == name) {
            bail!("--allow-missing-profile {name}: no such selected binary");
        }
    }
    cx.prefetch_dependency_graph();
    let inputs = match cx.config.pgo.profile.clone() {
        Some(relative) => committed_profile_inputs(cx, &relative)?,
        None => trained_profile_inputs(cx, session, trained)?,
    };
    refuse_missing_profiles(cx, &inputs.missing, &args.allow_missing_profile)?;
    let without_data: Vec<BinTarget> = inputs.missing.iter().map(|(bin, _)| bin.clone()).collect();
    let with_data: Vec<BinTarget> = cx
        .bins
        .iter()
        .filter(|b| !without_data.contains(b))
        .cloned()
        .collect();
    let (Some(profile), false) = (inputs.profile.clone(), with_data.is_empty()) else {
        bail!("no binary has usable profile data; nothing can be built with PGO");
    };

    check_bolt_compatible_profile(cx)?;
    crate::pipeline::stage_build::check_lld_before_building(cx)?;
    // Not in the checkout: the same path from every checkout, for a compile cache. (A
    // path relative to the workspace root would not do: cargo runs rustc for registry
    // crates in their own directories.)
    let profile_use = profiles::checkout_independent(profile.path());
    let mut flags = vec![
        format!("-Cprofile-use={}", profile_use.display()),
        "-Cllvm-args=-pgo-warn-missing-function".to_owned(),
    ];
    flags.extend(startup_order_flags(cx, session, &profile, &profile_use)?);
    if inputs.instrumented.as_ref().is_some_and(|i| i.continuous()) {
        // A continuous-mode profile has no value profiles: without this, profile use
        // expects them at every indirect call and memcpy and warns that each is stale.
        flags.push(VALUE_PROFILING_OFF.to_owned());
    }
    flags.extend(plain_flags(cx));
    let carry = match &inputs.committed {
        Some(committed) => Some(committed::carry_setup(cx, &profile_use, &committed.text)?),
        None => None,
    };
    let verbose = cx.printer.is_verbose();
    let output = cargo_build(
        cx,
        session,
        Stage::Optimized,
        &with_data,
        &flags,
        carry.as_ref().map(|(setup, _)| setup.as_path()),
        &|d| verbose || diagnostics::classify(&d.message).is_none(),
    )?;
    check_profile_use(cx, session, &inputs, &profile, (&output, carry.as_ref()))?;

    // Every training gives the optimized build other flags, hence new units: drop the old.
    if let (Some(executable), Some(keep)) =
        (output.executables.values().next(), &output.unit_hashes)
    {
        let (files, bytes) = build::prune_stale_units(executable, keep);
        if files > 0 {
            cx.printer.detail(format!(
                "removed {files} units of earlier optimized builds ({})",
                human_bytes(bytes)
            ));
        }
    }
    let mut executables = executables_of(&with_data, output, true);
    if !without_data.is_empty() {
        cx.printer.warn(format!(
            "building {} without PGO (--allow-missing-profile): a plain release build is \
             staged in its place",
            without_data
                .iter()
                .map(|b| b.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        let plain_flags = plain_flags(cx);
        let plain = cargo_build(
            cx,
            session,
            Stage::Baseline,
            &without_data,
            &plain_flags,
            None,
            &|_| true,
        )?;
        executables.extend(executables_of(&without_data, plain, false));
    }
    let upstream: Vec<&StageManifest> = inputs.instrumented.iter().collect();
    stage_binaries(cx, session, Stage::Optimized, flags, executables, &upstream)?;
    Ok(())
}

/// The optimized link's function order (`[pgo] startup_order`) from `profile`'s temporal
/// traces, recorded in the report; refused when the profile has none. `profile_use` is the
/// copy `-Cprofile-use` names.
fn startup_order_flags(
    cx: &Context,
    session: &mut Session,
    profile: &PgoProfile,
    profile_use: &Path,
) -> Result<Vec<String>> {
    let mode = cx.config.pgo.startup_order;
    session.report.startup_order = None;
    if mode == StartupOrder::Off {
        return Ok(Vec::new());
    }
    let profdata = cx.profdata()?.clone();
    let traces = startup_order::traces(&profdata, profile.path(), &cx.printer)?;
    if traces.kept == 0 {
        bail!(
            "[pgo] startup_order = \"{}\" needs the temporal traces of a training, and {} \
             has none: it was trained with binaries instrumented without them. Run \
             `pgo-build instrument` and `pgo-build train` again (with startup_order set, \
             instrumenting records them){}",
            mode.name(),
            profile.path().display(),
            if cx.config.pgo.profile.is_some() {
                ", then `pgo-build export` the profile again"
            } else {
                ""
            }
        );
    }
    let (order_file, ordered) = if mode == StartupOrder::OrderingFile {
        let (file, count) = startup_order::order_file(
            &profdata,
            profile.path(),
            &cx.layout.profiles_dir(),
            &cx.printer,
        )?;
        (Some(file), Some(count))
    } else {
        (None, None)
    };
    let order_use = order_file.as_deref().map(profiles::checkout_independent);
    cx.printer.info(format!(
        "start-up order ({}): {} traces from {} processes{}",
        mode.name(),
        traces.kept,
        traces.seen,
        ordered.map_or(String::new(), |n| format!(", {n} functions ordered"))
    ));
    session.report.startup_order = Some(crate::report::OrderRecord {
        mode,
        traces,
        order_file,
        ordered_functions: ordered,
    });
    Ok(startup_order::link_flags(
        mode,
        profile_use,
        order_use.as_deref(),
    ))
}

/// The profile of the last training: checked, merged under its content hash; or the one
/// `pgo-build merge` made from bundles, when that came after the last local training.
fn trained_profile_inputs(
    cx: &Context,
    session: &mut Session,
    trained: Option<&Trained>,
) -> Result<ProfileInputs> {
    if let Some(record) = merged_bundles(cx)? {
        return bundle_profile_inputs(cx, session, record);
    }
    let instrumented = StageManifest::load(
        &cx.layout,
        Stage::Instrumented,
        "run `pgo-build instrument` and `pgo-build train` first (or commit a profile: \
         `pgo-build export` and [pgo] profile)",
    )?;
    check_same_settings(&instrumented.settings, &cx.settings)?;
    check_instrumented_selection(cx, &instrumented)?;
    let usable = usable_training(cx, &instrumented)?;
    let accounting = match trained.and_then(|t| t.accounting_of(&instrumented, &usable)) {
        Some(handed) => {
            cx.printer
                .detail("the per-binary training table is the one shown above");
            handed.clone()
        }
        None => {
            let accounting = account_dirs(cx, &usable, &instrumented)?;
            print_accounting(cx, &accounting);
            accounting
        }
    };
    refuse_idle_workloads(cx, &usable, &accounting)?;
    if accounting.profiles.is_empty() {
        bail!(
            "there are no raw profiles under {}: run `pgo-build train` (with the training \
             workloads in {}) before optimizing",
            cx.layout.raw_profiles_dir().display(),
            cx.config.display_path()
        );
    }
    report_accounting(cx, session, &accounting)?;
    // Profiles of cargo workloads' own binaries go into every binary's profile.
    let from_cargo = !accounting.cargo_inputs().is_empty();
    for bin in &cx.bins {
        if from_cargo && accounting.per_binary[&bin.name].valid_files == 0 {
            cx.caution(cargo_only_message(&bin.name))?;
        }
    }
    let missing = cx
        .bins
        .iter()
        .filter(|bin| !from_cargo && accounting.per_binary[&bin.name].valid_files == 0)
        .map(|bin| {
            (
                bin.clone(),
                no_profile_message(&bin.name, &accounting.per_binary[&bin.name]),
            )
        })
        .collect();
    let inputs = accounting.valid_inputs();
    if inputs.is_empty() {
        return Ok(ProfileInputs {
            profile: None,
            missing,
            committed: None,
            instrumented: Some(instrumented),
        });
    }
    let merged = profiles::merge(
        &inputs,
        &cx.layout.profiles_dir(),
        cx.profdata()?,
        &cx.printer,
    )?;
    cx.printer.info(format!(
        "merged {} profile files into {} ({}, {} functions)",
        inputs.len(),
        merged.path.display(),
        human_bytes(merged.size_bytes),
        merged.total_functions
    ));
    session.report.merged_profile = Some(merged.clone());
    if merged.total_functions == 0 {
        bail!(
            "the merged profile {} contains no functions; rustc would build without PGO. \
             Check the training workloads' logs under {}.",
            merged.path.display(),
            cx.layout.logs_dir().display()
        );
    }
    Ok(ProfileInputs {
        profile: Some(PgoProfile::merged_at(merged.path)),
        missing,
        committed: None,
        instrumented: Some(instrumented),
    })
}

/// The profile `pgo-build merge` made from training bundles, checked.
fn bundle_profile_inputs(
    cx: &Context,
    session: &mut Session,
    record: BundlesFile,
) -> Result<ProfileInputs> {
    check_same_settings(&record.instrumented.settings, &cx.settings)?;
    check_instrumented_selection(cx, &record.instrumented)?;
    let path = &record.merged.path;
    let intact = std::fs::read(path).is_ok_and(|data| {
        path.file_name().is_some_and(|name| {
            *name == *format!("merged-{}.profdata", profiles::content_hash(&data))
        })
    });
    if !intact {
        bail!(
            "the profile `pgo-build merge` made, {}, is gone or was changed since; run \
             `pgo-build merge` with the bundles again",
            path.display()
        );
    }
    cx.printer.info(format!(
        "using the profile merged from {} training bundles (shards {}) by `pgo-build merge`: \
         {} ({} functions)",
        record.bundles.len(),
        record
            .bundles
            .iter()
            .map(|b| b.shard.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        path.display(),
        record.merged.total_functions
    ));
    session.report.merged_profile = Some(record.merged.clone());
    let from_cargo = !record.cargo_workloads.is_empty();
    let no_own_profile = |bin: &BinTarget| {
        record
            .per_binary
            .get(&bin.name)
            .is_none_or(|figures| figures.valid_files == 0)
    };
    for bin in &cx.bins {
        if from_cargo && no_own_profile(bin) {
            cx.caution(cargo_only_message(&bin.name))?;
        }
    }
    let missing = cx
        .bins
        .iter()
        .filter(|bin| !from_cargo && no_own_profile(bin))
        .map(|bin| {
            let reason = format!(
                "`{}`: none of the {} merged bundles has a profile of it",
                bin.name,
                record.bundles.len()
            );
            (bin.clone(), reason)
        })
        .collect();
    Ok(ProfileInputs {
        profile: Some(PgoProfile::merged_at(record.merge.merged.path)),
        missing,
        committed: None,
        instrumented: Some(record.instrumented),
    })
}

/// Refuses a selected binary that the instrumented build did not build.
fn check_instrumented_selection(cx: &Context, instrumented: &StageManifest) -> Result<()> {
    for bin in &cx.bins {
        if instrumented.binary(&bin.name).is_none() {
            bail!(
                "binary `{}` was not instrumented (the instrumented stage built: {}); run \
                 `pgo-build instrument` and `pgo-build train` with the same selection",
                bin.name,
                instrumented
                    .binaries
                    .iter()
                    .map(|b| b.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }
    Ok(())
}

/// A committed profile (`[pgo] profile`), checked; binaries whose crate has no counts in
/// it are the ones without data.
fn committed_profile_inputs(cx: &Context, relative: &Path) -> Result<ProfileInputs> {
    let (committed, metadata) = committed_profile(cx, relative)?;
    let user_file = cx.workspace.root.join(relative);
    let renames = committed::toolchain_renames(cx, metadata.as_ref())?;
    let (text, functions) = committed::committed_text(cx, &user_file, &renames)?;
    let profile = committed::offered_profile(cx, &committed, &text, !renames.is_empty())?;
    if functions.is_empty() {
        bail!(
            "the committed profile {} contains no functions",
            cx.workspace.root.join(relative).display()
        );
    }
    cx.printer.info(format!(
        "using the committed profile {} ({} functions)",
        relative.display(),
        functions.len()
    ));
    let ran: BTreeSet<&str> = functions
        .iter()
        .filter(|f| f.total > 0)
        .map(|f| f.krate.as_str())
        .collect();
    let missing = cx
        .bins
        .iter()
        .filter(|bin| !ran.contains(bin.name.replace('-', "_").as_str()))
        .map(|bin| {
            let reason = format!(
                "`{}`: the committed profile has no counts for its crate (the training that \
                 produced it did not run it)",
                bin.name
            );
            (bin.clone(), reason)
        })
        .collect();
    Ok(ProfileInputs {
        profile: Some(profile),
        missing,
        committed: Some(CommittedInputs { text, functions }),
        instrumented: None,
    })
}

/// The committed profile per crate where anything was carried, changed or new: each crate's
/// share of the profile's counts and what happened to it.
fn per_crate_staleness(staleness: &committed::Staleness) -> Option<String> {
    use crate::util::units::percent;
    let total = staleness.profile_counts.max(1) as f64;
    let interesting: Vec<_> = staleness
        .per_crate
        .iter()
        .filter(|(_, c)| c.changed_functions + c.carried_functions + c.new_functions > 0)
        .collect();
    if interesting.is_empty() {
        return None;
    }
    let mut table = Table::new();
    table.fitted().set_header([
        "Crate",
        "Share of the profile",
        "Carried over",
        "Changed or renamed (data dropped)",
        "New code without data",
    ]);
    for (krate, c) in interesting {
        table.add_row([
            krate.clone(),
            percent(c.counts as f64 / total),
            format!(
                "{} ({})",
                c.carried_functions,
                percent(c.carried_counts as f64 / total)
            ),
            format!(
                "{} ({})",
                c.changed_functions,
                percent(c.changed_counts as f64 / total)
            ),
            c.new_functions.to_string(),
        ]);
    }
    Some(crate::util::printer::rendered(table))
}

/// Fails above `[pgo] max_stale` (a share of the profile's counts), warns below it.
fn check_staleness(
    cx: &Context,
    session: &mut Session,
    functions: &[insight::FunctionCounts],
    diagnostics: &[build::Diagnostic],
    carried: &[CarryRecord],
) -> Result<()> {
    let staleness = committed::staleness(functions, diagnostics, carried);
    session.report.staleness = Some(staleness.clone());
    use crate::util::units::percent;
    cx.printer.info(format!(
        "committed profile: the functions that still match hold {} of its counts ({} of {} \
         functions changed{})",
        percent(staleness.matching_share()),
        staleness.stale_functions,
        staleness.profile_functions,
        match staleness.carried_functions {
            0 => String::new(),
            n => format!(
                "; {n} found in other codegen units and carried over ({} of the counts), \
                 {} recompiled",
                percent(staleness.carried_counts as f64 / staleness.profile_counts.max(1) as f64),
                match staleness.recompiled.len() {
                    1 => "1 crate".to_owned(),
                    n => format!("{n} crates"),
                }
            ),
        }
    ));
    for error in &staleness.carry_errors {
        cx.caution(format!(
            "could not carry the committed profile over in {error}; that crate was built \
             with the records that still had their names"
        ))?;
    }
    if let Some(table) = per_crate_staleness(&staleness) {
        cx.printer.table(table);
    }
    if staleness.stale_functions == 0 {
        return Ok(());
    }
    const NAMED: usize = 5;
    let changed = format!(
        " Changed since the profile was recorded, most counts first: {}{}.",
        staleness
            .changed
            .iter()
            .take(NAMED)
            .map(|f| format!("{} ({})", f.name, percent(f.share)))
            .collect::<Vec<_>>()
            .join(", "),
        match staleness.changed.len().saturating_sub(NAMED) {
            0 => String::new(),
            more => format!(" and {more} more (report.json: staleness.changed)"),
        }
    );
    let renamed = match staleness.renamed_crates.as_slice() {
        [] => String::new(),
        crates => format!(
            " Renamed (every symbol of theirs has another hash{}): {}.",
            match cx.settings.stable_names {
                true =>
                    ": their features, or the versions of them in the dependency graph, \
                         changed",
                false =>
                    ": with [pgo] stable_names = false, names change with every version \
                          of a crate or its dependencies",
            },
            crates.join(", ")
        ),
    };
    let changed = format!("{renamed}{changed}");
    let max = cx.config.pgo.max_stale();
    if staleness.share <= max / 4.0 {
        cx.printer.info(format!(
            "{} of the committed profile's counts are in functions that changed.{changed}",
            percent(staleness.share)
        ));
        return Ok(());
    }
    if staleness.share > max {
        bail!(
            "the committed profile is stale: the functions that changed or were renamed hold {} \
             of its counts, above [pgo] max_stale = {max}.{changed} Re-train: run `pgo-build run` \
             without [pgo] profile, then `pgo-build export` over the committed file.",
            percent(staleness.share)
        );
    }
    cx.caution(format!(
        "{} of the committed profile's counts are in functions that changed.{changed} \
         Re-train soon.",
        percent(staleness.share)
    ))
}

fn print_diagnostic_summary(cx: &Context, summary: &Summary) {
    if summary.per_crate.is_empty() {
        cx.printer
            .info("rustc reported no functions without profile data");
        return;
    }
    let value_sites = summary
        .per_crate
        .values()
        .any(|c| c.inconsistent_value_sites > 0);
    let mut table = Table::new();
    table.fitted().set_header(
        [
            "Crate",
            "Functions without data",
            "Changed since training (hash mismatch)",
        ]
        .into_iter()
        .chain(value_sites.then_some("Value profile discarded (stale)")),
    );
    for (krate, counts) in &summary.per_crate {
        table.add_row(
            [
                krate.clone(),
                counts.missing_functions.to_string(),
                counts.mismatched_functions.to_string(),
            ]
            .into_iter()
            .chain(value_sites.then(|| counts.inconsistent_value_sites.to_string())),
        );
    }
    cx.printer.table(crate::util::printer::rendered(table));
}

/// A committed profile as text (for the wrapper's carrying) and its functions.
struct CommittedInputs {
    text: PathBuf,
    functions: Vec<insight::FunctionCounts>,
}

/// The carry log's last record of each crate (a crate compiled again replaces its record).
fn carried_by_crate(log: &Path) -> Vec<CarryRecord> {
    let mut last = std::collections::BTreeMap::new();
    for record in crate_carry::read_log(log) {
        last.insert(record.krate.clone(), record);
    }
    last.into_values().collect()
}

/// Where `optimize` gets its profile from, and which binaries have no data in it.
struct ProfileInputs {
    /// None when no training wrote a usable profile: every binary is then missing.
    profile: Option<PgoProfile>,
    missing: Vec<(BinTarget, String)>,
    /// The committed profile's text form and functions, for carrying and the staleness check.
    committed: Option<CommittedInputs>,
    /// The instrumented build the trained profile came from (none for a committed profile).
    instrumented: Option<StageManifest>,
}
