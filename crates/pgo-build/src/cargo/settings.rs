//! What decides how cargo builds a stage apart from its profile flags ([`BuildSettings`]),
//! the flags every stage gets, and the check that instrumented and optimized builds were made
//! with the same settings.

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

/// Added to every stage (so baseline and optimized stay comparable): `%b` in the profile file
/// pattern needs a build id, which not every linker adds by default.
pub const BUILD_ID_FLAG: &str = "-Clink-arg=-Wl,--build-id";

/// No value profiling (indirect call targets, memcpy sizes): in continuous-mode instrumented
/// builds, and in the optimized builds that use their profiles.
pub const VALUE_PROFILING_OFF: &str = "-Cllvm-args=-disable-vp";

/// Extra flags of a continuous-mode instrumented build: counters addressed through a bias so
/// they can live in the mmapped file (without it the file stays empty), no value profiling
/// (llvm-profdata rejects such files as truncated otherwise), and counters updated in memory
/// on every increment (else a process killed inside a loop loses that loop's counts).
pub const CONTINUOUS_FLAGS: [&str; 3] = [
    "-Cllvm-args=-runtime-counter-relocation",
    VALUE_PROFILING_OFF,
    "-Cllvm-args=-do-counter-promotion=false",
];

/// Everything that decides how cargo builds, apart from the stage's profile flags.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildSettings {
    pub profile: String,
    pub features: Vec<String>,
    /// The triple every build passes as `--target` (the host's unless `--target` says).
    #[serde(alias = "host")]
    pub target: String,
    pub rustc: String,
    /// The user's rustflags plus pgo-build's stage-independent ones.
    pub common_rustflags: Vec<String>,
    /// `[profile.*]` of the workspace manifest and `CARGO_PROFILE_*` variables: codegen-units,
    /// LTO and friends rename every function in a profile when they change.
    pub profile_settings: String,
    /// `cargo --config` values pgo-build adds (`profile.release.lto="fat"`, from `[build]
    /// profile_overrides` or an explore variant); also part of `profile_settings`.
    #[serde(default)]
    pub cargo_config: Vec<String>,
    /// The C compiler of cross-language builds (and the user's C variables then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub c: Option<crate::toolchain::cross_language::CSettings>,
    /// Symbol names kept across releases (`[pgo] stable_names`: see
    /// `wrappers::rustc::stable_names`); absent in stages recorded before it existed.
    #[serde(default)]
    pub stable_names: bool,
    /// LLVM's pre-instrumentation inlining (`[pgo] preinline`); off, every stage gets
    /// [`NO_PREINLINE_FLAG`]. Absent in stages recorded before it existed: on.
    #[serde(default = "preinline_on")]
    pub preinline: bool,
}

/// What `[pgo] preinline = false` adds to every stage's rustflags: LLVM then instruments (and
/// matches the profile to) each function as rustc emitted it, without the small functions it
/// would inline into it first, so a new rustc's changes to those leave its record usable.
pub const NO_PREINLINE_FLAG: &str = "-Cllvm-args=-disable-preinline";

fn preinline_on() -> bool {
    true
}

/// Whether rustflags leave LLVM's pre-instrumentation inlining on: not when they hold
/// [`NO_PREINLINE_FLAG`], as one word or as `-C llvm-args=-disable-preinline` (from `[pgo]
/// preinline = false`, or the user's or an explore variant's rustflags).
pub fn preinline_in(flags: &[String]) -> bool {
    let value = &NO_PREINLINE_FLAG[2..];
    !flags.iter().enumerate().any(|(at, flag)| {
        flag == NO_PREINLINE_FLAG || (flag == value && at > 0 && flags[at - 1] == "-C")
    })
}

/// Refuses a profile-use build whose settings differ from the instrumented build's: the
/// profile's function names and hashes would not match, naming each setting that changed.
pub fn check_same_settings(instrumented: &BuildSettings, now: &BuildSettings) -> Result<()> {
    if instrumented == now {
        return Ok(());
    }
    let mut differences = Vec::new();
    let mut compare = |what: &str, then: String, current: String| {
        if then != current {
            differences.push(format!("  {what}: instrumented with {then}, now {current}"));
        }
    };
    compare(
        "cargo profile",
        instrumented.profile.clone(),
        now.profile.clone(),
    );
    compare(
        "features",
        format!("{:?}", instrumented.features),
        format!("{:?}", now.features),
    );
    compare("target", instrumented.target.clone(), now.target.clone());
    compare("rustc", instrumented.rustc.clone(), now.rustc.clone());
    compare(
        "rustflags",
        format!("{:?}", instrumented.common_rustflags),
        format!("{:?}", now.common_rustflags),
    );
    let c = |settings: &BuildSettings| match &settings.c {
        Some(c) => {
            let variables: Vec<String> = c
                .user_env
                .iter()
                .map(|(k, v)| format!("{k}={v:?}"))
                .collect();
            format!(
                "{} ({}; mode {:?}{}; {})",
                c.clang.display(),
                c.version,
                c.mode,
                c.llvm_ar
                    .as_ref()
                    .map(|ar| format!(", archiver {}", ar.display()))
                    .unwrap_or_default(),
                if variables.is_empty() {
                    "no C variables".to_owned()
                } else {
                    variables.join(" ")
                }
            )
        }
        None => "the user's C compiler".to_owned(),
    };
    compare("C compiler", c(instrumented), c(now));
    compare(
        "profile settings",
        format!("{:?}", instrumented.profile_settings),
        format!("{:?}", now.profile_settings),
    );
    let stable = |settings: &BuildSettings| match settings.stable_names {
        true => "stable symbol names",
        false => "cargo's symbol names",
    };
    compare(
        "[pgo] stable_names",
        stable(instrumented).to_owned(),
        stable(now).to_owned(),
    );
    compare(
        "[pgo] preinline",
        instrumented.preinline.to_string(),
        now.preinline.to_string(),
    );
    bail!(
        "the build settings changed since the instrumented build:\n{}\nProfiles name functions by \
         crate hash and codegen unit, so an optimized build with other settings would silently \
         drop most of the profile. Re-run `pgo-build instrument` and `pgo-build train`, or \
         restore the settings.",
        differences.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pre_inlining_is_off_by_the_flag_in_one_word_or_two() {
        let flags = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        assert!(preinline_in(&flags(&["-Copt-level=3"])));
        assert!(!preinline_in(&flags(&[NO_PREINLINE_FLAG])));
        assert!(!preinline_in(&flags(&[
            "-C",
            "llvm-args=-disable-preinline"
        ])));
        assert!(preinline_in(&flags(&["llvm-args=-disable-preinline"])));
    }
}
