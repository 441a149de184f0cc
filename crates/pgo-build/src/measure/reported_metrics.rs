//! Metrics a workload reports (`[[workload.metric]]`): read from its output by a pattern, or
//! from the JSON lines it writes to `$PGO_BUILD_METRICS`, into one value per metric and run;
//! a distribution (one value per request) into its declared percentiles, `<name>.p<P>`.
//! `compare` pairs them across rounds like wall time.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

/// One run's metrics: value per compared name, and names written to `$PGO_BUILD_METRICS`
/// that no `[[workload.metric]]` declares.
#[derive(Debug, Default, PartialEq)]
pub struct RunMetrics {
    pub values: BTreeMap<String, f64>,
    pub undeclared: Vec<String>,
}

/// Reads one run's metrics from its log (pattern metrics; pgo-build's own header line is
/// skipped) and the lines it wrote to `$PGO_BUILD_METRICS`. A declared metric the run did not
/// report, or a one-value metric reported several times, is an error naming the fix.
pub fn read(
    specs: &[MetricSpec],
    log: &Path,
    metric_lines: &[String],
) -> Result<RunMetrics, String> {
    let mut found: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    // The first lines each pattern matched: a message about them quotes them.
    let mut matched: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut undeclared = Vec::new();
    let patterns: Vec<(&str, regex::Regex)> = specs
        .iter()
        .filter_map(|s| Some((s.name(), s.regex()?)))
        .collect();
    if !patterns.is_empty() {
        let text =
            std::fs::read(log).map_err(|err| format!("could not read {}: {err}", log.display()))?;
        let text = String::from_utf8_lossy(&text);
        for line in text.lines().filter(|l| !l.starts_with("# pgo-build")) {
            for (name, regex) in &patterns {
                if let Some(value) = regex.captures(line).and_then(|c| c.get(1)) {
                    // "nan" and "inf" parse as f64 but are no measurement: refused like text.
                    let value: f64 = value
                        .as_str()
                        .trim()
                        .parse()
                        .ok()
                        .filter(|v: &f64| v.is_finite())
                        .ok_or_else(|| {
                            format!(
                                "metric `{name}`: its pattern matched {:?}, which is not a \
                                 finite number",
                                value.as_str()
                            )
                        })?;
                    found.entry(name).or_default().push(value);
                    let lines = matched.entry(name).or_default();
                    if lines.len() < 2 {
                        lines.push(line.trim().to_owned());
                    }
                }
            }
        }
    }
    for (number, line) in metric_lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        #[derive(serde::Deserialize)]
        struct Line {
            name: String,
            value: f64,
        }
        let parsed: Line = serde_json::from_str(line).map_err(|err| {
            format!(
                "line {} of $PGO_BUILD_METRICS is not {{\"name\": \"…\", \"value\": <number>}}: \
                 {err} ({line:?})",
                number + 1
            )
        })?;
        match specs
            .iter()
            .find(|s| s.name() == parsed.name && s.pattern.is_none())
        {
            Some(spec) => found.entry(spec.name()).or_default().push(parsed.value),
            None if !undeclared.contains(&parsed.name) => undeclared.push(parsed.name),
            None => {}
        }
    }
    let mut values = BTreeMap::new();
    for spec in specs {
        let name = spec.name();
        let reported = found.remove(name).unwrap_or_default();
        if reported.is_empty() {
            return Err(format!(
                "metric `{name}` was not reported: {}",
                match &spec.pattern {
                    Some(pattern) => format!("no line of the output matched {pattern:?}"),
                    None => "no line {\"name\": \"NAME\", \"value\": …} for it in \
                             $PGO_BUILD_METRICS (or give the metric a `pattern` to read it from \
                             the output)"
                        .replace("NAME", name),
                }
            ));
        }
        if spec.percentiles.is_empty() {
            if reported.len() > 1 {
                let mut message = format!(
                    "metric `{name}` was reported {} times in one run",
                    reported.len()
                );
                match matched.get(name).map(Vec::as_slice) {
                    // Two different lines: likely two measurements (a SET and a GET figure).
                    Some([first, second]) if first != second => {
                        message += &format!(
                            ": its pattern matched {first:?} and {second:?}. If these are different \
                         measurements, make the pattern match one kind of line (include its \
                         label) and declare a metric for each; if they are one value per \
                         request, declare percentiles = [50, 95, 99] for it"
                        )
                    }
                    _ => {
                        message += ": a metric with one value per request is a distribution; \
                                     declare percentiles = [50, 95, 99] for it"
                    }
                }
                return Err(message);
            }
            values.insert(name.to_owned(), reported[0]);
        } else {
            for p in &spec.percentiles {
                values.insert(
                    MetricSpec::percentile_name(name, *p),
                    percentile(&reported, *p),
                );
            }
        }
    }
    Ok(RunMetrics { values, undeclared })
}

