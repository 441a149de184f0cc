//! What a bench or test target's source says before anything is built: whether it needs a
//! nightly compiler (`#![feature(…)]`), and whether the files it names by a relative path
//! exist. `init` proposes only targets that pass; `doctor` refuses a cargo workload that runs
//! one that does not, so neither is found out after two builds and a training run.
//!
//! The file check reads string literals that look like relative file paths (`tests/data/a.md`,
//! `include_str!("../x.txt")`), taken as relative to the package (where cargo runs a bench or
//! test) or to the source file (where `include_*!` looks). A path built at run time escapes it:
//! the check names what it sees, it does not prove a target runs.

use std::path::{Path, PathBuf};

/// A bench or test target of a workspace member, where its source is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetSource {
    /// `bench` or `test`.
    pub kind: String,
    pub name: String,
    pub package: String,
    /// The target's root source file (`benches/parse.rs`).
    pub src_path: PathBuf,
    /// The directory of the package's Cargo.toml: a bench's or test's working directory.
    pub package_root: PathBuf,
    /// Its `required-features`: a plain `cargo bench` skips it unless they are enabled.
    pub required_features: Vec<String>,
}

/// Why a target cannot run here, said so a user knows what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unrunnable {
    /// `#![feature(…)]` on a stable compiler: E0554 at its first build.
    NightlyOnly { features: Vec<String> },
    /// Files the source names that do not exist (a published crate often ships without
    /// its test data).
    MissingInputs { paths: Vec<String> },
}

impl std::fmt::Display for Unrunnable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unrunnable::NightlyOnly { features } => write!(
                f,
                "its source uses #![feature({})], which only a nightly rustc compiles (E0554 \
                 on this one)",
                features.join(", ")
            ),
            Unrunnable::MissingInputs { paths } => {
                // The first few name the kind of file; a benchmark suite may read dozens.
                let mut named: Vec<String> =
                    paths.iter().take(3).map(|p| format!("`{p}`")).collect();
                if paths.len() > 3 {
                    named.push(format!("{} more", paths.len() - 3));
                }
                write!(
                    f,
                    "it reads {} that {} not exist here",
                    named.join(", "),
                    if paths.len() == 1 { "does" } else { "do" }
                )
            }
        }
    }
}

impl TargetSource {
    /// What stops this target from running with a compiler that is `nightly` or not, from
    /// its root source file; empty when nothing does (or the file cannot be read: the build
    /// then says why).
    pub fn unrunnable(&self, nightly: bool) -> Vec<Unrunnable> {
        let Ok(text) = std::fs::read_to_string(&self.src_path) else {
            return Vec::new();
        };
        let mut found = Vec::new();
        let features = feature_gates(&text);
        if !nightly && !features.is_empty() {
            found.push(Unrunnable::NightlyOnly { features });
        }
        let source_dir = self.src_path.parent().unwrap_or(Path::new("."));
        let mut paths: Vec<String> = relative_file_literals(&text)
            .into_iter()
            .filter(|path| {
                !self.package_root.join(path).exists() && !source_dir.join(path).exists()
            })
            .collect();
        paths.dedup();
        if !paths.is_empty() {
            found.push(Unrunnable::MissingInputs { paths });
        }
        found
    }
}

/// Whether the compiler whose `rustc -vV` first line is `version_line` accepts
/// `#![feature]`: a nightly or dev build, or any with RUSTC_BOOTSTRAP=1.
pub fn accepts_feature_gates(version_line: &str) -> bool {
    version_line.contains("-nightly")
        || version_line.contains("-dev")
        || std::env::var("RUSTC_BOOTSTRAP").is_ok_and(|v| v == "1")
}

/// The features of the crate-level `#![feature(a, b)]` attributes in `text`: inner attributes
/// come before any item, so only the file's head is read (a test's fixture text further down
/// may well hold one).
fn feature_gates(text: &str) -> Vec<String> {
    let mut features = Vec::new();
    let mut in_block_comment = false;
    for line in text.lines() {
        let line = line.trim_start();
        if in_block_comment {
            in_block_comment = !line.contains("*/");
            continue;
        }
        if line.starts_with("/*") {
            in_block_comment = !line.contains("*/");
            continue;
        }
        if line.is_empty() || line.starts_with("//") {
            continue;
        }
        if !line.starts_with("#![") {
            break;
        }
        let Some(rest) = line.strip_prefix("#![feature(") else {
            continue;
        };
        let list = rest.split(')').next().unwrap_or_default();
        features.extend(
            list.split(',')
                .map(str::trim)
                .filter(|f| !f.is_empty())
                .map(str::to_owned),
        );
    }
    features
}

/// String literals of `text` that look like relative paths of files: only path characters,
/// at least one `/`, a file name with an extension, neither absolute nor a URL. In the order
/// they appear, each once.
fn relative_file_literals(text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for line in text.lines() {
        let code = line.trim_start();
        // Comments, and lines that make files rather than read them.
        if code.starts_with("//")
            || code.starts_with('*')
            || ["create", "write", "join("]
                .iter()
                .any(|w| line.contains(w))
        {
            continue;
        }
        // Every other piece between quotes is inside a literal.
        for literal in line.split('"').skip(1).step_by(2) {
            if is_relative_file_path(literal) && !found.iter().any(|f| f == literal) {
                found.push(literal.to_owned());
            }
        }
    }
    found
}

