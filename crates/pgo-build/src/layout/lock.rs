//! The lock that keeps two pgo-build commands out of one `target/pgo-build/`: every command
//! that writes there holds it (`pgo-build clean` too), and a second is refused naming the first.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;

use anyhow::{Context, Result, bail};

use super::Layout;

/// Held for as long as a pgo-build command works in `target/pgo-build/`.
pub struct TargetDirLock {
    _file: File,
}

impl TargetDirLock {
    pub fn acquire(layout: &Layout) -> Result<TargetDirLock> {
        std::fs::create_dir_all(layout.root())
            .with_context(|| format!("could not create {}", layout.root().display()))?;
        let path = layout.root().join(".lock");
        let mut file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("could not open {}", path.display()))?;
        // SAFETY: flock(2) on a descriptor we own; released when the file is closed.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            bail!(
                "another pgo-build is working in {}: {}. Wait for it to finish or stop it; two \
                 runs in one target directory would overwrite each other's builds and profiles.",
                layout.root().display(),
                if holder.trim().is_empty() {
                    "holder unknown"
                } else {
                    holder.trim()
                }
            );
        }
        // Lossy: `std::env::args` panics on an argument that is not UTF-8.
        let args: Vec<String> = std::env::args_os()
            .map(|arg| arg.to_string_lossy().into_owned())
            .collect();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        file.set_len(0)?;
        file.rewind()?;
        write!(
            file,
            "pid {} (`{}`, started at unix time {now})",
            std::process::id(),
            args.join(" ")
        )?;
        Ok(TargetDirLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_naming_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let _held = TargetDirLock::acquire(&layout).unwrap();
        let err = TargetDirLock::acquire(&layout)
            .err()
            .expect("the lock is held");
        assert!(
            format!("{err}").contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
    }
}
