//! The rustc of a stage's build against the memory budget: pgo-build as cargo's rustc wrapper
//! (its variables, the estimates it admits by: the stage's own, carried ones, the baseline's
//! scaled), and afterwards what it logged: the report's figures, the warnings, the estimates
//! for next time and the bound the dependency graph put on the build (see rustc_wrapper/ and
//! cargo_timings.rs).

use std::path::PathBuf;

use anyhow::Result;

use super::context::{Context, Session};
use crate::cargo::build::BuildOutput;
use crate::cargo::sccache;
use crate::cargo::timings::{self, TimedUnit};
use crate::layout::{Layout, Stage};
use crate::report::{CrateKind, RustcSummary};
use crate::util::units::human_bytes;
use crate::wrappers::linker;
use crate::wrappers::rustc::estimates::{self, CarriedEstimates};
use crate::wrappers::rustc::{self, Estimates, RustcRecord};

/// pgo-build as rustc wrapper for one build: the variables cargo gets, and the settings the
/// report records with the figures.
pub(super) struct RustcWrapper {
    pub env: Vec<(String, String)>,
    pub summary: RustcSummary,
}

/// pgo-build as cargo's rustc wrapper for a stage's build (see rustc_wrapper.rs): its
/// variables, the budget and how many rustc may run at once. Where memory may hold a crate
/// back, cargo gets twice the cores as job slots (unless `-j` says otherwise), so light
/// crates overtake one waiting for memory; where it never can, cargo's own `-j` of the
/// cores schedules them, by its critical path, and no rustc waits in the ledger for a CPU
/// slot (hexyl 0.16.0: 12.7 s of such waits summed over its crates; its release job's wall
/// time was within noise either way, bench/release-job-cost).
pub(super) fn wrapper_setup(
    cx: &Context,
    stage: Stage,
    (budget, budget_reason): (u64, String),
) -> Result<RustcWrapper> {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get()) as u32;
    // cargo, pgo-build and the wrappers waiting in front of rustc live in the budget too.
    let rustc_budget = budget.saturating_sub(rustc::OVERHEAD);
    crate::util::files::create_dir_all(cx.layout.stage_dir(stage))?;
    let estimates = admission_estimates(cx, stage);
    let (cpus, cargo_jobs) = match cx.jobs {
        Some(jobs) => (jobs.max(1), jobs.max(1)),
        None if memory_never_waits(&estimates, cores, rustc_budget) => (cores, cores),
        None => (cores, cores * 2),
    };
    let program = linker::wrapper(&cx.layout.root().join("rustc-wrapper"), &"rustc".into())?;
    let chained = sccache::user_wrapper(&cx.cargo_config).unwrap_or_default();
    let admission = cx.layout.rustc_admission_estimates(stage);
    crate::util::files::write_atomically(
        &admission,
        serde_json::to_string(&estimates)?.as_bytes(),
    )?;
    let mut env = vec![
        ("RUSTC_WRAPPER".to_owned(), program.display().to_string()),
        (rustc::MODE_ENV.to_owned(), "1".to_owned()),
        (
            rustc::CHAINED_ENV.to_owned(),
            chained.to_string_lossy().into_owned(),
        ),
        // One ledger per target directory, shared by every pgo-build working in it.
        (
            rustc::LEDGER_ENV.to_owned(),
            Layout::memory_ledger(&cx.workspace.target_dir)
                .display()
                .to_string(),
        ),
        (rustc::BUDGET_ENV.to_owned(), rustc_budget.to_string()),
        (rustc::CPUS_ENV.to_owned(), cpus.to_string()),
        (
            rustc::ESTIMATES_ENV.to_owned(),
            admission.display().to_string(),
        ),
        (
            rustc::LOG_ENV.to_owned(),
            cx.layout.rustc_log(stage).display().to_string(),
        ),
        (
            rustc::WORKSPACE_ROOT_ENV.to_owned(),
            cx.workspace.root.display().to_string(),
        ),
    ];
    if cx.settings.stable_names {
        env.push((
            rustc::stable_names::ENV.to_owned(),
            duplicated_packages(cx)?.join(","),
        ));
    }
    cx.printer.detail(format!(
        "rustc: {cpus} at a time within {} of the memory budget of {} ({budget_reason}; {} \
         kept for cargo and pgo-build); cargo -j {cargo_jobs}{}",
        human_bytes(rustc_budget),
        human_bytes(budget),
        human_bytes(rustc::OVERHEAD),
        if chained.is_empty() {
            String::new()
        } else {
            format!("; behind {}", chained.to_string_lossy())
        }
    ));
    Ok(RustcWrapper {
        env,
        summary: RustcSummary {
            budget_bytes: budget,
            rustc_budget_bytes: rustc_budget,
            budget_reason,
            cpus: cpus as usize,
            cargo_jobs,
            ..RustcSummary::default()
        },
    })
}

