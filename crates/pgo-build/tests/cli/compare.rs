//! `pgo-build compare`: verdicts, instruction counts, `--rounds auto`, and the variants it refuses.

use crate::support::*;

/// A fixture with both variants staged: `compare` runs `holdout_command` against them.
fn compared_fixture(holdout_command: &str) -> Fixture {
    let fixture = Fixture::new("twobins");
    fixture.write(
        "pgo-build.toml",
        &format!(
            "[[workload]]\nname = \"train\"\nrole = \"train\"\ncommand = \"$PGO_BUILD_BIN_APP work 1000 && $PGO_BUILD_BIN_HELPER\"\n\n\
             [[workload]]\nname = \"holdout\"\nrole = \"holdout\"\ncommand = {holdout_command:?}\n"
        ),
    );
    fixture.run(&["run", "--no-compare"]).success();
    fixture
}

#[test]
fn compare_reports_a_slower_variant_as_slower() {
    // The optimized variant does extra work on purpose.
    let fixture = compared_fixture(
        "$PGO_BUILD_BIN_APP work 100; if [ \"$PGO_BUILD_STAGE\" = optimized ]; then sleep 0.25; fi; sleep 0.02",
    );
    let run = fixture.run(&[
        "compare",
        "--workload",
        "holdout",
        "--rounds",
        "7",
        "--fail-if-slower",
    ]);
    run.failure()
        .stderr_contains("--fail-if-slower: optimized is");
    let report = fixture.report();
    let holdout = &report["compare"]["workloads"][0];
    assert_eq!(holdout["workload"], "holdout");
    let summary = &holdout["candidates"]["optimized"]["wall"];
    assert_eq!(summary["verdict"], "slower", "{summary}");
    assert_eq!(summary["wins"], 0);
    assert_eq!(summary["pairs"], 7);
    // Every counted run is recorded, each round runs both variants, and the order is drawn
    // afresh each round (seeded): not the same in every round.
    let runs = holdout["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 14);
    let firsts: Vec<&str> = runs
        .chunks(2)
        .map(|round| {
            assert_eq!(round[0]["round"], round[1]["round"], "{runs:?}");
            assert_ne!(round[0]["variant"], round[1]["variant"], "{runs:?}");
            round[0]["variant"].as_str().unwrap()
        })
        .collect();
    assert!(
        firsts.contains(&"baseline") && firsts.contains(&"optimized"),
        "{firsts:?}"
    );
    assert!(run.stdout().contains("slower"), "{}", run.describe());
}

#[test]
fn compare_does_not_call_equivalent_builds_faster() {
    // A true A/A: the held-out work runs neither build, so the two sides differ by noise alone
    // and "no difference" is the truth. The paired p-value is an exact sign-flip test, at
    // least uniform when the signs are symmetric: below 0.002 one correct run in 500. The
    // verdict itself is judged at 0.05 and would fail one correct run in 20 or 40 (so neither
    // it nor `--fail-if-slower`, which `compare_reports_a_slower_variant_as_slower` covers, is
    // asserted); how the verdict follows from p is unit-tested in `measure::stats`. The order
    // comes from the fixed seed, so it is the same in every run: 8 of the 16 rounds start with
    // each side, and a loop that favours the first or second run of a round shows no more
    // here than noise does. What this catches is a loop that favours one variant (a stale
    // binary, one side's environment or directory), far past the noise of a 50 ms sleep:
    // every round agrees, p = 2/2^16.
    let fixture = compared_fixture("sleep 0.05");
    fixture
        .run(&["compare", "--workload", "holdout", "--rounds", "16"])
        .success();
    let wall =
        fixture.report()["compare"]["workloads"][0]["candidates"]["optimized"]["wall"].clone();
    assert_eq!(wall["pairs"], 16, "{wall}");
    let p = wall["p"].as_f64().unwrap();
    assert!(
        p > 0.002,
        "an A/A comparison found a difference (p = {p}): {wall}"
    );
}

#[test]
fn compare_refuses_variants_that_were_not_built() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 10"]);
    fixture.run(&["build"]).success();
    let unbuilt = fixture.run(&["compare", "baseline", "optimized"]);
    unbuilt
        .failure()
        .stderr_contains("the optimized stage has not been built");
    let unknown = fixture.run(&["compare", "baseline", "bolted"]);
    unknown
        .failure()
        .stderr_contains("unknown variant `bolted`");
    insta::assert_snapshot!(
        "refusal_compare_unbuilt_and_unknown_variants",
        crate::support::normalized(
            &fixture,
            &format!("{}\n{}", unbuilt.error_text(), unknown.error_text())
        )
    );
}

