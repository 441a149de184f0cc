//! Fingerprints: a hash of labelled parts (text, files by metadata or content, whole trees),
//! by which stages, accountings and explore's builds are recognised as unchanged.

use std::path::Path;

use sha2::{Digest, Sha256};

/// Builds a fingerprint from labelled parts.
pub struct Fingerprint(Sha256);

impl Fingerprint {
    pub fn new(stage: &str) -> Fingerprint {
        let mut fingerprint = Fingerprint(Sha256::new());
        fingerprint.text("stage", stage);
        fingerprint
    }

    pub fn text(&mut self, label: &str, value: &str) -> &mut Fingerprint {
        self.0.update(label.as_bytes());
        self.0.update([0]);
        self.0.update((value.len() as u64).to_le_bytes());
        self.0.update(value.as_bytes());
        self
    }

    /// A file by path, size and modification time; a missing file counts as such.
    pub fn file(&mut self, path: &Path) -> &mut Fingerprint {
        let meta = std::fs::metadata(path)
            .map(|m| {
                let modified = m
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos());
                format!("{} {modified}", m.len())
            })
            .unwrap_or_else(|_| "missing".to_owned());
        self.text(&path.display().to_string(), &meta)
    }

    /// A file by content, under `name` (a path relative to a checkout: the same in every one);
    /// a missing file counts as such.
    pub fn content_named(&mut self, name: &str, path: &Path) -> &mut Fingerprint {
        match std::fs::read(path) {
            Ok(bytes) => {
                let digest = Sha256::digest(&bytes);
                self.0.update(name.as_bytes());
                self.0.update([0]);
                self.0.update(digest);
                self
            }
            Err(_) => self.text(name, "missing"),
        }
    }

    /// Every regular file below `dir`, sorted.
    pub fn tree(&mut self, dir: &Path) -> &mut Fingerprint {
        let mut files = Vec::new();
        collect_files(dir, &mut files);
        files.sort();
        for file in files {
            self.file(&file);
        }
        self
    }

    pub fn finish(&self) -> String {
        self.0
            .clone()
            .finalize()
            .iter()
            .take(16)
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

fn collect_files(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => collect_files(&path, files),
            Ok(kind) if kind.is_file() => files.push(path),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_change_with_file_metadata_and_text() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.rs");
        std::fs::write(&file, "one").unwrap();
        let print = || {
            Fingerprint::new("build")
                .file(&file)
                .text("flags", "-C x")
                .finish()
        };
        let first = print();
        assert_eq!(first, print());
        std::fs::write(&file, "three").unwrap();
        assert_ne!(first, print());
        assert_ne!(
            Fingerprint::new("build").text("a", "bc").finish(),
            Fingerprint::new("build").text("ab", "c").finish()
        );
    }
}
