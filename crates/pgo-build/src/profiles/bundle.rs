//! The files that carry training between machines (CI matrix jobs): a *pack* holds a staged
//! stage (the instrumented binaries and their `stage.json`), a *bundle* one training shard's
//! per-binary profiles and accounting. Both are zstd-compressed tar archives whose first
//! member is `manifest.json`; `docs/bundles.md` documents the formats.
//!
//! Each manifest says what made it (pgo-build, rustc, LLVM, target, git revision, the
//! workspace's path-sensitive dependencies), so `unpack` and `merge` can refuse an archive
//! that would silently give a worse build, naming the field that differs.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::accounting::BinaryProfiles;
use crate::cargo::manifest::StageManifest;
use crate::cargo::settings::BuildSettings;
pub use crate::report::{BundleWorkload, Shard, Weights};

pub const PACK_FORMAT: &str = "pgo-build-pack";
pub const BUNDLE_FORMAT: &str = "pgo-build-bundle";
/// Bumped when a field changes meaning or a required one is added; readers refuse newer
/// versions and read older ones.
pub const FORMAT_VERSION: u32 = 1;
const MANIFEST: &str = "manifest.json";

/// What made an archive, in both formats.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Provenance {
    pub pgo_build_version: String,
    /// `rustc --version` of the build.
    pub rustc: String,
    pub llvm_version: String,
    pub target: String,
    /// `git rev-parse HEAD` of the workspace, when it is a git checkout.
    pub git_revision: Option<String>,
    /// Where the workspace was checked out on the machine that made the archive.
    pub workspace_root: PathBuf,
    /// Path dependencies outside the workspace root: cargo hashes their absolute paths into
    /// symbol names (see `Workspace::outside_path_dependencies`).
    pub outside_path_dependencies: BTreeMap<String, PathBuf>,
    /// UTC, `2026-12-01 10:00:00 UTC`.
    pub created: String,
}

/// `manifest.json` of a pack: `bin/<name>` holds each binary of `stage`, and
/// `upstream/bin/<name>` each binary of `upstream`, the stage it was made from (a bolt
/// stage's optimized one: the gate needs both, and `unpack` restores both).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PackManifest {
    pub format: String,
    pub format_version: u32,
    #[serde(flatten)]
    pub provenance: Provenance,
    /// The stage's record as the packing machine wrote it (its paths are that machine's).
    pub stage: StageManifest,
    /// The workspace's source files the binaries were built from (dep-info), by path
    /// relative to the workspace root, with their SHA-256: what `unpack` compares when git
    /// cannot say whether a checkout has the same sources. Absent in older packs.
    #[serde(default)]
    pub sources: BTreeMap<String, String>,
    /// The stage `stage` was made from, for a stage that is not a cargo build (bolt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<StageManifest>,
}

/// The workspace's own source files `executables` were built from (their dep-info), by path
/// relative to `root`, with their content's SHA-256. Files outside the root (registry crates)
/// and under `generated` are left out, and so is Cargo.lock, which a checkout that has not
/// built yet may not have.
pub fn workspace_sources(
    executables: &[&Path],
    root: &Path,
    generated: &[&Path],
) -> BTreeMap<String, String> {
    executables
        .iter()
        .filter_map(|exe| crate::cargo::dep_info::dep_info_sources(exe))
        .flatten()
        .filter(|source| !generated.iter().any(|dir| source.starts_with(dir)))
        .filter_map(|source| {
            let relative = source
                .strip_prefix(root)
                .ok()?
                .to_string_lossy()
                .into_owned();
            Some((relative, crate::util::files::sha256_of(&source).ok()?))
        })
        .collect()
}

/// The recorded sources that differ in the checkout at `root` (changed or missing).
pub fn changed_sources(sources: &BTreeMap<String, String>, root: &Path) -> Vec<String> {
    sources
        .iter()
        .filter(|(file, hash)| {
            crate::util::files::sha256_of(&root.join(file))
                .ok()
                .as_ref()
                != Some(*hash)
        })
        .map(|(file, _)| file.clone())
        .collect()
}

