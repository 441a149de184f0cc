//! Cargo workloads: benches and tests as training, criterion benches held out.

use crate::support::*;

/// The example trained from its benchmark alone (`examples/pgo-build.bench.toml`, smaller).
const BENCH_TRAINED_CONFIG: &str = r#"
[build]
bins = ["coordinator", "worker"]

[[workload]]
name = "bench"
role = "train"
cargo = ["bench", "-p", "engine", "--bench", "queries", "--", "workloads/train.queries", "30000", "1", "1"]

[[workload]]
name = "engine-tests"
role = "train"
cargo = ["test", "-p", "engine", "--lib"]

[[workload]]
name = "bench-holdout"
role = "holdout"
cargo = ["bench", "-p", "engine", "--bench", "queries", "--", "workloads/holdout.queries", "30000", "2", "1"]
"#;

#[test]
fn cargo_bench_and_test_workloads_train_the_binaries_and_a_held_out_bench_is_compared() {
    let fixture = Fixture::example("ws");
    fixture.write("pgo-build.toml", BENCH_TRAINED_CONFIG);
    fixture.run(&["instrument"]).success();
    let train = fixture.run(&["train"]);
    train
        .success()
        .stderr_contains("trains on a test suite")
        .stderr_contains("`coordinator` itself ran in no train workload");
    // Every raw file of the bench and test binaries is theirs, none "unknown".
    let report = fixture.report();
    assert_eq!(
        report["rejected_profiles"],
        serde_json::json!([]),
        "{report:#}"
    );
    let stdout = train.stdout();
    let engine_row = stdout
        .lines()
        .find(|line| line.contains("bench ") && line.contains("worker"))
        .unwrap_or_else(|| panic!("no coverage row for the bench\n{}", train.describe()));
    let run: u32 = engine_row
        .split('┆')
        .nth(3)
        .and_then(|cell| cell.trim().split('/').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(run > 10, "the bench ran engine functions: {engine_row}");
    assert!(stdout.contains("engine-tests"), "{stdout}");

    // The engine's functions get the bench's counts: nothing of the engine without data.
    let optimize = fixture.run(&["optimize"]);
    optimize.success();
    assert!(
        !optimize
            .stdout()
            .lines()
            .any(|line| line.starts_with("│ engine")),
        "engine functions without profile data\n{}",
        optimize.describe()
    );
    let diagnostics = &fixture.report()["optimize_diagnostics"];
    assert!(
        diagnostics.to_string().contains("coordinator"),
        "{diagnostics}"
    );

    // A bundle carries the cargo workloads' profiles too.
    let bundle = fixture.root().join("all.pgo");
    fixture
        .run(&["train", "--bundle", bundle.to_str().unwrap()])
        .success()
        .stderr_contains("2 workload runs, 2 profiles");
    fixture
        .run(&["merge", bundle.to_str().unwrap()])
        .success()
        .stderr_contains("`worker` itself ran in no train workload");
    fixture.run(&["optimize"]).success();

    // `profile overlap` runs the held-out bench instrumented and compares the shared
    // functions' counts with training's.
    let overlap = fixture.run(&["profile", "overlap"]);
    overlap.success();
    let worker = overlap
        .stdout()
        .lines()
        .find(|line| line.starts_with("│ worker"))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no overlap row for worker\n{}", overlap.describe()));
    assert!(!worker.contains("no holdout profile"), "{worker}");
    assert!(worker.contains('%'), "{worker}");

    // The held-out bench, built in each stage with that stage's flags.
    fixture.run(&["build"]).success();
    let compare = fixture.run(&["compare", "--workload", "bench-holdout", "--rounds", "2"]);
    compare.success();
    assert!(
        compare.stdout().contains("bench-holdout"),
        "{}",
        compare.describe()
    );
    for stage in ["baseline", "optimized"] {
        let deps = fixture.layout().path(&format!(
            "{stage}/cargo-target/{}/release/deps",
            host_triple()
        ));
        assert!(
            std::fs::read_dir(&deps)
                .unwrap()
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("queries-")),
            "no bench binary built in the {stage} stage"
        );
    }
}

