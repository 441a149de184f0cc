//! What a stage left in `<stage>/bin/` ([`StageManifest`], `<stage>/stage.json`): the staged
//! binaries (real files, copied through a temporary name), their sizes and build ids read
//! from the ELF, the settings and sources they were built from, and the builds upstream.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::settings::{BuildSettings, CONTINUOUS_FLAGS};
use crate::cargo::workspace::BinTarget;
use crate::layout::{Layout, Stage};
use crate::util::files::{sha256_hex, sha256_of, write_atomically};

/// What a stage left in `<stage>/bin/`, recorded in `<stage>/stage.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StageManifest {
    pub stage: Stage,
    pub settings: BuildSettings,
    pub stage_rustflags: Vec<String>,
    pub binaries: Vec<StagedBinary>,
    /// New for every completed build of the stage: later stages record the id of the build
    /// they were made from (`upstream`), so a consumer can tell an output older than its input.
    #[serde(default)]
    pub id: String,
    /// Fingerprint of the source files the binaries were built from (cargo's dep-info), so
    /// variants built from different sources are never compared. `None` where unknown.
    #[serde(default)]
    pub sources: Option<String>,
    /// Stage → id of that stage's build this one was made from.
    #[serde(default)]
    pub upstream: BTreeMap<Stage, String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StagedBinary {
    pub name: String,
    pub package: String,
    pub path: PathBuf,
    /// The file it was copied from (for cargo stages, the executable whose `.d` dep-info
    /// lists its sources).
    #[serde(default)]
    pub source: PathBuf,
    pub size_bytes: u64,
    /// Without debug info and symbols (see [`loaded_size`]); absent in older records.
    #[serde(default)]
    pub loaded_bytes: Option<u64>,
    /// Its loaded part compressed with zstd -9 (see [`compressed_size`]): about what a release
    /// archive of the stripped binary takes. Absent in older records.
    #[serde(default)]
    pub compressed_bytes: Option<u64>,
    pub build_id: Option<String>,
    /// Built with `-Cprofile-use` (optimized stage only).
    pub pgo: bool,
    /// Post-processed by BOLT with a profile (bolt stage only).
    #[serde(default)]
    pub bolted: bool,
    /// Its SHA-256 when staged: a binary replaced by one of the same size is caught too.
    /// Absent in older records (the size alone is checked then).
    #[serde(default)]
    pub sha256: Option<String>,
}

impl StagedBinary {
    /// How the file in `bin/` differs from what was staged there, if it does.
    pub fn changed(&self) -> Option<String> {
        let Ok(meta) = std::fs::metadata(&self.path) else {
            return Some("it is gone".to_owned());
        };
        if !meta.is_file() {
            return Some("it is not a file".to_owned());
        }
        if meta.len() != self.size_bytes {
            return Some(format!(
                "{} bytes were staged, it has {} now",
                self.size_bytes,
                meta.len()
            ));
        }
        match &self.sha256 {
            Some(staged) if sha256_of(&self.path).ok().as_ref() != Some(staged) => {
                Some("the same size as what was staged, but other content".to_owned())
            }
            _ => None,
        }
    }
}

/// What to stage: the binary, the file to copy, and how it was made.
#[derive(Debug, Clone)]
pub struct StageInput {
    pub bin: BinTarget,
    pub source: PathBuf,
    pub pgo: bool,
    pub bolted: bool,
}

impl StageManifest {
    /// The id of the build staged now for a compared variant (`baseline`, `optimized`, …):
    /// what a comparison's recorded builds are checked against (`CompareResult::rebuilt_note`).
    pub fn current_build(layout: &Layout, variant: &str) -> Option<String> {
        let stage = Stage::from_variant(variant)?;
        StageManifest::load(layout, stage, "")
            .ok()
            .map(|manifest| manifest.id)
    }