#[test]
fn compare_counts_instructions_and_sees_extra_work() {
    // The optimized variant does ten times the work on purpose.
    let fixture = compared_fixture(
        "if [ \"$PGO_BUILD_STAGE\" = optimized ]; then $PGO_BUILD_BIN_APP work 3000; else $PGO_BUILD_BIN_APP work 300; fi",
    );
    let run = fixture.run(&[
        "compare",
        "--workload",
        "holdout",
        "--rounds",
        "6",
        "--metric",
        "instructions",
    ]);
    run.success();
    let compare = fixture.report()["compare"].clone();
    assert_eq!(compare["metric"], "instructions");
    let counter = compare["counter"].as_str().unwrap();
    assert!(
        counter.contains("callgrind") || counter.contains("perf"),
        "{counter}"
    );
    // The why line names the function that ran the planted work, where callgrind counted by
    // function; perf stat counts totals only, and the line then says how to find out.
    let stdout = run.stdout();
    let why = stdout
        .lines()
        .find(|l| l.contains("Why it") || l.contains("To see why"))
        .unwrap_or_else(|| panic!("{stdout}"));
    if counter.contains("callgrind") {
        assert!(
            why.contains("the program's own code ran ")
                && why.contains("most of the rise in `app::collatz_steps`"),
            "{why}"
        );
    }
    insta::assert_snapshot!(
        "compare_by_instructions",
        normalized(&fixture, &stdout.replace(why, " [WHY]"))
    );
    let runs = compare["workloads"][0]["runs"].as_array().unwrap();
    assert!(
        runs.iter()
            .all(|r| r["instructions"].as_u64().unwrap() > 100_000),
        "{runs:?}"
    );
    let summary = &compare["workloads"][0]["candidates"]["optimized"]["instructions"];
    assert_eq!(summary["verdict"], "slower", "{summary}");
    assert!(summary["median_ratio"].as_f64().unwrap() > 2.0, "{summary}");
}

#[test]
fn instruction_counts_run_each_variant_once_and_repeat_it_once() {
    let fixture = compared_fixture(
        "if [ \"$PGO_BUILD_STAGE\" = optimized ]; then $PGO_BUILD_BIN_APP work 3000; else $PGO_BUILD_BIN_APP work 300; fi",
    );
    // `[compare] rounds` is sized for noisy times; counts keep their one repeat.
    fixture.prepend_config("[compare]\nrounds = 9\n\n");
    let run = fixture.run(&["compare", "--metric", "instructions", "-v"]);
    run.success();
    // Counts do not mind sharing the machine: with a core per variant, side by side.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(
        run.stderr().contains("(side by side)"),
        cores >= 2,
        "{}",
        run.describe()
    );
    let compare = fixture.report()["compare"].clone();
    // Holdout only by default: the train workload is not counted.
    let workloads = compare["workloads"].as_array().unwrap();
    assert_eq!(workloads.len(), 1, "{compare}");
    assert_eq!(workloads[0]["workload"], "holdout");
    // Two counted runs per variant (the warm-up is neither counted nor run under the counter).
    let runs = workloads[0]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4, "{runs:?}");
    let summary = &workloads[0]["candidates"]["optimized"]["instructions"];
    assert_eq!(summary["verdict"], "slower", "{summary}");
    assert!(
        summary["resolution_note"]
            .as_str()
            .unwrap()
            .contains("instruction counts repeated within"),
        "{summary}"
    );
    // --role all widens it to the train workloads.
    fixture
        .run(&["compare", "--metric", "instructions", "--role", "all"])
        .success();
    let workloads = fixture.report()["compare"]["workloads"].clone();
    assert_eq!(workloads.as_array().unwrap().len(), 2, "{workloads}");
}

