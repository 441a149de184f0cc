//! One crate's compiles within the memory budget: the crate's estimate, admission in the
//! ledger every pgo-build of the target directory shares, rustc run and watched (on
//! probation, or waited for with its peak RSS), the ledger released; and a compile stopped on
//! probation run again at its guess.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result};

use super::args::{crate_root, metadata_path};
use super::environment::{BUDGET_ENV, CPUS_ENV, ESTIMATES_ENV, LEDGER_ENV, env_number};
use super::estimates::{self, guess, read_estimates};
use super::ledger::{Admission, Request, admit, release};
use super::{crate_carry, probation, remote};
use crate::report::CrateKind;

/// A crate to compile, as the ledger weighs it.
pub(super) struct CrateUnit {
    /// `package/crate`.
    pub krate: String,
    pub kind: CrateKind,
    /// The package's version (estimates are kept per version).
    pub version: String,
    /// Its last measured (or carried) peak, if any…
    pub measured: Option<u64>,
    /// …else a guess by kind.
    pub estimate: u64,
    /// Its sources' size, for probation's order (smallest first).
    pub source_bytes: u64,
    /// Compiled outside this process tree (by sccache's server).
    pub elsewhere: bool,
}

impl CrateUnit {
    pub fn new(krate: String, kind: CrateKind, args: &[OsString], elsewhere: bool) -> CrateUnit {
        // pgo-build warned before the build when the file is unusable.
        let estimates = std::env::var_os(ESTIMATES_ENV)
            .and_then(|path| read_estimates(Path::new(&path)).ok())
            .unwrap_or_default();
        let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
        let measured = estimates::lookup(&estimates, &krate, &version, kind);
        // cargo sets OUT_DIR for a package with a build script: code it generated is
        // compiled too.
        let out_dir = std::env::var_os("OUT_DIR").map(PathBuf::from);
        let source_bytes =
            crate_root(args).map_or(0, |root| probation::source_bytes(&root, out_dir.as_deref()));
        CrateUnit {
            estimate: measured.unwrap_or_else(|| guess(kind)),
            krate,
            kind,
            version,
            measured,
            source_bytes,
            elsewhere,
        }
    }
}

/// The budget a crate's compiles wait in, and what they waited.
pub(super) struct Budgeted<'a> {
    unit: &'a CrateUnit,
    args: &'a [OsString],
    ledger: PathBuf,
    budget: u64,
    cpus: usize,
    /// Still a guess to the ledger: a compile stopped on probation is not one any more.
    guessed: bool,
    /// Time spent waiting for memory, over every compile.
    pub memory_wait_secs: f64,
}

