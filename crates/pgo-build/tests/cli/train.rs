//! `pgo-build train`: workloads that fail, write nothing, run no instrumented binary, or meet
//! a full disk or a read-only directory, each named with what to do.

use crate::support::*;

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
