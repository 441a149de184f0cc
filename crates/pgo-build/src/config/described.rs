//! What the JSON Schema of `pgo-build.toml` says of values the config types parse
//! themselves (durations, percentages, sizes, rounds): what a user may write. Only
//! `#[schemars(with = ...)]` attributes name these types; nothing is parsed into them.

use schemars::JsonSchema;

/// A duration: whole seconds (`90`), or a number with a unit (`"90s"`, `"30m"`, `"2h"`).
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub(super) enum DurationValue {
    Seconds(u64),
    Text(#[schemars(regex(pattern = r"^\s*[0-9]+\s*(s|m|h)?\s*$"))] String),
}

/// A percentage in quotes, such as `"2%"`.
#[derive(JsonSchema)]
#[allow(dead_code)]
pub(super) struct Percentage(#[schemars(regex(pattern = r"^\s*[0-9]+(\.[0-9]+)?\s*%\s*$"))] String);

/// `"auto"`, or a size such as `"8G"` or `"512MiB"`.
#[derive(JsonSchema)]
#[allow(dead_code)]
pub(super) struct MemorySize(String);

/// A number of rounds (at least 1), or `"auto"`.
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub(super) enum RoundsValue {
    Count(#[schemars(range(min = 1))] u64),
    Auto(Auto),
}

/// `true` (cross-language PGO), `false`, or `"thin-lto"` (and cross-language ThinLTO).
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub(super) enum CrossLanguageValue {
    On(bool),
    Mode(ThinLto),
}

#[derive(JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[allow(dead_code)]
pub(super) enum ThinLto {
    ThinLto,
}

/// Cargo profile settings by key (`{ lto = "fat", codegen-units = 1 }`): strings, integers
/// or booleans.
#[derive(JsonSchema)]
#[allow(dead_code)]
pub(super) struct ProfileOverrides(std::collections::BTreeMap<String, ProfileValue>);

#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub(super) enum ProfileValue {
    Text(String),
    Number(i64),
    Flag(bool),
}

/// The keyword `"auto"`.
#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)]
pub(super) enum Auto {
    Auto,
}