/// `manifest.json` of a bundle: `profiles/<binary>.profdata` holds each binary's profile.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BundleManifest {
    pub format: String,
    pub format_version: u32,
    #[serde(flatten)]
    pub provenance: Provenance,
    /// [`settings_fingerprint`] of the instrumented build's settings.
    pub settings_fingerprint: String,
    /// The instrumented stage the shard trained (settings, build ids, id).
    pub instrumented: StageManifest,
    pub shard: Shard,
    pub workloads: Vec<BundleWorkload>,
    /// The shard's per-binary accounting (processes, profiles, coverage).
    pub accounting: BTreeMap<String, BinaryProfiles>,
    pub profiles: Vec<BundleProfile>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BundleProfile {
    /// The binary whose processes wrote it, or `None` for a cargo workload's profile.
    pub binary: Option<String>,
    /// The cargo workload run whose own bench/test binaries wrote it.
    #[serde(default)]
    pub cargo_workload: Option<String>,
    /// Member name: `profiles/<binary>.profdata`, or `profiles/cargo-<run>.profdata`.
    pub file: String,
    /// Sum of all counters ("Total count" of `llvm-profdata show --detailed-summary`).
    pub total_count: u64,
    pub functions: u64,
    pub size_bytes: u64,
}

/// What must be equal for profiles to be merged and used: the instrumented build's settings
/// (cargo profile, features, target, rustc, rustflags, profile tables).
pub fn settings_fingerprint(settings: &BuildSettings) -> String {
    super::profdata_merge::content_hash(&serde_json::to_vec(settings).unwrap_or_default())
}

/// Writes `manifest` and `files` (member name, file) to `path`, through a temporary name.
pub fn write(path: &Path, manifest: &impl Serialize, files: &[(String, PathBuf)]) -> Result<()> {
    // Found before anything is written: the rename at the end would fail after the work.
    if path.is_dir() {
        anyhow::bail!(
            "could not write {}: it is a directory; name a file (e.g. {})",
            path.display(),
            path.join("stage.tar.zst").display()
        );
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("could not create {}", dir.display()))?;
    }
    let partial = PathBuf::from(format!("{}.partial", path.display()));
    let written = (|| -> Result<()> {
        let file = File::create(&partial)?;
        let encoder = zstd::Encoder::new(file, 3)?;
        let mut archive = tar::Builder::new(encoder);
        let json = serde_json::to_vec_pretty(manifest)?;
        append(&mut archive, MANIFEST, &json, 0o644)?;
        for (name, source) in files {
            archive
                .append_path_with_name(source, name)
                .with_context(|| format!("could not add {}", source.display()))?;
        }
        archive.into_inner()?.finish()?.sync_all()?;
        Ok(())
    })();
    if let Err(err) = written {
        let _ = std::fs::remove_file(&partial);
        return Err(err.context(format!("could not write {}", path.display())));
    }
    if let Err(err) = std::fs::rename(&partial, path) {
        // Nothing half-made stays behind.
        let _ = std::fs::remove_file(&partial);
        return Err(err).with_context(|| format!("could not write {}", path.display()));
    }
    Ok(())
}

fn append<W: std::io::Write>(
    archive: &mut tar::Builder<W>,
    name: &str,
    data: &[u8],
    mode: u32,
) -> Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(data.len() as u64);
    header.set_mode(mode);
    header.set_mtime(0);
    header.set_cksum();
    archive.append_data(&mut header, name, data)?;
    Ok(())
}

fn open(path: &Path) -> Result<tar::Archive<zstd::Decoder<'static, std::io::BufReader<File>>>> {
    let file = File::open(path).with_context(|| format!("could not open {}", path.display()))?;
    let decoder =
        zstd::Decoder::new(file).with_context(|| format!("could not read {}", path.display()))?;
    Ok(tar::Archive::new(decoder))
}

