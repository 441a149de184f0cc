//! Counting the instructions of a workload's whole process tree, for `compare --metric
//! instructions`: `perf stat` where it can count them, else valgrind's callgrind.

use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::util::command::Cmd;
use crate::util::printer::Printer;

/// Counts the instructions of a workload's whole process tree.
pub enum Counter {
    /// `perf stat` (children inherit the counter).
    Perf,
    /// `valgrind --tool=callgrind --trace-children=yes`: one output file per process.
    Callgrind,
}

impl Counter {
    /// perf when it can count instructions here (on many VMs it reports them as
    /// `<not supported>`), else callgrind.
    pub fn detect(printer: &Printer) -> Result<Counter> {
        let probe =
            std::env::temp_dir().join(format!("pgo-build-perf-probe-{}", std::process::id()));
        let perf_works = Cmd::new("perf")
            .args(["stat", "-x,", "-e", "instructions", "-o"])
            .arg(&probe)
            .args(["--", "true"])
            .output(printer)
            .is_ok_and(|o| o.status.success())
            && std::fs::read_to_string(&probe).is_ok_and(|text| perf_count(&text).is_some());
        let _ = std::fs::remove_file(&probe);
        if perf_works {
            return Ok(Counter::Perf);
        }
        if let Some(callgrind) = Counter::callgrind(printer) {
            return Ok(callgrind);
        }
        bail!(
            "--metric instructions needs `perf stat` able to count instructions (it cannot on \
             this machine, or is missing) or valgrind: `apt-get install valgrind`"
        )
    }

    /// Callgrind, where valgrind runs: what counts by function (perf stat counts totals only).
    pub fn callgrind(printer: &Printer) -> Option<Counter> {
        let valgrind = Cmd::new("valgrind").arg("--version").output(printer);
        valgrind
            .is_ok_and(|o| o.status.success())
            .then_some(Counter::Callgrind)
    }

    /// How many times longer a workload runs under this counter: its timeout is scaled by it.
    /// Callgrind's ~50× is the order measured on the example (0.4 s → 20 s); twice that, so a
    /// slower workload still fits.
    pub fn slowdown(&self) -> u32 {
        match self {
            Counter::Perf => 1,
            Counter::Callgrind => 100,
        }
    }

    /// How many times longer a workload usually runs under this counter: callgrind ran the
    /// example about 50× slower. The first estimate of what counting costs, before a count
    /// measures it.
    pub fn usual_slowdown(&self) -> u32 {
        match self {
            Counter::Perf => 1,
            Counter::Callgrind => 50,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Counter::Perf => "perf stat -e instructions".to_owned(),
            Counter::Callgrind => {
                "valgrind --tool=callgrind --trace-children=yes (perf stat cannot count instructions here)".to_owned()
            }
        }
    }

    pub fn wrapper(&self, dir: &Path) -> Vec<std::ffi::OsString> {
        let words: Vec<String> = match self {
            Counter::Perf => vec![
                "perf".into(),
                "stat".into(),
                "-x,".into(),
                "-e".into(),
                "instructions".into(),
                "-o".into(),
                dir.join("perf.txt").display().to_string(),
                "--".into(),
            ],
            Counter::Callgrind => vec![
                "valgrind".into(),
                "--tool=callgrind".into(),
                "--trace-children=yes".into(),
                format!("--callgrind-out-file={}/callgrind.%p", dir.display()),
                // Mangled names tell Rust from C and C++ (`code_counts`); the totals are
                // the same.
                "--demangle=no".into(),
                "-q".into(),
            ],
        };
        words.into_iter().map(Into::into).collect()
    }

    /// Whose code the counted run in `dir` ran its instructions in (`own`: whether an object
    /// is one of the program's binaries): callgrind's output says, perf stat's holds totals
    /// only (`None`).
    pub fn code_counts(
        &self,
        dir: &Path,
        own: &dyn Fn(&str) -> bool,
    ) -> Option<Result<super::code_counts::CodeCounts>> {
        match self {
            Counter::Perf => None,
            Counter::Callgrind => Some(super::code_counts::read_dir(dir, own)),
        }
    }

    pub fn read(&self, dir: &Path) -> Result<u64> {
        match self {
            Counter::Perf => {
                let text = crate::util::files::read_to_string(dir.join("perf.txt"))?;
                perf_count(&text)
                    .with_context(|| format!("perf stat printed no instruction count:\n{text}"))
            }
            Counter::Callgrind => {
                let mut total = 0;
                let mut files = 0;
                for entry in std::fs::read_dir(dir)? {
                    let text = crate::util::files::read_to_string(entry?.path())?;
                    files += 1;
                    total +=
                        callgrind_total(&text).context("a callgrind output has no totals line")?;
                }
                if files == 0 {
                    bail!("callgrind wrote no output");
                }
                Ok(total)
            }
        }
    }
}

/// The count from `perf stat -x,` output (`123456,,instructions,…`); `None` for
/// `<not supported>`.
fn perf_count(text: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.contains(",instructions"))?
        .split(',')
        .next()?
        .trim()
        .parse()
        .ok()
}

/// `totals:` (or `summary:`) of one callgrind output file.
fn callgrind_total(text: &str) -> Option<u64> {
    let value = |prefix: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .and_then(|v| v.trim().parse().ok())
    };
    value("totals:").or_else(|| value("summary:"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_outputs_are_parsed() {
        assert_eq!(
            perf_count("# started on …\n\n123456,,instructions,1000,100.00,,\n"),
            Some(123456)
        );
        assert_eq!(
            perf_count("<not supported>,,instructions,0,100.00,,\n"),
            None
        );
        assert_eq!(
            callgrind_total("events: Ir\nsummary: 603815923\ntotals: 603815923\n"),
            Some(603815923)
        );
        assert_eq!(callgrind_total("events: Ir\nsummary: 42\n"), Some(42));
        assert_eq!(callgrind_total("events: Ir\n"), None);
    }
}