/// Rounds are auto by default, within a time budget: a question the first look leaves open
/// goes on to the next look only when the budget covers it, and the verdict says what stopped it.
#[test]
fn auto_rounds_by_default_stop_where_the_budget_would_run_out() {
    // Optimized sleeps 10 ms and 90 ms in turn, round by round, the baseline 50 ms: it
    // wins half the rounds, so no verdict can be reached and the interval stays wide (random
    // noise could give 9 wins in 10 by chance, and a verdict).
    let fixture = compared_fixture(
        "$PGO_BUILD_BIN_APP work 10; if [ \"$PGO_BUILD_STAGE\" = optimized ]; \
         then sleep 0.0$((PGO_BUILD_ROUND % 2 * 8 + 1)); else sleep 0.05; fi",
    );
    // Instruction counts would decide what wall time leaves open: not within no time.
    fixture.append_config("\n[compare]\ncounting_budget = 0\n");
    let run = fixture.run(&["compare", "--workload", "holdout", "--budget", "1"]);
    run.success()
        .stderr_contains("looks after 10, 20, 40 rounds")
        .stderr_contains("within a budget of 1 s")
        .stderr_contains("ran out before the next look");
    let compare = fixture.report()["compare"].clone();
    assert_eq!(compare["rounds"], 10, "{compare}");
    assert_eq!(compare["workloads"][0]["budget_ran_out"], true, "{compare}");
    let verdict = compare["workloads"][0]["candidates"]["optimized"]["wall"]["verdict"].clone();
    if verdict != "faster" && verdict != "slower" && verdict != "no_difference" {
        assert!(
            run.stdout().contains("stopped by the time budget"),
            "{}",
            run.describe()
        );
        assert!(
            run.stdout()
                .contains("Instruction counts did not decide: holdout left open by wall"),
            "{}",
            run.describe()
        );
    }
}

/// What counting would cost, when it is over the budget, is said with its basis: the counter's
/// usual slowdown until a counted run of the workload was measured, then that run's time.
#[test]
fn the_cost_of_counting_comes_from_a_measured_counted_run_once_there_is_one() {
    let fixture = compared_fixture("$PGO_BUILD_BIN_APP work 200000");
    fixture.append_config("\n[compare]\ncounting_budget = 1\n");
    let open = |fixture: &Fixture| {
        let run = fixture.run(&["compare", "--workload", "holdout", "--rounds", "3"]);
        run.success();
        run.stderr()
    };
    let before = open(&fixture);
    assert!(
        before.contains("holdout left open by wall; counting their instructions")
            && before.contains("usual 50× slowdown: no counted run of it measured here yet"),
        "{before}"
    );
    fixture
        .run(&[
            "compare",
            "--workload",
            "holdout",
            "--metric",
            "instructions",
        ])
        .success();
    let after = open(&fixture);
    assert!(
        after
            .contains("(from the counted runs of an earlier comparison), over the counting budget"),
        "{after}"
    );
}

/// Where wall time leaves a held-out verdict open, the answer concludes by instruction counts,
/// as the gate does, and says that wall time left it open.
#[test]
fn the_answer_concludes_by_instruction_counts_where_wall_time_leaves_it_open() {
    // Three rounds: too few for wall time to say anything; the optimized binaries do a
    // hundredth of the baseline's work.
    let fixture = compared_fixture(
        "if [ \"$PGO_BUILD_STAGE\" = baseline ]; then $PGO_BUILD_BIN_APP work 30000; \
         else $PGO_BUILD_BIN_APP work 300; fi",
    );
    let run = fixture.run(&["compare", "--workload", "holdout", "--rounds", "3"]);
    run.success()
        .stderr_contains("holdout left open by wall: instruction counts decide")
        .stdout_contains("Ship optimized: ")
        .stdout_contains("by instructions (wall left it open)");
    let summary = &fixture.report()["compare"]["workloads"][0]["candidates"]["optimized"];
    assert_eq!(summary["wall"]["verdict"], "too_few_rounds", "{summary}");
    assert_eq!(summary["instructions"]["verdict"], "faster", "{summary}");
    assert!(
        summary["instructions"]["left_open_by"]
            .as_str()
            .unwrap()
            .starts_with("wall: too few rounds"),
        "{summary}"
    );
}

#[test]
fn rounds_auto_stops_at_the_first_look_that_settles_the_question() {
    let fixture = compared_fixture(
        "$PGO_BUILD_BIN_APP work 100; if [ \"$PGO_BUILD_STAGE\" = optimized ]; then sleep 0.25; fi; sleep 0.02",
    );
    fixture
        .run(&["compare", "--workload", "holdout", "--rounds", "auto"])
        .success()
        .stderr_contains("looks after 10, 20, 40 rounds");
    let compare = fixture.report()["compare"].clone();
    assert_eq!(compare["rounds"], 10, "{compare}");
    assert!(compare["rounds_plan"].as_str().unwrap().contains("auto"));
    let summary = &compare["workloads"][0]["candidates"]["optimized"]["wall"];
    assert_eq!(summary["verdict"], "slower", "{summary}");
    // Each of the three looks is made at a third of the 5% level.
    let confidence = summary["confidence"].as_f64().unwrap();
    assert!((confidence - (1.0 - 0.05 / 3.0)).abs() < 1e-9, "{summary}");
    fixture
        .run(&["compare", "--rounds", "0"])
        .failure()
        .stderr_contains("expected a number of rounds (1 to 200) or `auto`");
}

