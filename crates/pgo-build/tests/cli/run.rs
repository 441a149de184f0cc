//! `pgo-build run`: stage caching, resuming, the lock, and what training it trusts.

use crate::support::*;

/// Step name → result ("ok", "cached", "failed") of the last `run`, from the report.
fn step_results(fixture: &Fixture) -> Vec<(String, String)> {
    fixture.report()["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["result"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn result_of(results: &[(String, String)], stage: &str) -> String {
    results
        .iter()
        .find(|(name, _)| name == stage)
        .map(|(_, r)| r.clone())
        .unwrap_or_default()
}

#[test]
fn a_second_run_with_nothing_changed_reuses_every_stage() {
    let fixture = train_holdout_fixture(
        "$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_HELPER",
        "$PGO_BUILD_BIN_APP work 3000",
    );
    fixture.run(&["run", "--compare-rounds", "2"]).success();
    fixture
        .run(&["run", "--compare-rounds", "2"])
        .success()
        .stderr_contains("pgo-build step build cached");
    let results = step_results(&fixture);
    for stage in ["build", "instrument", "train", "optimize", "compare"] {
        assert_eq!(result_of(&results, stage), "cached", "{stage}: {results:?}");
    }
    assert!(
        fixture.report()["compare"].is_object(),
        "cached stages keep their report sections"
    );
    // Each cached stage keeps the duration and time of the run that did its work.
    for stage in fixture.report()["steps"].as_array().unwrap() {
        if stage["result"] == "cached" {
            assert!(stage["duration_secs"].as_f64().unwrap() > 0.0, "{stage}");
            assert!(stage["ran_at_unix"].as_u64().is_some(), "{stage}");
        }
    }

    // Another number of rounds is another comparison; the builds stay cached.
    fixture.run(&["run", "--compare-rounds", "3"]).success();
    let results = step_results(&fixture);
    assert_eq!(result_of(&results, "compare"), "ok");
    assert_eq!(result_of(&results, "optimize"), "cached");

    // --from re-runs from the given stage on.
    fixture
        .run(&["run", "--compare-rounds", "3", "--from", "optimize"])
        .success();
    let results = step_results(&fixture);
    assert_eq!(result_of(&results, "train"), "cached");
    assert_eq!(result_of(&results, "optimize"), "ok");
    assert_eq!(result_of(&results, "compare"), "ok");

    // A changed source file rebuilds, and everything after it runs again.
    let main = fixture.root().join("app/src/main.rs");
    let source = std::fs::read_to_string(&main).unwrap();
    std::fs::write(&main, source.replace("usage: app", "usage (changed): app")).unwrap();
    fixture.run(&["run", "--compare-rounds", "3"]).success();
    let results = step_results(&fixture);
    for stage in ["build", "instrument", "train", "optimize"] {
        assert_eq!(result_of(&results, stage), "ok", "{stage}: {results:?}");
    }
}

#[test]
fn a_run_interrupted_during_training_resumes_at_training() {
    let fixture = Fixture::new("twobins");
    // The first time, the workload kills pgo-build itself (its parent) in the middle of training.
    fixture.config(&[
        "if [ -e interrupted-once ]; then $PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_HELPER; \
         else touch interrupted-once; kill -TERM $PPID; fi",
    ]);
    let first = fixture.run(&["run", "--no-compare"]);
    assert!(!first.output.status.success(), "{}", first.describe());
    fixture.run(&["run", "--no-compare"]).success();
    let results = step_results(&fixture);
    assert_eq!(result_of(&results, "build"), "cached", "{results:?}");
    assert_eq!(result_of(&results, "instrument"), "cached", "{results:?}");
    assert_eq!(result_of(&results, "train"), "ok", "{results:?}");
    assert_eq!(result_of(&results, "optimize"), "ok", "{results:?}");
}

#[test]
fn a_concurrent_run_is_refused_while_the_first_holds_the_lock() {
    let fixture = Fixture::new("twobins");
    // The training holds the lock until the test has tried the second command (or a minute
    // passed): no assumption about how long either takes to start on a loaded machine.
    fixture.config(&[
        "touch training-started; for i in $(seq 1200); do [ -e release ] && break; sleep 0.05; \
         done; $PGO_BUILD_BIN_APP work 100 && $PGO_BUILD_BIN_HELPER",
    ]);
    fixture.run(&["instrument"]).success();
    let mut first = fixture
        .command(&["train"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = fixture.root().join("training-started");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !started.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let second = fixture.run(&["build"]);
    std::fs::write(fixture.root().join("release"), "").unwrap();
    second
        .failure()
        .stderr_contains("another pgo-build is working in")
        .stderr_contains(&format!("pid {}", first.id()));
    assert!(first.wait().unwrap().success());
    fixture.run(&["build"]).success();
}

#[test]
fn optimize_refuses_the_profiles_of_a_failed_training() {
    let fixture = Fixture::new("twobins");
    fixture.config(&[
        "$PGO_BUILD_BIN_APP work 2000",
        "$PGO_BUILD_BIN_HELPER; exit 3",
    ]);
    fixture.run(&["instrument"]).success();
    fixture.run(&["train"]).failure();
    // t1 ran helper (which wrote a profile) before failing: none of it may be merged.
    fixture
        .run(&["optimize", "--allow-missing-profile", "helper"])
        .failure()
        .stderr_contains("the last training run of `t1`")
        .stderr_contains("failed (exit status: 3)")
        .stderr_contains("pgo-build train t1");
    assert!(!fixture.stage_bin("optimized", "app").exists());
}

#[test]
fn profiles_of_removed_or_holdout_workloads_are_never_merged() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 2000", "$PGO_BUILD_BIN_HELPER"]);
    fixture.run(&["instrument"]).success();
    fixture.run(&["train"]).success();
    // t1, the only workload that runs helper, becomes a holdout: its profiles must not count.
    let config = std::fs::read_to_string(fixture.root().join("pgo-build.toml")).unwrap();
    let holdout = config.replacen(
        "name = \"t1\"\nrole = \"train\"",
        "name = \"t1\"\nrole = \"holdout\"",
        1,
    );
    assert_ne!(holdout, config);
    fixture.write("pgo-build.toml", &holdout);
    fixture
        .run(&["optimize"])
        .failure()
        .stderr_contains("`helper` wrote no profile: no training workload ran it");
    // Removed altogether, the same.
    fixture.config(&["$PGO_BUILD_BIN_APP work 2000"]);
    fixture
        .run(&["optimize"])
        .failure()
        .stderr_contains("`helper` wrote no profile");
    // A standalone train removes what no current train workload owns.
    fixture
        .run(&["train"])
        .success()
        .stderr_contains("removing the raw profiles of `t1`: not a train workload");
    assert!(!fixture.raw_profile_dir("t1").exists());
    // Nor its log: a stale log beside fresh ones misleads.
    assert!(!fixture.layout().path("logs/train-t1.log").exists());
}

#[test]
fn profiles_changed_after_training_are_refused_and_train_is_not_reused() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_HELPER"]);
    fixture.run(&["run", "--no-compare"]).success();
    // Every profile destroyed (truncated to 0 bytes) after training completed.
    for entry in std::fs::read_dir(fixture.raw_profile_dir("t0")).unwrap() {
        let path = entry.unwrap().path();
        if is_profile(&path) {
            std::fs::write(&path, b"").unwrap();
        }
    }
    fixture
        .run(&["optimize"])
        .failure()
        .stderr_contains("the raw profiles of `t0` changed after its training run completed")
        .stderr_contains("pgo-build train t0");
    fixture.run(&["run", "--no-compare"]).success();
    let results = step_results(&fixture);
    assert_eq!(result_of(&results, "train"), "ok", "{results:?}");
    assert_eq!(result_of(&results, "optimize"), "ok", "{results:?}");
}

#[test]
fn profiles_changed_in_place_or_a_garbled_record_are_refused_naming_the_file() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_HELPER"]);
    fixture.run(&["run", "--no-compare"]).success();
    // 8 KiB in the middle of the largest profile zeroed: the same size, other counts.
    let largest = std::fs::read_dir(fixture.raw_profile_dir("t0"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| is_profile(path))
        .max_by_key(|path| std::fs::metadata(path).unwrap().len())
        .unwrap();
    let mut data = std::fs::read(&largest).unwrap();
    let middle = data.len() / 2;
    let end = (middle + 8192).min(data.len());
    data[middle..end].fill(0);
    std::fs::write(&largest, &data).unwrap();
    let name = largest.file_name().unwrap().to_string_lossy().into_owned();
    fixture
        .run(&["optimize"])
        .failure()
        .stderr_contains("changed in place after its training run completed")
        .stderr_contains(&name)
        .stderr_contains("pgo-build train t0");
    // A garbled record is called corrupt, not "not trained".
    std::fs::write(
        fixture.raw_profile_dir("t0").join("training.json"),
        "{ garbled",
    )
    .unwrap();
    fixture
        .run(&["optimize"])
        .failure()
        .stderr_contains("training.json is corrupt")
        .stderr_contains("pgo-build train t0");
    fixture.run(&["run", "--no-compare"]).success();
    assert_eq!(result_of(&step_results(&fixture), "train"), "ok");
}

#[test]
fn re_training_does_not_pile_up_optimized_builds() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_HELPER"]);
    fixture.run(&["run", "--no-compare"]).success();
    // Another training: another profile, other flags, other unit hashes.
    fixture.config(&["$PGO_BUILD_BIN_APP work 3000 && $PGO_BUILD_BIN_HELPER"]);
    fixture
        .run(&["run", "--no-compare", "-v"])
        .success()
        .stderr_contains("units of earlier optimized builds");
    let deps = fixture
        .layout()
        .path("optimized/cargo-target/x86_64-unknown-linux-gnu/release/deps");
    let units = |prefix: &str| {
        std::fs::read_dir(&deps)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(prefix) && !n.ends_with(".d"))
            .count()
    };
    assert_eq!(units("app-"), 1);
    assert_eq!(units("helper-"), 1);
    // What the last build used is kept: optimizing again compiles nothing.
    let again = fixture.run(&["optimize", "-v"]);
    again.success();
    assert!(
        !again.stderr().contains("Compiling app"),
        "{}",
        again.describe()
    );
}

