//! Reading a workload's log: its last lines for error messages, lines that look like errors,
//! and the profile runtime's report that it could not write a profile.

use std::path::{Path, PathBuf};

/// Lines of a workload's log that look like errors (`error`, `panicked`, `fatal`, in any
/// case): how many, and the first, shortened. A workload can report failures and still exit 0.
pub fn error_lines(log: &Path) -> Option<(usize, String)> {
    let text = std::fs::read(log).ok()?;
    let text = String::from_utf8_lossy(&text);
    let mut matching = text.lines().filter(|line| looks_like_an_error(line));
    let first = matching.next()?;
    let first: String = first.trim().chars().take(160).collect();
    Some((1 + matching.count(), first))
}

/// Whether a log line reads as an error: "error", "errors", "panicked" or "fatal" as a word
/// (not inside a name such as `quick-error` or `thiserror`), outside cargo's progress lines,
/// which name crates.
fn looks_like_an_error(line: &str) -> bool {
    const CARGO_PROGRESS: [&str; 8] = [
        "Compiling ",
        "Checking ",
        "Downloaded ",
        "Downloading ",
        "Fresh ",
        "Running ",
        "Finished ",
        "Updating ",
    ];
    if CARGO_PROGRESS
        .iter()
        .any(|word| line.trim_start().starts_with(word))
    {
        return false;
    }
    let lower = line.to_ascii_lowercase();
    let part_of_a_name =
        |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || "-_".contains(c));
    ["error", "errors", "panicked", "fatal"].iter().any(|word| {
        lower.match_indices(word).any(|(at, _)| {
            let after = &lower[at + word.len()..];
            // A file or path (`src/error.rs`, `fatal.c`) names the word; it does not say it.
            let a_file_name = lower[..at].ends_with('/')
                || after
                    .strip_prefix('.')
                    .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_alphanumeric()));
            !a_file_name
                && !part_of_a_name(lower[..at].chars().next_back())
                && !part_of_a_name(after.chars().next())
        })
    })
}

/// The profile runtime's own report that it could not write a profile, found in a
/// workload's log ("LLVM Profile Error: Failed to write file "…": No space left on device"):
/// the processes ended normally, but their profiles are missing or cut short.
pub struct ProfileWriteFailure {
    /// The runtime's first such line.
    pub line: String,
    /// How many such lines the log has.
    pub count: usize,
    /// The directory it could not write into, and the space free there now.
    pub dir: Option<(PathBuf, Option<u64>)>,
}

impl ProfileWriteFailure {
    pub fn find(log: &Path) -> Option<ProfileWriteFailure> {
        let text = std::fs::read(log).ok()?;
        let text = String::from_utf8_lossy(&text);
        let mut lines = text
            .lines()
            .filter(|line| line.contains("LLVM Profile Error") && line.contains("write"));
        let first = lines.next()?;
        let dir = first
            .split('"')
            .nth(1)
            .and_then(|file| Path::new(file).parent())
            .map(|dir| (dir.to_owned(), free_space(dir)));
        Some(ProfileWriteFailure {
            line: first.trim().chars().take(300).collect(),
            count: 1 + lines.count(),
            dir,
        })
    }
}

impl std::fmt::Display for ProfileWriteFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the profile runtime could not write profiles")?;
        if self.count > 1 {
            write!(f, " ({} times)", self.count)?;
        }
        write!(f, ": \"{}\"", self.line)?;
        if let Some((dir, free)) = &self.dir {
            write!(f, ". {} is on a filesystem with ", dir.display())?;
            match free {
                Some(bytes) => write!(f, "{} free", crate::util::units::human_bytes(*bytes))?,
                None => write!(f, "unknown free space")?,
            }
            write!(
                f,
                ": free space there, or give cargo a target directory on a larger disk \
                 (CARGO_TARGET_DIR or build.target-dir), and train again"
            )?;
        }
        Ok(())
    }
}

/// Bytes available to this user on the filesystem of `dir`.
fn free_space(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: a NUL-terminated path and a zeroed statvfs for the call to fill.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    Some(stat.f_bavail as u64 * stat.f_frsize as u64)
}

/// The last `lines` lines of a log file, for error messages: read from the file's last 64 KiB
/// (a log can be gigabytes), invalid UTF-8 replaced, each line cut at 300 characters.
pub fn log_tail(path: &Path, lines: usize) -> String {
    use std::io::{Read, Seek, SeekFrom};
    const READ: u64 = 64 << 10;
    const LINE: usize = 300;
    let Ok(mut file) = std::fs::File::open(path) else {
        return String::new();
    };
    let size = file.metadata().map_or(0, |m| m.len());
    let mut bytes = Vec::new();
    if file
        .seek(SeekFrom::Start(size.saturating_sub(READ)))
        .is_err()
        || file.read_to_end(&mut bytes).is_err()
    {
        return String::new();
    }
    let text = String::from_utf8_lossy(&bytes);
    let mut all: Vec<&str> = text.lines().collect();
    if size > READ && !all.is_empty() {
        all.remove(0); // Most likely the end of a line that started before the window.
    }
    all[all.len().saturating_sub(lines)..]
        .iter()
        .map(|line| {
            let count = line.chars().count();
            if count <= LINE {
                (*line).to_owned()
            } else {
                let kept: String = line.chars().take(LINE).collect();
                format!("{kept}… ({} more characters)", count - LINE)
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_tail_quotes_only_the_end_of_the_file_and_cuts_long_lines() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let mut text = "x".repeat(200 << 10);
        text.push_str("\nsecond to last\n");
        text.push_str(&"y".repeat(1000));
        text.push('\n');
        std::fs::write(&log, text).unwrap();
        let tail = log_tail(&log, 20);
        assert!(tail.starts_with("second to last\n"), "{}", &tail[..40]);
        assert!(tail.ends_with("… (700 more characters)"), "{tail}");
        assert!(tail.len() < 400);
        assert_eq!(log_tail(&dir.path().join("none"), 5), "");
    }

    #[test]
    fn error_looking_lines_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        std::fs::write(
            &log,
            "ok\nError: no such file: a\nfine\nthread 'main' panicked at x\n",
        )
        .unwrap();
        let (count, first) = error_lines(&log).unwrap();
        assert_eq!(count, 2);
        assert_eq!(first, "Error: no such file: a");
        std::fs::write(&log, "all good\n").unwrap();
        assert_eq!(error_lines(&log), None);
        // Names that contain the word are not errors; the word is, in any case.
        std::fs::write(
            &log,
            "   Compiling quick-error v1.2.3\nusing thiserror and error_chain\nran 3 ERRORS\n",
        )
        .unwrap();
        assert_eq!(error_lines(&log), Some((1, "ran 3 ERRORS".to_owned())));
        // File names with the word (a compressor listing what it packs) are not errors.
        std::fs::write(
            &log,
            "[INFO] Compressing \"syn-2.0.87/src/error.rs\"\nadding src/fatal/mod.c\n",
        )
        .unwrap();
        assert_eq!(error_lines(&log), None);
    }
}
