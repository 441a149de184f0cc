//! Bad input of every kind ends in an error that names it, never a panic or a hang: closed
//! pipes, empty commands, state files of another version.

use std::process::Stdio;

use crate::support::*;

/// A pipe whose reader is gone before pgo-build writes: every write fails with EPIPE, as
/// after `| head -1` once `head` exited (deterministic, unlike a real `head`).
fn closed_pipe() -> Stdio {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    writer.into()
}

fn assert_no_panic(what: &str, output: &std::process::Output) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_ne!(output.status.code(), Some(101), "{what} panicked: {stderr}");
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
}

#[test]
fn a_closed_stdout_ends_the_output_quietly() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 10"]);
    let cases: [&[&str]; 8] = [
        &["generate", "bash"],
        &["generate", "zsh"],
        &["generate", "fish"],
        &["generate", "man"],
        &["generate", "schema"],
        &["generate", "config-reference"],
        &["--help"],
        &["run", "--help"],
    ];
    for args in cases {
        let mut command = fixture.command(args);
        command.stdout(closed_pipe());
        let output = command.output().unwrap();
        assert_no_panic(&args.join(" "), &output);
        assert!(output.status.success(), "{args:?}: {output:?}");
    }
}

#[test]
fn a_closed_stderr_loses_the_progress_not_the_work() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 10"]);
    // `build` prints progress, stage lines and a table; with stderr closed it still builds.
    let mut command = fixture.command(&["build"]);
    command.stderr(closed_pipe()).stdout(Stdio::null());
    let output = command.output().unwrap();
    assert!(output.status.code() != Some(101), "{output:?}");
    assert!(output.status.success(), "{output:?}");
    assert!(fixture.stage_bin("baseline", "app").is_file());
    // An error on a closed stderr: the exit status still says it.
    fixture.write("pgo-build.toml", "[[workload]\n");
    let mut command = fixture.command(&["doctor"]);
    command.stderr(closed_pipe());
    let output = command.output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
}

/// `command = []` (or `""`, or `[""]`) for a workload, a service, its readiness check or its
/// stop: refused where it is written, before anything runs (it once reached an `expect` when
/// a workload started the service, and pgo-build then never exited).
#[test]
fn empty_commands_are_refused_where_they_are_written() {
    let fixture = Fixture::new("twobins");
    let workload = "[[workload]]\nname = \"t\"\nrole = \"train\"\nservices = [\"s\"]\n";
    let service = "[[service]]\nname = \"s\"\n";
    let cases = [
        format!("{service}command = []\n\n{workload}command = \"true\"\n"),
        format!("{service}command = [\"\"]\n\n{workload}command = \"true\"\n"),
        format!(
            "{service}command = \"$PGO_BUILD_BIN_APP serve\"\nready = {{ command = [] }}\n\n\
             {workload}command = \"true\"\n"
        ),
        format!(
            "{service}command = \"$PGO_BUILD_BIN_APP serve\"\nstop = {{ command = \"  \" }}\n\n\
             {workload}command = \"true\"\n"
        ),
        format!("{service}command = \"$PGO_BUILD_BIN_APP serve\"\n\n{workload}command = []\n"),
    ];
    for config in cases {
        fixture.write("pgo-build.toml", &config);
        let mut command = fixture.command(&["run", "--no-compare"]);
        command.stdin(Stdio::null());
        let run = fixture.run_with(command);
        assert_no_panic(&config, &run.output);
        run.failure()
            .stderr_contains("invalid configuration in")
            .stderr_contains("pgo-build.toml, line ")
            .stderr_contains("an empty `command`");
        assert!(!fixture.layout().path("baseline").exists(), "{config}");
    }
}

/// Waits until `path` has at least `lines` lines.
fn wait_for_lines(path: &std::path::Path, lines: usize) -> Vec<String> {
    for _ in 0..1200 {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let found: Vec<String> = text.lines().map(str::to_owned).collect();
        if found.len() >= lines {
            return found;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("{} never had {lines} lines", path.display());
}

/// `compare` killed (SIGKILL, nothing to catch) at several points of its rounds: the next
/// command names and stops every process the killed one left, before it measures anything;
/// also when no record of them is left (the records removed by hand), from the token the
/// processes carry.
#[test]
fn a_compare_killed_at_any_point_leaves_nothing_running_for_the_next_command() {
    let fixture = Fixture::new("twobins");
    let pids = fixture.root().join("pids");
    let holdout = format!(
        "echo $$ >> {pids}; for i in $(seq 20); do \"$PGO_BUILD_BIN_APP\" work 100 & echo $! >> \
         {pids}; sleep 0.3 & echo $! >> {pids}; wait; done",
        pids = pids.display()
    );
    write_train_holdout(
        &fixture,
        "$PGO_BUILD_BIN_APP work 1000 && $PGO_BUILD_BIN_HELPER",
        &holdout,
    );
    fixture.run(&["run", "--no-compare"]).success();
    let running = fixture.layout().path("running");
    for (lines, forget_records) in [(1, false), (6, false), (17, true), (30, false)] {
        let _ = std::fs::remove_file(&pids);
        let mut child = fixture
            .command(&["compare", "--rounds", "7"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for_lines(&pids, lines);
        child.kill().unwrap();
        child.wait().unwrap();
        if forget_records {
            for entry in std::fs::read_dir(&running).unwrap() {
                std::fs::remove_file(entry.unwrap().path()).unwrap();
            }
        }
        let started = wait_for_lines(&pids, lines);
        let left: Vec<&String> = started.iter().filter(|pid| alive(pid)).collect();
        assert!(!left.is_empty(), "SIGKILL leaves the workload running");
        let run = fixture.run(&["doctor"]);
        run.success().stderr_contains(if forget_records {
            "left no record of it; stopped:"
        } else {
            "ended while workload `holdout` ran against the"
        });
        let after = std::fs::read_to_string(&pids).unwrap();
        for pid in after.lines() {
            assert!(
                ended(pid),
                "pid {pid} outlived the next command\n{}",
                run.stderr()
            );
        }
    }
}
