//! End-to-end tests: the real `pgo-build` binary against a copy of a fixture workspace, with
//! real cargo builds, real instrumented binaries and the real llvm-profdata.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A fresh copy of a fixture workspace and a way to run pgo-build on it.
struct Fixture {
    dir: tempfile::TempDir,
    subdir: String,
}

/// One pgo-build invocation's result, with assertions that print everything on failure.
struct Run {
    output: Output,
}

impl Fixture {
    fn new(name: &str) -> Fixture {
        Fixture::at(name, "")
    }

    /// A copy of the fixture in `subdir` of a fresh temporary directory.
    fn at(name: &str, subdir: &str) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures")
                .join(name),
            &dir.path().join(subdir),
        );
        Fixture {
            dir,
            subdir: subdir.to_owned(),
        }
    }

    /// A copy of the bundled example workspace (`examples/`) in `subdir`.
    fn example(subdir: &str) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples"),
            &dir.path().join(subdir),
        );
        Fixture {
            dir,
            subdir: subdir.to_owned(),
        }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join(&self.subdir)
    }

    fn write(&self, relative: &str, contents: &str) -> &Fixture {
        let path = self.root().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
        self
    }

    fn write_executable(&self, relative: &str, contents: &str) -> &Fixture {
        self.write(relative, contents);
        std::fs::set_permissions(
            self.root().join(relative),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        self
    }

    /// TOML put before the fixture's `pgo-build.toml` (tables, ahead of its `[[workload]]`s).
    fn prepend_config(&self, text: &str) -> &Fixture {
        let config = std::fs::read_to_string(self.root().join("pgo-build.toml")).unwrap();
        self.write("pgo-build.toml", &format!("{text}{config}"))
    }

    /// TOML put after the fixture's `pgo-build.toml` (more array entries, or tables).
    fn append_config(&self, text: &str) -> &Fixture {
        let config = std::fs::read_to_string(self.root().join("pgo-build.toml")).unwrap();
        self.write("pgo-build.toml", &format!("{config}{text}"))
    }

    /// `pgo-build.toml` with one train workload per command.
    fn config(&self, train_commands: &[&str]) -> &Fixture {
        let mut text = String::new();
        for (i, command) in train_commands.iter().enumerate() {
            text += &format!(
                "[[workload]]\nname = \"t{i}\"\nrole = \"train\"\ncommand = {command:?}\ntimeout = 120\n\n"
            );
        }
        self.write("pgo-build.toml", &text)
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_pgo-build"));
        command
            .arg("--manifest-path")
            .arg(self.root().join("Cargo.toml"))
            .args(args)
            .current_dir(self.root())
            // The test process's own flags must not leak into the fixture's builds.
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env_remove("CARGO_BUILD_RUSTFLAGS")
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("PGO_BUILD_LLVM_PROFDATA");
        command
    }

    fn run(&self, args: &[&str]) -> Run {
        self.run_with(self.command(args))
    }

    fn run_with(&self, mut command: Command) -> Run {
        Run {
            output: command.output().unwrap(),
        }
    }

    fn stage_bin(&self, stage: &str, name: &str) -> PathBuf {
        self.root()
            .join("target/pgo-build")
            .join(stage)
            .join("bin")
            .join(name)
    }

    fn report(&self) -> serde_json::Value {
        let text =
            std::fs::read_to_string(self.root().join("target/pgo-build/report.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    fn raw_profile_dir(&self, workload: &str) -> PathBuf {
        self.root()
            .join("target/pgo-build/profiles/raw")
            .join(workload)
    }
}

impl Run {
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    fn describe(&self) -> String {
        format!(
            "status: {}\n--- stdout\n{}\n--- stderr\n{}",
            self.output.status,
            self.stdout(),
            self.stderr()
        )
    }

    fn success(&self) -> &Run {
        assert!(
            self.output.status.success(),
            "expected success\n{}",
            self.describe()
        );
        self
    }

    fn failure(&self) -> &Run {
        assert!(
            !self.output.status.success(),
            "expected failure\n{}",
            self.describe()
        );
        self
    }

    fn stderr_contains(&self, text: &str) -> &Run {
        assert!(
            self.stderr().contains(text),
            "stderr lacks {text:?}\n{}",
            self.describe()
        );
        self
    }
}

/// Copies a fixture, pointing `@PGO_BUILD_RT@` in manifests at this repository's runtime crate.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            if entry.file_name() != "target" {
                copy_dir(&entry.path(), &target);
            }
        } else if entry.file_name() == "Cargo.toml" {
            let runtime = Path::new(env!("CARGO_MANIFEST_DIR")).join("../pgo-build-rt");
            let text = std::fs::read_to_string(entry.path()).unwrap();
            std::fs::write(
                &target,
                text.replace("@PGO_BUILD_RT@", runtime.to_str().unwrap())
                    // The example's own path, relative to the repository.
                    .replace("../../crates/pgo-build-rt", runtime.to_str().unwrap()),
            )
            .unwrap();
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn run_binary(path: &Path, args: &[&str]) -> String {
    let output = Command::new(path).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "{} {args:?} failed: {output:?}",
        path.display()
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn full_pipeline_produces_optimized_binaries_that_run() {
    let fixture = Fixture::new("twobins");
    fixture.config(&[
        "$PGO_BUILD_BIN_APP work 20000",
        "\"$PGO_BUILD_BIN_DIR/helper\"",
    ]);
    let run = fixture.run(&["run"]);
    run.success()
        .stderr_contains("pgo-build stage instrument start")
        .stderr_contains("pgo-build stage optimize ok");
    assert!(
        run.stdout().contains("│ optimize"),
        "no stage table\n{}",
        run.describe()
    );
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
    let stages: Vec<&str> = report["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
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
    fixture
        .run(&["run"])
        .failure()
        .stderr_contains("warning: `helper` wrote no profile: no training workload ran it")
        .stderr_contains("refusing to build with PGO")
        .stderr_contains("--allow-missing-profile");
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
head -c $(( $(stat -c %s "$real") / 3 )) "$real" > "$dir/${build_id}_1.profraw"
cp "$real" "$dir/0123abcd_1.profraw""#]);
    fixture.run(&["instrument"]).success();
    fixture.run(&["train"]).success();
    fixture
        .run(&["optimize"])
        .success()
        .stderr_contains("llvm-profdata cannot read it")
        .stderr_contains("not one of the current instrumented binaries (build id 0123abcd)");
    assert_eq!(
        fixture.report()["rejected_profiles"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    // Profile bytes count what is merged, not the excluded files.
    let merged: u64 = std::fs::read_dir(fixture.raw_profile_dir("t0"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|ext| ext == "profraw"))
        .filter(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            !name.ends_with("_1.profraw")
        })
        .map(|p| std::fs::metadata(p).unwrap().len())
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
    fixture
        .run_with(optimize)
        .failure()
        .stderr_contains("the build settings changed since the instrumented build")
        .stderr_contains("-Ccodegen-units=1");
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
    fixture
        .run_with(doctor)
        .failure()
        .stderr_contains("LLVM 14")
        .stderr_contains("does not match rustc's LLVM 22")
        .stderr_contains("apt-get install llvm-22")
        .stderr_contains("rustup component add llvm-tools");
}

#[test]
fn bad_config_is_an_error_naming_the_line() {
    let fixture = Fixture::new("twobins");
    fixture.write(
        "pgo-build.toml",
        "[[workload]]\nname = \"t\"\nrole = \"train\"\ncomand = \"true\"\n",
    );
    fixture
        .run(&["build"])
        .failure()
        .stderr_contains("pgo-build.toml, line 4")
        .stderr_contains("comand");
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
real=llvm-profdata-22
case "$1 $2 $3" in
"merge -o "*merged.profdata.partial)
    empty=$(mktemp); "$real" merge -o "$3" "$empty"; status=$?; rm -f "$empty"; exit $status ;;
"show "*/merged-*)
    if [ -n "$LIE_ABOUT_FUNCTIONS" ]; then echo "Total functions: 5"; exit 0; fi ;;
esac
exec "$real" "$@"
"#,
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
    // Every counted run is recorded, and the order alternates between rounds.
    let runs = holdout["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 14);
    assert_eq!(
        runs[0]["variant"], "optimized",
        "round 1 runs the reversed order"
    );
    assert_eq!(
        runs[2]["variant"], "baseline",
        "round 2 runs the reference first"
    );
    assert!(run.stdout().contains("slower"), "{}", run.describe());
}

#[test]
fn compare_does_not_call_equivalent_builds_faster() {
    // The binaries' work is negligible next to the sleep: both variants take the same time.
    let fixture = compared_fixture("$PGO_BUILD_BIN_APP work 10; sleep 0.1");
    fixture
        .run(&[
            "compare",
            "--workload",
            "holdout",
            "--rounds",
            "8",
            "--fail-if-slower",
        ])
        .success();
    let verdict =
        fixture.report()["compare"]["workloads"][0]["candidates"]["optimized"]["wall"]["verdict"]
            .clone();
    assert_ne!(verdict, "faster");
    assert_ne!(verdict, "slower");
}

#[test]
fn compare_refuses_variants_that_were_not_built() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 10"]);
    fixture.run(&["build"]).success();
    fixture
        .run(&["compare", "baseline", "optimized"])
        .failure()
        .stderr_contains("the optimized stage has not been built");
    fixture
        .run(&["compare", "baseline", "bolted"])
        .failure()
        .stderr_contains("unknown variant `bolted`");
}

/// The per-binary accounting `train` recorded for `binary`.
fn profile_figures(fixture: &Fixture, binary: &str) -> serde_json::Value {
    fixture.report()["profiles"][binary].clone()
}

#[test]
fn workers_stopped_by_sigterm_without_help_are_named_and_refused() {
    let fixture = Fixture::new("signals");
    fixture.config(&["$PGO_BUILD_BIN_SERVER TERM 2"]);
    fixture
        .run(&["run", "--no-compare"])
        .failure()
        .stderr_contains("`replica`: all 2 processes ended without writing a profile")
        .stderr_contains("refusing to build with PGO");
    // Children of an instrumented process leave no file at all when killed: only the recorded
    // starts show that they ran.
    let replica = profile_figures(&fixture, "replica");
    assert_eq!(replica["processes"], 2, "{replica}");
    assert_eq!(replica["died"], 2, "{replica}");
    assert_eq!(replica["valid_files"], 0);
    assert_eq!(profile_figures(&fixture, "server")["valid_files"], 1);
}

#[test]
fn pgo_build_rt_writes_the_profile_of_workers_stopped_by_sigterm() {
    let fixture = Fixture::new("signals");
    fixture.config(&["$PGO_BUILD_BIN_SERVER TERM 2"]);
    let run = fixture.run(&["run", "--no-compare", "--features", "rt", "-v"]);
    // pgo-build-rt's instrumented-only code differs from the profile by design: not a warning.
    run.success()
        .stderr_contains("of pgo_build_rt differ from the profile by design");
    assert!(
        !run.stderr()
            .contains("changed since the profile was recorded"),
        "{}",
        run.describe()
    );
    let replica = profile_figures(&fixture, "replica");
    assert_eq!(replica["valid_files"], 2, "{replica}");
    assert!(
        replica["covered_functions"].as_u64().unwrap() > 0,
        "{replica}"
    );
    // The worker still dies by SIGTERM, as without the runtime crate.
    let log =
        std::fs::read_to_string(fixture.root().join("target/pgo-build/logs/train-t0.log")).unwrap();
    assert!(log.contains("signal: 15 (SIGTERM)"), "{log}");
    assert!(fixture.stage_bin("optimized", "replica").exists());
}

#[test]
fn one_worker_of_three_ending_without_a_profile_is_a_warning_and_fails_strict() {
    let fixture = Fixture::new("signals");
    // Two replicas write their profile on SIGTERM (pgo-build-rt); the third is SIGKILLed.
    fixture.config(&["$PGO_BUILD_BIN_SERVER TERM 2 && $PGO_BUILD_BIN_SERVER KILL 1"]);
    fixture.run(&["instrument", "--features", "rt"]).success();
    fixture
        .run(&["train", "--features", "rt"])
        .success()
        .stderr_contains("1 of 3 processes of `replica` ended without writing a profile");
    let replica = profile_figures(&fixture, "replica");
    assert_eq!(replica["valid_files"], 2, "{replica}");
    fixture
        .run(&["train", "--features", "rt", "--strict"])
        .failure()
        .stderr_contains("1 of 3 processes of `replica` ended without writing a profile")
        .stderr_contains("--strict");
}

#[test]
fn pgo_build_rt_flush_keeps_counts_of_workers_killed_later() {
    let fixture = Fixture::new("signals");
    fixture.config(&["$PGO_BUILD_BIN_SERVER KILL 1 flush"]);
    fixture
        .run(&["run", "--no-compare", "--features", "rt"])
        .success();
    let replica = profile_figures(&fixture, "replica");
    assert_eq!(replica["valid_files"], 1, "{replica}");
}

#[test]
fn continuous_mode_keeps_counts_of_workers_killed_by_sigkill() {
    let fixture = Fixture::new("signals");
    fixture.config(&["$PGO_BUILD_BIN_SERVER KILL 2"]);
    let run = fixture.run(&["run", "--no-compare", "--continuous"]);
    run.success();
    // Value profiling is off on both sides: no "stale profile" warnings about value sites.
    assert!(
        !run.stderr().contains("Inconsistent number of value sites"),
        "{}",
        run.describe()
    );
    let optimized =
        std::fs::read_to_string(fixture.root().join("target/pgo-build/optimized/stage.json"))
            .unwrap();
    assert!(optimized.contains("-Cllvm-args=-disable-vp"), "{optimized}");
    let replica = profile_figures(&fixture, "replica");
    assert_eq!(replica["valid_files"], 2, "{replica}");
    assert!(
        replica["covered_functions"].as_u64().unwrap() > 0,
        "{replica}"
    );
    let flags = std::fs::read_to_string(
        fixture
            .root()
            .join("target/pgo-build/instrumented/stage.json"),
    )
    .unwrap();
    assert!(flags.contains("-runtime-counter-relocation"), "{flags}");

    // The same training without continuous mode loses both replicas.
    fixture
        .run(&["run", "--no-compare"])
        .failure()
        .stderr_contains("`replica`: all 2 processes ended without writing a profile");
}

#[test]
fn processes_a_workload_leaves_behind_are_stopped_and_reported() {
    let fixture = Fixture::new("signals");
    fixture.write(
        "pgo-build.toml",
        "[[workload]]\nname = \"leaves-one\"\nrole = \"train\"\ncommand = \"$PGO_BUILD_BIN_SERVER orphan\"\ngrace_period = \"2s\"\n",
    );
    fixture.run(&["instrument", "--features", "rt"]).success();
    fixture
        .run(&["train", "--features", "rt"])
        .success()
        .stderr_contains("pgo-build had to stop processes of workload `leaves-one`: replica (pid");
    let stopped = fixture.report()["training"][0]["stopped"].clone();
    assert_eq!(stopped.as_array().unwrap().len(), 1, "{stopped}");
    assert_eq!(stopped[0]["name"], "replica");
    assert_eq!(stopped[0]["signal"], "SIGTERM");
    // Stopped with SIGTERM, the replica wrote its profile through pgo-build-rt.
    assert_eq!(profile_figures(&fixture, "replica")["valid_files"], 1);
    // --strict turns the warning into a failure.
    fixture
        .run(&["train", "--features", "rt", "--strict"])
        .failure()
        .stderr_contains("--strict turns this warning into an error");
}

/// `pgo-build.toml` with BOLT enabled (plus `bolt_extra`) and one train workload per command.
fn bolt_fixture(train_commands: &[&str], bolt_extra: &str) -> Fixture {
    let fixture = Fixture::new("twobins");
    let mut text = format!("[bolt]\nenabled = true\n{bolt_extra}\n");
    for (i, command) in train_commands.iter().enumerate() {
        text +=
            &format!("[[workload]]\nname = \"t{i}\"\nrole = \"train\"\ncommand = {command:?}\n\n");
    }
    fixture.write("pgo-build.toml", &text);
    fixture
}

#[test]
fn bolted_binaries_run_and_match_the_baseline() {
    let fixture = bolt_fixture(
        &["$PGO_BUILD_BIN_APP work 20000 && $PGO_BUILD_BIN_HELPER"],
        "",
    );
    fixture
        .run(&["run", "--no-compare"])
        .success()
        .stderr_contains("pgo-build stage bolt ok");
    for (name, args) in [("app", &["work", "3000"][..]), ("helper", &[][..])] {
        let bolted = fixture.stage_bin("bolt", name);
        assert!(
            std::fs::symlink_metadata(&bolted)
                .unwrap()
                .file_type()
                .is_file()
        );
        assert_eq!(
            run_binary(&bolted, args),
            run_binary(&fixture.stage_bin("baseline", name), args),
            "{name}"
        );
    }
    let record = &fixture.report()["bolt"]["app"];
    assert_eq!(record["bolted"], true, "{record}");
    assert_eq!(record["input"], "optimized");
    assert!(
        record["functions_with_profile"]
            .as_str()
            .unwrap()
            .ends_with("functions"),
        "{record}"
    );
    // `compare` accepts the bolt variant.
    fixture
        .run(&["compare", "baseline", "bolt", "--rounds", "2"])
        .success();
    assert!(fixture.report()["compare"]["workloads"][0]["candidates"]["bolt"].is_object());
}

#[test]
fn a_binary_linked_without_relocations_is_refused_with_the_fix() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 1000 && $PGO_BUILD_BIN_HELPER"]);
    fixture.run(&["run", "--no-compare"]).success();
    fixture
        .run(&["bolt"])
        .failure()
        .stderr_contains("linked without relocations")
        .stderr_contains("set `[bolt] enabled = true`");
    assert!(!fixture.stage_bin("bolt", "app").exists());
}

#[test]
fn a_stripped_binary_is_refused_with_the_fix() {
    // Built stripped while BOLT was off, then handed to `bolt`.
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 1000"]);
    let mut build = fixture.command(&["build"]);
    build.env("CARGO_PROFILE_RELEASE_STRIP", "symbols");
    fixture.run_with(build).success();
    let mut bolt = fixture.command(&["bolt", "--without-pgo"]);
    bolt.env("CARGO_PROFILE_RELEASE_STRIP", "symbols");
    fixture
        .run_with(bolt)
        .failure()
        .stderr_contains("stripped (no symbol table)")
        .stderr_contains("no `strip` in the cargo profile");
}

#[test]
fn bolt_with_a_stripping_profile_is_refused_before_building() {
    let fixture = bolt_fixture(&["$PGO_BUILD_BIN_APP work 1000"], "");
    let manifest = std::fs::read_to_string(fixture.root().join("Cargo.toml")).unwrap();
    fixture.write(
        "Cargo.toml",
        &format!("{manifest}\n[profile.release]\nstrip = true\n"),
    );
    fixture
        .run(&["build"])
        .failure()
        .stderr_contains("the `release` profile strips symbols (strip = true in")
        .stderr_contains("strip = \"debuginfo\"");
}

#[test]
fn bolt_with_stripping_rustflags_is_refused_before_building() {
    let fixture = bolt_fixture(&["$PGO_BUILD_BIN_APP work 1000"], "");
    for flags in ["-Cstrip=symbols", "-C link-arg=-s"] {
        let mut command = fixture.command(&["build"]);
        command.env("RUSTFLAGS", flags);
        fixture
            .run_with(command)
            .failure()
            .stderr_contains("the rustflags (RUSTFLAGS) strip symbols")
            .stderr_contains("-Cstrip=debuginfo");
        assert!(
            !fixture
                .root()
                .join("target/pgo-build/baseline/cargo-target")
                .exists(),
            "refused only after building with {flags}"
        );
    }
}

#[test]
fn a_binary_no_workload_runs_is_named_and_not_bolted() {
    let fixture = bolt_fixture(&["$PGO_BUILD_BIN_APP work 5000"], "funcs = [\"main\"]");
    fixture.run(&["build"]).success();
    let run = fixture.run(&["-v", "bolt", "--without-pgo"]);
    run.success().stderr_contains("`helper`: no BOLT profile");
    // `[bolt] funcs` reaches llvm-bolt.
    run.stderr_contains("-funcs=main");
    let report = fixture.report();
    assert_eq!(report["bolt"]["helper"]["bolted"], false);
    assert_eq!(report["bolt"]["app"]["bolted"], true);
    assert_eq!(report["bolt"]["app"]["input"], "baseline");
    assert_eq!(
        std::fs::read(fixture.stage_bin("bolt", "helper")).unwrap(),
        std::fs::read(fixture.stage_bin("baseline", "helper")).unwrap(),
        "the un-BOLTed binary is staged as it was"
    );
}

/// The twobins fixture with one train and one holdout workload.
fn train_holdout_fixture(train: &str, holdout: &str) -> Fixture {
    let fixture = Fixture::new("twobins");
    write_train_holdout(&fixture, train, holdout);
    fixture
}

fn write_train_holdout(fixture: &Fixture, train: &str, holdout: &str) {
    fixture.write(
        "pgo-build.toml",
        &format!(
            "[[workload]]\nname = \"train\"\nrole = \"train\"\ncommand = {train:?}\n\n\
             [[workload]]\nname = \"holdout\"\nrole = \"holdout\"\ncommand = {holdout:?}\n"
        ),
    );
}

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
    assert_eq!(metadata["llvm_major"], 22);
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
    let stages: Vec<&str> = report["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(stages, ["doctor", "build", "optimize"]);
    assert!(fixture.stage_bin("optimized", "app").exists());

    // An edited function is reported stale by name.
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
        .success()
        .stderr_contains("Changed since the profile was recorded: app::collatz_steps");
    assert!(
        fixture.report()["staleness"]["changed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "app::collatz_steps")
    );

    // Above [pgo] max_stale it is refused.
    let config = std::fs::read_to_string(fixture.root().join("pgo-build.toml")).unwrap();
    fixture.write(
        "pgo-build.toml",
        &config.replace("[pgo]\n", "[pgo]\nmax_stale = 0.001\n"),
    );
    fixture
        .run(&["optimize"])
        .failure()
        .stderr_contains("the committed profile is stale");
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

/// Stage name → result ("ok", "cached", "failed") of the last `run`, from the report.
fn stage_results(fixture: &Fixture) -> Vec<(String, String)> {
    fixture.report()["stages"]
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
        .stderr_contains("pgo-build stage build cached");
    let results = stage_results(&fixture);
    for stage in ["build", "instrument", "train", "optimize", "compare"] {
        assert_eq!(result_of(&results, stage), "cached", "{stage}: {results:?}");
    }
    assert!(
        fixture.report()["compare"].is_object(),
        "cached stages keep their report sections"
    );
    // Each cached stage keeps the duration and time of the run that did its work.
    for stage in fixture.report()["stages"].as_array().unwrap() {
        if stage["result"] == "cached" {
            assert!(stage["duration_secs"].as_f64().unwrap() > 0.0, "{stage}");
            assert!(stage["ran_at_unix"].as_u64().is_some(), "{stage}");
        }
    }

    // Another number of rounds is another comparison; the builds stay cached.
    fixture.run(&["run", "--compare-rounds", "3"]).success();
    let results = stage_results(&fixture);
    assert_eq!(result_of(&results, "compare"), "ok");
    assert_eq!(result_of(&results, "optimize"), "cached");

    // --from re-runs from the given stage on.
    fixture
        .run(&["run", "--compare-rounds", "3", "--from", "optimize"])
        .success();
    let results = stage_results(&fixture);
    assert_eq!(result_of(&results, "train"), "cached");
    assert_eq!(result_of(&results, "optimize"), "ok");
    assert_eq!(result_of(&results, "compare"), "ok");

    // A changed source file rebuilds, and everything after it runs again.
    let main = fixture.root().join("app/src/main.rs");
    let source = std::fs::read_to_string(&main).unwrap();
    std::fs::write(&main, source.replace("usage: app", "usage (changed): app")).unwrap();
    fixture.run(&["run", "--compare-rounds", "3"]).success();
    let results = stage_results(&fixture);
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
    let results = stage_results(&fixture);
    assert_eq!(result_of(&results, "build"), "cached", "{results:?}");
    assert_eq!(result_of(&results, "instrument"), "cached", "{results:?}");
    assert_eq!(result_of(&results, "train"), "ok", "{results:?}");
    assert_eq!(result_of(&results, "optimize"), "ok", "{results:?}");
}

#[test]
fn a_concurrent_run_is_refused_while_the_first_holds_the_lock() {
    let fixture = Fixture::new("twobins");
    fixture.config(&[
        "touch training-started; sleep 3; $PGO_BUILD_BIN_APP work 100 && $PGO_BUILD_BIN_HELPER",
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
    fixture
        .run(&["build"])
        .failure()
        .stderr_contains("another pgo-build is working in")
        .stderr_contains(&format!("pid {}", first.id()));
    assert!(first.wait().unwrap().success());
    fixture.run(&["build"]).success();
}

fn report_schema() -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/report.schema.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Checks `value` against the subset of JSON Schema that docs/report.schema.json uses: type,
/// enum, const, required, properties, additionalProperties, items.
fn check_schema(value: &serde_json::Value, schema: &serde_json::Value, path: &str) {
    use serde_json::Value;
    if let Some(kinds) = schema.get("type") {
        let kinds: Vec<&str> = match kinds {
            Value::String(kind) => vec![kind.as_str()],
            Value::Array(kinds) => kinds.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let matches = |kind: &str| match kind {
            "object" => value.is_object(),
            "array" => value.is_array(),
            "string" => value.is_string(),
            "integer" => value.is_u64() || value.is_i64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            "null" => value.is_null(),
            _ => false,
        };
        assert!(
            kinds.iter().any(|k| matches(k)),
            "{path}: {value} is not {kinds:?}"
        );
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
        assert!(
            allowed.contains(value),
            "{path}: {value} not in {allowed:?}"
        );
    }
    if let Some(constant) = schema.get("const") {
        assert_eq!(value, constant, "{path}");
    }
    if let Value::Object(object) = value {
        for key in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            assert!(
                object.contains_key(key.as_str().unwrap()),
                "{path}: missing {key}"
            );
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        for (key, item) in object {
            match (
                properties.and_then(|p| p.get(key)),
                schema.get("additionalProperties"),
            ) {
                (Some(sub), _) => check_schema(item, sub, &format!("{path}.{key}")),
                (None, Some(Value::Bool(false))) => panic!("{path}: unexpected key {key}"),
                (None, Some(sub @ Value::Object(_))) => {
                    check_schema(item, sub, &format!("{path}.{key}"))
                }
                _ => {}
            }
        }
    }
    if let (Value::Array(items), Some(sub)) = (value, schema.get("items")) {
        for (i, item) in items.iter().enumerate() {
            check_schema(item, sub, &format!("{path}[{i}]"));
        }
    }
}

#[test]
fn the_report_matches_its_schema_and_renders_as_html_and_markdown() {
    let fixture = train_holdout_fixture(
        "$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_HELPER",
        "$PGO_BUILD_BIN_APP work 3000",
    );
    let summary = fixture.root().join("step-summary.md");
    let mut run = fixture.command(&["run", "--compare-rounds", "2"]);
    run.env("GITHUB_STEP_SUMMARY", &summary);
    fixture.run_with(run).success();
    check_schema(&fixture.report(), &report_schema(), "report");
    assert!(
        std::fs::read_to_string(&summary)
            .unwrap()
            .contains("| optimize | ok |")
    );

    let page = fixture.root().join("report.html");
    fixture
        .run(&["report", "--html", page.to_str().unwrap()])
        .success();
    let html = std::fs::read_to_string(&page).unwrap();
    let mut reader = quick_xml::Reader::from_str(&html);
    let mut elements = 0;
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(quick_xml::events::Event::Start(_) | quick_xml::events::Event::Empty(_)) => {
                elements += 1
            }
            Ok(_) => {}
            Err(err) => panic!(
                "report.html is not well-formed at {}: {err}",
                reader.buffer_position()
            ),
        }
    }
    assert!(elements > 50, "{elements} elements");
    for text in [
        "<svg",
        "instrument",
        "optimize",
        "compare",
        "A/B comparison",
        "holdout (holdout): optimized vs baseline",
    ] {
        assert!(html.contains(text), "report.html lacks {text:?}");
    }
    let duration = fixture.report()["stages"][1]["duration_secs"]
        .as_f64()
        .unwrap();
    assert!(
        html.contains(&format!("{duration:.2}s")),
        "the build's duration is on the page"
    );

    let run = fixture.run(&["report", "--markdown"]);
    run.success();
    assert!(
        run.stdout()
            .contains("| Stage | Result | Duration | Share |"),
        "{}",
        run.describe()
    );
    let run = fixture.run(&["report", "--json"]);
    let json: serde_json::Value = serde_json::from_str(&run.stdout()).unwrap();
    assert_eq!(
        json["schema_version"],
        report_schema()["properties"]["schema_version"]["const"]
    );
}

fn host_triple() -> String {
    let output = Command::new("rustc").arg("-vV").output().unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("host: "))
        .unwrap()
        .to_owned()
}

/// The links the wrapper logged for a stage.
fn links(fixture: &Fixture, stage: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(
        fixture
            .root()
            .join("target/pgo-build")
            .join(stage)
            .join("links.jsonl"),
    )
    .unwrap_or_default()
    .lines()
    .map(|line| serde_json::from_str(line).unwrap())
    .collect()
}

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
        fixture.report()["stages"][0]["peak_memory_bytes"]
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
        run.stderr().matches("cargo build of 1 binaries").count(),
        2,
        "{}",
        run.describe()
    );
    assert!(
        fixture.stage_bin("baseline", "app").exists()
            && fixture.stage_bin("baseline", "helper").exists()
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
        .stderr_contains("expected a number of rounds (at least 1) or `auto`");
}

// --- Nothing stale, half-done or left over is trusted ---

/// Waits up to 60 s for a file a workload writes, and returns its trimmed contents.
fn wait_for_file(path: &Path) -> String {
    for _ in 0..600 {
        if let Ok(text) = std::fs::read_to_string(path)
            && !text.trim().is_empty()
        {
            return text.trim().to_owned();
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("{} was never written", path.display());
}

/// Whether `pid` is a running process (zombies have ended).
fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat[stat.rfind(')').unwrap() + 1..]
            .split_whitespace()
            .next();
        state != Some("Z")
    })
}

/// Waits up to 30 s for `pid` to end.
fn ended(pid: &str) -> bool {
    for _ in 0..300 {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    false
}

/// A train workload that runs app, records its shell's pid and that of a process that leaves
/// the process group (`setsid`), then runs until stopped.
fn long_training_config(fixture: &Fixture) {
    let root = fixture.root().display().to_string();
    fixture.write(
        "pgo-build.toml",
        &format!(
            r#"[[workload]]
name = "long"
role = "train"
command = '"$PGO_BUILD_BIN_APP" work 1000; setsid sleep 300 & echo $! > "{root}/escaped.pid"; echo $$ > "{root}/shell.pid"; sleep 300'
timeout = 600
grace_period = "2s"
"#
        ),
    );
}

#[test]
fn compare_refuses_the_old_binaries_of_an_optimize_that_failed() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_HELPER"]);
    fixture.run(&["run", "--no-compare"]).success();
    // Training no longer runs helper: optimize refuses, and its previous binaries stay on disk.
    fixture.config(&["$PGO_BUILD_BIN_APP work 2000"]);
    fixture.run(&["train"]).success();
    fixture
        .run(&["optimize"])
        .failure()
        .stderr_contains("refusing to build with PGO");
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
    assert!(
        !fixture
            .root()
            .join("target/pgo-build/logs/train-t1.log")
            .exists()
    );
}

#[test]
fn interrupting_training_stops_the_workload_and_nothing_of_it_is_used() {
    for (signal, code) in [("INT", 130), ("TERM", 143)] {
        let fixture = Fixture::new("twobins");
        long_training_config(&fixture);
        fixture.run(&["instrument"]).success();
        let child = fixture
            .command(&["train"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let shell = wait_for_file(&fixture.root().join("shell.pid"));
        let escaped = wait_for_file(&fixture.root().join("escaped.pid"));
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success());
        let run = Run {
            output: child.wait_with_output().unwrap(),
        };
        assert_eq!(run.output.status.code(), Some(code), "{}", run.describe());
        run.stderr_contains(&format!("interrupted by SIG{signal} while workload `long`"))
            .stderr_contains(&format!("(pid {escaped}, SIGTERM)"))
            .stderr_contains("run the same command again");
        assert!(
            ended(&shell),
            "the workload's shell {shell} is still running"
        );
        assert!(
            ended(&escaped),
            "the setsid'd process {escaped} is still running"
        );
        fixture
            .run(&["optimize"])
            .failure()
            .stderr_contains("the last training run of `long`")
            .stderr_contains("was interrupted");
    }
}

#[test]
fn processes_left_by_a_killed_pgo_build_are_stopped_by_the_next_command() {
    let fixture = Fixture::new("twobins");
    long_training_config(&fixture);
    fixture.run(&["instrument"]).success();
    let mut child = fixture.command(&["train"]).spawn().unwrap();
    let shell = wait_for_file(&fixture.root().join("shell.pid"));
    let escaped = wait_for_file(&fixture.root().join("escaped.pid"));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        alive(&shell) && alive(&escaped),
        "SIGKILL leaves the workload running"
    );
    fixture
        .run(&["doctor"])
        .success()
        .stderr_contains("ended while workload `long` ran against the instrumented binaries")
        .stderr_contains(&format!("(pid {escaped}"));
    assert!(ended(&shell) && ended(&escaped));
    fixture
        .run(&["optimize"])
        .failure()
        .stderr_contains("was interrupted");
}

#[test]
fn processes_that_leave_the_process_group_are_stopped_and_reported() {
    let fixture = Fixture::new("twobins");
    let root = fixture.root().display().to_string();
    fixture.config(&[&format!(
        "$PGO_BUILD_BIN_APP work 1000 && $PGO_BUILD_BIN_HELPER; setsid sleep 300 & echo $! > {root}/escaped.pid"
    )]);
    fixture.run(&["instrument"]).success();
    let run = fixture.run(&["train"]);
    let escaped = wait_for_file(&fixture.root().join("escaped.pid"));
    // Found while still `setsid` or already `sleep`: the pid is what identifies it.
    run.success()
        .stderr_contains(&format!("(pid {escaped}, SIGTERM)"));
    assert!(ended(&escaped));
}

#[test]
fn profiles_changed_after_training_are_refused_and_train_is_not_reused() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_HELPER"]);
    fixture.run(&["run", "--no-compare"]).success();
    // Every raw profile destroyed (truncated to 0 bytes) after training completed.
    for entry in std::fs::read_dir(fixture.raw_profile_dir("t0")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "profraw") {
            std::fs::write(&path, b"").unwrap();
        }
    }
    fixture
        .run(&["optimize"])
        .failure()
        .stderr_contains("the raw profiles of `t0` changed after its training run completed")
        .stderr_contains("pgo-build train t0");
    fixture.run(&["run", "--no-compare"]).success();
    let results = stage_results(&fixture);
    assert_eq!(result_of(&results, "train"), "ok", "{results:?}");
    assert_eq!(result_of(&results, "optimize"), "ok", "{results:?}");
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
    assert!(!fixture.root().join("target/pgo-build/baseline").exists());
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
        .stderr_contains("pgo-build stage optimize ok");
    assert!(fixture.stage_bin("optimized", "app").exists());
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
        .root()
        .join("target/pgo-build/optimized/cargo-target/x86_64-unknown-linux-gnu/release/deps");
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

