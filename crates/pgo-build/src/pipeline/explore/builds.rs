//! One build per set of settings: a context ([`Context::with_build`]) in its own layout under
//! `explore/builds/<key>/` (or the pipeline's own session when the settings are its own),
//! built through `run`'s cached steps; BOLT and profile-use-only variants reuse a training
//! through an exported profile. The `--budget` clock.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};

use super::variants::{Variant, training_settings};
use crate::cargo::manifest::StageManifest;
use crate::config::BuildVariant;
use crate::layout::step::Step;
use crate::layout::{Layout, Stage};
use crate::pipeline::context::{Context, Session};
use crate::pipeline::requests::{BoltRequest, ExportRequest, RunRequest, StepOptions};
use crate::pipeline::run::pipeline_step;
use crate::pipeline::steps::compare::Compared;
use crate::pipeline::steps::profile;
use crate::profiles::{ExportedProfile, PgoProfile};
use crate::report::{ExploreStepCost, StepResult};
use crate::util::files::write_atomically;
use crate::util::fingerprint::Fingerprint;

/// Which build a set of settings is made in.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum BuildKind {
    /// Baseline, instrumented and optimized stages.
    Plain,
    /// Optimized with the profile of a plain build whose settings train alike (see
    /// [`PROFILE_USE_ONLY`]).
    Profiled,
    /// Linked with relocations and post-processed by BOLT: of the optimized binaries (built
    /// from the plain build's profile) or, without PGO, of the baseline ones.
    Bolt { pgo: bool },
}

/// One of explore's builds.
pub(super) struct Build<'a> {
    settings: &'a BuildVariant,
    kind: BuildKind,
}

/// A variant once built: what to measure, and what building it cost.
pub(super) struct Built {
    pub(super) compared: Compared,
    pub(super) costs: Vec<ExploreStepCost>,
}

/// The clock of `--budget`.
pub(super) struct Clock {
    pub(super) started: Instant,
    pub(super) budget: Option<Duration>,
}

impl Clock {
    pub(super) fn exhausted(&self) -> bool {
        self.budget.is_some_and(|b| self.started.elapsed() >= b)
    }
}

pub(super) fn budget_note(clock: &Clock) -> String {
    format!(
        "the budget ({}) ran out after {}",
        clock
            .budget
            .map(crate::util::printer::duration)
            .unwrap_or_default(),
        crate::util::printer::duration(clock.started.elapsed())
    )
}

/// Runs `steps` in `cx`, cached as in `run`, each one's cost added to `costs`. Returns
/// false when the budget ran out before a step.
pub(super) fn run_steps(
    cx: &Context,
    session: &mut Session,
    label: &str,
    steps: &[Step],
    args: &RunRequest,
    clock: &Clock,
    costs: &mut Vec<ExploreStepCost>,
) -> Result<bool> {
    let mut trained = None;
    for &step in steps {
        if clock.exhausted() {
            return Ok(false);
        }
        if let Some(handed) = pipeline_step(cx, session, step, args, trained.as_ref())? {
            trained = Some(handed);
        }
        let record = session.report.step_record(step);
        costs.push(ExploreStepCost {
            build: label.to_owned(),
            step,
            secs: record.map_or(0.0, |r| r.duration_secs),
            peak_memory_bytes: record.and_then(|r| r.peak_memory_bytes),
            cached: record.is_some_and(|r| r.result == StepResult::Cached),
        });
    }
    Ok(true)
}

/// A variant's staged binaries, ready to compare.
pub(super) fn compared(variant: &Variant, layout: Layout, stage: Stage) -> Result<Compared> {
    let manifest = StageManifest::load(&layout, stage, "run `pgo-build explore` again")?;
    Ok(Compared {
        name: variant.name.clone(),
        stage,
        layout,
        manifest,
        log_prefix: "explore",
        rebuild: "explore",
    })
}

/// The profile a plain build's optimize used (content-addressed, so it names one profile).
pub(super) fn trained_profile(layout: &Layout) -> Result<PgoProfile> {
    let manifest = StageManifest::load(layout, Stage::Optimized, "run `pgo-build explore` again")?;
    let used = manifest
        .stage_rustflags
        .iter()
        .find_map(|flag| flag.strip_prefix("-Cprofile-use="))
        .map(PathBuf::from)
        .with_context(|| {
            format!(
                "the optimized build in {} has no profile flag; run `pgo-build explore` again",
                layout.root().display()
            )
        })?;
    let original = layout
        .profiles_dir()
        .join(used.file_name().unwrap_or_default());
    Ok(PgoProfile::used_at(if original.is_file() {
        original
    } else {
        used
    }))
}

