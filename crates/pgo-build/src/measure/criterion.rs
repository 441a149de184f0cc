//! criterion's own estimates of a benchmark run (`<CRITERION_HOME>/<id>/new/estimates.json`),
//! read after a held-out cargo bench workload ran against each variant, so `compare` can show
//! each benchmark's median and interval per variant beside its whole-command timing.
//!
//! pgo-build points `CRITERION_HOME` at each stage's own directory: criterion otherwise writes
//! every stage's results into one place and compares them with each other.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A stage's criterion directory (`CRITERION_HOME`).
pub fn home(stage_cargo_target: &Path) -> PathBuf {
    stage_cargo_target.join("criterion")
}

/// Every benchmark's latest estimate under `home`, by benchmark id (the directory path, e.g.
/// `parse/small`). Files criterion did not write in its format are skipped.
pub fn estimates(home: &Path) -> BTreeMap<String, Estimate> {
    let mut found = BTreeMap::new();
    collect(home, home, &mut found);
    found
}

fn collect(home: &Path, dir: &Path, found: &mut BTreeMap<String, Estimate>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        if entry.file_name() == "new" {
            let id = dir.strip_prefix(home).unwrap_or(dir);
            if let Some(estimate) = read(&path.join("estimates.json")) {
                found.insert(id.display().to_string(), estimate);
            }
        } else if entry.file_name() != "report" {
            collect(home, &path, found);
        }
    }
}

fn read(path: &Path) -> Option<Estimate> {
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    let median = &json["median"];
    let interval = &median["confidence_interval"];
    Some(Estimate {
        median_ns: median["point_estimate"].as_f64()?,
        lower_ns: interval["lower_bound"].as_f64()?,
        upper_ns: interval["upper_bound"].as_f64()?,
    })
}

/// Each benchmark's estimate as a metric of the run that produced it: `criterion:<id>`, its
/// median time per iteration in nanoseconds (lower is better), so criterion's figures are paired
/// per round and judged like any workload metric.
pub const METRIC_PREFIX: &str = "criterion:";

pub fn run_metrics(home: &Path) -> BTreeMap<String, f64> {
    estimates(home)
        .into_iter()
        .map(|(id, estimate)| (format!("{METRIC_PREFIX}{id}"), estimate.median_ns))
        .collect()
}

/// One benchmark's median time per iteration with its confidence interval, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Estimate {
    pub median_ns: f64,
    pub lower_ns: f64,
    pub upper_ns: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(home: &Path, id: &str, median: f64) {
        let dir = home.join(id).join("new");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("estimates.json"),
            format!(
                r#"{{"mean":{{"confidence_interval":{{"confidence_level":0.95,"lower_bound":1.0,"upper_bound":2.0}},"point_estimate":1.5,"standard_error":0.1}},
                   "median":{{"confidence_interval":{{"confidence_level":0.95,"lower_bound":{},"upper_bound":{}}},"point_estimate":{median},"standard_error":0.1}}}}"#,
                median - 1.0,
                median + 1.0
            ),
        )
        .unwrap();
    }

    #[test]
    fn estimates_are_found_by_benchmark_id_and_other_files_ignored() {
        let home = tempfile::tempdir().unwrap();
        write(home.path(), "parse/small", 100.0);
        write(home.path(), "eval", 250.0);
        // criterion's previous run and its HTML report are not results of this run.
        std::fs::create_dir_all(home.path().join("eval/base")).unwrap();
        std::fs::create_dir_all(home.path().join("report")).unwrap();
        std::fs::create_dir_all(home.path().join("broken/new")).unwrap();
        std::fs::write(home.path().join("broken/new/estimates.json"), "{}").unwrap();
        let found = estimates(home.path());
        assert_eq!(found.keys().collect::<Vec<_>>(), ["eval", "parse/small"]);
        assert_eq!(
            found["eval"],
            Estimate {
                median_ns: 250.0,
                lower_ns: 249.0,
                upper_ns: 251.0
            }
        );
        assert!(estimates(&home.path().join("missing")).is_empty());
    }
}
