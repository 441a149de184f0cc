//! The sources of every package a build compiles, fingerprinted: what `export` records beside
//! a profile, and what `profile check` compares with the current checkout to tell, without
//! building, which of the profile's functions may have changed since.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The sources a profile was trained on (`export`'s metadata), or the checkout's now.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SourceRecord {
    /// By package name (and ` <version>` for a package present in several versions, as stable
    /// symbol names tell them apart).
    pub packages: BTreeMap<String, PackageSources>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PackageSources {
    pub version: String,
    /// Its crates' names (lib and bin targets, `-` as `_`).
    pub crates: Vec<String>,
    /// Of every `.rs` file of the package (outside tests, benches, examples and target dirs).
    pub hash: String,
    /// Each file's hash, by path relative to the package; only for packages that hold a
    /// measurable share of the profile (see [`SourceRecord::keep_files_of`]), to keep the
    /// record small.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, String>,
    /// Fingerprints of its hot functions' source (see `fn_source`), by `<file>::<name>`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub functions: BTreeMap<String, String>,
    /// Where it is (the current checkout's or registry's copy); not recorded.
    #[serde(skip)]
    pub dir: PathBuf,
}

impl PackageSources {
    /// The fingerprint of the `fn name` items of `file` in this package's current sources.
    pub fn fingerprint_now(&self, file: &str, name: &str) -> Option<String> {
        let text = std::fs::read_to_string(self.dir.join(file)).ok()?;
        super::fn_source::fingerprint(&text, name)
    }

    /// Whether a `fn name` item of `file` is generic over a type in the current sources.
    pub fn generic_now(&self, file: &str, name: &str) -> bool {
        std::fs::read_to_string(self.dir.join(file))
            .is_ok_and(|text| super::fn_source::is_generic(&text, name))
    }
}

/// Directories of a package whose sources never go into its library or binaries.
const SKIPPED_DIRS: [&str; 5] = ["target", "tests", "benches", "examples", "fuzz"];

impl SourceRecord {
    /// The sources of `packages` (name, version, manifest directory, crate names), the ones
    /// named in `duplicated` keyed with their version.
    pub fn of(packages: &[(String, String, &Path, Vec<String>)], duplicated: &[String]) -> Self {
        let mut record = SourceRecord::default();
        for (name, version, dir, crates) in packages {
            let files = rust_files(dir);
            let mut all = String::new();
            for (path, hash) in &files {
                all.push_str(&format!("{path} {hash}\n"));
            }
            let key = match duplicated.contains(name) {
                true => format!("{name} {version}"),
                false => name.clone(),
            };
            record.packages.insert(
                key,
                PackageSources {
                    version: version.clone(),
                    crates: crates.clone(),
                    hash: crate::util::files::sha256_hex(all.as_bytes())[..16].to_owned(),
                    files,
                    functions: BTreeMap::new(),
                    dir: dir.to_path_buf(),
                },
            );
        }
        record
    }

    /// Drops the per-file hashes of every package whose crates are not in `crates`.
    pub fn keep_files_of(&mut self, crates: &BTreeSet<String>) {
        for package in self.packages.values_mut() {
            if !package.crates.iter().any(|c| crates.contains(c)) {
                package.files.clear();
            }
        }
    }

    /// The package a crate belongs to, mutable.
    pub fn package_of_mut(&mut self, krate: &str) -> Option<&mut PackageSources> {
        self.packages
            .values_mut()
            .find(|p| p.crates.iter().any(|c| c == krate))
    }

    /// The package a crate belongs to.
    pub fn package_of(&self, krate: &str) -> Option<(&str, &PackageSources)> {
        self.packages
            .iter()
            .find(|(_, p)| p.crates.iter().any(|c| c == krate))
            .map(|(key, package)| (key.as_str(), package))
    }
}

/// Every `.rs` file under `dir` that can be compiled into the package's crates, by relative
/// path, with 16 hex digits of its content's hash.
fn rust_files(dir: &Path) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&current) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                let skipped = name.starts_with('.')
                    || (current == dir && SKIPPED_DIRS.contains(&name.as_str()));
                if !skipped {
                    pending.push(path);
                }
            } else if name.ends_with(".rs")
                && let Ok(data) = std::fs::read(&path)
                && let Ok(relative) = path.strip_prefix(dir)
            {
                files.insert(
                    relative.to_string_lossy().into_owned(),
                    crate::util::files::sha256_hex(&data)[..16].to_owned(),
                );
            }
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_fingerprinted_per_package_and_file_without_tests_or_build_output() {
        let dir = tempfile::tempdir().unwrap();
        let package = dir.path().join("kernel");
        for (path, text) in [
            ("src/lib.rs", "pub mod a;"),
            ("src/a.rs", "pub fn f() {}"),
            ("tests/t.rs", "#[test] fn t() {}"),
            ("target/debug/build/x/out/gen.rs", "fn g() {}"),
        ] {
            let file = package.join(path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, text).unwrap();
        }
        let packages = [(
            "kernel".to_owned(),
            "1.0.0".to_owned(),
            package.as_path(),
            vec!["kernel".to_owned()],
        )];
        let before = SourceRecord::of(&packages, &[]);
        assert_eq!(before.packages["kernel"].dir, package);
        let files: Vec<&String> = before.packages["kernel"].files.keys().collect();
        assert_eq!(files, ["src/a.rs", "src/lib.rs"]);
        std::fs::write(package.join("tests/t.rs"), "changed").unwrap();
        assert_eq!(SourceRecord::of(&packages, &[]), before);
        std::fs::write(package.join("src/a.rs"), "pub fn f() { g() }").unwrap();
        let after = SourceRecord::of(&packages, &[]);
        assert_ne!(
            after.packages["kernel"].hash,
            before.packages["kernel"].hash
        );
        assert_eq!(
            after.packages["kernel"].files["src/lib.rs"],
            before.packages["kernel"].files["src/lib.rs"]
        );
        // A package in several versions is keyed with its version.
        let keyed = SourceRecord::of(&packages, &["kernel".to_owned()]);
        assert!(keyed.packages.contains_key("kernel 1.0.0"));
        assert_eq!(keyed.package_of("kernel").unwrap().0, "kernel 1.0.0");
    }
}