/// Whether the budget holds `cpus` of the largest crates this build may see at once: the
/// largest measured or carried peak, or the largest guess for a crate none measured
/// (`rustc::guess`), whichever is more. Then no crate ever waits for memory.
fn memory_never_waits(estimates: &Estimates, cpus: u32, rustc_budget: u64) -> bool {
    let largest = estimates
        .values()
        .copied()
        .chain([rustc::guess(CrateKind::Bin)])
        .max()
        .unwrap_or_default();
    largest.saturating_mul(u64::from(cpus)) <= rustc_budget
}

/// The packages of the dependency graph present in more than one version: their stable
/// symbol names keep the version (see `wrappers::rustc::stable_names`).
fn duplicated_packages(cx: &Context) -> Result<Vec<String>> {
    let graph = cx
        .workspace
        .package_graph(&cx.settings.target, &cx.printer)?;
    let mut versions: std::collections::BTreeMap<&str, std::collections::BTreeSet<&str>> =
        Default::default();
    for package in &graph {
        versions
            .entry(&package.name)
            .or_default()
            .insert(&package.version);
    }
    Ok(versions
        .into_iter()
        .filter(|(_, versions)| versions.len() > 1)
        .map(|(name, _)| name.to_owned())
        .collect())
}

/// What a stage's build admits rustc by: its own measured peaks, for crates it has not
/// measured the carried ones (`[build] rustc_estimates`), then the baseline stage's scaled
/// (see rustc_wrapper/estimates.rs). Unusable files are said, and guesses stand in.
fn admission_estimates(cx: &Context, stage: Stage) -> Estimates {
    let profile = &estimates::profile_label(&cx.settings.profile, &cx.settings.profile_settings);
    let stored = |stage: Stage| {
        rustc::read_estimates(&cx.layout.rustc_estimates(stage))
            .map(|stored| estimates::for_profile(&stored, profile))
    };
    let mut own = stored(stage).unwrap_or_else(|err| {
        cx.printer.warn(format!(
            "{err:#}: the {} stage's rustc are admitted by guessed peaks this time, and \
             the file is written again after the build",
            stage.name()
        ));
        Default::default()
    });
    let carried = carried_estimates(cx);
    let carried_stage = |stage: Stage| {
        carried
            .as_ref()
            .and_then(|(_, c)| c.stage(&cx.settings.target, stage.name()))
            .map(|stored| estimates::for_profile(stored, profile))
            .unwrap_or_default()
    };
    let from_carried = estimates::fill_from(&mut own, &carried_stage(stage));
    if let Some((path, _)) = &carried {
        cx.printer.detail(format!(
            "rustc ({} stage): {from_carried} crates start from the estimates carried in {}",
            stage.name(),
            path.display()
        ));
    }
    let mut baseline = match stage {
        Stage::Baseline => Default::default(),
        _ => stored(Stage::Baseline).unwrap_or_default(),
    };
    if stage != Stage::Baseline {
        estimates::fill_from(&mut baseline, &carried_stage(Stage::Baseline));
    }
    let (estimates, factor, derived) = estimates::from_baseline(&own, &baseline);
    if derived > 0 {
        cx.printer.detail(format!(
            "rustc ({} stage): {derived} crates start from the baseline stage's measured peaks \
             x {factor:.2}",
            stage.name()
        ));
    }
    estimates
}

