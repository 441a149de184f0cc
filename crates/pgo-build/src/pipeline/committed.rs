//! Committed profiles (`[pgo] profile`, written by `export`): the metadata beside them, the
//! checks before one is used (LLVM version, symbol names, rustc, target), the standard
//! library's crates renamed for a profile trained with another rustc, and staleness against
//! the current sources, read from the optimized build's diagnostics.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};

use super::context::Context;
use crate::cargo::build::Diagnostic;
use crate::cargo::settings::preinline_in;
use crate::profiles::carry::{TextProfile, crate_of_module};
use crate::profiles::diagnostics::{self, Kind};
use crate::profiles::insight::{self, FunctionCounts};
use crate::profiles::toolchain_names::{self, SysrootCrates, ToolchainRenames};
use crate::profiles::{self, PgoProfile};
use crate::util::command::Cmd;
use crate::wrappers::rustc::crate_carry::{CarryRecord, CarrySetup};
use crate::wrappers::rustc::stable_names;

/// The metadata `export` writes beside a profile (`<name>.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProfileMetadata {
    pub pgo_build_version: String,
    pub rustc: String,
    pub llvm_version: String,
    pub llvm_major: u32,
    pub target: String,
    pub cargo_profile: String,
    /// The rustflags the profile's instrumented build used (user flags + pgo-build's common ones).
    pub rustflags: Vec<String>,
    pub workloads: Vec<String>,
    /// `git rev-parse HEAD`, with `-dirty-<hash of the diff>` when tracked files had changes.
    pub source_revision: Option<String>,
    pub content_hash: String,
    pub functions: usize,
    /// Whether the profile's build had stable symbol names (`[pgo] stable_names`); false in
    /// metadata written before they existed.
    #[serde(default)]
    pub stable_names: bool,
    /// How its functions are named (`wrappers::rustc::stable_names::NAME_SCHEME`): 1 (absent
    /// in older metadata) rustc's legacy symbols, 2 v0 symbols that survive rustc upgrades.
    #[serde(default = "legacy_names")]
    pub name_scheme: u32,
    /// The standard library's crates of the toolchain it was trained with, by their v0
    /// disambiguators: what a build with another rustc renames (`profiles::toolchain_names`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sysroot_crates: SysrootCrates,
    /// The sources it was trained on, fingerprinted (for `profile check`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sources: Option<crate::cargo::source_fingerprints::SourceRecord>,
}

fn legacy_names() -> u32 {
    1
}

/// What this toolchain and target name the standard library's code by: its crates by their v0
/// disambiguators, and the name of drop glue.
pub(crate) struct SysrootNames {
    pub crates: SysrootCrates,
    pub drop_glue: Option<&'static str>,
}

/// The standard library's names of this toolchain and target: a probe crate compiled to LLVM
/// IR by the rustc cargo uses (from the workspace root, so a `rust-toolchain.toml` there
/// counts), its symbols read (see `profiles::toolchain_names`).
pub(crate) fn sysroot_names(cx: &Context) -> Result<SysrootNames> {
    let dir = cx
        .layout
        .profiles_dir()
        .join("scratch")
        .join("sysroot-probe");
    crate::util::files::create_dir_all(&dir)?;
    let source = dir.join("probe.rs");
    crate::util::files::write(&source, toolchain_names::PROBE_SOURCE.as_bytes())?;
    let output = dir.join("probe.ll");
    Cmd::new(&cx.rustc.program)
        .cwd(&cx.workspace.root)
        .args([
            "--crate-type=lib",
            "--crate-name=probe",
            "--edition=2021",
            "--emit=llvm-ir",
            "-Copt-level=0",
            stable_names::V0_MANGLING,
            "--target",
            &cx.settings.target,
            "-o",
        ])
        .arg(&output)
        .arg(&source)
        .stdout_checked(&cx.printer)
        .with_context(|| {
            format!(
                "rustc could not compile the probe that names the standard library's crates for \
                 {} (is its standard library installed? `rustup target add {}`)",
                cx.settings.target, cx.settings.target
            )
        })?;
    let text = crate::util::files::read_to_string(&output)?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(SysrootNames {
        crates: toolchain_names::sysroot_crates_in(toolchain_names::v0_symbols(&text)),
        drop_glue: toolchain_names::drop_glue_name_in(toolchain_names::v0_symbols(&text)),
    })
}

