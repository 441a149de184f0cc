//! End-to-end tests: the real `pgo-build` binary against a copy of a fixture workspace, with
//! real cargo builds, real instrumented binaries and the real llvm-profdata. One file per
//! command family; `support/` holds the fixture and the shared helpers.

mod support;

mod bolt;
mod cargo_workloads;
mod compare;
mod cross_language;
mod explore;
mod gate;
mod init;
mod memory;
mod metrics;
mod optimize;
mod pipeline;
mod profile;
mod releases;
mod report;
mod robustness;
mod run;
mod services;
mod shard;
mod signals;
mod startup_order;
mod targets;
mod templates;
mod train;