/// `[build] rustc_estimates`, when set and readable: its path and what it carries. A file
/// not written yet is a note, an unusable one a warning: guesses stand in either way.
fn carried_estimates(cx: &Context) -> Option<(PathBuf, CarriedEstimates)> {
    let path = cx
        .workspace
        .root
        .join(cx.config.build.rustc_estimates.as_ref()?);
    match CarriedEstimates::read(&path) {
        Ok(Some(mut carried)) => {
            // A peak no process here could reach is not a measurement (a hand-edited or
            // corrupted file): believed, it would make every crate build alone.
            let limit = crate::measure::memory::total_memory().unwrap_or(u64::MAX);
            let mut total = 0;
            for stages in carried.targets.values_mut() {
                for estimates in stages.values_mut() {
                    total += estimates.len();
                    estimates.retain(|_, peak| *peak <= limit);
                }
            }
            let kept: usize = carried
                .targets
                .values()
                .flat_map(|stages| stages.values())
                .map(|estimates| estimates.len())
                .sum();
            let dropped = total - kept;
            if dropped > 0 {
                cx.printer.warn(format!(
                    "{}: {dropped} of its {total} carried rustc peaks are above this machine's \
                     memory ({}), which no rustc here can reach: ignored (guesses stand in). \
                     Write the file again with `pgo-build export --rustc-estimates {}`",
                    path.display(),
                    crate::util::units::human_bytes(limit),
                    path.display()
                ));
            }
            Some((path, carried))
        }
        Ok(None) => {
            cx.printer.detail(format!(
                "rustc: no estimates carried yet ({} does not exist; `pgo-build export \
                 --rustc-estimates {}` writes it)",
                path.display(),
                path.display()
            ));
            None
        }
        Err(err) => {
            cx.printer.warn(format!(
                "{err:#}; the build starts without the estimates carried there"
            ));
            None
        }
    }
}

/// One warning per cause, naming every crate (a small budget made one line per crate):
/// crates estimated above the whole budget, which ran alone, and crates that peaked over
/// their estimate.
fn warn_about_estimates(cx: &Context, figures: &RustcSummary) {
    let peak = |c: &crate::report::CrateFigures| c.peak_bytes.map_or("-".to_owned(), human_bytes);
    if !figures.alone.is_empty() {
        let mut alone: Vec<_> = figures.alone.iter().collect();
        alone.sort_by(|a, b| a.krate.cmp(&b.krate));
        let crates: Vec<String> = alone
            .into_iter()
            .map(|krate| {
                format!(
                    "`{}` ({}) estimated at {} (peak {} this time)",
                    krate.krate,
                    krate.kind,
                    human_bytes(krate.estimate_bytes),
                    peak(krate)
                )
            })
            .collect();
        cx.printer.warn(format!(
            "{} estimated above the whole memory budget for rustc ({} of {}), so {} ran \
             alone: {}. Raise [build] memory_budget in {} if the machine has the memory.",
            if crates.len() == 1 {
                "1 crate is".to_owned()
            } else {
                format!("{} crates are", crates.len())
            },
            human_bytes(figures.rustc_budget_bytes),
            human_bytes(figures.budget_bytes),
            if crates.len() == 1 { "it" } else { "each" },
            crates.join(", "),
            cx.config.display_path()
        ));
    }
    if !figures.overruns.is_empty() {
        let mut overruns: Vec<_> = figures.overruns.iter().collect();
        overruns.sort_by(|a, b| a.krate.cmp(&b.krate));
        let crates: Vec<String> = overruns
            .into_iter()
            .map(|krate| {
                format!(
                    "`{}` ({}) {} over {}",
                    krate.krate,
                    krate.kind,
                    peak(krate),
                    human_bytes(krate.estimate_bytes)
                )
            })
            .collect();
        // Said, not warned of: nothing is for the user to do (an instrumented build's crates
        // peak over the plain build's measured peaks they start from), and it corrects itself.
        cx.printer.info(format!(
            "{} peaked over {} estimate (the last measured peak): {}; the estimates are \
             updated for the next build",
            if crates.len() == 1 {
                "1 crate".to_owned()
            } else {
                format!("{} crates", crates.len())
            },
            if crates.len() == 1 { "its" } else { "their" },
            crates.join(", ")
        ));
    }
}

