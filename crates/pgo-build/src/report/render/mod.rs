//! `pgo-build report`: the last run's `report.json` as Markdown (CI summaries) or as one
//! self-contained HTML page with SVG charts (readable offline, no scripts). The HTML is
//! well-formed XHTML so it can be checked by any XML parser.

use std::fmt::Write;

mod charts;
mod explore;
mod text;

use charts::compare_section;
use explore::{explore_markdown, explore_section};
use text::escape;

use crate::report::records::{
    BinaryRecord, CompareResult, CompareRun, OrderRecord, SIZED_STAGES, SIZES_LEGEND, StepResult,
    decider_label, verdict_text,
};
use crate::report::report_file::Report;
use crate::report::tables::{PipelineSteps, share_of};
use crate::util::units::{figure, human_bytes};

const COLORS: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f",
];

/// The report as markdown; `out_of_date` (see `CompareResult::rebuilt_note`) above the answer
/// when its comparison measured binaries rebuilt since.
pub fn markdown(report: &Report, out_of_date: Option<&str>) -> String {
    let mut out = match &report.target {
        Some(triple) => format!("## pgo-build: {triple}\n\n"),
        None => String::from("## pgo-build\n\n"),
    };
    if let Some(note) = out_of_date {
        let _ = writeln!(out, "> **{note}**\n");
    }
    if let Some(answer) = crate::report::answer::answer(report) {
        out += &answer.markdown();
    }
    let PipelineSteps {
        counted,
        other,
        total,
    } = report.pipeline_steps();
    out += "| Step | Result | Duration | Share |\n|---|---|---:|---:|\n";
    for step in &counted {
        let share = 100.0 * share_of(step, total);
        let _ = writeln!(
            out,
            "| {} | {} | {:.2}s | {share:.1}% |",
            step.name, step.result, step.duration_secs
        );
    }
    let _ = writeln!(out, "| **total** | | **{total:.2}s** | |");
    for step in &other {
        let _ = writeln!(
            out,
            "| {} | {} | {:.2}s | not in the total |",
            step.name, step.result, step.duration_secs
        );
    }
    out += "\n";
    if !report.binaries.is_empty() {
        out +=
            "| Binary | baseline | instrumented | optimized | bolt |\n|---|---:|---:|---:|---:|\n";
        for (binary, stages) in &report.binaries {
            let cells: Vec<String> = SIZED_STAGES
                .iter()
                .map(|stage| {
                    stages
                        .get(stage)
                        .map_or("-".to_owned(), BinaryRecord::size_text)
                })
                .collect();
            let _ = writeln!(out, "| {binary} | {} |", cells.join(" | "));
        }
        let _ = writeln!(out, "\n{SIZES_LEGEND}\n");
    }
    if let Some(order) = &report.startup_order {
        let _ = writeln!(out, "{}\n", startup_order_text(order));
    }
    if !report.c_compilers.is_empty() {
        out += "| Stage | C/C++ of build scripts compiled by | pgo-build added | Files |\n|---|---|---|---|\n";
        for (stage, row) in c_compiler_rows(report) {
            let _ = writeln!(out, "| {stage} | {} | {} | {} |", row[0], row[1], row[2]);
        }
        out += "\n";
    }
    if !report.rustc_memory.is_empty() {
        let _ = writeln!(out, "| {} |", RUSTC_HEADER.join(" | "));
        let _ = writeln!(out, "|---|---:|---:|---|---:|---:|");
        for row in rustc_rows(report) {
            let _ = writeln!(out, "| {} |", row.join(" | "));
        }
        out += "\n";
    }
    if let Some(compare) = &report.compare {
        if let Some(note) = &compare.emulated {
            let _ = writeln!(out, "> **Emulated:** {note}\n");
        }
        let _ = writeln!(
            out,
            "| Workload | Role | Variant | Median of per-round {} ratios (CI) | Wins | Verdict |\n|---|---|---|---:|---:|---|",
            decider_label(&compare.decider())
        );
        let decider = compare.decider();
        for workload in &compare.workloads {
            for (candidate, summary) in workload.in_order(&compare.candidates) {
                let s = summary.judged(&decider);
                let _ = writeln!(
                    out,
                    "| {} | {} | {candidate} vs {} | {} | {}/{} | {} |",
                    workload.workload,
                    workload.role,
                    compare.reference,
                    crate::measure::stats::change_with_interval(
                        s.median_ratio,
                        s.verdict_interval()
                    ),
                    s.wins,
                    s.pairs,
                    verdict_text(s, &decider)
                );
            }
        }
        if let Some(family) = &compare.family {
            let _ = writeln!(out, "\n{}", family.legend());
        }
        out += "\n";
        metrics_markdown(compare, &mut out);
    }
    if let Some(explore) = &report.explore {
        explore_markdown(explore, &mut out);
    }
    out
}

