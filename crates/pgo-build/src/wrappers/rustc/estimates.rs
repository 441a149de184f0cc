//! rustc's estimated peaks: what a stage's build measured, kept for its next build
//! (`<stage>/rustc-estimates.json`), completed from the baseline stage's, and carried to
//! other target directories and machines (`pgo-build export --rustc-estimates FILE`, read
//! back through `[build] rustc_estimates`, say from a CI cache).
//!
//! A stage's file maps `<profile>:<package>/<crate>@<version>|<kind>` to the peak last
//! measured (`<profile>`: [`profile_label`]): the same crate peaks differently under another
//! profile or other profile settings (LTO, codegen units), and
//! two versions of one crate (syn 1 and 2) are different crates. Within one build the profile
//! is fixed, so the wrapper reads keys without it ([`for_profile`]). Keys written before
//! versions and profiles were recorded (`<package>/<crate>|<kind>`) count as the current
//! profile's, of an unknown version: [`lookup`] falls back to them, as to another version of
//! the crate, when its own version was never measured.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::log::RustcRecord;
use crate::report::CrateKind;

/// Guesses of a crate's peak before any build measured it: generous for binaries (they are
/// codegen'd with every generic they instantiate, and link in the same rustc) and for
/// libraries, smaller for build scripts and proc macros. rustc's own floor is about 130 MiB
/// (the example's crates peaked at 126-213 MiB); a crate of large generated code or data can
/// exceed any guess, which is why measured peaks replace them after the first build and an
/// overrun is reported.
pub fn guess(kind: CrateKind) -> u64 {
    match kind {
        CrateKind::Bin => 1 << 30,
        CrateKind::BuildScript | CrateKind::ProcMacro => 384 << 20,
        _ => 768 << 20,
    }
}

/// Estimates by key: peak bytes last measured.
pub type Estimates = BTreeMap<String, u64>;

/// How much more a crate's rustc takes in the instrumented or optimized stage than in the
/// baseline's, when none of the stage's crates has been measured yet: above the largest ratio
/// seen (the example, ripgrep and grex: medians 1.03-1.07, at most 1.11).
pub const STAGE_FACTOR: f64 = 1.15;

/// The profile part of a stored key: the cargo profile's name, and when the manifest, the
/// environment or pgo-build's overrides set any of its settings (LTO, codegen units: they
/// change rustc's peaks several times over), a hash of them: `release`, `release~1a2b3c4d`.
/// So an `explore` variant with LTO, or a profile edited since, starts from its own peaks,
/// not from those of other settings.
pub fn profile_label(profile: &str, settings: &str) -> String {
    match settings {
        "" => profile.to_owned(),
        _ => format!(
            "{profile}~{}",
            &crate::util::files::sha256_hex(settings.as_bytes())[..8]
        ),
    }
}

/// A crate within one build (one profile): `<package>/<crate>@<version>|<kind>`.
fn admission_key(krate: &str, version: &str, kind: CrateKind) -> String {
    match version {
        "" => format!("{krate}|{kind}"),
        _ => format!("{krate}@{version}|{kind}"),
    }
}

/// A crate as a stage's file keeps it: its admission key under the cargo profile it was built by.
fn stored_key(profile: &str, krate: &str, version: &str, kind: CrateKind) -> String {
    format!("{profile}:{}", admission_key(krate, version, kind))
}

/// (crate, version, kind) of an admission key; the version is empty for keys without one.
fn parse_admission_key(key: &str) -> Option<(&str, &str, &str)> {
    let (name, kind) = key.rsplit_once('|')?;
    Some(match name.rsplit_once('@') {
        Some((krate, version)) => (krate, version, kind),
        None => (name, "", kind),
    })
}

/// A stage's estimates (or a carried file's): none yet when the file does not exist; an error
/// when it cannot be read or is not estimates (then guesses stand in, and the next build
/// writes it again).
pub fn read_estimates(path: &Path) -> Result<Estimates> {
    match std::fs::read_to_string(path) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(Estimates::new()),
        Err(err) => Err(err).with_context(|| format!("could not read {}", path.display())),
        Ok(text) => serde_json::from_str(&text)
            .with_context(|| format!("{} is not a file of rustc estimates", path.display())),
    }
}