/// What to rename in a profile trained with another rustc (see `profiles::toolchain_names`):
/// the standard library's crates, and drop glue where this toolchain names it otherwise;
/// nothing for the same rustc, or for a profile that does not record its crates.
pub(crate) fn toolchain_renames(
    cx: &Context,
    metadata: Option<&ProfileMetadata>,
) -> Result<ToolchainRenames> {
    let Some(metadata) = metadata.filter(|m| {
        m.rustc != cx.rustc.version_line && m.name_scheme >= 2 && !m.sysroot_crates.is_empty()
    }) else {
        return Ok(ToolchainRenames::default());
    };
    match sysroot_names(cx) {
        Ok(now) => Ok(ToolchainRenames {
            crates: toolchain_names::renames(&metadata.sysroot_crates, &now.crates),
            drop_glue: now.drop_glue,
        }),
        Err(err) => {
            cx.printer.warn(format!(
                "{err:#}; the profile's records of the standard library's generics keep the \
                 names of the toolchain it was trained with, and find no function"
            ));
            Ok(ToolchainRenames::default())
        }
    }
}

fn scheme_name(scheme: u32) -> &'static str {
    match scheme {
        1 => {
            "rustc's legacy symbols (exported by an earlier pgo-build, or with legacy \
              mangling chosen in the rustflags)"
        }
        _ => "v0 symbols with the crate identities pinned",
    }
}

/// The metadata beside a committed profile; `None` when there is none.
pub(crate) fn read_metadata(profile: &Path) -> Result<Option<ProfileMetadata>> {
    let file = metadata_path(profile);
    let Ok(text) = std::fs::read_to_string(&file) else {
        return Ok(None);
    };
    if text.lines().any(|line| {
        ["<<<<<<<", "=======", ">>>>>>>"]
            .iter()
            .any(|marker| line.starts_with(marker))
    }) {
        bail!(
            "{} has merge-conflict markers: two exports were merged by hand, and neither side \
             describes the profile beside it for sure. Export the profile again (`pgo-build \
             export --output {}`) and commit both files together",
            file.display(),
            profile.display()
        );
    }
    serde_json::from_str(&text).map(Some).with_context(|| {
        format!(
            "{} is not the profile metadata `pgo-build export` writes (damaged or edited): \
             export the profile again and commit both files together",
            file.display()
        )
    })
}

pub fn metadata_path(profile: &Path) -> PathBuf {
    profile.with_extension("json")
}

pub use crate::report::{CarriedName, ChangedFunction, Staleness};

/// What rustc said of the profile: the symbols it looked up and found with another function
/// hash, by the crate whose codegen unit looked (a record offered under another unit's name
/// is looked up there), and per crate how many functions it found no data for.
fn mismatches(diagnostics: &[Diagnostic]) -> (BTreeSet<(String, String)>, BTreeMap<String, usize>) {
    let mut mismatched: BTreeSet<(String, String)> = BTreeSet::new();
    let mut missing_per_crate: BTreeMap<String, usize> = BTreeMap::new();
    for diagnostic in diagnostics {
        if diagnostics::expected_to_differ(&diagnostic.target) {
            continue;
        }
        match diagnostics::classify(&diagnostic.message) {
            Some(Kind::HashMismatch) => {
                let Some((module, rest)) = diagnostic.message.split_once(": ") else {
                    continue;
                };
                if let Some(symbol) = rest
                    .split_whitespace()
                    .find(|w| w.starts_with("_ZN") || w.starts_with("_R"))
                {
                    mismatched.insert((crate_of_module(module).to_owned(), symbol.to_owned()));
                }
            }
            Some(Kind::MissingFunction) => {
                *missing_per_crate
                    .entry(diagnostic.target.replace('-', "_"))
                    .or_default() += 1;
            }
            _ => {}
        }
    }
    (mismatched, missing_per_crate)
}