/// Reads the manifest of an archive of `format`, refusing other files, other formats and
/// newer format versions.
pub fn read_manifest<T: DeserializeOwned>(path: &Path, format: &str) -> Result<T> {
    let what = match format {
        PACK_FORMAT => "a pack written by `pgo-build pack`",
        _ => "a bundle written by `pgo-build train --bundle`",
    };
    let not_ours = || format!("{} is not {what}, or is damaged", path.display());
    let mut archive = open(path)?;
    let mut entries = archive.entries().with_context(not_ours)?;
    let mut first = entries
        .next()
        .with_context(not_ours)?
        .with_context(not_ours)?;
    if first.path().ok().as_deref() != Some(Path::new(MANIFEST)) {
        bail!("{}: its first member is not {MANIFEST}", not_ours());
    }
    let mut text = String::new();
    first.read_to_string(&mut text).with_context(not_ours)?;
    let value: serde_json::Value = serde_json::from_str(&text).with_context(not_ours)?;
    let found = value["format"].as_str().unwrap_or("none");
    if found != format {
        bail!("{} (its format is {found:?}, not {format:?})", not_ours());
    }
    let version = value["format_version"].as_u64().unwrap_or(0);
    if version > u64::from(FORMAT_VERSION) {
        bail!(
            "{} has format version {version}, written by a newer pgo-build ({}); this one \
             ({}) reads up to version {FORMAT_VERSION}. Use the same pgo-build in every job.",
            path.display(),
            value["pgo_build_version"].as_str().unwrap_or("unknown"),
            env!("CARGO_PKG_VERSION")
        );
    }
    serde_json::from_value(value)
        .with_context(|| format!("{}: unreadable manifest", path.display()))
}

/// Extracts every member but the manifest into `dir` (which is emptied first). Members that
/// would land outside `dir` are refused by the tar crate.
pub fn extract(path: &Path, dir: &Path) -> Result<()> {
    if dir.exists() {
        crate::util::files::remove_dir_all(dir)?;
    }
    crate::util::files::create_dir_all(dir)?;
    let extracted = (|| -> Result<()> {
        let mut archive = open(path)?;
        for entry in archive.entries()? {
            let mut entry = entry?;
            if entry.path()?.as_ref() == Path::new(MANIFEST) {
                continue;
            }
            if !entry.unpack_in(dir)? {
                bail!(
                    "a member outside its own directory ({}); refusing it",
                    entry.path()?.display()
                );
            }
        }
        Ok(())
    })();
    if let Err(err) = extracted {
        let _ = std::fs::remove_dir_all(dir);
        bail!(
            "{} is damaged or truncated ({:#}); copy it again from the job that wrote it",
            path.display(),
            err
        );
    }
    Ok(())
}

/// The provenance of an archive made here now.
pub fn provenance(
    rustc: &crate::toolchain::Rustc,
    target: &str,
    workspace: &crate::cargo::workspace::Workspace,
    printer: &crate::util::printer::Printer,
) -> Provenance {
    Provenance {
        pgo_build_version: env!("CARGO_PKG_VERSION").to_owned(),
        rustc: rustc.version_line.clone(),
        llvm_version: rustc.llvm_version.clone(),
        target: target.to_owned(),
        git_revision: git_revision(&workspace.root, printer),
        workspace_root: workspace.root.clone(),
        outside_path_dependencies: workspace.outside_path_dependencies.clone(),
        created: crate::util::printer::utc_text(std::time::SystemTime::now()),
    }
}

/// `git rev-parse HEAD`, with `-dirty-<hash of the diff>` when tracked files differ from it
/// (untracked files, such as a generated Cargo.lock or a downloaded pack, are not compared).
pub fn git_revision(root: &Path, printer: &crate::util::printer::Printer) -> Option<String> {
    let git = |args: &[&str]| {
        crate::util::command::Cmd::new("git")
            .args(args)
            .cwd(root)
            .stdout_checked(printer)
            .ok()
    };
    let head = git(&["rev-parse", "HEAD"])?.trim().to_owned();
    let diff = git(&["diff", "HEAD"]).unwrap_or_default();
    Some(if diff.is_empty() {
        head
    } else {
        let hash = super::profdata_merge::content_hash(diff.as_bytes());
        format!("{head}-dirty-{}", &hash[..8])
    })
}

/// Differences that make profiles of an archive unusable here, each naming the field, or
/// nothing. `what` names the archive in the messages.
pub fn differences(archive: &Provenance, here: &Provenance, what: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut field = |name: &str, theirs: &str, ours: &str| {
        if theirs != ours {
            found.push(format!("{name}: {what} has {theirs}, this machine {ours}"));
        }
    };
    field("rustc", &archive.rustc, &here.rustc);
    field("llvm_version", &archive.llvm_version, &here.llvm_version);
    field("target", &archive.target, &here.target);
    found
}

