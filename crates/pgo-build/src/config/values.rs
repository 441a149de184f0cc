//! The values of `pgo-build.toml` that have a meaning beyond their TOML type: durations,
//! sizes, size growth, rounds and the cross-language mode, parsed at load so a bad one fails
//! every command with the file and line.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

use crate::measure::memory::MemoryBudget;
use crate::measure::metric::Rounds;

pub(super) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);
const DEFAULT_GRACE_PERIOD: Duration = Duration::from_secs(10);

/// Which C compiler a build's build scripts use, and whether its C is profiled
/// (`[pgo] cross_language`; see cross_language.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CBuild {
    /// The user's C compiler, as cargo would run it: pgo-build adds nothing.
    #[default]
    User,
    /// clang of rustc's LLVM in every stage, without profile flags (explore's `clang`
    /// variant: the compiler switch alone).
    Clang,
    /// Cross-language PGO: the baseline keeps the user's compiler (what they would ship
    /// otherwise); the instrumented and optimized stages build the C with clang of rustc's
    /// LLVM and the same profile flags as the Rust.
    Pgo,
    /// Cross-language PGO and cross-language ThinLTO: the C as LLVM bitcode (`-flto=thin`,
    /// archived by llvm-ar), the Rust too (`-Clinker-plugin-lto`), optimized together at the
    /// link by lld (rustc's rust-lld on x86_64 Linux), which must read LLVM bitcode of rustc's
    /// major.
    #[serde(rename = "pgo-xlto")]
    PgoXlto,
}

/// A size growth limit, `"5%"`: the fraction it allows, and the text it was written as.
#[derive(Debug, Clone, PartialEq)]
pub struct Growth {
    pub fraction: f64,
    pub text: String,
}

impl std::str::FromStr for Growth {
    type Err = String;

    fn from_str(text: &str) -> Result<Growth, String> {
        let number = text.trim().strip_suffix('%').map(str::trim);
        match number.and_then(|n| n.parse::<f64>().ok()) {
            Some(percent) if percent.is_finite() && percent >= 0.0 => Ok(Growth {
                fraction: percent / 100.0,
                text: text.trim().to_owned(),
            }),
            _ => Err(format!(
                "invalid size growth {text:?}: expected a percentage such as \"5%\" (0% or more)"
            )),
        }
    }
}

pub(super) fn deserialize_memory_budget<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<MemoryBudget, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Written {
        Text(String),
        Other(toml::Value),
    }
    match Written::deserialize(deserializer)? {
        Written::Text(text) => text.parse().map_err(serde::de::Error::custom),
        Written::Other(value) => Err(serde::de::Error::custom(format!(
            "memory_budget = {value}: expected \"auto\" or a size in quotes, like \"8G\""
        ))),
    }
}

pub(super) fn deserialize_growth<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Growth>, D::Error> {
    let text = String::deserialize(deserializer)?;
    text.parse().map(Some).map_err(serde::de::Error::custom)
}

/// `[compare] margin = "2%"`: a fraction below one half.
pub(super) fn deserialize_margin<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<f64>, D::Error> {
    let text = String::deserialize(deserializer)?;
    match text.parse::<Growth>() {
        Ok(growth) if growth.fraction > 0.0 && growth.fraction < 0.5 => Ok(Some(growth.fraction)),
        _ => Err(serde::de::Error::custom(format!(
            "margin = {text:?}: expected a percentage above 0% and below 50%, such as \"2%\""
        ))),
    }
}

pub(super) fn deserialize_cross_language<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<CBuild, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Value {
        On(bool),
        Mode(String),
    }
    match Value::deserialize(deserializer)? {
        Value::On(true) => Ok(CBuild::Pgo),
        Value::On(false) => Ok(CBuild::User),
        Value::Mode(mode) if mode == CROSS_LANGUAGE_THIN_LTO => Ok(CBuild::PgoXlto),
        Value::Mode(other) => Err(serde::de::Error::custom(format!(
            "cross_language = {other:?}: expected true, false or \"{CROSS_LANGUAGE_THIN_LTO}\""
        ))),
    }
}

/// `[pgo] cross_language = "thin-lto"`: cross-language PGO and ThinLTO.
pub const CROSS_LANGUAGE_THIN_LTO: &str = "thin-lto";

pub(super) fn default_timeout() -> Duration {
    DEFAULT_TIMEOUT
}

pub(super) fn default_grace_period() -> Duration {
    DEFAULT_GRACE_PERIOD
}

const DURATION_FORMAT: &str =
    "a duration: whole seconds (90) or a string with a unit (\"90s\", \"30m\", \"2h\")";

/// A duration: whole seconds (`90`) or a number with a unit (`"90s"`, `"30m"`, `"2h"`).
pub(super) fn deserialize_duration<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Duration, D::Error> {
    struct DurationVisitor;
    impl serde::de::Visitor<'_> for DurationVisitor {
        type Value = Duration;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str(DURATION_FORMAT)
        }

        fn visit_u64<E: serde::de::Error>(self, secs: u64) -> Result<Duration, E> {
            Ok(Duration::from_secs(secs))
        }

        fn visit_i64<E: serde::de::Error>(self, secs: i64) -> Result<Duration, E> {
            u64::try_from(secs)
                .map(Duration::from_secs)
                .map_err(|_| E::custom(format!("{secs} is negative: expected {DURATION_FORMAT}")))
        }

        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Duration, E> {
            parse_duration(text).map_err(E::custom)
        }
    }
    deserializer.deserialize_any(DurationVisitor)
}