/// The estimates of one profile, by admission key (what the wrapper looks up). Keys of other
/// profiles are left out; keys without a profile (older files) are kept.
pub fn for_profile(stored: &Estimates, profile: &str) -> Estimates {
    stored
        .iter()
        .filter_map(|(key, peak)| match key.split_once(':') {
            Some((of, key)) => (of == profile).then(|| (key.to_owned(), *peak)),
            None => Some((key.clone(), *peak)),
        })
        .collect()
}

/// No estimate is believed below this: rustc itself takes about as much doing nothing (the
/// smallest crates measured: cfg-if 57 MiB, the example's 126 MiB). A damaged or hand-edited
/// file (a carried one, say) with tiny peaks would otherwise let any number of crates in.
pub const FLOOR: u64 = 64 << 20;

/// A crate's estimate: its own version's peak; else the largest peak measured of the same crate
/// and kind at another version (or before versions were recorded): a dependency bump does not
/// send it back to a guess. At least [`FLOOR`]. `None`: never measured, it is guessed.
pub fn lookup(estimates: &Estimates, krate: &str, version: &str, kind: CrateKind) -> Option<u64> {
    let peak = match estimates.get(&admission_key(krate, version, kind)) {
        Some(peak) => *peak,
        None => estimates
            .iter()
            .filter(|(key, _)| {
                parse_admission_key(key).is_some_and(|(k, _, t)| k == krate && t == kind.name())
            })
            .map(|(_, peak)| *peak)
            .max()?,
    };
    Some(peak.max(FLOOR))
}

/// A peak sampled behind sccache (see remote.rs) as an estimate: with 10% and 32 MiB on top,
/// for what the samples can miss of a rustc's last moments. Measured on ripgrep, sampled
/// against `wait4`'s peaks of the same crates: the binary 333 vs 364 MiB (its linker's last
/// moments), a 0.2 s library 29 vs 63 MiB, most within 5%.
fn from_samples(peak: u64) -> u64 {
    peak + peak / 10 + (32 << 20)
}

/// The stage's file after a build: each crate measured gets its peak, under this profile and
/// its version; the key of the same crate from before versions were recorded goes.
pub fn updated(mut stored: Estimates, records: &[RustcRecord], profile: &str) -> Estimates {
    for record in records {
        if let (Some(peak), true) = (record.peak_bytes, record.success) {
            let peak = if record.sampled {
                from_samples(peak)
            } else {
                peak
            };
            stored.remove(&admission_key(&record.krate, "", record.kind));
            stored.insert(
                stored_key(profile, &record.krate, &record.version, record.kind),
                peak,
            );
        }
    }
    stored
}

/// Fills in what `own` lacks from `other` (own measurements come first); returns how many.
pub fn fill_from(own: &mut Estimates, other: &Estimates) -> usize {
    let mut filled = 0;
    for (key, peak) in other {
        own.entry(key.clone()).or_insert_with(|| {
            filled += 1;
            *peak
        });
    }
    filled
}

/// A stage's estimates completed from the baseline stage's: each crate the stage has not
/// measured gets its baseline peak times the largest ratio of stage to baseline peak among the
/// crates both measured (within 1.0-1.5), or [`STAGE_FACTOR`] when none. So a first `run`
/// starts its later stages from measured peaks, not from guesses by kind. Returns them, the
/// factor and how many were derived.
pub fn from_baseline(own: &Estimates, baseline: &Estimates) -> (Estimates, f64, usize) {
    let ratios = own
        .iter()
        .filter_map(|(key, peak)| Some(*peak as f64 / *baseline.get(key)?.max(&1) as f64));
    let factor = ratios
        .reduce(f64::max)
        .map_or(STAGE_FACTOR, |ratio| ratio.clamp(1.0, 1.5));
    let mut estimates = own.clone();
    let scaled: Estimates = baseline
        .iter()
        .map(|(key, peak)| (key.clone(), (*peak as f64 * factor).round() as u64))
        .collect();
    let derived = fill_from(&mut estimates, &scaled);
    (estimates, factor, derived)
}

