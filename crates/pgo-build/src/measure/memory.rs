//! Peak memory of pgo-build's process tree (cargo, rustc, linkers, workloads) during a stage,
//! sampled from /proc. cgroup v2's `memory.peak` would be exact but covers the cgroup's whole
//! lifetime (and everything else in it), not one stage.

use std::collections::HashMap;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::util::stop::{Stopper, stop_signal};

const INTERVAL: Duration = Duration::from_millis(100);

pub struct PeakSampler {
    stop: Stopper,
    handle: JoinHandle<u64>,
}

impl PeakSampler {
    pub fn start() -> PeakSampler {
        let (stop, stopped) = stop_signal();
        let handle = std::thread::spawn(move || {
            let root = std::process::id() as i32;
            let mut peak = 0;
            loop {
                peak = peak.max(tree_rss(root));
                if stopped.stopped_within(INTERVAL) {
                    break;
                }
            }
            peak.max(tree_rss(root))
        });
        PeakSampler { stop, handle }
    }

    /// The largest sum of resident memory seen, in bytes.
    pub fn stop(self) -> u64 {
        drop(self.stop);
        self.handle.join().unwrap_or(0)
    }
}

/// One line of /proc/<pid>/stat, the fields pgo-build uses.
#[derive(Debug, Clone)]
pub struct Process {
    pub pid: i32,
    pub name: String,
    /// R, S, Z, …
    pub state: char,
    pub ppid: i32,
    pub pgrp: i32,
    pub rss_bytes: u64,
    /// When it started, in clock ticks since boot: with the pid, it identifies the process
    /// (a pid can be reused).
    pub started: u64,
}

/// Every process /proc shows (those that vanish while it is read are skipped).
pub fn processes() -> Vec<Process> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| process(entry.file_name().to_string_lossy().parse().ok()?))
        .collect()
}

/// One process, if it exists.
pub fn process(pid: i32) -> Option<Process> {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid pgrp …`: comm may contain spaces and parentheses; starttime and
    // rss are the 20th and 22nd fields after the state.
    let (open, close) = (stat.find('(')?, stat.rfind(')')?);
    let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
    let number = |i: usize| fields.get(i).and_then(|f| f.parse::<i64>().ok());
    Some(Process {
        pid,
        name: stat[open + 1..close].to_owned(),
        state: fields.first()?.chars().next()?,
        ppid: number(1)? as i32,
        pgrp: number(2)? as i32,
        rss_bytes: number(21)?.max(0) as u64 * page,
        started: number(19)?.max(0) as u64,
    })
}

/// The value of `name` in a process's environment, as it was started.
pub fn env_value(pid: i32, name: &str) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{name}=");
    environ.split(|b| *b == 0).find_map(|entry| {
        let value = entry.strip_prefix(prefix.as_bytes())?;
        Some(String::from_utf8_lossy(value).into_owned())
    })
}

/// Whether the environment of `pid` holds the `KEY=value` entry `entry`.
pub fn has_env_entry(pid: i32, entry: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|environ| environ.split(|b| *b == 0).any(|e| e == entry.as_bytes()))
}

/// Resident memory of `root` and all its descendants.
pub fn tree_rss(root: i32) -> u64 {
    let processes = processes();
    let mut children: HashMap<i32, Vec<&Process>> = HashMap::new();
    for process in &processes {
        children.entry(process.ppid).or_default().push(process);
    }
    let mut total = processes
        .iter()
        .find(|p| p.pid == root)
        .map_or(0, |p| p.rss_bytes);
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        for child in children.get(&pid).into_iter().flatten() {
            total += child.rss_bytes;
            stack.push(child.pid);
        }
    }
    total
}

/// `[build] memory_budget`: what the links and rustc of one build may use together. Parsed
/// when the configuration is loaded, so a bad value is an error naming file and line before
/// anything runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum MemoryBudget {
    /// The memory available when a build starts, less a margin (10%, at least 1 GiB).
    #[default]
    Auto,
    /// A size, with the text it was written as.
    Size { bytes: u64, text: String },
}

impl std::str::FromStr for MemoryBudget {
    type Err = String;

    fn from_str(text: &str) -> Result<MemoryBudget, String> {
        if text.trim() == "auto" {
            return Ok(MemoryBudget::Auto);
        }
        match parse_size(text) {
            Some(bytes) if bytes > 0 => Ok(MemoryBudget::Size {
                bytes,
                text: text.to_owned(),
            }),
            _ => Err(format!(
                "memory_budget = {text:?}: expected \"auto\" or a size like \"8G\" or \"512M\""
            )),
        }
    }
}

impl MemoryBudget {
    /// The budget in bytes now, and how it was chosen (for the report).
    pub fn resolve(&self) -> (u64, String) {
        match self {
            MemoryBudget::Auto => {
                let available = available_memory().unwrap_or(4 << 30);
                (
                    available.saturating_sub((available / 10).max(1 << 30)),
                    format!(
                        "auto: {} available less a margin",
                        crate::util::units::human_bytes(available)
                    ),
                )
            }
            MemoryBudget::Size { bytes, text } => {
                (*bytes, format!("[build] memory_budget = {text:?}"))
            }
        }
    }
}

/// A size like "8G", "512M", "16GiB", "1000000000".
pub fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale = match unit
        .trim()
        .to_ascii_lowercase()
        .trim_end_matches("ib")
        .trim_end_matches('b')
    {
        "" => 1.0,
        "k" => 1024.0,
        "m" => 1024.0 * 1024.0,
        "g" => 1024.0 * 1024.0 * 1024.0,
        "t" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    Some((number * scale) as u64)
}

/// MemTotal from /proc/meminfo: no process here can need more.
pub fn total_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// MemAvailable from /proc/meminfo.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_are_counted() {
        // A shell waiting for a child: its tree must weigh more than the shell alone.
        let mut shell = std::process::Command::new("sh")
            .args(["-c", "sleep 5 & wait"])
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let pid = shell.id() as i32;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let close = stat.rfind(')').unwrap();
        let pages: u64 = stat[close + 1..]
            .split_whitespace()
            .nth(21)
            .unwrap()
            .parse()
            .unwrap();
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
        let tree = tree_rss(pid);
        std::process::Command::new("pkill")
            .args(["-P", &pid.to_string()])
            .status()
            .ok();
        shell.kill().ok();
        shell.wait().unwrap();
        assert!(
            tree > pages * page,
            "tree {tree} vs shell alone {}",
            pages * page
        );
        let sampler = PeakSampler::start();
        assert!(sampler.stop() > 0);
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("8G"), Some(8 << 30));
        assert_eq!(parse_size("512MiB"), Some(512 << 20));
        assert_eq!(parse_size("1.5g"), Some(3 << 29));
        assert_eq!(parse_size("1000"), Some(1000));
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size("5 parsecs"), None);
        assert_eq!("auto".parse(), Ok(MemoryBudget::Auto));
        assert_eq!(
            "6G".parse(),
            Ok(MemoryBudget::Size {
                bytes: 6 << 30,
                text: "6G".to_owned()
            })
        );
        for bad in ["8Q", "0", "", "lots"] {
            assert!(bad.parse::<MemoryBudget>().is_err(), "{bad}");
        }
    }
}
