//! The headers of LLVM's profile files: the magic that tells a raw profile from an indexed one,
//! and the format version that tells which LLVM wrote it.

use std::path::Path;

use anyhow::{Context, Result};

use crate::toolchain::LlvmTool;
use crate::util::command::Cmd;
use crate::util::printer::Printer;

/// Magic of a 64-bit LLVM raw profile (`\xfflprofr\x81`, little-endian u64 at offset 0); the
/// format version is the u64 at offset 8.
pub(super) const RAW_MAGIC_64: u64 = 0xff6c_7072_6f66_7281;

/// Magic of an indexed profile (`.profdata`), as the little-endian u64 at offset 0.
pub(super) const INDEXED_MAGIC: u64 = 0x8169_666f_7270_6cff;

/// The top byte of the version word holds variant flags (IR-level, context-sensitive, …).
pub(super) const VERSION_MASK: u64 = 0x00ff_ffff_ffff_ffff;

pub(super) fn read_raw_version(path: &Path) -> Option<u64> {
    header_version(path, RAW_MAGIC_64)
}

/// The format version of an indexed profile, `None` when the file is not one.
pub fn indexed_version(path: &Path) -> Option<u64> {
    header_version(path, INDEXED_MAGIC)
}

/// The version word (flags masked off) of a profile file starting with `magic`.
fn header_version(path: &Path, magic: u64) -> Option<u64> {
    use std::io::Read;
    let mut header = [0u8; 16];
    std::fs::File::open(path)
        .ok()?
        .read_exact(&mut header)
        .ok()?;
    let found = u64::from_le_bytes(header[..8].try_into().ok()?);
    let version = u64::from_le_bytes(header[8..].try_into().ok()?);
    (found == magic).then_some(version & VERSION_MASK)
}

/// The indexed format version the given llvm-profdata writes (from merging an empty profile).
pub fn written_indexed_version(
    profdata: &LlvmTool,
    scratch_dir: &Path,
    printer: &Printer,
) -> Result<u64> {
    crate::util::files::create_dir_all(scratch_dir)?;
    let text = scratch_dir.join("empty.proftext");
    crate::util::files::write(&text, "# IR level Instrumentation Flag\n:ir\n")?;
    let output = scratch_dir.join("empty.profdata");
    Cmd::new(&profdata.path)
        .args(["merge", "-o"])
        .arg(&output)
        .arg(&text)
        .stdout_checked(printer)?;
    indexed_version(&output)
        .context("llvm-profdata wrote a profile pgo-build cannot read the version of")
}

/// The byte range of an indexed profile's summary, in the layout LLVM writes from format
/// version 12 on: a header of nine words, then the summary's field count (6) and cutoff
/// count, its fields, and three words per cutoff. `None` for anything else, and for a
/// context-sensitive profile (which has a second summary).
fn indexed_summary(data: &[u8]) -> Option<std::ops::Range<usize>> {
    const HEADER_WORDS: usize = 9;
    const CONTEXT_SENSITIVE: u64 = 1 << 57;
    let word = |index: usize| -> Option<u64> {
        let bytes = data.get(index * 8..index * 8 + 8)?;
        Some(u64::from_le_bytes(bytes.try_into().ok()?))
    };
    let version = word(1)?;
    if word(0)? != INDEXED_MAGIC || version & VERSION_MASK < 12 || version & CONTEXT_SENSITIVE != 0
    {
        return None;
    }
    let fields = word(HEADER_WORDS)?;
    let cutoffs = word(HEADER_WORDS + 1)?;
    if fields != 6 || cutoffs > 64 {
        return None;
    }
    let words = 2 + fields as usize + 3 * cutoffs as usize;
    let range = HEADER_WORDS * 8..(HEADER_WORDS + words) * 8;
    (range.end <= data.len()).then_some(range)
}