    /// The stage's record of its last completed build. After an attempt that failed or was
    /// interrupted there is none, and the error says so.
    pub fn load(layout: &Layout, stage: Stage, hint: &str) -> Result<StageManifest> {
        let path = layout.stage_manifest(stage);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(_) => match std::fs::read_to_string(layout.stage_attempt(stage)) {
                Ok(attempt) => bail!(
                    "the {} stage did not complete: its last attempt ({}, {}) failed or was \
                     interrupted, so its binaries in {} are not used; {hint}",
                    stage.name(),
                    attempt.trim(),
                    crate::util::files::age(&layout.stage_attempt(stage)),
                    layout.bin_dir(stage).display()
                ),
                Err(_) => bail!(
                    "the {} stage has not been built ({} is missing); {hint}",
                    stage.name(),
                    path.display()
                ),
            },
        };
        serde_json::from_str(&text)
            .with_context(|| format!("{} is corrupt; {hint}", path.display()))
    }

    /// Called before a stage's outputs start to change: its old record no longer holds, and
    /// until [`StageManifest::save`] the stage counts as attempted, not complete.
    pub fn begin(layout: &Layout, stage: Stage, command: &str) -> Result<()> {
        let path = layout.stage_manifest(stage);
        if path.exists() {
            std::fs::remove_file(&path)
                .with_context(|| format!("could not remove {}", path.display()))?;
        }
        write_atomically(
            &layout.stage_attempt(stage),
            format!("`pgo-build {command}`").as_bytes(),
        )
    }

    /// A new id for a build completed now.
    pub fn new_id() -> String {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!("{nanos:x}-{}", std::process::id())
    }

    pub fn save(&self, layout: &Layout, stage: Stage) -> Result<()> {
        let path = layout.stage_manifest(stage);
        write_atomically(&path, serde_json::to_string_pretty(self)?.as_bytes())?;
        let attempt = layout.stage_attempt(stage);
        if attempt.exists() {
            std::fs::remove_file(&attempt)
                .with_context(|| format!("could not remove {}", attempt.display()))?;
        }
        Ok(())
    }

    /// Whether an instrumented stage was built in continuous mode.
    pub fn continuous(&self) -> bool {
        self.stage_rustflags
            .iter()
            .any(|flag| flag == CONTINUOUS_FLAGS[0])
    }

    /// Whether every staged binary is still there, as recorded.
    pub fn intact(&self) -> bool {
        self.binaries.iter().all(|b| b.changed().is_none())
    }

    /// Refuses a stage whose staged binaries were removed or replaced after staging: every
    /// consumer of staged binaries (compare, explore, bolt, pack, `run`'s cache) checks this
    /// first, since workloads and tools take whatever is in `bin/`. `variant` names the stage
    /// in the message, `rebuild` the command that stages it again.
    pub fn check_staged(&self, variant: &str, rebuild: &str) -> Result<()> {
        for binary in &self.binaries {
            if let Some(how) = binary.changed() {
                bail!(
                    "{} is not the binary the {} stage staged ({how}): it was removed or \
                     replaced since, so the {variant} variant is not what its record says. \
                     Rebuild it with `pgo-build {rebuild}`.",
                    binary.path.display(),
                    self.stage
                );
            }
        }
        Ok(())
    }

    /// Refuses a stage whose binaries were built from other sources than the workspace holds
    /// now (a source edited, a branch switched since): what is made from it (a pack, an
    /// exported profile) would record today's sources as the ones it was built from. `what`
    /// is what is refused, `fix` how to rebuild. Unknown sources (no dep-info left, another
    /// machine's paths) are not refused.
    pub fn check_sources_current(
        &self,
        workspace_root: &Path,
        generated: &[&Path],
        what: &str,
        fix: &str,
    ) -> Result<()> {
        let Some(recorded) = &self.sources else {
            return Ok(());
        };
        let executables: Vec<&Path> = self.binaries.iter().map(|b| b.source.as_path()).collect();
        let now = super::dep_info::sources_fingerprint(
            &executables,
            &workspace_root.join("Cargo.lock"),
            generated,
            workspace_root,
        );
        match now {
            Some(now) if &now != recorded => bail!(
                "{what}: the workspace's sources changed since the {} stage was built from them \
                 (a file edited, a branch switched), so it would record today's sources as the \
                 ones its binaries were built from. {fix}",
                self.stage
            ),
            _ => Ok(()),
        }
    }

    pub fn binary(&self, name: &str) -> Option<&StagedBinary> {
        self.binaries.iter().find(|b| b.name == name)
    }
}