impl<'a> Budgeted<'a> {
    pub fn from_env(unit: &'a CrateUnit, args: &'a [OsString]) -> Result<Budgeted<'a>> {
        Ok(Budgeted {
            unit,
            args,
            ledger: PathBuf::from(
                std::env::var_os(LEDGER_ENV).context("PGO_BUILD_MEMORY_LEDGER is not set")?,
            ),
            budget: env_number(BUDGET_ENV).unwrap_or(u64::MAX),
            cpus: env_number(CPUS_ENV).unwrap_or(1).max(1) as usize,
            guessed: unit.measured.is_none() && !unit.elsewhere,
            memory_wait_secs: 0.0,
        })
    }

    pub fn krate(&self) -> &str {
        &self.unit.krate
    }

    /// The crate is estimated above the whole budget: it runs alone.
    pub fn alone(&self) -> bool {
        self.unit.estimate > self.budget
    }

    /// One compile within the budget, to its end; with `capture` (the artifact notices
    /// already passed on), its stderr is kept rather than passed through. `elsewhere`: the
    /// command compiles in sccache's server.
    pub fn compile(
        &mut self,
        command: &mut Command,
        elsewhere: bool,
        mut capture: Option<BTreeSet<String>>,
    ) -> Result<Compiled> {
        if capture.is_some() {
            command.stderr(Stdio::piped());
        }
        let me = std::process::id();
        let metadata = metadata_path(self.args);
        loop {
            let request = Request {
                krate: &self.unit.krate,
                bytes: self.unit.estimate,
                guessed: self.guessed,
                source_bytes: self.unit.source_bytes,
            };
            let (waited, admission) = admit(&self.ledger, me, &request, self.budget, self.cpus)?;
            self.memory_wait_secs += waited;
            let start_unix = crate::wrappers::linker::unix_now();
            let started = Instant::now();
            let remote = elsewhere
                .then(|| remote::Unit::of(self.args).map(remote::RemoteSampler::start))
                .flatten();
            let mut reader = None;
            let outcome = command
                .spawn()
                .with_context(|| {
                    format!(
                        "could not start {}",
                        command.get_program().to_string_lossy()
                    )
                })
                .and_then(|mut child| {
                    if let (Some(stderr), Some(already)) = (child.stderr.take(), capture.take()) {
                        reader = Some(crate_carry::read_output(stderr, already));
                    }
                    match admission {
                        Admission::Probation(allowance) => probation::supervise(
                            &self.ledger,
                            child.id(),
                            &self.unit.krate,
                            (allowance, self.unit.estimate),
                            (self.budget, self.cpus),
                            metadata.as_deref(),
                        ),
                        _ => crate::wrappers::linker::wait_with_peak_rss(child.id() as libc::pid_t)
                            .map(|(code, peak)| probation::Supervised::Done(code, peak, None)),
                    }
                });
            let output = reader.map(|r| r.join().unwrap_or_default());
            let remote_peak = remote.and_then(remote::RemoteSampler::stop);
            release(&self.ledger, me)?;
            match outcome? {
                probation::Supervised::Done(code, peak, figures) => {
                    return Ok(Compiled {
                        code,
                        peak: Measured::of(elsewhere, peak, remote_peak),
                        probation: figures,
                        start_unix,
                        started,
                        output,
                    });
                }
                // Stopped before cargo heard of it: again, charged at its guess this time.
                probation::Supervised::Stopped => {
                    self.guessed = false;
                    capture = output.map(|(_, notices)| notices);
                }
            }
        }
    }
}

/// One rustc run to its end.
pub(super) struct Compiled {
    pub code: u8,
    pub peak: Measured,
    pub probation: Option<probation::Probation>,
    pub start_unix: f64,
    pub started: Instant,
    /// Its stderr, when kept (see `crate_carry::read_output`), and the artifact notices passed
    /// on.
    pub output: Option<(Vec<String>, BTreeSet<String>)>,
}

/// A rustc's peak, and how it was measured.
pub(super) enum Measured {
    /// By `wait4`: rustc ran in the wrapper's tree.
    Waited(u64),
    /// By samples of sccache's rustc (see remote.rs).
    Sampled(u64),
    /// Not at all: a cache hit ran no rustc.
    Nothing,
}

impl Measured {
    /// What `wait4` saw (`waited`), and for a compile in sccache's server what its samples
    /// saw: when not cacheable, the client ran rustc itself and `wait4` saw it (on a hit it
    /// saw only the client, a few MiB): the larger of that and the samples.
    fn of(elsewhere: bool, waited: u64, sampled: Option<u64>) -> Measured {
        match (elsewhere, sampled) {
            (false, _) => Measured::Waited(waited),
            (true, Some(sampled)) if sampled >= waited => Measured::Sampled(sampled),
            (true, _) if waited > estimates::FLOOR => Measured::Waited(waited),
            (true, _) => Measured::Nothing,
        }
    }

    pub fn bytes(&self) -> Option<u64> {
        match self {
            Measured::Waited(bytes) | Measured::Sampled(bytes) => Some(*bytes),
            Measured::Nothing => None,
        }
    }

    /// The larger of this and an earlier compile's peak of the same crate.
    pub fn at_least(self, earlier: Option<u64>) -> Measured {
        match (self, earlier) {
            (Measured::Waited(now), Some(then)) => Measured::Waited(now.max(then)),
            (Measured::Nothing, Some(then)) => Measured::Waited(then),
            (measured, _) => measured,
        }
    }
}