/// The file `export --rustc-estimates` writes and `[build] rustc_estimates` reads: every
/// stage's stored estimates, per target triple.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct CarriedEstimates {
    pub format: u32,
    pub pgo_build_version: String,
    /// `rustc -vV`'s first line of the build that measured them last (peaks move little
    /// between releases of rustc; kept to tell where they came from).
    pub rustc: String,
    /// target triple → stage name → stored estimates.
    pub targets: BTreeMap<String, BTreeMap<String, Estimates>>,
}

const CARRIED_FORMAT: u32 = 1;

impl CarriedEstimates {
    /// `None` when the file does not exist (nothing carried yet).
    pub fn read(path: &Path) -> Result<Option<CarriedEstimates>> {
        let text = match std::fs::read_to_string(path) {
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            other => other.with_context(|| format!("could not read {}", path.display()))?,
        };
        let carried: CarriedEstimates = serde_json::from_str(&text).with_context(|| {
            format!(
                "{} is not a file of rustc estimates written by `pgo-build export \
                 --rustc-estimates`",
                path.display()
            )
        })?;
        if carried.format != CARRIED_FORMAT {
            bail!(
                "{} has rustc estimates in format {}, and this pgo-build reads format \
                 {CARRIED_FORMAT}: write it again with `pgo-build export --rustc-estimates`",
                path.display(),
                carried.format
            );
        }
        Ok(Some(carried))
    }

    pub fn new(rustc: &str) -> CarriedEstimates {
        CarriedEstimates {
            format: CARRIED_FORMAT,
            pgo_build_version: env!("CARGO_PKG_VERSION").to_owned(),
            rustc: rustc.to_owned(),
            targets: BTreeMap::new(),
        }
    }

    pub fn stage(&self, target: &str, stage: &str) -> Option<&Estimates> {
        self.targets.get(target)?.get(stage)
    }

    pub fn crates(&self) -> usize {
        self.targets
            .values()
            .flat_map(|t| t.values())
            .map(BTreeMap::len)
            .sum()
    }
}

