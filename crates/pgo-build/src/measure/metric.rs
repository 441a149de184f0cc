//! What `compare` and `explore` measure (the [`Metric`]) and for how many paired rounds
//! ([`Rounds`]): plain data, parsed from flags and `pgo-build.toml` alike, and recorded in the
//! report.

/// The equivalence margin when `[compare] margin` does not say: a variant is "the same" as
/// another only when the interval of their ratio lies within 1 ± this.
pub const DEFAULT_MARGIN: f64 = 0.02;

/// Counted rounds where a fixed number is wanted and none is given (explore's builds).
pub const DEFAULT_ROUNDS: usize = 10;

/// `--rounds auto`'s time budget when neither `--budget` nor `[compare] budget` says: a few
/// minutes, what a release job waits for a verdict without anyone minding.
pub const DEFAULT_BUDGET_SECS: u64 = 300;

/// How long counting instructions may take where the deciding metric leaves held-out verdicts
/// open, when neither `[compare] counting_budget` nor `gate --budget` says: a few workloads of
/// a few seconds each under callgrind, not a second pipeline.
pub const DEFAULT_COUNTING_BUDGET: std::time::Duration = std::time::Duration::from_secs(15 * 60);

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
    schemars::JsonSchema,
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

/// The names `--metric` and `[compare] metric` take for what pgo-build measures itself; any
/// other name is a metric the workloads report.
pub const BUILT_IN_METRICS: [&str; 4] = ["wall", "cpu", "instructions", "faults"];

/// What pgo-build reports of each service of a workload, of the service's own process tree
/// (not the client's): `service.<name>.<figure>`, with its unit. Instructions only when
/// counting (`--metric instructions`).
pub const SERVICE_FIGURES: [(&str, &str); 4] = [
    ("cpu", "s"),
    ("faults", "faults"),
    ("peak_rss", "MiB"),
    ("instructions", "instructions"),
];

/// The CPU time of a workload's own command and its children, without its services'.
pub const CLIENT_CPU: &str = "client.cpu";

/// The CPU time of a workload's services together, each in its own process tree: what a
/// server costs to serve the workload, and what decides a workload with services unless
/// `[compare] metric` or `--metric` says otherwise (the client's wall time includes the load
/// generator and the network, which PGO of the server does not change).
pub const SERVICES_CPU: &str = "services.cpu";

/// The name a service's own figure is reported under.
pub fn service_metric(service: &str, figure: &str) -> String {
    format!("service.{service}.{figure}")
}

/// The unit of a figure pgo-build reports itself about a run (`service.<name>.<figure>`,
/// `client.cpu`), and `None` for any other name. All of them are costs: lower is better.
pub fn built_in_unit(name: &str) -> Option<&'static str> {
    if name == CLIENT_CPU || name == SERVICES_CPU {
        return Some("s");
    }
    let (service, figure) = name.strip_prefix("service.")?.rsplit_once('.')?;
    if crate::util::names::check_service(service).is_err() {
        return None;
    }
    SERVICE_FIGURES
        .iter()
        .find(|(known, _)| *known == figure)
        .map(|(_, unit)| *unit)
}

/// What verdicts rest on: a figure pgo-build measures, or a metric the workloads report
/// (`[[workload.metric]]`, e.g. `p99_ms`, or `latency.p99` of a distribution).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decider {
    Measured(Metric),
    Reported(String),
}

impl Default for Decider {
    fn default() -> Decider {
        Decider::Measured(Metric::Wall)
    }
}

impl Decider {
    /// What the rounds measure: a reported metric comes with wall and CPU times.
    pub fn measured(&self) -> Metric {
        match self {
            Decider::Measured(metric) => *metric,
            Decider::Reported(_) => Metric::Wall,
        }
    }

    pub fn reported(&self) -> Option<&str> {
        match self {
            Decider::Measured(_) => None,
            Decider::Reported(name) => Some(name),
        }
    }
}

impl std::str::FromStr for Decider {
    type Err = String;

    fn from_str(text: &str) -> Result<Decider, String> {
        let measured = [
            Metric::Wall,
            Metric::Cpu,
            Metric::Instructions,
            Metric::Faults,
        ];
        if let Some(i) = BUILT_IN_METRICS.iter().position(|name| *name == text) {
            return Ok(Decider::Measured(measured[i]));
        }
        // A criterion benchmark of a held-out cargo bench (`criterion:parse/small`), or a
        // service's own figure (`service.db.cpu`).
        if text.starts_with(crate::measure::criterion::METRIC_PREFIX)
            || built_in_unit(text).is_some()
        {
            return Ok(Decider::Reported(text.to_owned()));
        }
        // `latency.p99`: a percentile of a distribution metric.
        let base = match text.rsplit_once(".p") {
            Some((base, p)) if p.parse::<u8>().is_ok() => base,
            _ => text,
        };
        crate::util::names::check_metric(base).map_err(|reason| {
            format!(
                "`{text}`: neither wall, cpu, instructions nor faults, nor a metric name: {reason}"
            )
        })?;
        Ok(Decider::Reported(text.to_owned()))
    }
}

/// Which workloads a comparison is made on when none are named (`compare --role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CompareRole {
    Holdout,
    Train,
    All,
}

/// `--rounds N` or `--rounds auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rounds {
    Fixed(usize),
    Auto,
}

/// The most counted rounds a comparison takes: the exact signed-rank distribution grows with
/// the fourth power of the rounds (1000 would take 8 GB), and past this an interval is as
/// narrow as the machine's noise allows.
pub const MAX_ROUNDS: usize = 200;

impl std::str::FromStr for Rounds {
    type Err = String;

    fn from_str(text: &str) -> Result<Rounds, String> {
        if text == "auto" {
            return Ok(Rounds::Auto);
        }
        match text.parse::<usize>() {
            Ok(rounds) if (1..=MAX_ROUNDS).contains(&rounds) => Ok(Rounds::Fixed(rounds)),
            _ => Err(format!(
                "`{text}`: expected a number of rounds (1 to {MAX_ROUNDS}) or `auto`"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_names_parse_into_what_decides() {
        for (text, metric) in [
            ("wall", Metric::Wall),
            ("cpu", Metric::Cpu),
            ("instructions", Metric::Instructions),
            ("faults", Metric::Faults),
        ] {
            assert_eq!(text.parse(), Ok(Decider::Measured(metric)));
        }
        for reported in ["p99_ms", "latency.p99", "criterion:parse/small"] {
            assert_eq!(reported.parse(), Ok(Decider::Reported(reported.to_owned())));
        }
        assert!("late ncy".parse::<Decider>().is_err());
        assert!("a/b".parse::<Decider>().is_err());
        assert_eq!(
            "p99_ms".parse::<Decider>().unwrap().measured(),
            Metric::Wall
        );
    }
}
