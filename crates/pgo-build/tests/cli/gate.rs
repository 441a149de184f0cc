//! `pgo-build gate`: passes a current build proven not slower, refuses a slower one, a stale
//! training and a binary over `max_size_growth`, and writes `provenance.json` either way.

use crate::support::schema::*;
use crate::support::*;

fn provenance(fixture: &Fixture) -> serde_json::Value {
    let path = fixture.layout().path("provenance.json");
    let value = read_json(&path);
    check_schema(&value, &provenance_schema(), "provenance");
    value
}

#[test]
fn the_gate_passes_the_example_and_its_provenance_hashes_the_staged_binaries() {
    let fixture = Fixture::example("ws");
    // The example's batch workloads on fewer rows: PGO makes its engine about 25% faster
    // (in instructions, about 12% fewer).
    fixture.write(
        "pgo-build.toml",
        "[build]\nbins = [\"coordinator\", \"worker\"]\n\n\
         [[workload]]\nname = \"train\"\nrole = \"train\"\ncommand = '\"$PGO_BUILD_BIN_COORDINATOR\" --queries workloads/train.queries --rows 100000 --seed 1 --workers 2'\n\n\
         [[workload]]\nname = \"holdout\"\nrole = \"holdout\"\ncommand = '\"$PGO_BUILD_BIN_COORDINATOR\" --queries workloads/holdout.queries --rows 200000 --seed 2 --workers 2'\n",
    );
    fixture.run(&["run", "--no-compare"]).success();
    // Instruction counts: a verdict that a busy test machine cannot blur.
    let gate = fixture.run(&["gate", "--metric", "instructions"]);
    gate.success()
        .stderr_contains("gate: PASS coordinator (optimized): `holdout` vs baseline")
        .stderr_contains("gate: PASS worker (optimized)")
        .stderr_contains("provenance.json");
    let record = provenance(&fixture);
    assert_eq!(record["passed"], true, "{record:#}");
    assert_eq!(record["variant"], "optimized");
    assert_eq!(record["metric"], "instructions");
    assert_eq!(record["verdicts"][0]["workload"], "holdout");
    assert_eq!(record["verdicts"][0]["metric"], "instructions");
    assert!(record["verdicts"][0]["ci_high"].as_f64().unwrap() <= 1.02);
    // The hashes are the staged binaries', and the profile is the one optimize used.
    for binary in record["binaries"].as_array().unwrap() {
        let name = binary["name"].as_str().unwrap();
        let staged = std::fs::read(fixture.stage_bin("optimized", name)).unwrap();
        use sha2::Digest;
        let hash: String = sha2::Sha256::digest(&staged)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(binary["sha256"], hash.as_str(), "{name}");
    }
    let profile = record["profile"]["path"].as_str().unwrap();
    assert!(profile.contains("merged-"), "{profile}");
    assert_eq!(record["training"][0]["name"], "train");
    assert_eq!(record["training"][0]["status"], "exit status: 0");
    assert!(record["rustc"].as_str().unwrap().starts_with("rustc "));
}

#[test]
fn the_gate_refuses_a_slower_build_and_a_stale_training() {
    let fixture = Fixture::new("twobins");
    let config = |train: &str| {
        format!(
            "[[workload]]\nname = \"train\"\nrole = \"train\"\ncommand = \"{train}\"\n\n\
             [[workload]]\nname = \"holdout\"\nrole = \"holdout\"\n\
             command = '$PGO_BUILD_BIN_APP work 100; if [ \"$PGO_BUILD_STAGE\" = optimized ]; then sleep 0.25; fi; sleep 0.02'\n"
        )
    };
    fixture.write(
        "pgo-build.toml",
        &config("$PGO_BUILD_BIN_APP work 1000 && $PGO_BUILD_BIN_HELPER"),
    );
    fixture.run(&["run", "--no-compare"]).success();
    fixture
        .run(&["gate", "--rounds", "7"])
        .failure()
        .stderr_contains("gate: FAIL app (optimized): `holdout` vs baseline")
        .stderr_contains("the gate refuses the optimized binaries")
        .stderr_contains(": slower");
    let record = provenance(&fixture);
    assert_eq!(record["passed"], false);
    assert_eq!(record["verdicts"][0]["verdict"], "slower");
    // Its comparison measured fine, but the report lists it as the gate's refusal.
    let report = fixture.report();
    let history = report["compare_history"].as_array().unwrap();
    let last = history.last().unwrap()["result"].as_str().unwrap();
    assert!(
        last.starts_with("failed: the gate refused: `holdout`"),
        "{last}"
    );
    // With report.json gone, provenance still says how training ran, from its own records.
    std::fs::remove_file(fixture.layout().path("report.json")).unwrap();
    fixture.run(&["gate", "--rounds", "7"]).failure();
    let record = provenance(&fixture);
    assert_eq!(
        record["training"][0]["status"], "exit status: 0",
        "{record:#}"
    );
    // The training's definition changed since it ran: stale, and nothing is measured.
    fixture.write(
        "pgo-build.toml",
        &config("$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_HELPER"),
    );
    let gate = fixture.run(&["gate", "--rounds", "7"]);
    gate.failure()
        .stderr_contains(
            "stale: train: changed since it completed: the train workloads. `pgo-build run` \
             redoes what changed",
        )
        .stderr_contains("not measured (stale)");
    insta::assert_snapshot!(
        "refusal_gate_stale_training",
        crate::support::normalized(&fixture, &gate.error_text())
    );
    assert!(
        !gate.stderr().contains("comparing baseline"),
        "{}",
        gate.describe()
    );
    let record = provenance(&fixture);
    assert_eq!(record["verdicts"], serde_json::json!([]));
    assert!(
        record["failures"][0]
            .as_str()
            .unwrap()
            .starts_with("stale: train")
    );
}