/// The report as one HTML page; `out_of_date` as for [`markdown`].
pub fn html(report: &Report, out_of_date: Option<&str>) -> String {
    let mut body = String::new();
    let _ = write!(
        body,
        "<h1>pgo-build report{}</h1><p class=\"meta\">{}<br/>{}<br/>{}</p>",
        report
            .target
            .as_deref()
            .map(|triple| format!(": {}", escape(triple)))
            .unwrap_or_default(),
        escape(&report.workspace.display().to_string()),
        escape(report.rustc.as_deref().unwrap_or("")),
        escape(report.llvm_profdata.as_deref().unwrap_or(""))
    );
    if let Some(note) = out_of_date {
        let _ = write!(
            body,
            "<p class=\"warning\"><strong>{}</strong></p>",
            escape(note)
        );
    }
    if let Some(answer) = crate::report::answer::answer(report) {
        let _ = write!(
            body,
            "<section class=\"answer\"><h2>Verdict</h2><p class=\"headline\">{}</p><ul>",
            escape(&answer.headline)
        );
        for line in &answer.lines {
            // An interval stays on one line on a phone: word joiners around its dash.
            let line = escape(line).replace('–', "\u{2060}–\u{2060}");
            let _ = write!(body, "<li>{line}</li>");
        }
        body.push_str("</ul></section>");
    }
    steps_section(report, &mut body);
    sizes_section(report, &mut body);
    profiles_section(report, &mut body);
    if let Some(order) = &report.startup_order {
        let _ = write!(body, "<p>{}</p>", escape(&startup_order_text(order)));
    }
    if !report.rustc_memory.is_empty() {
        body.push_str(
            "<h2>rustc and the memory budget</h2><p>Each build's wall time beside the least \
             the dependency graph (its longest chain, by each rustc's own time) or the cores \
             allowed: far above it with memory waits, the budget held the build back.</p><table><tr>",
        );
        for column in RUSTC_HEADER {
            let _ = write!(body, "<th>{}</th>", escape(column));
        }
        body.push_str("</tr>");
        for row in rustc_rows(report) {
            body.push_str("<tr>");
            for cell in row {
                let _ = write!(body, "<td>{}</td>", escape(&cell));
            }
            body.push_str("</tr>");
        }
        body.push_str("</table>");
    }
    if !report.c_compilers.is_empty() {
        body.push_str(
            "<h2>C/C++ of build scripts</h2><table><tr><th>Stage</th><th>Compiled by</th>\
             <th>pgo-build added</th><th>Files</th></tr>",
        );
        for (stage, row) in c_compiler_rows(report) {
            let _ = write!(
                body,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&stage),
                escape(&row[0]),
                escape(&row[1]),
                escape(&row[2])
            );
        }
        body.push_str("</table>");
    }
    bolt_section(report, &mut body);
    for compare in report
        .compare
        .iter()
        .chain(report.earlier_compares.iter().rev())
    {
        compare_section(compare, &mut body);
    }
    history_section(&report.compare_history, &mut body);
    if let Some(explore) = &report.explore {
        explore_section(explore, &mut body);
    }
    format!(
        "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\"><head><meta charset=\"utf-8\"/>\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/><title>pgo-build report</title><style>{STYLE}</style></head><body>{body}</body></html>\n"
    )
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;max-width:70em;color:#222}\
    .answer{border-left:4px solid #2a7d2a;padding:.2em 1em;background:#f4f9f4}.headline{font-size:1.2em;font-weight:bold}.warning{border-left:4px solid #c0392b;padding:.2em 1em;background:#fdf2f0}\
    table{border-collapse:collapse;margin:1em 0;display:block;overflow-x:auto;max-width:100%}svg{max-width:100%;height:auto}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right}\
    td:first-child,th:first-child{text-align:left}.meta{color:#666;font-size:.9em}svg text{font-size:12px;font-family:sans-serif}\
    .faster{color:#2a7d2a;font-weight:bold}.slower{color:#b22;font-weight:bold}";

/// Per stage whose C pgo-build compiled: compiler and version, added flags, files per package.
/// Stages without a record used the user's own C compiler.
/// The header and a row per stage of "is it the budget or the graph": the rustc budget, the
/// build's wall time beside its lower bound (what limits it), and the waits.
const RUSTC_HEADER: [&str; 6] = [
    "Stage",
    "rustc budget",
    "Build",
    "At best (limit: longest chain)",
    "Waiting for memory",
    "Waiting for a CPU slot",
];

fn rustc_rows(report: &Report) -> Vec<[String; 6]> {
    report
        .rustc_memory
        .iter()
        .map(|(stage, r)| {
            let bound = r.lower_bound.as_ref().map_or("-".to_owned(), |b| {
                let chain = match b.critical_path.as_slice() {
                    [] => String::new(),
                    [only] => format!(": {only}"),
                    [first, .., last] => format!(": {first} … {last}"),
                };
                format!(
                    "{:.1}s ({}{chain}, {:.1}s)",
                    b.secs,
                    b.limit(),
                    b.critical_path_secs
                )
            });
            [
                stage.to_string(),
                format!(
                    "{} of {}",
                    human_bytes(r.rustc_budget_bytes),
                    human_bytes(r.budget_bytes)
                ),
                r.build_secs.map_or("-".to_owned(), |s| format!("{s:.1}s")),
                bound,
                format!("{:.1}s", r.memory_wait_secs),
                format!("{:.1}s", (r.wait_secs - r.memory_wait_secs).max(0.0)),
            ]
        })
        .collect()
}

fn c_compiler_rows(report: &Report) -> Vec<(String, [String; 3])> {
    report
        .c_compilers
        .iter()
        .map(|(stage, c)| {
            let files: Vec<String> = c
                .packages
                .iter()
                .map(|(package, n)| format!("{package}: {n}"))
                .chain(c.system_libraries.iter().map(|(package, libs)| {
                    format!("{package}: system {} (no profile)", libs.join(", "))
                }))
                .collect();
            (
                stage.to_string(),
                [
                    format!("{} ({})", c.compiler, c.version),
                    if c.flags.is_empty() {
                        "nothing".to_owned()
                    } else {
                        c.flags.join(" ")
                    },
                    if files.is_empty() {
                        "none in this build".to_owned()
                    } else {
                        files.join(", ")
                    },
                ],
            )
        })
        .collect()
}

fn steps_section(report: &Report, out: &mut String) {
    if report.steps.is_empty() {
        return;
    }
    let PipelineSteps {
        counted,
        other,
        total,
    } = report.pipeline_steps();
    out.push_str("<h2>Steps</h2>");
    let width = 760.0;
    let mut svg = String::new();
    let mut x = 20.0;
    for (i, step) in counted.iter().enumerate() {
        let w = width * share_of(step, total);
        let color = COLORS[i % COLORS.len()];
        // A reused step is drawn faded: its duration is that of the run that did the work.
        let opacity = if step.result == StepResult::Cached {
            0.4
        } else {
            1.0
        };
        let _ = write!(
            svg,
            "<rect x=\"{x:.1}\" y=\"10\" width=\"{w:.1}\" height=\"30\" fill=\"{color}\" fill-opacity=\"{opacity}\"><title>{}: {:.2}s, {}</title></rect>",
            escape(step.name.name()),
            step.duration_secs,
            escape(&step.result_text())
        );
        if w > 50.0 {
            let _ = write!(
                svg,
                "<text x=\"{:.1}\" y=\"30\" fill=\"white\">{}</text>",
                x + 4.0,
                escape(step.name.name())
            );
        }
        x += w;
    }
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"800\" height=\"50\">{svg}</svg>"
    );
    out.push_str("<table><tr><th>Step</th><th>Result</th><th>Duration</th><th>Share</th></tr>");
    for (i, step) in counted.iter().enumerate() {
        let share = 100.0 * share_of(step, total);
        let _ = write!(
            out,
            "<tr><td><span style=\"color:{}\">■</span> {}</td><td>{}</td><td>{:.2}s</td><td>{share:.1}%</td></tr>",
            COLORS[i % COLORS.len()],
            escape(step.name.name()),
            escape(&step.result_text()),
            step.duration_secs
        );
    }
    let _ = write!(
        out,
        "<tr><th>total</th><td></td><th>{total:.2}s</th><td></td></tr>"
    );
    for step in other {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{:.2}s</td><td>not in the total</td></tr>",
            escape(step.name.name()),
            escape(&step.result_text()),
            step.duration_secs
        );
    }
    out.push_str("</table>");
}