/// The example's binaries with two train workloads, one of which splits itself in two: three
/// runs to shard.
const SHARDED_EXAMPLE_CONFIG: &str = r#"
[build]
bins = ["coordinator", "worker"]

[[workload]]
name = "small"
role = "train"
command = '"$PGO_BUILD_BIN_COORDINATOR" --queries workloads/train.queries --rows 60000 --seed 1 --workers 2'

[[workload]]
name = "split"
role = "train"
shards = 2
command = '"$PGO_BUILD_BIN_COORDINATOR" --queries workloads/train.queries --rows 30000 --seed $((3 + PGO_BUILD_SHARD_INDEX)) --workers 1 && echo "part $PGO_BUILD_SHARD_INDEX of $PGO_BUILD_SHARD_COUNT"'
"#;

fn profile_text(path: &Path) -> String {
    let output = Command::new("llvm-profdata-22")
        .args(["show", "--all-functions", "--counts"])
        .arg(path)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

fn merged_profile(fixture: &Fixture) -> PathBuf {
    let dir = fixture.root().join("target/pgo-build/profiles");
    let found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("merged-") && name.ends_with(".profdata")
        })
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    found[0].clone()
}

/// The CI flow in three checkouts at three different paths: one job instruments and packs,
/// a training job unpacks and runs two shards into bundles, a third merges and optimizes.
/// The reference is what one machine makes of the same raw profiles: the training job's own
/// local `optimize` over both shards' runs.
#[test]
fn sharded_training_in_three_checkouts_gives_the_single_machine_build() {
    let artifacts = tempfile::tempdir().unwrap();
    let pack = artifacts.path().join("instrumented.tar.zst");
    let bundle = |i: usize| artifacts.path().join(format!("shard-{i}.pgo"));

    let instrument_job = Fixture::example("instrument-job");
    instrument_job.write("pgo-build.toml", SHARDED_EXAMPLE_CONFIG);
    instrument_job.run(&["instrument"]).success();
    instrument_job
        .run(&["pack", "instrumented", "--output", pack.to_str().unwrap()])
        .success()
        .stderr_contains("packed the instrumented stage (2 binaries)");

    let train_job = Fixture::example("ci/runner/work/train-job");
    train_job.write("pgo-build.toml", SHARDED_EXAMPLE_CONFIG);
    // Nothing is built here: the unpacked binaries are trained.
    train_job.run(&["unpack", pack.to_str().unwrap()]).success();
    train_job
        .run(&[
            "train",
            "--shard",
            "1/2",
            "--bundle",
            bundle(1).to_str().unwrap(),
        ])
        .success()
        .stderr_contains("shard 1/2: small, split.part2of2")
        .stderr_contains("wrote the bundle of shard 1/2");
    assert!(
        std::fs::read_to_string(
            train_job
                .root()
                .join("target/pgo-build/logs/train-split.part2of2.log")
        )
        .unwrap()
        .contains("part 1 of 2"),
        "PGO_BUILD_SHARD_INDEX/COUNT reach the workload"
    );
    train_job
        .run(&[
            "train",
            "--shard",
            "2/2",
            "--bundle",
            bundle(2).to_str().unwrap(),
        ])
        .success()
        .stderr_contains("shard 2/2: split.part1of2");
    assert!(
        !train_job.root().join("target/pgo-build/baseline").exists()
            && !train_job
                .root()
                .join("target/pgo-build/instrumented/cargo-target")
                .exists(),
        "the training job built something"
    );

    let merge_job = Fixture::example("m");
    merge_job.write("pgo-build.toml", SHARDED_EXAMPLE_CONFIG);
    let merged = merge_job.run(&[
        "merge",
        bundle(2).to_str().unwrap(),
        bundle(1).to_str().unwrap(),
    ]);
    merged
        .success()
        .stderr_contains("merged 2 bundles (4 profiles)");
    // Every shard's accounting, and the totals.
    assert!(
        merged.stdout().contains("┆ 1/2") && merged.stdout().contains("┆ all"),
        "{}",
        merged.describe()
    );
    let merge_optimize = merge_job.run(&["-v", "optimize"]);
    merge_optimize
        .success()
        .stderr_contains("using the profile merged from 2 training bundles");
    let report = merge_job.report();
    assert_eq!(report["bundles"]["bundles"].as_array().unwrap().len(), 2);
    assert_eq!(report["profiles"]["worker"]["valid_files"], 4, "{report:#}");

    // The single-machine reference from the same raw profiles.
    let train_optimize = train_job.run(&["-v", "optimize"]);
    train_optimize.success();
    // The same profile is named by the same path from both checkouts (a compile cache keys
    // on rustc's command line).
    let profile_use = |run: &Run| {
        let stderr = run.stderr();
        let start = stderr
            .find("-Cprofile-use=")
            .expect("no -Cprofile-use in -v output");
        stderr[start..]
            .split(['\x1f', '\'', ' '])
            .next()
            .unwrap()
            .to_owned()
    };
    assert_eq!(profile_use(&merge_optimize), profile_use(&train_optimize));
    assert!(!profile_use(&train_optimize).contains(train_job.root().to_str().unwrap()));
    let (single, sharded) = (merged_profile(&train_job), merged_profile(&merge_job));
    assert_eq!(profile_text(&single), profile_text(&sharded));
    assert_eq!(
        std::fs::read(&single).unwrap(),
        std::fs::read(&sharded).unwrap()
    );
    for name in ["coordinator", "worker"] {
        assert!(
            std::fs::read(train_job.stage_bin("optimized", name)).unwrap()
                == std::fs::read(merge_job.stage_bin("optimized", name)).unwrap(),
            "the optimized {name} of the merge job differs from the single-machine one"
        );
    }

    // A local training supersedes the merged bundles.
    merge_job.run(&["instrument"]).success();
    assert!(
        !merge_job
            .root()
            .join("target/pgo-build/profiles/bundles.json")
            .exists()
    );
}

