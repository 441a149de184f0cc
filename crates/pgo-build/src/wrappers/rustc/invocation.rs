//! The rustc command line the wrapper runs: cargo's, with the crate's symbol names pinned
//! (`stable_names`), a committed profile's carry flags (`crate_carry`), pgo-build's own
//! relative paths made absolute outside the workspace root, and the user's own wrapper in
//! front when one was set ([`CHAINED_ENV`](super::CHAINED_ENV)).

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result};

use super::args::links;
use super::crate_carry::{CarrySetup, Carrying};
use super::environment::{CHAINED_ENV, MODE_ENV, WORKSPACE_ROOT_ENV};
use super::stable_names;

/// cargo's rustc command line as the wrapper changes it, and how to run it.
pub(super) struct Invocation {
    pub rustc: OsString,
    /// The arguments as rustc gets them.
    pub args: Vec<OsString>,
    /// The user's own rustc wrapper (sccache, …), if any.
    pub chained: Option<OsString>,
    /// The crate's `-C metadata` pins its version: rustc is told the pinned version too.
    pinned_version: bool,
    /// The carry of a committed profile's records this crate takes part in, if any.
    pub carrying: Option<Carrying>,
    pub carry_setup: Option<CarrySetup>,
}

impl Invocation {
    /// From the wrapper's arguments: rustc, then cargo's arguments for it.
    pub fn from_args(args: &[OsString]) -> Result<Invocation> {
        let (rustc, cargo_args) = args
            .split_first()
            .context("run as a rustc wrapper without a rustc to run")?;
        let stable = stable_args(cargo_args);
        let args = stable.as_deref().unwrap_or(cargo_args);
        let carry_setup = CarrySetup::from_env();
        let carrying = match &carry_setup {
            Some(setup) => Carrying::prepare(args, setup)?,
            None => None,
        };
        let args = carrying.as_ref().map_or(args, |c| c.args.as_slice());
        let args = with_own_paths_absolute(args);
        let pinned_version =
            std::env::var_os(stable_names::ENV).is_some() && stable_names::pins_version(&args);
        Ok(Invocation {
            rustc: rustc.clone(),
            args,
            chained: std::env::var_os(CHAINED_ENV).filter(|w| !w.is_empty()),
            pinned_version,
            carrying,
            carry_setup,
        })
    }

    /// The command, through the user's wrapper when there is one.
    pub fn command(&self) -> Command {
        self.command_through(self.chained.as_deref())
    }

    /// The command run by rustc itself, not through the user's wrapper (see crate_carry.rs).
    pub fn direct_command(&self) -> Command {
        self.command_through(None)
    }

    fn command_through(&self, wrapper: Option<&OsStr>) -> Command {
        let mut command = match wrapper {
            Some(wrapper) => {
                let mut command = Command::new(wrapper);
                command.arg(&self.rustc);
                command
            }
            None => Command::new(&self.rustc),
        };
        command.args(&self.args).env_remove(MODE_ENV);
        if self.pinned_version {
            command.env(
                stable_names::FORCED_VERSION_ENV,
                stable_names::FORCED_VERSION,
            );
        }
        command
    }

    /// A query (`rustc -vV`, `--print`): nothing to admit, run as it is.
    pub fn run_unadmitted(&self) -> Result<u8> {
        let status = self
            .command()
            .status()
            .with_context(|| format!("could not start {}", self.rustc.to_string_lossy()))?;
        Ok(exit_code(status))
    }

    /// sccache compiles in its server, outside this process tree: the client's peak says
    /// nothing (see remote.rs), and a crate can run on probation only where its memory is
    /// watched (its own tree).
    pub fn compiles_elsewhere(&self) -> bool {
        self.chained.as_ref().is_some_and(|w| {
            std::path::Path::new(w)
                .file_name()
                .is_some_and(|name| name.to_string_lossy().contains("sccache"))
        })
    }
}

/// cargo's arguments with the crate's `-C metadata` made the same across releases, when
/// pgo-build asked for it.
fn stable_args(args: &[OsString]) -> Option<Vec<OsString>> {
    let duplicated = std::env::var(stable_names::ENV).ok()?;
    let identity = stable_names::CrateIdentity {
        package: std::env::var("CARGO_PKG_NAME").unwrap_or_default(),
        version: std::env::var("CARGO_PKG_VERSION").unwrap_or_default(),
    };
    Some(stable_names::rewrite(args, &identity, &duplicated))
}

/// Outside the workspace root (registry crates), pgo-build's relative paths name nothing;
/// only a crate that links uses them, so only its command line changes (an rlib's stays the
/// same in every checkout, for a compile cache).
fn with_own_paths_absolute(args: &[OsString]) -> Vec<OsString> {
    let outside_root = std::env::var_os(WORKSPACE_ROOT_ENV)
        .map(PathBuf::from)
        .filter(|root| links(args) && std::env::current_dir().is_ok_and(|cwd| cwd != *root));
    args.iter()
        .map(|arg| {
            match outside_root
                .as_deref()
                .and_then(|root| crate::layout::absolute_own_path(&arg.to_string_lossy(), root))
            {
                Some(absolute) => absolute.into(),
                None => arg.clone(),
            }
        })
        .collect()
}

/// rustc's exit code as the wrapper's: a signal's as a shell reports it (128 + signal).
fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match status.code() {
        Some(code) => code as u8,
        None => 128 + status.signal().unwrap_or(0) as u8,
    }
}
