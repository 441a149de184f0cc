//! The commands that need neither the toolchain nor the pipeline's context: `pgo-build
//! report` (renders the last run's `report.json`), `clean`, `init` (the configuration
//! `init.rs` proposes) and `generate` (completions, man page, schema and references from the
//! clap and config definitions: `generate.rs`).

pub mod generate;
pub mod init;
pub mod rules;

use anyhow::{Context, Result, bail};

use crate::cargo::workspace::Workspace;
use crate::cli::{Cli, Command, GlobalArgs, ReportArgs};
use crate::config::Config;
use crate::exec;
use crate::layout::Layout;
use crate::layout::lock::TargetDirLock;
use crate::report::{Report, render, tables};
use crate::util::printer::Printer;

/// Runs `cli`'s command if it is one of these, or `None` for the pipeline's.
pub fn execute(cli: &Cli, printer: &Printer) -> Option<Result<()>> {
    Some(match &cli.command {
        Command::Clean => clean(&cli.global, printer),
        Command::Init => init(&cli.global, printer),
        Command::Report(args) => show_report(&cli.global, args, printer),
        Command::Generate(args) => generate::generate(args),
        _ => return None,
    })
}

/// `pgo-build report`: renders the last run's report.json (each target's, with `--target` or
/// `[build] targets`); needs no toolchain and no lock.
pub fn show_report(args: &GlobalArgs, report_args: &ReportArgs, printer: &Printer) -> Result<()> {
    let workspace = Workspace::load(args.manifest_path.as_deref(), printer)?;
    let targets = if args.targets.is_empty() {
        // A broken pgo-build.toml does not keep the last report from being shown.
        Config::load(args.config.as_deref(), &workspace.root)
            .map(|config| config.build.targets)
            .unwrap_or_default()
    } else {
        args.targets.clone()
    };
    if targets.is_empty() {
        return show_one_report(&Layout::new(&workspace.target_dir), report_args, printer);
    }
    if targets.len() > 1 && (report_args.json || report_args.html.is_some()) {
        bail!(
            "--json and --html show one target's report; choose one with --target ({})",
            targets.join(", ")
        );
    }
    for triple in &targets {
        printer.target_start(triple);
        show_one_report(
            &Layout::for_target(&workspace.target_dir, triple),
            report_args,
            printer,
        )?;
    }
    Ok(())
}

fn show_one_report(layout: &Layout, report_args: &ReportArgs, printer: &Printer) -> Result<()> {
    let report = match Report::load(&layout.report()) {
        Ok(Some(report)) => report,
        Err(problem) => bail!(
            "{problem}: `pgo-build run` (or any of its steps) writes a new one, or `pgo-build \
             clean` removes it"
        ),
        Ok(None) => {
            let targets = target_reports(layout.root());
            if targets.is_empty() {
                bail!(
                    "there is no report at {}: run `pgo-build run` first",
                    layout.report().display()
                );
            }
            bail!(
                "there is no report at {}; there are reports of the targets {}: choose one with \
                 --target",
                layout.report().display(),
                targets.join(", ")
            );
        }
    };
    // A verdict on binaries rebuilt since is said to be one, above it, in every form.
    let current_build =
        |variant: &str| crate::cargo::manifest::StageManifest::current_build(layout, variant);
    let rebuilt_note = |compare: &crate::report::CompareResult| compare.rebuilt_note(current_build);
    let answer_out_of_date = report.compare.as_ref().and_then(rebuilt_note);
    if let Some(file) = &report_args.html {
        let page = render::html(&report, answer_out_of_date.as_deref());
        crate::util::files::write_atomically(file, page.as_bytes())?;
        printer.info(format!("wrote {}", file.display()));
    }
    if report_args.json {
        // As `Report::save` writes it.
        printer.table(serde_json::to_string_pretty(&report)?);
    } else if report_args.markdown {
        printer.table(render::markdown(&report, answer_out_of_date.as_deref()));
    } else if report_args.html.is_none() {
        // The answer first: the tables are its evidence.
        let answer = crate::report::answer::answer(&report);
        if let Some(answer) = &answer {
            if let Some(note) = &answer_out_of_date {
                printer.warn(note.clone());
            }
            printer.table(answer.text());
        }
        printer.table(report.step_table());
        printer.table(report.size_table());
        // The latest good comparison of each set of variants, newest first, then all of them
        // as they ran.
        // The answer's own comparison was said to be out of date above it already.
        let compares = (report.compare.iter().map(|c| (c, answer.is_some())))
            .chain(report.earlier_compares.iter().rev().map(|c| (c, false)));
        for (compare, said) in compares {
            if !said && let Some(note) = rebuilt_note(compare) {
                printer.warn(note);
            }
            printer.table(tables::compare_table(compare));
        }
        if let Some(history) = crate::report::compare_history_table(&report.compare_history) {
            printer.table(history);
        }
        if let Some(rustc) = tables::rustc_memory_tables(&report) {
            printer.table(rustc);
        }
        if let Some(explore) = &report.explore {
            printer.table(tables::explore_table(explore));
        }
    }
    Ok(())
}