#[test]
fn compare_refuses_the_old_binaries_of_an_optimize_that_failed() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_HELPER"]);
    fixture.run(&["run", "--no-compare"]).success();
    // Training no longer runs helper: optimize refuses before building, so the optimized
    // variant it would have replaced stays as it was, complete and comparable.
    fixture.config(&["$PGO_BUILD_BIN_APP work 2000"]);
    fixture.run(&["train"]).success();
    fixture
        .run(&["optimize"])
        .failure()
        .stderr_contains("refusing to build with PGO");
    fixture
        .run(&["compare", "--rounds", "1", "baseline", "optimized"])
        .success();
    assert!(
        fixture.report()["binaries"]["app"]
            .get("optimized")
            .is_some()
    );
    // An optimize that fails while building: its previous binaries stay on disk, unused.
    fixture.config(&["$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_HELPER"]);
    fixture.run(&["train"]).success();
    fixture.edit("app/src/main.rs", |source| {
        format!("{source}\nfn broken() -> u32 {{ \"not a number\" }}\n")
    });
    fixture.run(&["optimize"]).failure();
    assert!(fixture.stage_bin("optimized", "app").exists());
    fixture
        .run(&["compare", "--rounds", "1", "baseline", "optimized"])
        .failure()
        .stderr_contains("the optimized stage did not complete")
        .stderr_contains("`pgo-build optimize`")
        .stderr_contains("failed or was interrupted");
    let app = &fixture.report()["binaries"]["app"];
    assert!(
        app.get("optimized").is_none(),
        "the report must not keep the sizes of the old optimized binaries: {app}"
    );
}

#[test]
fn compare_refuses_variants_built_from_different_sources() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_HELPER"]);
    fixture.run(&["run", "--no-compare"]).success();
    // The engine changes; only the baseline is rebuilt.
    let main = fixture.root().join("app/src/main.rs");
    let source = std::fs::read_to_string(&main).unwrap();
    fixture.write(
        "app/src/main.rs",
        &source.replace(
            "steps += 1;",
            "steps += 1;\n        std::hint::black_box(steps);",
        ),
    );
    fixture.run(&["build"]).success();
    fixture
        .run(&["compare", "--rounds", "1", "baseline", "optimized"])
        .failure()
        .stderr_contains("`baseline` and `optimized` were built from different sources");
}

#[test]
fn compare_refuses_a_variant_whose_binary_was_replaced_after_staging() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_HELPER"]);
    fixture.run(&["run", "--no-compare"]).success();
    // The baseline's app copied over the optimized one: an A/A comparison in disguise.
    std::fs::copy(
        fixture.stage_bin("baseline", "app"),
        fixture.stage_bin("optimized", "app"),
    )
    .unwrap();
    fixture
        .run(&["compare", "--rounds", "1", "baseline", "optimized"])
        .failure()
        .stderr_contains("is not the binary the optimized stage staged")
        .stderr_contains("pgo-build run");
}

#[test]
fn compare_refuses_bolt_binaries_of_an_earlier_optimized_build() {
    let fixture = bolt_fixture(
        &["$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_HELPER"],
        "",
    );
    fixture.run(&["run", "--no-compare"]).success();
    fixture.run(&["optimize"]).success();
    fixture
        .run(&["compare", "--rounds", "1", "optimized", "bolt"])
        .failure()
        .stderr_contains("the bolt binaries were made from an earlier optimized build")
        .stderr_contains("run `pgo-build bolt` again");
    // Without variants named, compare takes the newest current one and names what it skipped.
    let compared = fixture.run(&["compare", "--rounds", "1"]);
    compared
        .success()
        .stderr_contains("not comparing the bolt variant, which is not current")
        .stderr_contains("made from an earlier optimized build");
    assert!(
        compared.stdout().contains("optimized"),
        "{}",
        compared.describe()
    );
    let result = &fixture.report()["compare"];
    assert_eq!(result["reference"], "baseline", "{result}");
    assert_eq!(
        result["candidates"],
        serde_json::json!(["optimized"]),
        "{result}"
    );
}

