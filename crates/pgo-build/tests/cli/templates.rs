//! The CI templates in `docs/ci/` run: every job's steps in order, through bash, on a checkout
//! of a fixture workspace, as a GitHub runner would run them. What the runner and the actions
//! provide is stood in for, and only that: `actions/checkout` is the checkout, the sccache
//! action puts sccache on PATH (with a local cache in place of GitHub's), artifacts and caches
//! are directories, `cargo install … pgo-build` compiles a crate through the job's own
//! environment (so a `RUSTC_WRAPPER` no step installed fails it, as on GitHub) and installs
//! this pgo-build, `rustup component add llvm-tools` is a no-op (the LLVM tools are the
//! machine's), and `gh` hands out the last release. A template job that cannot start, or a
//! step that fails, fails the test with the step's output.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use yaml_rust2::{Yaml, YamlLoader};

use crate::support::*;

/// A train workload that splits itself in four (one part per shard of `github-actions.yml`,
/// each its own share of the work) and a held-out one; instruction counts decide, so the
/// gates' verdicts do not depend on the machine's load.
const CONFIG: &str = "[compare]\nmetric = \"instructions\"\n\n\
    [[workload]]\nname = \"train\"\nrole = \"train\"\n\
    command = \"$PGO_BUILD_BIN_APP $((150000 + PGO_BUILD_SHARD_INDEX * 20000))\"\n\
    shards = 4\n\n\
    [[workload]]\nname = \"holdout\"\nrole = \"holdout\"\ncommand = \"$PGO_BUILD_BIN_APP 20000\"\n";

#[test]
fn the_training_template_runs_every_job() {
    let fixture = Fixture::new("releases");
    fixture.write("pgo-build.toml", CONFIG);
    let runner = Runner::new(&fixture);
    runner.workflow("github-actions.yml");
    // The last job's upload holds the optimized binaries the gate passed.
    let optimized = runner.artifacts.path().join("optimized");
    assert!(
        optimized
            .join("target/pgo-build/optimized/bin/app")
            .is_file(),
        "{}",
        optimized.display()
    );
}

#[test]
fn the_release_and_refresh_templates_run_every_job() {
    let fixture = Fixture::new("releases");
    fixture.write("pgo-build.toml", CONFIG);
    // What the developer did once: trained, and committed the profile.
    fixture.run(&["run", "--no-compare"]).success();
    fixture
        .run(&["export", "--output", "pgo/profile.profdata"])
        .success();
    fixture.edit("pgo-build.toml", |config| {
        format!("[pgo]\nprofile = \"pgo/profile.profdata\"\n\n{config}")
    });
    let runner = Runner::new(&fixture);
    // The last release: this build's binaries, as `gh release download` hands them out.
    let binaries = fixture.dir.path().join("last-release-binaries");
    std::fs::create_dir_all(&binaries).unwrap();
    std::fs::copy(fixture.stage_bin("optimized", "app"), binaries.join("app")).unwrap();
    let status = Command::new("tar")
        .arg("czf")
        .arg(runner.stand_ins.path().join("binaries.tar.gz"))
        .arg("-C")
        .arg(&binaries)
        .arg("app")
        .status()
        .unwrap();
    assert!(status.success());
    runner.workflow("release.yml");
    let gate = runner.artifacts.path().join("release-binaries");
    assert!(gate.join("shipped-bin/app").is_file(), "{}", gate.display());
    runner.workflow("refresh-profile.yml");
    assert!(
        runner
            .artifacts
            .path()
            .join("pgo-profile/pgo/profile.profdata")
            .is_file()
    );
}

/// One simulated runner: the fixture every job checks out, the artifacts jobs hand on, the
/// caches, and the stand-ins.
struct Runner<'a> {
    fixture: &'a Fixture,
    artifacts: tempfile::TempDir,
    caches: tempfile::TempDir,
    stand_ins: tempfile::TempDir,
    /// Where the stand-in of `cargo install` puts pgo-build: cargo's bin directory.
    cargo_bin: tempfile::TempDir,
    sccache_dir: tempfile::TempDir,
    /// The machine's sccache, put on PATH by the sccache action's stand-in only.
    sccache: PathBuf,
    /// PATH without sccache or pgo-build: a job that does not install them does not have them.
    bare_path: String,
    sccache_port: String,
}

