//! Resumability: the fingerprint of every completed step (`target/pgo-build/state.json`).
//! (The lock that keeps two pgo-build runs out of one `target/pgo-build/` is `layout::lock`.)
//!
//! A step's fingerprint covers its inputs - settings and flags, the selected binaries, the
//! workspace manifests and Cargo.lock, the source files cargo's dep-info lists for each binary,
//! the upstream stage's outputs (its stage.json), workloads, profiles - as paths with size and
//! modification time, like cargo's own freshness check. A step is recorded only after it
//! completed, and outputs are written to temporary names and renamed, so an interrupted run
//! leaves nothing that looks complete: the next `run` resumes at the first step that is not.

use std::collections::BTreeMap;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::layout::Layout;
use crate::layout::step::Step;
use crate::report::StepRecord;
use crate::util::files::write_atomically;

/// The version of `state.json`'s layout; a file of another is named and not used.
const STATE_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct State {
    pub schema_version: u32,
    /// Step → fingerprint of the inputs it completed with (`stages` in the file, as written
    /// before the word "step"); keyed by the step's name, so files written before read.
    #[serde(rename = "stages")]
    pub steps: BTreeMap<Step, String>,
    /// Step name → its last completed run (duration, peak memory, when), shown for the runs
    /// that reuse it.
    #[serde(default)]
    pub runs: BTreeMap<Step, StepRecord>,
    /// Step name → each part of its fingerprint (what a changed step is said to have changed
    /// in: "the sources", "the train workloads"). Absent in files written before.
    #[serde(default)]
    pub parts: BTreeMap<Step, BTreeMap<String, String>>,
}

impl State {
    /// The step records, or none; with what was wrong with an unreadable file or one of
    /// another schema version (the steps then run again rather than being trusted).
    pub fn load(layout: &Layout) -> (State, Option<String>) {
        let fresh = State {
            schema_version: STATE_SCHEMA_VERSION,
            steps: BTreeMap::new(),
            runs: BTreeMap::new(),
            parts: BTreeMap::new(),
        };
        let path = layout.state();
        let Ok(text) = std::fs::read_to_string(&path) else {
            return (fresh, None);
        };
        let redone = "every step of `pgo-build run` runs again (its outputs are checked, not \
                      trusted) and the file is written anew";
        // The version first: a file of another version may not read as this one at all.
        #[derive(Deserialize)]
        struct Versioned {
            schema_version: Option<u32>,
        }
        match serde_json::from_str::<Versioned>(&text).map(|v| v.schema_version) {
            Ok(Some(STATE_SCHEMA_VERSION)) => {}
            Ok(Some(other)) => {
                return (
                    fresh,
                    Some(format!(
                        "{} has step records of schema version {other} (another pgo-build's; \
                         this one reads {STATE_SCHEMA_VERSION}): they are not used, so {redone}",
                        path.display()
                    )),
                );
            }
            Ok(None) | Err(_) => {}
        }
        match serde_json::from_str::<State>(&text) {
            Ok(state) => (state, None),
            Err(err) => (
                fresh,
                Some(format!("{} is corrupt ({err}): {redone}", path.display())),
            ),
        }
    }

    pub fn save(&self, layout: &Layout) -> Result<()> {
        write_atomically(
            &layout.state(),
            serde_json::to_string_pretty(self)?.as_bytes(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #![proptest_config(crate::util::fuzz::config())]

        /// Any state.json: its step records, or none and what was wrong; never a panic.
        #[test]
        fn any_state_file_loads_or_is_named_without_a_panic_or_hang(
            bytes in crate::util::fuzz::seed_mutants("state.json")
        ) {
            crate::util::fuzz::no_panic_or_hang(move || {
                let dir = tempfile::tempdir().unwrap();
                let layout = Layout::at(dir.path().to_path_buf());
                std::fs::write(layout.state(), &bytes).unwrap();
                State::load(&layout).0.steps.len()
            });
        }
    }

    /// A state.json as pgo-build has written it (the seed) reads with its steps as steps; a
    /// step this pgo-build does not know makes the file unreadable, said, and every step runs
    /// again rather than trusting part of it.
    #[test]
    fn a_written_state_reads_by_step_and_an_unknown_step_is_said() {
        let seed = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/seeds/state.json"),
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::at(dir.path().to_path_buf());
        std::fs::write(layout.state(), &seed).unwrap();
        let (state, problem) = State::load(&layout);
        assert_eq!(problem, None);
        assert!(state.steps.contains_key(&Step::Build), "{:?}", state.steps);
        let unknown = seed.replacen("\"build\"", "\"prebuild\"", 1);
        std::fs::write(layout.state(), unknown).unwrap();
        let (state, problem) = State::load(&layout);
        assert!(state.steps.is_empty());
        assert!(problem.is_some_and(|p| p.contains("every step")));
    }
}