pub(crate) fn staleness(
    functions: &[FunctionCounts],
    diagnostics: &[Diagnostic],
    carried: &[CarryRecord],
) -> Staleness {
    let (mismatched, missing_per_crate) = mismatches(diagnostics);
    let mut changed_symbols = BTreeSet::new();
    let mut carried_names = BTreeSet::new();
    let mut left_behind = BTreeSet::new();
    let mut renamed: BTreeMap<String, String> = BTreeMap::new();
    let mut result = Staleness::default();
    for record in carried {
        for crate_renamed in &record.plan.renamed_crates {
            renamed.insert(crate_renamed.krate.clone(), crate_renamed.was.clone());
        }
        changed_symbols.extend(record.plan.changed.iter().cloned());
        for function in &record.plan.carried {
            if !record.recompiled {
                // Found, but not worth a second compile: its data is not used.
                left_behind.extend(function.from.iter().cloned());
                continue;
            }
            carried_names.extend(function.from.iter().cloned());
            result.carried.push(CarriedName {
                name: insight::demangle(&function.symbol).0,
                now: format!("{};{}", function.module, function.symbol),
                from: function.from.clone(),
                counts: function.total,
            });
        }
        if record.recompiled {
            result.recompiled.push(record.krate.clone());
        }
        if let Some(error) = &record.error {
            result
                .carry_errors
                .push(format!("{}: {error}", record.krate));
        }
    }
    let total = functions
        .iter()
        .fold(0u64, |sum, f| sum.saturating_add(f.total));
    let mut changed = Vec::new();
    for function in functions {
        let entry = result.per_crate.entry(function.krate.clone()).or_default();
        entry.functions += 1;
        entry.counts += function.total;
        let symbol = function.key.rsplit(';').next().unwrap_or(&function.key);
        // A renamed crate's own codegen units, and its functions with external linkage.
        let in_renamed = match function.key.rsplit_once(';') {
            Some((module, _)) => module.split_once('.').is_some_and(|(krate, rest)| {
                renamed
                    .get(krate)
                    .is_some_and(|was| rest.starts_with(&format!("{was}-cgu")))
            }),
            None => renamed.contains_key(&function.krate),
        };
        let mismatch = match function.key.rsplit_once(';') {
            Some((module, _)) => {
                mismatched.contains(&(crate_of_module(module).to_owned(), symbol.to_owned()))
            }
            // A function with external linkage is looked up by every crate that calls it.
            None => mismatched.iter().any(|(_, s)| s == symbol),
        };
        if in_renamed || mismatch || changed_symbols.contains(symbol) {
            entry.changed_functions += 1;
            entry.changed_counts += function.total;
            result.stale_functions += 1;
            changed.push((function.total, function.name.clone()));
        } else if left_behind.contains(&function.key) && function.total > 0 {
            entry.changed_functions += 1;
            entry.changed_counts += function.total;
            result.stale_functions += 1;
            changed.push((
                function.total,
                format!(
                    "{} (moved, not carried: its crate's moved records hold under {} of the \
                     counts, not worth a second compile)",
                    function.name,
                    crate::util::units::percent(crate::profiles::carry::MIN_RECOMPILE_SHARE)
                ),
            ));
        } else if carried_names.contains(&function.key) {
            entry.carried_functions += 1;
            entry.carried_counts += function.total;
            result.carried_functions += 1;
            result.carried_counts += function.total;
        }
    }
    for (krate, missing) in missing_per_crate {
        result.per_crate.entry(krate).or_default().new_functions += missing;
    }
    for record in carried {
        // Changed functions that also moved were counted as missing above.
        let krate = record.krate.rsplit('/').next().unwrap_or(&record.krate);
        if let Some(entry) = result.per_crate.get_mut(krate) {
            entry.new_functions = entry
                .new_functions
                .saturating_sub(record.plan.changed.len());
        }
    }
    changed.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let changed_counts: u64 = changed.iter().map(|(counts, _)| counts).sum();
    result.changed = changed
        .into_iter()
        .map(|(counts, name)| ChangedFunction {
            name,
            share: counts as f64 / total.max(1) as f64,
        })
        .collect();
    result
        .carried
        .sort_by(|a, b| b.counts.cmp(&a.counts).then_with(|| a.now.cmp(&b.now)));
    result.renamed_crates = renamed.into_keys().collect();
    result.profile_functions = functions.len();
    result.profile_counts = total;
    result.share = changed_counts as f64 / total.max(1) as f64;
    result
}

