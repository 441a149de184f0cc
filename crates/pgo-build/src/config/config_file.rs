//! The [`Config`]: `pgo-build.toml` loaded, its values parsed into their types and checked
//! (unknown keys, wrong types and meaningless values fail every command, naming file and line),
//! and the questions the steps ask of it (train runs, workloads by role, metrics reported).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use super::sections::{
    BoltSection, BuildSection, BuildVariant, CompareSection, ExploreSection, PgoSection,
};
use super::services::Service;

/// The most runs a workload may split into (`shards = K`): more is a typo, and every shard is
/// a run with its own records.
const MAX_SHARDS: usize = 1000;
use super::values::{CBuild, WorkloadCommand, line_of};
use super::workload::{Role, Workload};
use crate::measure::metric::Decider;
use crate::measure::reported_metrics::MetricSpec;

pub const CONFIG_FILE_NAME: &str = "pgo-build.toml";

#[derive(Debug, Default, Clone)]
pub struct Config {
    /// The file it came from; `None` when there is no config file.
    pub path: Option<PathBuf>,
    pub build: BuildSection,
    pub pgo: PgoSection,
    pub bolt: BoltSection,
    pub compare: CompareSection,
    pub explore: ExploreSection,
    pub workloads: Vec<Workload>,
    pub services: Vec<Service>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ConfigFile {
    #[serde(default)]
    build: BuildSection,
    #[serde(default)]
    pgo: PgoSection,
    #[serde(default)]
    bolt: BoltSection,
    #[serde(default)]
    compare: CompareSection,
    #[serde(default)]
    explore: ExploreSection,
    /// A command pgo-build runs: training (`role = "train"`) or measured, never trained on
    /// (`role = "holdout"`).
    #[serde(default, rename = "workload")]
    workloads: Vec<Workload>,
    /// A server or daemon started before each run of the workloads that name it, and
    /// stopped after it.
    #[serde(default, rename = "service")]
    services: Vec<Service>,
}

impl Config {
    /// Loads `explicit` (which must exist) or `<workspace root>/pgo-build.toml` (optional).
    pub fn load(explicit: Option<&Path>, workspace_root: &Path) -> Result<Config> {
        let path = match explicit {
            Some(path) => {
                if !path.is_file() {
                    bail!(
                        "the configuration file {} given with --config does not exist",
                        path.display()
                    );
                }
                path.to_owned()
            }
            None => {
                let path = workspace_root.join(CONFIG_FILE_NAME);
                if !path.is_file() {
                    return Ok(Config::default());
                }
                path
            }
        };
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("could not read {}", path.display()))?;
        let config = Config::parse(&text, &path)?;
        config.check_cwds(&text, workspace_root)?;
        Ok(config)
    }

    /// Every workload's `cwd` exists (found now, not when the workload is about to run).
    fn check_cwds(&self, text: &str, workspace_root: &Path) -> Result<()> {
        for workload in &self.workloads {
            if let Some(cwd) = &workload.cwd
                && !workspace_root.join(cwd).is_dir()
            {
                bail!(
                    "invalid configuration in {}, line {}: workload {:?} has cwd = {:?}, but {} \
                     is not a directory (cwd is relative to the workspace root)",
                    self.display_path(),
                    line_of(text, workload.name.span().start),
                    workload.name(),
                    cwd.display(),
                    workspace_root.join(cwd).display()
                );
            }
        }
        Ok(())
    }

    pub fn parse(text: &str, path: &Path) -> Result<Config> {
        let file: ConfigFile = toml::from_str(text).map_err(|err| {
            let line = err
                .span()
                .map(|span| format!(", line {}", line_of(text, span.start)))
                .unwrap_or_default();
            anyhow::anyhow!(
                "invalid configuration in {}{line}: {}",
                path.display(),
                err.message()
            )
        })?;
        let config = Config {
            path: Some(path.to_owned()),
            build: file.build,
            pgo: file.pgo,
            bolt: file.bolt,
            compare: file.compare,
            explore: file.explore,
            workloads: file.workloads,
            services: file.services,
        };
        let mut config = config;
        config.validate(text)?;
        let services = config.services.clone();
        for workload in &mut config.workloads {
            workload.service_specs = workload
                .services
                .iter()
                .map(|name| {
                    services
                        .iter()
                        .find(|s| s.name() == name)
                        .cloned()
                        .expect("checked by validate")
                })
                .collect();
        }
        Ok(config)
    }