/// How an archive's git revision compares with this checkout's.
pub enum RevisionCheck {
    /// The same commit (or one side is not a git checkout).
    Same,
    /// The same commit with other uncommitted changes to tracked files: the archive's
    /// binaries or profiles may not match these sources.
    Changed(String),
    /// Another commit.
    Other(String),
}

/// The commits must match; uncommitted changes to tracked files on either side are worth a
/// warning only (files written beside the sources, the archives themselves, make a checkout
/// "dirty" without changing what was built).
pub fn compare_revisions(archive: &Provenance, here: &Provenance, what: &str) -> RevisionCheck {
    let (Some(theirs), Some(ours)) = (&archive.git_revision, &here.git_revision) else {
        return RevisionCheck::Same;
    };
    let commit = |revision: &str| {
        revision
            .split("-dirty")
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    if commit(theirs) != commit(ours) {
        RevisionCheck::Other(format!(
            "git revision: {what} was made at {theirs}, this checkout is at {ours}"
        ))
    } else if theirs != ours {
        RevisionCheck::Changed(format!(
            "{what} was made at {theirs}, this checkout is at {ours}: the same commit, with \
             different uncommitted changes to tracked files"
        ))
    } else {
        RevisionCheck::Same
    }
}

/// The outside-workspace path dependencies whose absolute path differs between an archive's
/// checkout and this one, as messages.
pub fn moved_path_dependencies(archive: &Provenance, here: &Provenance) -> Vec<String> {
    let mut moved = Vec::new();
    for (name, theirs) in &archive.outside_path_dependencies {
        match here.outside_path_dependencies.get(name) {
            Some(ours) if ours == theirs => {}
            Some(ours) => moved.push(format!(
                "`{name}` is at {} there and at {} here",
                theirs.display(),
                ours.display()
            )),
            None => {}
        }
    }
    moved
}

impl Shard {
    /// Everything, as one shard.
    pub const WHOLE: Shard = Shard { index: 1, count: 1 };

    /// The runs that belong to this shard: every `count`-th in configuration order, starting
    /// at `index`. Depends only on the configuration, so every job computes the same split.
    pub fn select<T>(self, runs: Vec<T>) -> Vec<T> {
        runs.into_iter()
            .enumerate()
            .filter(|(position, _)| position % self.count == self.index - 1)
            .map(|(_, run)| run)
            .collect()
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(text: &str) -> Result<Shard, String> {
        let parsed = text
            .split_once('/')
            .and_then(|(i, n)| Some((i.parse::<usize>().ok()?, n.parse::<usize>().ok()?)));
        match parsed {
            Some((index, count)) if index >= 1 && index <= count => Ok(Shard { index, count }),
            _ => Err(format!(
                "`{text}`: expected I/N with 1 <= I <= N, e.g. 1/4 for the first of four shards"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provenance(dependencies: &[(&str, &str)]) -> Provenance {
        Provenance {
            pgo_build_version: "0.1.0".into(),
            rustc: "rustc 1.95.0".into(),
            llvm_version: "22.1.2".into(),
            target: "x86_64-unknown-linux-gnu".into(),
            git_revision: None,
            workspace_root: "/a/ws".into(),
            outside_path_dependencies: dependencies
                .iter()
                .map(|(name, path)| (name.to_string(), PathBuf::from(path)))
                .collect(),
            created: String::new(),
        }
    }

    #[test]
    fn only_moved_outside_dependencies_and_toolchain_fields_are_differences() {
        let there = provenance(&[("shared", "/a/shared"), ("same", "/opt/same")]);
        let mut here = provenance(&[("shared", "/b/shared"), ("same", "/opt/same")]);
        here.workspace_root = "/b/ws".into();
        let moved = moved_path_dependencies(&there, &here);
        assert_eq!(moved.len(), 1);
        assert!(moved[0].contains("`shared` is at /a/shared there and at /b/shared here"));
        assert!(
            differences(&there, &here, "x").is_empty(),
            "the root may move"
        );
        here.llvm_version = "21.1.0".into();
        let found = differences(&there, &here, "the bundle");
        assert_eq!(
            found,
            ["llvm_version: the bundle has 22.1.2, this machine 21.1.0"]
        );
    }

    #[test]
    fn archives_round_trip_and_other_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let member = dir.path().join("member.bin");
        std::fs::write(&member, b"data").unwrap();
        let manifest = serde_json::json!({"format": PACK_FORMAT, "format_version": 1, "x": 7});
        let archive = dir.path().join("a.tar.zst");
        write(&archive, &manifest, &[("bin/app".into(), member)]).unwrap();
        let read: serde_json::Value = read_manifest(&archive, PACK_FORMAT).unwrap();
        assert_eq!(read["x"], 7);
        let err = read_manifest::<serde_json::Value>(&archive, BUNDLE_FORMAT).unwrap_err();
        assert!(format!("{err:#}").contains("is not a bundle"), "{err:#}");
        extract(&archive, &dir.path().join("out")).unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("out/bin/app")).unwrap(),
            b"data"
        );
        let newer = serde_json::json!({"format": PACK_FORMAT, "format_version": 99});
        write(&archive, &newer, &[]).unwrap();
        let err = read_manifest::<serde_json::Value>(&archive, PACK_FORMAT).unwrap_err();
        assert!(format!("{err:#}").contains("newer pgo-build"), "{err:#}");
    }

    #[test]
    fn shards_split_runs_round_robin_and_cover_each_run_once() {
        let runs: Vec<usize> = (0..7).collect();
        let shards: Vec<Vec<usize>> = (1..=3)
            .map(|index| Shard { index, count: 3 }.select(runs.clone()))
            .collect();
        assert_eq!(shards, [vec![0, 3, 6], vec![1, 4], vec![2, 5]]);
        assert_eq!(Shard::WHOLE.select(runs.clone()), runs);
        assert_eq!("2/4".parse::<Shard>(), Ok(Shard { index: 2, count: 4 }));
        for bad in ["0/2", "3/2", "1", "a/b", "1/0"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    /// An archive of `format` whose manifest member holds `manifest` as it is (any bytes).
    fn archive_with_manifest(path: &Path, manifest: &[u8]) {
        let file = File::create(path).unwrap();
        let encoder = zstd::Encoder::new(file, 1).unwrap().auto_finish();
        let mut builder = tar::Builder::new(encoder);
        let mut header = tar::Header::new_gnu();
        header.set_size(manifest.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder
            .append_data(&mut header, MANIFEST, manifest)
            .unwrap();
        let mut header = tar::Header::new_gnu();
        header.set_size(4);
        header.set_mode(0o644);
        header.set_cksum();
        builder
            .append_data(&mut header, "profiles/app.profdata", &b"data"[..])
            .unwrap();
        builder.finish().unwrap();
    }

    proptest::proptest! {
        #![proptest_config(crate::util::fuzz::config())]

        /// Bundles and packs whose manifest is garbled, and archives garbled as bytes: read
        /// and extracted, or refused; never a panic or a hang.
        #[test]
        fn any_bundle_or_pack_is_read_or_refused_without_a_panic_or_hang(
            bundle in crate::util::fuzz::seed_mutants("bundle-manifest.json"),
            pack in crate::util::fuzz::seed_mutants("pack-manifest.json"),
            archive_edit in crate::util::fuzz::mutants(b""),
        ) {
            crate::util::fuzz::no_panic_or_hang(move || {
                let dir = tempfile::tempdir().unwrap();
                let (bundle_path, pack_path) = (dir.path().join("b"), dir.path().join("p"));
                archive_with_manifest(&bundle_path, &bundle);
                archive_with_manifest(&pack_path, &pack);
                let bundle_read = read_manifest::<BundleManifest>(&bundle_path, BUNDLE_FORMAT);
                let pack_read = read_manifest::<PackManifest>(&pack_path, PACK_FORMAT);
                // The compressed archive itself, garbled: the edits applied at its end.
                let mut bytes = std::fs::read(&pack_path).unwrap();
                let keep = bytes.len().saturating_sub(archive_edit.len().min(bytes.len() / 2));
                bytes.truncate(keep);
                bytes.extend(&archive_edit);
                std::fs::write(&pack_path, &bytes).unwrap();
                let garbled = read_manifest::<PackManifest>(&pack_path, PACK_FORMAT).is_ok();
                let extracted = extract(&pack_path, &dir.path().join("out")).is_ok();
                (bundle_read.is_ok(), pack_read.is_ok(), garbled, extracted)
            });
        }
    }
}