/// A bundle with one manifest field replaced: another toolchain cannot be installed here.
fn rewrite_bundle(from: &Path, to: &Path, edit: impl Fn(&mut serde_json::Value)) {
    let mut archive =
        tar::Archive::new(zstd::Decoder::new(std::fs::File::open(from).unwrap()).unwrap());
    let mut builder =
        tar::Builder::new(zstd::Encoder::new(std::fs::File::create(to).unwrap(), 3).unwrap());
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().into_owned();
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut data).unwrap();
        if path == Path::new("manifest.json") {
            let mut manifest: serde_json::Value = serde_json::from_slice(&data).unwrap();
            edit(&mut manifest);
            data = serde_json::to_vec(&manifest).unwrap();
        }
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder
            .append_data(&mut header, &path, data.as_slice())
            .unwrap();
    }
    builder.into_inner().unwrap().finish().unwrap();
}

#[test]
fn merge_refuses_bundles_of_other_trainings_and_duplicate_shards_and_warns_about_missing_ones() {
    let fixture = Fixture::new("twobins");
    fixture.config(&[
        "$PGO_BUILD_BIN_APP work 1000",
        "$PGO_BUILD_BIN_HELPER",
        "$PGO_BUILD_BIN_APP work 2000",
    ]);
    fixture.run(&["instrument"]).success();
    let dir = tempfile::tempdir().unwrap();
    let bundle = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    for i in 1..=3 {
        fixture
            .run(&[
                "train",
                "--shard",
                &format!("{i}/3"),
                "--bundle",
                &bundle(&format!("s{i}.pgo")),
            ])
            .success();
    }
    fixture
        .run(&[
            "merge",
            &bundle("s1.pgo"),
            &bundle("s2.pgo"),
            &bundle("s1.pgo"),
        ])
        .failure()
        .stderr_contains("are both shard 1/3");
    fixture
        .run(&["merge", &bundle("s1.pgo"), &bundle("s3.pgo")])
        .success()
        .stderr_contains("shard 2/3 missing");
    fixture
        .run(&["--strict", "merge", &bundle("s1.pgo"), &bundle("s3.pgo")])
        .failure()
        .stderr_contains("shard 2/3 missing");

    rewrite_bundle(
        Path::new(&bundle("s2.pgo")),
        Path::new(&bundle("other-rustc.pgo")),
        |m| {
            m["rustc"] = "rustc 1.94.0 (4a4ef493e 2026-03-02)".into();
        },
    );
    fixture
        .run(&[
            "merge",
            &bundle("s1.pgo"),
            &bundle("other-rustc.pgo"),
            &bundle("s3.pgo"),
        ])
        .failure()
        .stderr_contains("refusing to merge bundles of different trainings")
        .stderr_contains("rustc: ")
        .stderr_contains("rustc 1.94.0");

    // Shard 2 trained by an instrumented build with other codegen settings.
    let mut instrument = fixture.command(&["instrument"]);
    instrument.env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "3");
    fixture.run_with(instrument).success();
    let mut train = fixture.command(&[
        "train",
        "--shard",
        "2/3",
        "--bundle",
        &bundle("other-settings.pgo"),
    ]);
    train.env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "3");
    fixture.run_with(train).success();
    fixture
        .run(&[
            "merge",
            &bundle("s1.pgo"),
            &bundle("other-settings.pgo"),
            &bundle("s3.pgo"),
        ])
        .failure()
        .stderr_contains("settings_fingerprint: ")
        .stderr_contains("instrumented build: ");
    // A bundle whose settings differ from this checkout's is refused too, naming the setting.
    let mut merge = fixture.command(&["merge", &bundle("other-settings.pgo")]);
    merge.env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "5");
    fixture
        .run_with(merge)
        .failure()
        .stderr_contains("refusing to merge")
        .stderr_contains("profile settings");
    // Not a bundle at all.
    std::fs::write(dir.path().join("junk.pgo"), "not an archive").unwrap();
    fixture
        .run(&["merge", &bundle("junk.pgo")])
        .failure()
        .stderr_contains("junk.pgo");
}

