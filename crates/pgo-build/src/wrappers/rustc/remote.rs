//! Peaks of compiles that run outside this process tree. sccache compiles in its server, which
//! starts rustc itself: `wait4` on the sccache client says nothing of rustc's memory, and
//! without a measured peak every build behind sccache would be admitted by guesses. So while
//! the client runs, the rustc compiling the same unit — its command line has the same
//! `--crate-name` and `-C metadata=`, and it is not this wrapper — is looked for in /proc, and
//! its peak is its own high-water mark (`VmHWM`) or, if more, what it and the processes it
//! started (its linker) held together in a sample. A cache hit starts no rustc: no peak, and
//! the crate's estimate stays what it was.

use std::ffi::OsString;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often /proc is looked at: the server starts rustc within milliseconds of the client.
const LOOK_EVERY: Duration = Duration::from_millis(20);

/// What identifies one compilation unit on a rustc command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    krate: String,
    metadata: String,
}

impl Unit {
    /// `None` without both marks (cargo always passes them for a crate it compiles).
    pub fn of(args: &[OsString]) -> Option<Unit> {
        let args: Vec<String> = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let krate = args
            .windows(2)
            .find_map(|pair| (pair[0] == "--crate-name").then(|| pair[1].clone()))?;
        let metadata = args.iter().enumerate().find_map(|(i, arg)| {
            let codegen = match arg.strip_prefix("-C") {
                Some("") => args.get(i + 1)?.as_str(),
                Some(option) => option,
                None => return None,
            };
            codegen.strip_prefix("metadata=").map(str::to_owned)
        })?;
        Some(Unit { krate, metadata })
    }

    /// Whether `cmdline` (NUL-separated, as /proc gives it) compiles this unit: with code
    /// (`--emit` with `link`), not sccache's own runs of rustc for the files a cache key
    /// hashes (`--emit=dep-info`, `--print`), which take a fraction of a compile's memory.
    fn compiled_by(&self, cmdline: &[u8]) -> bool {
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let queries = args.iter().any(|arg| arg.starts_with("--print"));
        let emits_code = args.iter().enumerate().any(|(i, arg)| {
            let emit = match arg.strip_prefix("--emit") {
                Some("") => args.get(i + 1).map(String::as_str),
                Some(value) => value.strip_prefix('='),
                None => None,
            };
            emit.is_some_and(|kinds| kinds.split(',').any(|k| k.starts_with("link")))
        });
        let args: Vec<OsString> = args.into_iter().map(OsString::from).collect();
        !queries && emits_code && Unit::of(&args).is_some_and(|unit| unit == *self)
    }
}

/// Samples the peak of the rustc compiling a unit elsewhere, from a thread, until stopped.
pub struct RemoteSampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Option<u64>>,
}

impl RemoteSampler {
    pub fn start(unit: Unit) -> RemoteSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = std::thread::spawn(move || {
            let me = std::process::id() as i32;
            let mut peak: Option<u64> = None;
            let mut found: Option<i32> = None;
            loop {
                // One last look after the client ended: rustc may have ended just before.
                let last = flag.load(Ordering::Relaxed);
                match found {
                    Some(pid) => match sample(pid) {
                        Some(bytes) => peak = Some(peak.unwrap_or(0).max(bytes)),
                        None => found = None,
                    },
                    None => {
                        found = find(&unit, me);
                        if let Some(bytes) = found.and_then(sample) {
                            peak = Some(peak.unwrap_or(0).max(bytes));
                        }
                    }
                }
                if last {
                    return peak;
                }
                std::thread::sleep(LOOK_EVERY);
            }
        });
        RemoteSampler { stop, handle }
    }

    /// The peak seen; `None` when no rustc of the unit ran (a cache hit).
    pub fn stop(self) -> Option<u64> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().ok().flatten()
    }
}

