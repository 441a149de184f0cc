//! The wrapper's part in carrying a committed profile over (see `profiles::carry`): each crate
//! compiles with a profile of its own, first the committed one (its records already offered
//! under every codegen unit name of their crate); when rustc's warnings still show functions
//! with data under another name, their records are added under the new names and the crate
//! compiles once more, with the same command line. With the offer this is rare.
//!
//! The same command line, because rustc hashes its options (the `-Cprofile-use` path among
//! them) into the crate's metadata, which crates that depend on it may already have read
//! (cargo starts them on the `.rmeta` artifact, which is passed on at once): only the file's
//! content changes, so the metadata is the same. The second compile bypasses the user's wrapper
//! (sccache hashes the path, not the content, and would hand back the first).
//!
//! A crate whose lints cargo caps (`--cap-lints allow`: registry dependencies) shows no
//! warnings at all, so its cap is raised to `warn` and its warnings other than the profile's
//! are dropped from what cargo sees.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::profiles::carry::{self, CarryPlan, Missing, TextProfile};
use crate::profiles::diagnostics::{Kind, classify};

/// Names the carry setup (a JSON [`CarrySetup`]) of an optimized build from a committed profile.
pub const ENV: &str = "PGO_BUILD_CARRY";

/// What pgo-build prepares before the build.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CarrySetup {
    /// The indexed profile `-Cprofile-use` names in the build's flags.
    pub profile: PathBuf,
    /// Its text form (`llvm-profdata merge --text`).
    pub text: PathBuf,
    /// llvm-profdata, which turns a carried text profile back into an indexed one.
    pub profdata: PathBuf,
    /// Where each crate's own profile goes.
    pub dir: PathBuf,
    /// One [`CarryRecord`] a line.
    pub log: PathBuf,
}

impl CarrySetup {
    pub fn from_env() -> Option<CarrySetup> {
        let path = std::env::var_os(ENV)?;
        let text = std::fs::read_to_string(&path).ok()?;
        serde_json::from_str(&text).ok()
    }
}

/// What one crate's compile carried, as the wrapper logged it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CarryRecord {
    pub krate: String,
    pub plan: CarryPlan,
    /// Whether it compiled a second time with the carried records.
    pub recompiled: bool,
    /// Wall time of the first compile, which the second one repeats.
    pub first_compile_secs: f64,
    /// Why nothing could be carried (the first compile stands).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A crate's command line, changed for carrying: its own profile in place of the committed
/// one, and its lints capped at `warn` rather than `allow`.
pub struct Carrying {
    pub args: Vec<OsString>,
    own_profile: PathBuf,
    capped: bool,
}

impl Carrying {
    /// `None` for a compile that does not use the committed profile (build scripts, proc
    /// macros, queries).
    pub fn prepare(args: &[OsString], setup: &CarrySetup) -> Result<Option<Carrying>> {
        let profile = setup.profile.to_string_lossy().into_owned();
        let text: Vec<String> = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let uses = |arg: &str| {
            arg.strip_prefix("-C")
                .map(str::trim_start)
                .and_then(|a| a.strip_prefix("profile-use="))
                == Some(profile.as_str())
                || arg.strip_prefix("profile-use=") == Some(profile.as_str())
        };
        if !text.iter().any(|a| uses(a)) {
            return Ok(None);
        }
        let value_after = |flag: &str| {
            text.windows(2)
                .find(|pair| pair[0] == flag)
                .map(|pair| pair[1].clone())
        };
        let krate = value_after("--crate-name").unwrap_or_default();
        let extra = text
            .windows(2)
            .find_map(|pair| {
                (pair[0] == "-C")
                    .then(|| pair[1].strip_prefix("extra-filename="))
                    .flatten()
            })
            .unwrap_or_default()
            .to_owned();
        crate::util::files::create_dir_all(&setup.dir)?;
        let own_profile = setup.dir.join(format!("{krate}{extra}.profdata"));
        // The committed profile first (a link: the second compile's file replaces it).
        let fresh = own_profile.with_extension("profdata.fresh");
        let _ = std::fs::remove_file(&fresh);
        std::fs::hard_link(&setup.profile, &fresh)
            .or_else(|_| std::fs::copy(&setup.profile, &fresh).map(|_| ()))
            .with_context(|| format!("could not create {}", fresh.display()))?;
        std::fs::rename(&fresh, &own_profile)
            .with_context(|| format!("could not create {}", own_profile.display()))?;
        let own = own_profile.to_string_lossy();
        let mut capped = false;
        let mut changed = Vec::with_capacity(args.len());
        let mut previous: Option<&str> = None;
        for arg in &text {
            let replaced = if uses(arg) {
                match arg.starts_with("-C") {
                    true => format!("-Cprofile-use={own}"),
                    false => format!("profile-use={own}"),
                }
            } else if previous == Some("--cap-lints") && arg == "allow" {
                capped = true;
                "warn".to_owned()
            } else if arg == "--cap-lints=allow" {
                capped = true;
                "--cap-lints=warn".to_owned()
            } else {
                arg.clone()
            };
            changed.push(OsString::from(replaced));
            previous = Some(arg);
        }
        Ok(Some(Carrying {
            args: changed,
            own_profile,
            capped,
        }))
    }

