//! The record of training merged from other machines' bundles (`profiles/bundles.json`):
//! written by `merge`, read by `optimize` and `profile`, forgotten by a local `train`,
//! `instrument` or `unpack`.

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};

use super::context::Context;
use crate::cargo::manifest::StageManifest;
use crate::report::MergedBundles;

/// `profiles/bundles.json`: what `merge` made (the report keeps it too), with the instrumented
/// build every bundle trained, read by `optimize`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BundlesFile {
    /// The instrumented build every bundle trained.
    pub instrumented: StageManifest,
    #[serde(flatten)]
    pub merge: MergedBundles,
}

/// The record is read through the file: `file.bundles` is `file.merge.bundles`.
impl std::ops::Deref for BundlesFile {
    type Target = MergedBundles;

    fn deref(&self) -> &MergedBundles {
        &self.merge
    }
}

/// The last `merge`'s record, when it is the current training.
pub(super) fn merged_bundles(cx: &Context) -> Result<Option<BundlesFile>> {
    let path = cx.layout.merged_bundles();
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(None);
    };
    let record: BundlesFile = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is unreadable; run `pgo-build merge` again",
            path.display()
        )
    })?;
    Ok(Some(record))
}
