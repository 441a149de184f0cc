//! Links and rustc under the memory budget, linkers and rustc wrappers, sccache.

use std::process::Command;

use crate::support::*;

#[test]
fn with_one_link_job_links_never_overlap() {
    let fixture = Fixture::new("twobins");
    fixture.write("pgo-build.toml", "[build]\nlink_jobs = 1\n");
    fixture.run(&["build", "-j", "2"]).success();
    let mut spans: Vec<(f64, f64)> = links(&fixture, "baseline")
        .iter()
        .map(|l| {
            (
                l["start_unix"].as_f64().unwrap(),
                l["end_unix"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        spans.len(),
        2,
        "both binaries were linked through the wrapper"
    );
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert!(spans[0].1 <= spans[1].0, "links overlap: {spans:?}");
    let summary = &fixture.report()["links"]["baseline"];
    assert_eq!(summary["slots"], 1, "{summary}");
    assert_eq!(summary["links"], 2);
    assert!(summary["max_rss_bytes"].as_u64().unwrap() > 0);
    assert!(
        fixture.report()["steps"][0]["peak_memory_bytes"]
            .as_u64()
            .unwrap()
            > 0
    );
}

#[test]
fn a_user_configured_linker_still_runs_with_rustcs_arguments() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["true"]);
    fixture.write_executable(
        "tools/fixture-cc",
        "#!/bin/sh\necho \"$@\" >> \"$(dirname \"$0\")/../linker-calls.txt\"\nexec cc \"$@\"\n",
    );
    fixture.write(
        ".cargo/config.toml",
        &format!(
            "[target.{}]\nlinker = \"tools/fixture-cc\"\n",
            host_triple()
        ),
    );
    // What rustc passes to that linker without pgo-build.
    let plain = Command::new("cargo")
        .args(["build", "--release", "--bin", "app", "--target-dir"])
        .arg(fixture.root().join("plain-target"))
        .current_dir(fixture.root())
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .unwrap();
    assert!(plain.status.success(), "{plain:?}");
    let calls = fixture.root().join("linker-calls.txt");
    let plain_args = std::fs::read_to_string(&calls).unwrap();
    std::fs::remove_file(&calls).unwrap();

    fixture.run(&["build"]).success();
    let wrapped_args = std::fs::read_to_string(&calls).unwrap();
    assert_eq!(
        wrapped_args.lines().count(),
        2,
        "one call per binary: {wrapped_args}"
    );
    assert_eq!(
        plain_args.contains("-fuse-ld=lld"),
        wrapped_args.contains("-fuse-ld=lld"),
        "rustc passes the same kind of arguments through the wrapper\nplain: {plain_args}\nwrapped: {wrapped_args}"
    );
    assert_eq!(links(&fixture, "baseline").len(), 2);
    assert_eq!(
        run_binary(&fixture.stage_bin("baseline", "helper"), &[]),
        "helper 23331668\n"
    );
}

#[test]
fn a_failing_link_fails_the_build_with_the_linkers_message() {
    let fixture = Fixture::new("twobins");
    fixture.write_executable(
        "tools/refusing-cc",
        "#!/bin/sh\necho 'fixture linker refuses to link' >&2\nexit 3\n",
    );
    fixture.write(
        ".cargo/config.toml",
        &format!(
            "[target.{}]\nlinker = \"tools/refusing-cc\"\n",
            host_triple()
        ),
    );
    fixture
        .run(&["build"])
        .failure()
        .stderr_contains("fixture linker refuses to link");
    let logged = links(&fixture, "baseline");
    assert!(
        !logged.is_empty() && logged.iter().all(|l| l["success"] == false),
        "{logged:?}"
    );
}

#[test]
fn batch_size_builds_the_binaries_in_groups() {
    let fixture = Fixture::new("twobins");
    fixture.write("pgo-build.toml", "[build]\nbatch_size = 1\n");
    let run = fixture.run(&["build"]);
    run.success();
    assert_eq!(
        run.stderr().matches("cargo build of 1 binary").count(),
        2,
        "{}",
        run.describe()
    );
    assert!(
        fixture.stage_bin("baseline", "app").exists()
            && fixture.stage_bin("baseline", "helper").exists()
    );
    // One cargo after the other: their bounds add up, each binary one chain.
    let bound = &fixture.report()["rustc_memory"]["baseline"]["lower_bound"];
    assert_eq!(
        bound["critical_path"].as_array().map(Vec::len),
        Some(2),
        "{bound}"
    );
}

/// sccache as RUSTC_WRAPPER through pgo-build's stages: a clean rebuild is served from the
/// cache, also in a checkout at another path (pgo-build's own files are not named by absolute
/// paths on rustc's command line), and report.json records the figures per stage.
#[test]
fn sccache_serves_clean_rebuilds_in_the_same_and_another_checkout() {
    let cache = tempfile::tempdir().unwrap();
    // A server of this test's own, on a port of its own.
    let port = crate::support::free_port().to_string();
    let with_sccache = |fixture: &Fixture, args: &[&str]| {
        let mut command = fixture.command(args);
        command
            .env("RUSTC_WRAPPER", "sccache")
            .env("SCCACHE_DIR", cache.path())
            .env("SCCACHE_SERVER_PORT", &port);
        fixture.run_with(command)
    };
    let stage_cache = |fixture: &Fixture, stage: &str| fixture.report()["sccache"][stage].clone();
    let first = Fixture::at("signals", "one");
    with_sccache(&first, &["build", "--features", "rt"]).success();
    let cold = stage_cache(&first, "baseline");
    assert_eq!(cold["hits"], 0, "{cold}");
    // libc and pgo-build-rt are cacheable; the binary never is.
    assert!(cold["misses"].as_u64().unwrap() >= 2, "{cold}");
    assert!(cold["not_cacheable"].as_u64().unwrap() >= 1, "{cold}");
    // The server's rustc are measured all the same (found in /proc by their command line).
    let libc = rustc_record(&rustc_log(&first, "baseline"), "libc/libc");
    assert!(libc["peak_bytes"].as_u64().unwrap() > 50 << 20, "{libc}");
    assert_eq!(libc["sampled"], true, "{libc}");
    let binary = rustc_record(&rustc_log(&first, "baseline"), "sigfix/server");
    assert!(
        binary["peak_bytes"].as_u64().unwrap() > 50 << 20,
        "{binary}"
    );

    std::fs::remove_dir_all(first.root().join("target")).unwrap();
    with_sccache(&first, &["build", "--features", "rt"]).success();
    let warm = stage_cache(&first, "baseline");
    assert_eq!(warm["hits"], cold["misses"], "{warm}");
    assert_eq!(warm["misses"], 0, "{warm}");
    // A hit runs no rustc (only sccache's looks at the sources): nothing measured.
    let libc = rustc_record(&rustc_log(&first, "baseline"), "libc/libc");
    assert!(libc["peak_bytes"].is_null(), "{libc}");

    let elsewhere = Fixture::at("signals", "another/checkout");
    with_sccache(&elsewhere, &["build", "--features", "rt"]).success();
    // Every dependency crate hits; the fixture's own library misses: sccache keys on
    // CARGO_MANIFEST_DIR and the working directory, which are the checkout's.
    let moved = stage_cache(&elsewhere, "baseline");
    assert_eq!(moved["misses"], 1, "{moved}");
    assert_eq!(
        moved["hits"].as_u64().unwrap(),
        cold["misses"].as_u64().unwrap() - 1,
        "{moved}"
    );

    let mut stop = Command::new("sccache");
    stop.arg("--stop-server").env("SCCACHE_SERVER_PORT", &port);
    let _ = stop.output();
}

fn rustc_log(fixture: &Fixture, stage: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(fixture.layout().dir().join(stage).join("rustc.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn rustc_record(records: &[serde_json::Value], krate: &str) -> serde_json::Value {
    records
        .iter()
        .find(|r| r["krate"] == krate)
        .unwrap_or_else(|| panic!("no rustc of {krate} in {records:?}"))
        .clone()
}

#[test]
fn the_instrumented_stage_starts_from_the_baselines_measured_peaks() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 10"]);
    fixture.run(&["build"]).success();
    let baseline = rustc_record(&rustc_log(&fixture, "baseline"), "app/app");
    assert_eq!(baseline["guessed"], true, "{baseline}");
    let peak = baseline["peak_bytes"].as_u64().unwrap() as f64;
    fixture
        .run(&["-v", "instrument"])
        .success()
        .stderr_contains("crates start from the baseline stage's measured peaks x 1.15");
    let instrumented = rustc_record(&rustc_log(&fixture, "instrumented"), "app/app");
    assert_eq!(instrumented["guessed"], false, "{instrumented}");
    assert_eq!(
        instrumented["estimate_bytes"].as_u64().unwrap(),
        (peak * 1.15).round() as u64,
        "{instrumented}"
    );
}

#[test]
fn rustc_estimates_are_learned_from_one_build_and_used_by_the_next() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 10"]);
    fixture.run(&["build"]).success();
    let first = rustc_record(&rustc_log(&fixture, "baseline"), "app/app");
    assert_eq!(first["guessed"], true, "{first}");
    assert_eq!(first["kind"], "bin");
    let peak = first["peak_bytes"].as_u64().unwrap();
    assert!(peak > 10 << 20, "rustc's peak RSS is measured: {first}");
    let estimates = read_json(&fixture.layout().path("baseline/rustc-estimates.json"));
    assert_eq!(estimates["release:app/app@0.1.0|bin"], peak);
    let summary = &fixture.report()["rustc_memory"]["baseline"];
    assert_eq!(summary["invocations"], 2, "{summary}");
    assert!(summary["heaviest"][0]["peak_bytes"].as_u64().unwrap() > 0);
    // The dependency graph's bound beside the build's wall time (cargo --timings): the two
    // binaries do not depend on each other, so the longest chain is one of them, and no
    // schedule beats it.
    let (build, bound) = (&summary["build_secs"], &summary["lower_bound"]);
    let path = bound["critical_path"].as_array().unwrap();
    assert!(
        path.len() == 1 && path[0].as_str().unwrap().ends_with(" (bin)"),
        "{bound}"
    );
    assert!(bound["secs"].as_f64().unwrap() > 0.0, "{bound}");
    assert!(
        bound["secs"].as_f64().unwrap() <= build.as_f64().unwrap(),
        "{bound} {build}"
    );
    assert!(
        fixture
            .layout()
            .path("baseline/cargo-target/cargo-timings/cargo-timing.html")
            .is_file()
    );

    // The second build of the crate starts from that measurement, not from the guess.
    let main = fixture.root().join("app/src/main.rs");
    let source = std::fs::read_to_string(&main).unwrap();
    std::fs::write(&main, source.replace("usage: app", "usage (2): app")).unwrap();
    fixture.run(&["build"]).success();
    let second = rustc_record(&rustc_log(&fixture, "baseline"), "app/app");
    assert_eq!(second["guessed"], false, "{second}");
    assert_eq!(second["estimate_bytes"], peak);
    assert!(
        fixture.report()["rustc_memory"]["baseline"]["estimate_error"]
            .as_f64()
            .is_some()
    );
    let shown = fixture.run(&["report"]);
    shown.success();
    for column in [
        "Build (at best)",
        "its longest chain of crates",
        "Waiting for memory",
        "Waiting for a CPU slot",
        "Estimate error",
        "app/app",
    ] {
        assert!(shown.stdout().contains(column), "{}", shown.describe());
    }

    // Nothing changed: cargo finds the build up to date and no rustc runs. The record says
    // so, in place of the last build's figures (which the answer would set the build time
    // against: "427× the plain build's 0.1 s").
    fixture.run(&["build"]).success();
    let up_to_date = &fixture.report()["rustc_memory"]["baseline"];
    assert_eq!(up_to_date["invocations"], 0, "{up_to_date}");
    assert!(up_to_date["build_secs"].as_f64().is_some(), "{up_to_date}");

    // A damaged estimates file: said, guesses stand in, and the build writes it again.
    let estimates_file = fixture.layout().path("baseline/rustc-estimates.json");
    std::fs::write(&estimates_file, "{ not json").unwrap();
    std::fs::write(&main, source.replace("usage: app", "usage (3): app")).unwrap();
    fixture
        .run(&["build"])
        .success()
        .stderr_contains("rustc-estimates.json is not a file of rustc estimates")
        .stderr_contains("the baseline stage's rustc are admitted by guessed peaks this time");
    assert_eq!(
        rustc_record(&rustc_log(&fixture, "baseline"), "app/app")["guessed"],
        true
    );
    let rewritten = read_json(&estimates_file);
    assert!(rewritten["release:app/app@0.1.0|bin"].as_u64().unwrap() > 0);

    // A crate that grew past its estimate is named, and its estimate updated.
    let mut shrunk = rewritten.clone();
    // (10 MiB: below rustc's own floor, so it is admitted at 64 MiB, and grows past that.)
    shrunk["release:app/app@0.1.0|bin"] = (10u64 << 20).into();
    std::fs::write(&estimates_file, shrunk.to_string()).unwrap();
    std::fs::write(&main, source.replace("usage: app", "usage (4): app")).unwrap();
    fixture
        .run(&["build"])
        .success()
        .stderr_contains(
            "1 crate peaked over its estimate (the last measured peak): `app/app` (bin)",
        )
        .stderr_contains("over 64.0 MiB");
    let overruns = &fixture.report()["rustc_memory"]["baseline"]["overruns"];
    assert_eq!(overruns[0]["krate"], "app/app", "{overruns}");
    let updated = read_json(&estimates_file);
    assert!(updated["release:app/app@0.1.0|bin"].as_u64().unwrap() > 64 << 20);

    // Other profile settings (LTO: rustc's peaks change several times over) are measured
    // afresh, not admitted by the peaks of the settings before.
    fixture.prepend_config("[build]\nprofile_overrides = { lto = \"thin\" }\n\n");
    fixture.run(&["build"]).success();
    let with_lto = rustc_record(&rustc_log(&fixture, "baseline"), "app/app");
    assert_eq!(with_lto["guessed"], true, "{with_lto}");
}

/// Estimates travel: exported from one target directory, carried into a fresh one (another
/// machine, a CI cache) by `[build] rustc_estimates`, and used there instead of guesses.
#[test]
fn estimates_carried_into_a_fresh_target_dir_are_used() {
    let measured = Fixture::new("twobins");
    measured.config(&["$PGO_BUILD_BIN_APP work 10"]);
    measured.run(&["build"]).success();
    let peak = rustc_record(&rustc_log(&measured, "baseline"), "app/app")["peak_bytes"].clone();
    let stored = read_json(&measured.layout().path("baseline/rustc-estimates.json"));
    assert_eq!(stored["release:app/app@0.1.0|bin"], peak, "{stored}");
    let carried = measured.root().join("carried.json");
    measured
        .run(&["export", "--rustc-estimates", carried.to_str().unwrap()])
        .success()
        .stderr_contains("wrote the rustc estimates of 2 crates");
    let file = read_json(&carried);
    assert_eq!(
        file["targets"][host_triple()]["baseline"]["release:app/app@0.1.0|bin"],
        peak
    );

    let fresh = Fixture::new("twobins");
    fresh.config(&["$PGO_BUILD_BIN_APP work 10"]);
    fresh.prepend_config("[build]\nrustc_estimates = \"ci/estimates.json\"\n\n");
    // Not restored yet (a first CI run): said, and guesses stand in.
    fresh
        .run(&["-v", "build"])
        .success()
        .stderr_contains("no estimates carried yet");
    assert_eq!(
        rustc_record(&rustc_log(&fresh, "baseline"), "app/app")["guessed"],
        true
    );
    fresh.run(&["clean"]).success();
    std::fs::create_dir_all(fresh.root().join("ci")).unwrap();
    std::fs::copy(&carried, fresh.root().join("ci/estimates.json")).unwrap();
    fresh
        .run(&["-v", "build"])
        .success()
        .stderr_contains("2 crates start from the estimates carried in");
    let used = rustc_record(&rustc_log(&fresh, "baseline"), "app/app");
    assert_eq!(used["guessed"], false, "{used}");
    assert_eq!(used["estimate_bytes"], peak, "{used}");
    // The instrumented stage starts from the carried baseline peaks, scaled.
    fresh
        .run(&["-v", "instrument"])
        .success()
        .stderr_contains("crates start from the baseline stage's measured peaks x 1.15");

    // A damaged stage file is left out of an export, said; the other stages go out.
    std::fs::write(
        fresh.layout().path("instrumented/rustc-estimates.json"),
        "{",
    )
    .unwrap();
    let again = fresh.root().join("again.json");
    fresh
        .run(&["export", "--rustc-estimates", again.to_str().unwrap()])
        .success()
        .stderr_contains("the instrumented stage's estimates are not exported");
    let file = read_json(&again);
    assert!(file["targets"][host_triple()]["baseline"]["release:app/app@0.1.0|bin"].is_u64());

    // Absurd carried peaks (1 TiB, above any memory here): not believed, and the file named.
    let mut absurd = read_json(&carried);
    absurd["targets"][host_triple()]["baseline"]["release:app/app@0.1.0|bin"] =
        serde_json::json!(1u64 << 40);
    std::fs::write(
        fresh.root().join("ci/estimates.json"),
        serde_json::to_string(&absurd).unwrap(),
    )
    .unwrap();
    fresh.run(&["clean"]).success();
    fresh
        .run(&["build"])
        .success()
        .stderr_contains("ci/estimates.json: 1 of its")
        .stderr_contains("above this machine's memory");
    let used = rustc_record(&rustc_log(&fresh, "baseline"), "app/app");
    assert_ne!(
        used["estimate_bytes"],
        serde_json::json!(1u64 << 40),
        "{used}"
    );

    // A damaged carried file: said, the build goes on from guesses.
    std::fs::write(fresh.root().join("ci/estimates.json"), "{ not json").unwrap();
    fresh.run(&["clean"]).success();
    fresh
        .run(&["build"])
        .success()
        .stderr_contains("is not a file of rustc estimates written by `pgo-build export");
}

#[test]
fn a_guessed_crate_runs_on_probation_beside_one_whose_guess_leaves_room() {
    // Cold: both binaries are guessed at 1 GiB, and two do not fit in 1400M (less 64 MiB for
    // cargo and pgo-build); the second runs on probation in the 312 MiB the first leaves.
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 10"]);
    fixture.prepend_config("[build]\nmemory_budget = \"1400M\"\n\n");
    fixture.run(&["build"]).success();
    let records = rustc_log(&fixture, "baseline");
    let (app, helper) = (
        rustc_record(&records, "app/app"),
        rustc_record(&records, "app/helper"),
    );
    assert!(app["guessed"] == true && helper["guessed"] == true);
    let on_probation: Vec<&serde_json::Value> =
        records.iter().filter(|r| r["probation"] == true).collect();
    assert_eq!(on_probation.len(), 1, "{records:?}");
    // They overlapped: the one on probation started before the other ended.
    let (first, second) = if app["start_unix"].as_f64() < helper["start_unix"].as_f64() {
        (&app, &helper)
    } else {
        (&helper, &app)
    };
    assert_eq!(second["probation"], true, "{records:?}");
    assert!(
        second["start_unix"].as_f64().unwrap()
            < first["start_unix"].as_f64().unwrap() + first["wall_secs"].as_f64().unwrap(),
        "{records:?}"
    );
    // Within its allowance, or paused at it: never past the budget.
    let peak = fixture.report()["steps"][0]["peak_memory_bytes"]
        .as_u64()
        .unwrap();
    assert!(peak < 1400 << 20, "{peak}");
}

#[test]
fn a_crate_estimated_above_the_whole_budget_runs_alone_and_is_named() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 10"]);
    fixture.prepend_config("[build]\nmemory_budget = \"64M\"\n\n");
    fixture
        .run(&["build"])
        .success()
        .stderr_contains("2 crates are estimated above the whole memory budget for rustc (0 B of 64.0 MiB), so each ran alone: `app/app` (bin) estimated at 1.0 GiB")
        .stderr_contains("`app/helper` (bin) estimated at 1.0 GiB");
    let records = rustc_log(&fixture, "baseline");
    assert!(records.iter().all(|r| r["alone"] == true), "{records:?}");
    // Alone means alone: no two of them overlapped.
    let app = rustc_record(&records, "app/app");
    let helper = rustc_record(&records, "app/helper");
    assert!(app["success"] == true && helper["success"] == true);
    assert_eq!(
        fixture.report()["rustc_memory"]["baseline"]["alone"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert!(run_binary(&fixture.stage_bin("baseline", "app"), &["work", "3000"]).contains("216"));
}

#[test]
fn a_users_rustc_wrapper_still_runs_behind_pgo_builds() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 10"]);
    let calls = fixture.root().join("wrapper-calls.txt");
    fixture.write_executable(
        "my-wrapper.sh",
        &format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec \"$@\"\n",
            calls.display()
        ),
    );
    let mut build = fixture.command(&["-v", "build"]);
    build.env("RUSTC_WRAPPER", fixture.root().join("my-wrapper.sh"));
    fixture.run_with(build).success().stderr_contains("behind ");
    let calls = std::fs::read_to_string(&calls).unwrap();
    assert!(calls.contains("--crate-name app"), "{calls}");
    let records = rustc_log(&fixture, "baseline");
    assert_eq!(records.len(), 2, "{records:?}");
    assert!(
        records
            .iter()
            .all(|r| r["peak_bytes"].as_u64().unwrap() > 0),
        "{records:?}"
    );
}