    /// Every problem of the file, not only the first: one error naming each (its line).
    fn validate(&self, text: &str) -> Result<()> {
        let path = self.display_path();
        let mut problems: Vec<anyhow::Error> = Vec::new();
        if let Err(reason) = self.variant().check() {
            problems.push(anyhow::anyhow!(
                "invalid configuration in {path}, [build]: {reason}"
            ));
        }
        for variant in &self.explore.variant {
            problems.extend(self.check_explore_variant(text, &path, variant).err());
        }
        let mut seen = BTreeMap::new();
        for workload in &self.workloads {
            problems.extend(self.check_workload(text, &path, workload, &mut seen).err());
        }
        problems.extend(self.validate_services(text).err());
        let mut runs = BTreeMap::new();
        // The runs of workloads that passed their own checks: `shards` is bounded by then.
        let checked = problems.is_empty();
        for run in self
            .workloads
            .iter()
            .filter(|_| checked)
            .flat_map(Workload::parts)
        {
            if let Some(other) = runs.insert(run.run_name(), run.name().to_owned())
                // Two workloads of one name: said above, as that.
                && !(other == run.name() && run.run_name() == run.name())
            {
                problems.push(anyhow::anyhow!(
                    "invalid configuration in {path}: a run of workload {:?} and workload \
                     {other:?} are both named {:?} (parts of a workload with shards = K are \
                     named <name>.part<I>of<K>); rename one",
                    run.name(),
                    run.run_name()
                ));
            }
        }
        crate::util::problems::all_of(problems, |count| format!("{count} problems in {path}"))
    }

    fn check_explore_variant(
        &self,
        text: &str,
        path: &str,
        variant: &super::sections::ExploreVariant,
    ) -> Result<()> {
        let line = line_of(text, variant.name.span().start);
        let name = variant.name.get_ref();
        if let Err(reason) = crate::util::names::check_variant(name) {
            bail!("invalid configuration in {path}, line {line}: {reason}");
        }
        let settings = BuildVariant {
            profile_overrides: variant.profile_overrides.clone(),
            rustflags: variant.rustflags.clone(),
            c: CBuild::User,
        };
        if let Err(reason) = settings.check() {
            bail!(
                "invalid configuration in {path}, line {line}: explore variant {name:?}: {reason}"
            );
        }
        Ok(())
    }

    fn check_workload(
        &self,
        text: &str,
        path: &str,
        workload: &Workload,
        seen: &mut BTreeMap<String, usize>,
    ) -> Result<()> {
        let line = line_of(text, workload.name.span().start);
        let name = workload.name();
        if let Err(reason) = crate::util::names::check_workload(name) {
            bail!("invalid configuration in {path}, line {line}: {reason}");
        }
        if let Some(first) = seen.insert(name.to_owned(), line) {
            bail!(
                "invalid configuration in {path}, line {line}: workload {name:?} is already \
                 defined at line {first}"
            );
        }
        let empty = match &workload.command {
            WorkloadCommand::Shell(line) => line.trim().is_empty(),
            WorkloadCommand::Argv(words) => words.is_empty(),
        };
        match &workload.cargo {
            Some(_) if !empty => bail!(
                "invalid configuration in {path}, line {line}: workload {name:?} has both \
                 `command` and `cargo`; give one"
            ),
            Some(cargo) => crate::config::cargo_workload::check(cargo).map_err(|reason| {
                anyhow::anyhow!(
                    "invalid configuration in {path}, line {line}: workload \
                             {name:?}: {reason}"
                )
            })?,
            None if empty => bail!(
                "invalid configuration in {path}, line {line}: workload {name:?} has an \
                 empty `command` (give `command`, or `cargo` for a cargo bench/test/run)"
            ),
            None => {}
        }
        if workload.shards > MAX_SHARDS {
            bail!(
                "invalid configuration in {path}, line {line}: workload {name:?} has shards \
                 = {}; at most {MAX_SHARDS} (each shard is one run of the workload)",
                workload.shards
            );
        }
        if workload.shards == 0 {
            bail!(
                "invalid configuration in {path}, line {line}: workload {name:?} has shards \
                 = 0; it must run at least once (shards = 1, the default, runs it whole)"
            );
        }
        if workload.shards > 1 && workload.role != Role::Train {
            bail!(
                "invalid configuration in {path}, line {line}: workload {name:?} has shards \
                 = {}, but only train workloads are split into shards (a holdout workload \
                 is measured whole)",
                workload.shards
            );
        }
        Ok(())
    }

