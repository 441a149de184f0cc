//! `pgo-build explore`: variants built once, measured, recommended, applied.

use crate::support::*;

/// The explore record of one variant in the report.
fn explored(fixture: &Fixture, name: &str) -> serde_json::Value {
    fixture.report()["explore"]["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no variant {name} in {}", fixture.report()["explore"]))
        .clone()
}

#[test]
fn explore_builds_each_variant_once_and_measures_only_what_is_missing() {
    let fixture = train_holdout_fixture(
        "$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_HELPER",
        "$PGO_BUILD_BIN_APP work 3000",
    );
    fixture.append_config(
        "\n[[explore.variant]]\nname = \"opt1\"\nprofile_overrides = { opt-level = 1 }\n",
    );
    fixture
        .run(&["explore", "--variants", "pgo+lot"])
        .failure()
        .stderr_contains("unknown variant `pgo+lot`; variants: baseline, pgo, pgo+lto");
    let first = fixture.run(&["-v", "explore", "--variants", "pgo+cgu1", "--rounds", "2"]);
    first
        .success()
        .stderr_contains("exploring 3 variants: baseline, pgo, pgo+cgu1")
        .stderr_contains("--config profile.release.codegen-units=1");
    assert!(first.stdout().contains("pgo+cgu1"), "{}", first.describe());
    for name in ["baseline", "pgo", "pgo+cgu1"] {
        let record = explored(&fixture, name);
        assert_eq!(record["status"], "measured", "{record}");
        assert!(record["build_secs"].as_f64().unwrap() > 0.0, "{record}");
        let app = fixture.layout().path("explore").join(name).join("bin/app");
        assert_eq!(run_binary(&app, &["work", "3000"]), "work 3000: 216\n");
    }
    // The pipeline's own settings are built where `run` builds them.
    assert!(fixture.stage_bin("optimized", "app").is_file());
    let cgu1 = explored(&fixture, "pgo+cgu1");
    assert_eq!(cgu1["profile_overrides"]["codegen-units"], "1");
    assert_eq!(
        cgu1["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["step"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["instrument", "train", "optimize"]
    );
    // Raced from 2 rounds (looks after 2, 4 and 8), and what wall time left undecided was
    // decided by instruction counts, which the record says: explore concluded.
    let vs_pgo = &cgu1["vs_pgo"];
    assert!(
        ["faster", "slower", "no_difference"].contains(&vs_pgo["verdict"].as_str().unwrap()),
        "{cgu1}"
    );
    assert!(
        [2, 4, 8].contains(&cgu1["rounds"].as_u64().unwrap()),
        "{cgu1}"
    );
    if let Some(by) = vs_pgo["decided_by"].as_str() {
        assert!(
            by.starts_with("instructions (wall time undecided after "),
            "{by}"
        );
        assert!(
            first.stdout().contains("(instructions)"),
            "{}",
            first.describe()
        );
    }

    // Another variant: only it is built and measured; the others are reused.
    let second = fixture.run(&["explore", "--variants", "pgo+cgu1,opt1", "--rounds", "2"]);
    second
        .success()
        .stderr_contains("2 variants measured before against the same builds and workloads")
        .stderr_contains("comparing baseline vs pgo vs opt1 over 1 workload");
    assert_eq!(
        second
            .stderr()
            .matches("pgo-build step instrument cached")
            .count(),
        2,
        "pgo and pgo+cgu1 reuse their builds: {}",
        second.describe()
    );
    assert_eq!(explored(&fixture, "opt1")["status"], "measured");
    assert_eq!(explored(&fixture, "opt1")["pgo"], true);
    // Without any change, nothing is built or measured.
    let third = fixture.run(&["explore", "--variants", "pgo+cgu1,opt1", "--rounds", "2"]);
    third.success();
    assert!(!third.stderr().contains(" start\n"), "{}", third.describe());
    assert!(
        !third.stderr().contains("comparing"),
        "{}",
        third.describe()
    );
    // Judged by a metric the holdout reports that is pure noise, eight rounds show pgo
    // neither faster than the baseline nor the same (and instruction counts say nothing of
    // a reported metric): that is no reason to drop PGO. Nothing is recommended, nothing
    // applied, and what would decide is said.
    write_train_holdout(
        &fixture,
        "$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_HELPER",
        "$PGO_BUILD_BIN_APP work 3000; echo \"score: $RANDOM\"",
    );
    fixture.append_config(
        "\n[[workload.metric]]\nname = \"score\"\ndirection = \"higher\"\npattern = 'score: ([0-9]+)'\n\n\
         [[explore.variant]]\nname = \"opt1\"\nprofile_overrides = { opt-level = 1 }\n",
    );
    let before = std::fs::read_to_string(fixture.root().join("pgo-build.toml")).unwrap();
    fixture
        .run(&[
            "explore",
            "--variants",
            "pgo+cgu1,opt1",
            "--rounds",
            "2",
            "--metric",
            "score",
            "--apply",
        ])
        .failure()
        .stderr_contains("no variant is recommended yet")
        .stderr_contains("--apply: nothing was applied, because the measurements cannot decide yet")
        .stderr_contains("an unclear result is no reason to drop PGO");
    let explore = &fixture.report()["explore"];
    assert!(explore["recommendation"].is_null(), "{explore}");
    assert!(
        explore["undecided"]
            .as_str()
            .unwrap()
            .contains("More rounds (`--rounds`)"),
        "{explore}"
    );
    assert_eq!(
        std::fs::read_to_string(fixture.root().join("pgo-build.toml")).unwrap(),
        before
    );
    let html = fixture.root().join("report.html");
    fixture
        .run(&["report", "--html", html.to_str().unwrap()])
        .success();
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<h2>Explore</h2>"), "{page}");
    assert!(page.contains("<title>opt1: "), "a dot per variant: {page}");
    assert!(
        fixture
            .run(&["report", "--markdown"])
            .success()
            .stdout()
            .contains("| pgo+cgu1 | ")
    );

    // A budget that is used up: nothing more is built, nothing recommended or applied.
    let config = std::fs::read_to_string(fixture.root().join("pgo-build.toml")).unwrap();
    fixture
        .run(&[
            "explore",
            "--variants",
            "pgo+lto",
            "--budget",
            "0s",
            "--apply",
        ])
        .failure()
        .stderr_contains("the budget (0 s) ran out after")
        .stderr_contains("--apply: nothing was applied, because not every variant was built");
    let explore = fixture.report()["explore"].clone();
    assert!(explore["recommendation"].is_null(), "{explore}");
    assert_eq!(explored(&fixture, "pgo+lto")["status"], "not built");
    assert_eq!(
        std::fs::read_to_string(fixture.root().join("pgo-build.toml")).unwrap(),
        config
    );
}

#[test]
fn explore_refuses_a_variant_whose_holdout_run_fails() {
    // The holdout fails when the binary was built with `--cfg fixture_flag`.
    let fixture = train_holdout_fixture(
        "$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_HELPER",
        "$PGO_BUILD_BIN_APP work 2000 && test \"$($PGO_BUILD_BIN_APP flag)\" = flag=off",
    );
    fixture.append_config(
        "\n[[explore.variant]]\nname = \"flagged\"\nrustflags = [\"--cfg\", \"fixture_flag\"]\n",
    );
    fixture
        .run(&["explore", "--variants", "flagged", "--rounds", "2"])
        .success()
        .stderr_contains("variant `flagged` is refused: holdout workload `holdout` exit status: 1")
        .stderr_contains("neither measured nor recommended");
    let flagged = explored(&fixture, "flagged");
    assert_eq!(flagged["status"], "failed", "{flagged}");
    assert!(flagged["vs_baseline"].is_null());
    assert_ne!(
        fixture.report()["explore"]["recommendation"]["variant"],
        "flagged"
    );
    assert_eq!(explored(&fixture, "pgo")["status"], "measured");
    // --strict: a refused variant fails the exploration.
    fixture
        .run(&[
            "--strict",
            "explore",
            "--variants",
            "flagged",
            "--rounds",
            "2",
        ])
        .failure()
        .stderr_contains("(--strict turns this warning into an error)");
}

#[test]
fn explore_applies_the_winner_and_run_builds_it_from_then_on() {
    // An unoptimized release profile, so that opt-level 3 clearly beats PGO at opt-level 0.
    let fixture = train_holdout_fixture(
        "$PGO_BUILD_BIN_APP work 20000 && $PGO_BUILD_BIN_HELPER",
        "$PGO_BUILD_BIN_APP work 150000",
    );
    let manifest = std::fs::read_to_string(fixture.root().join("Cargo.toml")).unwrap();
    fixture.write(
        "Cargo.toml",
        &format!("{manifest}\n[profile.release]\nopt-level = 0\n"),
    );
    fixture.prepend_config("# kept by --apply\n").append_config(
        "\n[[explore.variant]]\nname = \"opt3\"\nprofile_overrides = { opt-level = 3 }\n",
    );
    fixture
        // 12 rounds, not the minimum 7: one pair lost to a busy machine must not turn a clear
        // win into "unclear" (the sign test then still rejects with 10 of 12).
        .run(&["explore", "--variants", "opt3", "--rounds", "12", "--apply"])
        .success()
        .stderr_contains("recommended: opt3 - ")
        .stderr_contains("applied `opt3` to");
    let recommendation = fixture.report()["explore"]["recommendation"].clone();
    assert_eq!(recommendation["better_than_pgo"], true, "{recommendation}");
    let config = std::fs::read_to_string(fixture.root().join("pgo-build.toml")).unwrap();
    assert!(config.starts_with("# kept by --apply\n"), "{config}");
    assert!(
        config.contains("[build]\nprofile_overrides = { opt-level = 3 }\n"),
        "{config}"
    );
    // The instrumented build explore made for `pgo` has other settings than the applied ones.
    fixture
        .run(&["optimize"])
        .failure()
        .stderr_contains("the build settings changed since the instrumented build")
        .stderr_contains("pgo-build --config: profile.release.opt-level=3");
    fixture
        .run(&["-v", "run", "--no-compare"])
        .success()
        .stderr_contains("--config profile.release.opt-level=3");
    assert_eq!(
        run_binary(&fixture.stage_bin("optimized", "app"), &["work", "3000"]),
        "work 3000: 216\n"
    );
}

#[test]
fn explore_measures_a_variant_over_the_size_limit_but_never_recommends_it() {
    let fixture = train_holdout_fixture(
        "$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_HELPER",
        "$PGO_BUILD_BIN_APP work 3000",
    );
    // BOLT's huge pages pad the BOLTed binaries far beyond 50%.
    fixture.prepend_config("[pgo]\nmax_size_growth = \"50%\"\n\n[bolt]\nhuge_pages = true\n\n");
    fixture
        .run(&["explore", "--variants", "pgo+bolt", "--rounds", "2"])
        .success()
        .stderr_contains("pgo+bolt is over [pgo] max_size_growth");
    let bolt = explored(&fixture, "pgo+bolt");
    assert_eq!(bolt["status"], "measured", "{bolt}");
    assert_eq!(bolt["over_size_limit"], true, "{bolt}");
    assert!(bolt["size_change"].as_f64().unwrap() > 0.5, "{bolt}");
    assert_eq!(explored(&fixture, "pgo")["over_size_limit"], false);
    assert_ne!(
        fixture.report()["explore"]["recommendation"]["variant"],
        "pgo+bolt"
    );
}

#[test]
fn explore_refuses_what_it_cannot_measure_or_train_before_building() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 10"]);
    fixture
        .run(&["explore"])
        .failure()
        .stderr_contains("explore measures speed on holdout workloads, and")
        .stderr_contains("has none: add a [[workload]] with role = \"holdout\"");
    write_train_holdout(
        &fixture,
        "$PGO_BUILD_BIN_APP work 10",
        "$PGO_BUILD_BIN_APP work 20",
    );
    fixture
        .run(&["explore", "--budget", "2 weeks"])
        .failure()
        .stderr_contains("--budget: invalid duration");
    fixture
        .write("pgo/profile.profdata", "")
        .prepend_config("[pgo]\nprofile = \"pgo/profile.profdata\"\n\n");
    fixture
        .run(&["explore"])
        .failure()
        .stderr_contains("sets [pgo] profile");
    assert!(!fixture.layout().path("baseline").exists());
}