/// Every comparison as it ran, newest first (with fewer than two, the one there is is shown
/// in full above).
fn history_section(history: &[CompareRun], out: &mut String) {
    if history.len() < 2 {
        return;
    }
    out.push_str(
        "<h2>Comparisons</h2><p>Every comparison as it ran, newest first; the results shown \
         above are the latest good one per set of variants.</p><table><tr>",
    );
    for name in super::history::HEADER {
        let _ = write!(out, "<th>{}</th>", escape(name));
    }
    out.push_str("</tr>");
    for run in history.iter().rev() {
        out.push_str("<tr>");
        for cell in super::history::cells(run) {
            let _ = write!(out, "<td>{}</td>", escape(&cell));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
}

fn sizes_section(report: &Report, out: &mut String) {
    if report.binaries.is_empty() {
        return;
    }
    out.push_str("<h2>Binary sizes</h2>");
    let max = report
        .binaries
        .values()
        .flat_map(|s| s.values())
        .map(BinaryRecord::judged_bytes)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let mut svg = String::new();
    let mut y = 10.0;
    for (binary, stages) in &report.binaries {
        let _ = write!(
            svg,
            "<text x=\"0\" y=\"{:.0}\">{}</text>",
            y + 12.0,
            escape(binary)
        );
        y += 18.0;
        for (i, stage) in SIZED_STAGES.iter().enumerate() {
            let Some(record) = stages.get(stage) else {
                continue;
            };
            let w = 560.0 * record.judged_bytes() as f64 / max;
            let _ = write!(
                svg,
                "<text x=\"10\" y=\"{:.0}\">{stage}</text><rect x=\"110\" y=\"{y:.0}\" width=\"{w:.1}\" height=\"14\" fill=\"{}\"/>\
                 <text x=\"{:.1}\" y=\"{:.0}\">{}</text>",
                y + 11.0,
                COLORS[i],
                116.0 + w,
                y + 11.0,
                record.size_text()
            );
            y += 18.0;
        }
        y += 8.0;
    }
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"800\" height=\"{y:.0}\">{svg}</svg><p>{}</p>",
        escape(SIZES_LEGEND)
    );
}

fn profiles_section(report: &Report, out: &mut String) {
    if report.profiles.is_empty() {
        return;
    }
    out.push_str("<h2>Training profiles</h2><table><tr><th>Binary</th><th>Processes</th><th>Wrote a profile</th><th>Ended without writing</th><th>Functions run / instrumented</th></tr>");
    for (binary, figures) in &report.profiles {
        let known = |n: Option<u64>| n.map_or("-".to_owned(), |n| n.to_string());
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} / {}</td></tr>",
            escape(binary),
            figures.processes,
            figures.valid_files,
            figures.died,
            known(figures.covered_functions),
            known(figures.instrumented_functions)
        );
    }
    out.push_str("</table>");
    if !report.rejected_profiles.is_empty() {
        let _ = write!(
            out,
            "<p>{} raw profile files were excluded (see report.json).</p>",
            report.rejected_profiles.len()
        );
    }
}

