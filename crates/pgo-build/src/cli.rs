//! Command-line flags, as clap sees them. Nothing here does work: `pipeline` turns these
//! low-level flags into the context the steps use (`pipeline::context`).

use std::path::PathBuf;

use crate::layout::PackedStage;
use crate::layout::step::Step;
use crate::measure::metric::{CompareRole, Decider, Rounds};
use crate::profiles::bundle::{Shard, Weights};
use clap::{Args, Parser, Subcommand};

use crate::util::printer::Verbosity;

/// Installed as `cargo-pgo-build` (a link to pgo-build), cargo runs it for `cargo pgo-build
/// …` with `pgo-build` as the first argument.
const CARGO_SUBCOMMAND: &str = "cargo-pgo-build";

/// The flags of this process, run as `pgo-build` or as cargo's `cargo-pgo-build` (whose
/// extra `pgo-build` argument is dropped).
pub fn parse() -> Cli {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let as_cargo_subcommand = args.first().is_some_and(|argv0| {
        std::path::Path::new(argv0)
            .file_name()
            .is_some_and(|name| name == CARGO_SUBCOMMAND)
    });
    if as_cargo_subcommand && args.get(1).is_some_and(|arg| arg == "pgo-build") {
        args.remove(1);
    }
    let matches = command().get_matches_from(args);
    match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(err) => err.exit(),
    }
}

/// The command line as clap parses it and as help, completions and the man page show it:
/// each command's own options first, the global ones under their own heading, wrapped to the
/// terminal (`COLUMNS` when set).
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

#[derive(Debug, Parser)]
#[command(
    name = "pgo-build",
    version,
    about = "Profile-guided optimized (PGO) release builds of a cargo workspace",
    long_about = "Builds every binary of a cargo workspace three times - plain (baseline), \
                  instrumented, optimized with the profiles its training workloads produced - \
                  and refuses to produce a binary that PGO would make worse."
)]
pub struct Cli {
    #[command(flatten, next_help_heading = "Global options")]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags shared by every command. They follow cargo's spelling and meaning.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Path to the workspace's Cargo.toml (default: found from the current directory, as cargo does)
    #[arg(long, global = true, value_name = "PATH")]
    pub manifest_path: Option<PathBuf>,
    /// Path to the configuration file (default: pgo-build.toml at the workspace root)
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Only the binaries of this package (repeatable)
    #[arg(short = 'p', long = "package", global = true, value_name = "PKG")]
    pub packages: Vec<String>,
    /// Only this binary (repeatable)
    #[arg(long = "bin", global = true, value_name = "NAME")]
    pub bins: Vec<String>,
    /// Features to activate, passed to cargo as given (overrides [build] features)
    #[arg(short = 'F', long, global = true, value_name = "FEATURES")]
    pub features: Vec<String>,
    /// Cargo profile to build with (default: [build] profile, else release)
    #[arg(long, global = true, value_name = "NAME")]
    pub profile: Option<String>,
    /// Build for this target triple (repeatable; same as [build] targets). Each target's
    /// stages live in target/pgo-build/<TRIPLE>/; without it, the host's in target/pgo-build/
    #[arg(long = "target", global = true, value_name = "TRIPLE")]
    pub targets: Vec<String>,
    /// Number of parallel cargo jobs
    #[arg(short = 'j', long, global = true, value_name = "N")]
    pub jobs: Option<u32>,
    /// Print every external command with its full command line and environment changes
    #[arg(short, long, global = true, conflicts_with = "quiet")]
    pub verbose: bool,
    /// Print only errors, warnings and the final table
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// Turn every warning (a binary without profile, excluded profiles, stopped processes,
    /// functions changed since training) into a failure
    #[arg(long, global = true)]
    pub strict: bool,
    /// Instrument in continuous mode, so processes killed by any signal keep their counts
    /// (same as [pgo] continuous = true)
    #[arg(long, global = true)]
    pub continuous: bool,
    /// Give the C and C++ that build scripts compile the same profile as the Rust, compiled
    /// by a clang of rustc's LLVM (same as [pgo] cross_language = true)
    #[arg(long, global = true)]
    pub cross_language: bool,
    /// Leave [pgo] profile aside: instrument and train afresh (a committed profile's refresh;
    /// `export` over it afterwards)
    #[arg(long, global = true)]
    pub retrain: bool,
}

