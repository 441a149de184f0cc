//! The HTML page's comparison section: per workload and candidate the verdict, the interval it
//! was judged by and a chart of the per-round ratios, all on one axis per section, so dots and
//! bands compare at a glance; then the workload's own metrics, charted the same way.

use std::fmt::Write;

use super::text::escape;
use crate::measure::metric::Decider;
use crate::measure::stats::{PairedSummary, Verdict};
use crate::report::records::{
    CandidateSummary, CompareResult, WorkloadComparison, decider_label, decider_words, verdict_text,
};
use crate::report::tables::percent;
use crate::util::units::figure;

pub(super) fn compare_section(compare: &CompareResult, out: &mut String) {
    let _ = write!(
        out,
        "<h2>A/B comparison</h2><p>{} rounds after a warm-up, in a random order each round; \
         each dot is one round's {} ratio against {}; the band is the interval the verdict was \
         judged by, around the median (bar); every chart of the section has the same axis. \
         {}</p>",
        compare.rounds,
        escape(&decider_label(&compare.decider())),
        escape(&compare.reference),
        compare
            .family
            .as_ref()
            .map(|family| escape(&family.legend()))
            .unwrap_or_default()
    );
    let decider = compare.decider();
    // One x-range for every chart of the section, so their dots and bands compare at a glance.
    let range = shared_range(compare.workloads.iter().flat_map(|workload| {
        let decider = &decider;
        workload
            .in_order(&compare.candidates)
            .map(move |(candidate, summary)| {
                let by = judged_by(summary, decider);
                (
                    round_ratios(workload, &by, candidate, &compare.reference),
                    summary.judged(decider).verdict_interval(),
                )
            })
    }));
    if let Some(note) = &compare.emulated {
        let _ = write!(
            out,
            "<p class=\"slower\"><b>Emulated:</b> {}</p>",
            escape(note)
        );
    }
    for workload in &compare.workloads {
        for (candidate, summary) in workload.in_order(&compare.candidates) {
            let s = summary.judged(&decider);
            let by = judged_by(summary, &decider);
            let class = verdict_class(s.verdict);
            // The interval drawn and stated is the one the verdict was judged by.
            let (low, high) = s.verdict_interval();
            let _ = write!(
                out,
                "<h3>{} ({}): {candidate} vs {}</h3><p>by {}: median of per-round ratios {} \
                 (the verdict's interval {} … {}), wins {}/{}: <span class=\"{class}\">{}</span></p>",
                escape(&workload.workload),
                escape(workload.role.name()),
                escape(&compare.reference),
                escape(&decider_words(&by)),
                percent(s.median_ratio),
                crate::measure::stats::change_bound(low, false),
                crate::measure::stats::change_bound(high, true),
                s.wins,
                s.pairs,
                verdict_text(s, &decider)
            );
            out.push_str(&ratio_plot(
                &round_ratios(workload, &by, candidate, &compare.reference),
                s.median_ratio,
                (low, high),
                range,
            ));
            metrics_html(workload, candidate, &compare.reference, out);
        }
    }
}

/// What a candidate's verdict on a workload rests on: the deciding metric where the workload
/// reports it, else the figure measured beside it (a workload without services is judged by
/// wall time when `services.cpu` decides).
fn judged_by(summary: &CandidateSummary, decider: &Decider) -> Decider {
    match decider.reported() {
        Some(name) if !summary.metrics.contains_key(name) => Decider::Measured(decider.measured()),
        _ => decider.clone(),
    }
}

/// The page's CSS class of a verdict: shown in colour when it is one.
fn verdict_class(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Faster => "faster",
        Verdict::Slower => "slower",
        _ => "",
    }
}

