//! What a comparison accepts: a run's outcome (a failed run's time means nothing; services
//! that went wrong are named), and what figures of binaries run under an emulator mean.

use anyhow::{Result, bail};

use crate::config::Workload;
use crate::exec;
use crate::measure::metric::Metric;
use crate::pipeline::context::Context;

/// For a target whose binaries run under an emulator: what the figures mean (wall and CPU
/// time of the emulation), or the refusal of instruction counts, which cannot be taken.
pub(super) fn emulation_note(cx: &Context, metric: Metric) -> Result<Option<String>> {
    let execution = cx.platform.execution();
    let Some(runner) = execution.runner().filter(|_| execution.emulated()) else {
        return Ok(None);
    };
    let triple = &cx.platform.triple;
    if metric == Metric::Instructions {
        bail!(
            "--metric instructions cannot be measured for {triple} here: its binaries run \
             under `{}`, which callgrind cannot run and whose own instructions perf would \
             count. Here only wall and CPU time of the emulation can be measured \
             (--metric wall or cpu), and they say little about {} hardware: for a figure \
             that does, `pgo-build pack` the stages and compare on a machine of that \
             architecture",
            runner.display(),
            cx.platform.arch,
        );
    }
    Ok(Some(format!(
        "{triple} binaries ran under the emulator `{}`: these times measure the emulation \
         on this {} machine, not {} hardware; compare on {} hardware for figures that do",
        runner.display(),
        std::env::consts::ARCH,
        cx.platform.arch,
        cx.platform.arch
    )))
}

/// A run's outcome, refused when the workload failed (its time would mean nothing).
pub(in crate::pipeline) fn checked_run(
    cx: &Context,
    workload: &Workload,
    variant: &str,
    outcome: exec::Outcome,
) -> Result<exec::Outcome> {
    if !outcome.stopped.is_empty() {
        cx.printer.warn(format!(
            "workload `{}` against the {} binaries: pgo-build had to stop {}",
            workload.name(),
            variant,
            exec::describe_stopped(&outcome.stopped)
        ));
    }
    for service in &outcome.services {
        if let Some(problem) = service.problem() {
            cx.printer.warn(format!(
                "workload `{}` against the {variant} binaries: {problem}",
                workload.name()
            ));
        }
    }
    if !outcome.success && !workload.allow_failure {
        bail!(
            "workload `{}` {} against the {} binaries, so its time means nothing. Its output ends with:\n{}\nFull log: {}",
            workload.name(),
            outcome.status,
            variant,
            exec::log_tail(&outcome.log_path, 20),
            outcome.log_path.display()
        );
    }
    Ok(outcome)
}