fn bolt_section(report: &Report, out: &mut String) {
    if report.bolt.is_empty() {
        return;
    }
    out.push_str("<h2>BOLT</h2><table><tr><th>Binary</th><th>BOLTed</th><th>Time</th><th>Size</th><th>Functions with profile</th><th>Taken branches</th></tr>");
    for (binary, record) in &report.bolt {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{} → {}</td><td>{}</td><td>{}</td></tr>",
            escape(binary),
            if record.bolted { "yes" } else { "no" },
            record
                .seconds
                .map_or("-".to_owned(), |s| format!("{s:.2}s")),
            human_bytes(record.size_before),
            human_bytes(record.size_after),
            escape(record.functions_with_profile.as_deref().unwrap_or("-")),
            escape(record.taken_branches.as_deref().unwrap_or("-"))
        );
    }
    out.push_str("</table>");
}

/// The workloads' own metrics, one row per candidate and metric.
fn metrics_markdown(compare: &CompareResult, out: &mut String) {
    let rows: Vec<_> = compare
        .workloads
        .iter()
        .flat_map(|w| {
            w.in_order(&compare.candidates)
                .flat_map(move |(c, s)| s.metrics.iter().map(move |(n, m)| (w, c, n, m)))
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    out.push_str(
        "| Workload | Metric | Variant | Median of each side | Cost ratio (CI) | Verdict |\n|---|---|---|---:|---:|---|\n",
    );
    for (workload, candidate, name, metric) in rows {
        let s = &metric.summary;
        let _ = writeln!(
            out,
            "| {} | {name} ({}) | {candidate} vs {} | {} → {} {} | {:.3} ({} … {}) | {} |",
            workload.workload,
            metric.direction_text(),
            compare.reference,
            figure(metric.reference_median),
            figure(metric.candidate_median),
            metric.unit,
            s.median_ratio,
            crate::measure::stats::outward(s.verdict_interval().0, 1.0, false, 3),
            crate::measure::stats::outward(s.verdict_interval().1, 1.0, true, 3),
            metric.verdict_text()
        );
    }
    out.push('\n');
}

/// "Start-up order: ordering-file, from 40 traces of 40 processes, 2076 functions ordered."
fn startup_order_text(order: &OrderRecord) -> String {
    format!(
        "Start-up order: {}, from {} temporal traces of {} processes{}.",
        order.mode.name(),
        order.traces.kept,
        order.traces.seen,
        order
            .ordered_functions
            .map_or(String::new(), |n| format!(", {n} functions ordered"))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(escape("<a & \"b\">"), "&lt;a &amp; &quot;b&quot;&gt;");
    }

    #[test]
    fn empty_reports_render() {
        let report = Report::new(std::path::Path::new("/w<s>"));
        let page = html(&report, None);
        assert!(page.contains("/w&lt;s&gt;"));
        assert!(markdown(&report, None).contains("| **total** |"));
    }

    #[test]
    fn the_rustc_budget_shows_the_build_beside_its_bound() {
        let mut report = Report::new(std::path::Path::new("/ws"));
        report.rustc_memory.insert(
            crate::layout::Stage::Baseline,
            crate::report::RustcSummary {
                budget_bytes: 2 << 30,
                rustc_budget_bytes: (2 << 30) - (64 << 20),
                build_secs: Some(37.7),
                memory_wait_secs: 0.9,
                wait_secs: 52.0,
                lower_bound: Some(crate::report::GraphBound {
                    secs: 32.5,
                    critical_path_secs: 18.4,
                    work_secs: 32.5,
                    critical_path: vec!["regex-syntax".into(), "ignore".into(), "rg".into()],
                }),
                ..Default::default()
            },
        );
        let text = markdown(&report, None);
        assert!(
            text.contains(
                "| baseline | 1.9 GiB of 2.0 GiB | 37.7s | 32.5s (cores: regex-syntax … rg, 18.4s) \
                 | 0.9s | 51.1s |"
            ),
            "{text}"
        );
        assert!(html(&report, None).contains("<h2>rustc and the memory budget</h2>"));
    }
}