/// A memory-ledger entry for `pid`, holding more memory than any budget, as if a rustc of
/// another build had it; `started` is what the ledger records as the process's start.
fn hold_ledger(fixture: &Fixture, pid: u32, started: u64) {
    hold_ledger_with(fixture, pid, started, 64 << 30);
}

/// The ledger with one running entry of `bytes`, owned by `pid`.
fn hold_ledger_with(fixture: &Fixture, pid: u32, started: u64, bytes: u64) {
    let ledger = serde_json::json!({
        "running": [{"pid": pid, "started": started, "krate": "held-by-test",
                     "bytes": bytes, "since": 0.0}],
        "waiting": [],
    });
    std::fs::create_dir_all(fixture.layout().dir()).unwrap();
    std::fs::write(
        fixture.layout().path("memory-ledger.json"),
        ledger.to_string(),
    )
    .unwrap();
}

/// Field 22 of /proc/<pid>/stat: the process's start time.
fn start_time(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 1..];
    after_name
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn a_ledger_entry_of_another_process_never_hangs_the_build_and_waits_are_explained() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 10"]);
    // A process that reuses a dead rustc's pid: alive, but not what the entry recorded.
    let mut stranger = Command::new("sleep").arg("300").spawn().unwrap();
    hold_ledger(&fixture, stranger.id(), start_time(stranger.id()) + 1);
    let mut build = Command::new("timeout");
    build
        .arg("120")
        .arg(fixture.command(&["build"]).get_program());
    let probe = fixture.command(&["build"]);
    build
        .args(probe.get_args())
        .current_dir(fixture.root())
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR");
    let run = fixture.run_with(build);
    run.success();
    assert!(
        !run.stderr().contains("has waited"),
        "nothing to wait behind: {}",
        run.describe()
    );
    stranger.kill().unwrap();
    stranger.wait().unwrap();
    // The owner itself, alive until a crate has waited behind it long enough: crates wait for
    // it, and say what they wait behind. Released by what the ledger says, not by a clock, so a
    // loaded machine that starts rustc late cannot end the wait before it begins.
    let owner = Holder::start(&fixture);
    hold_ledger(&fixture, owner.pid(), start_time(owner.pid()));
    fixture.edit("app/src/main.rs", |source| {
        format!("{source}\n// changed, so rustc runs again\n")
    });
    let releaser = owner.release_after_a_wait_of(&fixture, 7.0);
    let run = fixture.run(&["build"]);
    releaser.join().unwrap();
    run.success()
        .stderr_contains("has waited 5s for memory (rustc budget")
        .stderr_contains("held-by-test");
    let rustc = &fixture.report()["rustc_memory"]["baseline"];
    assert!(rustc["memory_wait_secs"].as_f64().unwrap() > 4.0, "{rustc}");

    // Held by a light crate with one rustc at a time (-j 1): the wait is for the CPU slot, as
    // cargo's own jobs wait, and is not put down to memory.
    let owner = Holder::start(&fixture);
    hold_ledger_with(&fixture, owner.pid(), start_time(owner.pid()), 1 << 20);
    fixture.edit("app/src/main.rs", |source| {
        format!("{source}// and again\n")
    });
    let releaser = owner.release_after_a_wait_of(&fixture, 5.0);
    let run = fixture.run(&["-j", "1", "build"]);
    releaser.join().unwrap();
    run.success();
    assert!(!run.stderr().contains("has waited"), "{}", run.describe());
    let rustc = &fixture.report()["rustc_memory"]["baseline"];
    assert!(rustc["wait_secs"].as_f64().unwrap() > 4.0, "{rustc}");
    assert_eq!(rustc["memory_wait_secs"].as_f64().unwrap(), 0.0, "{rustc}");
    run.stderr_contains("s for a CPU slot");
}

