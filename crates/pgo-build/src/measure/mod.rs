//! Measurement: what comparisons measure and decide by (`metric`), the figures workloads
//! report themselves (`metrics`), criterion's estimates (`criterion`), instruction counts
//! (`counter`) and whose code they ran in (`code_counts`), memory of process trees and the
//! memory budget (`memory`), and the statistics verdicts rest on (`stats`). Plain data and
//! pure functions over it, besides reading /proc and running the counter; uses only `util`.

pub mod code_counts;
pub mod counter;
pub mod criterion;
pub mod decision;
pub mod family;
pub mod interval;
pub mod memory;
pub mod metric;
pub mod reported_metrics;
pub mod stats;