#[test]
fn unpack_refuses_a_pack_for_other_settings_and_train_refuses_a_bad_shard() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 1000"]);
    fixture.run(&["instrument"]).success();
    let dir = tempfile::tempdir().unwrap();
    let pack = dir.path().join("i.tar.zst");
    fixture
        .run(&["pack", "instrumented", "-o", pack.to_str().unwrap()])
        .success();
    // A damaged pack is refused and leaves the instrumented stage there as it was.
    let data = std::fs::read(&pack).unwrap();
    let damaged = dir.path().join("damaged.tar.zst");
    std::fs::write(&damaged, &data[..data.len() - 200]).unwrap();
    fixture
        .run(&["unpack", damaged.to_str().unwrap()])
        .failure()
        .stderr_contains("is damaged or truncated");
    fixture.run(&["train"]).success();
    let other = Fixture::new("twobins");
    other.config(&["$PGO_BUILD_BIN_APP work 1000"]);
    let mut unpack = other.command(&["unpack", pack.to_str().unwrap()]);
    unpack.env("CARGO_PROFILE_RELEASE_LTO", "fat");
    other
        .run_with(unpack)
        .failure()
        .stderr_contains("refusing to unpack")
        .stderr_contains("profile settings");
    assert!(!other.stage_bin("instrumented", "app").exists());
    other.run(&["unpack", pack.to_str().unwrap()]).success();
    assert!(other.stage_bin("instrumented", "app").is_file());
    other
        .run(&["train", "--shard", "3/2", "--bundle", "x.pgo"])
        .failure()
        .stderr_contains("expected I/N with 1 <= I <= N");
    other
        .run(&["train", "--shard", "1/2"])
        .failure()
        .stderr_contains("--bundle");
}