/// A process that owns a ledger entry until told to go: it ends when its stop file appears.
struct Holder {
    child: std::process::Child,
    stop: std::path::PathBuf,
}

impl Holder {
    fn start(fixture: &Fixture) -> Holder {
        let stop = fixture.root().join("holder.stop");
        let _ = std::fs::remove_file(&stop);
        let child = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "while [ ! -e '{}' ]; do sleep 0.05; done",
                stop.display()
            ))
            .spawn()
            .unwrap();
        Holder { child, stop }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Ends the holder once a rustc has waited `secs` in the ledger behind it (or after two
    /// minutes without one: the test then fails on what the build said).
    fn release_after_a_wait_of(
        mut self,
        fixture: &Fixture,
        secs: f64,
    ) -> std::thread::JoinHandle<()> {
        let ledger = fixture.layout().path("memory-ledger.json");
        std::thread::spawn(move || {
            let now = || {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_secs_f64()
            };
            let deadline = now() + 120.0;
            while now() < deadline {
                let waited_long = std::fs::read_to_string(&ledger)
                    .ok()
                    .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
                    .and_then(|ledger| ledger["waiting"].as_array().cloned())
                    .into_iter()
                    .flatten()
                    .any(|entry| entry["since"].as_f64().is_some_and(|s| now() - s >= secs));
                if waited_long {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            std::fs::write(&self.stop, "").unwrap();
            self.child.wait().unwrap();
        })
    }
}