/// The directory name of a build: a hash of its settings.
pub(super) fn build_key(build: &Build) -> String {
    let mut print = Fingerprint::new("explore build");
    print.text("settings", &describe_build(build));
    print.finish()[..12].to_owned()
}

pub(super) fn describe_build(build: &Build) -> String {
    let kind = match build.kind {
        BuildKind::Plain => "plain",
        BuildKind::Profiled => "optimized with the profile trained without profile-use-only flags",
        BuildKind::Bolt { pgo: true } => "bolt of pgo",
        BuildKind::Bolt { pgo: false } => "bolt without pgo",
    };
    format!("{kind}: {}", build.settings.describe())
}

/// Builds what `variant` needs, through `run`'s cached steps; `None` when the budget ran
/// out first.
pub(super) fn build_variant(
    cx: &Context,
    session: &mut Session,
    variant: &Variant,
    clock: &Clock,
) -> Result<Option<Built>> {
    let trains_alike = training_settings(&variant.build) == variant.build;
    let (kind, steps, stage): (BuildKind, &[Step], Stage) = match (variant.pgo, variant.bolt) {
        (false, false) => (BuildKind::Plain, &[Step::Build], Stage::Baseline),
        (true, false) if trains_alike => (
            BuildKind::Plain,
            &[Step::Instrument, Step::Train, Step::Optimize],
            Stage::Optimized,
        ),
        (true, false) => (BuildKind::Profiled, &[Step::Optimize], Stage::Optimized),
        (pgo, true) => (
            BuildKind::Bolt { pgo },
            if pgo {
                &[Step::Optimize, Step::Bolt]
            } else {
                &[Step::Build, Step::Bolt]
            },
            Stage::Bolt,
        ),
    };
    let mut costs = Vec::new();
    let profile = match kind {
        BuildKind::Profiled | BuildKind::Bolt { pgo: true } => {
            let Some(profile) = train_for(
                cx,
                session,
                &training_settings(&variant.build),
                clock,
                &mut costs,
            )?
            else {
                return Ok(None);
            };
            Some(profile)
        }
        _ => None,
    };
    let build = Build {
        settings: &variant.build,
        kind,
    };
    let Some(layout) = run_build(cx, session, &build, steps, profile, clock, &mut costs)? else {
        return Ok(None);
    };
    Ok(Some(Built {
        compared: compared(variant, layout, stage)?,
        costs,
    }))
}

/// The profile trained with `settings` (their plain build: instrument, train, and the
/// optimize that merges the profile), exported; the training's costs are added to `costs`
/// (not that optimize: its build is another variant's). `None` when the budget ran out.
pub(super) fn train_for(
    cx: &Context,
    session: &mut Session,
    settings: &BuildVariant,
    clock: &Clock,
    costs: &mut Vec<ExploreStepCost>,
) -> Result<Option<ExportedProfile>> {
    let plain = Build {
        settings,
        kind: BuildKind::Plain,
    };
    let training = [Step::Instrument, Step::Train, Step::Optimize];
    let mut plain_costs = Vec::new();
    let Some(layout) = run_build(
        cx,
        session,
        &plain,
        &training,
        None,
        clock,
        &mut plain_costs,
    )?
    else {
        return Ok(None);
    };
    costs.extend(plain_costs.into_iter().filter(|c| c.step != Step::Optimize));
    Ok(Some(export_trained(cx, session, &plain, &layout)?))
}

/// Runs `steps` of `build` (cached as in `run`), adding each one's cost to `costs`.
/// Returns the build's layout, or `None` when the budget ran out first.
pub(super) fn run_build(
    cx: &Context,
    session: &mut Session,
    build: &Build,
    steps: &[Step],
    profile: Option<ExportedProfile>,
    clock: &Clock,
    costs: &mut Vec<ExploreStepCost>,
) -> Result<Option<Layout>> {
    let run_args = RunRequest {
        steps: StepOptions {
            bolt: BoltRequest {
                without_pgo: build.kind == BuildKind::Bolt { pgo: false },
            },
            ..StepOptions::default()
        },
        force: false,
        from: None,
        compare: false,
    };
    let (done, layout) = in_build(cx, session, build, profile, |cx, session, label| {
        run_steps(cx, session, label, steps, &run_args, clock, costs)
    })?;
    Ok(done.then_some(layout))
}