    /// The metric names the workloads report, as `--metric` takes them.
    pub fn reported_metrics(&self) -> Vec<String> {
        let mut reported: Vec<String> = self
            .workloads
            .iter()
            .flat_map(|w| &w.metrics)
            .flat_map(MetricSpec::compared_names)
            .collect();
        // What pgo-build reports itself of the services a workload names, and its client.
        for workload in self.workloads.iter().filter(|w| !w.services.is_empty()) {
            for service in &workload.services {
                for (figure, _) in crate::measure::metric::SERVICE_FIGURES {
                    reported.push(crate::measure::metric::service_metric(service, figure));
                }
            }
            reported.push(crate::measure::metric::CLIENT_CPU.to_owned());
            reported.push(crate::measure::metric::SERVICES_CPU.to_owned());
        }
        let mut seen = std::collections::BTreeSet::new();
        reported.retain(|name| seen.insert(name.clone()));
        reported
    }

    /// The file name for messages, or where the file would be.
    pub fn display_path(&self) -> String {
        match &self.path {
            Some(path) => path.display().to_string(),
            None => CONFIG_FILE_NAME.to_owned(),
        }
    }

    pub fn workloads_with_role(&self, role: Role) -> impl Iterator<Item = &Workload> {
        self.workloads.iter().filter(move |w| w.role == role)
    }

    /// The names of the workloads of `role`, in configuration order.
    pub fn workload_names(&self, role: Role) -> Vec<String> {
        self.workloads_with_role(role)
            .map(|w| w.name().to_owned())
            .collect()
    }

    pub fn workload(&self, name: &str) -> Option<&Workload> {
        self.workloads.iter().find(|w| w.name() == name)
    }

    /// Every run of the train workloads, in configuration order (see [`Workload::parts`]).
    pub fn train_runs(&self) -> Vec<Workload> {
        self.workloads_with_role(Role::Train)
            .flat_map(Workload::parts)
            .collect()
    }

    /// Whether `run_name` names a run of a configured workload (any role).
    pub fn has_run(&self, run_name: &str) -> bool {
        self.workloads
            .iter()
            .flat_map(Workload::parts)
            .any(|w| w.run_name() == run_name)
    }
}

impl Config {
    /// The build settings `[build]` (and `[pgo] cross_language`) add to the workspace's own.
    pub fn variant(&self) -> BuildVariant {
        BuildVariant {
            profile_overrides: self.build.profile_overrides.clone(),
            rustflags: self.build.rustflags.clone(),
            c: self.pgo.cross_language,
        }
    }
}

