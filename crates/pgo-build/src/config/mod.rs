//! `pgo-build.toml`: what to build and the workloads that train and measure it, and cargo's
//! own configuration files, both read once per command.
//!
//! Every error names the file and line (toml's own errors carry the span; our semantic checks
//! use `Spanned` values), so a typo never silently turns into a default. `file`: the
//! [`Config`] and its loading and checks; `sections`: `[build]`, `[pgo]`, `[bolt]`,
//! `[compare]`, `[explore]`; `workload`: `[[workload]]`; `services`: `[[service]]`; `values`:
//! the parsers of values with a meaning (durations, sizes, margins); `cargo_config`: cargo's
//! config files; `cargo_workload`: what a `cargo = [...]` workload may run; `schema`: the
//! JSON Schema and the book's reference, generated from these types.

pub mod cargo_config;
pub mod cargo_workload;
mod config_file;
pub mod config_schema;
mod described;
pub use config_schema::schema_json;
mod sections;
mod services;
mod values;
mod workload;

pub use config_file::{CONFIG_FILE_NAME, Config};
pub use sections::{BuildVariant, LinkJobs, OnCorrupt, StartupOrder};
pub use services::{ReadyWhen, Service};
pub use values::{
    CBuild, CROSS_LANGUAGE_THIN_LTO, Growth, MAX_DURATION_SECS, WorkloadCommand, line_of,
    parse_duration,
};
pub use workload::{Part, Role, Workload};
