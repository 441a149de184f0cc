//! Peak memory of pgo-build's process tree (cargo, rustc, linkers, workloads) during a stage,
//! sampled from /proc. cgroup v2's `memory.peak` would be exact but covers the cgroup's whole
//! lifetime (and everything else in it), not one stage.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

const INTERVAL: Duration = Duration::from_millis(100);

pub struct PeakSampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<u64>,
}

impl PeakSampler {
    pub fn start() -> PeakSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = std::thread::spawn(move || {
            let root = std::process::id() as i32;
            let mut peak = 0;
            while !flag.load(Ordering::Relaxed) {
                peak = peak.max(tree_rss(root));
                std::thread::sleep(INTERVAL);
            }
            peak.max(tree_rss(root))
        });
        PeakSampler { stop, handle }
    }

    /// The largest sum of resident memory seen, in bytes.
    pub fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or(0)
    }
}

/// Resident memory of `root` and all its descendants.
pub fn tree_rss(root: i32) -> u64 {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    let mut rss: HashMap<i32, u64> = HashMap::new();
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        // After `pid (comm)`: state ppid … with rss the 22nd field after the state.
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let (Some(ppid), Some(pages)) = (
            fields.get(1).and_then(|f| f.parse().ok()),
            fields.get(21).and_then(|f| f.parse::<u64>().ok()),
        ) else {
            continue;
        };
        children.entry(ppid).or_default().push(pid);
        rss.insert(pid, pages * page);
    }
    let mut total = 0;
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        total += rss.get(&pid).copied().unwrap_or(0);
        stack.extend(children.get(&pid).into_iter().flatten());
    }
    total
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
}