impl GlobalArgs {
    /// `-q` and `-v`, decided in one place.
    pub fn verbosity(&self) -> Verbosity {
        if self.quiet {
            Verbosity::Quiet
        } else if self.verbose {
            Verbosity::Verbose
        } else {
            Verbosity::Normal
        }
    }
}

#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Start here: write a commented pgo-build.toml for the workspace (never over an existing
    /// one): its binaries, a train and a held-out workload from its benchmarks that can run
    /// here, or placeholders `doctor` names until they are filled in
    Init,
    /// Check the toolchain (rustc, a matching llvm-profdata) and the configuration before any
    /// build: every problem `run` would meet, each with its fix
    Doctor,
    /// doctor, build, instrument, train, optimize and compare (and, when nothing ships, how
    /// training covers the held-out work), then the answer: whether the optimized build is
    /// faster on held-out work
    Run(RunArgs),
    /// Show the last run's report: tables, or --json, --markdown, --html FILE
    Report(ReportArgs),
    /// For release CI: pass only when what `run` staged is current, proven not slower than the
    /// baseline on every holdout workload within [compare] margin, and within
    /// [pgo] max_size_growth; writes target/pgo-build/provenance.json either way
    Gate(GateArgs),
    /// The plain release build of the selected binaries (the baseline)
    Build,
    /// The PGO-instrumented build
    Instrument,
    /// Run training workloads against the instrumented binaries
    Train(TrainArgs),
    /// Validate and merge the profiles, then build the optimized binaries with them
    Optimize(OptimizeArgs),
    /// Post-link optimization with BOLT of the optimized (or baseline) binaries
    Bolt(BoltArgs),
    /// Paired, interleaved A/B rounds of staged variants on the holdout and train workloads
    Compare(CompareArgs),
    /// What the training profile covers, and how well it represents the holdout workloads
    Profile(ProfileArgs),
    /// Write the merged training profile and its metadata, to commit and use with
    /// [pgo] profile instead of training in every build; or the measured rustc peaks, for
    /// [build] rustc_estimates elsewhere
    Export(ExportArgs),
    /// Write a staged stage (the instrumented binaries) to an archive, for training jobs on
    /// other machines
    Pack(PackArgs),
    /// Restore a packed stage into this checkout's target/pgo-build/
    Unpack(UnpackArgs),
    /// Merge the bundles of sharded training (`train --shard I/N --bundle FILE`) into the
    /// profile `optimize` uses
    Merge(MergeArgs),
    /// Build variants of the build settings (LTO, codegen units, BOLT, ...), measure their
    /// speed, build cost and size side by side, and recommend (or --apply) the best
    Explore(ExploreArgs),
    /// Remove everything under target/pgo-build/
    Clean,
    /// Print shell completions, the man page, the JSON Schema of pgo-build.toml, or the
    /// book's generated references
    Generate(GenerateArgs),
}

#[derive(Debug, Clone, Args)]
pub struct GenerateArgs {
    #[arg(value_enum)]
    pub what: Generated,
}

/// What `pgo-build generate` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Generated {
    /// Completions for bash (e.g. into /etc/bash_completion.d/pgo-build)
    Bash,
    /// Completions for zsh (into a directory of $fpath, as _pgo-build)
    Zsh,
    /// Completions for fish (into ~/.config/fish/completions/pgo-build.fish)
    Fish,
    /// The man page (roff: `pgo-build generate man > pgo-build.1`)
    Man,
    /// The JSON Schema of pgo-build.toml, for editors (a `#:schema` line names it)
    Schema,
    /// The JSON Schema of report.json, for scripts that read it
    ReportSchema,
    /// The book's command-line reference (Markdown)
    CliReference,
    /// The book's configuration reference (Markdown)
    ConfigReference,
    /// The book's page of how verdicts and decisions are made, with every default (Markdown)
    DecisionRules,
}

#[derive(Debug, Clone, Args)]
pub struct TrainArgs {
    /// Workloads to run (default: every workload with role = "train")
    #[arg(value_name = "WORKLOAD")]
    pub workloads: Vec<String>,
    /// Run only shard I of N (1-based) of the train workloads' runs, split the same way on
    /// every machine, for a CI matrix job; needs --bundle
    #[arg(long, value_name = "I/N", requires = "bundle")]
    pub shard: Option<Shard>,
    /// Write this training's profiles and accounting to a bundle file for `pgo-build merge`
    #[arg(long, value_name = "FILE")]
    pub bundle: Option<PathBuf>,
}