impl<'a> Runner<'a> {
    fn new(fixture: &'a Fixture) -> Runner<'a> {
        let path = std::env::var("PATH").unwrap_or_default();
        let sccache = std::env::split_paths(&path)
            .map(|dir| dir.join("sccache"))
            .find(|candidate| candidate.is_file())
            .expect("sccache, which the templates use (scripts/install-deps installs it)");
        // PATH without sccache or an installed pgo-build: a job has what its steps install.
        let bare_path = std::env::join_paths(
            std::env::split_paths(&path)
                .filter(|dir| !dir.join("sccache").exists() && !dir.join("pgo-build").exists()),
        )
        .unwrap()
        .to_string_lossy()
        .into_owned();
        let runner = Runner {
            fixture,
            artifacts: tempfile::tempdir().unwrap(),
            caches: tempfile::tempdir().unwrap(),
            stand_ins: tempfile::tempdir().unwrap(),
            cargo_bin: tempfile::tempdir().unwrap(),
            sccache_dir: tempfile::tempdir().unwrap(),
            sccache,
            bare_path,
            // Its own sccache server, apart from anyone else's on the default port.
            sccache_port: crate::support::free_port().to_string(),
        };
        runner.write_stand_ins();
        runner
    }

    /// `cargo`, `rustup` and `gh` as a job's PATH finds them first.
    fn write_stand_ins(&self) {
        let real_cargo = which("cargo");
        let real_rustup = which("rustup");
        let pgo_build = Path::new(env!("CARGO_BIN_EXE_pgo-build"));
        let dir = self.stand_ins.path();
        let probe = dir.join("install-probe");
        std::fs::create_dir_all(probe.join("src")).unwrap();
        std::fs::write(
            probe.join("Cargo.toml"),
            "[package]\nname = \"install-probe\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
             [workspace]\n",
        )
        .unwrap();
        std::fs::write(probe.join("src/main.rs"), "fn main() {}\n").unwrap();
        let script = |name: &str, text: String| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            let mut permissions = std::fs::metadata(&path).unwrap().permissions();
            std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
            std::fs::set_permissions(&path, permissions).unwrap();
        };
        // `cargo install`: a compile through the job's environment (its RUSTC_WRAPPER
        // included), then this pgo-build where cargo installs binaries.
        script(
            "cargo",
            format!(
                "#!/usr/bin/env bash\nset -euo pipefail\n\
                 if [ \"${{1:-}}\" = install ]; then\n\
                 if [ -n \"${{RUSTC_WRAPPER:-}}\" ] && ! command -v \"$RUSTC_WRAPPER\" >/dev/null; then\n\
                 echo \"error: could not execute process \\`$RUSTC_WRAPPER\\` (never executed): \
                 RUSTC_WRAPPER names it, and no step installed it\" >&2; exit 101\nfi\n\
                 \"{cargo}\" build --quiet --manifest-path \"{probe}/Cargo.toml\" \
                 --target-dir \"{probe}/target\"\n\
                 cp \"{pgo_build}\" \"{bin}/pgo-build\"\n\
                 cp \"{pgo_build}\" \"{bin}/cargo-pgo-build\"\n\
                 echo \"  Installed {bin}/pgo-build (stand-in)\" >&2\n\
                 exit 0\nfi\n\
                 exec \"{cargo}\" \"$@\"\n",
                cargo = real_cargo.display(),
                probe = probe.display(),
                pgo_build = pgo_build.display(),
                bin = self.cargo_bin.path().display(),
            ),
        );
        script(
            "rustup",
            format!(
                "#!/usr/bin/env bash\n\
                 if [ \"$*\" = \"component add llvm-tools\" ]; then\n\
                 echo 'info: llvm-tools (stand-in: the machine has LLVM tools)' >&2; exit 0\nfi\n\
                 exec \"{}\" \"$@\"\n",
                real_rustup.display()
            ),
        );
        script(
            "gh",
            format!(
                "#!/usr/bin/env bash\nset -euo pipefail\n\
                 case \"$1 $2\" in\n\
                 'release list') echo v0.1.0 ;;\n\
                 'release download') cat \"{}\" ;;\n\
                 *) echo \"gh stand-in: $* is not stood in for\" >&2; exit 1 ;;\n\
                 esac\n",
                dir.join("binaries.tar.gz").display()
            ),
        );
    }