/// The nearest-rank percentile: the smallest value with at least `p`% of values at or below.
pub fn percentile(values: &[f64], p: u8) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((f64::from(p) / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// A figure a workload reports: lines of its output matching `pattern` (the first capture
/// group is the value), or JSON lines `{"name": …, "value": …}` it writes to
/// `$PGO_BUILD_METRICS`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetricSpec {
    /// What the metric is compared as (`--metric NAME`, `[compare] metric`).
    #[schemars(with = "String")]
    pub name: Spanned<String>,
    /// `"lower"` is better (latency, time, memory) or `"higher"` (throughput).
    pub direction: Direction,
    /// Shown beside its values (`"ms"`, `"req/s"`).
    #[serde(default)]
    pub unit: String,
    /// A regular expression (Rust's `regex` syntax) matched against each line of the
    /// workload's output, stdout and stderr together: the first capture group of every
    /// matching line is a value. Make it match one kind of line only: two different figures
    /// matched by one pattern are mixed. Without it, values are read from
    /// `$PGO_BUILD_METRICS`.
    pub pattern: Option<String>,
    /// A distribution (one value per request): these percentiles of each run's values are
    /// compared, each as `<name>.p<P>`. Without it, a run reports one value.
    #[serde(default)]
    pub percentiles: Vec<u8>,
}

impl MetricSpec {
    pub fn name(&self) -> &str {
        self.name.get_ref()
    }

    /// A metric pgo-build reads itself (a criterion benchmark's estimate), not declared.
    pub fn read_by_pgo_build(name: String, direction: Direction, unit: &str) -> MetricSpec {
        MetricSpec {
            name: Spanned::new(0..0, name),
            direction,
            unit: unit.to_owned(),
            pattern: None,
            percentiles: Vec::new(),
        }
    }

    /// The names the metric is compared under: its own, or one per percentile.
    pub fn compared_names(&self) -> Vec<String> {
        if self.percentiles.is_empty() {
            vec![self.name().to_owned()]
        } else {
            self.percentiles
                .iter()
                .map(|p| MetricSpec::percentile_name(self.name(), *p))
                .collect()
        }
    }

    pub fn percentile_name(metric: &str, percentile: u8) -> String {
        format!("{metric}.p{percentile}")
    }

    pub fn check(&self) -> Result<(), String> {
        crate::util::names::check_metric(self.name())?;
        if crate::measure::metric::BUILT_IN_METRICS.contains(&self.name()) {
            return Err(format!(
                "{:?} is a name pgo-build measures itself (--metric {}): rename the metric",
                self.name(),
                self.name()
            ));
        }
        if let Some(pattern) = &self.pattern {
            let regex = regex::Regex::new(pattern)
                .map_err(|err| format!("pattern is not a regular expression: {err}"))?;
            if regex.captures_len() < 2 {
                return Err(format!(
                    "pattern {pattern:?} has no capture group: put the number in parentheses, \
                     e.g. \"p99: ([0-9.]+) ms\""
                ));
            }
        }
        if let Some(p) = self.percentiles.iter().find(|p| **p == 0 || **p > 100) {
            return Err(format!("percentile {p} is not within 1..=100"));
        }
        Ok(())
    }

    pub fn regex(&self) -> Option<regex::Regex> {
        // Checked at load.
        self.pattern
            .as_deref()
            .map(|p| regex::Regex::new(p).expect("checked at load"))
    }
}

/// Which way a metric improves.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Latency, time, memory.
    Lower,
    /// Throughput.
    Higher,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs(text: &str) -> Vec<MetricSpec> {
        #[derive(serde::Deserialize)]
        struct File {
            metric: Vec<MetricSpec>,
        }
        toml::from_str::<File>(text).unwrap().metric
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&values, 50), 50.0);
        assert_eq!(percentile(&values, 99), 99.0);
        assert_eq!(percentile(&values, 100), 100.0);
        assert_eq!(percentile(&[7.0], 99), 7.0);
        assert_eq!(percentile(&[3.0, 1.0, 2.0], 50), 2.0);
    }

    #[test]
    fn metrics_come_from_patterns_and_json_lines() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("w.log");
        std::fs::write(
            &log,
            "# pgo-build run: throughput: 1 req/s\nthroughput: 1234.5 req/s\nother\n",
        )
        .unwrap();
        let specs = specs(
            r#"
            [[metric]]
            name = "throughput"
            direction = "higher"
            pattern = "throughput: ([0-9.]+)"
            [[metric]]
            name = "latency"
            direction = "lower"
            percentiles = [50, 99]
            "#,
        );
        let mut lines: Vec<String> = (1..=100)
            .map(|v| format!(r#"{{"name":"latency","value":{v}}}"#))
            .collect();
        lines.push(r#"{"name":"extra","value":1}"#.to_owned());
        let read = read(&specs, &log, &lines).unwrap();
        assert_eq!(read.values["throughput"], 1234.5);
        assert_eq!(read.values["latency.p50"], 50.0);
        assert_eq!(read.values["latency.p99"], 99.0);
        assert_eq!(read.undeclared, vec!["extra".to_owned()]);
    }

    #[test]
    fn a_missing_or_repeated_scalar_metric_is_an_error_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("w.log");
        std::fs::write(&log, "nothing here\n").unwrap();
        let specs = specs(
            r#"
            [[metric]]
            name = "p99_ms"
            direction = "lower"
            "#,
        );
        let missing = read(&specs, &log, &[]).unwrap_err();
        assert!(missing.contains("PGO_BUILD_METRICS"), "{missing}");
        let twice = vec![
            r#"{"name":"p99_ms","value":1}"#.to_owned(),
            r#"{"name":"p99_ms","value":2}"#.to_owned(),
        ];
        let repeated = read(&specs, &log, &twice).unwrap_err();
        assert!(
            repeated.contains("percentiles = [50, 95, 99]"),
            "{repeated}"
        );
        let bad = read(&specs, &log, &["p99 12".to_owned()]).unwrap_err();
        assert!(bad.contains("line 1 of $PGO_BUILD_METRICS"), "{bad}");
        // Not a measurement, though f64 would parse it.
        let specs = specs_with_pattern("p99: (\\S+)");
        for value in ["NaN", "inf", "-inf"] {
            std::fs::write(&log, format!("p99: {value}\n")).unwrap();
            let err = read(&specs, &log, &[]).unwrap_err();
            assert!(err.contains("not a finite number"), "{value}: {err}");
        }
    }

    fn specs_with_pattern(pattern: &str) -> Vec<MetricSpec> {
        specs(&format!(
            "[[metric]]\nname = \"p99_ms\"\ndirection = \"lower\"\npattern = '{pattern}'\n"
        ))
    }

    #[test]
    fn a_pattern_matching_two_kinds_of_line_is_told_to_match_one() {
        // redis-benchmark's summary: one pattern for "requests per second" matches both tests.
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("w.log");
        std::fs::write(
            &log,
            "SET: 55348.75 requests per second\nGET: 61236.88 requests per second\n",
        )
        .unwrap();
        let specs = specs(
            r#"
            [[metric]]
            name = "rps"
            direction = "higher"
            pattern = '([0-9.]+) requests per second'
            "#,
        );
        let err = read(&specs, &log, &[]).unwrap_err();
        assert!(
            err.contains("\"SET: 55348.75 requests per second\""),
            "{err}"
        );
        assert!(
            err.contains("make the pattern match one kind of line"),
            "{err}"
        );
    }
}
