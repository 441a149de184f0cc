//! Profile accounting shared by `train`, `optimize`, `profile` and `merge`: which raw profiles
//! of the last training may be merged, the per-binary figures (processes, profiles written,
//! processes that ended without writing, coverage), their table, and their record in the report.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Result, bail};
use comfy_table::Table;

use super::context::{Context, Session};
use crate::cargo::manifest::StageManifest;
use crate::config::{OnCorrupt, Workload};
use crate::profiles::bundle::Shard;
use crate::profiles::{self, Accounting, BinaryProfiles, training_record};
use crate::report::RejectedProfile;
use crate::util::printer::Fitted;
use crate::util::units::human_bytes;

/// What a training run leaves: the instrumented build it trained, the shard it ran, the runs
/// whose profiles are usable and their accounting.
pub struct Trained {
    pub instrumented: StageManifest,
    pub shard: Shard,
    pub runs: Vec<Workload>,
    pub accounting: Accounting,
}

/// The raw profile directories of the current train workloads whose last run may be
/// merged (see `training_record`), and for the others why not.
pub(super) fn trained_workloads(
    cx: &Context,
    instrumented: &StageManifest,
    runs: &[Workload],
) -> (Vec<(String, PathBuf)>, Vec<String>) {
    let raw_dir = cx.layout.raw_profiles_dir();
    let mut usable = Vec::new();
    let mut unusable = Vec::new();
    for workload in runs {
        let dir = raw_dir.join(workload.run_name());
        match training_record::check(&dir, workload, instrumented) {
            Ok(()) => usable.push((workload.run_name(), dir)),
            Err(reason) => unusable.push(reason),
        }
    }
    (usable, unusable)
}

/// The profile accounting of the last training: every current train workload's last run,
/// refused when one of them has no usable run.
pub(crate) fn account(cx: &Context, instrumented: &StageManifest) -> Result<Accounting> {
    account_dirs(cx, &usable_training(cx, instrumented)?, instrumented)
}

/// The raw profile directories of the last training: every current train workload's last
/// run, refused when one of them has no usable run.
pub(crate) fn usable_training(
    cx: &Context,
    instrumented: &StageManifest,
) -> Result<Vec<(String, PathBuf)>> {
    let (usable, unusable) = trained_workloads(cx, instrumented, &cx.config.train_runs());
    if !unusable.is_empty() {
        bail!(
            "the training profiles are not complete and current, and a profile of part of \
             the training would silently optimize for other work:\n  - {}\n(`pgo-build \
             run` trains every workload again.)",
            unusable.join("\n  - ")
        );
    }
    if usable.is_empty() {
        bail!("{}", cx.no_train_workloads());
    }
    Ok(usable)
}

impl Trained {
    /// This training's accounting, when it is the whole last training of `instrumented`
    /// (the same runs, of the same build): what reading the raw profiles again would give,
    /// since nothing has run in between.
    pub(crate) fn accounting_of(
        &self,
        instrumented: &StageManifest,
        usable: &[(String, PathBuf)],
    ) -> Option<&Accounting> {
        let same_runs = self.runs.len() == usable.len()
            && self
                .runs
                .iter()
                .all(|run| usable.iter().any(|(name, _)| *name == run.run_name()));
        (self.shard == Shard::WHOLE && self.instrumented.id == instrumented.id && same_runs)
            .then_some(&self.accounting)
    }
}

/// Every raw profile in the given workload directories, checked and attributed, with
/// coverage.
pub(crate) fn account_dirs(
    cx: &Context,
    workload_dirs: &[(String, PathBuf)],
    instrumented: &StageManifest,
) -> Result<Accounting> {
    let binaries: Vec<&str> = cx.bins.iter().map(|b| b.name.as_str()).collect();
    let cargo_runs = cx
        .config
        .workloads
        .iter()
        .filter(|w| w.cargo.is_some())
        .flat_map(Workload::parts)
        .map(|w| w.run_name())
        .collect();
    let accounting = profiles::account(
        &profiles::RawDirs {
            workloads: workload_dirs,
            cargo_runs: &cargo_runs,
        },
        instrumented,
        &binaries,
        cx.profdata()?,
        cx.rustc.llvm_major,
        &cx.layout.profiles_dir().join("scratch"),
        &cx.printer,
    )?;
    Ok(accounting)
}

/// Prints the per-binary training table.
pub(super) fn print_accounting(cx: &Context, accounting: &Accounting) {
    cx.printer.table(accounting_table(&accounting.per_binary));
}

