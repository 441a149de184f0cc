//! The pipeline end to end (`build`, `instrument`, `train`, `optimize`) and its refusals: profiles
//! that are empty, corrupt, stale or of another LLVM; changed flags; bad configuration.

use std::path::{Path, PathBuf};

use crate::support::*;

#[test]
fn full_pipeline_produces_optimized_binaries_that_run() {
    let fixture = Fixture::new("twobins");
    fixture.config(&[
        "$PGO_BUILD_BIN_APP work 20000",
        "\"$PGO_BUILD_BIN_DIR/helper\"",
    ]);
    let run = fixture.run(&["run"]);
    run.success()
        .stderr_contains("pgo-build step instrument start")
        .stderr_contains("pgo-build step optimize ok");
    insta::assert_snapshot!("run_tables", normalized(&fixture, &run.stdout()));
    // Not a terminal: nothing animated.
    assert!(
        !run.stderr().contains('\r') && !run.stderr().contains("\x1b["),
        "{}",
        run.describe()
    );

    for name in ["app", "helper"] {
        let optimized = fixture.stage_bin("optimized", name);
        let metadata = std::fs::symlink_metadata(&optimized).unwrap();
        assert!(
            metadata.file_type().is_file(),
            "{} is not a real file",
            optimized.display()
        );
        let args: &[&str] = if name == "app" {
            &["work", "5000"]
        } else {
            &[]
        };
        assert_eq!(
            run_binary(&optimized, args),
            run_binary(&fixture.stage_bin("baseline", name), args),
            "optimized and baseline {name} disagree"
        );
    }
    // The profile really was used: it is named by content hash and rustc got it.
    let report = fixture.report();
    let merged = report["merged_profile"]["path"].as_str().unwrap();
    assert!(
        merged.contains("/profiles/merged-") && merged.ends_with(".profdata"),
        "{merged}"
    );
    assert!(
        report["merged_profile"]["total_functions"]
            .as_u64()
            .unwrap()
            > 0
    );
    let stages: Vec<&str> = stage_names(&report);
    assert_eq!(
        stages,
        ["doctor", "build", "instrument", "train", "optimize"]
    );
    for stage in ["baseline", "instrumented", "optimized"] {
        assert!(
            report["binaries"]["app"][stage]["size_bytes"]
                .as_u64()
                .unwrap()
                > 0,
            "{stage}"
        );
    }
    assert_eq!(report["binaries"]["app"]["optimized"]["pgo"], true);
}

#[test]
fn user_rustflags_from_cargo_config_survive_into_every_stage() {
    let fixture = Fixture::new("twobins");
    fixture
        .config(&["$PGO_BUILD_BIN_APP work 1000 && $PGO_BUILD_BIN_HELPER"])
        .write(
            ".cargo/config.toml",
            "[build]\nrustflags = [\"--cfg\", \"fixture_flag\"]\n",
        );
    fixture.run(&["run"]).success();
    for stage in ["baseline", "instrumented", "optimized"] {
        assert_eq!(
            run_binary(&fixture.stage_bin(stage, "app"), &["flag"]),
            "flag=on\n",
            "{stage}"
        );
    }
}

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
fn changed_rustflags_after_instrument_are_refused() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 1000 && $PGO_BUILD_BIN_HELPER"]);
    fixture.run(&["instrument"]).success();
    fixture.run(&["train"]).success();
    let mut optimize = fixture.command(&["optimize"]);
    optimize.env("RUSTFLAGS", "-Ccodegen-units=1");
    let run = fixture.run_with(optimize);
    run.failure();
    insta::assert_snapshot!(
        "refusal_changed_settings",
        normalized(&fixture, &run.error_text())
    );
    assert!(!fixture.stage_bin("optimized", "app").exists());
}

#[test]
fn mismatched_llvm_profdata_is_refused_with_the_fix() {
    let old = Path::new("/usr/bin/llvm-profdata");
    assert!(
        old.exists(),
        "this test uses the machine's LLVM 14 llvm-profdata at {}",
        old.display()
    );
    let fixture = Fixture::new("twobins");
    let mut doctor = fixture.command(&["doctor"]);
    doctor.env("PGO_BUILD_LLVM_PROFDATA", old);
    let run = fixture.run_with(doctor);
    run.failure();
    insta::assert_snapshot!(
        "refusal_llvm_profdata_of_another_major",
        normalized(&fixture, &run.error_text())
    );
}

