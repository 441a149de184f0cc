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
}
