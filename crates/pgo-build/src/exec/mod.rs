//! Running things: workloads and their services against a stage's binaries, the process
//! trees pgo-build starts (stopped however a run ends, and recorded so that the next command
//! stops what a killed pgo-build left), and SIGINT/SIGTERM/SIGHUP while they run.
//!
//! `job`: what runs and the variables it sees; `workload`: one run, timed, with its CPU time
//! and page faults; `service`: a run's services; `process`: waiting with resource usage and
//! stopping a tree; `running`: the records of what runs, and a cargo build's tree; `logs`:
//! reading a run's log; `interrupt`: signals while something runs.

pub mod interrupt;
mod job;
mod logs;
mod process;
mod running;
mod service;
mod workload_run;

pub use job::{BIN_DIR_ENV, EnvVars, Job, RunSetup, ServiceWrapper, bin_env_var, binaries_run};
pub use logs::{ProfileWriteFailure, error_lines, log_tail};
pub use process::describe_stopped;
pub use running::{TrackedTree, stop_leftovers};
pub use workload_run::Outcome;
