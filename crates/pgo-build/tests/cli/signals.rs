//! Processes stopped by signals: the start markers, `pgo-build-rt`, continuous mode, leftovers,
//! and interrupting pgo-build itself.

use std::process::Command;

use crate::support::*;

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
    let log = std::fs::read_to_string(fixture.layout().path("logs/train-t0.log")).unwrap();
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
    let optimized = std::fs::read_to_string(fixture.layout().path("optimized/stage.json")).unwrap();
    assert!(optimized.contains("-Cllvm-args=-disable-vp"), "{optimized}");
    let replica = profile_figures(&fixture, "replica");
    assert_eq!(replica["valid_files"], 2, "{replica}");
    assert!(
        replica["covered_functions"].as_u64().unwrap() > 0,
        "{replica}"
    );
    let flags = std::fs::read_to_string(fixture.layout().path("instrumented/stage.json")).unwrap();
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
    let train = fixture.run(&["train", "--features", "rt"]);
    train
        .success()
        .stderr_contains("pgo-build had to stop processes of workload `leaves-one`: replica (pid")
        .stderr_contains("each wrote its profile");
    assert!(
        !train.stderr().contains("wrote no profile"),
        "{}",
        train.describe()
    );
    let stopped = fixture.report()["training"][0]["stopped"].clone();
    assert_eq!(stopped.as_array().unwrap().len(), 1, "{stopped}");
    assert_eq!(stopped[0]["name"], "replica");
    assert_eq!(stopped[0]["signal"], "SIGTERM");
    // Stopped with SIGTERM, the replica wrote its profile through pgo-build-rt, and the
    // warning says so rather than what a stopped process may fail to do.
    assert_eq!(profile_figures(&fixture, "replica")["valid_files"], 1);
    // --strict turns the warning into a failure.
    fixture
        .run(&["train", "--features", "rt", "--strict"])
        .failure()
        .stderr_contains("--strict turns this warning into an error");
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
fn pgo_build_rt_writes_one_profile_per_process_whatever_the_order_of_signal_flush_and_exit() {
    let fixture = Fixture::new("signals");
    // A flush and a normal exit: one profile, not the flushed one and the final one after it
    // (the runtime appends, and llvm-profdata would read both). SIGTERM at the moment the
    // process exits (the delay between them sweeping the time a write takes): one writer,
    // never two, one after the other or at once.
    fixture.config(&[
        "\"$PGO_BUILD_BIN_REPLICA\" exit && \"$PGO_BUILD_BIN_REPLICA\" flush-exit \
         && for us in $(seq 0 25 1000); do \"$PGO_BUILD_BIN_REPLICA\" term-exit $us || true; done",
    ]);
    // Every process's file kept, to look into.
    fixture.prepend_config("[pgo]\nkeep_raw_profiles = true\n\n");
    fixture.run(&["instrument", "--features", "rt"]).success();
    fixture.run(&["train"]).success();
    let replica = profile_figures(&fixture, "replica");
    assert_eq!(replica["processes"], 43, "{replica}");
    assert_eq!(replica["valid_files"], 43, "{replica}");
    assert_eq!(replica["unusable_files"], 0, "{replica}");
    assert_eq!(replica["died"], 0, "{replica}");
    // Every file holds one profile: the size of a plain exit's.
    let sizes: Vec<u64> = std::fs::read_dir(fixture.raw_profile_dir("t0"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "profraw"))
        .map(|path| std::fs::metadata(path).unwrap().len())
        .filter(|size| *size > 0)
        .collect();
    let smallest = *sizes.iter().min().unwrap();
    assert!(
        sizes.iter().all(|size| *size < smallest * 3 / 2),
        "a profile written twice into one file: {sizes:?}"
    );
}

/// A build script that says its pid and then keeps the build busy: cargo, and with it the
/// stage's build, runs until it is stopped.
const SLOW_BUILD_SCRIPT: &str = r#"fn main() {
    let dir = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    std::fs::write(dir.join("../build-script.pid"), std::process::id().to_string()).unwrap();
    std::thread::sleep(std::time::Duration::from_secs(300));
}
"#;

#[test]
fn stopping_pgo_build_during_a_build_stops_cargo_and_everything_it_started() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 10"]);
    fixture.write("app/build.rs", SLOW_BUILD_SCRIPT);
    let pid_file = fixture.root().join("build-script.pid");
    // SIGTERM, as a cancelled CI job or `timeout` sends it, to pgo-build alone.
    let child = fixture
        .command(&["build"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let script = wait_for_file(&pid_file);
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(143), "{stderr}");
    assert!(
        stderr.contains("interrupted by SIGTERM while the cargo build of the baseline stage ran"),
        "{stderr}"
    );
    assert!(ended(&script), "the build script outlived pgo-build");
    // SIGKILL cannot be caught: the next command stops what it left.
    std::fs::remove_file(&pid_file).unwrap();
    let mut child = fixture.command(&["build"]).spawn().unwrap();
    let script = wait_for_file(&pid_file);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(alive(&script), "SIGKILL leaves the build running");
    fixture
        .run(&["doctor"])
        .success()
        .stderr_contains("ended while the cargo build of the baseline stage ran")
        .stderr_contains("stopped the processes it left running");
    assert!(ended(&script));
}
