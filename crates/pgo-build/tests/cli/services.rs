//! Services (`[[service]]`): readiness by port, socket, log line and command, stopping them
//! however the workload ends, and naming services and launchers that wrote no profile.

use std::process::Command;

use crate::support::schema::*;
use crate::support::*;

/// The signals fixture's configuration: `replica` is the only binary (the services and
/// clients), then `config`.
fn write_config(fixture: &Fixture, config: &str) {
    fixture.write(
        "pgo-build.toml",
        &format!("[build]\nbins = [\"replica\"]\n\n{config}"),
    );
}

/// A service whose pid is written to `<fixture>/<name>.pid` before it execs `replica ARGS`.
fn service(fixture: &Fixture, name: &str, args: &str, rest: &str) -> String {
    let pid_file = fixture.root().join(format!("{name}.pid"));
    format!(
        "[[service]]\nname = \"{name}\"\ncommand = 'echo $$ > {}; exec \"$PGO_BUILD_BIN_REPLICA\" {args}'\n{rest}\n\n",
        pid_file.display()
    )
}

fn workload(name: &str, services: &str, command: &str) -> String {
    format!(
        "[[workload]]\nname = \"{name}\"\nrole = \"train\"\nservices = [{services}]\ncommand = '{command}'\ntimeout = 120\n\n"
    )
}

#[test]
fn services_are_ready_by_port_socket_log_line_and_command_before_the_client_runs() {
    let (port, log_port) = (free_port(), free_port());
    let fixture = Fixture::new("signals");
    // Each service waits 300 ms before it listens; each client fails unless it can connect.
    let mut config = String::new();
    config += &service(
        &fixture,
        "by-port",
        &format!("tcp 127.0.0.1:{port} 300"),
        &format!("ready = {{ tcp = \"127.0.0.1:{port}\" }}"),
    );
    config += &service(
        &fixture,
        "by-socket",
        "unix \"$PGO_BUILD_RUN_DIR/s.sock\" 300",
        "ready = { unix = \"$PGO_BUILD_RUN_DIR/s.sock\" }",
    );
    config += &service(
        &fixture,
        "by-log",
        &format!("tcp 127.0.0.1:{log_port} 300"),
        "ready = { log = \"^listening$\" }",
    );
    config += &service(
        &fixture,
        "by-command",
        "unix \"$PGO_BUILD_RUN_DIR/c.sock\" 300",
        "ready = { command = '\"$PGO_BUILD_BIN_REPLICA\" connect unix \"$PGO_BUILD_RUN_DIR/c.sock\"' }",
    );
    let connect = |how: &str, to: &str| format!("\"$PGO_BUILD_BIN_REPLICA\" connect {how} {to}");
    config += &workload(
        "port",
        "\"by-port\"",
        &connect("tcp", &format!("127.0.0.1:{port}")),
    );
    config += &workload(
        "socket",
        "\"by-socket\"",
        &connect("unix", "\"$PGO_BUILD_RUN_DIR/s.sock\""),
    );
    config += &workload(
        "log",
        "\"by-log\"",
        &connect("tcp", &format!("127.0.0.1:{log_port}")),
    );
    config += &workload(
        "command",
        "\"by-command\"",
        &connect("unix", "\"$PGO_BUILD_RUN_DIR/c.sock\""),
    );
    write_config(&fixture, &config);
    fixture.run(&["instrument", "--features", "rt"]).success();
    fixture
        .run(&["train", "--features", "rt", "--strict"])
        .success();
    // Every service was stopped with SIGTERM and wrote its profile (pgo-build-rt); so did
    // every client and readiness probe.
    let replica = profile_figures(&fixture, "replica");
    assert_eq!(replica["died"], 0, "{replica}");
    assert!(replica["valid_files"].as_u64().unwrap() >= 8, "{replica}");
    for name in ["by-port", "by-socket", "by-log", "by-command"] {
        let pid = std::fs::read_to_string(fixture.root().join(format!("{name}.pid"))).unwrap();
        assert!(
            ended(pid.trim()),
            "service {name} (pid {pid}) is still running"
        );
    }
    let log = std::fs::read_to_string(fixture.layout().path("logs/train-log.by-log.log")).unwrap();
    assert!(log.contains("listening"), "{log}");
}

