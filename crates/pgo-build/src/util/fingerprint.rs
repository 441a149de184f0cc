//! Fingerprints: a hash of labelled parts (text, files by metadata or content, whole trees),
//! by which stages, accountings and explore's builds are recognised as unchanged.

use std::collections::BTreeMap;
use std::path::Path;

use sha2::{Digest, Sha256};

/// Builds a fingerprint from labelled parts; what follows a [`Fingerprint::part`] is hashed
/// into that named part as well, so a changed fingerprint can say which part changed.
pub struct Fingerprint {
    total: Sha256,
    parts: Vec<(String, Sha256)>,
}

impl Fingerprint {
    pub fn new(stage: &str) -> Fingerprint {
        let mut fingerprint = Fingerprint {
            total: Sha256::new(),
            parts: Vec::new(),
        };
        fingerprint.text("stage", stage);
        fingerprint
    }

    /// Starts the part `name` (what a user would call it: "sources", "train workloads"):
    /// what comes next counts toward it. The whole fingerprint is the same with or without.
    pub fn part(&mut self, name: &str) -> &mut Fingerprint {
        self.parts.push((name.to_owned(), Sha256::new()));
        self
    }

    fn update(&mut self, bytes: &[u8]) {
        self.total.update(bytes);
        if let Some((_, part)) = self.parts.last_mut() {
            part.update(bytes);
        }
    }

    pub fn text(&mut self, label: &str, value: &str) -> &mut Fingerprint {
        self.update(label.as_bytes());
        self.update(&[0]);
        self.update(&(value.len() as u64).to_le_bytes());
        self.update(value.as_bytes());
        self
    }

    /// Each part's own fingerprint, by name.
    pub fn parts(&self) -> BTreeMap<String, String> {
        self.parts
            .iter()
            .map(|(name, hash)| (name.clone(), hex16(hash.clone())))
            .collect()
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
                self.update(name.as_bytes());
                self.update(&[0]);
                self.update(&digest);
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
        hex16(self.total.clone())
    }
}

fn hex16(hash: Sha256) -> String {
    hash.finalize()
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
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

    #[test]
    fn parts_say_which_part_changed_and_leave_the_whole_as_it_was() {
        let print = |flags: &str, source: &str| {
            let mut print = Fingerprint::new("build");
            print
                .part("settings")
                .text("flags", flags)
                .part("sources")
                .text("a.rs", source);
            print
        };
        let (before, after) = (print("-C x", "one"), print("-C y", "one"));
        let changed: Vec<String> = after
            .parts()
            .into_iter()
            .filter(|(name, hash)| before.parts().get(name) != Some(hash))
            .map(|(name, _)| name)
            .collect();
        assert_eq!(changed, ["settings"]);
        assert_ne!(before.finish(), after.finish());
        // Parts only name what changed: the whole is what it was without them.
        let mut plain = Fingerprint::new("build");
        plain.text("flags", "-C x").text("a.rs", "one");
        assert_eq!(plain.finish(), before.finish());
    }
}