/// The carry setup of an optimized build from the committed profile `profile_use` (the path its
/// flags name) whose text form is `text` (see `wrappers::rustc::crate_carry`): written beside the
/// text, returned with the log the wrapper writes. The crates' own profiles go beside
/// `profile_use`, outside the checkout like it; the log is per profile, so a build that recompiles
/// nothing still finds what the last one carried.
pub(crate) fn carry_setup(
    cx: &Context,
    profile_use: &Path,
    text: &Path,
) -> Result<(PathBuf, PathBuf)> {
    let stem = profile_use
        .file_stem()
        .map_or_else(|| "profile".into(), |s| s.to_string_lossy().into_owned());
    let dir = profile_use
        .parent()
        .map_or_else(|| cx.layout.profiles_dir(), Path::to_path_buf)
        .join(format!("carry-{stem}"));
    let log = cx
        .layout
        .stage_dir(crate::layout::Stage::Optimized)
        .join(format!("carry-{stem}.jsonl"));
    crate::util::files::create_dir_all(cx.layout.stage_dir(crate::layout::Stage::Optimized))?;
    let setup = CarrySetup {
        profile: profile_use.to_owned(),
        text: text.to_owned(),
        profdata: cx.profdata()?.path.clone(),
        dir,
        log: log.clone(),
    };
    let file = text.with_file_name("carry.json");
    crate::util::files::write_atomically(&file, serde_json::to_string(&setup)?.as_bytes())?;
    Ok((file, log))
}

