//! `pgo-build optimize`: profiles that are empty, corrupt, stale or unusable are refused or
//! excluded with reasons; binaries without a profile, or grown past the limit, are not staged;
//! functions changed since training are summarised.

use crate::support::*;
use std::path::{Path, PathBuf};

#[test]
fn binary_no_workload_runs_is_named_and_refused() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 1000"]);
    let run = fixture.run(&["run"]);
    run.failure()
        .stderr_contains("warning: `helper` wrote no profile: no training workload ran it");
    insta::assert_snapshot!(
        "refusal_binary_without_profile",
        normalized(&fixture, &run.error_text())
    );
    assert!(!fixture.stage_bin("optimized", "helper").exists());
    assert!(!fixture.stage_bin("optimized", "app").exists());

    // Opting out builds helper without PGO, and says so in the report.
    fixture
        .run(&["optimize", "--allow-missing-profile", "helper"])
        .success();
    let report = fixture.report();
    assert_eq!(report["binaries"]["helper"]["optimized"]["pgo"], false);
    assert_eq!(report["binaries"]["app"]["optimized"]["pgo"], true);
    assert_eq!(
        run_binary(&fixture.stage_bin("optimized", "helper"), &[]),
        "helper 23331668\n"
    );
}

#[test]
fn only_zero_byte_profiles_are_refused() {
    let fixture = Fixture::new("twobins");
    fixture.write(
        "pgo-build.toml",
        "[build]\nbins = [\"app\"]\n\n[[workload]]\nname = \"dies\"\nrole = \"train\"\n\
         command = \"$PGO_BUILD_BIN_APP abort\"\nallow_failure = true\n",
    );
    let run = fixture.run(&["run"]);
    run.failure()
        .stderr_contains("`app`: all 1 process ended without writing a profile")
        .stderr_contains("refusing to build with PGO");
    let names: Vec<String> = std::fs::read_dir(fixture.raw_profile_dir("dies"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    // The aborted process left its recorded start and an empty profile.
    assert_eq!(
        names.iter().filter(|n| n.ends_with(".start")).count(),
        1,
        "{names:?}"
    );
    let profile = names
        .iter()
        .find(|n| n.ends_with(".profraw"))
        .expect("a profile file");
    assert_eq!(
        std::fs::metadata(fixture.raw_profile_dir("dies").join(profile))
            .unwrap()
            .len(),
        0
    );
    assert!(!fixture.stage_bin("optimized", "app").exists());
}

#[test]
fn corrupt_and_stale_profiles_are_excluded_with_reasons() {
    let fixture = Fixture::new("twobins");
    // The workload leaves, beside the real profiles, a truncated copy of one of them and a
    // file from a binary that no longer exists (faults no real tool produces on demand).
    fixture.config(&[r#"$PGO_BUILD_BIN_APP work 1000 && $PGO_BUILD_BIN_HELPER
dir=$(dirname "$LLVM_PROFILE_FILE")
real=$(ls "$dir"/*.profraw | head -n 1)
build_id=$(basename "$real" | cut -d_ -f1)
head -c $(( $(stat -c %s "$real") / 3 )) "$real" > "$dir/${build_id}_4000000.profraw"
cp "$real" "$dir/0123abcd_4000000.profraw""#]);
    fixture.run(&["instrument"]).success();
    fixture.run(&["train"]).success();
    fixture
        .run(&["optimize"])
        .success()
        .stderr_contains("llvm-profdata cannot read it (it said: \"")
        .stderr_contains("`pgo-build train` (or `pgo-build train WORKLOAD`")
        .stderr_contains("not one of the current instrumented binaries (build id 0123abcd)");
    assert_eq!(
        fixture.report()["rejected_profiles"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    // The truncated file failed its batch's merge: the others were merged as training ran
    // and it was left as it is, so its reason is llvm-profdata's. Profile bytes count what
    // is merged, not the excluded files.
    let names = file_names(&fixture.raw_profile_dir("t0"));
    assert!(
        names.iter().any(|n| n.ends_with("_4000000.profraw")),
        "{names:?}"
    );
    let merged: u64 = names
        .iter()
        .filter(|n| n.ends_with("_merged.profdata") && !n.starts_with("0123abcd"))
        .map(|n| {
            std::fs::metadata(fixture.raw_profile_dir("t0").join(n))
                .unwrap()
                .len()
        })
        .sum();
    let reported: u64 = ["app", "helper"]
        .iter()
        .map(|b| profile_figures(&fixture, b)["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(reported, merged);

    // With on_corrupt = "fail" the same files fail the stage.
    fixture.prepend_config("[pgo]\non_corrupt = \"fail\"\n\n");
    fixture
        .run(&["optimize"])
        .failure()
        .stderr_contains("2 raw profiles are excluded from the merge")
        .stderr_contains("on_corrupt = \"fail\"");
}

#[test]
fn functions_changed_since_training_are_summarised_per_crate() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 1000 && $PGO_BUILD_BIN_HELPER"]);
    fixture.run(&["instrument"]).success();
    fixture.run(&["train"]).success();
    let main = fixture.root().join("app/src/main.rs");
    let source = std::fs::read_to_string(&main).unwrap();
    let changed = source.replace(
        "steps += 1;",
        "steps += 1;\n        if steps == 1_000_000 { println!(\"long\"); }",
    );
    assert_ne!(source, changed);
    std::fs::write(&main, changed).unwrap();
    let run = fixture.run(&["optimize"]);
    run.success()
        .stderr_contains("changed since the profile was recorded");
    assert!(
        run.stdout()
            .contains("Changed since training (hash mismatch)"),
        "{}",
        run.describe()
    );
    fixture
        .run(&["optimize", "--strict"])
        .failure()
        .stderr_contains("--strict turns this warning into an error");
    fixture.run(&["optimize"]).success();
    let diagnostics = &fixture.report()["optimize_diagnostics"]["per_crate"]["app"];
    assert!(
        diagnostics["mismatched_functions"].as_u64().unwrap() >= 1,
        "{diagnostics}"
    );
}

/// An llvm-profdata that passes everything to the real one, except that the final merge
/// writes an empty profile, and with LIE_ABOUT_FUNCTIONS `show` of the merged profile claims
/// functions anyway: faults the real tool cannot be made to produce, to reach the last two
/// guards before a build without PGO.
fn empty_merging_profdata(dir: &Path) -> PathBuf {
    let script = dir.join("llvm-profdata");
    std::fs::write(
        &script,
        r#"#!/bin/sh
real=REAL_PROFDATA
case "$1 $2 $3" in
"merge -o "*merged.profdata.partial)
    empty=$(mktemp); "$real" merge -o "$3" "$empty"; status=$?; rm -f "$empty"; exit $status ;;
"show "*/merged-*)
    if [ -n "$LIE_ABOUT_FUNCTIONS" ]; then echo "Total functions: 5"; exit 0; fi ;;
esac
exec "$real" "$@"
"#
        .replace("REAL_PROFDATA", &llvm_tool("llvm-profdata")),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    script
}

#[test]
fn a_profile_rustc_cannot_use_fails_instead_of_building_without_pgo() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 1000 && $PGO_BUILD_BIN_HELPER"]);
    fixture.run(&["instrument"]).success();
    fixture.run(&["train"]).success();
    let tools = tempfile::tempdir().unwrap();
    let fake = empty_merging_profdata(tools.path());

    let mut optimize = fixture.command(&["optimize"]);
    optimize.env("PGO_BUILD_LLVM_PROFDATA", &fake);
    fixture
        .run_with(optimize)
        .failure()
        .stderr_contains("contains no functions");

    let mut optimize = fixture.command(&["optimize"]);
    optimize
        .env("PGO_BUILD_LLVM_PROFDATA", &fake)
        .env("LIE_ABOUT_FUNCTIONS", "1");
    fixture
        .run_with(optimize)
        .failure()
        .stderr_contains("rustc could not use the profile")
        .stderr_contains("Not an IR level instrumentation profile");
    assert!(!fixture.stage_bin("optimized", "app").exists());
}

#[test]
fn optimized_binaries_that_grew_more_than_allowed_are_not_staged() {
    // Hot code aligned to 2 MiB pages pads the small BOLTed binaries to several MiB.
    let fixture = bolt_fixture(
        &["$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_HELPER"],
        "huge_pages = true\n",
    );
    fixture.append_config("\n[pgo]\nmax_size_growth = \"50%\"\n");
    fixture
        .run(&["run", "--no-compare"])
        .failure()
        .stderr_contains("the bolt binaries grew more than [pgo] max_size_growth = \"50%\" allows")
        .stderr_contains("so they were not staged");
    // The optimized binaries are within the limit and staged; the BOLTed ones are not.
    assert!(fixture.stage_bin("optimized", "app").is_file());
    assert!(!fixture.stage_bin("bolt", "app").exists());
    assert!(!fixture.layout().path("bolt/stage.json").exists());
}