/// For every cargo workload run with profiles: how much of each binary's own workspace
/// code (its crate and the members it depends on) its bench/test binaries ran. Returns
/// whether any cargo workload contributed.
pub(super) fn print_cargo_coverage(cx: &Context, accounting: &Accounting) -> Result<bool> {
    let runs = accounting.cargo_inputs();
    if runs.is_empty() {
        return Ok(false);
    }
    let profdata = cx.profdata()?.clone();
    let scratch = cx.layout.profiles_dir().join("scratch");
    let mut table = Table::new();
    table.fitted().set_header([
        "Cargo workload",
        "Profile files",
        "Binary",
        "Functions of its workspace crates run",
    ]);
    for (run, inputs) in &runs {
        let merged = scratch.join(format!("cargo-{run}.profdata"));
        profiles::merge_to(inputs, &merged, &profdata, &cx.printer)?;
        let functions = crate::profiles::insight::functions(&merged, &profdata, &cx.printer)?;
        for bin in &cx.bins {
            let crates = cx.workspace.own_crates(bin);
            let own: Vec<_> = functions
                .iter()
                .filter(|f| crates.contains(&f.krate))
                .collect();
            let run_count = own.iter().filter(|f| f.total > 0).count();
            table.add_row([
                run.to_string(),
                inputs.len().to_string(),
                bin.name.clone(),
                format!(
                    "{run_count}/{} ({})",
                    own.len(),
                    crates.iter().cloned().collect::<Vec<_>>().join(", ")
                ),
            ]);
        }
    }
    cx.printer.table(crate::util::printer::rendered(table));
    Ok(true)
}

/// Each binary's training figures into the report (`profiles`).
pub(super) fn record_binary_figures(
    session: &mut Session,
    per_binary: &BTreeMap<String, BinaryProfiles>,
) {
    session.report.profiles = per_binary.clone();
}

/// Records the accounting in the report; corrupt or foreign files are a warning, or an
/// error with `[pgo] on_corrupt = "fail"` or `--strict`. (0-byte files are not corrupt:
/// they are processes that died, reported per binary.)
pub(super) fn report_accounting(
    cx: &Context,
    session: &mut Session,
    accounting: &Accounting,
) -> Result<()> {
    record_binary_figures(session, &accounting.per_binary);
    session.report.rejected_profiles = accounting
        .rejected()
        .map(|profile| RejectedProfile {
            path: profile.path.clone(),
            binary: profile.binary.clone(),
            reason: profile.rejected.clone().unwrap_or_default(),
        })
        .collect();
    let excluded: Vec<String> = accounting
        .rejected()
        .filter(|profile| profile.size_bytes > 0)
        .map(|profile| {
            format!(
                "  {}: {}",
                profile.path.display(),
                profile.rejected.as_deref().unwrap_or_default()
            )
        })
        .collect();
    if excluded.is_empty() {
        return Ok(());
    }
    let message = format!(
        "{} raw profile{} excluded from the merge:\n{}\nTheir processes' counts are missing \
         from the profile: `pgo-build train` (or `pgo-build train WORKLOAD` for the \
         workloads named in the paths) trains again.",
        excluded.len(),
        if excluded.len() == 1 { " is" } else { "s are" },
        excluded.join("\n")
    );
    if cx.config.pgo.on_corrupt == OnCorrupt::Fail {
        bail!(
            "{message}\n([pgo] on_corrupt = \"fail\" in {})",
            cx.config.display_path()
        );
    }
    cx.caution(message)
}

/// A binary no workload ran, whose profile data comes from cargo workloads only.
pub(super) fn cargo_only_message(binary: &str) -> String {
    format!(
        "`{binary}` itself ran in no train workload: its profile comes from benchmarks or tests \
         (cargo workloads) only, so the library code they share with it has data but its own \
         `main` paths look cold"
    )
}

pub(super) fn no_profile_message(binary: &str, figures: &profiles::BinaryProfiles) -> String {
    if figures.processes == 0 {
        format!("`{binary}` wrote no profile: no training workload ran it")
    } else if figures.died == figures.processes {
        format!(
            "`{binary}`: all {} process{} ended without writing a profile: \
             {ENDED_WITHOUT_WRITING}",
            figures.processes,
            if figures.processes == 1 { "" } else { "es" }
        )
    } else {
        format!(
            "`{binary}` has {} profile files, none of them usable (see the excluded files above)",
            figures.files
        )
    }
}