/// The committed profile's text form (`profiles/carry/committed.proftext`) and its functions.
/// With `renames` (a profile trained with another rustc: see [`toolchain_renames`]), its
/// records of the standard library's generics are named as this toolchain names them.
/// `profile` is the user's file (checked by [`committed_profile`]): the first read of it
/// whole, so a damaged one is named as theirs.
pub(crate) fn committed_text(
    cx: &Context,
    profile: &Path,
    renames: &ToolchainRenames,
) -> Result<(PathBuf, Vec<FunctionCounts>)> {
    let dir = cx.layout.profiles_dir().join("carry");
    crate::util::files::create_dir_all(&dir)?;
    let text = dir.join("committed.proftext");
    // The release job runs `profile check`, then `optimize`: the second reads the text the
    // first wrote when it comes from the same bytes, the same llvm-profdata and the same
    // renames (the key file is written last, so a text cut short has none).
    let profdata = cx.profdata()?;
    let key = format!(
        "{} {} {} {:?}",
        profiles::content_hash(&crate::util::files::read(profile)?),
        profdata.path.display(),
        profdata.version,
        renames
    );
    let key_file = dir.join("committed.proftext.key");
    let say_renamed = |count: usize| {
        if count == 0 {
            return;
        }
        let mut what: Vec<String> = Vec::new();
        if !renames.crates.is_empty() {
            let crates: Vec<&str> = renames
                .crates
                .keys()
                .map(|(name, _)| name.as_str())
                .collect();
            what.push(format!("crates {}", crates.join(", ")));
        }
        if let Some(name) = renames.drop_glue {
            what.push(format!("drop glue as `core::ptr::{name}`"));
        }
        cx.printer.info(format!(
            "{count} records of the standard library's code renamed to this toolchain's names \
             ({})",
            what.join("; ")
        ))
    };
    // The key's line, then how many records were renamed.
    if let Ok(read_with) = std::fs::read_to_string(&key_file)
        && let Some((read_key, renamed)) = read_with.split_once('\n')
        && read_key == key
        && let Ok(renamed) = renamed.parse::<usize>()
        && let Ok(content) = std::fs::read_to_string(&text)
    {
        if !renames.is_empty() {
            say_renamed(renamed);
        }
        return Ok((text, insight::parse_text_profile(&content)));
    }
    let _ = std::fs::remove_file(&key_file);
    let read = Cmd::new(&profdata.path)
        .args(["merge", "--text", "-o"])
        .arg(&text)
        .arg(profile)
        .output(&cx.printer)?;
    if !read.status.success() {
        bail!(
            "{} cannot be read by llvm-profdata ({}): it is damaged or cut short (a partial \
             download or checkout?). Fix: {RECREATE}",
            profile.display(),
            profiles::quoted_tool_output(&String::from_utf8_lossy(&read.stderr))
        );
    }
    let mut content = crate::util::files::read_to_string(&text)?;
    let mut renamed_records = 0;
    if !renames.is_empty() {
        let (renamed, count) = toolchain_names::rename_text_profile(&content, renames);
        say_renamed(count);
        crate::util::files::write(&text, renamed.as_bytes())?;
        content = renamed;
        renamed_records = count;
    }
    let functions = insight::parse_text_profile(&content);
    crate::util::files::write_atomically(
        &key_file,
        format!("{key}\n{renamed_records}").as_bytes(),
    )?;
    Ok((text, functions))
}

/// The profile an optimized build from the committed one uses: its local records with counts
/// offered under every codegen unit name their crate may have now
/// (`profiles::carry::TextProfile::with_offered`), so functions that moved between units find
/// their data in the crate's first compile instead of a second one, with the committed
/// profile's summary (the copies would raise its hot threshold). Content-addressed like the
/// committed copy it replaces (the offer depends on nothing but the profile). When the summary
/// cannot be kept, the committed profile as it is, said: moved functions then cost a second
/// compile of their crate.
/// With `renamed` (the text's names are this toolchain's, not the committed file's), the
/// fallback is the merged text without the summary, never the committed file.
pub(crate) fn offered_profile(
    cx: &Context,
    committed: &Path,
    text: &Path,
    renamed: bool,
) -> Result<PgoProfile> {
    let profile = TextProfile::parse(&crate::util::files::read_to_string(text)?);
    let offered = text.with_file_name("offered.proftext");
    crate::util::files::write(&offered, profile.with_offered().as_bytes())?;
    let dir = cx.layout.profiles_dir();
    let partial = dir.join("committed.profdata.partial");
    crate::util::command::Cmd::new(&cx.profdata()?.path)
        .args(["merge", "-o"])
        .arg(&partial)
        .arg(&offered)
        .stdout_checked(&cx.printer)
        .with_context(|| format!("llvm-profdata could not read {}", offered.display()))?;
    let _ = std::fs::remove_file(&offered);
    let mut data = crate::util::files::read(&partial)?;
    if let Err(err) = profiles::keep_summary_of(&mut data, &crate::util::files::read(committed)?) {
        if renamed {
            // The committed file has the other toolchain's names: the renamed records, with
            // the summary llvm-profdata computed for them.
            cx.printer.warn(format!(
                "{}: {err:#}; the build uses the renamed profile with the summary llvm-profdata \
                 computes for it (its hot threshold may differ a little from the trained one)",
                committed.display()
            ));
            return profiles::install_content_addressed(&partial, &data, &dir)
                .map(PgoProfile::offered_at);
        }
        cx.printer.warn(format!(
            "{}: {err:#}; the build uses it as it is, and a crate whose functions moved to \
             other codegen units is compiled twice where they hold {} of the counts",
            committed.display(),
            crate::util::units::percent(crate::profiles::carry::MIN_RECOMPILE_SHARE)
        ));
        crate::util::files::remove_file(&partial)?;
        return Ok(PgoProfile::offered_at(committed.to_owned()));
    }
    crate::util::files::write(&partial, &data)?;
    profiles::install_content_addressed(&partial, &data, &dir).map(PgoProfile::offered_at)
}

