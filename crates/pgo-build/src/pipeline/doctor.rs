//! `pgo-build doctor`: what pgo-build found (rustc, LLVM tools, workspace, binaries, config)
//! and whether it can run; the first stage of `run`.

use anyhow::{Context, Result};

use super::Session;
use crate::config::Role;
use crate::toolchain;

impl Session {
    pub fn doctor(&mut self) -> Result<()> {
        let printer = self.printer;
        printer.info(format!(
            "rustc: {} (host {}, LLVM {})",
            self.rustc.version_line, self.rustc.host, self.rustc.llvm_version
        ));
        printer.info(format!("workspace: {}", self.workspace.root.display()));
        printer.info(format!(
            "binaries: {}",
            self.bins
                .iter()
                .map(|b| b.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        printer.info(format!(
            "user rustflags ({}): {:?}",
            self.user_flags.source, self.user_flags.flags
        ));
        printer.info(format!(
            "config: {} ({} train, {} holdout workloads)",
            self.config
                .path
                .as_ref()
                .map_or("none".to_owned(), |p| p.display().to_string()),
            self.config.workloads_with_role(Role::Train).count(),
            self.config.workloads_with_role(Role::Holdout).count()
        ));
        let search = toolchain::find_llvm_tool(toolchain::LLVM_PROFDATA, &self.rustc, &printer);
        for candidate in &search.considered {
            printer.detail(format!(
                "llvm-profdata candidate {}: {}",
                candidate.path.display(),
                candidate.outcome
            ));
        }
        for spec in [toolchain::LLVM_BOLT, toolchain::MERGE_FDATA] {
            let found = toolchain::find_llvm_tool(spec, &self.rustc, &printer);
            match (&found.tool, self.config.bolt.enabled) {
                (Some(tool), _) => printer.info(format!(
                    "{}: {} (LLVM {})",
                    spec.name,
                    tool.path.display(),
                    tool.version
                )),
                (None, true) => {
                    found
                        .require(&self.rustc)
                        .context("[bolt] enabled = true needs it")?;
                }
                (None, false) => printer.info(format!(
                    "{}: not found (only needed for BOLT: `apt-get install {}-{}`)",
                    spec.name, spec.apt_package, self.rustc.llvm_major
                )),
            }
        }
        if let Some(problem) = self.no_training() {
            printer.warn(problem);
        }
        let tool = search.require(&self.rustc)?;
        printer.info(format!(
            "llvm-profdata: {} (LLVM {})",
            tool.path.display(),
            tool.version
        ));
        self.report.rustc = Some(self.rustc.version_line.clone());
        self.report.llvm_profdata =
            Some(format!("{} (LLVM {})", tool.path.display(), tool.version));
        let _ = self.profdata.set(tool);
        Ok(())
    }

    /// Why training cannot run, when the configuration has no train workload and no
    /// committed profile: said by `doctor`, and by `run` before it builds anything.
    pub(super) fn no_training(&self) -> Option<String> {
        if self.config.pgo.profile.is_some()
            || self
                .config
                .workloads_with_role(Role::Train)
                .next()
                .is_some()
        {
            return None;
        }
        Some(self.no_train_workloads())
    }
}