#[test]
fn bad_config_is_an_error_naming_the_line() {
    let fixture = Fixture::new("twobins");
    fixture.write(
        "pgo-build.toml",
        "[[workload]]\nname = \"t\"\nrole = \"train\"\ncomand = \"true\"\n",
    );
    let run = fixture.run(&["build"]);
    run.failure();
    insta::assert_snapshot!(
        "refusal_bad_config",
        normalized(&fixture, &run.error_text())
    );
}

#[test]
fn failing_workload_fails_training_with_its_output() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["echo about to fail; exit 7"]);
    fixture.run(&["instrument"]).success();
    fixture
        .run(&["train"])
        .failure()
        .stderr_contains("training workload `t0` exit status: 7 against the instrumented binaries")
        .stderr_contains("about to fail");
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
fn a_workspace_without_training_workloads_is_told_before_anything_is_built() {
    let fixture = Fixture::new("twobins");
    fixture.write(
        "pgo-build.toml",
        "[[workload]]\nname = \"h\"\nrole = \"holdout\"\ncommand = \"true\"\n",
    );
    fixture
        .run(&["doctor"])
        .success()
        .stderr_contains("there are no training workloads");
    fixture
        .run(&["run"])
        .failure()
        .stderr_contains("there are no training workloads")
        .stderr_contains("nothing was built");
    assert!(!fixture.layout().path("baseline").exists());
}

#[test]
fn cargo_config_target_dir_is_honoured_from_outside_the_workspace() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 10"]);
    fixture.write(
        ".cargo/config.toml",
        "[build]\ntarget-dir = \"custom-target\"\n",
    );
    let outside = tempfile::tempdir().unwrap();
    let mut command = fixture.command(&["build"]);
    command.current_dir(outside.path());
    fixture.run_with(command).success();
    assert!(
        fixture
            .root()
            .join("custom-target/pgo-build/baseline/bin/app")
            .exists()
    );
    assert!(!fixture.root().join("target").exists());
}

