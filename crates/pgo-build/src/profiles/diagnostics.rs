//! rustc's profile-use diagnostics, read from cargo's JSON stream and summarised per crate.
//!
//! LLVM reports profile problems as warnings, and rustc builds on regardless: an empty profile
//! ("Not an IR level instrumentation profile") silently gives a build without PGO, a changed
//! function ("hash mismatch") or a missing one gets no data. pgo-build turns the first into an
//! error and the others into a per-crate summary.

use crate::cargo::build::Diagnostic;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The profile file is empty or not an instrumentation profile: no PGO at all.
    NotIrProfile,
    /// The function changed since the profile was recorded; its data is discarded.
    HashMismatch,
    /// No data for the function (never run in training, or renamed).
    MissingFunction,
    /// The profile's value sites (indirect calls, memcpy sizes) do not match the function's:
    /// its value profile data is discarded.
    InconsistentValueSites,
}

pub fn classify(message: &str) -> Option<Kind> {
    if message.contains("Not an IR level instrumentation profile") {
        Some(Kind::NotIrProfile)
    } else if message.contains("function control flow change detected (hash mismatch)") {
        Some(Kind::HashMismatch)
    } else if message.contains("no profile data available for function") {
        Some(Kind::MissingFunction)
    } else if message.contains("Inconsistent number of value sites") {
        Some(Kind::InconsistentValueSites)
    } else {
        None
    }
}

/// Crates whose code differs between the instrumented and the optimized build by design, so
/// their changed functions are expected: pgo-build-rt compiles its signal handling into
/// instrumented builds only (`--cfg pgo_build_instrument`).
const EXPECTED_TO_DIFFER: [&str; 1] = ["pgo_build_rt"];

/// Whether a crate (a cargo target name) is one whose code differs between builds by design.
pub fn expected_to_differ(target: &str) -> bool {
    EXPECTED_TO_DIFFER.contains(&target.replace('-', "_").as_str())
}

pub use crate::report::CrateCounts;
/// What rustc said of the profile, per crate: the report's record.
pub use crate::report::DiagnosticsSummary as Summary;

impl Summary {
    pub fn from_diagnostics(diagnostics: &[Diagnostic]) -> Summary {
        let mut summary = Summary::default();
        for diagnostic in diagnostics {
            let krate = diagnostic.target.replace('-', "_");
            if expected_to_differ(&diagnostic.target)
                && matches!(
                    classify(&diagnostic.message),
                    Some(Kind::HashMismatch | Kind::MissingFunction)
                )
            {
                *summary.expected.entry(krate).or_default() += 1;
                continue;
            }
            match classify(&diagnostic.message) {
                Some(Kind::NotIrProfile) => summary
                    .unusable_profile
                    .push(format!("{}: {}", diagnostic.target, diagnostic.message)),
                Some(Kind::HashMismatch) => {
                    summary.entry(&diagnostic.target).mismatched_functions += 1;
                }
                Some(Kind::MissingFunction) => {
                    summary.entry(&diagnostic.target).missing_functions += 1;
                }
                Some(Kind::InconsistentValueSites) => {
                    summary.entry(&diagnostic.target).inconsistent_value_sites += 1;
                }
                None => {}
            }
        }
        summary
    }

    fn entry(&mut self, target: &str) -> &mut CrateCounts {
        self.per_crate.entry(target.to_owned()).or_default()
    }

    pub fn total_mismatched(&self) -> usize {
        self.per_crate
            .values()
            .map(|c| c.mismatched_functions)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diagnostic(target: &str, message: &str) -> Diagnostic {
        Diagnostic {
            target: target.into(),
            level: "warning".into(),
            message: message.into(),
            rendered: String::new(),
        }
    }

    #[test]
    fn stale_value_sites_are_counted_not_passed_through() {
        // As LLVM 22 words it.
        let message = "replica.5-cgu.0: Inconsistent number of value sites for indirect call target profiling in \"_ZN3std3sys9backtrace28__rust_begin_short_backtrace17h9E\", possibly due to the use of a stale profile.";
        assert_eq!(classify(message), Some(Kind::InconsistentValueSites));
        let summary = Summary::from_diagnostics(&[diagnostic("replica", message)]);
        assert_eq!(summary.per_crate["replica"].inconsistent_value_sites, 1);
    }

    #[test]
    fn expected_differences_are_left_out_of_the_counts() {
        let diagnostics = [
            diagnostic(
                "pgo_build_rt",
                "pgo_build_rt.1-cgu.0: function control flow change detected (hash mismatch) _ZN12pgo_build_rt7install17h1E Hash = 1 up to 3 count discarded",
            ),
            diagnostic(
                "app",
                "app.1-cgu.0: function control flow change detected (hash mismatch) _ZN3app4main17h1E Hash = 1 up to 3 count discarded",
            ),
        ];
        let summary = Summary::from_diagnostics(&diagnostics);
        assert_eq!(summary.total_mismatched(), 1);
        assert!(!summary.per_crate.contains_key("pgo_build_rt"));
        assert_eq!(summary.expected["pgo_build_rt"], 1);
    }

    #[test]
    fn rustc_messages_are_classified_per_crate() {
        // Texts as rustc 1.95 / LLVM 22 prints them.
        let diagnostics = [
            diagnostic(
                "app",
                "app.d972b1fd5999a2a6-cgu.0: function control flow change detected (hash mismatch) _ZN3app4main17hb46fc80ea484d930E Hash = 449664061898904596 up to 326 count discarded",
            ),
            diagnostic(
                "app",
                "app.d972b1fd5999a2a6-cgu.0: no profile data available for function _ZN3app5fresh17h2b1d7500d62bb73fE Hash = 382993475055910911 up to 0 count discarded",
            ),
            diagnostic(
                "lib",
                "lib.aa-cgu.0: no profile data available for function _ZN3lib1f17h00E Hash = 1 up to 0 count discarded",
            ),
            diagnostic("app", "unused variable: `x`"),
        ];
        let summary = Summary::from_diagnostics(&diagnostics);
        assert_eq!(summary.per_crate["app"].mismatched_functions, 1);
        assert_eq!(summary.per_crate["app"].missing_functions, 1);
        assert_eq!(summary.per_crate["lib"].missing_functions, 1);
        assert!(summary.unusable_profile.is_empty());
        assert_eq!(summary.total_mismatched(), 1);
    }

    #[test]
    fn empty_profile_is_recognised() {
        let summary = Summary::from_diagnostics(&[diagnostic(
            "app",
            "/t/merged-00.profdata: Not an IR level instrumentation profile",
        )]);
        assert_eq!(summary.unusable_profile.len(), 1);
    }
}