    /// Runs every job of `docs/ci/<name>` in the order `needs` gives, each matrix entry a job.
    fn workflow(&self, name: &str) {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs/ci")
            .join(name);
        let text = std::fs::read_to_string(&path).unwrap();
        let workflow = YamlLoader::load_from_str(&text).unwrap().remove(0);
        let env = string_map(&workflow["env"]);
        let jobs = workflow["jobs"].as_hash().expect("jobs");
        let mut done: Vec<String> = Vec::new();
        while done.len() < jobs.len() {
            let before = done.len();
            for (id, job) in jobs {
                let id = id.as_str().unwrap().to_owned();
                let needs: Vec<String> = match &job["needs"] {
                    Yaml::String(one) => vec![one.clone()],
                    Yaml::Array(many) => many
                        .iter()
                        .filter_map(|n| n.as_str())
                        .map(String::from)
                        .collect(),
                    _ => Vec::new(),
                };
                if done.contains(&id) || !needs.iter().all(|n| done.contains(n)) {
                    continue;
                }
                let shards: Vec<String> = job["strategy"]["matrix"]["shard"]
                    .as_vec()
                    .map(|v| v.iter().map(yaml_text).collect())
                    .unwrap_or_else(|| vec![String::new()]);
                for shard in &shards {
                    let values = BTreeMap::from([
                        ("matrix.shard", shard.clone()),
                        ("strategy.job-total", shards.len().to_string()),
                        ("github.token", "stand-in-token".to_owned()),
                        ("runner.os", "Linux".to_owned()),
                        ("github.run_id", "1".to_owned()),
                        ("github.job", id.clone()),
                    ]);
                    self.job(name, &id, job, &env, &values);
                }
                done.push(id);
            }
            assert!(
                done.len() > before,
                "{name}: jobs whose needs are never met"
            );
        }
    }