    /// What the first compile said, read for functions without data; the crate's own profile
    /// rewritten when some can be carried. Returns the plan.
    pub fn plan(&self, setup: &CarrySetup, output: &[String]) -> Result<CarryPlan> {
        let mut missing = Vec::new();
        let mut changed = BTreeSet::new();
        for message in output.iter().filter_map(|line| diagnostic_message(line)) {
            match classify(&message) {
                Some(Kind::MissingFunction) => missing.extend(Missing::parse(&message)),
                Some(Kind::HashMismatch) => {
                    changed.extend(
                        message
                            .split_whitespace()
                            .find(|w| w.starts_with("_ZN") || w.starts_with("_R"))
                            .map(str::to_owned),
                    );
                }
                _ => {}
            }
        }
        if missing.is_empty() {
            return Ok(CarryPlan::default());
        }
        let text = std::fs::read_to_string(&setup.text)
            .with_context(|| format!("could not read {}", setup.text.display()))?;
        let profile = TextProfile::parse(&text);
        let plan = carry::plan(&profile, &missing);
        if plan.worth_recompiling() {
            let carried = self.own_profile.with_extension("proftext");
            crate::util::files::write(&carried, profile.with_carried(&plan).as_bytes())?;
            let partial = self.own_profile.with_extension("profdata.partial");
            let status = std::process::Command::new(&setup.profdata)
                .arg("merge")
                .arg(&carried)
                .arg("-o")
                .arg(&partial)
                .status()
                .with_context(|| format!("could not start {}", setup.profdata.display()))?;
            anyhow::ensure!(
                status.success(),
                "{} merge {} failed ({status})",
                setup.profdata.display(),
                carried.display()
            );
            std::fs::rename(&partial, &self.own_profile)
                .with_context(|| format!("could not write {}", self.own_profile.display()))?;
            let _ = std::fs::remove_file(&carried);
        }
        Ok(plan)
    }

    /// Whether cargo should see this line of rustc's output: of a crate whose lints cargo
    /// capped, only the profile's warnings (and everything that is not a warning).
    pub fn passes(&self, line: &str) -> bool {
        if !self.capped {
            return true;
        }
        let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
            return true;
        };
        if value["$message_type"] != "diagnostic" || value["level"] == "error" {
            return true;
        }
        value["message"]
            .as_str()
            .is_some_and(|m| classify(m).is_some())
    }
}

/// The message of a diagnostic line (cargo's JSON, or rustc's human form).
fn diagnostic_message(line: &str) -> Option<String> {
    match serde_json::from_str::<serde_json::Value>(line) {
        Ok(value) => Some(value["message"].as_str()?.to_owned()),
        Err(_) => Some(line.strip_prefix("warning: ")?.to_owned()),
    }
}

/// Whether a line of rustc's output is an artifact notice (`--json=artifacts`): cargo starts
/// the crates that need only metadata on the `.rmeta` one, so it is passed on at once.
pub fn is_artifact_notice(line: &str) -> bool {
    line.starts_with("{\"$message_type\":\"artifact\"")
}

/// rustc's stderr, read while it runs: artifact notices written through at once (unless
/// `already` has them: a second compile's), the rest kept for after.
pub fn read_output(
    stderr: impl std::io::Read + Send + 'static,
    already: BTreeSet<String>,
) -> std::thread::JoinHandle<(Vec<String>, BTreeSet<String>)> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut notices = already;
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if is_artifact_notice(&line) {
                if notices.insert(line.clone()) {
                    let mut err = std::io::stderr().lock();
                    let _ = writeln!(err, "{line}");
                }
            } else {
                kept.push(line);
            }
        }
        (kept, notices)
    })
}

/// Appends `record` to the carry log (a failure is only said: the build's outcome is rustc's).
pub fn log(path: &Path, record: &CarryRecord) {
    if let Err(err) = crate::wrappers::linker::append_record(path, record) {
        crate::util::printer::stderr_line(&format!(
            "pgo-build (rustc wrapper): could not record the carried profile in {}: {err:#}",
            path.display()
        ));
    }
}

/// Every line of a stage's carry log.
pub fn read_log(path: &Path) -> Vec<CarryRecord> {
    std::fs::read_to_string(path)
        .map(|text| {
            text.lines()
                .filter_map(|line| serde_json::from_str(line).ok())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_gets_the_crates_own_profile_and_lints_capped_at_warn() {
        let dir = tempfile::tempdir().unwrap();
        let committed = dir.path().join("committed.profdata");
        std::fs::write(&committed, b"profile").unwrap();
        let setup = CarrySetup {
            profile: committed.clone(),
            text: dir.path().join("committed.proftext"),
            profdata: "llvm-profdata".into(),
            dir: dir.path().join("crates"),
            log: dir.path().join("carry.jsonl"),
        };
        let line = format!(
            "--crate-name regex --cap-lints allow -C extra-filename=-abc -Cprofile-use={}",
            committed.display()
        );
        let args: Vec<OsString> = line.split(' ').map(OsString::from).collect();
        let carrying = Carrying::prepare(&args, &setup).unwrap().unwrap();
        let own = dir.path().join("crates/regex-abc.profdata");
        assert_eq!(std::fs::read(&own).unwrap(), b"profile");
        let out: Vec<String> = carrying
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(out[3], "warn");
        assert_eq!(out[6], format!("-Cprofile-use={}", own.display()));
        // A capped crate's own lints stay hidden; the profile's warnings and errors do not.
        let warning = |message: &str, level: &str| {
            serde_json::json!({"$message_type": "diagnostic", "message": message, "level": level})
                .to_string()
        };
        assert!(!carrying.passes(&warning("unused variable: `x`", "warning")));
        assert!(carrying.passes(&warning(
            "regex.a-cgu.0: no profile data available for function _ZN1f Hash = 1 up to 0 count discarded",
            "warning"
        )));
        assert!(carrying.passes(&warning("mismatched types", "error")));
        assert!(carrying.passes("{\"$message_type\":\"artifact\",\"artifact\":\"x.rmeta\"}"));

        let other = "--crate-name build_script_build build.rs";
        let args: Vec<OsString> = other.split(' ').map(OsString::from).collect();
        assert!(Carrying::prepare(&args, &setup).unwrap().is_none());
    }
}
