//! Whether a comparison's verdicts are still about the binaries staged now: a comparison
//! records the stage builds it measured (`CompareResult::builds`), and `report` says "Out of
//! date" above verdicts whose builds were rebuilt or removed since.

use super::CompareResult;

impl CompareResult {
    /// What to say above this comparison's verdicts when a stage build it measured is not the
    /// one staged now (`current_build` gives a stage's build id now, `None` when the stage is
    /// gone); `None` when every one still is, or the comparison recorded none (older reports).
    pub fn rebuilt_note(&self, current_build: impl Fn(&str) -> Option<String>) -> Option<String> {
        let mut rebuilt = Vec::new();
        let mut removed = false;
        for (variant, id) in &self.builds {
            match current_build(variant) {
                Some(now) if now == *id => {}
                now => {
                    removed |= now.is_none();
                    rebuilt.push(variant.as_str());
                }
            }
        }
        let builds = match rebuilt.as_slice() {
            [] => return None,
            [one] => format!("the {one} build was"),
            [rest @ .., last] => format!("the {} and {last} builds were", rest.join(", ")),
        };
        Some(format!(
            "Out of date: {builds} rebuilt (or removed) since this comparison, so its verdicts \
             are about binaries that are no longer staged. {}",
            if removed {
                "`pgo-build run` builds what is missing and measures again."
            } else {
                "`pgo-build compare` measures the ones there now."
            }
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_on_rebuilt_or_removed_builds_says_so() {
        let mut compare: CompareResult = serde_json::from_value(serde_json::json!({
            "metric": "wall", "rounds": 10, "seed": 1, "reference": "baseline",
            "candidates": ["optimized", "bolt"], "workloads": [], "geometric_mean": {}
        }))
        .unwrap();
        compare.builds = [("baseline", "b1"), ("optimized", "o1"), ("bolt", "t1")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into();
        let now = |ids: [Option<&'static str>; 3]| {
            move |variant: &str| {
                let at = ["baseline", "optimized", "bolt"]
                    .iter()
                    .position(|v| *v == variant)?;
                ids[at].map(str::to_owned)
            }
        };
        assert_eq!(
            compare.rebuilt_note(now([Some("b1"), Some("o1"), Some("t1")])),
            None
        );
        let note = compare
            .rebuilt_note(now([Some("b2"), Some("o2"), Some("t1")]))
            .unwrap();
        assert!(
            note.starts_with("Out of date: the baseline and optimized builds were"),
            "{note}"
        );
        assert!(
            note.ends_with("`pgo-build compare` measures the ones there now."),
            "{note}"
        );
        let note = compare
            .rebuilt_note(now([Some("b1"), Some("o1"), None]))
            .unwrap();
        assert!(
            note.starts_with("Out of date: the bolt build was"),
            "{note}"
        );
        assert!(
            note.contains("`pgo-build run` builds what is missing"),
            "{note}"
        );
        // An older report recorded no builds: nothing can be said, and nothing is.
        compare.builds.clear();
        assert_eq!(compare.rebuilt_note(now([None, None, None])), None);
    }
}