#[test]
fn a_workloads_timeout_scales_under_callgrind() {
    let fixture = Fixture::new("twobins");
    // A third of a second natively, over four seconds under callgrind: the timeout
    // would stop every counted run unless it scaled with the counter.
    fixture.write(
        "pgo-build.toml",
        "[[workload]]\nname = \"train\"\nrole = \"train\"\ncommand = \"$PGO_BUILD_BIN_APP work 1000 && $PGO_BUILD_BIN_HELPER\"\n\n\
         [[workload]]\nname = \"holdout\"\nrole = \"holdout\"\ncommand = \"$PGO_BUILD_BIN_APP work 1500000\"\ntimeout = 2\n",
    );
    fixture.run(&["run", "--no-compare"]).success();
    let run = fixture.run(&["compare", "--metric", "instructions"]);
    // Counted either way, every run within its timeout.
    run.success();
    let summary = &fixture.report()["compare"]["workloads"][0]["candidates"]["optimized"];
    assert!(
        summary["instructions"]["median_ratio"].as_f64().unwrap() > 0.0,
        "{summary}"
    );
    if run
        .stderr()
        .contains("counting instructions with perf stat")
    {
        // A machine with hardware counters: perf does not slow the run down, so the timeout
        // stays as configured.
        run.stderr_lacks("under perf")
            .stderr_lacks("× the workload's");
    } else {
        run.stderr_contains("holdout: timeout 200s under valgrind")
            .stderr_contains("(100× the workload's 2s)");
    }
}

#[test]
fn a_failed_compare_does_not_replace_the_last_good_one_in_the_report() {
    let fixture = compared_fixture("$PGO_BUILD_BIN_APP work 100");
    fixture
        .run(&["compare", "--workload", "holdout", "--rounds", "7"])
        .success();
    let good = fixture.report()["compare"].clone();
    assert_eq!(good["workloads"][0]["runs"].as_array().unwrap().len(), 14);
    // The holdout now fails against the optimized binaries: nothing is measured.
    fixture.write(
        "pgo-build.toml",
        &std::fs::read_to_string(fixture.root().join("pgo-build.toml"))
            .unwrap()
            .replace(
                "$PGO_BUILD_BIN_APP work 100",
                "$PGO_BUILD_BIN_APP work 100; [ \\\"$PGO_BUILD_STAGE\\\" != optimized ]",
            ),
    );
    fixture
        .run(&["compare", "--workload", "holdout", "--rounds", "7"])
        .failure()
        .stderr_contains("its time means nothing");
    let report = fixture.report();
    assert_eq!(
        report["compare"], good,
        "the failed compare replaced the good one"
    );
    // The stage table keeps the good run's record and shows the failed retry beside it, out
    // of the pipeline's total; the history has both, with how they ran.
    let results: Vec<&str> = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"] == "compare")
        .map(|s| s["result"].as_str().unwrap())
        .collect();
    assert_eq!(results, ["ok", "failed"]);
    // Both ran as `pgo-build compare`, outside any pipeline: marked so, and out of its total.
    assert!(
        report["steps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["name"] == "compare")
            .all(|s| s["standalone"] == true),
        "{}",
        report["steps"]
    );
    let history = report["compare_history"].as_array().unwrap();
    assert_eq!(history.len(), 2, "{history:?}");
    assert_eq!(history[0]["result"], "ok");
    let command = history[0]["command"].as_str().unwrap();
    assert!(
        command.starts_with("pgo-build ")
            && command.ends_with(" compare --workload holdout --rounds 7"),
        "{command}"
    );
    assert!(
        history[1]["result"]
            .as_str()
            .unwrap()
            .starts_with("failed: "),
        "{history:?}"
    );
    let shown = fixture.run(&["report"]);
    shown.success();
    for text in ["not in the total", "Decided by", "failed: "] {
        assert!(shown.stdout().contains(text), "{}", shown.describe());
    }

    // Another set of variants does not push the first one's result out of the report.
    fixture.write(
        "pgo-build.toml",
        &std::fs::read_to_string(fixture.root().join("pgo-build.toml"))
            .unwrap()
            .replace("; [ \\\"$PGO_BUILD_STAGE\\\" != optimized ]", ""),
    );
    fixture
        .run(&[
            "compare",
            "optimized",
            "baseline",
            "--workload",
            "holdout",
            "--rounds",
            "3",
        ])
        .success();
    let report = fixture.report();
    assert_eq!(report["compare"]["reference"], "optimized");
    assert_eq!(report["earlier_compares"][0], good);
    let html = fixture.root().join("report.html");
    fixture
        .run(&["report", "--html", html.to_str().unwrap()])
        .success();
    let html = std::fs::read_to_string(html).unwrap();
    assert!(html.contains("<h2>Comparisons</h2>"), "{html}");
    assert_eq!(html.matches("<h2>A/B comparison</h2>").count(), 2);
}
