//! Resumability: the fingerprint of every completed stage (`target/pgo-build/state.json`).
//! (The lock that keeps two pgo-build runs out of one `target/pgo-build/` is `layout::lock`.)
//!
//! A stage's fingerprint covers its inputs - settings and flags, the selected binaries, the
//! workspace manifests and Cargo.lock, the source files cargo's dep-info lists for each binary,
//! the upstream stage's outputs (its stage.json), workloads, profiles - as paths with size and
//! modification time, like cargo's own freshness check. A stage is recorded only after it
//! completed, and outputs are written to temporary names and renamed, so an interrupted run
//! leaves nothing that looks complete: the next `run` resumes at the first stage that is not.

use std::collections::BTreeMap;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::layout::Layout;
use crate::report::StepRecord;
use crate::util::files::write_atomically;

/// The version of `state.json`'s layout; a file of another is named and not used.
const STATE_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct State {
    pub schema_version: u32,
    /// Step name → fingerprint of the inputs it completed with (`stages` in the file, as
    /// written before the word "step").
    #[serde(rename = "stages")]
    pub steps: BTreeMap<String, String>,
    /// Step name → its last completed run (duration, peak memory, when), shown for the runs
    /// that reuse it.
    #[serde(default)]
    pub runs: BTreeMap<String, StepRecord>,
    /// Step name → each part of its fingerprint (what a changed step is said to have changed
    /// in: "the sources", "the train workloads"). Absent in files written before.
    #[serde(default)]
    pub parts: BTreeMap<String, BTreeMap<String, String>>,
}

impl State {
    /// The stage records, or none; with what was wrong with an unreadable file or one of
    /// another schema version (the stages then run again rather than being trusted).
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
        let redone = "every stage of `pgo-build run` runs again (its outputs are checked, not \
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
                        "{} has stage records of schema version {other} (another pgo-build's; \
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

        /// Any state.json: its stage records, or none and what was wrong; never a panic.
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
}
