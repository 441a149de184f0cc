//! Merging checked raw profiles into one content-addressed `.profdata`, weighted when bundles
//! say so, and what a merged profile holds (functions, counts).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

pub use crate::report::MergedProfile;
use crate::toolchain::LlvmTool;
use crate::util::command::Cmd;
use crate::util::files::{file_name, sorted_entries};
use crate::util::printer::Printer;

/// Merges `inputs` into `profiles_dir/merged-<content hash>.profdata`. An existing file with the
/// same content is left untouched: rewriting it would make cargo rebuild everything, and the
/// hash in the name is what makes cargo rebuild when the content does change.
pub fn merge(
    inputs: &[&Path],
    profiles_dir: &Path,
    profdata: &LlvmTool,
    printer: &Printer,
) -> Result<MergedProfile> {
    let weighted: Vec<(u64, &Path)> = inputs.iter().map(|path| (1, *path)).collect();
    merge_weighted(&weighted, profiles_dir, profdata, printer)
}

/// [`merge`] with an integer weight (>= 1) per input: each input's counts are multiplied by
/// it (`llvm-profdata merge --weighted-input`).
pub fn merge_weighted(
    inputs: &[(u64, &Path)],
    profiles_dir: &Path,
    profdata: &LlvmTool,
    printer: &Printer,
) -> Result<MergedProfile> {
    crate::util::files::create_dir_all(profiles_dir)?;
    let list = profiles_dir.join("merge-inputs.txt");
    // One input per line, `weight,path` (llvm-profdata's --input-files format).
    let lines: Vec<String> = inputs
        .iter()
        .map(|(weight, path)| format!("{weight},{}", path.display()))
        .collect();
    crate::util::files::write(&list, lines.join("\n") + "\n")?;
    let partial = profiles_dir.join("merged.profdata.partial");
    // No --sparse: it drops zero-count functions, and with them the "cold" marking.
    Cmd::new(&profdata.path)
        .args(["merge", "-o"])
        .arg(&partial)
        .arg(format!("--input-files={}", list.display()))
        .stdout_checked(printer)
        .context("llvm-profdata could not merge the profiles")?;
    let data = crate::util::files::read(&partial)?;
    let path = install_content_addressed(&partial, &data, profiles_dir)?;
    let total_functions = total_functions(&path, profdata, printer)?;
    Ok(MergedProfile {
        path,
        size_bytes: data.len() as u64,
        total_functions,
    })
}

/// Moves `partial` (whose content is `data`) to `profiles_dir/merged-<content hash>.profdata`,
/// leaving an existing file of the same content untouched, and removes other merged files.
pub fn install_content_addressed(
    partial: &Path,
    data: &[u8],
    profiles_dir: &Path,
) -> Result<PathBuf> {
    let path = profiles_dir.join(format!("merged-{}.profdata", content_hash(data)));
    if path.is_file() {
        crate::util::files::remove_file(partial)?;
    } else {
        crate::util::files::rename(partial, &path)?;
    }
    for stale in sorted_entries(profiles_dir)? {
        let name = file_name(&stale);
        if name.starts_with("merged-") && name.ends_with(".profdata") && stale != path {
            crate::util::files::remove_file(&stale)?;
        }
    }
    Ok(path)
}

/// The profile `-Cprofile-use` names: a copy of `profile` (a content-addressed
/// `merged-<hash>.profdata`) in a per-user directory outside every checkout, so the flag is the
/// same in every checkout of the workspace and a compile cache (sccache keys on the command
/// line) can serve another checkout. Copied only when missing or different: a rewritten file
/// would make cargo rebuild everything. Falls back to `profile` itself when that directory
/// cannot be used safely.
pub fn checkout_independent(profile: &Path) -> PathBuf {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let Some(name) = profile.file_name() else {
        return profile.to_owned();
    };
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    let dir = checkout_independent_dir();
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
    // Another user's directory (or a symlink planted there) is never used.
    let ours = std::fs::symlink_metadata(&dir)
        .is_ok_and(|m| m.is_dir() && m.uid() == uid && m.mode() & 0o022 == 0);
    let Ok(data) = std::fs::read(profile) else {
        return profile.to_owned();
    };
    if !ours {
        return profile.to_owned();
    }
    let copy = dir.join(name);
    if std::fs::read(&copy).is_ok_and(|existing| existing == data) {
        return copy;
    }
    let partial = dir.join(format!(
        "{}.{}.partial",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = std::fs::write(&partial, &data).and_then(|()| std::fs::rename(&partial, &copy));
    match written {
        Ok(()) => copy,
        Err(_) => {
            let _ = std::fs::remove_file(&partial);
            profile.to_owned()
        }
    }
}

/// Where [`checkout_independent`] copies profiles: one directory per user.
pub fn checkout_independent_dir() -> PathBuf {
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    std::env::temp_dir().join(format!("pgo-build-{uid}"))
}

/// 16 hex digits of SHA-256.
pub fn content_hash(data: &[u8]) -> String {
    crate::util::files::sha256_hex(data)[..16].to_owned()
}

/// Merges `inputs` into `output` (no content addressing: an intermediate file).
pub fn merge_to(
    inputs: &[&Path],
    output: &Path,
    profdata: &LlvmTool,
    printer: &Printer,
) -> Result<()> {
    if let Some(dir) = output.parent() {
        crate::util::files::create_dir_all(dir)?;
    }
    Cmd::new(&profdata.path)
        .args(["merge", "-o"])
        .arg(output)
        .args(inputs)
        .stdout_checked(printer)
        .context("llvm-profdata could not merge the profiles")
        .map(drop)
}

/// The size of an indexed profile's data.
pub struct Summary {
    /// Sum of every counter.
    pub total_count: u64,
    pub functions: u64,
}

/// "Total count" and "Total functions" from `llvm-profdata show --detailed-summary`.
pub fn summary(profile: &Path, profdata: &LlvmTool, printer: &Printer) -> Result<Summary> {
    let text = Cmd::new(&profdata.path)
        .args(["show", "--detailed-summary"])
        .arg(profile)
        .stdout_checked(printer)?;
    let field = |prefix: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(prefix))
            .and_then(|rest| rest.trim().parse::<u64>().ok())
    };
    match (field("Total count:"), field("Total functions:")) {
        (Some(total_count), Some(functions)) => Ok(Summary {
            total_count,
            functions,
        }),
        _ => bail!(
            "unexpected `llvm-profdata show --detailed-summary` output for {}:\n{text}",
            profile.display()
        ),
    }
}

/// "Total functions" from `llvm-profdata show`.
pub fn total_functions(profile: &Path, profdata: &LlvmTool, printer: &Printer) -> Result<u64> {
    let text = Cmd::new(&profdata.path)
        .arg("show")
        .arg(profile)
        .stdout_checked(printer)?;
    let Some(count) = text
        .lines()
        .find_map(|line| line.strip_prefix("Total functions:"))
        .and_then(|n| n.trim().parse().ok())
    else {
        bail!(
            "`llvm-profdata show {}` printed no function count:\n{text}",
            profile.display()
        );
    };
    Ok(count)
}