/// Runs `work` with the session of `build`: this one when the settings are the
/// pipeline's own (built where `run` builds them), else one in `explore/builds/<key>/`.
/// `work` gets the build's name for the report.
pub(super) fn in_build<T>(
    cx: &Context,
    session: &mut Session,
    build: &Build,
    profile: Option<ExportedProfile>,
    work: impl FnOnce(&Context, &mut Session, &str) -> Result<T>,
) -> Result<(T, Layout)> {
    let bolt = matches!(build.kind, BuildKind::Bolt { .. });
    let own = build.kind == BuildKind::Plain
        && *build.settings == cx.config.variant()
        && !cx.config.bolt.enabled
        && cx.config.pgo.profile.is_none();
    if own {
        // explore judges size itself: a variant over [pgo] max_size_growth is measured and
        // flagged, not left unbuilt.
        let result = work(&cx.without_size_limit(), session, "target/pgo-build");
        return Ok((result?, cx.layout.clone()));
    }
    let key = build_key(build);
    let layout = Layout::at(cx.layout.explore_dir().join("builds").join(&key));
    crate::util::files::create_dir_all(layout.root())?;
    write_atomically(
        &layout.root().join("settings.txt"),
        format!("{}\n", describe_build(build)).as_bytes(),
    )?;
    // Its printer is this one's: warnings it shows are not shown again by later builds.
    let build_cx = cx
        .with_build(layout.clone(), build.settings, bolt, profile)?
        .without_size_limit();
    let mut build_session = Session::start(&build_cx)?;
    let result = work(
        &build_cx,
        &mut build_session,
        &format!("explore/builds/{key}"),
    );
    Ok((result?, layout))
}

/// The profile a plain build trained, exported with its metadata (toolchain, target) the
/// way a committed profile is, so the BOLT build's `optimize` checks it like one. Exported
/// once per profile: the name is the content-addressed one `optimize` merged.
pub(super) fn export_trained(
    cx: &Context,
    session: &mut Session,
    build: &Build,
    layout: &Layout,
) -> Result<ExportedProfile> {
    let trained = trained_profile(layout)?;
    let output = layout
        .root()
        .join("exported")
        .join(trained.path().file_name().unwrap_or_default());
    if output.is_file() && crate::pipeline::committed::metadata_path(&output).is_file() {
        return Ok(ExportedProfile::written_at(output));
    }
    crate::util::files::create_dir_all(output.parent().expect("<root>/exported/<file>"))?;
    let args = ExportRequest {
        output: Some(output.clone()),
        rustc_estimates: None,
        internal: true,
    };
    in_build(cx, session, build, None, |cx, session, _| {
        profile::export(cx, session, &args)
    })?;
    Ok(ExportedProfile::written_at(output))
}

/// Copies a variant's binaries to `explore/<variant>/bin/` (hard links where possible).
pub(super) fn publish(cx: &Context, name: &str, variant: &Compared) -> Result<PathBuf> {
    variant.manifest.check_staged(name, variant.rebuild)?;
    let dir = cx.layout.explore_dir().join(name).join("bin");
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("could not clear {}", dir.display()))?;
    }
    crate::util::files::create_dir_all(&dir)?;
    for binary in &variant.manifest.binaries {
        let to = dir.join(&binary.name);
        if std::fs::hard_link(&binary.path, &to).is_err() {
            std::fs::copy(&binary.path, &to).with_context(|| {
                format!(
                    "could not copy {} to {}",
                    binary.path.display(),
                    to.display()
                )
            })?;
        }
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::explore::variants::builtin_variants;

    #[test]
    fn builds_with_the_same_settings_share_a_key_and_others_do_not() {
        let variants = builtin_variants();
        let key = |name: &str, kind: BuildKind| {
            build_key(&Build {
                settings: &variants.iter().find(|v| v.name == name).unwrap().build,
                kind,
            })
        };
        assert_eq!(
            key("pgo", BuildKind::Plain),
            key("baseline", BuildKind::Plain)
        );
        assert_eq!(
            key("pgo+lto+cgu1", BuildKind::Plain),
            key("pgo+lto+cgu1+bolt", BuildKind::Plain)
        );
        assert_ne!(
            key("pgo", BuildKind::Plain),
            key("pgo+lto", BuildKind::Plain)
        );
        assert_ne!(
            key("pgo", BuildKind::Plain),
            key("pgo", BuildKind::Bolt { pgo: true })
        );
        assert_ne!(
            key("pgo", BuildKind::Bolt { pgo: false }),
            key("pgo", BuildKind::Bolt { pgo: true })
        );
    }
}
