//! What cargo's dep-info says a binary was built from (`<exe>.d` beside it), and a fingerprint
//! of those sources by content.

use std::path::Path;

use crate::util::fingerprint::Fingerprint;

/// A fingerprint of what the executables were built from: the files their dep-info lists
/// (the workspace's own crates; registry crates are pinned by `lock_file`) and the lock file,
/// by content, so a file rewritten unchanged (a branch switched back) still matches. Files
/// under `generated` (build-script outputs and profiles in the stages' own directories, which
/// differ per stage) are left out. Files under `root` count by their path relative to it, so
/// checkouts of the same sources at different paths (two CI jobs) agree. `None` when an
/// executable has no dep-info.
pub fn sources_fingerprint(
    executables: &[&Path],
    lock_file: &Path,
    generated: &[&Path],
    root: &Path,
) -> Option<String> {
    let mut print = Fingerprint::new("sources");
    let named = |path: &Path| {
        path.strip_prefix(root)
            .map_or_else(|_| path.display().to_string(), |p| p.display().to_string())
    };
    print.content_named(&named(lock_file), lock_file);
    let mut sources = Vec::new();
    for executable in executables {
        sources.extend(dep_info_sources(executable)?);
    }
    sources.sort();
    sources.dedup();
    for source in sources
        .iter()
        .filter(|s| !generated.iter().any(|dir| s.starts_with(dir)))
    {
        print.content_named(&named(source), source);
    }
    Some(print.finish())
}

/// The source files a binary was built from, from cargo's dep-info beside the executable
/// (`<exe>.d`: `target: dep dep …`, spaces in paths escaped). `None` before the first build.
pub fn dep_info_sources(executable: &Path) -> Option<Vec<std::path::PathBuf>> {
    let text = std::fs::read_to_string(format!("{}.d", executable.display())).ok()?;
    let mut sources = Vec::new();
    for line in text.lines() {
        let Some((_, deps)) = line.split_once(": ") else {
            continue;
        };
        let mut current = String::new();
        let mut escaped = false;
        for c in deps.chars() {
            match c {
                '\\' if !escaped => escaped = true,
                ' ' if !escaped => {
                    if !current.is_empty() {
                        sources.push(std::mem::take(&mut current).into());
                    }
                }
                _ => {
                    current.push(c);
                    escaped = false;
                }
            }
        }
        if !current.is_empty() {
            sources.push(current.into());
        }
    }
    sources.sort();
    sources.dedup();
    Some(sources)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_compared_by_content_not_mtime() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("main.rs");
        let lock = dir.path().join("Cargo.lock");
        let generated = dir.path().join("target");
        std::fs::create_dir_all(&generated).unwrap();
        std::fs::write(&source, "fn main() {}\n").unwrap();
        std::fs::write(&lock, "version = 4\n").unwrap();
        let out_file = generated.join("out.rs");
        std::fs::write(&out_file, "1").unwrap();
        let executable = dir.path().join("app");
        std::fs::write(
            format!("{}.d", executable.display()),
            format!(
                "{}: {} {}\n",
                executable.display(),
                source.display(),
                out_file.display()
            ),
        )
        .unwrap();
        let print =
            || sources_fingerprint(&[&executable], &lock, &[&generated], dir.path()).unwrap();
        let first = print();
        // Rewritten with the same content (and another mtime), or a generated file changed.
        std::fs::write(&source, "fn main() {}\n").unwrap();
        std::fs::write(&out_file, "2").unwrap();
        assert_eq!(print(), first);
        std::fs::write(&source, "fn main() { println!(); }\n").unwrap();
        assert_ne!(print(), first);
        std::fs::write(&source, "fn main() {}\n").unwrap();
        std::fs::write(&lock, "version = 4\n# another dependency version\n").unwrap();
        assert_ne!(print(), first);
        std::fs::write(&lock, "version = 4\n").unwrap();
        // The same sources in another checkout: the same fingerprint.
        let other = tempfile::tempdir().unwrap();
        for file in ["main.rs", "Cargo.lock"] {
            std::fs::copy(dir.path().join(file), other.path().join(file)).unwrap();
        }
        let moved = other.path().join("app");
        std::fs::write(
            format!("{}.d", moved.display()),
            format!(
                "{}: {}\n",
                moved.display(),
                other.path().join("main.rs").display()
            ),
        )
        .unwrap();
        let elsewhere = sources_fingerprint(
            &[&moved],
            &other.path().join("Cargo.lock"),
            &[],
            other.path(),
        );
        assert_eq!(elsewhere.unwrap(), first);
    }

    #[test]
    fn dep_info_lists_sources_with_escaped_spaces() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("app");
        std::fs::write(
            dir.path().join("app.d"),
            "/t/app: /w/src/main.rs /w/my\\ dir/lib.rs\n\n/w/src/main.rs:\n",
        )
        .unwrap();
        let sources = dep_info_sources(&exe).unwrap();
        assert_eq!(
            sources,
            [Path::new("/w/my dir/lib.rs"), Path::new("/w/src/main.rs")]
        );
        assert!(dep_info_sources(&dir.path().join("missing")).is_none());
    }
}