#[test]
fn a_workspace_under_a_path_with_spaces_and_quotes_runs_end_to_end() {
    let fixture = Fixture::at("twobins", "my work's \"dir\"");
    fixture.config(&[r#""$PGO_BUILD_BIN_APP" work 2000 && "$PGO_BUILD_BIN_HELPER""#]);
    fixture
        .run(&["run", "--no-compare"])
        .success()
        .stderr_contains("pgo-build step optimize ok");
    assert!(fixture.stage_bin("optimized", "app").exists());
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

#[test]
fn a_failed_workloads_error_lines_are_not_called_a_success() {
    let fixture = Fixture::new("twobins");
    fixture.write(
        "pgo-build.toml",
        "[[workload]]\nname = \"t0\"\nrole = \"train\"\nallow_failure = true\n\
         command = \"$PGO_BUILD_BIN_APP work 100; echo 'error: boom'; exit 101\"\n",
    );
    fixture.run(&["instrument"]).success();
    let train = fixture.run(&["train"]);
    train.success().stderr_contains(
        "workload `t0` exit status: 101 and printed 1 line that looks like errors",
    );
    assert!(
        !train.stderr().contains("exited successfully"),
        "{}",
        train.describe()
    );
}

#[test]
fn a_full_disk_during_training_is_named_not_blamed_on_signals() {
    let fixture = Fixture::new("twobins");
    // The workload fills the disk its profiles go to, then runs the binary.
    fixture.config(&[
        "cat /dev/zero > \"$(dirname \"$LLVM_PROFILE_FILE\")/../filler\" 2>/dev/null || true; \
         $PGO_BUILD_BIN_APP work 2000",
    ]);
    fixture.run(&["instrument"]).success();
    // The raw profiles' directory on a small filesystem.
    let raw = fixture.layout().path("profiles/raw");
    std::fs::create_dir_all(&raw).unwrap();
    let _mounted = Mounted::tmpfs(&raw, "256k");
    let train = fixture.run(&["train"]);
    train
        .failure()
        .stderr_contains("the profile runtime could not write profiles")
        .stderr_contains("No space left on device")
        .stderr_contains("free space there");
    assert!(
        !train.stderr().contains("pgo_build_rt::install"),
        "a full disk is not a signal: {}",
        train.describe()
    );
}

#[test]
fn a_read_only_directory_is_named_in_the_error() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 100"]);
    fixture.run(&["instrument"]).success();
    let profiles = fixture.layout().path("profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    let _mounted = Mounted::read_only(&profiles);
    fixture
        .run(&["train"])
        .failure()
        .stderr_contains("Read-only file system")
        .stderr_contains(&format!("{}", profiles.display()));
}

/// A dependency that links (a `cdylib`) from a git repository: cargo compiles it in its own
/// directory, not the workspace root, so pgo-build's files must reach its rustc by absolute
/// paths there (the linker wrapper; the start marker in the instrumented stage).
#[test]
fn a_dependency_that_links_in_its_own_directory_finds_pgo_builds_linker() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 1000"]);
    let repo = fixture.dir.path().join("shared-repo");
    std::fs::create_dir_all(repo.join("src")).unwrap();
    std::fs::write(
        repo.join("Cargo.toml"),
        "[package]\nname = \"shared\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n[lib]\n\
         crate-type = [\"cdylib\", \"rlib\"]\n",
    )
    .unwrap();
    std::fs::write(
        repo.join("src/lib.rs"),
        "#[unsafe(no_mangle)]\npub extern \"C\" fn shared_answer() -> u32 { 42 }\n",
    )
    .unwrap();
    for args in [
        &["init", "-q"][..],
        &["add", "-A"],
        &["commit", "-qm", "one"],
    ] {
        let status = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(&repo)
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    }
    fixture.edit("app/Cargo.toml", |text| {
        format!(
            "{text}\n[dependencies]\nshared = {{ git = \"file://{}\" }}\n",
            repo.display()
        )
    });
    for command in ["build", "instrument"] {
        fixture.run(&[command]).success();
    }
    fixture.run(&["train"]).success();
}

#[test]
fn doctor_prints_the_user_rustflags_it_found_and_no_empty_list() {
    let fixture = Fixture::new("twobins");
    let run = fixture.run(&["doctor"]);
    run.success().stderr_contains("user rustflags: none");
    assert!(!run.stderr().contains("[]"), "{}", run.describe());
    // Everything doctor says of a workspace without a configuration, in its order (the host
    // and where its LLVM tools were found are this machine's).
    let machine =
        regex::Regex::new(r"\(host [^,]+,|: /\S+/(llvm-bolt|merge-fdata|llvm-profdata)").unwrap();
    let said = normalized(&fixture, &run.stderr());
    let said = machine.replace_all(&said, |found: &regex::Captures| match found.get(1) {
        Some(tool) => format!(": [DIR]/{}", tool.as_str()),
        None => "(host [HOST],".to_owned(),
    });
    insta::assert_snapshot!("doctor_without_config", said);
    let mut doctor = fixture.command(&["doctor"]);
    doctor.env("RUSTFLAGS", "-Cdebuginfo=1");
    fixture
        .run_with(doctor)
        .success()
        .stderr_contains("user rustflags (RUSTFLAGS): -Cdebuginfo=1");
}

#[test]
fn a_train_workload_that_runs_no_instrumented_binary_is_refused() {
    let fixture = Fixture::new("twobins");
    // t0 covers both binaries, so per-binary accounting alone would see nothing wrong.
    fixture.config(&[
        "$PGO_BUILD_BIN_APP work 1000 && $PGO_BUILD_BIN_HELPER",
        "true",
    ]);
    fixture.run(&["instrument"]).success();
    for args in [&["train"][..], &["train", "--strict"]] {
        fixture
            .run(args)
            .failure()
            .stderr_contains("train workload `t1` ran no instrumented binary")
            .stderr_contains("contributed nothing to the profile")
            .stderr_contains("every binary has data from the other workloads");
    }
    // Nor does optimize merge what the runs left.
    fixture
        .run(&["optimize"])
        .failure()
        .stderr_contains("train workload `t1` ran no instrumented binary");
    // The binaries it leaves without data are named: here the one it was meant to run.
    fixture.config(&["$PGO_BUILD_BIN_APP work 1000", "$PGO_BUILD_BIN_HLEPER"]);
    fixture
        .run(&["train"])
        .failure()
        .stderr_contains("train workload `t1` ran no instrumented binary")
        .stderr_contains("`helper` has no profile data from any workload");
    // Fixed, training goes through.
    fixture.config(&[
        "$PGO_BUILD_BIN_APP work 1000 && $PGO_BUILD_BIN_HELPER",
        "$PGO_BUILD_BIN_APP work 10",
    ]);
    fixture.run(&["train"]).success();
}
