//! Linker mode: pgo-build in front of the real linker, so one cargo build of every binary
//! stays inside a memory budget (cargo cannot limit concurrent links: rust-lang/cargo#9157).
//!
//! Builds pass `-C linker=<wrapper>` and `PGO_BUILD_LINKER_MODE`, where the wrapper is a
//! symlink to pgo-build named like the real linker: rustc infers the linker flavor (gcc-style or
//! raw ld arguments, self-contained lld or not) from that name, so it must see the same name to
//! pass the same arguments. rustc then runs pgo-build with the linker's arguments; it takes one of N slots (flock'ed files under the
//! stage directory, so the bound also holds across processes), runs the real linker with the
//! arguments unchanged and its output passed through, records the link (time waiting for a
//! slot, duration, the linker's peak RSS from `wait4`) and exits with the linker's status.
//! Compiles keep running at full parallelism; only links queue.

use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};

use crate::config::cargo_config::CargoConfig;
use crate::report::LinkSummary;
use serde::{Deserialize, Serialize};

pub const MODE_ENV: &str = "PGO_BUILD_LINKER_MODE";
pub const REAL_LINKER_ENV: &str = "PGO_BUILD_REAL_LINKER";
pub const SLOTS_ENV: &str = "PGO_BUILD_LINK_SLOTS";
pub const SLOTS_DIR_ENV: &str = "PGO_BUILD_LINK_SLOTS_DIR";
pub const LOG_ENV: &str = "PGO_BUILD_LINK_LOG";

/// One link, as the wrapper logged it (one JSON line in the stage's `links.jsonl`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LinkRecord {
    pub output: String,
    pub start_unix: f64,
    pub end_unix: f64,
    pub wait_secs: f64,
    /// Peak RSS of the linker and the processes it waited for.
    pub max_rss_bytes: u64,
    pub success: bool,
}

/// When rustc started pgo-build as its linker: links and returns the exit code.
pub fn run_if_linker() -> Option<u8> {
    std::env::var_os(MODE_ENV)?;
    Some(match link() {
        Ok(code) => code,
        Err(err) => {
            crate::util::printer::stderr_line(&format!("pgo-build (linker mode): {err:#}"));
            1
        }
    })
}

fn link() -> Result<u8> {
    let real = std::env::var_os(REAL_LINKER_ENV).unwrap_or_else(|| "cc".into());
    let slots: usize = std::env::var(SLOTS_ENV)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
        .max(1);
    let slots_dir = PathBuf::from(
        std::env::var_os(SLOTS_DIR_ENV).context("PGO_BUILD_LINK_SLOTS_DIR is not set")?,
    );
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if let Ok(needs) = std::env::var(crate::profiles::startup_order::REQUIRE_LLD_ENV)
        && let Some(why) =
            crate::profiles::startup_order::lld_missing(&with_response_files(&args), &real, &needs)
    {
        bail!("{why}");
    }
    let waiting = Instant::now();
    let _slot = acquire_slot(&slots_dir, slots)?;
    let wait_secs = waiting.elapsed().as_secs_f64();
    let start_unix = unix_now();
    let child = Command::new(&real)
        .args(&args)
        .env_remove(MODE_ENV)
        .spawn()
        .with_context(|| format!("could not start the linker `{}`", real.to_string_lossy()))?;
    let (code, max_rss_bytes) = wait_with_peak_rss(child.id() as libc::pid_t)?;
    let record = LinkRecord {
        output: output_of(&args),
        start_unix,
        end_unix: unix_now(),
        wait_secs,
        max_rss_bytes,
        success: code == 0,
    };
    // The link's outcome is the linker's: a log that cannot be written is only reported.
    if let Some(log) = std::env::var_os(LOG_ENV)
        && let Err(err) = append_record(Path::new(&log), &record)
    {
        crate::util::printer::stderr_line(&format!(
            "pgo-build (linker mode): could not record the link in {}: {err:#}",
            Path::new(&log).display()
        ));
    }
    Ok(code)
}

/// One short JSON line with O_APPEND: concurrent links (or rustc) do not interleave.
pub fn append_record(log: &Path, record: &impl Serialize) -> Result<()> {
    let line = serde_json::to_string(record)? + "\n";
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?
        .write_all(line.as_bytes())?;
    Ok(())
}

/// Holds one of `slots` lock files until dropped.
fn acquire_slot(dir: &Path, slots: usize) -> Result<File> {
    crate::util::files::create_dir_all(dir)?;
    loop {
        for slot in 0..slots {
            let path = dir.join(format!("slot-{slot}.lock"));
            let file = File::options()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)?;
            // SAFETY: flock(2) on a descriptor we own; released when the file is closed.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(file);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Exit code (128 + signal when killed) and peak RSS in bytes, via wait4.
pub fn wait_with_peak_rss(pid: libc::pid_t) -> Result<(u8, u64)> {
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 writes only to the two out-pointers.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: valid pointers for the duration of the call.
        let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if reaped == pid {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err).context("waiting for the child process failed");
        }
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    };
    // ru_maxrss is in KiB on Linux.
    Ok((code as u8, usage.ru_maxrss.max(0) as u64 * 1024))
}

fn output_of(args: &[OsString]) -> String {
    args.iter()
        .position(|a| a == "-o")
        .and_then(|i| args.get(i + 1))
        .map(|o| {
            Path::new(o)
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()
        })
        .unwrap_or_else(|| "?".to_owned())
}

pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The records a stage's build logged with [`append_record`] (links, rustc); lines that do not
/// parse (a record cut short by a kill) are skipped.
pub fn read_log<T: serde::de::DeserializeOwned>(path: &Path) -> Vec<T> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

impl LinkSummary {
    pub fn from_records(slots: usize, slots_reason: String, records: &[LinkRecord]) -> LinkSummary {
        LinkSummary {
            slots,
            slots_reason,
            links: records.len(),
            max_rss_bytes: records.iter().map(|r| r.max_rss_bytes).max().unwrap_or(0),
            wait_secs: records.iter().map(|r| r.wait_secs).sum(),
        }
    }
}

/// The linker rustc would run for `host` without pgo-build: the user's rustflags `-C linker`,
/// else `CARGO_TARGET_<TRIPLE>_LINKER`, else `target.<triple>.linker` of cargo config files
/// (deepest first), else `cc`.
pub fn real_linker(
    user_rustflags: &[String],
    host: &str,
    config: &CargoConfig,
) -> Result<OsString> {
    let mut previous = "";
    let mut from_flags = None;
    for flag in user_rustflags {
        let value = flag.strip_prefix("-Clinker=").or_else(|| {
            (previous == "-C")
                .then(|| flag.strip_prefix("linker="))
                .flatten()
        });
        if let Some(value) = value {
            from_flags = Some(value.to_owned());
        }
        previous = flag;
    }
    if let Some(linker) = from_flags {
        return Ok(linker.into());
    }
    let var = crate::toolchain::targets::cargo_target_var(host, "LINKER");
    if let Some(linker) = std::env::var_os(&var) {
        return Ok(linker);
    }
    let Some((file, value)) = config.lookup(&["target", host, "linker"]) else {
        return Ok("cc".into());
    };
    let linker = value.as_str().with_context(|| {
        format!(
            "target.{host}.linker in {} must be a string",
            file.display()
        )
    })?;
    // A relative path (not a bare name) is relative to the directory holding `.cargo/`.
    let path = Path::new(linker);
    if path.components().count() > 1 && path.is_relative() {
        let base = file
            .parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("."));
        return Ok(base.join(path).into_os_string());
    }
    Ok(linker.into())
}

/// `args` with each `@file` (a response file rustc writes for long command lines) replaced by
/// the arguments in it, one per line.
fn with_response_files(args: &[OsString]) -> Vec<OsString> {
    let mut all = Vec::new();
    for arg in args {
        match arg.to_str().and_then(|a| a.strip_prefix('@')) {
            Some(file) => match std::fs::read_to_string(file) {
                Ok(text) => all.extend(
                    text.lines()
                        .map(|line| OsString::from(line.trim_matches('"'))),
                ),
                Err(_) => all.push(arg.clone()),
            },
            None => all.push(arg.clone()),
        }
    }
    all
}

/// This pgo-build's executable, which its wrappers link to: refused when it was replaced or
/// removed while pgo-build ran (Linux then names it "<path> (deleted)"), since a wrapper
/// linking there would fail the build with cargo's "No such file or directory".
pub fn own_executable() -> Result<PathBuf> {
    let executable =
        std::env::current_exe().context("could not find pgo-build's own executable")?;
    if !executable.exists() {
        anyhow::bail!(
            "pgo-build's own executable ({}) was replaced or removed while this command ran (a \
             rebuild or upgrade of pgo-build), and its compiler and linker wrappers must point \
             at it: run the command again",
            executable.display()
        );
    }
    Ok(executable)
}

/// `dir/<file name of real>`, a symlink to this executable (created or updated).
pub fn wrapper(dir: &Path, real: &OsString) -> Result<PathBuf> {
    let executable = own_executable()?;
    let name = Path::new(real)
        .file_name()
        .map_or_else(|| "cc".into(), |n| n.to_owned());
    let wrapper = dir.join(name);
    if std::fs::read_link(&wrapper).ok().as_deref() != Some(executable.as_path()) {
        crate::util::files::create_dir_all(dir)?;
        let partial = dir.join(".wrapper.partial");
        let _ = std::fs::remove_file(&partial);
        std::os::unix::fs::symlink(&executable, &partial)
            .and_then(|()| std::fs::rename(&partial, &wrapper))
            .with_context(|| format!("could not create the wrapper {}", wrapper.display()))?;
    }
    Ok(wrapper)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_users_linker_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join(".cargo/config.toml");
        std::fs::create_dir_all(config.parent().unwrap()).unwrap();
        std::fs::write(
            &config,
            "[target.x86_64-unknown-linux-gnu]\nlinker = \"tools/my-ld\"\n",
        )
        .unwrap();
        let host = "x86_64-unknown-linux-gnu";
        let config = CargoConfig::from_files(vec![config]).unwrap();
        let none = CargoConfig::from_files(vec![]).unwrap();
        assert_eq!(
            real_linker(&[], host, &config).unwrap(),
            dir.path().join("tools/my-ld").into_os_string()
        );
        let flags = vec!["-C".to_owned(), "linker=clang".to_owned()];
        assert_eq!(real_linker(&flags, host, &config).unwrap(), "clang");
        assert_eq!(real_linker(&[], host, &none).unwrap(), "cc");
    }

    #[test]
    fn output_names_are_found() {
        let args: Vec<OsString> = ["a.o", "-o", "/t/release/deps/app-123"]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(output_of(&args), "app-123");
        assert_eq!(output_of(&[]), "?");
    }
}