/// sccache as RUSTC_WRAPPER through pgo-build's stages: a clean rebuild is served from the
/// cache, also in a checkout at another path (pgo-build's own files are not named by absolute
/// paths on rustc's command line), and report.json records the figures per stage.
#[test]
fn sccache_serves_clean_rebuilds_in_the_same_and_another_checkout() {
    let cache = tempfile::tempdir().unwrap();
    // A server of this test's own, on a port of its own.
    let port = (4300 + std::process::id() % 1000).to_string();
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

    std::fs::remove_dir_all(first.root().join("target")).unwrap();
    with_sccache(&first, &["build", "--features", "rt"]).success();
    let warm = stage_cache(&first, "baseline");
    assert_eq!(warm["hits"], cold["misses"], "{warm}");
    assert_eq!(warm["misses"], 0, "{warm}");

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

fn total_count(profile: &Path) -> u64 {
    let output = Command::new("llvm-profdata-22")
        .args(["show", "--detailed-summary"])
        .arg(profile)
        .output()
        .unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix("Total count:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn merge_weights_multiply_each_bundles_counts() {
    let fixture = Fixture::new("twobins");
    // Shard 2 does ten times the work of shard 1.
    fixture.config(&[
        "$PGO_BUILD_BIN_APP work 1000",
        "$PGO_BUILD_BIN_APP work 10000",
    ]);
    fixture.run(&["instrument"]).success();
    let dir = tempfile::tempdir().unwrap();
    let bundle = |i: usize| {
        dir.path()
            .join(format!("s{i}.pgo"))
            .to_str()
            .unwrap()
            .to_owned()
    };
    for i in 1..=2 {
        let shard = format!("{i}/2");
        fixture
            .run(&["train", "--shard", &shard, "--bundle", &bundle(i)])
            .success();
    }
    let merged_total = |args: &[&str]| {
        fixture.run(args).success();
        let report = fixture.report();
        let weights: Vec<u64> = report["bundles"]["bundles"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["weight"].as_u64().unwrap())
            .collect();
        let totals: Vec<u64> = report["bundles"]["bundles"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["total_count"].as_u64().unwrap())
            .collect();
        (weights, totals, total_count(&merged_profile(&fixture)))
    };
    let (weights, totals, sum) = merged_total(&["merge", &bundle(1), &bundle(2)]);
    assert_eq!(weights, [1, 1]);
    assert_eq!(sum, totals[0] + totals[1], "counts add up by default");
    assert!(totals[1] > 5 * totals[0], "{totals:?}");

    let (weights, totals, sum) =
        merged_total(&["merge", "--weights", "equal", &bundle(1), &bundle(2)]);
    let expected = (totals[1] as f64 / totals[0] as f64).round() as u64;
    assert_eq!(weights, [expected, 1]);
    assert_eq!(sum, expected * totals[0] + totals[1]);

    let weight = format!("{}=3", bundle(2));
    let (weights, totals, sum) =
        merged_total(&["merge", "--weight", &weight, &bundle(2), &bundle(1)]);
    assert_eq!(weights, [1, 3], "in shard order, whatever the order given");
    assert_eq!(sum, totals[0] + 3 * totals[1]);
}

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
        let deps = fixture.root().join(format!(
            "target/pgo-build/{stage}/cargo-target/{}/release/deps",
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
                .root()
                .join(format!(
                    "target/pgo-build/{stage}/cargo-target/criterion/total_2000/new/estimates.json"
                ))
                .is_file(),
            "criterion wrote no results for the {stage} stage in its own home"
        );
    }
    assert!(!fixture.root().join("target/criterion").exists());
}

fn git(dir: &Path, args: &[&str]) {
    let output = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {output:?}");
}

#[test]
fn unpack_refuses_a_pack_of_another_commit() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 1000"]);
    fixture.write(".gitignore", "target\n*.tar.zst\nCargo.lock\n");
    git(&fixture.root(), &["init", "-q"]);
    git(&fixture.root(), &["add", "-A"]);
    git(&fixture.root(), &["commit", "-qm", "one"]);
    fixture.run(&["instrument"]).success();
    let pack = fixture.root().join("i.tar.zst");
    fixture
        .run(&["pack", "instrumented", "-o", pack.to_str().unwrap()])
        .success();

    let other = Fixture::at("twobins", "clone");
    std::fs::remove_dir_all(other.root()).unwrap();
    git(
        other.dir.path(),
        &[
            "clone",
            "-q",
            fixture.root().to_str().unwrap(),
            other.root().to_str().unwrap(),
        ],
    );
    other.write("app/src/extra.rs", "// a later change\n");
    git(&other.root(), &["add", "-A"]);
    git(&other.root(), &["commit", "-qm", "two"]);
    other
        .run(&["unpack", pack.to_str().unwrap()])
        .failure()
        .stderr_contains("git revision: the pack")
        .stderr_contains("Unpack into a checkout of the same commit");
    git(&other.root(), &["reset", "-q", "--hard", "HEAD~1"]);
    other.run(&["unpack", pack.to_str().unwrap()]).success();
}

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
        let app = fixture
            .root()
            .join("target/pgo-build/explore")
            .join(name)
            .join("bin/app");
        assert_eq!(run_binary(&app, &["work", "3000"]), "work 3000: 216\n");
    }
    // The pipeline's own settings are built where `run` builds them.
    assert!(fixture.stage_bin("optimized", "app").is_file());
    let cgu1 = explored(&fixture, "pgo+cgu1");
    assert_eq!(cgu1["profile_overrides"]["codegen-units"], "1");
    assert_eq!(
        cgu1["stages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["stage"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["instrument", "train", "optimize"]
    );
    assert!(
        cgu1["vs_pgo"]["workloads"]["holdout"]["pairs"] == 2,
        "{cgu1}"
    );

    // Another variant: only it is built and measured; the others are reused.
    let second = fixture.run(&["explore", "--variants", "pgo+cgu1,opt1", "--rounds", "2"]);
    second
        .success()
        .stderr_contains("2 variants measured before against the same builds and workloads")
        .stderr_contains("comparing baseline vs pgo vs opt1 over 1 workloads");
    assert_eq!(
        second
            .stderr()
            .matches("pgo-build stage instrument cached")
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
    // Two rounds cannot show pgo faster than the baseline: the baseline is recommended, and
    // there is nothing to apply.
    let before = std::fs::read_to_string(fixture.root().join("pgo-build.toml")).unwrap();
    fixture
        .run(&[
            "explore",
            "--variants",
            "pgo+cgu1,opt1",
            "--rounds",
            "2",
            "--apply",
        ])
        .failure()
        .stderr_contains(
            "--apply: nothing was applied, because the recommendation is `baseline`, without PGO",
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
        .run(&["explore", "--variants", "opt3", "--rounds", "7", "--apply"])
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
    assert!(
        !fixture
            .root()
            .join("target/pgo-build/bolt/stage.json")
            .exists()
    );
}

fn rustc_log(fixture: &Fixture, stage: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(
        fixture
            .root()
            .join("target/pgo-build")
            .join(stage)
            .join("rustc.jsonl"),
    )
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
fn rustc_estimates_are_learned_from_one_build_and_used_by_the_next() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 10"]);
    fixture.run(&["build"]).success();
    let first = rustc_record(&rustc_log(&fixture, "baseline"), "app/app");
    assert_eq!(first["guessed"], true, "{first}");
    assert_eq!(first["kind"], "bin");
    let peak = first["peak_bytes"].as_u64().unwrap();
    assert!(peak > 10 << 20, "rustc's peak RSS is measured: {first}");
    let estimates: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            fixture
                .root()
                .join("target/pgo-build/baseline/rustc-estimates.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(estimates["app/app|bin"], peak);
    let summary = &fixture.report()["rustc_memory"]["baseline"];
    assert_eq!(summary["invocations"], 2, "{summary}");
    assert!(summary["heaviest"][0]["peak_bytes"].as_u64().unwrap() > 0);

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
    for column in ["Waiting for memory", "Estimate error", "app/app"] {
        assert!(shown.stdout().contains(column), "{}", shown.describe());
    }

    // A damaged estimates file: said, guesses stand in, and the build writes it again.
    let estimates_file = fixture
        .root()
        .join("target/pgo-build/baseline/rustc-estimates.json");
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
    let rewritten: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&estimates_file).unwrap()).unwrap();
    assert!(rewritten["app/app|bin"].as_u64().unwrap() > 0);
}

#[test]
fn a_crate_estimated_above_the_whole_budget_runs_alone_and_is_named() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 10"]);
    fixture.prepend_config("[build]\nmemory_budget = \"64M\"\n\n");
    fixture
        .run(&["build"])
        .success()
        .stderr_contains("crate `app/app` (bin) is estimated at 1.0 GiB, above the whole memory budget for rustc (0 B of 64.0 MiB): it ran alone");
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
    assert!(!fixture.root().join("target/pgo-build/baseline").exists());
}

