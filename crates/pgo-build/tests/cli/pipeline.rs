//! The pipeline end to end (`build`, `instrument`, and `run` through every step) and what it
//! refuses before or between builds: changed flags, llvm-profdata of another LLVM, bad
//! configuration, no training workloads; target directories and paths as users have them.

use crate::support::*;
use std::path::Path;

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
    let stages: Vec<&str> = step_names(&report);
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
