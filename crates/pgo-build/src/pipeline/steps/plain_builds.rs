//! `pgo-build build` (the baseline: a plain release build with the user's flags) and
//! `pgo-build instrument` (the same build with the profile flags). The cargo build itself,
//! the link slots and staging are `stage_build.rs`, shared with `optimize` and `bolt`.

use anyhow::{Result, bail};

use crate::cargo::settings::BUILD_ID_FLAG;
use crate::cargo::settings::CONTINUOUS_FLAGS;
use crate::config::StartupOrder;
use crate::layout::{Stage, relative_to};
use crate::pipeline::context::{Context, Session};
use crate::pipeline::stage_build::{
    build_and_stage, check_bolt_compatible_profile, check_lld_before_building, plain_flags,
};
use crate::profiles::{start_marker, startup_order};

/// The baseline: a plain release build with the user's flags.
pub fn build_baseline(cx: &Context, session: &mut Session) -> Result<()> {
    check_bolt_compatible_profile(cx)?;
    let flags = plain_flags(cx);
    build_and_stage(cx, session, Stage::Baseline, flags)?;
    Ok(())
}

pub fn instrument(cx: &Context, session: &mut Session) -> Result<()> {
    check_lld_before_building(cx)?;
    let mut flags = vec![
        format!(
            "-Cprofile-generate={}",
            cx.layout.manual_profiles_dir().display()
        ),
        // Lets pgo-build-rt (and the product) compile signal handling into this build only.
        "--cfg".to_owned(),
        "pgo_build_instrument".to_owned(),
    ];
    if cx.config.pgo.continuous {
        flags.extend(CONTINUOUS_FLAGS.map(str::to_owned));
    }
    if cx.config.pgo.startup_order != StartupOrder::Off {
        // When each function first runs: the traces `[pgo] startup_order` orders from.
        flags.push(startup_order::TEMPORAL_FLAG.to_owned());
    }
    let marker = start_marker::object(
        &cx.layout.stage_dir(Stage::Instrumented),
        &cx.platform,
        &cx.printer,
    )?;
    flags.push(format!(
        "-Clink-arg={}",
        relative_to(&marker, &cx.workspace.root).display()
    ));
    let manifest = build_and_stage(cx, session, Stage::Instrumented, flags)?;
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