const RECREATE: &str = "re-create it with this toolchain: `pgo-build run` (with [pgo] profile \
                        removed) and `pgo-build export`";

/// The committed profile against its metadata and this build: the same content, LLVM major,
/// naming of symbols, rustc (or names that survive it) and target, else refused with the fix.
fn check_metadata(
    cx: &Context,
    relative: &Path,
    path: &Path,
    data: &[u8],
    metadata: &ProfileMetadata,
) -> Result<()> {
    let fix = RECREATE;
    let metadata_file = metadata_path(path);
    let content_hash = profiles::content_hash(data);
    if metadata.content_hash != content_hash {
        bail!(
            "{} describes another profile than {} (content hash {}, the profile's is \
             {content_hash}): the two were not exported together (the profile replaced or \
             merged by hand), so nothing it says can be trusted. Export the profile again \
             and commit both files together",
            metadata_file.display(),
            path.display(),
            metadata.content_hash
        );
    }
    if metadata.llvm_major != cx.rustc.llvm_major {
        bail!(
            "the committed profile {} was made with LLVM {} ({}), but rustc uses LLVM {}: its \
             function hashes and format may not match. Fix: {fix}.",
            path.display(),
            metadata.llvm_version,
            metadata.rustc,
            cx.rustc.llvm_version
        );
    }
    check_same_preinline(cx, path, metadata)?;
    if metadata.stable_names != cx.settings.stable_names {
        let (then, now) = match metadata.stable_names {
            true => ("stable symbol names", "cargo's"),
            false => ("cargo's symbol names", "stable ones ([pgo] stable_names)"),
        };
        bail!(
            "the committed profile {} was made with {then}, this build has {now}: almost \
             none of its functions would match. Fix: {fix}{}.",
            path.display(),
            if metadata.stable_names {
                ""
            } else {
                " (once: a profile with stable names survives version and dependency \
                 bumps), or set [pgo] stable_names = false to use this one"
            }
        );
    }
    let scheme_now =
        stable_names::scheme_of(cx.settings.stable_names, &cx.settings.common_rustflags);
    if metadata.stable_names && cx.settings.stable_names && metadata.name_scheme != scheme_now {
        bail!(
            "the committed profile {} names functions by {}, this build by {}: almost none \
             of its functions would match. Fix: {}.",
            path.display(),
            scheme_name(metadata.name_scheme),
            scheme_name(scheme_now),
            if metadata.name_scheme < scheme_now {
                format!(
                    "export it again once, from a fresh training with this pgo-build \
                     (`pgo-build --retrain run`, then `pgo-build export --output {}`): \
                     its names then also survive rustc upgrades",
                    relative.display()
                )
            } else {
                "remove the -Csymbol-mangling-version flag from the rustflags, or \
                 re-create the profile with it"
                    .to_owned()
            }
        );
    }
    if metadata.rustc != cx.rustc.version_line {
        if scheme_now < 2 || metadata.name_scheme < 2 {
            bail!(
                "the committed profile {} was made with {}, this build uses {}: rustc puts \
                 its version into every legacy symbol's hash, so none of the profile's \
                 functions would match. Fix: {fix} (with [pgo] stable_names, on by \
                 default, and no -Csymbol-mangling-version in the rustflags, its names then \
                 survive rustc upgrades; or pin the toolchain in rust-toolchain.toml).",
                path.display(),
                metadata.rustc,
                cx.rustc.version_line
            );
        }
        cx.printer.info(format!(
            "the committed profile {} was trained with {}, this build uses {} (both LLVM \
             {}): its functions keep their names across rustc releases{}; functions this \
             rustc compiles differently are stale, and the build says how much of the \
             profile still applies",
            path.display(),
            metadata.rustc,
            cx.rustc.version_line,
            cx.rustc.llvm_major,
            if metadata.sysroot_crates.is_empty() {
                " (but the standard library's generics: the profile does not record the \
                 standard library it was trained with; export it again to keep them)"
            } else {
                ", and the standard library's generics are renamed to this toolchain's"
            }
        ));
    }
    if metadata.target != cx.settings.target {
        bail!(
            "the committed profile {} was made for {}, this build is for {}. Fix: {fix}.",
            path.display(),
            metadata.target,
            cx.settings.target
        );
    }
    Ok(())
}