#[test]
fn compiler_warnings_and_the_training_table_are_printed_once_per_run() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_HELPER"]);
    let main = fixture.root().join("app/src/main.rs");
    let source = std::fs::read_to_string(&main).unwrap();
    fixture.write(
        "app/src/main.rs",
        &format!("{source}\nfn never_called_in_the_fixture() {{}}\n"),
    );
    let run = fixture.run(&["run", "--no-compare"]);
    run.success()
        .stderr_contains("the same 1 compiler warning as an earlier build (shown above)");
    let warning = "never_called_in_the_fixture` is never used";
    assert_eq!(
        run.stderr().matches(warning).count(),
        1,
        "{}",
        run.describe()
    );
    assert_eq!(
        run.stdout().matches("Functions run / instrumented").count(),
        1,
        "{}",
        run.describe()
    );
}

#[test]
fn profiles_that_are_not_current_are_refused_with_the_workload_to_retrain() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_HELPER"]);
    fixture.run(&["instrument"]).success();
    fixture.run(&["train"]).success();
    // The workload's command changed since it was trained.
    fixture.config(&["$PGO_BUILD_BIN_APP work 3000 && $PGO_BUILD_BIN_HELPER"]);
    fixture
        .run(&["optimize"])
        .failure()
        .stderr_contains("`t0` changed in the configuration since it was trained")
        .stderr_contains("pgo-build train t0");
    // A workload added since: not trained yet.
    fixture.config(&[
        "$PGO_BUILD_BIN_APP work 3000 && $PGO_BUILD_BIN_HELPER",
        "$PGO_BUILD_BIN_APP work 10",
    ]);
    fixture.run(&["train", "t0"]).success();
    fixture
        .run(&["optimize"])
        .failure()
        .stderr_contains("`t1` has not been trained yet: run `pgo-build train t1`");
    // Instrumented again with nothing changed: the same binaries, the profiles still hold.
    fixture.run(&["train"]).success();
    fixture.run(&["instrument"]).success();
    fixture.run(&["optimize"]).success();
    // Instrumented again after a change: the profiles belong to the earlier binaries.
    let main = fixture.root().join("app/src/main.rs");
    let source = std::fs::read_to_string(&main).unwrap();
    fixture.write(
        "app/src/main.rs",
        &source.replace(
            "steps += 1;",
            "steps += 1;\n        std::hint::black_box(steps);",
        ),
    );
    fixture.run(&["instrument"]).success();
    fixture
        .run(&["optimize"])
        .failure()
        .stderr_contains("`t0` was trained against an earlier instrumented build");
}