/// Copies `executable` into `bin_dir` as a real file (never a symlink: programs that find
/// siblings through `current_exe()` would otherwise run another stage's binaries).
pub fn stage_binary(input: &StageInput, bin_dir: &Path) -> Result<StagedBinary> {
    let (bin, executable) = (&input.bin, &input.source);
    std::fs::create_dir_all(bin_dir)
        .with_context(|| format!("could not create {}", bin_dir.display()))?;
    let staged = bin_dir.join(&bin.name);
    let partial = bin_dir.join(format!(".{}.partial", bin.name));
    std::fs::copy(executable, &partial).with_context(|| {
        format!(
            "could not copy {} to {}",
            executable.display(),
            partial.display()
        )
    })?;
    std::fs::rename(&partial, &staged)
        .with_context(|| format!("could not move {} into place", staged.display()))?;
    let data = crate::util::files::read(&staged)?;
    Ok(StagedBinary {
        name: bin.name.clone(),
        package: bin.package.clone(),
        size_bytes: data.len() as u64,
        loaded_bytes: loaded_size(&data).ok(),
        compressed_bytes: compressed_size(&data).ok(),
        build_id: build_id(&data)
            .with_context(|| format!("could not read {} as an executable", staged.display()))?,
        path: staged,
        source: input.source.clone(),
        pgo: input.pgo,
        bolted: input.bolted,
        sha256: Some(sha256_hex(&data)),
    })
}

/// The size of an ELF executable without its sections that are not loaded (debug info, symbol
/// and string tables), which is about what `strip` leaves and a stripped release ships.
/// Comparable across stages where file sizes are not (BOLT drops debug info); padding that
/// aligns loaded code (BOLT's huge pages) counts, as it does on disk.
pub fn loaded_size(data: &[u8]) -> Result<u64> {
    use object::{Object, ObjectSection, SectionFlags, SectionKind};
    let file = object::File::parse(data)?;
    let unloaded: u64 = file
        .sections()
        .filter(|section| {
            matches!(section.flags(), SectionFlags::Elf { sh_flags }
                if sh_flags & u64::from(object::elf::SHF_ALLOC) == 0)
                && section.kind() != SectionKind::UninitializedData
        })
        .filter_map(|section| section.file_range().map(|(_, size)| size))
        .sum();
    Ok((data.len() as u64).saturating_sub(unloaded))
}

/// The size of an ELF executable's loaded sections (what [`loaded_size`] counts) compressed
/// with zstd at level 9, about what a release archive takes: function order changes it
/// (`[pgo] startup_order = "balanced-compression"` aims at it) where the file size does not
/// move. Level 9, not 19: within 10% of its size on ripgrep at a fourteenth of the time
/// (0.2 s against 2.9 s for 4.8 MB), and this runs for every staged binary.
pub fn compressed_size(data: &[u8]) -> Result<u64> {
    use object::{Object, ObjectSection, SectionFlags};
    let file = object::File::parse(data)?;
    let mut loaded = Vec::new();
    for section in file.sections() {
        let allocated = matches!(section.flags(), SectionFlags::Elf { sh_flags }
            if sh_flags & u64::from(object::elf::SHF_ALLOC) != 0);
        if allocated && let Some((offset, size)) = section.file_range() {
            let end = offset
                .checked_add(size)
                .context("a section lies outside the file")?;
            let range = offset as usize..end as usize;
            loaded.extend_from_slice(data.get(range).context("a section lies outside the file")?);
        }
    }
    Ok(zstd::bulk::compress(&loaded, 9)?.len() as u64)
}

/// The GNU build id of an ELF executable, as lowercase hex.
pub fn build_id(data: &[u8]) -> Result<Option<String>> {
    use object::Object;
    let file = object::File::parse(data)?;
    Ok(file
        .build_id()?
        .map(|id| id.iter().map(|byte| format!("{byte:02x}")).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #![proptest_config(crate::util::fuzz::config())]

        /// Any stage.json: the stage's record, or an error that names the file; never a
        /// panic or a hang.
        #[test]
        fn any_stage_manifest_loads_or_is_named_without_a_panic_or_hang(
            bytes in crate::util::fuzz::seed_mutants("stage.json")
        ) {
            crate::util::fuzz::no_panic_or_hang(move || {
                let dir = tempfile::tempdir().unwrap();
                let layout = Layout::at(dir.path().to_path_buf());
                let path = layout.stage_manifest(Stage::Optimized);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, &bytes).unwrap();
                StageManifest::load(&layout, Stage::Optimized, "run again").is_ok()
            });
        }
    }
}