/// Refuses a committed profile trained with LLVM's pre-instrumentation inlining the other way
/// than this build's (`[pgo] preinline`, or its flag in the rustflags): the hash of every
/// function that inlines another would differ.
fn check_same_preinline(cx: &Context, path: &Path, metadata: &ProfileMetadata) -> Result<()> {
    let fix = RECREATE;
    let trained_with = preinline_in(&metadata.rustflags);
    if trained_with != preinline_in(&cx.settings.common_rustflags) {
        let (then, now) = match trained_with {
            true => ("on", "off"),
            false => ("off", "on"),
        };
        bail!(
            "the committed profile {} was trained with LLVM's pre-instrumentation inlining \
             {then} ([pgo] preinline), this build has it {now}: every function that inlines \
             another would have another hash, and most of the profile would be dropped. Fix: \
             set [pgo] preinline = {} as it was trained, or {fix}.",
            path.display(),
            trained_with
        );
    }
    Ok(())
}

/// Checks a committed profile against this toolchain and target and returns its
/// content-addressed copy under `profiles/` (so cargo rebuilds when its content changes),
/// with the metadata beside it, checked.
pub(crate) fn committed_profile(
    cx: &Context,
    relative: &Path,
) -> Result<(PathBuf, Option<ProfileMetadata>)> {
    let path = cx.workspace.root.join(relative);
    let fix = RECREATE;
    let setting = format!(
        "[pgo] profile = {:?} in {}",
        relative,
        cx.config.display_path()
    );
    if relative.as_os_str().is_empty() {
        bail!(
            "{setting}: an empty path; name the exported .profdata file (e.g. \
             \"pgo/profile.profdata\"), or remove the setting to train in this build"
        );
    }
    if path.is_dir() {
        bail!(
            "{setting}: {} is a directory; name the .profdata file `pgo-build export` wrote \
             in it",
            path.display()
        );
    }
    if !path.is_file() {
        bail!("{setting}: {} does not exist", path.display());
    }
    let data = crate::util::files::read(&path)?;
    let metadata_file = metadata_path(&path);
    let metadata = read_metadata(&path)?;
    let has_metadata = metadata.is_some();
    if let Some(metadata) = &metadata {
        check_metadata(cx, relative, &path, &data, metadata)?;
    } else {
        cx.printer.warn(format!(
            "{} has no metadata ({}); only its format version is checked",
            path.display(),
            metadata_file.display()
        ));
    }
    let Some(version) = profiles::indexed_version(&path) else {
        bail!(
            "{} is not an indexed profile (.profdata from `llvm-profdata merge` or `pgo-build export`)",
            path.display()
        );
    };
    // With metadata, its LLVM major was checked; without, the format tells whose it is.
    if !has_metadata {
        let expected = profiles::written_indexed_version(
            cx.profdata()?,
            &cx.layout.profiles_dir().join("scratch"),
            &cx.printer,
        )?;
        if version != expected {
            bail!(
                "the committed profile {} was made by another LLVM than rustc's (indexed format \
                 version {version}; LLVM {}'s llvm-profdata writes version {expected}). Fix: \
                 {fix}.",
                path.display(),
                cx.rustc.llvm_major
            );
        }
    }
    // Read whole by `committed_text`, from the user's file: a damaged one is named as theirs.
    let dir = cx.layout.profiles_dir();
    crate::util::files::create_dir_all(&dir)?;
    let partial = dir.join("committed.profdata.partial");
    crate::util::files::write(&partial, &data)?;
    let installed = profiles::install_content_addressed(&partial, &data, &dir)?;
    Ok((installed, metadata))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staleness_weighs_changed_functions_by_their_counts_and_counts_carried_ones() {
        let functions = insight::parse_text_profile(
            "app.x-cgu.0;_ZN3app1f17h0123456789abcdefE\n# Func Hash:\n1\n# Num Counters:\n1\n# Counter Values:\n5\n\n\
             app.x-cgu.1;_ZN3app1g17h0123456789abcdefE\n# Func Hash:\n2\n# Num Counters:\n1\n# Counter Values:\n25\n\n\
             _ZN3lib1h17h0123456789abcdefE\n# Func Hash:\n3\n# Num Counters:\n1\n# Counter Values:\n70\n",
        );
        let diagnostic = |message: &str| Diagnostic {
            target: "app".into(),
            level: "warning".into(),
            message: message.into(),
            rendered: String::new(),
        };
        let diagnostics = [
            diagnostic(
                "app.x-cgu.0: function control flow change detected (hash mismatch) _ZN3app1f17h0123456789abcdefE Hash = 9",
            ),
            diagnostic(
                "app.x-cgu.0: no profile data available for function _ZN3app3new17h0123456789abcdefE Hash = 9",
            ),
            diagnostic("unused variable"),
        ];
        let carried = CarryRecord {
            krate: "app/app".into(),
            plan: crate::profiles::carry::CarryPlan {
                carried: vec![crate::profiles::carry::CarriedFunction {
                    module: "app.x-cgu.4".into(),
                    symbol: "_ZN3app1g17h0123456789abcdefE".into(),
                    hash: 2,
                    from: vec!["app.x-cgu.1;_ZN3app1g17h0123456789abcdefE".into()],
                    total: 25,
                }],
                changed: vec![],
                new_code: 1,
                ..Default::default()
            },
            recompiled: true,
            ..CarryRecord::default()
        };
        let result = staleness(&functions, &diagnostics, std::slice::from_ref(&carried));
        assert_eq!(result.profile_functions, 3);
        assert_eq!(result.profile_counts, 100);
        assert_eq!(result.stale_functions, 1);
        assert!((result.share - 0.05).abs() < 1e-9);
        assert!((result.matching_share() - 0.95).abs() < 1e-9);
        assert_eq!((result.carried_functions, result.carried_counts), (1, 25));
        assert_eq!(result.recompiled, ["app/app"]);
        let app = &result.per_crate["app"];
        assert_eq!((app.functions, app.counts), (2, 30));
        assert_eq!((app.changed_functions, app.changed_counts), (1, 5));
        assert_eq!((app.carried_functions, app.carried_counts), (1, 25));
        assert_eq!(app.new_functions, 1);
        assert_eq!(result.per_crate["lib"].counts, 70);
        assert_eq!(result.changed.len(), 1);
        assert_eq!(result.changed[0].name, "app::f");

        // Found but not worth a second compile: its data is not used, and says why.
        let left = CarryRecord {
            recompiled: false,
            ..carried
        };
        let result = staleness(&functions, &diagnostics, &[left]);
        assert!((result.share - 0.30).abs() < 1e-9);
        assert_eq!(result.carried_functions, 0);
        assert!(
            result.changed[0]
                .name
                .starts_with("app::g (moved, not carried")
        );
    }
}
