//! `explore`'s part of the report: its Markdown table and the HTML section (the
//! recommendation, speed against build time with the Pareto front, the table).

use std::fmt::Write;

use super::text::{escape, verdict_label};
use crate::measure::metric::Decider;
use crate::measure::stats::Verdict;
use crate::report::records::{BASELINE_VARIANT, VariantStatus};
use crate::report::records::{ExploreResult, ExploreSpeed, decider_label};
use crate::report::tables::percent;

/// `explore`'s table and recommendation, fastest first.
pub(super) fn explore_markdown(explore: &ExploreResult, out: &mut String) {
    let _ = writeln!(
        out,
        "### explore ({}, {} rounds on {})

| Variant | vs baseline | vs pgo | Build time | Peak memory | Size (loaded) | Pareto front | Status |\n|---|---:|---:|---:|---:|---:|---|---|",
        explore_decider(explore),
        explore.rounds,
        explore.workloads.join(", ")
    );
    let speed = |s: &Option<ExploreSpeed>| {
        s.as_ref().map_or("-".to_owned(), |s| {
            format!("{} ({})", percent(s.ratio), verdict_label(s.verdict))
        })
    };
    for v in &explore.variants {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            v.name,
            speed(&v.vs_baseline),
            speed(&v.vs_pgo),
            v.build_time_text(),
            v.peak_memory_text(),
            v.size_text(),
            v.front.join(", "),
            v.status
        );
    }
    match &explore.recommendation {
        Some(r) => {
            let _ = writeln!(out, "\n**Recommended: {}** - {}\n", r.variant, r.evidence);
        }
        None => {
            let _ = writeln!(
                out,
                "\nNo recommendation: {}\n",
                explore
                    .undecided
                    .as_deref()
                    .or(explore.stopped.as_deref())
                    .unwrap_or("not every variant was measured")
            );
        }
    }
}

/// What explore's speeds rest on.
fn explore_decider(explore: &ExploreResult) -> String {
    decider_label(&match &explore.decided_by {
        Some(name) => Decider::Reported(name.clone()),
        None => Decider::Measured(explore.metric),
    })
}

/// The variants' speed against their build time, faster up, the Pareto front of the two drawn
/// and filled. `points`: (build seconds, time against the baseline, name, on the front).
fn speed_against_build_time(points: &[(f64, f64, &str, bool)]) -> String {
    let (width, height) = (800.0, 360.0);
    let (left, right, top, bottom) = (60.0, 150.0, 20.0, 50.0);
    let max_secs = points.iter().map(|p| p.0).fold(1.0f64, f64::max) * 1.05;
    let lo = points.iter().map(|p| p.1).fold(1.0f64, f64::min) - 0.02;
    let hi = points.iter().map(|p| p.1).fold(1.0f64, f64::max) + 0.02;
    let x = |secs: f64| left + (width - left - right) * secs / max_secs;
    // Faster is up.
    let y = |ratio: f64| top + (height - top - bottom) * (ratio - lo) / (hi - lo);
    let mut svg = format!(
        "<line x1=\"{left}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#888\"/>\
         <line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{:.1}\" stroke=\"#888\"/>\
         <line x1=\"{left}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#bbb\" stroke-dasharray=\"4\"/>\
         <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">build time (s)</text>\
         <text x=\"14\" y=\"{:.1}\" transform=\"rotate(-90 14 {:.1})\" text-anchor=\"middle\">time vs baseline</text>",
        height - bottom,
        width - right,
        height - bottom,
        height - bottom,
        y(1.0),
        width - right,
        y(1.0),
        (left + width - right) / 2.0,
        height - 12.0,
        (top + height - bottom) / 2.0,
        (top + height - bottom) / 2.0,
    );
    for tick in 0..=4 {
        let secs = max_secs * tick as f64 / 4.0;
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{secs:.0}</text>",
            x(secs),
            height - bottom + 16.0
        );
    }
    let mut ticks = vec![lo + 0.02, 1.0, hi - 0.02];
    ticks.dedup_by(|a, b| (*a - *b).abs() < 0.005);
    for ratio in ticks {
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left - 4.0,
            y(ratio) + 4.0,
            percent(ratio)
        );
    }
    let mut front: Vec<&(f64, f64, &str, bool)> = points.iter().filter(|p| p.3).collect();
    front.sort_by(|a, b| a.0.total_cmp(&b.0));
    let line: Vec<String> = front
        .iter()
        .map(|p| format!("{:.1},{:.1}", x(p.0), y(p.1)))
        .collect();
    if line.len() > 1 {
        let _ = write!(
            svg,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"#59a14f\" stroke-width=\"2\"/>",
            line.join(" ")
        );
    }
    for (secs, ratio, name, on_front) in points {
        let _ = write!(
            svg,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"6\" fill=\"{}\" stroke=\"#222\"><title>{}: {} vs baseline, {secs:.1}s to build{}</title></circle>\
             <text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            x(*secs),
            y(*ratio),
            if *on_front { "#59a14f" } else { "#fff" },
            escape(name),
            percent(*ratio),
            if *on_front { ", on the front" } else { "" },
            x(*secs) + 9.0,
            y(*ratio) + 4.0,
            escape(name)
        );
    }
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\">{svg}</svg>\
         <p class=\"meta\">Faster is up. Filled: on the Pareto front of speed against build time \
         (no other variant is both faster and quicker to build).</p>"
    )
}