#[test]
fn a_service_that_never_becomes_ready_fails_the_run_and_is_stopped() {
    let (port, other) = (free_port(), free_port());
    let fixture = Fixture::new("signals");
    let config = service(
        &fixture,
        "server",
        &format!("tcp 127.0.0.1:{other}"),
        &format!("ready = {{ tcp = \"127.0.0.1:{port}\", timeout = \"2s\" }}"),
    ) + &workload("w", "\"server\"", "true");
    write_config(&fixture, &config);
    fixture.run(&["instrument"]).success();
    fixture
        .run(&["train"])
        .failure()
        .stderr_contains("service `server` of workload `w` was not ready within 2s")
        .stderr_contains(&format!("waited for a TCP connection to 127.0.0.1:{port}"))
        .stderr_contains("listening");
    let pid = std::fs::read_to_string(fixture.root().join("server.pid")).unwrap();
    assert!(
        ended(pid.trim()),
        "the service (pid {pid}) is still running"
    );
    // pgo-build's own header line in the service's log is not the service saying it is ready.
    let config = "[[service]]\nname = \"quiet\"\ncommand = 'sleep 30'\nready = { log = \"pgo-build\", timeout = \"1s\" }\n\n"
        .to_owned()
        + &workload("w", "\"quiet\"", "true");
    write_config(&fixture, &config);
    fixture
        .run(&["train"])
        .failure()
        .stderr_contains("service `quiet` of workload `w` was not ready within 1s");
    // One that ends before it is ready says how it ended.
    let config = "[[service]]\nname = \"server\"\ncommand = 'echo starting; exit 3'\nready = { log = \"^listening\" }\n\n"
        .to_owned()
        + &workload("w", "\"server\"", "true");
    write_config(&fixture, &config);
    fixture
        .run(&["train"])
        .failure()
        .stderr_contains(
            "service `server` of workload `w` ended before it was ready (exit status: 3)",
        )
        .stderr_contains("starting");
}

#[test]
fn the_service_is_stopped_when_the_client_fails() {
    let fixture = Fixture::new("signals");
    let config = service(&fixture, "server", "", "ready = { log = \"^ready\" }")
        + &workload("w", "\"server\"", "echo client failed; exit 4");
    write_config(&fixture, &config);
    fixture.run(&["instrument"]).success();
    fixture
        .run(&["train"])
        .failure()
        .stderr_contains("training workload `w` exit status: 4")
        .stderr_contains("client failed");
    let pid = std::fs::read_to_string(fixture.root().join("server.pid")).unwrap();
    assert!(
        ended(pid.trim()),
        "the service (pid {pid}) is still running"
    );
    assert_eq!(
        std::fs::read_dir(fixture.layout().path("running"))
            .unwrap()
            .count(),
        0,
        "nothing is recorded as running"
    );
}

