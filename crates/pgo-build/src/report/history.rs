//! The history of comparisons: every `compare` with when and how it ran and how it ended, as
//! rows (the terminal table here, the HTML section in `render`). The full results of the
//! latest good one per set of variants are `Report::compare` and `Report::earlier_compares`.

use comfy_table::{Cell, CellAlignment, Table};

use super::records::{CompareRun, now_unix};
use crate::util::printer::Fitted;

/// The columns of one history row.
pub fn cells(run: &CompareRun) -> [String; 6] {
    let elapsed = std::time::Duration::from_secs(now_unix().saturating_sub(run.ran_at_unix));
    let holdout = run
        .geometric_mean
        .get(&crate::config::Role::Holdout)
        .map(|per_candidate| {
            per_candidate
                .iter()
                .map(|(candidate, ratio)| format!("{candidate} {:+.1}%", (ratio - 1.0) * 100.0))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_else(|| "-".to_owned());
    [
        crate::util::printer::ago(elapsed),
        run.command.clone(),
        if run.variants.is_empty() {
            "-".to_owned()
        } else {
            run.variants.join(" → ")
        },
        run.decided_by.clone().unwrap_or_else(|| "-".to_owned()),
        holdout,
        run.result.clone(),
    ]
}

pub const HEADER: [&str; 6] = [
    "Compared",
    "Command",
    "Variants",
    "Decided by",
    "Holdout (geometric mean)",
    "Result",
];

/// The comparisons as they ran, newest first; `None` with fewer than two (the one there is
/// is shown in full).
pub fn table(history: &[CompareRun]) -> Option<String> {
    if history.len() < 2 {
        return None;
    }
    let mut table = Table::new();
    table.fitted().set_header(HEADER);
    for run in history.iter().rev() {
        let [when, command, variants, decided_by, holdout, result] = cells(run);
        table.add_row([
            Cell::new(when),
            Cell::new(command),
            Cell::new(variants),
            Cell::new(decided_by),
            Cell::new(holdout).set_alignment(CellAlignment::Right),
            Cell::new(result),
        ]);
    }
    Some(crate::util::printer::rendered(table))
}
