//! Commands that need neither the toolchain nor a [`super::Session`]: `pgo-build report`
//! (renders the last run's `report.json`) and `pgo-build clean`.

use anyhow::{Context, Result};

use crate::cargo_build;
use crate::cli::{GlobalArgs, ReportArgs};
use crate::layout::Layout;
use crate::printer::Printer;
use crate::render;
use crate::report::{Report, tables};
use crate::state::RunLock;
use crate::training;
use crate::workspace::Workspace;

/// `pgo-build report`: renders the last run's report.json; needs no toolchain and no lock.
pub fn show_report(args: &GlobalArgs, report_args: &ReportArgs, printer: &Printer) -> Result<()> {
    let workspace = Workspace::load(args.manifest_path.as_deref(), printer)?;
    let layout = Layout::new(&workspace.target_dir);
    let text = std::fs::read_to_string(layout.report()).with_context(|| {
        format!(
            "there is no report at {}: run `pgo-build run` first",
            layout.report().display()
        )
    })?;
    let report: Report = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a report of this pgo-build version",
            layout.report().display()
        )
    })?;
    if let Some(file) = &report_args.html {
        cargo_build::write_atomically(file, render::html(&report).as_bytes())?;
        printer.info(format!("wrote {}", file.display()));
    }
    if report_args.json {
        printer.table(text.trim_end());
    } else if report_args.markdown {
        printer.table(render::markdown(&report));
    } else if report_args.html.is_none() {
        printer.table(report.stage_table());
        printer.table(report.size_table());
        if let Some(compare) = &report.compare {
            printer.table(tables::compare_table(compare));
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

/// Removes everything under `target/pgo-build/`.
pub fn clean(args: &GlobalArgs, printer: &Printer) -> Result<()> {
    let workspace = Workspace::load(args.manifest_path.as_deref(), printer)?;
    let layout = Layout::new(&workspace.target_dir);
    // Refused while another run works there; held while the directory goes away.
    let _lock = RunLock::acquire(&layout)?;
    for stopped in training::stop_leftovers(&layout.running_dir())? {
        printer.warn(stopped);
    }
    if layout.root().exists() {
        std::fs::remove_dir_all(layout.root())
            .with_context(|| format!("could not remove {}", layout.root().display()))?;
        printer.info(format!("removed {}", layout.root().display()));
    } else {
        printer.info(format!(
            "nothing to remove: {} does not exist",
            layout.root().display()
        ));
    }
    Ok(())
}