const MUSL: &str = "x86_64-unknown-linux-musl";
const AARCH64: &str = "aarch64-unknown-linux-gnu";

/// The ELF header's machine (62 x86_64, 183 aarch64) and whether the binary asks for a program
/// interpreter (a dynamic loader): a static binary has no PT_INTERP program header.
fn elf_machine_and_interpreter(path: &Path) -> (u16, bool) {
    let data = std::fs::read(path).unwrap();
    assert_eq!(&data[..4], b"\x7fELF", "{} is not ELF", path.display());
    let u16_at = |at: usize| u16::from_le_bytes([data[at], data[at + 1]]);
    let phoff = u64::from_le_bytes(data[0x20..0x28].try_into().unwrap()) as usize;
    let (entry_size, count) = (u16_at(0x36) as usize, u16_at(0x38) as usize);
    let interpreter = (0..count).any(|i| {
        let at = phoff + i * entry_size;
        u32::from_le_bytes(data[at..at + 4].try_into().unwrap()) == 3
    });
    (u16_at(18), interpreter)
}

fn target_stage_bin(fixture: &Fixture, triple: &str, stage: &str, name: &str) -> PathBuf {
    fixture
        .root()
        .join("target/pgo-build")
        .join(triple)
        .join(stage)
        .join("bin")
        .join(name)
}