/// The targets with a report of their own under `root` (`<root>/<triple>/report.json`).
fn target_reports(root: &std::path::Path) -> Vec<String> {
    target_dirs_with(root, "report.json")
}

/// The release targets' layouts under `root` (those pgo-build worked in: with a `.lock`).
fn target_dirs(root: &std::path::Path) -> Vec<String> {
    target_dirs_with(root, ".lock")
}

fn target_dirs_with(root: &std::path::Path, file: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut targets: Vec<String> = entries
        .flatten()
        .filter(|entry| entry.path().join(file).is_file())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    targets.sort();
    targets
}

/// Removes everything under `target/pgo-build/`.
/// `pgo-build init`: writes the configuration `init::config_text` makes, never over a file.
pub fn init(args: &GlobalArgs, printer: &Printer) -> Result<()> {
    let workspace = Workspace::load(args.manifest_path.as_deref(), printer)?;
    let path = args
        .config
        .clone()
        .unwrap_or_else(|| workspace.root.join(crate::config::CONFIG_FILE_NAME));
    if path.exists() {
        bail!(
            "{} exists: `pgo-build init` never overwrites a configuration (move it away to \
             start again; `pgo-build doctor` checks the one there)",
            path.display()
        );
    }
    if workspace.binaries.is_empty() {
        bail!(
            "the workspace at {} has no binary targets: pgo-build optimizes binaries",
            workspace.root.display()
        );
    }
    // Whether `#![feature]` benchmarks can run is the active compiler's to say; when rustc
    // cannot be asked, they are taken for stable (a proposal that runs beats one that may not).
    let nightly = crate::toolchain::Rustc::detect(&workspace.root, printer)
        .is_ok_and(|rustc| crate::cargo::target_source::accepts_feature_gates(&rustc.version_line));
    let proposal = init::Proposal::of(&workspace, nightly);
    let text = init::config_text(&workspace, &proposal);
    crate::util::files::write_atomically(&path, text.as_bytes())?;
    printer.info(format!(
        "wrote {}: {}, training {}",
        path.display(),
        crate::util::units::count(workspace.binaries.len(), "binary", "binaries"),
        match proposal.benches.first() {
            Some(bench) => format!("from the benchmark `{}`", bench.name),
            None => "from a placeholder command: replace it with real work".to_owned(),
        }
    ));
    for (bench, why) in &proposal.skipped {
        printer.info(format!(
            "not proposed: the benchmark `{}` cannot run here: {why}",
            bench.name
        ));
    }
    if proposal.benches.len() < 2 {
        printer.info(format!(
            "the held-out workload `holdout` is a placeholder: give it work training never \
             sees (edit its `command` in {})",
            path.display()
        ));
    }
    for server in init::likely_servers(&workspace) {
        printer.info(format!(
            "`{}` looks like a server: its [[service]] stops it with SIGINT; make that a \
             signal it exits on normally, or it writes no profile",
            server.name
        ));
    }
    // The schema the `#:schema` line names: the one of this pgo-build, replaced when it was
    // another version's (it is generated, never edited).
    let schema_path = path.with_file_name(init::SCHEMA_FILE_NAME);
    let schema = crate::config::schema_json();
    if std::fs::read_to_string(&schema_path).ok().as_deref() != Some(schema.as_str()) {
        crate::util::files::write_atomically(&schema_path, schema.as_bytes())?;
        printer.info(format!(
            "wrote {}: editors with TOML support (taplo, Even Better TOML) complete and check \
             the configuration with it",
            schema_path.display()
        ));
    }
    printer.info("next: `pgo-build doctor`, then `pgo-build run`");
    Ok(())
}

pub fn clean(args: &GlobalArgs, printer: &Printer) -> Result<()> {
    let workspace = Workspace::load(args.manifest_path.as_deref(), printer)?;
    let layout = Layout::new(&workspace.target_dir);
    // Looked at before locking: taking the lock creates the directory it would then remove.
    if !layout.root().exists() {
        printer.info(format!(
            "nothing to remove: {} does not exist",
            layout.root().display()
        ));
        return Ok(());
    }
    // Refused while another run works there; held while the directory goes away.
    let mut locks = vec![TargetDirLock::acquire(&layout)?];
    let mut layouts = vec![layout.clone()];
    // Each release target's stages are a layout of their own, with their own lock.
    for triple in target_dirs(layout.root()) {
        let target = Layout::for_target(&workspace.target_dir, &triple);
        locks.push(TargetDirLock::acquire(&target)?);
        layouts.push(target);
    }
    for layout in &layouts {
        for stopped in exec::stop_leftovers(&layout.running_dir())? {
            printer.warn(stopped);
        }
    }
    std::fs::remove_dir_all(layout.root())
        .with_context(|| format!("could not remove {}", layout.root().display()))?;
    printer.info(format!("removed {}", layout.root().display()));
    Ok(())
}
