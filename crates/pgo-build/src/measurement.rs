//! What `compare` and `explore` measure (the [`Metric`]) and for how many paired rounds
//! ([`Rounds`]): plain data, parsed from flags and `pgo-build.toml` alike, and recorded in the
//! report.

/// The equivalence margin when `[compare] margin` does not say: a variant is "the same" as
/// another only when the interval of their ratio lies within 1 ± this.
pub const DEFAULT_MARGIN: f64 = 0.02;

/// Counted rounds when neither `--rounds` nor `[compare] rounds` says.
pub const DEFAULT_ROUNDS: usize = 10;

/// With `--metric instructions`: one count per variant and one repeat that measures how
/// stable the counts are.
pub const INSTRUCTION_ROUNDS: usize = 2;

#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    #[default]
    Wall,
    Cpu,
    Instructions,
    /// Minor and major page faults of the process tree: what start-up order changes.
    Faults,
}

/// `--rounds N` or `--rounds auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rounds {
    Fixed(usize),
    Auto,
}

impl std::str::FromStr for Rounds {
    type Err = String;

    fn from_str(text: &str) -> Result<Rounds, String> {
        if text == "auto" {
            return Ok(Rounds::Auto);
        }
        match text.parse::<usize>() {
            Ok(rounds) if rounds >= 1 => Ok(Rounds::Fixed(rounds)),
            _ => Err(format!(
                "`{text}`: expected a number of rounds (at least 1) or `auto`"
            )),
        }
    }
}