/// Writes one target's stored estimates into the carried file at `path`, over what it carried
/// for that target before (a crate measured here replaces its carried peak; other targets and
/// crates stay). Refuses a file that is not one, rather than overwrite it. Returns how many
/// crates were measured here and how many the file carries now.
pub fn export(
    path: &Path,
    target: &str,
    rustc: &str,
    stages: &[(&str, Estimates)],
) -> Result<(usize, usize)> {
    let mut carried = CarriedEstimates::read(path)
        .with_context(|| {
            format!(
                "refusing to write rustc estimates over {}: remove it, or export to another path",
                path.display()
            )
        })?
        .unwrap_or_else(|| CarriedEstimates::new(rustc));
    carried.pgo_build_version = env!("CARGO_PKG_VERSION").to_owned();
    let mut measured = 0;
    for (stage, stored) in stages {
        measured += stored.len();
        let kept = carried
            .targets
            .entry(target.to_owned())
            .or_default()
            .entry((*stage).to_owned())
            .or_default();
        kept.extend(stored.iter().map(|(key, peak)| (key.clone(), *peak)));
    }
    if measured > 0 {
        carried.rustc = rustc.to_owned();
    }
    crate::util::files::write_atomically(path, serde_json::to_string_pretty(&carried)?.as_bytes())?;
    Ok((measured, carried.crates()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(krate: &str, version: &str, peak: Option<u64>) -> RustcRecord {
        RustcRecord {
            krate: krate.into(),
            version: version.into(),
            kind: CrateKind::Lib,
            guessed: true,
            peak_bytes: peak,
            success: true,
            ..RustcRecord::default()
        }
    }

    #[test]
    fn estimates_are_kept_by_profile_and_version_and_found_across_versions() {
        // A file from before versions and profiles: its key counts as this profile's.
        let stored = Estimates::from([("syn/syn|lib".into(), 300 << 20)]);
        let stored = updated(
            stored,
            &[
                record("syn/syn", "2.0.1", Some(500 << 20)),
                record("syn/syn", "1.0.9", Some(400 << 20)),
                record("regex/regex", "1.10.0", Some(700 << 20)),
                record("failed/failed", "1.0.0", None),
            ],
            "release",
        );
        assert_eq!(stored.get("release:syn/syn@2.0.1|lib"), Some(&(500 << 20)));
        assert_eq!(stored.get("release:syn/syn@1.0.9|lib"), Some(&(400 << 20)));
        assert!(!stored.contains_key("syn/syn|lib"), "{stored:?}");
        assert!(!stored.keys().any(|k| k.contains("failed")));
        // Sampled behind sccache: kept with a margin.
        let sampled = RustcRecord {
            sampled: true,
            ..record("regex/regex", "1.10.0", Some(100 << 20))
        };
        let margin = updated(Estimates::new(), &[sampled], "release");
        assert_eq!(
            margin["release:regex/regex@1.10.0|lib"],
            (110 << 20) + (32 << 20)
        );
        let stored = updated(
            stored,
            &[record("syn/syn", "2.0.1", Some(900 << 20))],
            "dist",
        );

        let release = for_profile(&stored, "release");
        assert_eq!(
            lookup(&release, "syn/syn", "2.0.1", CrateKind::Lib),
            Some(500 << 20)
        );
        assert_eq!(
            lookup(&release, "syn/syn", "1.0.9", CrateKind::Lib),
            Some(400 << 20)
        );
        // A version never measured: the largest of the crate's other versions.
        assert_eq!(
            lookup(&release, "syn/syn", "2.0.2", CrateKind::Lib),
            Some(500 << 20)
        );
        assert_eq!(
            lookup(&release, "syn/syn", "2.0.2", CrateKind::ProcMacro),
            None
        );
        assert_eq!(
            lookup(&release, "regex/regex", "1.10.0", CrateKind::Lib),
            Some(700 << 20)
        );
        assert_eq!(
            lookup(&release, "other/other", "1.0.0", CrateKind::Lib),
            None
        );
        // Nothing below rustc's own floor is believed.
        let tiny = Estimates::from([("tiny/tiny@1.0.0|lib".into(), 1 << 20)]);
        assert_eq!(
            lookup(&tiny, "tiny/tiny", "1.0.0", CrateKind::Lib),
            Some(FLOOR)
        );
        // Another profile's peaks are its own.
        let dist = for_profile(&stored, "dist");
        assert_eq!(
            lookup(&dist, "syn/syn", "2.0.1", CrateKind::Lib),
            Some(900 << 20)
        );
        assert_eq!(lookup(&dist, "regex/regex", "1.10.0", CrateKind::Lib), None);
        // Other settings of the profile are another profile.
        assert_eq!(profile_label("release", ""), "release");
        let lto = profile_label("release", "lto = \"fat\"");
        assert!(lto.starts_with("release~") && lto.len() == "release~".len() + 8);
        assert!(for_profile(&stored, &lto).is_empty());
        // Keys of older files are found too, for any version.
        let old = Estimates::from([("app/app|bin".into(), 420 << 20)]);
        assert_eq!(
            lookup(
                &for_profile(&old, "dist"),
                "app/app",
                "0.1.0",
                CrateKind::Bin
            ),
            Some(420 << 20)
        );
    }

    #[test]
    fn later_stages_start_from_the_baselines_peaks_scaled_by_what_both_measured() {
        let baseline = Estimates::from([("a|lib".into(), 100 << 20), ("b|lib".into(), 200 << 20)]);
        // Nothing measured in the stage yet: the default factor.
        let (estimates, factor, derived) = from_baseline(&Estimates::new(), &baseline);
        assert_eq!((factor, derived), (STAGE_FACTOR, 2));
        assert_eq!(
            estimates["b|lib"],
            (200.0 * 1024.0 * 1024.0 * STAGE_FACTOR).round() as u64
        );
        // `a` measured 8% over its baseline peak: `b` gets the same factor, `a` its own peak.
        let own = Estimates::from([("a|lib".into(), 108 << 20)]);
        let (estimates, factor, derived) = from_baseline(&own, &baseline);
        assert!((factor - 1.08).abs() < 1e-9, "{factor}");
        assert_eq!(derived, 1);
        assert_eq!(estimates["a|lib"], 108 << 20);
        assert_eq!(
            estimates["b|lib"],
            (200.0 * 1024.0 * 1024.0 * 1.08_f64).round() as u64
        );
        // No baseline: the stage's own, nothing derived.
        assert_eq!(from_baseline(&own, &Estimates::new()).2, 0);
    }

    #[test]
    fn a_carried_file_of_another_format_or_none_at_all_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("estimates.json");
        assert!(CarriedEstimates::read(&path).unwrap().is_none());
        std::fs::write(&path, "{\"app|bin\": 1}").unwrap();
        let err = format!("{:#}", CarriedEstimates::read(&path).unwrap_err());
        assert!(
            err.contains("not a file of rustc estimates written by"),
            "{err}"
        );
        let mut carried = CarriedEstimates::new("rustc 1.95.0");
        carried.format = 7;
        std::fs::write(&path, serde_json::to_string(&carried).unwrap()).unwrap();
        let err = format!("{:#}", CarriedEstimates::read(&path).unwrap_err());
        assert!(err.contains("format 7"), "{err}");
    }

    #[test]
    fn an_export_adds_to_what_the_file_carried_and_never_overwrites_another_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("estimates.json");
        let baseline = Estimates::from([("release:a@1.0.0|lib".into(), 100)]);
        assert_eq!(
            export(&path, "x86_64", "rustc 1", &[("baseline", baseline)]).unwrap(),
            (1, 1)
        );
        // Another machine measured `b`, and `a` again: both kept, `a` at its new peak.
        let again = Estimates::from([
            ("release:a@1.0.0|lib".into(), 120),
            ("release:b@2.0.0|lib".into(), 300),
        ]);
        let stages = [("baseline", again), ("optimized", Estimates::new())];
        assert_eq!(export(&path, "x86_64", "rustc 2", &stages).unwrap(), (2, 2));
        export(
            &path,
            "aarch64",
            "rustc 2",
            &[("baseline", Estimates::new())],
        )
        .unwrap();
        let carried = CarriedEstimates::read(&path).unwrap().unwrap();
        let kept = carried.stage("x86_64", "baseline").unwrap();
        assert_eq!(kept["release:a@1.0.0|lib"], 120);
        assert_eq!(kept["release:b@2.0.0|lib"], 300);
        assert_eq!(carried.rustc, "rustc 2");
        assert!(carried.stage("aarch64", "baseline").unwrap().is_empty());

        let other = dir.path().join("Cargo.toml");
        std::fs::write(&other, "[package]\n").unwrap();
        let err = format!(
            "{:#}",
            export(&other, "x86_64", "rustc", &stages).unwrap_err()
        );
        assert!(
            err.contains("refusing to write rustc estimates over"),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(&other).unwrap(), "[package]\n");
    }

    proptest::proptest! {
        #![proptest_config(crate::util::fuzz::config())]

        /// A stage's estimates and carried estimates, garbled: read or refused; never a
        /// panic or a hang.
        #[test]
        fn any_estimates_are_read_or_refused_without_a_panic_or_hang(
            stage in crate::util::fuzz::seed_mutants("rustc-estimates.json"),
            carried in crate::util::fuzz::mutants(
                serde_json::to_string(&CarriedEstimates {
                    format: CARRIED_FORMAT,
                    pgo_build_version: "0.1.0".into(),
                    rustc: "rustc 1.95.0".into(),
                    targets: [(
                        "x86_64-unknown-linux-gnu".to_owned(),
                        [(
                            "baseline".to_owned(),
                            [("release:app/app@0.1.0|bin".to_owned(), 134139904)].into(),
                        )]
                        .into(),
                    )]
                    .into(),
                })
                .unwrap()
                .as_bytes()
            ),
        ) {
            crate::util::fuzz::no_panic_or_hang(move || {
                let dir = tempfile::tempdir().unwrap();
                let (stage_path, carried_path) = (dir.path().join("s"), dir.path().join("c"));
                std::fs::write(&stage_path, &stage).unwrap();
                std::fs::write(&carried_path, &carried).unwrap();
                (
                    read_estimates(&stage_path).map(|e| e.len()).ok(),
                    CarriedEstimates::read(&carried_path).map(|c| c.is_some()).ok(),
                )
            });
        }
    }
}
