//! `pgo-build init` (and pgo-build as `cargo pgo-build`): a configuration to start from, never
//! over an existing one.

use std::process::Command;

use crate::support::*;

#[test]
fn init_trains_on_the_workspaces_own_benchmark_and_never_overwrites() {
    let fixture = Fixture::new("criterion");
    let _ = std::fs::remove_file(fixture.root().join("pgo-build.toml"));
    fixture
        .run(&["init"])
        .success()
        .stderr_contains("training from the benchmark `sums`");
    let written = std::fs::read_to_string(fixture.root().join("pgo-build.toml")).unwrap();
    assert!(
        written.contains(r#"cargo = ["bench", "-p", "calc", "--bench", "sums"]"#),
        "{written}"
    );
    assert!(written.contains(r#"bins = ["calc"]"#), "{written}");
    // It parses: doctor reads it, finds the train workload and the held-out placeholder, and
    // names the line to edit.
    let line = written
        .lines()
        .position(|l| l.contains("replace the command of the holdout workload"))
        .unwrap()
        + 1;
    fixture
        .run(&["doctor"])
        .failure()
        .stderr_contains("(1 train, 1 holdout workloads)")
        .stderr_contains(&format!(
            "  - `holdout` (line {line}): replace its `command` with work training never sees"
        ));
    fixture.edit("pgo-build.toml", |text| {
        text.replace(
            text.lines().nth(line - 1).unwrap(),
            r#"command = '"$PGO_BUILD_BIN_CALC" 50000'"#,
        )
    });
    fixture.run(&["doctor"]).success();
    // Never over an existing file, which stays as it was.
    fixture.write("pgo-build.toml", "# mine\n");
    fixture
        .run(&["init"])
        .failure()
        .stderr_contains("pgo-build.toml exists: `pgo-build init` never overwrites");
    assert_eq!(
        std::fs::read_to_string(fixture.root().join("pgo-build.toml")).unwrap(),
        "# mine\n"
    );
}

/// Benchmarks that cannot run here are not proposed, each named with why; a workload that
/// runs one anyway is refused by `doctor` before any build, with what to do.
#[test]
fn init_and_doctor_name_benchmarks_that_cannot_run_here() {
    let fixture = Fixture::new("criterion");
    let _ = std::fs::remove_file(fixture.root().join("pgo-build.toml"));
    fixture.write(
        "calc/benches/gated.rs",
        "#![feature(test)]\nextern crate test;\n#[bench]\nfn b(_: &mut test::Bencher) {}\n",
    );
    fixture.write(
        "calc/benches/corpus.rs",
        "fn main() { let _ = std::fs::read(\"tests/corpus/big.md\"); }\n",
    );
    fixture
        .run(&["init"])
        .success()
        .stderr_contains("training from the benchmark `sums`")
        .stderr_contains("not proposed: the benchmark `gated` cannot run here: its source uses #![feature(test)]")
        .stderr_contains("not proposed: the benchmark `corpus` cannot run here: it reads `tests/corpus/big.md` that does not exist here");
    let written = std::fs::read_to_string(fixture.root().join("pgo-build.toml")).unwrap();
    assert!(!written.contains("\"--bench\", \"gated\"]"), "{written}");
    assert!(!written.contains("\"--bench\", \"corpus\"]"), "{written}");
    fixture.edit("pgo-build.toml", |text| {
        let line = text
            .lines()
            .find(|l| l.contains("replace the command of the holdout workload"))
            .unwrap();
        text.replace(
            line,
            r#"cargo = ["bench", "-p", "calc", "--bench", "gated"]"#,
        )
    });
    fixture
        .run(&["doctor"])
        .failure()
        .stderr_contains(
            "workload `holdout` runs the bench target `gated` (package `calc`), but its source \
             uses #![feature(test)], which only a nightly rustc compiles",
        )
        .stderr_contains("train on a target that builds on this toolchain");
    fixture.edit("pgo-build.toml", |text| {
        text.replace("\"--bench\", \"gated\"]", "\"--bench\", \"corpus\"]")
    });
    // Files a source names may be made or skipped at run time: said, not refused.
    fixture.run(&["doctor"]).success().stderr_contains(
        "warning: workload `holdout` runs the bench target `corpus` (package `calc`), but it \
         reads `tests/corpus/big.md` that does not exist here: put the files there",
    );
    fixture.write("calc/tests/corpus/big.md", "# big\n");
    let doctor = fixture.run(&["doctor"]);
    doctor.success();
    assert!(!doctor.stderr().contains("`corpus`"), "{}", doctor.stderr());
}

#[test]
fn without_benchmarks_two_edited_lines_make_init_s_configuration_run() {
    let fixture = Fixture::new("twobins");
    let _ = std::fs::remove_file(fixture.root().join("pgo-build.toml"));
    // Without a configuration, doctor and run point to init.
    fixture
        .run(&["doctor"])
        .success()
        .stderr_contains("config: none (`pgo-build init` writes one to start from)");
    fixture
        .run(&["run"])
        .failure()
        .stderr_contains("`pgo-build init` writes a commented pgo-build.toml to start from");
    // A third binary, which nothing in the workspace starts (app starts helper).
    fixture.write(
        "app/src/bin/extra.rs",
        "fn main() {\n    println!(\"3\");\n}\n",
    );
    fixture
        .run(&["init"])
        .success()
        .stderr_contains("pgo-build.schema.json: editors with TOML support");
    // The schema the first line names is there, and is this pgo-build's.
    let written = std::fs::read_to_string(fixture.root().join("pgo-build.toml")).unwrap();
    assert!(
        written.starts_with("#:schema ./pgo-build.schema.json\n"),
        "{written}"
    );
    let schema = std::fs::read_to_string(fixture.root().join("pgo-build.schema.json")).unwrap();
    let generated = fixture.run(&["generate", "schema"]);
    assert_eq!(schema, generated.success().stdout());
    // The placeholders fail doctor, and run before it builds anything, each named with its
    // line and what to put there.
    let line_of = |text: &str, what: &str| text.lines().position(|l| l.contains(what)).unwrap() + 1;
    let train_line = line_of(&written, "replace the command of the train workload");
    let holdout_line = line_of(&written, "replace the command of the holdout workload");
    for args in [&["doctor"][..], &["run", "--no-compare"]] {
        fixture
            .run(args)
            .failure()
            .stderr_contains("2 workloads still run the placeholders `pgo-build init` wrote")
            .stderr_contains(&format!(
                "  - `train` (line {train_line}): replace its `command` with real work"
            ))
            .stderr_contains(&format!(
                "  - `holdout` (line {holdout_line}): replace its `command` with work training \
                 never sees"
            ));
    }
    assert!(
        !fixture
            .root()
            .join("target/pgo-build/instrumented")
            .exists()
    );
    let edit = |train: &str| {
        fixture.edit("pgo-build.toml", |_| {
            written
                .replace(
                    written.lines().nth(train_line - 1).unwrap(),
                    &format!("command = '{train}'"),
                )
                .replace(
                    written.lines().nth(holdout_line - 1).unwrap(),
                    r#"command = '"$PGO_BUILD_BIN_APP" primes 3000'"#,
                )
        });
    };
    // A binary no train workload runs, and no binary's source names, is named before any
    // build, with the ways out; helper, which app's source starts, is not.
    edit(r#""$PGO_BUILD_BIN_APP" work 1000"#);
    let doctor = fixture.run(&["doctor"]);
    doctor
        .success()
        .stderr_contains(
            "no train workload names `extra` (by $PGO_BUILD_BIN_EXTRA or $PGO_BUILD_BIN_DIR",
        )
        .stderr_contains("or leave it out with `[build] bins = [\"app\", \"helper\"]`");
    assert!(!doctor.stderr().contains("`helper`"), "{}", doctor.stderr());
    edit(r#""$PGO_BUILD_BIN_APP" work 1000 && "$PGO_BUILD_BIN_HELPER" && "$PGO_BUILD_BIN_EXTRA""#);
    let doctor = fixture.run(&["doctor"]);
    doctor.success();
    assert!(
        !doctor.stderr().contains("no train workload names"),
        "{}",
        doctor.stderr()
    );
    fixture
        .run(&["run", "--no-compare"])
        .success()
        .stderr_contains("pgo-build step optimize ok");
}

#[test]
fn cargo_runs_the_installed_cargo_pgo_build_beside_pgo_build() {
    let fixture = Fixture::new("twobins");
    // As `cargo install` leaves them: both binaries in one directory on PATH.
    let bin = tempfile::tempdir().unwrap();
    for name in ["pgo-build", "cargo-pgo-build"] {
        let built = std::path::Path::new(env!("CARGO_BIN_EXE_pgo-build")).with_file_name(name);
        std::fs::copy(&built, bin.path().join(name)).unwrap();
    }
    cargo_pgo_build_doctor(&fixture, bin.path())
        .success()
        .stderr_contains("pgo-build step doctor ok");
    // Alone, it says what is missing.
    std::fs::remove_file(bin.path().join("pgo-build")).unwrap();
    let output = Command::new(bin.path().join("cargo-pgo-build"))
        .args(["pgo-build", "doctor"])
        .output()
        .unwrap();
    Run { output }
        .failure()
        .stderr_contains("cargo-pgo-build runs the pgo-build installed beside it");
}

#[test]
fn cargo_runs_pgo_build_as_its_pgo_build_subcommand() {
    let fixture = Fixture::new("twobins");
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_pgo-build"),
        bin.path().join("cargo-pgo-build"),
    )
    .unwrap();
    cargo_pgo_build_doctor(&fixture, bin.path())
        .success()
        .stderr_contains("pgo-build step doctor ok");
}

/// `cargo pgo-build doctor` in the fixture, with `bin` first on PATH (where cargo finds
/// `cargo-pgo-build`).
fn cargo_pgo_build_doctor(fixture: &Fixture, bin: &std::path::Path) -> Run {
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = Command::new("cargo")
        .args(["pgo-build", "doctor"])
        .current_dir(fixture.root())
        .env("PATH", path)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .unwrap();
    Run { output }
}

/// At a terminal, sentences fit its width like tables do (a pseudo-terminal from `script`,
/// at 80 and 120 columns); piped, each message stays one line.
#[test]
fn at_a_terminal_sentences_fit_its_width() {
    let fixture = Fixture::new("twobins");
    let _ = std::fs::remove_file(fixture.root().join("pgo-build.toml"));
    fixture.run(&["init"]).success();
    // doctor refuses init's placeholder with a long sentence.
    let piped = fixture.run(&["doctor"]);
    let message = piped
        .stderr()
        .lines()
        .find(|l| l.starts_with("  - `train` (line "))
        .unwrap_or_else(|| panic!("{}", piped.describe()))
        .to_owned();
    assert!(message.len() > 160, "{message}");
    let words = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    for width in [80, 120] {
        let command = format!(
            "{:?} --manifest-path {:?} doctor",
            env!("CARGO_BIN_EXE_pgo-build"),
            fixture.root().join("Cargo.toml")
        );
        let output = Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .current_dir(fixture.root())
            .env("COLUMNS", width.to_string())
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("RUSTFLAGS")
            .output()
            .unwrap();
        let shown = on_screen(&output.stdout);
        // Paths are words that may not fit; every line of prose does.
        for line in shown.lines().filter(|l| !l.contains('/')) {
            assert!(line.chars().count() <= width, "{width}: {line:?}\n{shown}");
        }
        // The error went on over more lines, under itself.
        let mut lines = shown.lines().skip_while(|l| !l.starts_with("error: "));
        lines.next();
        assert!(
            lines.next().is_some_and(|l| l.starts_with("  ")),
            "{width}:\n{shown}"
        );
        // Nothing is lost: the same words as the piped message.
        let start = shown.find("- `train` (line ").expect("the error");
        assert!(
            words(&shown[start..]).starts_with(&words(&message)),
            "{width}:\n{shown}"
        );
    }
    // A whole run, its tables, legends and verdict notes included, fits 80 columns.
    fixture.config(&["$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_HELPER"]);
    fixture.edit("pgo-build.toml", |text| {
        format!(
            "{text}\n[[workload]]\nname = \"holdout\"\nrole = \"holdout\"\n\
             command = \"$PGO_BUILD_BIN_APP work 3000\"\n"
        )
    });
    let command = format!(
        "{:?} --manifest-path {:?} run --compare-rounds 3",
        env!("CARGO_BIN_EXE_pgo-build"),
        fixture.root().join("Cargo.toml")
    );
    let output = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .current_dir(fixture.root())
        .env("COLUMNS", "80")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap();
    let shown = on_screen(&output.stdout);
    assert!(shown.contains("pgo-build step compare ok"), "{shown}");
    for line in shown.lines().filter(|l| !l.contains('/')) {
        assert!(line.chars().count() <= 80, "{line:?}\n{shown}");
    }
    // The run ends with its verdict; `report` leads with it.
    let last: Vec<&str> = shown.lines().rev().take(25).collect();
    assert!(
        last.iter().any(|l| l.contains("holdout: optimized ")),
        "{shown}"
    );
    let report_at = |columns: usize| {
        let output = Command::new(env!("CARGO_BIN_EXE_pgo-build"))
            .args(["--manifest-path"])
            .arg(fixture.root().join("Cargo.toml"))
            .arg("report")
            .env("COLUMNS", columns.to_string())
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    // Every word a table shows, as a table far wider than any of its rows shows it.
    let words = |text: &str| -> std::collections::BTreeSet<String> {
        text.split(|c: char| c.is_whitespace() || "│┆─┬┴┼╞╪╡═┌┐└┘├┤".contains(c))
            .map(|word| word.trim_end_matches(':'))
            .filter(|word| !word.is_empty())
            .map(str::to_owned)
            .collect()
    };
    // The Markdown summary leads with the same verdict block: each held-out workload's line,
    // with its interval, in the first 10 lines.
    let markdown = fixture.run(&["report", "--markdown"]);
    let summary = markdown.stdout();
    let first: Vec<&str> = summary.lines().take(10).collect();
    assert!(
        first.iter().any(|l| l.starts_with("**Ship ")
            || l.starts_with("**Not proven")
            || l.starts_with("**Do not ship")),
        "{}",
        markdown.describe()
    );
    assert!(
        first
            .iter()
            .any(|l| l.starts_with("- holdout: optimized ") && l.contains('–')),
        "{}",
        markdown.describe()
    );
    let whole = words(&report_at(1000));
    for columns in [80, 120] {
        let shown = report_at(columns);
        let first: Vec<&str> = shown.lines().take(10).collect();
        assert!(
            ["Ship ", "Not proven", "Do not ship"]
                .iter()
                .any(|start| first[0].starts_with(start)),
            "{columns}:\n{shown}"
        );
        assert!(
            first.iter().any(|l| l.contains("holdout: optimized ")),
            "{columns}:\n{shown}"
        );
        for line in shown.lines().filter(|l| !l.contains('/')) {
            assert!(
                line.chars().count() <= columns,
                "{columns}: {line:?}\n{shown}"
            );
        }
        let broken: Vec<String> = words(&shown).difference(&whole).cloned().collect();
        assert!(
            broken.is_empty(),
            "{columns}: words broken by the layout: {broken:?}\n{shown}"
        );
    }
}

/// What a terminal shows of `output`, line by line: its line ends are `\r\n`, and a spinner
/// redraws its line with `\r` and an erase (each redraw counted as a line of its own).
fn on_screen(output: &[u8]) -> String {
    let text = String::from_utf8_lossy(output)
        .replace("\r\n", "\n")
        .replace('\r', "\n");
    // Control sequences (`ESC [ … final`): a cursor moved up (spinners drawn on lines of their
    // own, one per run side by side) starts a line as a terminal shows it; the others, which
    // erase or color, show nothing.
    let mut shown = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for code in chars.by_ref() {
                if ('@'..='~').contains(&code) {
                    if code == 'A' {
                        shown.push('\n');
                    }
                    break;
                }
            }
        } else {
            shown.push(c);
        }
    }
    // A spinner's line is padded with spaces to the terminal's 80 columns, and the next one
    // drawn right after it shows on the next row: split such rows as the terminal wraps them
    // (text never holds two spaces in a row, so a sentence that overflows is not split).
    let mut rows = Vec::new();
    for line in shown.lines() {
        let mut rest: Vec<char> = line.chars().collect();
        while rest.len() > 80 && rest[78..80] == [' ', ' '] {
            rows.push(rest[..80].iter().collect::<String>());
            rest.drain(..80);
        }
        rows.push(rest.into_iter().collect());
    }
    rows.join("\n")
}

/// Help fits an 80-column terminal, and a command's own options come before the global ones.
#[test]
fn help_is_wrapped_to_the_terminal_with_the_commands_own_options_first() {
    for args in [
        &["--help"][..],
        &["-h"],
        &["run", "--help"],
        &["init", "--help"],
        &["compare", "-h"],
    ] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_pgo-build"))
            .args(args)
            .env("COLUMNS", "80")
            .output()
            .unwrap();
        assert!(output.status.success(), "{args:?}");
        let text = String::from_utf8(output.stdout).unwrap();
        let wide: Vec<&str> = text.lines().filter(|l| l.chars().count() > 80).collect();
        assert!(
            wide.is_empty(),
            "{args:?}: lines over 80 columns:\n{}",
            wide.join("\n")
        );
    }
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_pgo-build"))
        .args(["run", "--help"])
        .env("COLUMNS", "80")
        .output()
        .unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    let own = text.find("--no-compare").unwrap();
    let global = text.find("Global options:").unwrap();
    assert!(
        own < global && global < text.find("--manifest-path").unwrap(),
        "{text}"
    );
}

/// Right after installing, before any workspace: `doctor` reports the toolchain and passes.
#[test]
fn doctor_outside_a_workspace_reports_the_toolchain() {
    let empty = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_pgo-build"))
        .arg("doctor")
        .current_dir(empty.path())
        .env_remove("PGO_BUILD_LLVM_PROFDATA")
        .output()
        .unwrap();
    let run = Run { output };
    run.success()
        .stderr_contains("rustc: rustc ")
        .stderr_contains("llvm-profdata: ")
        .stderr_contains(&format!("(LLVM {}.", llvm_major()))
        .stderr_contains("no cargo workspace here");
    assert!(
        !run.stderr().contains("cargo metadata"),
        "{}",
        run.describe()
    );
}

/// A workspace with three problems: `doctor` names all three, each with its fix, not the
/// first alone; and a configuration without a holdout workload is told it measures nothing.
#[test]
fn doctor_names_every_problem_it_finds() {
    let fixture = Fixture::new("twobins");
    fixture.run(&["init"]).success();
    let config = std::fs::read_to_string(fixture.root().join("pgo-build.toml")).unwrap();
    fixture.write(
        "pgo-build.toml",
        &format!(
            "[pgo]\nstartup_order = \"balanced\"\n\n[bolt]\nenabled = true\n\n{}",
            config.replace(
                "[build]\n",
                "[build]\nrustflags = [\"-Clink-arg=-fuse-ld=bfd\"]\n"
            )
        ),
    );
    let mut doctor = fixture.command(&["doctor"]);
    doctor.env("PGO_BUILD_LLVM_BOLT", "/nonexistent/llvm-bolt");
    // What `run` would refuse at its first build, said here: BOLT on a stripping profile.
    doctor.env("CARGO_PROFILE_RELEASE_STRIP", "symbols");
    let run = fixture.run_with(doctor);
    run.failure()
        .stderr_contains("doctor found 4 problems")
        .stderr_contains("still run the placeholders `pgo-build init` wrote")
        .stderr_contains("this link runs `cc` without lld")
        .stderr_contains("[bolt] enabled = true needs it")
        .stderr_contains(
            "the `release` profile strips symbols (strip = symbols in \
             CARGO_PROFILE_RELEASE_STRIP)",
        );
    assert!(!fixture.layout().path("baseline").exists());
}

/// The example copied out of the repository, as a template for a user's own workspace, builds
/// against pgo-build-rt as `cargo package` packs it (the unpacked `.crate` stands in for
/// crates.io: no network), instrumented build included (the runtime's own code only builds
/// there).
#[test]
fn the_example_builds_outside_the_repository_against_the_packaged_runtime() {
    let repository = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let packaged = tempfile::tempdir().unwrap();
    let output = Command::new("cargo")
        .args([
            "package",
            "--offline",
            "--no-verify",
            "--allow-dirty",
            "-p",
            "pgo-build-rt",
        ])
        .arg("--target-dir")
        .arg(packaged.path())
        .current_dir(&repository)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Whatever its version: the one `.crate` the package directory holds.
    let crate_file = std::fs::read_dir(packaged.path().join("package"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.extension().is_some_and(|ext| ext == "crate"))
        .expect("cargo package wrote a .crate");
    let status = Command::new("tar")
        .arg("xzf")
        .arg(&crate_file)
        .arg("-C")
        .arg(packaged.path())
        .status()
        .unwrap();
    assert!(status.success());
    let runtime = crate_file.with_extension("");
    let runtime = packaged.path().join(runtime.file_name().unwrap());
    // The package holds what a user's build needs and nothing of the repository's.
    assert!(runtime.join("src/lib.rs").is_file() && runtime.join("LICENSE-MIT").is_file());
    let fixture = Fixture::example("");
    // The copy's path to the repository's crate, whatever form it has.
    let repository_crate = regex::Regex::new(r#"path = "[^"]*pgo-build-rt""#).unwrap();
    for member in ["coordinator", "worker"] {
        fixture.edit(&format!("{member}/Cargo.toml"), |text| {
            assert!(repository_crate.is_match(text), "{text}");
            repository_crate
                .replace(text, format!("path = {:?}", runtime.display().to_string()))
                .into_owned()
        });
    }
    let mut instrument = fixture.command(&["instrument"]);
    instrument.env("CARGO_NET_OFFLINE", "true");
    fixture.run_with(instrument).success();
    assert!(fixture.stage_bin("instrumented", "worker").is_file());
}
