//! `pgo-build build` (the baseline: a plain release build with the user's flags) and
//! `pgo-build instrument` (the same build with the profile flags). The cargo build itself,
//! the link slots and staging are `cargo_stage.rs`, shared with `optimize` and `bolt`.

use anyhow::{Result, bail};

use super::Session;
use crate::cargo::build::{BUILD_ID_FLAG, CONTINUOUS_FLAGS};
use crate::config::StartupOrder;
use crate::layout::{Stage, relative_to};
use crate::profiles::start_marker;
use crate::profiles::startup_order;

impl Session {
    /// The baseline: a plain release build with the user's flags.
    pub fn build_baseline(&mut self) -> Result<()> {
        self.check_bolt_compatible_profile()?;
        let flags = self.plain_flags();
        self.build_and_stage(Stage::Baseline, flags)?;
        Ok(())
    }

    pub fn instrument(&mut self) -> Result<()> {
        let mut flags = vec![
            format!(
                "-Cprofile-generate={}",
                self.layout.manual_profiles_dir().display()
            ),
            // Lets pgo-build-rt (and the product) compile signal handling into this build only.
            "--cfg".to_owned(),
            "pgo_build_instrument".to_owned(),
        ];
        if self.continuous {
            flags.extend(CONTINUOUS_FLAGS.map(str::to_owned));
        }
        if self.config.pgo.startup_order != StartupOrder::Off {
            // When each function first runs: the traces `[pgo] startup_order` orders from.
            flags.push(startup_order::TEMPORAL_FLAG.to_owned());
        }
        let marker = start_marker::object(
            &self.layout.stage_dir(Stage::Instrumented),
            &self.platform,
            &self.printer,
        )?;
        flags.push(format!(
            "-Clink-arg={}",
            relative_to(&marker, &self.workspace.root).display()
        ));
        let manifest = self.build_and_stage(Stage::Instrumented, flags)?;
        for binary in &manifest.binaries {
            if binary.build_id.is_none() {
                bail!(
                    "the instrumented binary {} has no build id, so its profiles cannot be told \
                     apart from other binaries'. pgo-build passes {BUILD_ID_FLAG}; the linker \
                     configured for this workspace ignored it. Use a linker that supports \
                     --build-id (GNU ld, lld, mold).",
                    binary.path.display()
                );
            }
        }
        Ok(())
    }
}