#[test]
fn the_service_is_stopped_when_pgo_build_is_interrupted() {
    let fixture = Fixture::new("signals");
    let marker = fixture.root().join("client.pid");
    let config = service(&fixture, "server", "", "ready = { log = \"^ready\" }")
        + &workload(
            "w",
            "\"server\"",
            &format!("echo $$ > {}; sleep 60", marker.display()),
        );
    write_config(&fixture, &config);
    fixture.run(&["instrument"]).success();
    let child = fixture
        .command(&["train"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let client = wait_for_file(&marker);
    let server = wait_for_file(&fixture.root().join("server.pid"));
    assert!(
        Command::new("kill")
            .arg("-INT")
            .arg(child.id().to_string())
            .status()
            .unwrap()
            .success()
    );
    let run = Run {
        output: child.wait_with_output().unwrap(),
    };
    assert_eq!(run.output.status.code(), Some(130), "{}", run.describe());
    run.stderr_contains("interrupted by SIGINT while workload `w`")
        .stderr_contains(&format!("service `server` (pid {server}, SIGTERM)"));
    assert!(ended(&client), "the client (pid {client}) is still running");
    assert!(
        ended(&server),
        "the service (pid {server}) is still running"
    );
    assert_eq!(
        std::fs::read_dir(fixture.layout().path("running"))
            .unwrap()
            .count(),
        0
    );
}

#[test]
fn a_service_killed_with_sigkill_is_named_with_the_fix() {
    let fixture = Fixture::new("signals");
    // Asked to stop by a command that does nothing: SIGKILL after the grace period.
    let config = service(
        &fixture,
        "stubborn",
        "",
        "ready = { log = \"^ready\" }\nstop = { command = \"true\", grace_period = \"1s\" }",
    ) + &workload("w", "\"stubborn\"", "true");
    write_config(&fixture, &config);
    fixture.run(&["instrument", "--features", "rt"]).success();
    let pid = {
        let run = fixture.run(&["train", "--features", "rt"]);
        run.success()
            .stderr_contains("service `stubborn` did not exit within 1s of `true`: pgo-build killed replica (pid")
            .stderr_contains("SIGKILL, which writes no profile")
            .stderr_contains("stop.command");
        std::fs::read_to_string(fixture.root().join("stubborn.pid")).unwrap()
    };
    assert!(ended(pid.trim()));
    let report = fixture.report();
    check_schema(&report, &report_schema(), "report");
    let record = &report["training"][0]["services"][0];
    assert_eq!(record["name"], "stubborn", "{record}");
    assert_eq!(record["asked_by"], "`true`");
    assert_eq!(record["killed"][0]["signal"], "SIGKILL");
    assert_eq!(record["killed"][0]["pid"].to_string(), pid.trim());
    fixture
        .run(&["train", "--features", "rt", "--strict"])
        .failure()
        .stderr_contains("service `stubborn` did not exit within 1s");
    // A stop command that fails: said, and the service gets its stop signal instead.
    let config = service(
        &fixture,
        "unstoppable",
        "",
        "ready = { log = \"^ready\" }\nstop = { command = \"exit 3\", grace_period = \"5s\" }",
    ) + &workload("w", "\"unstoppable\"", "true");
    write_config(&fixture, &config);
    fixture
        .run(&["train", "--features", "rt"])
        .success()
        .stderr_contains(
            "service `unstoppable`: its stop command `exit 3` could not run (it ended with exit \
             status: 3), so pgo-build sent SIGTERM instead",
        );
    // Killed by someone else while the client ran: a failed service, with its status and
    // log, not advice about stop signals; nothing of the run is used.
    let config = service(&fixture, "victim", "", "ready = { log = \"^ready\" }")
        + &workload(
            "w",
            "\"victim\"",
            &format!(
                "kill -KILL $(cat {}); sleep 0.2",
                fixture.root().join("victim.pid").display()
            ),
        );
    write_config(&fixture, &config);
    let failed = fixture.run(&["train", "--features", "rt"]);
    failed
        .failure()
        .stderr_contains("service `victim` failed while workload `w` ran against the instrumented binaries (signal: 9 (SIGKILL))")
        .stderr_contains("nothing of this run is used. Its log: ");
    assert!(
        !failed.stderr().contains("stop.grace_period"),
        "{}",
        failed.describe()
    );
    fixture
        .run(&["optimize", "--features", "rt"])
        .failure()
        .stderr_contains("service `victim` failed");
}

#[test]
fn a_launcher_that_wrote_while_the_server_it_started_did_not_is_a_warning() {
    let port = free_port();
    let fixture = Fixture::new("signals");
    // Without pgo-build-rt, the server the launcher left behind dies by SIGTERM unwritten;
    // the launcher exited normally and wrote.
    let config = service(
        &fixture,
        "daemon",
        &format!("daemon 127.0.0.1:{port}"),
        &format!("ready = {{ tcp = \"127.0.0.1:{port}\" }}"),
    ) + &workload(
        "w",
        "\"daemon\"",
        &format!("\"$PGO_BUILD_BIN_REPLICA\" connect tcp 127.0.0.1:{port}"),
    );
    write_config(&fixture, &config);
    fixture.run(&["instrument"]).success();
    fixture
        .run(&["train"])
        .success()
        .stderr_contains("wrote no profile while the `replica` that started it (pid")
        .stderr_contains("its launcher")
        .stderr_contains(
            "service `daemon` was asked to stop by SIGTERM and its process replica (pid",
        );
    fixture
        .run(&["train", "--strict"])
        .failure()
        .stderr_contains("service `daemon` was asked to stop by SIGTERM");
}

#[test]
fn a_service_that_ends_on_its_stop_signal_without_writing_is_named() {
    let fixture = Fixture::new("signals");
    // Without pgo-build-rt, SIGTERM's default action ends the service before it writes.
    let config = service(&fixture, "plain", "", "ready = { log = \"^ready\" }")
        + &workload("w", "\"plain\"", "true");
    write_config(&fixture, &config);
    fixture.run(&["instrument"]).success();
    let run = fixture.run(&["train"]);
    let pid = std::fs::read_to_string(fixture.root().join("plain.pid")).unwrap();
    run.success().stderr_contains(&format!(
        "service `plain` was asked to stop by SIGTERM and its process replica (pid {}) ended \
         without writing a profile (signal: 15 (SIGTERM))",
        pid.trim()
    ));
    // With it, the same service writes and nothing is said.
    fixture.run(&["instrument", "--features", "rt"]).success();
    let run = fixture.run(&["train", "--features", "rt", "--strict"]);
    run.success();
    assert!(
        !run.stderr().contains("service `plain`"),
        "{}",
        run.describe()
    );
}

#[test]
fn a_services_own_cost_is_measured_and_judged_beside_its_clients() {
    let port = free_port();
    let fixture = Fixture::new("signals");
    let mut config = service(
        &fixture,
        "db",
        &format!("tcp 127.0.0.1:{port}"),
        &format!("ready = {{ tcp = \"127.0.0.1:{port}\" }}"),
    );
    let connect = format!("\"$PGO_BUILD_BIN_REPLICA\" connect tcp 127.0.0.1:{port}");
    config += &workload("train", "\"db\"", &connect);
    config +=
        &workload("load", "\"db\"", &connect).replace("role = \"train\"", "role = \"holdout\"");
    write_config(&fixture, &config);
    let run = fixture.run(&["run", "--features", "rt", "--compare-rounds", "7"]);
    run.success();
    // Per run, the service's own figures and the client's CPU time without it.
    let report = fixture.report();
    // Unless told otherwise, the services' own CPU time decides.
    assert_eq!(
        report["compare"]["decided_by"], "services.cpu",
        "{}",
        report["compare"]
    );
    let load = &report["compare"]["workloads"][0];
    assert_eq!(load["workload"], "load", "{load}");
    let first = &load["runs"][0]["metrics"];
    for name in [
        "services.cpu",
        "service.db.cpu",
        "service.db.faults",
        "service.db.peak_rss",
        "client.cpu",
    ] {
        assert!(first[name].as_f64().is_some(), "{name}: {first}");
    }
    assert!(
        first["service.db.peak_rss"].as_f64().unwrap() > 0.5,
        "{first}"
    );
    // Judged like any metric, and shown beside the client's.
    let metrics = &load["candidates"]["optimized"]["metrics"];
    assert_eq!(metrics["service.db.cpu"]["unit"], "s", "{metrics}");
    assert!(
        metrics["service.db.cpu"]["summary"]["verdict"].is_string(),
        "{metrics}"
    );
    assert!(
        metrics["client.cpu"]["summary"]["verdict"].is_string(),
        "{metrics}"
    );
    assert!(
        run.stdout().contains("service.db.cpu (lower is better)"),
        "{}",
        run.describe()
    );
    // It can decide.
    fixture
        .run(&[
            "compare",
            "--features",
            "rt",
            "--metric",
            "service.db.cpu",
            "--rounds",
            "7",
        ])
        .success()
        .stderr_contains("comparing baseline vs optimized");
    assert_eq!(fixture.report()["compare"]["decided_by"], "service.db.cpu");
    // A service no workload uses is not a metric.
    fixture
        .run(&[
            "compare",
            "--features",
            "rt",
            "--metric",
            "service.nope.cpu",
        ])
        .failure()
        .stderr_contains("no workload reports a metric of that name");
}