/// Why processes end without writing a profile, and the two fixes.
pub(super) const ENDED_WITHOUT_WRITING: &str = "stopped by a signal (SIGTERM, SIGKILL) or by abort/_exit \
    before their exit handlers ran. Call pgo_build_rt::install() first thing in its main \
    (SIGTERM, SIGINT), or train in continuous mode (--continuous: any signal)";

fn accounting_table(table: &BTreeMap<String, profiles::BinaryProfiles>) -> String {
    // Every process is in one column: wrote a usable profile, wrote one that cannot be used,
    // or ended without writing. The middle one only when some binary has such files.
    let unusable = table.values().any(|f| f.unusable_files > 0);
    let mut out = Table::new();
    let mut header = vec!["Binary", "Processes", "Wrote a profile"];
    if unusable {
        header.push("Wrote an unusable one");
    }
    header.extend([
        "Ended without writing",
        "Profile bytes",
        "Functions run / instrumented",
    ]);
    out.fitted().set_header(header);
    for (binary, figures) in table {
        let mut row = vec![
            binary.clone(),
            figures.processes.to_string(),
            figures.valid_files.to_string(),
        ];
        if unusable {
            row.push(figures.unusable_files.to_string());
        }
        row.extend([
            figures.died.to_string(),
            human_bytes(figures.bytes),
            figures.coverage_text(),
        ]);
        out.add_row(row);
    }
    crate::util::printer::rendered(out)
}

/// Every train run is accounted for by what it ran: the instrumented processes it started,
/// per binary. A run that started none (a command that does not run the binaries, a
/// misspelt variable) contributed nothing, and the profile it leaves is not the one the
/// configuration describes: refused, `--strict` or not, like a binary without a profile.
pub(super) fn refuse_idle_workloads(
    cx: &Context,
    runs: &[(String, std::path::PathBuf)],
    accounting: &Accounting,
) -> Result<()> {
    let mut idle = Vec::new();
    for (run_name, dir) in runs {
        let mut per_binary: std::collections::BTreeMap<String, usize> = Default::default();
        for profile in accounting
            .profiles
            .iter()
            .filter(|p| &p.workload == run_name)
        {
            let binary = profile
                .binary
                .clone()
                .unwrap_or_else(|| "its cargo targets".to_owned());
            *per_binary.entry(binary).or_default() += profile.processes.max(1);
        }
        let started =
            profiles::start_marker::starts_by_executable(&[(run_name.clone(), dir.clone())]);
        if per_binary.is_empty() && started.is_empty() {
            idle.push(run_name.clone());
            continue;
        }
        if !per_binary.is_empty() {
            cx.printer.detail(format!(
                "workload `{run_name}` ran {}",
                per_binary
                    .iter()
                    .map(|(binary, n)| format!(
                        "{binary} ({n} process{})",
                        if *n == 1 { "" } else { "es" }
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    if idle.is_empty() {
        return Ok(());
    }
    bail!(
        "train workload{} `{}` ran no instrumented binary: {} contributed nothing to the \
         profile, which would then describe the other workloads' work only ({}). Make {} run \
         the binaries through $PGO_BUILD_BIN_<NAME> or $PGO_BUILD_BIN_DIR (the log is in {}), \
         or make {} role = \"holdout\" or remove {} from {}",
        if idle.len() == 1 { "" } else { "s" },
        idle.join("`, `"),
        if idle.len() == 1 { "it" } else { "they" },
        what_lacks_data(cx, accounting),
        if idle.len() == 1 { "it" } else { "them" },
        cx.layout.logs_dir().display(),
        if idle.len() == 1 { "it" } else { "them" },
        if idle.len() == 1 { "it" } else { "them" },
        cx.config.display_path()
    )
}

/// Which binaries an idle workload leaves without any profile data, for its refusal.
fn what_lacks_data(cx: &Context, accounting: &Accounting) -> String {
    let without: Vec<&str> = cx
        .bins
        .iter()
        .map(|bin| bin.name.as_str())
        .filter(|name| {
            accounting
                .per_binary
                .get(*name)
                .is_none_or(|figures| figures.valid_files == 0)
        })
        .collect();
    match without.as_slice() {
        [] => "every binary has data from the other workloads".to_owned(),
        [one] => format!("`{one}` has no profile data from any workload"),
        many => format!(
            "{} have no profile data from any workload",
            many.iter()
                .map(|name| format!("`{name}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}