fn target_report(fixture: &Fixture, triple: &str) -> serde_json::Value {
    let path = fixture
        .root()
        .join("target/pgo-build")
        .join(triple)
        .join("report.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_static_musl_target_is_trained_and_optimized_in_its_own_stages() {
    let fixture = Fixture::new("twobins");
    fixture
        .config(&["$PGO_BUILD_BIN_APP work 20000 && $PGO_BUILD_BIN_HELPER"])
        .prepend_config(&format!(
            "[build]\ntargets = [\"{MUSL}\"]\n\n[bolt]\nenabled = true\n\n"
        ));
    fixture
        .run(&["run", "--no-compare"])
        .success()
        .stderr_contains(&format!("pgo-build target {MUSL}"))
        // BOLT's instrumented static binaries never write a profile: named, staged as they are.
        .stderr_contains(&format!("BOLT skipped for {MUSL}"))
        .stderr_contains("links its C runtime statically");
    assert!(
        !fixture.root().join("target/pgo-build/optimized").exists(),
        "a target's stages live in target/pgo-build/<triple>/"
    );
    let optimized = target_stage_bin(&fixture, MUSL, "optimized", "app");
    let baseline = target_stage_bin(&fixture, MUSL, "baseline", "app");
    for binary in [&optimized, &baseline] {
        assert_eq!(
            elf_machine_and_interpreter(binary),
            (62, false),
            "{} is not a static x86_64 binary",
            binary.display()
        );
    }
    assert_eq!(
        run_binary(&optimized, &["work", "3000"]),
        run_binary(&baseline, &["work", "3000"])
    );
    let report = target_report(&fixture, MUSL);
    assert_eq!(report["target"], MUSL);
    let merged = &report["merged_profile"];
    assert!(merged["total_functions"].as_u64().unwrap() > 0, "{merged}");
    assert!(
        report["profiles"]["app"]["covered_functions"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(
        report["binaries"]["app"]["optimized"]["pgo"], true,
        "{report}"
    );
    assert_eq!(report["bolt"]["app"]["bolted"], false, "{report}");
    // The bolt stage holds the optimized binary, un-BOLTed.
    assert_eq!(
        std::fs::read(target_stage_bin(&fixture, MUSL, "bolt", "app")).unwrap(),
        std::fs::read(&optimized).unwrap()
    );
    fixture
        .run(&["report"])
        .success()
        .stderr_contains(&format!("pgo-build target {MUSL}"));
    // A committed profile per target: `{target}` in the path is the triple, and the profile
    // exported for one target is refused for another.
    fixture
        .run(&["export", "--output", "pgo/{target}.profdata"])
        .success();
    let exported = fixture.root().join(format!("pgo/{MUSL}.profdata"));
    assert!(exported.is_file());
    for extension in ["profdata", "json"] {
        std::fs::copy(
            fixture.root().join(format!("pgo/{MUSL}.{extension}")),
            fixture.root().join(format!("pgo/{AARCH64}.{extension}")),
        )
        .unwrap();
    }
    fixture.prepend_config("[pgo]\nprofile = \"pgo/{target}.profdata\"\n\n");
    fixture
        .run(&["optimize", "--target", AARCH64])
        .failure()
        .stderr_contains(&format!("was made for {MUSL}, this build is for {AARCH64}"));
    fixture
        .run(&[
            "export",
            "--output",
            "both.profdata",
            "--target",
            MUSL,
            "--target",
            AARCH64,
        ])
        .failure()
        .stderr_contains("export --output both.profdata would be the same file for every target");
}

/// The twobins fixture set up for aarch64 through qemu-user, as cargo would run it.
fn aarch64_fixture(train: &[&str]) -> Fixture {
    let fixture = Fixture::new("twobins");
    fixture.config(train).write(
        ".cargo/config.toml",
        &format!(
            "[target.{AARCH64}]\nlinker = \"aarch64-linux-gnu-gcc\"\n\
             runner = [\"qemu-aarch64\", \"-L\", \"/usr/aarch64-linux-gnu\"]\n"
        ),
    );
    fixture
}

#[test]
fn an_aarch64_target_trains_through_cargos_runner_and_children_started_by_variable_too() {
    // `app spawn` starts $PGO_BUILD_BIN_HELPER itself: a process an emulated binary starts.
    let fixture = aarch64_fixture(&["$PGO_BUILD_BIN_APP work 20000", "$PGO_BUILD_BIN_APP spawn"]);
    fixture
        .append_config("[[workload]]\nname = \"held\"\nrole = \"holdout\"\ncommand = \"$PGO_BUILD_BIN_APP work 30000\"\n")
        .prepend_config("[compare]\nrounds = 2\n\n[bolt]\nenabled = true\n\n");
    fixture
        .run(&["run", "--target", AARCH64])
        .success()
        // Debian's llvm-bolt instruments with an x86_64 runtime only: named, staged as it is.
        .stderr_contains(&format!("BOLT skipped for {AARCH64}"))
        .stderr_contains("instrumentation runtime here is built for x86_64")
        .stderr_contains("ran under the emulator `qemu-aarch64 -L /usr/aarch64-linux-gnu`")
        .stderr_contains("not aarch64 hardware");
    let report = target_report(&fixture, AARCH64);
    assert_eq!(
        report["profiles"]["helper"]["valid_files"], 1,
        "{}",
        report["profiles"]
    );
    assert!(
        report["compare"]["emulated"]
            .as_str()
            .unwrap()
            .contains("qemu-aarch64")
    );
    let optimized = target_stage_bin(&fixture, AARCH64, "optimized", "app");
    let baseline = target_stage_bin(&fixture, AARCH64, "baseline", "app");
    assert_eq!(
        elf_machine_and_interpreter(&optimized).0,
        183,
        "not an aarch64 ELF"
    );
    assert_eq!(
        report["binaries"]["app"]["optimized"]["pgo"], true,
        "{report}"
    );
    let under_qemu = |binary: &Path| {
        run_binary(
            Path::new("qemu-aarch64"),
            &[
                "-L",
                "/usr/aarch64-linux-gnu",
                binary.to_str().unwrap(),
                "work",
                "3000",
            ],
        )
    };
    assert_eq!(under_qemu(&optimized), under_qemu(&baseline));
    // Instruction counts of an emulator mean nothing: refused, naming what can be measured.
    fixture
        .run(&["compare", "--target", AARCH64, "--metric", "instructions"])
        .failure()
        .stderr_contains("--metric instructions cannot be measured for aarch64-unknown-linux-gnu")
        .stderr_contains("--metric wall or cpu");
}

#[test]
fn an_emulated_binary_starting_a_sibling_directly_is_explained_without_binfmt() {
    let fixture = aarch64_fixture(&["$PGO_BUILD_BIN_APP spawn-sibling"]);
    fixture.run(&["instrument", "--target", AARCH64]).success();
    let train = fixture.run(&["train", "--target", AARCH64]);
    let registered = std::fs::read_to_string("/proc/sys/fs/binfmt_misc/qemu-aarch64")
        .is_ok_and(|entry| entry.starts_with("enabled"));
    if registered {
        // The kernel runs it through qemu; QEMU_LD_PREFIX (from the runner's -L) finds its loader.
        train.success();
    } else {
        train
            .failure()
            .stderr_contains("exit status: 127")
            .stderr_contains("Start them through $PGO_BUILD_BIN_<NAME>")
            .stderr_contains("qemu-user-binfmt");
    }
}

#[test]
fn doctor_names_each_missing_piece_of_a_target_with_its_fix() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 10"]).write(
        ".cargo/config.toml",
        "[target.riscv64gc-unknown-linux-gnu]\nlinker = \"riscv64-linux-gnu-gcc-missing\"\n\
         runner = \"qemu-riscv64-missing -L /usr/riscv64-linux-gnu\"\n",
    );
    fixture
        .run(&[
            "doctor",
            "--target",
            "riscv64gc-unknown-linux-gnu",
            "--target",
            AARCH64,
        ])
        .failure()
        // Not installed by scripts/install-deps, so missing on every machine the tests run on.
        .stderr_contains("rustup target add riscv64gc-unknown-linux-gnu")
        .stderr_contains("the linker `riscv64-linux-gnu-gcc-missing`")
        .stderr_contains("apt-get install gcc-riscv64-linux-gnu")
        .stderr_contains("the runner `qemu-riscv64-missing`")
        .stderr_contains("apt-get install qemu-user")
        // The second target is checked too: no linker and no runner configured for it.
        .stderr_contains(&format!(
            "`target.{AARCH64}.linker = \"aarch64-linux-gnu-gcc\"`"
        ))
        .stderr_contains(&format!("target.{AARCH64}.runner = [\"qemu-aarch64\""))
        .stderr_contains(&format!(
            "doctor found problems for riscv64gc-unknown-linux-gnu, {AARCH64}"
        ));
    let builds = fixture.run(&["build", "--target", "riscv64gc-unknown-linux-gnu"]);
    builds
        .failure()
        .stderr_contains("rustup target add riscv64gc-unknown-linux-gnu");
}

/// The addresses in `binary` of the symbols named in `order_file`, in the file's order (those
/// the binary has).
fn ordered_addresses(binary: &Path, order_file: &Path) -> Vec<u64> {
    use object::{Object, ObjectSymbol};
    let data = std::fs::read(binary).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let addresses: std::collections::HashMap<String, u64> = file
        .symbols()
        .filter_map(|s| Some((s.name().ok()?.to_owned(), s.address())))
        .collect();
    std::fs::read_to_string(order_file)
        .unwrap()
        .lines()
        .filter_map(|name| addresses.get(name).copied())
        .collect()
}

#[test]
fn startup_order_orders_the_optimized_link_from_temporal_traces() {
    let fixture = Fixture::new("twobins");
    fixture
        .config(&["$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_APP primes 2000 && $PGO_BUILD_BIN_HELPER"])
        .prepend_config("[pgo]\nstartup_order = \"ordering-file\"\n\n");
    fixture.run(&["run", "--no-compare"]).success();
    let report = fixture.report();
    let order = &report["startup_order"];
    assert!(order["traces"]["kept"].as_u64().unwrap() >= 3, "{order}");
    assert!(order["ordered_functions"].as_u64().unwrap() > 3, "{order}");
    let order_file = PathBuf::from(order["order_file"].as_str().unwrap());
    // Passed to the linker: lld placed the ordered functions first, in the file's order.
    let optimized = fixture.stage_bin("optimized", "app");
    let addresses = ordered_addresses(&optimized, &order_file);
    assert!(addresses.len() >= 3, "{addresses:?}");
    assert!(
        addresses.windows(2).all(|pair| pair[0] < pair[1]),
        "not in the order file's order: {addresses:?}"
    );
    for args in [&["work", "3000"][..], &["primes", "3000"]] {
        assert_eq!(
            run_binary(&optimized, args),
            run_binary(&fixture.stage_bin("baseline", "app"), args)
        );
    }
    fixture
        .run(&["profile", "show"])
        .success()
        .stderr_contains("temporal traces: ")
        .stderr_contains("the start-up order they give covers");
    let markdown = fixture.run(&["report", "--markdown"]);
    assert!(
        markdown
            .success()
            .stdout()
            .contains("Start-up order: ordering-file, from "),
        "{}",
        markdown.describe()
    );
    // Balanced partitioning from the same profile: lld reads the profile itself.
    let config = std::fs::read_to_string(fixture.root().join("pgo-build.toml")).unwrap();
    fixture.write(
        "pgo-build.toml",
        &config.replace("\"ordering-file\"", "\"balanced-compression\""),
    );
    fixture.run(&["optimize"]).success();
    let balanced = fixture.stage_bin("optimized", "app");
    assert_eq!(
        run_binary(&balanced, &["work", "3000"]),
        run_binary(&fixture.stage_bin("baseline", "app"), &["work", "3000"])
    );
    assert_eq!(
        fixture.report()["startup_order"]["mode"],
        "balanced-compression"
    );
    // Page faults of each variant, paired like the other metrics, and every staged binary's
    // compressed size.
    fixture
        .run(&["compare", "--metric", "faults", "--rounds", "3"])
        .success();
    let report = fixture.report();
    let summary = &report["compare"]["workloads"][0]["candidates"]["optimized"]["faults"];
    assert!(summary["median_ratio"].as_f64().unwrap() > 0.0, "{summary}");
    let runs = report["compare"]["workloads"][0]["runs"]
        .as_array()
        .unwrap();
    assert!(
        runs.iter().all(|run| run["faults"].as_u64().unwrap() > 50),
        "{runs:?}"
    );
    check_schema(&report, &report_schema(), "report");
    let compressed = report["binaries"]["app"]["optimized"]["compressed_bytes"]
        .as_u64()
        .unwrap();
    let size = report["binaries"]["app"]["optimized"]["size_bytes"]
        .as_u64()
        .unwrap();
    assert!(
        compressed > 1000 && compressed < size,
        "{compressed} of {size}"
    );
}

#[test]
fn startup_order_without_traces_or_without_lld_is_refused() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_HELPER"]);
    fixture.run(&["instrument"]).success();
    fixture.run(&["train"]).success();
    // Trained without temporal instrumentation: nothing to order from.
    fixture.prepend_config("[pgo]\nstartup_order = \"balanced\"\n\n");
    fixture
        .run(&["optimize"])
        .failure()
        .stderr_contains("needs the temporal traces of a training")
        .stderr_contains("has none");
    fixture.run(&["instrument"]).success();
    fixture.run(&["train"]).success();
    fixture.run(&["optimize"]).success();
    // A link through GNU ld cannot take lld's options: named before it fails obscurely.
    let with_bfd = |command: &str| {
        let mut run = fixture.command(&[command]);
        run.env("RUSTFLAGS", "-Clink-arg=-fuse-ld=bfd");
        fixture.run_with(run)
    };
    with_bfd("instrument").success();
    with_bfd("train").success();
    with_bfd("optimize")
        .failure()
        .stderr_contains("[pgo] startup_order passes the function order to the linker");
}