#[derive(Debug, Args, Clone)]
pub struct OptimizeArgs {
    /// Build BIN without PGO (a plain release build) when training produced no profile for it,
    /// instead of refusing (repeatable)
    #[arg(long = "allow-missing-profile", value_name = "BIN")]
    pub allow_missing_profile: Vec<String>,
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub optimize: OptimizeArgs,
    /// Run every step, even those whose inputs have not changed since they last completed
    #[arg(long)]
    pub force: bool,
    /// Run this step and every later one, even if their inputs have not changed
    #[arg(long, value_enum, value_name = "STEP")]
    pub from: Option<Step>,
    /// Skip the closing baseline/optimized comparison on the holdout workloads
    #[arg(long)]
    pub no_compare: bool,
    /// Rounds of the closing comparison, or `auto` (default: [compare] rounds, else auto)
    #[arg(long, value_name = "N|auto")]
    pub compare_rounds: Option<Rounds>,
}

#[derive(Debug, Clone, Args)]
pub struct GateArgs {
    /// Counted rounds of the comparison (default: [compare] rounds, else auto), or `auto`
    #[arg(long, value_name = "N|auto")]
    pub rounds: Option<Rounds>,
    /// The binaries of the last release: the build must not be slower than them either
    #[arg(long, value_name = "DIR")]
    pub against: Option<std::path::PathBuf>,
    /// What decides (default: [compare] metric, else the services' own CPU time, services.cpu,
    /// where a held-out workload has services, else wall), as for `compare`
    #[arg(long, value_name = "wall|cpu|instructions|faults|NAME")]
    pub metric: Option<Decider>,
    /// How long the gate may count instructions for the workloads that the deciding metric
    /// left open (e.g. 10m, 1h; 0 turns the fallback off). Default: 15m
    #[arg(long, value_name = "DURATION")]
    pub budget: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct ExploreArgs {
    /// Variants to build and measure, comma-separated (default: every built-in variant and
    /// every [[explore.variant]]); baseline and pgo are always measured, as the references
    #[arg(long, value_delimiter = ',', value_name = "A,B,...")]
    pub variants: Vec<String>,
    /// Counted rounds per holdout workload, after one warm-up round (default: [compare]
    /// rounds, else 10; a verdict needs at least 7; with --metric instructions, 2: one count
    /// and a repeat)
    #[arg(long, value_name = "N", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=crate::measure::metric::MAX_ROUNDS as u64))]
    pub rounds: Option<usize>,
    /// What speed is (default: [compare] metric, else the services' own CPU time, services.cpu,
    /// where a held-out workload has services, else wall): wall-clock time, CPU time of the
    /// process tree, instructions, or a metric the holdout workloads report
    #[arg(long, value_name = "wall|cpu|instructions|NAME")]
    pub metric: Option<Decider>,
    /// Stop building and measuring once this much time has passed (e.g. 90m, 2h): what was
    /// built is kept, and the next run continues from there
    #[arg(long, value_name = "DURATION")]
    pub budget: Option<String>,
    /// Write the recommended variant's settings to pgo-build.toml, so `run` builds it
    #[arg(long)]
    pub apply: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// Write a self-contained HTML page with charts to FILE
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Print report.json
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// Print a Markdown summary
    #[arg(long)]
    pub markdown: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ProfileArgs {
    #[command(subcommand)]
    pub command: ProfileCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum ProfileCommand {
    /// The hottest functions, each crate's share of the counts, coverage per binary
    Show(ShowArgs),
    /// Run the holdout workloads instrumented and compare their profile with training's
    Overlap(OverlapArgs),
    /// How much of the committed profile ([pgo] profile) applies to the current sources,
    /// without building: fails when it is predicted stale beyond [pgo] max_stale
    Check(CheckArgs),
}

#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// How many functions at risk to name
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Print JSON instead of tables
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct ShowArgs {
    /// How many hot functions to list
    #[arg(long, default_value_t = 20)]
    pub top: usize,
    /// Only this binary's profile
    #[arg(long, value_name = "NAME")]
    pub binary: Option<String>,
    /// Print JSON instead of tables
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct OverlapArgs {
    /// How many functions training misses to list per binary
    #[arg(long, default_value_t = 10)]
    pub top: usize,
}

#[derive(Debug, Clone, Args)]
#[group(id = "written", required = true, multiple = true, args = ["output", "rustc_estimates"])]
pub struct ExportArgs {
    /// Where to write the profile; the metadata goes beside it with a .json extension
    #[arg(short, long, value_name = "PATH")]
    pub output: Option<PathBuf>,
    /// Also (or only) write the measured rustc peaks of every stage to PATH, adding to what it
    /// carries: for `[build] rustc_estimates` in another target directory or on another
    /// machine (a CI cache)
    #[arg(long, value_name = "PATH")]
    pub rustc_estimates: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct PackArgs {
    /// The stage to pack: `instrumented` for training jobs; `baseline` and `shipped` (or
    /// `optimized`, `bolt`) for a gate job that builds neither (each built in a job of its
    /// own, in parallel)
    #[arg(value_name = "STAGE", value_enum)]
    pub stage: PackedStage,
    /// The archive to write (tar, zstd-compressed)
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
}

#[derive(Debug, Clone, Args)]
pub struct UnpackArgs {
    /// An archive written by `pgo-build pack`
    #[arg(value_name = "FILE")]
    pub archive: PathBuf,
}

#[derive(Debug, Clone, Args)]
pub struct MergeArgs {
    /// Bundles written by `pgo-build train --bundle`
    #[arg(value_name = "BUNDLE", required = true)]
    pub bundles: Vec<PathBuf>,
    /// How bundles are weighted: `counts` adds their counts (what one machine running every
    /// shard would have recorded), `equal` gives each bundle the same total weight
    #[arg(long, value_enum, default_value_t = Weights::Counts)]
    pub weights: Weights,
    /// The weight of one bundle, an integer >= 1 (repeatable; overrides --weights for it)
    #[arg(long = "weight", value_name = "FILE=W")]
    pub weight: Vec<String>,
}

#[derive(Debug, Args, Clone)]
pub struct BoltArgs {
    /// BOLT the baseline binaries instead of the PGO-optimized ones
    #[arg(long)]
    pub without_pgo: bool,
    /// Do nothing (and say so) unless [bolt] enabled = true: for a release job shared by
    /// workspaces with and without BOLT
    #[arg(long)]
    pub if_enabled: bool,
}

#[derive(Debug, Args, Clone)]
pub struct CompareArgs {
    /// Staged variants to compare, the first being the reference (default: baseline and the
    /// newest of the others)
    #[arg(value_name = "VARIANT")]
    pub variants: Vec<String>,
    /// Counted rounds per workload, after one warm-up round (default: [compare] rounds, else
    /// auto), or `auto`: rounds until every deciding verdict is reached or its interval is
    /// within ±2%, with looks after 10, 20 and 40 rounds planned in advance and corrected for,
    /// within --budget
    #[arg(long, value_name = "N|auto")]
    pub rounds: Option<Rounds>,
    /// With --rounds auto: the seconds the counted rounds may take together; a look that
    /// would end past it is not started, the first always runs (default: [compare] budget,
    /// else 300)
    #[arg(long, value_name = "SECS")]
    pub budget: Option<u64>,
    /// Only these workloads (repeatable; default: see --role)
    #[arg(long = "workload", value_name = "NAME")]
    pub workloads: Vec<String>,
    /// Which workloads to compare on when none are named (default: holdout and train; with
    /// --metric instructions, which is slow to count, holdout only)
    #[arg(long, value_enum, value_name = "ROLE")]
    pub role: Option<CompareRole>,
    /// What decides the verdict (default: [compare] metric, else the services' own CPU time,
    /// services.cpu, where a held-out workload has services, else wall): wall-clock time, the
    /// process tree's user+system CPU time (services included), instructions (perf stat where
    /// it can count them, else valgrind's callgrind: noise-free but ~50x slower; wall and CPU
    /// times are then inflated by the counting tool), the process tree's minor+major page
    /// faults (what start-up order changes; always recorded), or a metric the workloads report
    /// ([[workload.metric]]: `p99_ms`, `latency.p99`)
    #[arg(long, value_name = "wall|cpu|instructions|faults|NAME")]
    pub metric: Option<Decider>,
    /// Seed of the random order the variants run in, drawn afresh each round
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Exit non-zero when a holdout workload's verdict is "slower"
    #[arg(long)]
    pub fail_if_slower: bool,
    /// The binaries of the last release (a directory holding each binary by name, e.g. a
    /// downloaded artifact): measured as the `previous` variant, and each candidate is judged
    /// against it too
    #[arg(long, value_name = "DIR")]
    pub against: Option<std::path::PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_flags_are_accepted_after_the_command() {
        let cli = Cli::try_parse_from(["pgo-build", "build", "-p", "a", "--bin", "b", "-j", "3"])
            .unwrap();
        assert_eq!(cli.global.packages, ["a"]);
        assert_eq!(cli.global.bins, ["b"]);
        assert_eq!(cli.global.jobs, Some(3));
    }

    /// The pgo-build command lines of a GitHub Actions workflow: `run: pgo-build …`, each line of
    /// a `run: |` block, a `run: >-` block folded into one; `${{ … }}` as `1`.
    fn workflow_commands(workflow: &str) -> Vec<String> {
        let mut commands = Vec::new();
        let mut lines = workflow.lines().peekable();
        while let Some(line) = lines.next() {
            let Some(run) = line.trim_start().strip_prefix("run:").map(str::trim) else {
                continue;
            };
            let indent = line.len() - line.trim_start().len();
            let mut block = Vec::new();
            while let Some(next) = lines.peek() {
                if next.len() - next.trim_start().len() <= indent || next.trim().is_empty() {
                    break;
                }
                block.push(lines.next().unwrap().trim().to_owned());
            }
            let found = match run {
                "|" => block,
                ">-" | ">" => vec![block.join(" ")],
                single => vec![single.to_owned()],
            };
            commands.extend(found.into_iter().filter(|c| c.starts_with("pgo-build ")));
        }
        commands
            .into_iter()
            .map(|command| {
                let mut text = command;
                while let (Some(open), Some(close)) = (text.find("${{"), text.find("}}")) {
                    text.replace_range(open..close + 2, "1");
                }
                text.split(" >>").next().unwrap().to_owned()
            })
            .collect()
    }

    #[test]
    fn every_command_of_the_ci_templates_parses() {
        let template = include_str!("../../../docs/ci/github-actions.yml");
        let commands = workflow_commands(template);
        for expected in ["pgo-build gate", "pgo-build export --rustc-estimates"] {
            assert!(
                commands.iter().any(|c| c.starts_with(expected)),
                "{expected} in {commands:?}"
            );
        }
        assert!(
            commands.iter().any(|c| c.contains("--shard 1/1")),
            "{commands:?}"
        );
        // The release from a committed profile: one build per job, and a gate that builds none.
        let release = workflow_commands(include_str!("../../../docs/ci/release.yml"));
        for expected in [
            "pgo-build profile check",
            "pgo-build optimize",
            "pgo-build pack baseline --output baseline.tar.zst",
            "pgo-build bolt --if-enabled",
            "pgo-build pack shipped --output release.tar.zst",
            "pgo-build unpack release.tar.zst",
            "pgo-build gate --against last-release",
        ] {
            assert!(
                release.iter().any(|c| c == expected),
                "{expected} in {release:?}"
            );
        }
        assert!(!release.iter().any(|c| c.starts_with("pgo-build run")));
        let refresh = workflow_commands(include_str!("../../../docs/ci/refresh-profile.yml"));
        for expected in [
            "pgo-build --retrain run",
            "pgo-build export --output pgo/profile.profdata",
        ] {
            assert!(
                refresh.iter().any(|c| c == expected),
                "{expected} in {refresh:?}"
            );
        }
        for (file, commands) in [
            ("github-actions.yml", &commands),
            ("release.yml", &release),
            ("refresh-profile.yml", &refresh),
        ] {
            for command in commands {
                if let Err(err) = Cli::try_parse_from(command.split_whitespace()) {
                    panic!("docs/ci/{file}: `{command}` does not parse:\n{err}");
                }
            }
        }
    }
}