/// Reads what the rustc wrapper logged for a stage's build: the report's figures, the
/// crates that ran alone or over their estimate (named), and the estimates for next time.
pub(super) fn record(
    cx: &Context,
    session: &mut Session,
    stage: Stage,
    setup: RustcSummary,
    output: &BuildOutput,
) -> Result<()> {
    let records = rustc::read_log(&cx.layout.rustc_log(stage));
    // Cargo compiled nothing (its timings list every unit fresh, taking no time): the build
    // was up to date, and no rustc ran. Recorded as such, in place of an earlier build's
    // figures, which the answer would set the build time against. An empty log beside units
    // that took time is a log the wrapper could not write, which says nothing.
    let compiled_nothing = output.timings.iter().all(|units| {
        units
            .as_ref()
            .is_some_and(|units| units.iter().all(|unit| unit.duration == 0.0))
    });
    if records.is_empty() && compiled_nothing {
        session.report.rustc_memory.insert(
            stage,
            RustcSummary {
                invocations: 0,
                build_secs: Some(output.cargo_secs),
                ..setup
            },
        );
        return Ok(());
    }
    if records.is_empty() {
        return Ok(());
    }
    // Without the package graph, cargo's own edges still give a (weaker) bound.
    let packages = cx
        .workspace
        .package_graph(&cx.settings.target, &cx.printer)
        .unwrap_or_else(|err| {
            cx.printer.detail(format!(
                "{err:#}: the dependency graph's bound on the build uses cargo's edges only"
            ));
            Vec::new()
        });
    let figures = RustcSummary {
        budget_bytes: setup.budget_bytes,
        rustc_budget_bytes: setup.rustc_budget_bytes,
        budget_reason: setup.budget_reason,
        cpus: setup.cpus,
        cargo_jobs: setup.cargo_jobs,
        build_secs: Some(output.cargo_secs),
        lower_bound: timings::build_bound(
            &output.timings,
            &|unit| rustc_time(&records, unit),
            &packages,
            setup.cpus,
        ),
        ..RustcSummary::from_records(&records)
    };
    let peak = |c: &crate::report::CrateFigures| c.peak_bytes.map_or("-".to_owned(), human_bytes);
    warn_about_estimates(cx, &figures);
    if let Some(heaviest) = figures.heaviest.first() {
        cx.printer.info(format!(
            "rustc ({} stage): {} crates, heaviest `{}` {}; waited {:.1}s for memory, \
             {:.1}s for a CPU slot (summed over crates){}; the build took {:.1}s{}",
            stage.name(),
            figures.invocations,
            heaviest.krate,
            peak(heaviest),
            figures.memory_wait_secs,
            (figures.wait_secs - figures.memory_wait_secs).max(0.0),
            figures
                .estimate_error
                .map(|e| format!("; estimates off by {:.0}% on average", e * 100.0))
                .unwrap_or_default(),
            output.cargo_secs,
            figures
                .lower_bound
                .as_ref()
                .map(|bound| format!(", {}", bound.describe()))
                .unwrap_or_default()
        ));
    }
    let estimates_path = cx.layout.rustc_estimates(stage);
    // Unusable estimates were reported before the build; this build's peaks replace them.
    let estimates = rustc::read_estimates(&estimates_path).unwrap_or_default();
    let profile = estimates::profile_label(&cx.settings.profile, &cx.settings.profile_settings);
    let estimates = estimates::updated(estimates, &records, &profile);
    crate::util::files::write_atomically(
        &estimates_path,
        serde_json::to_string_pretty(&estimates)?.as_bytes(),
    )?;
    session.report.rustc_memory.insert(stage, figures);
    Ok(())
}

/// A unit of cargo's timing report as the wrapper logged its rustc: (wall time, wait for
/// admission). A rustc the log does not have counts for nothing (the bound stays a lower
/// one); a build script's run is no rustc (`None`: cargo's time stands).
fn rustc_time(records: &[RustcRecord], unit: &TimedUnit) -> Option<(f64, f64)> {
    let (kind, bin) = unit.rustc_kind()?;
    let record = records.iter().find(|r| {
        let (package, krate) = r.krate.split_once('/').unwrap_or(("", &r.krate));
        package == unit.name
            && (r.version.is_empty() || r.version == unit.version)
            && match kind {
                CrateKind::Bin => r.kind == CrateKind::Bin && Some(krate) == bin.as_deref(),
                CrateKind::BuildScript => r.kind == CrateKind::BuildScript,
                _ => r.kind.is_library(),
            }
    });
    Some(record.map_or((0.0, unit.duration), |r| (r.wall_secs, r.wait_secs)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargo_keeps_its_own_jobs_where_memory_never_holds_a_crate_back() {
        const GIB: u64 = 1 << 30;
        let estimates: Estimates = [("release:a/a@1|lib".to_owned(), 3 * GIB)].into();
        // Two of the largest crate, 3 GiB, fit in 8 GiB: nothing ever waits.
        assert!(memory_never_waits(&estimates, 2, 8 * GIB));
        assert!(!memory_never_waits(&estimates, 4, 8 * GIB));
        // Unmeasured crates are guessed at up to `guess("bin")` each.
        assert!(!memory_never_waits(&Estimates::new(), 4, 3 * GIB));
        assert!(memory_never_waits(&Estimates::new(), 2, 3 * GIB));
    }
}