/// Gives `profile` (an indexed profile that adds records to `original` under other names)
/// `original`'s summary: the counts' percentiles LLVM takes its hot and cold thresholds from,
/// and whether the working set is large, which copies of records would otherwise shift.
pub fn keep_summary_of(profile: &mut [u8], original: &[u8]) -> Result<()> {
    let (Some(to), Some(from)) = (indexed_summary(profile), indexed_summary(original)) else {
        anyhow::bail!(
            "not an indexed profile whose summary pgo-build can read (format 12 or later, not context-sensitive)"
        );
    };
    anyhow::ensure!(
        to == from && profile[..16] == original[..16],
        "the two profiles' summaries are laid out differently"
    );
    profile[to].copy_from_slice(&original[from]);
    Ok(())
}

/// The start of a raw profile of format `version`, as rustc's runtime writes it (tests).
#[cfg(test)]
pub(super) fn raw_header(version: u64) -> Vec<u8> {
    let mut bytes = RAW_MAGIC_64.to_le_bytes().to_vec();
    // With the IR-level flag in the top byte.
    bytes.extend((version | 1 << 56).to_le_bytes());
    bytes.extend([0u8; 64]);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn indexed(version: u64, summary: &[u64], rest: &[u8]) -> Vec<u8> {
        let mut bytes = INDEXED_MAGIC.to_le_bytes().to_vec();
        bytes.extend(version.to_le_bytes());
        bytes.extend([0u8; 7 * 8]);
        for word in summary {
            bytes.extend(word.to_le_bytes());
        }
        bytes.extend(rest);
        bytes
    }

    #[test]
    fn a_profile_keeps_the_summary_of_the_one_it_adds_names_to() {
        let summary = |total: u64, hot: u64| {
            let mut words = vec![6, 2, 10, 90, 7, 7, 7, total];
            words.extend([990000, hot, 3, 999999, 1, 5]);
            words
        };
        let ir = 13 | 1 << 56;
        let original = indexed(ir, &summary(100, 5), b"records");
        let mut offered = indexed(ir, &summary(2600, 9), b"more records");
        keep_summary_of(&mut offered, &original).unwrap();
        assert_eq!(offered, indexed(ir, &summary(100, 5), b"more records"));
        // A layout it does not know is refused, not guessed at.
        let mut old = indexed(11 | 1 << 56, &summary(2600, 9), b"");
        assert!(keep_summary_of(&mut old, &original).is_err());
        let mut context_sensitive = indexed(ir | 1 << 57, &summary(2600, 9), b"");
        assert!(keep_summary_of(&mut context_sensitive, &original).is_err());
        let mut fewer = indexed(ir, &[6, 1, 10, 90, 7, 7, 7, 1, 990000, 1, 1], b"");
        assert!(keep_summary_of(&mut fewer, &original).is_err());
        assert!(keep_summary_of(&mut b"short".to_vec(), &original).is_err());
    }

    #[test]
    fn raw_version_is_read_only_from_raw_profiles() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("x.profraw");
        std::fs::write(&file, raw_header(10)).unwrap();
        assert_eq!(read_raw_version(&file), Some(10));
        std::fs::write(&file, b"garbage that is long enough").unwrap();
        assert_eq!(read_raw_version(&file), None);
        std::fs::write(&file, b"").unwrap();
        assert_eq!(read_raw_version(&file), None);
    }

    proptest::proptest! {
        #![proptest_config(crate::util::fuzz::config())]

        /// Raw and indexed profile headers, and an indexed profile's summary, of any bytes:
        /// a version or none, the summary kept or an error; never a panic or a hang.
        #[test]
        fn any_profile_header_is_read_without_a_panic_or_hang(
            bytes in proptest::prop_oneof![
                crate::util::fuzz::mutants(&indexed(12, &[3, 1, 2, 3, 4, 5, 6, 7], &[0; 32])),
                crate::util::fuzz::mutants(&raw_header(10)),
            ],
            original in crate::util::fuzz::mutants(&indexed(12, &[2, 9, 9], &[1; 16])),
        ) {
            crate::util::fuzz::no_panic_or_hang(move || {
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("profile");
                std::fs::write(&path, &bytes).unwrap();
                let versions = (read_raw_version(&path), indexed_version(&path));
                let mut profile = bytes.clone();
                let kept = keep_summary_of(&mut profile, &original).is_ok();
                (versions, indexed_summary(&bytes), kept)
            });
        }
    }
}