/// `explore`: the recommendation, then speed against build time, one dot per measured variant,
/// the Pareto front (speed against build time) joined by a line, then the table.
pub(super) fn explore_section(explore: &ExploreResult, out: &mut String) {
    let _ = write!(
        out,
        "<h2>Explore</h2><p>{} variants, {} on {} ({} rounds each).</p>",
        explore.variants.len(),
        escape(&explore_decider(explore)),
        escape(&explore.workloads.join(", ")),
        explore.rounds
    );
    match &explore.recommendation {
        Some(r) => {
            let _ = write!(
                out,
                "<p><b>Recommended: {}</b> - {}</p>",
                escape(&r.variant),
                escape(&r.evidence)
            );
        }
        None => {
            let _ = write!(
                out,
                "<p>No recommendation: {}</p>",
                escape(
                    explore
                        .stopped
                        .as_deref()
                        .unwrap_or("not every variant was measured")
                )
            );
        }
    }
    // (build seconds, speed against the baseline, name, on the build-time front)
    let points: Vec<(f64, f64, &str, bool)> = explore
        .variants
        .iter()
        .filter_map(|v| {
            let speed = match (&v.vs_baseline, v.status) {
                (Some(s), _) => s.ratio,
                (None, VariantStatus::Measured) if v.name == BASELINE_VARIANT => 1.0,
                _ => return None,
            };
            Some((
                v.build_secs?,
                speed,
                v.name.as_str(),
                v.front.iter().any(|f| f == "build time"),
            ))
        })
        .collect();
    if !points.is_empty() {
        out.push_str(&speed_against_build_time(&points));
    }
    out.push_str("<table><tr><th>Variant</th><th>vs baseline</th><th>vs pgo</th><th>Build time</th><th>Peak memory</th><th>Size (loaded)</th><th>Pareto front</th><th>Status</th></tr>");
    for v in &explore.variants {
        let speed = |s: &Option<ExploreSpeed>| {
            s.as_ref().map_or("-".to_owned(), |s| {
                format!(
                    "<span class=\"{}\">{} ({})</span>",
                    match s.verdict {
                        Verdict::Faster => "faster",
                        Verdict::Slower => "slower",
                        _ => "",
                    },
                    percent(s.ratio),
                    verdict_label(s.verdict)
                )
            })
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&v.name),
            speed(&v.vs_baseline),
            speed(&v.vs_pgo),
            v.build_time_text(),
            v.peak_memory_text(),
            v.size_text(),
            escape(&v.front.join(", ")),
            escape(v.status.name())
        );
    }
    out.push_str("</table>");
}