#[test]
fn a_cargo_workload_asking_for_another_profile_is_refused() {
    let fixture = Fixture::example("ws");
    fixture.write(
        "pgo-build.toml",
        "[build]\nbins = [\"worker\"]\n\n[[workload]]\nname = \"b\"\nrole = \"train\"\n\
         cargo = [\"bench\", \"-p\", \"engine\", \"--profile\", \"bench\"]\n",
    );
    fixture.run(&["instrument"]).success();
    fixture
        .run(&["train"])
        .failure()
        .stderr_contains("asks for cargo profile `bench`, but the stages are built with `release`");
    fixture.write(
        "pgo-build.toml",
        "[[workload]]\nname = \"b\"\nrole = \"train\"\ncargo = [\"build\"]\n",
    );
    fixture
        .run(&["train"])
        .failure()
        .stderr_contains("`cargo build` is not supported");
}

/// A real criterion benchmark held out: each stage's runs get their own CRITERION_HOME, and
/// compare reports criterion's estimate per benchmark. (criterion takes about a minute to build
/// per stage here; this is the one test that builds it.)
#[test]
fn a_held_out_criterion_bench_is_compared_per_benchmark() {
    let fixture = Fixture::new("criterion");
    fixture.write(
        "pgo-build.toml",
        r#"
[[workload]]
name = "train"
role = "train"
command = '"$PGO_BUILD_BIN_CALC" 100000'

[[workload]]
name = "sums"
role = "holdout"
cargo = ["bench", "-p", "calc", "--bench", "sums"]
"#,
    );
    for command in ["build", "instrument", "train", "optimize"] {
        fixture.run(&[command]).success();
    }
    let compare = fixture.run(&["compare", "--workload", "sums", "--rounds", "1"]);
    compare.success();
    assert!(
        compare.stdout().contains("Benchmark (criterion)"),
        "{}",
        compare.describe()
    );
    let report = fixture.report();
    let benchmarks = report["compare"]["workloads"][0]["benchmarks"]
        .as_array()
        .unwrap()
        .clone();
    let names: Vec<&str> = benchmarks
        .iter()
        .map(|b| b["benchmark"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["steps_27", "total_2000"], "{report:#}");
    // Each round's estimates are also workload metrics, paired and judged like the others.
    let sums = &report["compare"]["workloads"][0];
    for run in sums["runs"].as_array().unwrap() {
        assert!(
            run["metrics"]["criterion:total_2000"].as_f64().unwrap() > 0.0,
            "{run}"
        );
    }
    let metric = &sums["candidates"]["optimized"]["metrics"]["criterion:steps_27"];
    assert_eq!(metric["unit"], "ns", "{metric}");
    assert_eq!(metric["direction"], "lower");
    assert_eq!(metric["summary"]["pairs"], 1);
    assert!(
        compare
            .stdout()
            .contains("criterion:total_2000 (lower is better)")
    );
    for bench in &benchmarks {
        assert_eq!(bench["candidate"], "optimized");
        let (reference, candidate) = (&bench["reference_estimate"], &bench["candidate_estimate"]);
        assert!(reference["lower_ns"].as_f64() <= reference["median_ns"].as_f64());
        let ratio =
            candidate["median_ns"].as_f64().unwrap() / reference["median_ns"].as_f64().unwrap();
        assert!((bench["ratio"].as_f64().unwrap() - ratio).abs() < 1e-9);
    }
    for stage in ["baseline", "optimized"] {
        assert!(
            fixture
                .layout()
                .path(&format!(
                    "{stage}/cargo-target/criterion/total_2000/new/estimates.json"
                ))
                .is_file(),
            "criterion wrote no results for the {stage} stage in its own home"
        );
    }
    assert!(!fixture.root().join("target/criterion").exists());
}

#[test]
fn a_cargo_workload_naming_a_missing_bench_is_refused_before_anything_runs() {
    let fixture = Fixture::example("ws");
    fixture.write(
        "pgo-build.toml",
        "[build]\nbins = [\"worker\"]\n\n\
         [[workload]]\nname = \"first\"\nrole = \"train\"\ncommand = \"touch ran-first\"\n\n\
         [[workload]]\nname = \"b\"\nrole = \"train\"\n\
         cargo = [\"bench\", \"-p\", \"engine\", \"--bench\", \"no-such-bench\"]\n",
    );
    fixture
        .run(&["run", "--no-compare"])
        .failure()
        .stderr_contains("cargo workload `b`")
        .stderr_contains("no bench target `no-such-bench`");
    assert!(
        !fixture.layout().path("baseline").exists(),
        "built before refusing"
    );
    assert!(!fixture.root().join("ran-first").exists());
}