/// A candidate's workload metrics: a row each (in the metric's unit), then each one's
/// per-round cost ratios.
fn metrics_html(workload: &WorkloadComparison, candidate: &str, reference: &str, out: &mut String) {
    let Some(summary) = workload.candidates.get(candidate) else {
        return;
    };
    if summary.metrics.is_empty() {
        return;
    }
    out.push_str(
        "<table><tr><th>Metric</th><th>Median of each side</th><th>Cost ratio (CI)</th>\
         <th>Wins</th><th>Verdict</th></tr>",
    );
    for (name, metric) in &summary.metrics {
        let s = &metric.summary;
        let class = verdict_class(s.verdict);
        let _ = write!(
            out,
            "<tr><td>{} ({})</td><td>{} → {} {}</td><td>{:.3} ({} … {})</td><td>{}/{}</td>\
             <td class=\"{class}\">{}</td></tr>",
            escape(name),
            metric.direction_text(),
            figure(metric.reference_median),
            figure(metric.candidate_median),
            escape(&metric.unit),
            s.median_ratio,
            crate::measure::stats::outward(s.verdict_interval().0, 1.0, false, 3),
            crate::measure::stats::outward(s.verdict_interval().1, 1.0, true, 3),
            s.wins,
            s.pairs,
            metric.verdict_text()
        );
    }
    out.push_str("</table>");
    let charts: Vec<(&String, Vec<f64>, &PairedSummary)> = summary
        .metrics
        .iter()
        .map(|(name, metric)| {
            let decider = Decider::Reported(name.clone());
            let ratios = round_ratios(workload, &decider, candidate, reference);
            (name, ratios, &metric.summary)
        })
        .collect();
    // The metrics' charts share one x-range, as the section's do.
    let range = shared_range(
        charts
            .iter()
            .map(|(_, ratios, s)| (ratios.clone(), s.verdict_interval())),
    );
    for (name, ratios, s) in &charts {
        let _ = write!(out, "<p>{}: per-round cost ratios</p>", escape(name));
        out.push_str(&ratio_plot(
            ratios,
            s.median_ratio,
            s.verdict_interval(),
            range,
        ));
    }
}

/// The x-range that holds every chart's rounds and interval, and 0.80–1.20 at least.
fn shared_range(charts: impl IntoIterator<Item = (Vec<f64>, (f64, f64))>) -> (f64, f64) {
    charts
        .into_iter()
        .fold((0.8f64, 1.2f64), |(lo, hi), (ratios, (low, high))| {
            let lo = ratios.iter().copied().fold(lo.min(low), f64::min);
            let hi = ratios.iter().copied().fold(hi.max(high), f64::max);
            (lo, hi)
        })
}

/// Each round's ratio of `candidate` to `reference` by what `decider` names, below 1 better
/// (a higher-is-better metric is turned over).
fn round_ratios(
    workload: &WorkloadComparison,
    decider: &Decider,
    candidate: &str,
    reference: &str,
) -> Vec<f64> {
    let higher = decider
        .reported()
        .and_then(|name| workload.candidates.get(candidate)?.metrics.get(name))
        .is_some_and(|m| m.direction == crate::measure::reported_metrics::Direction::Higher);
    workload
        .runs
        .iter()
        .filter(|r| r.variant == candidate)
        .filter_map(|c| {
            let r = workload
                .runs
                .iter()
                .find(|r| r.round == c.round && r.variant == reference)?;
            Some(c.judged_value(decider)? / r.judged_value(decider)?)
        })
        // A higher-is-better metric is summarised as reference/candidate (below 1: better).
        .map(|ratio| if higher { 1.0 / ratio } else { ratio })
        .collect()
}

