//! What both pages of the report write alike: verdict words and escaped text.

use crate::measure::stats::Verdict;

/// A verdict as the pages write it.
pub(super) fn verdict_label(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Faster => "faster",
        Verdict::Slower => "slower",
        Verdict::NoDifference => "no difference",
        Verdict::Inconclusive => "inconclusive",
        Verdict::TooFewRounds => "too few rounds",
        Verdict::TooCoarse => "too coarse to judge",
    }
}

/// Text made safe inside XHTML elements and attributes.
pub(super) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