/// The rustc whose command line compiles `unit`: not `me`, nor a child of mine (between fork
/// and exec, the client it starts is a copy of this wrapper, command line and all).
fn find(unit: &Unit, me: i32) -> Option<i32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me)
        .find(|pid| {
            crate::measure::memory::process(*pid).is_some_and(|p| p.ppid != me && p.name == "rustc")
                && std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|cmdline| unit.compiled_by(&cmdline))
        })
}

/// What `pid` holds at most so far: its high-water mark, or its resident memory with that of
/// its children, if more. `None` once it is gone.
fn sample(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |status: &str, name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().strip_suffix("kB"))
            .and_then(|kib| kib.trim().parse::<u64>().ok())
            .map(|kib| kib * 1024)
    };
    let high_water = field(&status, "VmHWM:")?;
    let children: u64 = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|child| child.parse::<i32>().ok())
        .map(crate::measure::memory::tree_rss)
        .sum();
    let resident = field(&status, "VmRSS:").unwrap_or(0);
    Some(high_water.max(resident + children))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<OsString> {
        line.split(' ').map(OsString::from).collect()
    }

    #[test]
    fn a_unit_is_its_crate_name_and_metadata_in_either_spelling() {
        let unit = Unit::of(&args(
            "--crate-name app --edition=2021 src/main.rs -C metadata=abc -C extra-filename=-abc",
        ))
        .unwrap();
        assert_eq!(
            Some(&unit),
            Unit::of(&args("--crate-name app -Cmetadata=abc")).as_ref()
        );
        let compile = |line: &str| unit.compiled_by(line.replace(' ', "\0").as_bytes());
        assert!(compile(
            "/rustc --crate-name app --emit=dep-info,metadata,link -C metadata=abc"
        ));
        assert!(compile(
            "/rustc --crate-name app --emit link -Cmetadata=abc"
        ));
        assert!(!compile(
            "/rustc --crate-name app --emit=link -C metadata=abd"
        ));
        assert!(!compile(
            "/rustc --crate-name other --emit=link -C metadata=abc"
        ));
        // sccache's own look at the sources, for its cache key.
        assert!(!compile(
            "/rustc --crate-name app --emit=dep-info -C metadata=abc"
        ));
        assert!(!compile("/rustc --crate-name app -C metadata=abc"));
        assert!(!compile(
            "/rustc --crate-name app --emit dep-info,link -C metadata=abc --print file-names"
        ));
        assert_eq!(Unit::of(&args("-vV")), None);
        assert_eq!(Unit::of(&args("--crate-name app src/main.rs")), None);
    }

    /// A process named rustc, started outside the sampler's process (by a shell, as sccache's
    /// server would), is found by its command line and measured. It is a copy of the shell:
    /// a script's process is named after its interpreter.
    #[test]
    fn the_rustc_of_the_unit_is_found_outside_the_tree_and_measured() {
        let dir = tempfile::tempdir().unwrap();
        let rustc = dir.path().join("rustc");
        std::fs::copy("/bin/sh", &rustc).unwrap();
        let unit = Unit::of(&args("--crate-name probe -C metadata=0123")).unwrap();
        let sampler = RemoteSampler::start(unit.clone());
        // Holds a 40 MB string for a second; `; true` keeps the shell from exec'ing it.
        let server = r#""$0" -c 'x=$(head -c 40000000 /dev/zero | tr "\0" a); sleep 1; echo ${#x}' \
            --crate-name probe --emit=dep-info,link -C metadata=0123; true"#;
        let mut child = std::process::Command::new("/bin/sh")
            .args(["-c", server])
            .arg(&rustc)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        child.wait().unwrap();
        let peak = sampler.stop().expect("the unit's rustc was found");
        assert!(peak > 40_000_000, "{peak}");
        // A unit no process compiles: no peak.
        let other = RemoteSampler::start(Unit {
            metadata: "ffff".into(),
            ..unit
        });
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(other.stop(), None);
    }
}