/// Per-round ratios on an axis around 1.0, over the section's `range`.
fn ratio_plot(ratios: &[f64], median: f64, (low, high): (f64, f64), range: (f64, f64)) -> String {
    let (lo, hi) = (range.0 - 0.02, range.1 + 0.02);
    let x = |v: f64| 20.0 + 740.0 * (v - lo) / (hi - lo);
    let mut svg = format!(
        "<rect x=\"{:.1}\" y=\"10\" width=\"{:.1}\" height=\"40\" fill=\"#cde\"/>\
         <line x1=\"{:.1}\" y1=\"5\" x2=\"{:.1}\" y2=\"55\" stroke=\"#888\" stroke-dasharray=\"4\"/>\
         <line x1=\"{:.1}\" y1=\"8\" x2=\"{:.1}\" y2=\"52\" stroke=\"#224\" stroke-width=\"3\"/>",
        x(low),
        (x(high) - x(low)).max(1.0),
        x(1.0),
        x(1.0),
        x(median),
        x(median)
    );
    for (i, ratio) in ratios.iter().enumerate() {
        let _ = write!(
            svg,
            "<circle cx=\"{:.1}\" cy=\"{}\" r=\"4\" fill=\"{}\"><title>round {}: {:.3}</title></circle>",
            x(*ratio),
            20 + (i % 3) * 10,
            // Below 1 the candidate did better that round: green, not an alarm's red.
            if *ratio < 1.0 { "#59a14f" } else { "#e15759" },
            i + 1,
            ratio
        );
    }
    for tick in [lo + 0.02, 1.0, hi - 0.02] {
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"70\" text-anchor=\"middle\">{tick:.2}</text>",
            x(tick)
        );
    }
    let _ = write!(
        svg,
        "<text x=\"400\" y=\"88\" text-anchor=\"middle\">per-round ratio, candidate / \
         reference (below 1.00: better); band: the verdict's interval</text>"
    );
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"800\" height=\"95\" \
         viewBox=\"0 0 800 95\">{svg}</svg>"
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::measure::metric::Metric;
    use crate::report::records::{CandidateSummary, RunSample};

    fn workload(name: &str, ratios: &[f64]) -> WorkloadComparison {
        let run = |round: usize, variant: &str, wall_secs: f64| RunSample {
            round,
            variant: variant.into(),
            wall_secs,
            cpu_secs: wall_secs,
            instructions: None,
            faults: None,
            metrics: BTreeMap::new(),
        };
        let runs = ratios
            .iter()
            .enumerate()
            .flat_map(|(i, r)| [run(i + 1, "baseline", 1.0), run(i + 1, "optimized", *r)])
            .collect();
        let summary = CandidateSummary::of_ratios(ratios);
        WorkloadComparison {
            workload: name.into(),
            role: crate::config::Role::Holdout,
            runs,
            candidates: [("optimized".to_owned(), summary)].into(),
            benchmarks: Vec::new(),
            binaries: None,
            budget_ran_out: false,
            code: Default::default(),
        }
    }

    /// The tick labels of each chart in `html`.
    fn axes(html: &str) -> Vec<Vec<&str>> {
        html.split("<svg")
            .skip(1)
            .map(|svg| {
                svg.split("text-anchor=\"middle\">")
                    .skip(1)
                    .map(|t| &t[..t.find('<').unwrap()])
                    .filter(|t| t.parse::<f64>().is_ok())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn every_chart_of_a_section_shares_one_axis_and_draws_improvements_green() {
        let compare = CompareResult {
            metric: Metric::Wall,
            counter: None,
            rounds: 10,
            emulated: None,
            rounds_plan: None,
            seed: 1,
            reference: "baseline".into(),
            candidates: vec!["optimized".into()],
            workloads: vec![
                workload("near", &[0.97, 0.98, 0.99, 0.97, 0.98, 0.96, 0.99, 0.98]),
                workload("far", &[0.60, 0.62, 0.61, 0.63, 0.59, 0.60, 0.62, 0.61]),
            ],
            geometric_mean: BTreeMap::new(),
            decided_by: None,
            previous: Vec::new(),
            family: None,
            c_compilers_differ: None,
            between: Vec::new(),
            margin: 0.02,
            not_counted: None,
            builds: Default::default(),
        };
        let mut html = String::new();
        compare_section(&compare, &mut html);
        let axes = axes(&html);
        assert_eq!(axes.len(), 2, "{html}");
        assert_eq!(axes[0], axes[1], "{html}");
        // The far workload's rounds set the shared low end.
        assert_eq!(axes[0][0], "0.59", "{html}");
        assert!(
            !html.contains("#e15759"),
            "an improvement drawn red: {html}"
        );
        // Decided by the services' CPU time, a workload without services is drawn (and said
        // to be judged) by wall time: its rounds are there, not an empty chart.
        let mut by_services = compare;
        by_services.decided_by = Some("services.cpu".into());
        let mut html = String::new();
        compare_section(&by_services, &mut html);
        for svg in html.split("<svg").skip(1) {
            assert_eq!(svg.matches("<circle").count(), 8, "{html}");
        }
        assert!(html.contains("<p>by wall time: "), "{html}");
    }
}
