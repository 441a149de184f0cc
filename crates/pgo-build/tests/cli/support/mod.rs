//! What every test file shares: [`Fixture`] (a copy of a fixture workspace and pgo-build
//! run on it), [`Run`] (one invocation, with assertions that print everything), paths in
//! pgo-build's layout.

pub mod schema;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A fresh copy of a fixture workspace and a way to run pgo-build on it.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub subdir: String,
}

/// One pgo-build invocation's result, with assertions that print everything on failure.
pub struct Run {
    pub output: Output,
}

impl Fixture {
    pub fn new(name: &str) -> Fixture {
        Fixture::at(name, "")
    }

    /// A copy of the fixture in `subdir` of a fresh temporary directory.
    pub fn at(name: &str, subdir: &str) -> Fixture {
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
    pub fn example(subdir: &str) -> Fixture {
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

    pub fn root(&self) -> PathBuf {
        self.dir.path().join(&self.subdir)
    }

    pub fn write(&self, relative: &str, contents: &str) -> &Fixture {
        let path = self.root().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
        self
    }

    pub fn write_executable(&self, relative: &str, contents: &str) -> &Fixture {
        self.write(relative, contents);
        std::fs::set_permissions(
            self.root().join(relative),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        self
    }

    /// Rewrites a file of the copy through `change` (a source edit between stages).
    pub fn edit(&self, relative: &str, change: impl FnOnce(&str) -> String) -> &Fixture {
        let path = self.root().join(relative);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, change(&text)).unwrap();
        self
    }

    /// TOML put before the fixture's `pgo-build.toml` (tables, ahead of its `[[workload]]`s).
    pub fn prepend_config(&self, text: &str) -> &Fixture {
        let config = std::fs::read_to_string(self.root().join("pgo-build.toml")).unwrap();
        self.write("pgo-build.toml", &format!("{text}{config}"))
    }

    /// TOML put after the fixture's `pgo-build.toml` (more array entries, or tables).
    pub fn append_config(&self, text: &str) -> &Fixture {
        let config = std::fs::read_to_string(self.root().join("pgo-build.toml")).unwrap();
        self.write("pgo-build.toml", &format!("{config}{text}"))
    }

    /// `pgo-build.toml` with one train workload per command.
    pub fn config(&self, train_commands: &[&str]) -> &Fixture {
        let mut text = String::new();
        for (i, command) in train_commands.iter().enumerate() {
            text += &format!(
                "[[workload]]\nname = \"t{i}\"\nrole = \"train\"\ncommand = {command:?}\ntimeout = 120\n\n"
            );
        }
        self.write("pgo-build.toml", &text)
    }

    pub fn command(&self, args: &[&str]) -> Command {
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
            .env_remove("PGO_BUILD_LLVM_PROFDATA")
            // Tables as wide as their content, so assertions can look for whole cells; the
            // tests of fitting set their own width.
            .env("COLUMNS", "400");
        command
    }

    pub fn run(&self, args: &[&str]) -> Run {
        let run = self.run_with(self.command(args));
        if args.iter().find(|a| !a.starts_with('-')) == Some(&"gate") {
            self.gate_agrees_with_the_answer();
        }
        run
    }

    /// Every gate of the suite is checked against the answer of the comparison it made: the
    /// gate passes its verdicts against the baseline exactly where the answer ships or says
    /// "no measurable difference" or "no proven gain" (one rule decides both).
    fn gate_agrees_with_the_answer(&self) {
        let path = self.layout().path("provenance.json");
        let Ok(text) = std::fs::read_to_string(&path) else {
            return;
        };
        let provenance: serde_json::Value = serde_json::from_str(&text).unwrap();
        let verdicts: Vec<&serde_json::Value> = provenance["verdicts"]
            .as_array()
            .map(|v| v.iter().filter(|v| v["against"] == "baseline").collect())
            .unwrap_or_default();
        if verdicts.is_empty() {
            return;
        }
        let passes = verdicts.iter().all(|v| v["passed"] == true);
        let report = self.run_with(self.command(&["report"]));
        let headline = report
            .stdout()
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned();
        let ships = ["Ship ", "No measurable difference", "No proven gain"]
            .iter()
            .any(|start| headline.starts_with(start));
        let refuses = ["Do not ship", "Not proven yet"]
            .iter()
            .any(|start| headline.starts_with(start));
        assert!(
            ships != refuses && ships == passes,
            "the gate {} its verdicts ({}) but the answer says {headline:?}",
            if passes { "passed" } else { "refused" },
            verdicts
                .iter()
                .map(|v| v["detail"].to_string())
                .collect::<Vec<_>>()
                .join("; ")
        );
    }

    pub fn run_with(&self, mut command: Command) -> Run {
        Run {
            output: command.output().unwrap(),
        }
    }

    /// pgo-build's layout of the host: `target/pgo-build/`.
    pub fn layout(&self) -> TestLayout {
        TestLayout(self.root().join("target/pgo-build"))
    }

    /// The layout of a `--target`: `target/pgo-build/<triple>/`.
    pub fn target_layout(&self, triple: &str) -> TestLayout {
        TestLayout(self.layout().0.join(triple))
    }

    pub fn stage_bin(&self, stage: &str, name: &str) -> PathBuf {
        self.layout().bin(stage, name)
    }

    pub fn report(&self) -> serde_json::Value {
        self.layout().report()
    }

    pub fn raw_profile_dir(&self, workload: &str) -> PathBuf {
        self.layout().path("profiles/raw").join(workload)
    }
}

/// Paths in one of pgo-build's layouts, as tests read them (the public interface: these are
/// the paths users and CI scripts find).
pub struct TestLayout(PathBuf);

impl TestLayout {
    pub fn dir(&self) -> PathBuf {
        self.0.clone()
    }

    /// A path relative to the layout's root, e.g. `"logs/train-t0.log"`.
    pub fn path(&self, relative: &str) -> PathBuf {
        self.0.join(relative)
    }

    pub fn bin(&self, stage: &str, name: &str) -> PathBuf {
        self.0.join(stage).join("bin").join(name)
    }

    pub fn report(&self) -> serde_json::Value {
        read_json(&self.0.join("report.json"))
    }
}

/// A JSON file pgo-build wrote, parsed (the test fails naming it when it is not JSON).
pub fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|err| panic!("could not read {}: {err}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|err| panic!("{} is not JSON: {err}", path.display()))
}

impl Run {
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    pub fn describe(&self) -> String {
        format!(
            "status: {}\n--- stdout\n{}\n--- stderr\n{}",
            self.output.status,
            self.stdout(),
            self.stderr()
        )
    }

    pub fn success(&self) -> &Run {
        assert!(
            self.output.status.success(),
            "expected success\n{}",
            self.describe()
        );
        self
    }

    pub fn failure(&self) -> &Run {
        assert!(
            !self.output.status.success(),
            "expected failure\n{}",
            self.describe()
        );
        self
    }

    /// stderr from its `error:` line on: the refusal as a user reads it.
    pub fn error_text(&self) -> String {
        let stderr = self.stderr();
        match stderr.find("error: ") {
            Some(at) => stderr[at..].to_owned(),
            None => panic!("no error in stderr\n{}", self.describe()),
        }
    }

    pub fn stderr_contains(&self, text: &str) -> &Run {
        assert!(
            self.stderr().contains(text),
            "stderr lacks {text:?}\n{}",
            self.describe()
        );
        self
    }

    pub fn stdout_contains(&self, text: &str) -> &Run {
        assert!(
            self.stdout().contains(text),
            "stdout lacks {text:?}\n{}",
            self.describe()
        );
        self
    }

    pub fn stderr_lacks(&self, text: &str) -> &Run {
        assert!(
            !self.stderr().contains(text),
            "stderr has {text:?}\n{}",
            self.describe()
        );
        self
    }
}

/// Copies a fixture, pointing `@PGO_BUILD_RT@` in manifests at this repository's runtime crate.
pub fn copy_dir(from: &Path, to: &Path) {
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

pub fn run_binary(path: &Path, args: &[&str]) -> String {
    let output = Command::new(path).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "{} {args:?} failed: {output:?}",
        path.display()
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The per-binary accounting `train` recorded for `binary`.
/// The names of the files in `dir`, sorted.
pub fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

pub fn profile_figures(fixture: &Fixture, binary: &str) -> serde_json::Value {
    fixture.report()["profiles"][binary].clone()
}

/// `pgo-build.toml` with BOLT enabled (plus `bolt_extra`) and one train workload per command.
pub fn bolt_fixture(train_commands: &[&str], bolt_extra: &str) -> Fixture {
    let fixture = Fixture::new("twobins");
    let mut text = format!("[bolt]\nenabled = true\n{bolt_extra}\n");
    for (i, command) in train_commands.iter().enumerate() {
        text +=
            &format!("[[workload]]\nname = \"t{i}\"\nrole = \"train\"\ncommand = {command:?}\n\n");
    }
    fixture.write("pgo-build.toml", &text);
    fixture
}

/// The twobins fixture with one train and one holdout workload.
pub fn train_holdout_fixture(train: &str, holdout: &str) -> Fixture {
    let fixture = Fixture::new("twobins");
    write_train_holdout(&fixture, train, holdout);
    fixture
}

pub fn write_train_holdout(fixture: &Fixture, train: &str, holdout: &str) {
    fixture.write(
        "pgo-build.toml",
        &format!(
            "[[workload]]\nname = \"train\"\nrole = \"train\"\ncommand = {train:?}\n\n\
             [[workload]]\nname = \"holdout\"\nrole = \"holdout\"\ncommand = {holdout:?}\n"
        ),
    );
}

pub fn host_triple() -> String {
    let output = Command::new("rustc").arg("-vV").output().unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("host: "))
        .unwrap()
        .to_owned()
}

/// The LLVM major of the rustc under test (`rustc -vV`), so that no test names one LLVM
/// release: the versioned Debian tools it uses are `<tool>-<major>`.
pub fn llvm_major() -> u32 {
    static MAJOR: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *MAJOR.get_or_init(|| {
        let output = Command::new("rustc").arg("-vV").output().unwrap();
        let text = String::from_utf8(output.stdout).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("LLVM version: "))
            .and_then(|version| version.split('.').next())
            .and_then(|major| major.parse().ok())
            .expect("rustc -vV names its LLVM version")
    })
}

/// A versioned LLVM tool of rustc's LLVM major: `llvm_tool("llvm-profdata")` is
/// `llvm-profdata-N` under a rustc of LLVM N.
pub fn llvm_tool(name: &str) -> String {
    format!("{name}-{}", llvm_major())
}

/// The links the wrapper logged for a stage.
pub fn links(fixture: &Fixture, stage: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(fixture.layout().dir().join(stage).join("links.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Whether `pid` is a running process (zombies have ended).
pub fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat[stat.rfind(')').unwrap() + 1..]
            .split_whitespace()
            .next();
        state != Some("Z")
    })
}

/// Waits up to 30 s for `pid` to end.
pub fn ended(pid: &str) -> bool {
    for _ in 0..300 {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    false
}

pub fn merged_profile(fixture: &Fixture) -> PathBuf {
    let dir = fixture.layout().path("profiles");
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

/// A filesystem mounted over a directory for one test (these tests run as root, as CI does),
/// unmounted when dropped, whatever the test's outcome.
pub struct Mounted(PathBuf);

impl Mounted {
    /// A tmpfs of `size` (e.g. "256k") over `dir`.
    pub fn tmpfs(dir: &Path, size: &str) -> Mounted {
        mount(
            &["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"],
            dir,
        );
        Mounted(dir.to_owned())
    }

    /// `dir` itself, read-only.
    pub fn read_only(dir: &Path) -> Mounted {
        mount(&["--bind", dir.to_str().unwrap()], dir);
        let mounted = Mounted(dir.to_owned());
        mount(&["-o", "remount,bind,ro"], dir);
        mounted
    }
}

fn mount(args: &[&str], dir: &Path) {
    let status = Command::new("mount").args(args).arg(dir).status().unwrap();
    assert!(
        status.success(),
        "mount {args:?} {}: these tests run as root",
        dir.display()
    );
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Waits up to 60 s for a file a workload writes, and returns its trimmed contents.
pub fn wait_for_file(path: &Path) -> String {
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

/// `text` as a snapshot keeps it: the fixture's path, times, sizes, percentages, counts of
/// bytes, hashes and pids replaced by placeholders, and runs of spaces and table rules
/// collapsed, so a table whose columns grew by a digit stays the same snapshot while its
/// words, rows and columns are compared.
pub fn normalized(fixture: &Fixture, text: &str) -> String {
    let root = fixture.root().display().to_string();
    let text = text.replace(root.trim_end_matches('/'), "[ROOT]");
    // Install hints name rustc's LLVM major (`apt-get install llvm-22`).
    let text = regex::Regex::new(&format!(
        r"\b(llvm|clang|lld|bolt|fdata|profdata)-{}\b",
        llvm_major()
    ))
    .unwrap()
    .replace_all(&text, "$1-[LLVM]")
    .into_owned();
    let rules: [(&str, &str); 11] = [
        (
            r"rustc \d+\.\d+\.\d+ \([0-9a-f]+ \d{4}-\d{2}-\d{2}\)",
            "rustc [VERSION]",
        ),
        (r"\b\d+\.\d+\.\d+\b", "[VERSION]"),
        (r"\b[0-9a-f]{12,}\b", "[HASH]"),
        (r"\bpid \d+", "pid [PID]"),
        (r"\d+(\.\d+)? (B|KiB|MiB|GiB)\b", "[SIZE]"),
        (r"[+-]?\d+(\.\d+)?%", "[PCT]"),
        (r"\d+(\.\d+)? ?(ms|s|min|h)\b", "[TIME]"),
        (r"\b\d+\.\d+\b", "[NUM]"),
        // Instruction counts (a path's length in the environment moves them).
        (r"\b\d{1,3}(,\d{3})+\b", "[COUNT]"),
        (r" {2,}", " "),
        (r"[─═]+", "─"),
    ];
    let mut text = text;
    for (pattern, replacement) in rules {
        text = regex::Regex::new(pattern)
            .unwrap()
            .replace_all(&text, replacement)
            .into_owned();
    }
    text
}

/// The names of a report's step records, in order.
pub fn step_names(report: &serde_json::Value) -> Vec<&str> {
    report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect()
}

/// A port nothing listens on now (the test then binds it, or relies on nobody doing so): each
/// test's sccache server gets one of its own, since tests of one process run at once and a
/// port derived from the process id was shared (one test's `--stop-server` reset another's).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