/// `tests/data/a.md`, `../spec.txt`: path characters only, a `/`, a file name with a short
/// alphabetic extension; not absolute, not a URL or domain (`github.com/x/y.git`), not a
/// version or number (`refs/tags/v1.0.0`, `1/2.5`), not under `target/` (what builds write).
fn is_relative_file_path(literal: &str) -> bool {
    let Some((dir, name)) = literal.rsplit_once('/') else {
        return false;
    };
    let Some((stem, extension)) = name.rsplit_once('.') else {
        return false;
    };
    let first = dir.split('/').next().unwrap_or_default();
    !literal.starts_with('/')
        && !literal.contains("//")
        && !literal.starts_with("target/")
        && literal
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-'))
        && !stem.is_empty()
        && (1..=5).contains(&extension.len())
        && extension.chars().all(|c| c.is_ascii_alphabetic())
        && (first == "." || first == ".." || !first.contains('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(dir: &Path, source: &str) -> TargetSource {
        std::fs::create_dir_all(dir.join("benches")).unwrap();
        let src_path = dir.join("benches/parse.rs");
        std::fs::write(&src_path, source).unwrap();
        TargetSource {
            kind: "bench".into(),
            name: "parse".into(),
            package: "pkg".into(),
            src_path,
            package_root: dir.to_owned(),
            required_features: Vec::new(),
        }
    }

    #[test]
    fn only_what_reads_like_a_file_to_read_counts() {
        for data in [
            "refs/tags/v1.0.0",
            "application/vnd.ms-excel",
            "1/2.5",
            "github.com/x/y.git",
            "target/out.json",
            "text/html",
            "{}/x.md",
            "/etc/hosts.conf",
            "https://x.org/a.md",
        ] {
            assert!(!is_relative_file_path(data), "{data}");
        }
        for path in [
            "tests/data/a.md",
            "../spec.txt",
            "./near.txt",
            "benches/input.json",
        ] {
            assert!(is_relative_file_path(path), "{path}");
        }
        // Made, not read; and a fixture's text further down is no crate attribute.
        assert!(relative_file_literals("std::fs::write(\"out/x.txt\", b)").is_empty());
        assert!(
            feature_gates("//! doc\nuse std::fs;\nconst T: &str = r#\"\n#![feature(x)]\n\"#;\n")
                .is_empty()
        );
        assert_eq!(
            feature_gates("/* a\n b */\n#![allow(x)]\n#![feature(y)]\nfn f() {}"),
            ["y"]
        );
    }

    #[test]
    fn a_feature_gate_is_nightly_only_and_missing_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("data")).unwrap();
        std::fs::write(dir.path().join("data/small.md"), "x").unwrap();
        std::fs::write(dir.path().join("benches/near.txt"), "x").ok();
        let source = "#![feature(test)]\n#![feature(a, b)]\nextern crate test;\n\
             // \"tests/commented.md\" is not read\n\
             fn f() { let a = std::fs::read(\"data/small.md\"); let b = \
             std::fs::read_to_string(\"tests/fixtures/big.md\");\n\
             let c = include_str!(\"../third_party/spec.txt\"); let d = \"text/html\"; \
             let e = \"https://x.org/a.md\"; let f = \"{}/x.md\"; let g = \"/etc/hosts.conf\"; \
             let h = \"tests/fixtures/big.md\"; }\n";
        let target = target(dir.path(), source);
        let found = target.unrunnable(false);
        assert_eq!(
            found,
            [
                Unrunnable::NightlyOnly {
                    features: vec!["test".into(), "a".into(), "b".into()]
                },
                Unrunnable::MissingInputs {
                    paths: vec![
                        "tests/fixtures/big.md".into(),
                        "../third_party/spec.txt".into()
                    ]
                }
            ]
        );
        // A long list is cut to the first three and a count.
        let many = Unrunnable::MissingInputs {
            paths: (0..31).map(|i| format!("tests/files/{i}.png")).collect(),
        };
        assert_eq!(
            many.to_string(),
            "it reads `tests/files/0.png`, `tests/files/1.png`, `tests/files/2.png`, 28 more \
             that do not exist here"
        );
        // On nightly only the files remain; with every file there, nothing.
        assert_eq!(target.unrunnable(true).len(), 1);
        std::fs::create_dir_all(dir.path().join("tests/fixtures")).unwrap();
        std::fs::write(dir.path().join("tests/fixtures/big.md"), "x").unwrap();
        std::fs::create_dir_all(dir.path().join("third_party")).unwrap();
        std::fs::write(dir.path().join("third_party/spec.txt"), "x").unwrap();
        assert_eq!(target.unrunnable(true), []);
        // A path relative to the source file counts too.
        let near = super::relative_file_literals("include_bytes!(\"./near.txt\")");
        assert_eq!(near, ["./near.txt"]);
        assert!(
            found[0].to_string().contains("#![feature(test, a, b)]"),
            "{}",
            found[0]
        );
    }

    #[test]
    fn nightly_and_dev_compilers_accept_feature_gates() {
        assert!(accepts_feature_gates(
            "rustc 1.97.0-nightly (abc 2026-11-01)"
        ));
        assert!(accepts_feature_gates("rustc 1.97.0-dev"));
        if std::env::var_os("RUSTC_BOOTSTRAP").is_none() {
            assert!(!accepts_feature_gates("rustc 1.95.0 (abc 2026-10-01)"));
        }
    }
}