#[test]
fn the_gate_refuses_a_binary_grown_past_max_size_growth() {
    // Huge pages pad the BOLTed binaries to 2 MiB alignment: several times the baseline.
    let fixture = bolt_fixture(
        &["$PGO_BUILD_BIN_APP work 1000 && $PGO_BUILD_BIN_HELPER"],
        "huge_pages = true",
    );
    fixture.append_config(
        "\n[[workload]]\nname = \"holdout\"\nrole = \"holdout\"\ncommand = \"$PGO_BUILD_BIN_APP work 200\"\n",
    );
    fixture.run(&["run", "--no-compare"]).success();
    fixture.prepend_config("[pgo]\nmax_size_growth = \"50%\"\n\n");
    fixture
        .run(&["gate", "--rounds", "7"])
        .failure()
        .stderr_contains("gate: FAIL app (bolt)")
        .stderr_contains("more than [pgo] max_size_growth = \"50%\" allows");
    let record = provenance(&fixture);
    assert_eq!(record["variant"], "bolt");
    let app = record["binaries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "app")
        .unwrap()
        .clone();
    assert_eq!(app["passed"], false, "{app}");
}

#[test]
fn the_gate_refuses_a_build_slower_than_the_last_release() {
    let fixture = Fixture::new("twobins");
    // Every variant but the last release's binaries takes 0.25 s longer.
    fixture.write(
        "pgo-build.toml",
        "[[workload]]\nname = \"train\"\nrole = \"train\"\ncommand = \"$PGO_BUILD_BIN_APP work 1000 && $PGO_BUILD_BIN_HELPER\"\n\n\
         [[workload]]\nname = \"holdout\"\nrole = \"holdout\"\n\
         command = '$PGO_BUILD_BIN_APP work 100; case \"$PGO_BUILD_BIN_DIR\" in */previous/*) ;; *) sleep 0.25;; esac; sleep 0.02'\n",
    );
    fixture.run(&["run", "--no-compare"]).success();
    let release = fixture.root().join("release");
    std::fs::create_dir_all(&release).unwrap();
    for name in ["app", "helper"] {
        std::fs::copy(fixture.stage_bin("optimized", name), release.join(name)).unwrap();
    }
    fixture
        .run(&[
            "compare",
            "--rounds",
            "10",
            "--against",
            "release",
            "--fail-if-slower",
        ])
        .failure()
        .stderr_contains("holdout: optimized vs previous (the last release), by wall: +")
        .stderr_contains("optimized is")
        .stderr_contains("slower than previous (the last release) on `holdout`");
    fixture
        .run(&["gate", "--rounds", "7", "--against", "release"])
        .failure()
        .stderr_contains("`holdout` against the previous release: +")
        .stderr_contains(": slower");
    let record = provenance(&fixture);
    let previous = record["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["against"] == "previous")
        .unwrap()
        .clone();
    assert_eq!(previous["verdict"], "slower", "{previous}");
    assert_eq!(previous["passed"], false);
    // A release directory without every binary is refused up front.
    std::fs::remove_file(release.join("helper")).unwrap();
    fixture
        .run(&["gate", "--against", "release"])
        .failure()
        .stderr_contains("the last release has no helper");
}

/// Two busy loops beside the test, stopped when dropped: a machine as busy as a shared CI
/// runner.
struct CpuHogs(Vec<std::process::Child>);

impl CpuHogs {
    fn start(count: usize) -> CpuHogs {
        CpuHogs(
            (0..count)
                .map(|_| {
                    std::process::Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .spawn()
                        .unwrap()
                })
                .collect(),
        )
    }
}

impl Drop for CpuHogs {
    fn drop(&mut self) {
        for hog in &mut self.0 {
            let _ = hog.kill();
            let _ = hog.wait();
        }
    }
}

/// A pause of 100 ms for the optimized build in even rounds and for the baseline in odd ones
/// ($PGO_BUILD_ROUND), one `sleep` in every run (0.1 s or none): wall time goes either way by
/// far more than a few milliseconds of work, and instruction counts see none of it.
const ROUND_PAUSE: &str = "case $PGO_BUILD_STAGE-$((PGO_BUILD_ROUND % 2)) in \
                           optimized-0|baseline-1) pause=1;; *) pause=0;; esac; sleep 0.$pause";

#[test]
fn on_a_busy_machine_instruction_counts_decide_what_wall_time_leaves_open() {
    let fixture = Fixture::new("twobins");
    // A holdout of a few milliseconds and the round pause: wall time cannot decide. Run by
    // `app` only: `helper` is unmeasured, not failed.
    let config = |holdout: &str| {
        format!(
            "[[workload]]\nname = \"train\"\nrole = \"train\"\n\
             command = \"$PGO_BUILD_BIN_APP work 300 && $PGO_BUILD_BIN_HELPER\"\n\n\
             [[workload]]\nname = \"holdout\"\nrole = \"holdout\"\ncommand = {holdout:?}\n"
        )
    };
    // The optimized binaries do a hundredth of the baseline's work (a few milliseconds,
    // which the pauses hide from wall time): fewer instructions, so the gate passes them.
    fixture.write(
        "pgo-build.toml",
        &config(&format!(
            "if [ \"$PGO_BUILD_STAGE\" = baseline ]; then $PGO_BUILD_BIN_APP work 30000; \
             else $PGO_BUILD_BIN_APP work 300; fi; {ROUND_PAUSE}"
        )),
    );
    fixture.run(&["run", "--no-compare"]).success();
    let _hogs = CpuHogs::start(2);
    let gate = fixture.run(&["gate", "--rounds", "3"]);
    gate.success()
        .stderr_contains("instruction counts decide")
        .stderr_contains(
            "gate: PASS app (optimized): `holdout` vs baseline by instructions (left open by wall",
        )
        .stderr_contains(
            "gate: PASS (unmeasured) helper (optimized): no held-out workload runs it",
        );
    let record = provenance(&fixture);
    assert_eq!(record["passed"], true, "{record:#}");
    let verdict = &record["verdicts"][0];
    assert_eq!(verdict["metric"], "instructions", "{verdict}");
    assert!(
        verdict["left_open_by"]
            .as_str()
            .unwrap()
            .starts_with("wall: "),
        "{verdict}"
    );
    let helper = record["binaries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "helper")
        .unwrap();
    assert_eq!(helper["measured_by"], serde_json::json!([]), "{helper}");

    // A variant that really does more work (a hundred times) fails by instructions.
    fixture.write(
        "pgo-build.toml",
        &config(&format!(
            "if [ \"$PGO_BUILD_STAGE\" = optimized ]; then $PGO_BUILD_BIN_APP work 30000; \
             else $PGO_BUILD_BIN_APP work 300; fi; {ROUND_PAUSE}"
        )),
    );
    let gate = fixture.run(&["gate", "--rounds", "3"]);
    gate.failure()
        .stderr_contains("gate: FAIL app (optimized): `holdout` vs baseline by instructions");
    let record = provenance(&fixture);
    assert_eq!(record["passed"], false, "{record:#}");
    assert_eq!(record["verdicts"][0]["verdict"], "slower", "{record:#}");
}

/// A gate that refuses before judging anything still writes its provenance, saying so, and
/// an earlier gate's `passed: true` never stays behind to be read as this one's.
#[test]
fn a_gate_refused_early_writes_a_failed_provenance_over_the_last_one() {
    let fixture =
        train_holdout_fixture("$PGO_BUILD_BIN_APP work 100", "$PGO_BUILD_BIN_APP work 50");
    let provenance = fixture.layout().path("provenance.json");
    std::fs::create_dir_all(provenance.parent().unwrap()).unwrap();
    std::fs::write(&provenance, r#"{"passed": true, "failures": []}"#).unwrap();
    let gate = fixture.run(&["gate"]);
    gate.failure()
        .stderr_contains("run `pgo-build run` first")
        .stderr_contains("provenance (refused)");
    insta::assert_snapshot!(
        "refusal_gate_nothing_staged",
        crate::support::normalized(&fixture, &gate.error_text())
    );
    let written = read_json(&provenance);
    assert_eq!(written["passed"], false, "{written}");
    assert!(
        written["failures"][0]
            .as_str()
            .unwrap()
            .contains("run `pgo-build run` first"),
        "{written}"
    );
    check_schema(&written, &provenance_schema(), "provenance");
}