/// An optional [`deserialize_duration`] (present keys only: serde's default covers absence).
pub(super) fn deserialize_optional_duration<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Duration>, D::Error> {
    deserialize_duration(deserializer).map(Some)
}

/// A workload's timeout: a duration above zero (a zero timeout would stop it at once).
pub(super) fn deserialize_timeout<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Duration, D::Error> {
    let timeout = deserialize_duration(deserializer)?;
    if timeout.is_zero() {
        return Err(serde::de::Error::custom(
            "timeout must be above 0: the workload would be stopped as soon as it starts",
        ));
    }
    Ok(timeout)
}

/// A share, 0 to 1 (`[pgo] max_stale`, `min_overlap`): NaN, negatives and values above 1 are
/// refused, and a value above 1 up to 100 is taken for a percentage written without `%`,
/// which the error says.
pub(super) fn deserialize_share<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<f64>, D::Error> {
    let share = f64::deserialize(deserializer)?;
    if (0.0..=1.0).contains(&share) {
        return Ok(Some(share));
    }
    let hint = if share > 1.0 && share <= 100.0 {
        format!(
            " ({share} reads as {}%: write {} for {share}%)",
            share * 100.0,
            share / 100.0
        )
    } else {
        String::new()
    };
    Err(serde::de::Error::custom(format!(
        "{share} is not a share: give a number from 0 to 1{hint}"
    )))
}

/// `[compare] rounds`: at least one.
pub(super) fn deserialize_rounds<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Rounds>, D::Error> {
    struct RoundsVisitor;
    impl serde::de::Visitor<'_> for RoundsVisitor {
        type Value = Rounds;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a number of rounds (at least 1) or \"auto\"")
        }

        fn visit_i64<E: serde::de::Error>(self, rounds: i64) -> Result<Rounds, E> {
            if rounds < 1 {
                return Err(E::custom(format!(
                    "rounds = {rounds}: a comparison needs at least 1 round (7 or more for a \
                     verdict), or \"auto\""
                )));
            }
            if rounds > crate::measure::metric::MAX_ROUNDS as i64 {
                return Err(E::custom(format!(
                    "rounds = {rounds}: at most {} (or \"auto\")",
                    crate::measure::metric::MAX_ROUNDS
                )));
            }
            Ok(Rounds::Fixed(rounds as usize))
        }

        fn visit_u64<E: serde::de::Error>(self, rounds: u64) -> Result<Rounds, E> {
            self.visit_i64(i64::try_from(rounds).unwrap_or(i64::MAX))
        }

        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Rounds, E> {
            text.parse().map_err(E::custom)
        }
    }
    deserializer.deserialize_any(RoundsVisitor).map(Some)
}

pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| {
        format!("invalid duration {text:?}: expected e.g. 90, \"90s\", \"30m\", \"2h\"")
    })?;
    let scale = match unit.trim() {
        "" | "s" => 1,
        "m" | "min" => 60,
        "h" => 3600,
        other => {
            return Err(format!(
                "invalid duration {text:?}: unknown unit {other:?} (use s, m or h)"
            ));
        }
    };
    // Longer than a year is a typo (`9000000000s`), and would overflow the deadlines it sets.
    match number.checked_mul(scale) {
        Some(seconds) if seconds <= MAX_DURATION_SECS => Ok(Duration::from_secs(seconds)),
        _ => Err(format!(
            "duration {text:?} is out of range: at most a year ({MAX_DURATION_SECS} seconds)"
        )),
    }
}

/// The longest duration a configuration or flag may give.
pub const MAX_DURATION_SECS: u64 = 366 * 24 * 3600;

/// The command of a workload or a service: a shell string, or an argv list (never empty).
// Read from a file, it never is: `command = []`, `""` and `[""]` are refused there, for
// workloads, services, their readiness checks and stop commands alike. A workload without
// `command` has an empty one internally, and runs `cargo` instead.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(try_from = "WrittenCommand")]
pub enum WorkloadCommand {
    /// Run with `sh -c`.
    Shell(String),
    /// Run directly; `${PGO_BUILD_…}` in the words is expanded.
    Argv(Vec<String>),
}

/// A command as written in `pgo-build.toml`, before it is known to name a program.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
enum WrittenCommand {
    /// Run with `sh -c`.
    Shell(#[schemars(length(min = 1))] String),
    /// Run directly; `${PGO_BUILD_…}` in the words is expanded.
    Argv(#[schemars(length(min = 1))] Vec<String>),
}

impl TryFrom<WrittenCommand> for WorkloadCommand {
    type Error = String;

    fn try_from(written: WrittenCommand) -> Result<WorkloadCommand, String> {
        match written {
            WrittenCommand::Shell(line) if line.trim().is_empty() => {
                Err("an empty `command`: give a shell line to run".to_owned())
            }
            WrittenCommand::Argv(words) if words.first().is_none_or(|w| w.trim().is_empty()) => {
                Err("an empty `command`: an argv list starts with the program to run".to_owned())
            }
            WrittenCommand::Shell(line) => Ok(WorkloadCommand::Shell(line)),
            WrittenCommand::Argv(words) => Ok(WorkloadCommand::Argv(words)),
        }
    }
}

/// The 1-based line of a byte offset into the file's text: errors name it.
pub fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}
