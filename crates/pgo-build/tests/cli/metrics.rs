//! Workload metrics (`[[workload.metric]]`): paired per round and judged in their direction,
//! tail regressions flagged, and a metric deciding `compare`.

use crate::support::schema::*;
use crate::support::*;

/// The holdout's figures depend on the stage, so the verdicts are known: the optimized build
/// serves more requests per second and a lower median latency, but five requests of each
/// run take far longer (a worse p99).
const HOLDOUT: &str = r#"$PGO_BUILD_BIN_APP work 10
if [ "$PGO_BUILD_STAGE" = optimized ]; then rps=1200; base=8; slow=90; else rps=1000; base=10; slow=40; fi
echo "rps: $((rps + RANDOM % 10))"
for i in $(seq 1 100); do echo "{\"name\":\"latency\",\"value\":$((base + RANDOM % 2))}"; done >> "$PGO_BUILD_METRICS"
for i in 1 2 3 4 5; do echo "{\"name\":\"latency\",\"value\":$((slow + RANDOM % 3))}"; done >> "$PGO_BUILD_METRICS""#;

const METRICS: &str = r#"
[[workload.metric]]
name = "rps"
direction = "higher"
unit = "req/s"
pattern = '^rps: ([0-9]+)'

[[workload.metric]]
name = "latency"
direction = "lower"
unit = "ms"
percentiles = [50, 99]
"#;

fn metrics_fixture(compare_section: &str) -> Fixture {
    let fixture = Fixture::new("twobins");
    fixture.write(
        "pgo-build.toml",
        &format!(
            "{compare_section}\n[[workload]]\nname = \"train\"\nrole = \"train\"\ncommand = \"$PGO_BUILD_BIN_APP work 1000 && $PGO_BUILD_BIN_HELPER\"\n\n\
             [[workload]]\nname = \"api\"\nrole = \"holdout\"\ncommand = '''{HOLDOUT}'''\n{METRICS}"
        ),
    );
    fixture
}

#[test]
fn workload_metrics_are_paired_and_judged_in_their_direction_and_a_worse_tail_is_flagged() {
    let fixture = metrics_fixture("");
    fixture.run(&["run", "--no-compare"]).success();
    // Ten rounds: secondary figures share what the deciding one leaves of the level.
    let mut compare = fixture.command(&["compare", "--workload", "api", "--rounds", "10"]);
    compare.env_remove("COLUMNS");
    let run = fixture.run_with(compare);
    run.success()
        .stderr_contains("tail regression: latency.p99 is")
        .stderr_contains("although the distribution's median is not");
    let stdout = run.stdout();
    // Piped: both tables and their legends fit 120 columns.
    assert!(widest_line(&stdout) <= 120, "{stdout}");
    // (Cells wrap to fit the width: look for words, not whole cells.)
    assert!(stdout.contains("rps (higher is"), "{stdout}");
    assert!(stdout.contains("worse (tail"), "{stdout}");
    let report = fixture.report();
    let api = &report["compare"]["workloads"][0];
    let metrics = &api["candidates"]["optimized"]["metrics"];
    // Higher throughput is better: its cost ratio is below 1.
    assert_eq!(metrics["rps"]["summary"]["verdict"], "faster", "{metrics}");
    assert!(metrics["rps"]["summary"]["median_ratio"].as_f64().unwrap() < 0.9);
    assert!(metrics["rps"]["candidate_median"].as_f64().unwrap() >= 1200.0);
    assert_eq!(metrics["latency.p50"]["summary"]["verdict"], "faster");
    assert_eq!(metrics["latency.p99"]["summary"]["verdict"], "slower");
    assert_eq!(metrics["latency.p99"]["tail_regression"], true);
    assert_eq!(metrics["latency.p50"]["tail_regression"], false);
    // Every run's values are kept.
    let runs = api["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 20);
    assert!(
        runs.iter()
            .all(|r| r["metrics"]["latency.p99"].as_f64().unwrap() >= 40.0)
    );
    check_schema(&report, &report_schema(), "report");
    // A terminal of 80 columns (COLUMNS): the tables wrap their cells to fit it.
    let mut narrow = fixture.command(&["compare", "--workload", "api", "--rounds", "7"]);
    narrow.env("COLUMNS", "80");
    let narrow = fixture.run_with(narrow);
    narrow.success();
    assert!(widest_line(&narrow.stdout()) <= 80, "{}", narrow.stdout());
    assert!(narrow.stdout().contains("latency."), "{}", narrow.stdout());
    let markdown = fixture.run(&["report", "--markdown"]);
    assert!(
        markdown
            .success()
            .stdout()
            .contains("latency.p99 (lower is better)"),
        "{}",
        markdown.describe()
    );
}

#[test]
fn a_metric_decides_compare_by_flag_or_configuration() {
    let fixture = metrics_fixture("");
    fixture.run(&["run", "--no-compare"]).success();
    // By p99, the optimized build is worse: --fail-if-slower says so in the metric's terms.
    fixture
        .run(&[
            "compare",
            "--workload",
            "api",
            "--rounds",
            "7",
            "--metric",
            "latency.p99",
            "--fail-if-slower",
        ])
        .failure()
        .stderr_contains("--fail-if-slower: optimized is")
        .stderr_contains("worse on `api`");
    assert_eq!(fixture.report()["compare"]["decided_by"], "latency.p99");
    // By throughput it is better, and the wall verdict's columns stay beside it.
    fixture.edit("pgo-build.toml", |text| {
        format!("[compare]\nmetric = \"rps\"\n{text}")
    });
    let run = fixture.run(&[
        "compare",
        "--workload",
        "api",
        "--rounds",
        "7",
        "--fail-if-slower",
    ]);
    run.success();
    assert!(
        run.stdout().contains("rest on the workload metric `rps`"),
        "{}",
        run.describe()
    );
    assert!(
        run.stdout().contains("geometric mean of median rps ratios"),
        "{}",
        run.describe()
    );
    let report = fixture.report();
    assert_eq!(report["compare"]["decided_by"], "rps");
    check_schema(&report, &report_schema(), "report");
    // A name no workload reports is refused, from the flag and from the file.
    fixture
        .run(&["compare", "--metric", "p99_ms"])
        .failure()
        .stderr_contains("--metric p99_ms: no workload reports a metric of that name (reported: rps, latency.p50, latency.p99)");
    fixture.edit("pgo-build.toml", |text| {
        text.replace("metric = \"rps\"", "metric = \"p99_ms\"")
    });
    fixture
        .run(&["doctor"])
        .failure()
        .stderr_contains("line 2: [compare] metric = \"p99_ms\", but no workload reports it");
}

fn widest_line(text: &str) -> usize {
    text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}
