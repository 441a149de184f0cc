//! The steps of pgo-build: every command that runs in a timer section (`pipeline::context::timed_step`),
//! by the name the terminal, `report.json` and `state.json` use, and the staged stages
//! ([`Stage`]) each one writes. The steps `run` caches are the pipeline's (`run --from`).

use crate::layout::Stage;

/// A command's timed step. Declaration order is pipeline order (`run --from` compares).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Step {
    #[value(skip)]
    Doctor,
    Build,
    Instrument,
    Train,
    #[value(skip)]
    Pack,
    #[value(skip)]
    Unpack,
    #[value(skip)]
    Merge,
    Optimize,
    Bolt,
    #[value(skip)]
    Overlap,
    #[value(skip)]
    Export,
    Compare,
    #[value(skip)]
    Gate,
}

impl Step {
    /// Every step, in pipeline order.
    pub const ALL: [Step; 13] = [
        Step::Doctor,
        Step::Build,
        Step::Instrument,
        Step::Train,
        Step::Pack,
        Step::Unpack,
        Step::Merge,
        Step::Optimize,
        Step::Bolt,
        Step::Overlap,
        Step::Export,
        Step::Compare,
        Step::Gate,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Step::Doctor => "doctor",
            Step::Build => "build",
            Step::Instrument => "instrument",
            Step::Train => "train",
            Step::Pack => "pack",
            Step::Unpack => "unpack",
            Step::Merge => "merge",
            Step::Optimize => "optimize",
            Step::Bolt => "bolt",
            Step::Overlap => "overlap",
            Step::Export => "export",
            Step::Compare => "compare",
            Step::Gate => "gate",
        }
    }

    /// Whether the step is part of making a release build (what `run` does), so its time
    /// counts in the pipeline's total; packing, exporting, gating and looking at profiles
    /// do not.
    pub fn builds_the_release(self) -> bool {
        matches!(
            self,
            Step::Doctor
                | Step::Build
                | Step::Instrument
                | Step::Train
                | Step::Merge
                | Step::Optimize
                | Step::Bolt
                | Step::Compare
        )
    }

    /// The step a name names.
    #[cfg(test)]
    pub fn from_name(name: &str) -> Option<Step> {
        Step::ALL.into_iter().find(|step| step.name() == name)
    }

    /// The staged stages this step rewrites: their records go when it starts.
    pub fn rewrites(self) -> &'static [Stage] {
        match self {
            Step::Build => &[Stage::Baseline],
            Step::Instrument => &[Stage::Instrumented],
            Step::Optimize => &[Stage::Optimized],
            Step::Bolt => &[Stage::BoltInstrumented, Stage::Bolt],
            _ => &[],
        }
    }

    /// The step that stages `stage` (the one whose [`Step::rewrites`] name it).
    pub fn staging(stage: Stage) -> Step {
        Step::ALL
            .into_iter()
            .find(|step| step.rewrites().contains(&stage))
            .expect("every stage is rewritten by a step")
    }

    /// The stage this step's cargo build makes (BOLT rewrites binaries without one).
    pub fn cargo_build(self) -> Option<Stage> {
        match self {
            Step::Build | Step::Instrument | Step::Optimize => self.rewrites().first().copied(),
            _ => None,
        }
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_only_cargo_builds_build() {
        for step in Step::ALL {
            assert_eq!(Step::from_name(step.name()), Some(step));
        }
        assert_eq!(Step::Optimize.cargo_build(), Some(Stage::Optimized));
        assert_eq!(Step::Bolt.cargo_build(), None);
        assert_eq!(
            Step::Bolt.rewrites(),
            [Stage::BoltInstrumented, Stage::Bolt]
        );
        assert!(Step::Build < Step::Train && Step::Optimize < Step::Compare);
        // Each stage is staged by one step, the one that rewrites it.
        assert_eq!(Step::staging(Stage::Baseline), Step::Build);
        assert_eq!(Step::staging(Stage::Instrumented), Step::Instrument);
        assert_eq!(Step::staging(Stage::Optimized), Step::Optimize);
        assert_eq!(Step::staging(Stage::BoltInstrumented), Step::Bolt);
        assert_eq!(Step::staging(Stage::Bolt), Step::Bolt);
    }
}