#[test]
fn a_refused_command_loses_nothing() {
    let fixture = train_holdout_fixture(
        "$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_HELPER",
        "$PGO_BUILD_BIN_APP work 3000",
    );
    fixture.run(&["run", "--compare-rounds", "2"]).success();
    let compared = fixture.report()["compare"].clone();
    // Refused at their toolchain check, before they change anything.
    for command in ["train", "optimize"] {
        let mut refused = fixture.command(&[command]);
        refused.env("PGO_BUILD_LLVM_PROFDATA", "/usr/bin/llvm-profdata");
        fixture
            .run_with(refused)
            .failure()
            .stderr_contains(&format!("does not match rustc's LLVM {}", llvm_major()));
    }
    // Refused before measuring: the last comparison stays.
    fixture
        .run(&["compare", "--workload", "nope"])
        .failure()
        .stderr_contains("nope");
    assert_eq!(fixture.report()["compare"], compared);
    // Nothing was rebuilt or retrained, so nothing is stale: every stage is reused.
    fixture.run(&["run", "--compare-rounds", "2"]).success();
    let results = step_results(&fixture);
    for stage in ["build", "instrument", "train", "optimize", "compare"] {
        assert_eq!(result_of(&results, stage), "cached", "{stage}: {results:?}");
    }
}