impl Config {
    /// `[[service]]`s, the workloads' services and metrics, and `[compare] metric`.
    pub(super) fn validate_services(&self, text: &str) -> Result<()> {
        let path = self.display_path();
        let mut seen = BTreeMap::new();
        for service in &self.services {
            let line = line_of(text, service.name.span().start);
            let name = service.name();
            let checked = crate::util::names::check_service(name)
                .and_then(|()| {
                    service
                        .ready
                        .as_ref()
                        .map_or(Ok(()), |r| r.condition().map(|_| ()))
                })
                .and_then(|()| service.stop.check());
            if let Err(reason) = checked {
                bail!("invalid configuration in {path}, line {line}: service {name:?}: {reason}");
            }
            if let Some(first) = seen.insert(name.to_owned(), line) {
                bail!(
                    "invalid configuration in {path}, line {line}: service {name:?} is already \
                     defined at line {first}"
                );
            }
        }
        let mut reported = Vec::new();
        for workload in &self.workloads {
            let line = line_of(text, workload.name.span().start);
            let name = workload.name();
            for service in &workload.services {
                if !seen.contains_key(service) {
                    bail!(
                        "invalid configuration in {path}, line {line}: workload {name:?} needs \
                         service {service:?}, but no [[service]] has that name{}",
                        if seen.is_empty() {
                            String::new()
                        } else {
                            format!(
                                " (defined: {})",
                                seen.keys().cloned().collect::<Vec<_>>().join(", ")
                            )
                        }
                    );
                }
            }
            let mut metric_names = BTreeMap::new();
            for metric in &workload.metrics {
                let metric_line = line_of(text, metric.name.span().start);
                if let Err(reason) = metric.check() {
                    bail!(
                        "invalid configuration in {path}, line {metric_line}: metric {:?} of \
                         workload {name:?}: {reason}",
                        metric.name()
                    );
                }
                if metric_names.insert(metric.name().to_owned(), ()).is_some() {
                    bail!(
                        "invalid configuration in {path}, line {metric_line}: workload {name:?} \
                         declares metric {:?} twice",
                        metric.name()
                    );
                }
                reported.extend(metric.compared_names());
            }
        }
        // And what pgo-build reports of the services workloads name (`service.db.cpu`).
        reported.extend(
            self.reported_metrics()
                .into_iter()
                .filter(|name| crate::measure::metric::built_in_unit(name).is_some()),
        );
        if let Some(metric) = &self.compare.metric {
            let line = line_of(text, metric.span().start);
            let decider: Decider = metric.get_ref().parse().map_err(|reason: String| {
                anyhow::anyhow!(
                    "invalid configuration in {path}, line {line}: [compare] metric {reason}"
                )
            })?;
            if let Some(name) = decider.reported()
                && !reported.iter().any(|r| r == name)
            {
                bail!(
                    "invalid configuration in {path}, line {line}: [compare] metric = {name:?}, \
                     but no workload reports it ({}). Declare it with [[workload.metric]] name = \
                     {name:?}, direction = \"lower\" or \"higher\"",
                    if reported.is_empty() {
                        "no workload declares a metric".to_owned()
                    } else {
                        format!("reported: {}", reported.join(", "))
                    }
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::values::{DEFAULT_TIMEOUT, parse_duration};
    use crate::config::{LinkJobs, OnCorrupt};
    use crate::measure::metric::Rounds;

    fn parse(text: &str) -> Result<Config> {
        Config::parse(text, Path::new("/ws/pgo-build.toml"))
    }

    #[test]
    fn full_config_parses() {
        let config = parse(
            r#"
[build]
bins = ["a", "b"]
profile = "dist"
features = ["fast"]
memory_budget = "6G"
link_jobs = 2
batch_size = 4

[compare]
rounds = 12

[pgo]
continuous = true
on_corrupt = "fail"

[bolt]
enabled = true
funcs = ["^_R.*"]
extra_args = ["-v=1"]

[[workload]]
name = "small"
role = "train"
command = "$PGO_BUILD_BIN_A --small"
env = { SEED = "1" }
timeout = "2m"

[[workload]]
name = "big"
role = "holdout"
command = ["${PGO_BUILD_BIN_A}", "--big"]
cwd = "data"
allow_failure = true
"#,
        )
        .unwrap();
        assert_eq!(config.build.bins.as_deref().unwrap(), ["a", "b"]);
        assert_eq!(config.build.profile.as_deref(), Some("dist"));
        assert_eq!(config.compare.rounds, Some(Rounds::Fixed(12)));
        assert!(matches!(config.build.link_jobs, Some(LinkJobs::Count(2))));
        assert_eq!(config.build.batch_size, Some(4));
        assert!(config.pgo.continuous);
        assert_eq!(config.pgo.on_corrupt, OnCorrupt::Fail);
        assert!(config.bolt.enabled && !config.bolt.huge_pages && config.bolt.args.is_none());
        assert_eq!(config.bolt.funcs, ["^_R.*"]);
        assert_eq!(config.workloads.len(), 2);
        assert_eq!(config.workloads[0].timeout, Duration::from_secs(120));
        assert_eq!(config.workloads[1].timeout, DEFAULT_TIMEOUT);
        assert!(matches!(
            config.workloads[1].command,
            WorkloadCommand::Argv(_)
        ));
        assert_eq!(config.workloads_with_role(Role::Holdout).count(), 1);
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let err = parse("[build]\nprofile = \"release\"\nbinz = [\"a\"]\n").unwrap_err();
        let text = format!("{err:#}");
        assert!(text.contains("/ws/pgo-build.toml, line 3"), "{text}");
        assert!(text.contains("binz"), "{text}");
    }

    #[test]
    fn wrong_type_names_the_line() {
        let err = parse(
            "[[workload]]\nname = \"a\"\nrole = \"train\"\ncommand = \"x\"\ntimeout = true\n",
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("line 5"), "{err:#}");
    }

    #[test]
    fn bad_role_and_bad_duration_are_errors() {
        let err = parse("[[workload]]\nname = \"a\"\nrole = \"training\"\ncommand = \"x\"\n")
            .unwrap_err();
        assert!(format!("{err:#}").contains("line 3"), "{err:#}");
        let err = parse("[[workload]]\nname = \"a\"\nrole = \"train\"\ncommand = \"x\"\ntimeout = \"5 weeks\"\n")
            .unwrap_err();
        assert!(format!("{err:#}").contains("unknown unit"), "{err:#}");
    }

    #[test]
    fn timeouts_say_what_they_expect_and_refuse_zero() {
        let workload = |timeout: &str| {
            let text = format!(
                "[[workload]]\nname = \"a\"\nrole = \"train\"\ncommand = \"x\"\ntimeout = {timeout}\n"
            );
            format!("{:#}", parse(&text).unwrap_err())
        };
        for (value, expected) in [
            (
                "true",
                "expected a duration: whole seconds (90) or a string with a unit",
            ),
            ("-5", "-5 is negative"),
            ("\"0s\"", "timeout must be above 0"),
            ("0", "timeout must be above 0"),
        ] {
            let err = workload(value);
            assert!(err.contains(expected), "timeout = {value}: {err}");
            assert!(err.contains("line 5"), "timeout = {value}: {err}");
        }
    }

    #[test]
    fn compare_rounds_may_be_auto() {
        let config = parse("[compare]\nrounds = \"auto\"\n").unwrap();
        assert_eq!(config.compare.rounds, Some(Rounds::Auto));
        let err = format!("{:#}", parse("[compare]\nrounds = \"many\"\n").unwrap_err());
        assert!(err.contains("or `auto`"), "{err}");
    }

    #[test]
    fn zero_compare_rounds_are_refused_at_load() {
        let err = format!("{:#}", parse("[compare]\nrounds = 0\n").unwrap_err());
        assert!(err.contains("line 2"), "{err}");
        assert!(err.contains("at least 1 round"), "{err}");
        assert!(!err.contains("--rounds"), "{err}");
    }

    #[test]
    fn a_workload_cwd_that_does_not_exist_is_an_error_at_load() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("data")).unwrap();
        let config = |cwd: &str| {
            std::fs::write(
                root.path().join(CONFIG_FILE_NAME),
                format!("\n[[workload]]\nname = \"a\"\nrole = \"train\"\ncommand = \"x\"\ncwd = {cwd:?}\n"),
            )
            .unwrap();
            Config::load(None, root.path())
        };
        assert!(config("data").is_ok());
        let err = format!("{:#}", config("dat").unwrap_err());
        assert!(err.contains("line 3"), "{err}");
        assert!(err.contains("cwd = \"dat\""), "{err}");
        assert!(err.contains("is not a directory"), "{err}");
    }

    #[test]
    fn sharded_workloads_run_once_per_part_with_their_own_fingerprint() {
        let config = parse(
            "[[workload]]\nname = \"w\"\nrole = \"train\"\ncommand = \"x\"\nshards = 3\n\n\
             [[workload]]\nname = \"plain\"\nrole = \"train\"\ncommand = \"y\"\n",
        )
        .unwrap();
        let runs: Vec<String> = config.train_runs().iter().map(Workload::run_name).collect();
        assert_eq!(runs, ["w.part1of3", "w.part2of3", "w.part3of3", "plain"]);
        let fingerprints: std::collections::BTreeSet<String> = config
            .train_runs()
            .iter()
            .map(Workload::fingerprint)
            .collect();
        assert_eq!(fingerprints.len(), 4);
        assert!(config.has_run("w.part2of3") && config.has_run("plain") && !config.has_run("w"));
        for (text, expected) in [
            ("shards = 0", "shards = 0"),
            (
                "shards = 2\nrole = \"holdout\"",
                "only train workloads are split",
            ),
        ] {
            let err = parse(&format!(
                "[[workload]]\nname = \"h\"\ncommand = \"x\"\n{text}\n{}",
                if text.contains("role") {
                    ""
                } else {
                    "role = \"train\"\n"
                }
            ))
            .unwrap_err();
            assert!(format!("{err:#}").contains(expected), "{err:#}");
        }
        let err = parse(
            "[[workload]]\nname = \"w\"\nrole = \"train\"\ncommand = \"x\"\nshards = 2\n\n\
             [[workload]]\nname = \"w.part1of2\"\nrole = \"train\"\ncommand = \"y\"\n",
        )
        .unwrap_err();
        assert!(
            format!("{err:#}").contains("are both named \"w.part1of2\""),
            "{err:#}"
        );
    }

    #[test]
    fn a_workload_is_a_command_or_a_cargo_command() {
        let config =
            parse("[[workload]]\nname = \"b\"\nrole = \"train\"\ncargo = [\"bench\"]\n").unwrap();
        assert_eq!(
            config.workloads[0].cargo.as_deref(),
            Some(&["bench".to_owned()][..])
        );
        for (text, expected) in [
            (
                "command = \"x\"\ncargo = [\"bench\"]",
                "both `command` and `cargo`",
            ),
            ("", "give `command`, or `cargo`"),
            (
                "cargo = [\"bench\", \"--target-dir\", \"t\"]",
                "`--target-dir` in `cargo`",
            ),
        ] {
            let err = parse(&format!(
                "[[workload]]\nname = \"b\"\nrole = \"train\"\n{text}\n"
            ))
            .unwrap_err();
            assert!(format!("{err:#}").contains(expected), "{err:#}");
        }
    }

    #[test]
    fn duplicate_and_invalid_workload_names_are_errors() {
        let text = "[[workload]]\nname = \"a\"\nrole = \"train\"\ncommand = \"x\"\n\n[[workload]]\nname = \"a\"\nrole = \"train\"\ncommand = \"y\"\n";
        let err = parse(text).unwrap_err();
        assert!(
            format!("{err:#}").contains("line 7: workload \"a\" is already defined at line 2"),
            "{err:#}"
        );
        let err = parse("[[workload]]\nname = \"../x\"\nrole = \"train\"\ncommand = \"x\"\n")
            .unwrap_err();
        assert!(format!("{err:#}").contains("line 2"), "{err:#}");
        let err =
            parse("[[workload]]\nname = \"x\"\nrole = \"train\"\ncommand = []\n").unwrap_err();
        assert!(format!("{err:#}").contains("empty `command`"), "{err:#}");
    }

    #[test]
    fn the_configurations_the_readme_and_getting_started_show_parse() {
        for (name, text) in [
            ("README.md", include_str!("../../../../README.md")),
            (
                "getting-started.md",
                include_str!("../../../../docs/src/guide/getting-started.md"),
            ),
        ] {
            let blocks: Vec<&str> = text
                .split("```toml\n")
                .skip(1)
                .map(|rest| &rest[..rest.find("```").expect("a closed block")])
                .collect();
            assert!(blocks.len() >= 2, "{name} shows a pgo-build.toml");
            for block in blocks {
                let config = parse(block).unwrap_or_else(|err| panic!("{name}: {err:#}\n{block}"));
                assert!(!config.workloads.is_empty(), "{name}:\n{block}");
            }
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("3m").unwrap(), Duration::from_secs(180));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert!(parse_duration("m").is_err());
    }

    #[test]
    fn profile_overrides_become_cargo_config_values_and_bad_ones_are_refused() {
        let config = parse(
            "[build]\nprofile_overrides = { lto = \"fat\", codegen-units = 1, debug = false }\nrustflags = [\"-Ctarget-cpu=native\"]\n",
        )
        .unwrap();
        let variant = config.variant();
        assert_eq!(
            variant.cargo_config_args("dist"),
            [
                "profile.dist.codegen-units=1",
                "profile.dist.debug=false",
                "profile.dist.lto=\"fat\""
            ]
        );
        assert_eq!(variant.rustflags, ["-Ctarget-cpu=native"]);
        let err = parse("[build]\nprofile_overrides = { lot = \"fat\" }\n").unwrap_err();
        assert!(
            format!("{err:#}").contains("unknown cargo profile key \"lot\"; known: opt-level, lto"),
            "{err:#}"
        );
        let err = parse("[build]\nprofile_overrides = { lto = [1] }\n").unwrap_err();
        assert!(
            format!("{err:#}").contains("must be a string, integer or boolean"),
            "{err:#}"
        );
        let err = parse("[[explore.variant]]\nname = \"a b\"\n").unwrap_err();
        assert!(
            format!("{err:#}").contains("line 2: explore variant name"),
            "{err:#}"
        );
    }

    #[test]
    fn size_growth_is_a_percentage() {
        let config = parse("[pgo]\nmax_size_growth = \"5%\"\n").unwrap();
        assert_eq!(config.pgo.max_size_growth.unwrap().fraction, 0.05);
        for bad in ["\"5\"", "\"-1%\"", "5", "\"x%\""] {
            let err = parse(&format!("[pgo]\nmax_size_growth = {bad}\n")).unwrap_err();
            assert!(format!("{err:#}").contains("line 2"), "{bad}: {err:#}");
        }
    }

    #[test]
    fn a_bad_memory_budget_is_an_error_naming_its_line_at_load() {
        let config = parse("[build]\nmemory_budget = \"6G\"\n").unwrap();
        assert_eq!(config.build.memory_budget.resolve().0, 6 << 30);
        for bad in ["\"8Q\"", "\"0\"", "8"] {
            let err = parse(&format!("[build]\nbins = []\nmemory_budget = {bad}\n")).unwrap_err();
            let text = format!("{err:#}");
            assert!(text.contains("line 3"), "{bad}: {text}");
            assert!(text.contains("memory_budget"), "{bad}: {text}");
        }
    }

    #[test]
    fn shards_beyond_the_bound_are_refused_without_splitting_them() {
        for shards in ["1001", "200000000", "9223372036854775807"] {
            let text = format!(
                "[[workload]]\nname = \"a\"\nrole = \"train\"\ncommand = \"x\"\nshards = {shards}\n"
            );
            let err = format!("{:#}", parse(&text).unwrap_err());
            assert!(
                err.contains(&format!("has shards = {shards}; at most 1000")),
                "{err}"
            );
        }
    }

    #[test]
    fn the_configuration_with_every_section_is_one_that_loads() {
        parse(EVERY_SECTION).unwrap();
    }

    #[test]
    fn every_problem_of_a_file_is_named_not_only_the_first() {
        let text = "[[workload]]\nname = \"a\"\nrole = \"train\"\ncommand = \"x\"\nshards = 0\n\n\
                    [[workload]]\nname = \"a\"\nrole = \"holdout\"\ncommand = \"y\"\n\n\
                    [[workload]]\nname = \"b\"\nrole = \"holdout\"\ncommand = \"z\"\n\
                    services = [\"db\"]\n";
        let err = format!("{:#}", parse(text).unwrap_err());
        assert!(
            err.starts_with("3 problems in /ws/pgo-build.toml:"),
            "{err}"
        );
        for problem in [
            "line 2: workload \"a\" has shards = 0",
            "line 8: workload \"a\" is already defined at line 2",
            "line 13: workload \"b\" needs service \"db\"",
        ] {
            assert!(err.contains(problem), "{problem}: {err}");
        }
    }

    proptest::proptest! {
        #![proptest_config(crate::util::fuzz::config())]

        /// Any pgo-build.toml, near the real ones or not, loads or is refused: never a panic
        /// or a hang (the example's three configurations, and one with every section).
        #[test]
        fn any_configuration_loads_or_is_refused_without_a_panic_or_hang(
            text in proptest::prop_oneof![
                crate::util::fuzz::text_mutants(include_str!("../../../../examples/pgo-build.toml")),
                crate::util::fuzz::text_mutants(
                    include_str!("../../../../examples/pgo-build.holdout-bench.toml")
                ),
                crate::util::fuzz::text_mutants(EVERY_SECTION),
            ]
        ) {
            crate::util::fuzz::no_panic_or_hang(move || parse(&text).map(|_| ()));
        }
    }

    /// A configuration with every section and the values that take parsing.
    const EVERY_SECTION: &str = r#"
[build]
bins = ["app"]
rustflags = ["-Ctarget-cpu=native"]
memory_budget = "8GiB"
link_jobs = 2

[pgo]
max_size_growth = "25%"
max_stale = 0.2
cross_language = "thin-lto"

[bolt]
enabled = true
args = ["-split-functions"]

[compare]
rounds = 10
margin = "2%"
metric = "wall"

[[service]]
name = "db"
command = ["$PGO_BUILD_BIN_APP", "serve", "--port", "7000"]
ready = { tcp = "127.0.0.1:7000", timeout = "30s" }
stop = { signal = "SIGINT", grace_period = "5s" }

[[workload]]
name = "load"
role = "train"
services = ["db"]
command = "app load --port 7000"
timeout = "2m"
shards = 2
metric = [{ name = "rps", pattern = "rps: ([0-9.]+)", direction = "higher" }]

[[workload]]
name = "bench"
role = "holdout"
cargo = ["bench", "--bench", "parse"]
"#;
}
