//! `profile show`, `profile overlap`, `export` and committed profiles.

use std::process::Command;

use crate::support::*;

#[test]
fn profile_show_lists_the_hot_function_first() {
    let fixture = train_holdout_fixture(
        "$PGO_BUILD_BIN_APP work 20000 && $PGO_BUILD_BIN_HELPER",
        "true",
    );
    fixture.run(&["instrument"]).success();
    fixture.run(&["train"]).success();
    let run = fixture.run(&["-q", "profile", "show", "--top", "3", "--json"]);
    run.success();
    let shown: serde_json::Value = serde_json::from_str(&run.stdout()).expect("JSON on stdout");
    let hottest = &shown["hottest"][0];
    assert_eq!(hottest["name"], "app::collatz_steps", "{shown}");
    assert_eq!(hottest["crate"], "app");
    assert_eq!(shown["crates"][0]["crate"], "app", "{shown}");
    assert!(
        shown["coverage"]["app"]["covered"].as_u64().unwrap() > 0,
        "{shown}"
    );
    // One binary's profile, as a table.
    let run = fixture.run(&["profile", "show", "--binary", "helper"]);
    run.success();
    assert!(run.stdout().contains("helper::main"), "{}", run.describe());
}

#[test]
fn raw_profiles_of_many_short_processes_are_merged_as_training_runs() {
    // 200 short processes; halfway, the workload waits (up to a minute) for the files so far
    // to be merged and notes how many it saw, so merging while it runs is shown without
    // depending on how fast this machine is.
    let fixture = train_holdout_fixture(
        r#"dir=$(dirname "$LLVM_PROFILE_FILE")
count() { ls "$dir" | grep -c '\.profraw$' || true; }
for i in $(seq 100); do $PGO_BUILD_BIN_HELPER > /dev/null; done
for t in $(seq 600); do [ "$(count)" -lt 50 ] && break; sleep 0.1; done
count > "$dir/../halfway"
for i in $(seq 100); do $PGO_BUILD_BIN_HELPER > /dev/null; done
$PGO_BUILD_BIN_APP work 2000"#,
        "true",
    );
    fixture.run(&["instrument"]).success();
    fixture.run(&["train"]).success();
    let raw = fixture.layout().path("profiles/raw");
    let halfway: usize = std::fs::read_to_string(raw.join("halfway"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(halfway < 50, "{halfway} raw files left while training ran");
    // Every process is still accounted for.
    let helper = profile_figures(&fixture, "helper");
    assert_eq!(helper["processes"], 200, "{helper}");
    assert_eq!(helper["valid_files"], 200, "{helper}");
    assert_eq!(helper["died"], 0, "{helper}");
    // What is left on disk: one merged profile per binary, not 200 raw files.
    let dir = fixture.raw_profile_dir("train");
    let names = file_names(&dir);
    assert!(!names.iter().any(|n| n.ends_with(".profraw")), "{names:?}");
    let size = |name: &String| std::fs::metadata(dir.join(name)).unwrap().len();
    let merged: Vec<&String> = names
        .iter()
        .filter(|n| n.ends_with("_merged.profdata"))
        .collect();
    assert_eq!(merged.len(), 2, "{names:?}");
    let ledger = read_json(&dir.join("merged.json"));
    let raw_bytes: u64 = ledger["by_build_id"]
        .as_object()
        .unwrap()
        .values()
        .map(|m| m["raw_bytes"].as_u64().unwrap())
        .sum();
    // Profiles and what counts them (each process's start marker stays, a line naming its
    // program, and so does its line in the training record).
    let on_disk: u64 = names
        .iter()
        .filter(|n| n.ends_with(".profdata") || n.ends_with(".profraw") || *n == "merged.json")
        .map(size)
        .sum();
    let largest_merged = merged.iter().map(|n| size(n)).max().unwrap();
    assert!(
        on_disk < 3 * largest_merged && on_disk * 10 < raw_bytes,
        "{on_disk} bytes on disk for {raw_bytes} bytes of raw profiles: {names:?}"
    );
    // The merged profile serves like the raw files did.
    let run = fixture.run(&["-q", "profile", "show", "--binary", "helper", "--json"]);
    run.success();
    fixture.run(&["optimize"]).success();
}

#[test]
fn profile_overlap_is_high_for_the_same_work_and_low_for_other_work() {
    let fixture = train_holdout_fixture(
        "$PGO_BUILD_BIN_APP work 20000",
        "$PGO_BUILD_BIN_APP work 20000",
    );
    fixture.run(&["instrument"]).success();
    fixture.run(&["train"]).success();
    fixture.run(&["profile", "overlap"]).success();
    let same = fixture.report()["overlap"]["app"]["edge_overlap"]
        .as_f64()
        .unwrap();
    assert!(same > 0.95, "identical workloads overlap {same}");

    write_train_holdout(
        &fixture,
        "$PGO_BUILD_BIN_APP work 20000",
        "$PGO_BUILD_BIN_APP primes 20000",
    );
    fixture
        .run(&["profile", "overlap"])
        .success()
        .stderr_contains("training represents holdout poorly for `app`")
        .stderr_contains("app::is_prime");
    let other = fixture.report()["overlap"]["app"]["edge_overlap"]
        .as_f64()
        .unwrap();
    assert!(
        other < 0.5 && other < same,
        "disjoint workloads overlap {other}"
    );

    // Mostly the same work, so the overlap is high, but a function held-out work spends over
    // 5% of its counts in that training never runs: judged by its counts, not the share.
    write_train_holdout(
        &fixture,
        "$PGO_BUILD_BIN_APP work 20000",
        "$PGO_BUILD_BIN_APP work 20000 && $PGO_BUILD_BIN_APP primes 20000",
    );
    let run = fixture.run(&["profile", "overlap"]);
    run.success()
        .stderr_contains("training leaves cold what holdout runs most in `app`: app::is_prime");
    let mostly = fixture.report()["overlap"]["app"].clone();
    assert!(mostly["edge_overlap"].as_f64().unwrap() >= 0.5, "{mostly}");
    assert!(
        !run.stderr().contains("represents holdout poorly"),
        "{}",
        run.describe()
    );
}

#[test]
fn a_committed_profile_is_used_and_its_staleness_reported() {
    let fixture = train_holdout_fixture(
        "$PGO_BUILD_BIN_APP work 20000 && $PGO_BUILD_BIN_HELPER",
        "true",
    );
    fixture.run(&["run", "--no-compare"]).success();
    // Holdout runs (from `profile overlap`) are recorded too, but are not training.
    fixture.run(&["profile", "overlap"]).success();
    fixture
        .run(&["export", "--output", "pgo/profile.profdata"])
        .success();
    let metadata: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture.root().join("pgo/profile.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(metadata["llvm_major"], llvm_major());
    assert_eq!(metadata["workloads"], serde_json::json!(["train"]));
    fixture.prepend_config("[pgo]\nprofile = \"pgo/profile.profdata\"\n\n");
    fixture.run(&["clean"]).success();

    // Unchanged sources: nothing is stale, and no training runs.
    fixture
        .run(&["run", "--no-compare"])
        .success()
        .stderr_contains("0 of ");
    let report = fixture.report();
    assert_eq!(
        report["staleness"]["stale_functions"], 0,
        "{}",
        report["staleness"]
    );
    let stages: Vec<&str> = step_names(&report);
    assert_eq!(stages, ["doctor", "build", "optimize"]);
    assert!(fixture.stage_bin("optimized", "app").exists());

    // An edited function is named with its share of the counts; it holds almost all of them,
    // so above the default [pgo] max_stale (a share of the counts) the profile is refused.
    let main = fixture.root().join("app/src/main.rs");
    let source = std::fs::read_to_string(&main).unwrap();
    std::fs::write(
        &main,
        source.replace(
            "steps += 1;",
            "steps += 1;\n        if steps == 999_999 { println!(\"long\"); }",
        ),
    )
    .unwrap();
    fixture
        .run(&["optimize"])
        .failure()
        .stderr_contains("the committed profile is stale")
        .stderr_contains("most counts first: app::collatz_steps (");
    let config = std::fs::read_to_string(fixture.root().join("pgo-build.toml")).unwrap();
    fixture.write(
        "pgo-build.toml",
        &config.replace("[pgo]\n", "[pgo]\nmax_stale = 1.0\n"),
    );
    fixture
        .run(&["optimize"])
        .success()
        .stderr_contains("of the committed profile's counts are in functions that changed");
    assert!(
        fixture.report()["staleness"]["changed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["name"] == "app::collatz_steps")
    );
}

#[test]
fn a_profile_made_by_another_llvm_is_refused_with_the_fix() {
    let fixture = train_holdout_fixture("$PGO_BUILD_BIN_APP work 100", "true");
    // A real profile, written by the machine's LLVM 14 llvm-profdata.
    fixture.write(
        "pgo/old.proftext",
        "# IR level Instrumentation Flag\n:ir\n_ZN3app4main17h0123456789abcdefE\n1\n1\n5\n",
    );
    let status = Command::new("/usr/bin/llvm-profdata")
        .args(["merge", "-o"])
        .arg(fixture.root().join("pgo/old.profdata"))
        .arg(fixture.root().join("pgo/old.proftext"))
        .status()
        .unwrap();
    assert!(status.success());
    fixture.prepend_config("[pgo]\nprofile = \"pgo/old.profdata\"\n\n");
    fixture.run(&["build"]).success();
    fixture
        .run(&["optimize"])
        .failure()
        .stderr_contains("was made by another LLVM than rustc's (indexed format version 7")
        .stderr_contains("Fix: re-create it with this toolchain");
}

/// What `export`, `pack` and a committed profile's readers cannot vouch for is refused, each
/// naming the file, what is wrong and the fix, and nothing good is lost: an output that
/// would overwrite its own metadata, a stage built from other sources than the workspace's
/// now, metadata that is not the profile's, a damaged profile, settings without range.
#[test]
fn the_release_path_refuses_what_it_cannot_vouch_for() {
    let fixture = train_holdout_fixture(
        "$PGO_BUILD_BIN_APP work 20000 && $PGO_BUILD_BIN_HELPER",
        "true",
    );
    fixture.run(&["run", "--no-compare"]).success();
    // An output that is its own metadata's name, or a directory.
    fixture.write("pgo/keep.txt", "kept");
    for (output, says) in [
        ("pgo/profile.json", "the two would overwrite each other"),
        ("pgo", "a directory; name the profile file in it"),
    ] {
        fixture
            .run(&["export", "--output", output])
            .failure()
            .stderr_contains(says);
    }
    assert_eq!(file_names(&fixture.root().join("pgo")), ["keep.txt"]);
    fixture
        .run(&["export", "--output", "pgo/profile.profdata"])
        .success();
    // Sources edited after training: export and pack would record today's sources as the
    // trained ones; refused, with nothing half-written left.
    let main = fixture.root().join("app/src/main.rs");
    let source = std::fs::read_to_string(&main).unwrap();
    std::fs::write(&main, format!("{source}\n// edited after training\n")).unwrap();
    fixture
        .run(&["export", "--output", "pgo/again.profdata"])
        .failure()
        .stderr_contains("refusing to export the training profile")
        .stderr_contains("sources changed since the instrumented stage was built");
    for stage in ["instrumented", "optimized"] {
        fixture
            .run(&["pack", stage, "--output", "pgo/stage.tar.zst"])
            .failure()
            .stderr_contains(&format!("refusing to pack the {stage} stage"));
    }
    let left = file_names(&fixture.root().join("pgo"));
    assert_eq!(
        left,
        ["keep.txt", "profile.json", "profile.profdata"],
        "{left:?}"
    );
    std::fs::write(&main, &source).unwrap();

    // The committed profile and its metadata, checked before anything is built.
    let config = std::fs::read_to_string(fixture.root().join("pgo-build.toml")).unwrap();
    let with_pgo =
        |pgo: &str| fixture.write("pgo-build.toml", &format!("[pgo]\n{pgo}\n\n{config}"));
    let profile = fixture.root().join("pgo/profile.profdata");
    let metadata = fixture.root().join("pgo/profile.json");
    let (good_profile, good_metadata) = (
        std::fs::read(&profile).unwrap(),
        std::fs::read_to_string(&metadata).unwrap(),
    );
    for (pgo, says) in [
        ("profile = \"\"", "an empty path"),
        ("profile = \"pgo\"", "is a directory"),
        (
            "profile = \"pgo/profile.profdata\"\nmax_stale = 20",
            "write 0.2 for 20%",
        ),
        (
            "profile = \"pgo/profile.profdata\"\nmax_stale = -1",
            "not a share",
        ),
        (
            "profile = \"pgo/profile.profdata\"\nmax_stale = nan",
            "not a share",
        ),
    ] {
        with_pgo(pgo);
        fixture.run(&["optimize"]).failure().stderr_contains(says);
    }
    with_pgo("profile = \"pgo/profile.profdata\"");
    fixture.run(&["profile", "check"]).success();
    // Metadata with merge markers, or describing another profile.
    std::fs::write(
        &metadata,
        format!("<<<<<<< HEAD\n{good_metadata}=======\n{good_metadata}>>>>>>> release\n"),
    )
    .unwrap();
    fixture
        .run(&["profile", "check"])
        .failure()
        .stderr_contains("profile.json has merge-conflict markers");
    std::fs::write(&metadata, &good_metadata).unwrap();
    let mut other = good_profile.clone();
    let last = other.len() - 1;
    other[last] ^= 1;
    std::fs::write(&profile, &other).unwrap();
    for command in [&["profile", "check"][..], &["optimize"]] {
        fixture
            .run(command)
            .failure()
            .stderr_contains("profile.json describes another profile than")
            .stderr_contains("were not exported together");
    }
    // Cut short, without metadata: named as the user's file, not pgo-build's copy.
    std::fs::remove_file(&metadata).unwrap();
    std::fs::write(&profile, &good_profile[..good_profile.len() / 2]).unwrap();
    fixture
        .run(&["optimize"])
        .failure()
        .stderr_contains(&format!(
            "{} cannot be read by llvm-profdata",
            profile.display()
        ))
        .stderr_contains("damaged or cut short");
    std::fs::write(&profile, &good_profile).unwrap();
    std::fs::write(&metadata, &good_metadata).unwrap();
    fixture.run(&["profile", "check"]).success();
}