#[test]
fn a_garbled_step_cache_is_called_corrupt_and_nothing_is_reused_from_it() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 1000 && $PGO_BUILD_BIN_HELPER"]);
    fixture.run(&["run", "--no-compare"]).success();
    std::fs::write(fixture.layout().path("state.json"), "{ garbled").unwrap();
    fixture
        .run(&["run", "--no-compare"])
        .success()
        .stderr_contains("state.json is corrupt")
        .stderr_contains("runs again");
    let results = step_results(&fixture);
    assert_eq!(result_of(&results, "build"), "ok", "{results:?}");
    // Records of another schema version (a pgo-build older or newer than this one) are named,
    // with what is redone, never dropped in silence.
    let state = fixture.layout().path("state.json");
    let text = std::fs::read_to_string(&state).unwrap();
    std::fs::write(
        &state,
        text.replace("\"schema_version\": 1", "\"schema_version\": 7"),
    )
    .unwrap();
    fixture
        .run(&["run", "--no-compare"])
        .success()
        .stderr_contains("state.json has step records of schema version 7")
        .stderr_contains("this one reads 1")
        .stderr_contains("every step of `pgo-build run` runs again");
    let results = step_results(&fixture);
    assert_eq!(result_of(&results, "build"), "ok", "{results:?}");
}

/// A raw profile, or the profile raw ones were merged into as training ran.
fn is_profile(path: &std::path::Path) -> bool {
    path.extension()
        .is_some_and(|ext| ext == "profraw" || ext == "profdata")
}

/// `clean` removes everything pgo-build keeps in the target directory, and says when there is
/// nothing to remove; cargo's own build output stays.
#[test]
fn clean_removes_target_pgo_build_and_says_when_there_is_nothing() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 1000 && $PGO_BUILD_BIN_HELPER"]);
    fixture.run(&["build"]).success();
    let kept = fixture.root().join("target/pgo-build");
    assert!(kept.join("baseline/bin/app").is_file());
    fixture
        .run(&["clean"])
        .success()
        .stderr_contains("removed ")
        .stderr_contains("target/pgo-build");
    assert!(!kept.exists());
    fixture
        .run(&["clean"])
        .success()
        .stderr_contains("nothing to remove:");
}

/// Where nothing ships, `run` measures how training covers the held-out work and the answer
/// says why in one line (where something ships, the answer's unit tests show no such line).
#[test]
fn when_nothing_ships_run_measures_the_overlap_and_the_answer_says_why() {
    // The held-out work is the helper alone, which PGO cannot change by 2% of its
    // instructions (process start is most of them): no measurable difference.
    let fixture = train_holdout_fixture(
        "$PGO_BUILD_BIN_APP work 1000 && $PGO_BUILD_BIN_HELPER",
        "$PGO_BUILD_BIN_HELPER",
    );
    fixture.append_config("\n[compare]\nmetric = \"instructions\"\n");
    let run = fixture.run(&["run"]);
    run.success()
        .stderr_contains("nothing ships: measuring how training covers the held-out work")
        .stderr_contains("pgo-build step overlap ok");
    let stdout = run.stdout();
    assert!(!stdout.contains("Ship "), "{stdout}");
    assert!(
        stdout.contains("Why it may not pay here: ")
            || stdout.contains("Why it did not pay here: ")
            || stdout.contains("Training covers the held-out work ("),
        "{stdout}"
    );
    assert!(!stdout.contains("To see why"), "{stdout}");
    let report = fixture.report();
    assert!(report["overlap"]["helper"].is_object());
    // The counted runs say whose code ran: the helper's own Rust, and the loader and libc
    // outside it. Where its own code ran more instructions under PGO, the line names where.
    // (Where callgrind counted: perf stat keeps totals only.)
    if !report["compare"]["counter"]
        .as_str()
        .is_some_and(|c| c.contains("callgrind"))
    {
        return;
    }
    let code = &report["compare"]["workloads"][0]["code"];
    let own = |variant: &str| {
        code[variant]["rust"].as_u64().unwrap() + code[variant]["c_cpp"].as_u64().unwrap()
    };
    assert!(code["baseline"]["outside"].as_u64().unwrap() > 0, "{code}");
    assert!(
        code["baseline"]["functions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["name"] == "helper::main"),
        "{code}"
    );
    // (Unless a hot held-out function training left cold is named first.)
    let cold = report["overlap"]["helper"]["missed_by_training"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| {
            let (test, base) = (
                m["test_share"].as_f64().unwrap(),
                m["base_share"].as_f64().unwrap(),
            );
            test >= 0.05 && base * 10.0 <= test
        });
    let rose = !cold && own("optimized") as f64 > own("baseline") as f64 * 1.01;
    assert_eq!(
        stdout.contains("Why it did not pay here: the program's own code ran "),
        rose,
        "{code}\n{stdout}"
    );
}