    /// One job on a fresh checkout: its steps in order, as the runner decides which run.
    fn job(
        &self,
        workflow: &str,
        id: &str,
        job: &Yaml,
        workflow_env: &BTreeMap<String, String>,
        values: &BTreeMap<&str, String>,
    ) {
        let checkout = tempfile::tempdir().unwrap();
        let root = checkout.path().join("work");
        copy_dir(&self.fixture.root(), &root);
        let summary = checkout.path().join("step-summary.md");
        let mut env = workflow_env.clone();
        env.extend(string_map(&job["env"]));
        let mut path = format!(
            "{}:{}:{}",
            self.stand_ins.path().display(),
            self.cargo_bin.path().display(),
            self.bare_path
        );
        let mut failed = false;
        let mut log = String::new();
        // A job-level `if:` runs the job on a manual dispatch, as this runner's event is.
        if let Some(condition) = job["if"].as_str() {
            assert!(
                condition.contains("github.event_name != 'push'"),
                "{workflow} job `{id}`: `if: {condition}` is not stood in for"
            );
        }
        for (index, step) in job["steps"].as_vec().expect("steps").iter().enumerate() {
            // A key this runner does not stand in for (shell, working-directory, timeout…)
            // would be ignored silently: noticed instead.
            for key in step.as_hash().expect("a step").keys() {
                let key = key.as_str().unwrap_or_default();
                assert!(
                    [
                        "name",
                        "uses",
                        "with",
                        "run",
                        "env",
                        "if",
                        "id",
                        "continue-on-error"
                    ]
                    .contains(&key),
                    "{workflow} job `{id}`: step key `{key}` is not stood in for"
                );
            }
            let label = format!(
                "{workflow} job `{id}`{} step {} ({})",
                values
                    .get("matrix.shard")
                    .filter(|s| !s.is_empty())
                    .map_or(String::new(), |s| format!(" [shard {s}]")),
                index + 1,
                step["name"]
                    .as_str()
                    .or(step["uses"].as_str())
                    .or(step["run"].as_str())
                    .unwrap_or("?")
            );
            let runs = match step["if"].as_str() {
                Some("always()") => true,
                Some("failure()") => failed,
                Some(other) => panic!("{label}: `if: {other}` is not stood in for"),
                None => !failed,
            };
            if !runs {
                continue;
            }
            if let Some(action) = step["uses"].as_str() {
                let with = &step["with"];
                let expand = |text: &str| expand(text, values, &label);
                match action.split('@').next().unwrap() {
                    "actions/checkout" => {}
                    "mozilla-actions/sccache-action" => {
                        // The real action installs sccache and points it at GitHub's cache;
                        // here the machine's sccache, with a local cache of its own.
                        path = format!("{}:{path}", self.sccache.parent().unwrap().display());
                        env.insert("SCCACHE_GHA_ENABLED".into(), "false".into());
                        env.insert(
                            "SCCACHE_DIR".into(),
                            self.sccache_dir.path().display().to_string(),
                        );
                    }
                    "actions/upload-artifact" => {
                        let name = expand(with["name"].as_str().unwrap());
                        let into = self.artifacts.path().join(name);
                        for entry in yaml_text(&with["path"]).lines().map(str::trim) {
                            let entry = expand(entry);
                            if entry.is_empty() {
                                continue;
                            }
                            let from = root.join(entry.trim_end_matches('/'));
                            assert!(from.exists(), "{label}: nothing at {}", from.display());
                            copy_any(&from, &into.join(entry.trim_end_matches('/')));
                        }
                    }
                    "actions/download-artifact" => {
                        let names: Vec<String> =
                            match (with["name"].as_str(), with["pattern"].as_str()) {
                                (Some(name), _) => vec![expand(name)],
                                (None, Some(pattern)) => {
                                    artifact_names(self.artifacts.path(), pattern)
                                }
                                _ => panic!("{label}: a download without name or pattern"),
                            };
                        assert!(!names.is_empty(), "{label}: no artifact to download");
                        for name in names {
                            let from = self.artifacts.path().join(&name);
                            assert!(from.is_dir(), "{label}: no artifact `{name}`");
                            for entry in std::fs::read_dir(&from).unwrap() {
                                let entry = entry.unwrap();
                                copy_any(&entry.path(), &root.join(entry.file_name()));
                            }
                        }
                    }
                    "actions/cache/restore" => {
                        let file = expand(with["path"].as_str().unwrap());
                        let cached = self.caches.path().join(&file);
                        if cached.exists() {
                            copy_any(&cached, &root.join(&file));
                        }
                    }
                    "actions/cache/save" => {
                        let file = expand(with["path"].as_str().unwrap());
                        if root.join(&file).exists() {
                            copy_any(&root.join(&file), &self.caches.path().join(&file));
                        }
                    }
                    other => panic!("{label}: the action {other} is not stood in for"),
                }
                continue;
            }
            let script = expand(step["run"].as_str().expect("run or uses"), values, &label);
            let mut command = Command::new("bash");
            // GitHub's default shell for `run`.
            command
                .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", &script])
                .current_dir(&root)
                .env_clear()
                .env("PATH", &path)
                .env("HOME", std::env::var("HOME").unwrap_or_default())
                .env("GITHUB_STEP_SUMMARY", &summary)
                .env("GITHUB_SHA", "0000000")
                .env("GITHUB_RUN_ID", "1")
                .env("SCCACHE_SERVER_PORT", &self.sccache_port)
                .env("COLUMNS", "100");
            for key in [
                "CARGO_HOME",
                "RUSTUP_HOME",
                "RUSTUP_TOOLCHAIN",
                "USER",
                "TMPDIR",
            ] {
                if let Some(value) = std::env::var_os(key) {
                    command.env(key, value);
                }
            }
            command.envs(&env);
            command.envs(
                string_map(&step["env"])
                    .into_iter()
                    .map(|(k, v)| (k, expand(&v, values, &label))),
            );
            let output = command.output().unwrap();
            log += &format!(
                "--- {label}\n{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            // A step allowed to fail (the refresh template's check) still succeeds here: the
            // fixture's profile is fresh, so a failure is the step's own.
            if !output.status.success() {
                failed = true;
            }
        }
        let _ = Command::new(&self.sccache)
            .arg("--stop-server")
            .env("SCCACHE_SERVER_PORT", &self.sccache_port)
            .output();
        assert!(!failed, "{workflow} job `{id}` failed:\n{log}");
    }
}

/// `${{ … }}` replaced by the values the runner gives; an expression it has no value for fails
/// the test (a template that grew one is noticed).
fn expand(text: &str, values: &BTreeMap<&str, String>, label: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${{") {
        out += &rest[..start];
        let end = rest[start..].find("}}").expect("a closed expression") + start;
        let expression = rest[start + 3..end].trim();
        let value = values
            .get(expression)
            .unwrap_or_else(|| panic!("{label}: no stand-in for `${{{{ {expression} }}}}`"));
        out += value;
        rest = &rest[end + 2..];
    }
    out + rest
}

fn yaml_text(value: &Yaml) -> String {
    match value {
        Yaml::String(text) => text.clone(),
        Yaml::Integer(n) => n.to_string(),
        Yaml::Boolean(b) => b.to_string(),
        Yaml::Real(r) => r.clone(),
        _ => String::new(),
    }
}

fn string_map(value: &Yaml) -> BTreeMap<String, String> {
    value
        .as_hash()
        .map(|hash| {
            hash.iter()
                .map(|(k, v)| (yaml_text(k), yaml_text(v)))
                .collect()
        })
        .unwrap_or_default()
}

/// The artifacts a download's `pattern` matches: `bundle-*`, `{baseline,release}`.
fn artifact_names(dir: &Path, pattern: &str) -> Vec<String> {
    let alternatives: Vec<String> =
        match pattern.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
            Some(list) => list.split(',').map(str::to_owned).collect(),
            None => vec![pattern.to_owned()],
        };
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| {
            alternatives
                .iter()
                .any(|alternative| match alternative.strip_suffix('*') {
                    Some(prefix) => name.starts_with(prefix),
                    None => name == alternative,
                })
        })
        .collect();
    names.sort();
    names
}

fn copy_any(from: &Path, to: &Path) {
    if from.is_dir() {
        copy_dir(from, to);
    } else {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, to).unwrap();
    }
}

fn which(program: &str) -> PathBuf {
    let path = std::env::var("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| panic!("{program} is not on PATH"))
}
