//! `pgo-build init`: a commented `pgo-build.toml` to start from, written from what `cargo
//! metadata` says of the workspace: its binaries, a train workload from its own benchmarks
//! when it has them (cargo workloads, run with each stage's settings), else a placeholder
//! that fails with what to write until it is replaced; a held-out workload from a second
//! benchmark, else a commented one; a `[[service]]` stub for each binary that looks like a
//! server (its name, or the server framework its package uses), with the stop signal spelled
//! out; the settings a user is likely to change, commented. The first line names the JSON
//! Schema `init` writes beside the file, so editors complete and check it.

use crate::cargo::workspace::{BinTarget, Workspace};
use crate::exec::bin_env_var;

/// What the placeholder train command says until it is replaced.
pub const PLACEHOLDER: &str = "replace the command of the train workload with real work";

/// What the placeholder held-out command says until it is replaced.
pub const HOLDOUT_PLACEHOLDER: &str =
    "replace the command of the holdout workload with work training never sees";

/// The benchmarks `init` may train and measure on, and those it leaves out with why.
pub struct Proposal<'a> {
    pub benches: Vec<&'a BinTarget>,
    pub skipped: Vec<(&'a BinTarget, String)>,
}

impl<'a> Proposal<'a> {
    /// The workspace's benchmarks whose source runs with a compiler that is `nightly` or
    /// not, and whose named inputs exist; the others with their reasons.
    pub fn of(workspace: &'a Workspace, nightly: bool) -> Proposal<'a> {
        let mut proposal = Proposal {
            benches: Vec::new(),
            skipped: Vec::new(),
        };
        for bench in &workspace.benches {
            let reasons: Vec<String> = workspace
                .target_sources
                .iter()
                .filter(|s| s.kind == "bench" && s.name == bench.name && s.package == bench.package)
                .flat_map(|s| s.unrunnable(nightly))
                .map(|why| why.to_string())
                .collect();
            if reasons.is_empty() {
                proposal.benches.push(bench);
            } else {
                proposal.skipped.push((bench, reasons.join("; ")));
            }
        }
        proposal
    }
}

/// The file name of the schema `init` writes beside `pgo-build.toml`.
pub const SCHEMA_FILE_NAME: &str = "pgo-build.schema.json";

/// Crates only a network server is built on: a binary of a package depending on one of them
/// is taken for a server. (tokio and hyper serve clients as much, so they do not count.)
const SERVER_FRAMEWORKS: &[&str] = &[
    "axum",
    "actix-web",
    "warp",
    "tonic",
    "rocket",
    "poem",
    "salvo",
    "tide",
    "tower-http",
];

/// Words of a binary's name (split at `-` and `_`) that say it serves.
const SERVER_WORDS: &[&str] = &["server", "serve", "daemon", "proxy", "gateway", "srv"];

/// Words that say a binary is the client beside a server, whatever its package uses.
const CLIENT_WORDS: &[&str] = &["cli", "client", "ctl", "bench"];

/// The binaries that look like servers: training should run them as a `[[service]]`.
pub fn likely_servers(workspace: &Workspace) -> Vec<&BinTarget> {
    workspace
        .binaries
        .iter()
        .filter(|bin| {
            let words: Vec<String> = bin
                .name
                .split(['-', '_'])
                .map(str::to_ascii_lowercase)
                .collect();
            let has = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
            if has(CLIENT_WORDS) {
                return false;
            }
            let framework = workspace
                .direct_dependencies
                .get(&bin.package)
                .is_some_and(|deps| deps.iter().any(|d| SERVER_FRAMEWORKS.contains(&d.as_str())));
            has(SERVER_WORDS) || framework
        })
        .collect()
}

pub fn config_text(workspace: &Workspace, proposal: &Proposal) -> String {
    let name = workspace.root.file_name().map_or_else(
        || "the workspace".to_owned(),
        |n| n.to_string_lossy().into_owned(),
    );
    let bins: Vec<&str> = workspace.binaries.iter().map(|b| b.name.as_str()).collect();
    let quoted: Vec<String> = bins.iter().map(|b| format!("{b:?}")).collect();
    let variables: Vec<String> = bins
        .iter()
        .map(|b| format!("${}", bin_env_var(b)))
        .collect();
    let servers = likely_servers(workspace);
    let mut text = format!(
        "#:schema ./{SCHEMA_FILE_NAME}\n\
         # pgo-build configuration of {name}, written by `pgo-build init` as a starting point.\n\
         # `pgo-build doctor` checks it and the toolchain; `pgo-build run` builds, trains,\n\
         # optimizes and compares. Every key: pgo-build's book, reference/config.md.\n\
         \n\
         [build]\n\
         # The binaries to optimize: every binary target of the workspace.\n\
         bins = [{}]\n\
         # memory_budget = \"auto\"     # the memory rustc and the links of a build may use\n\
         \n\
         # [pgo]\n\
         # continuous = false         # true: processes killed by any signal keep their profile\n\
         # max_size_growth = \"5%\"     # refuse optimized binaries this much over the baseline\n\
         # cross_language = false     # true: the C/C++ build scripts compile is profiled too\n\
         \n\
         # [bolt]\n\
         # enabled = false            # true: BOLT after PGO (needs llvm-bolt of rustc's LLVM)\n\
         \n\
         # [compare]                  # the defaults:\n\
         # rounds = \"auto\"            # paired rounds: looks after 10, 20, 40, or a number\n\
         # budget = 300               # seconds the rounds of \"auto\" may take\n\
         # margin = \"2%\"              # differences within ±2% count as none\n\
         # metric: unset, services.cpu where a held-out workload has services, else wall\n\
         \n",
        quoted.join(", ")
    );
    for (bench, why) in &proposal.skipped {
        text += &format!(
            "# Not proposed: the benchmark `{}` (package `{}`) cannot run here: {why}.\n",
            bench.name, bench.package
        );
    }
    if !proposal.skipped.is_empty() {
        text += "\n";
    }
    let mut benches = proposal.benches.iter();
    // The service stubs are live when the placeholder workload names them; beside a
    // benchmark (which needs no server) they are written commented.
    let live_services = proposal.benches.is_empty();
    for server in &servers {
        text += &service_stub(server, live_services);
    }
    let services_line = if live_services && !servers.is_empty() {
        let names: Vec<String> = servers.iter().map(|s| format!("{:?}", s.name)).collect();
        format!("services = [{}]\n", names.join(", "))
    } else {
        String::new()
    };
    match benches.next() {
        Some(bench) => {
            text += &format!(
                "# Training: the workspace's own benchmark `{}` (package `{}`), built and run with\n\
                 # each stage's settings. Work like production's trains best: add workloads that\n\
                 # run the binaries ({}) on real inputs.\n",
                bench.name,
                bench.package,
                variables.join(", ")
            );
            text += &bench_workload(bench, "train");
        }
        None => {
            text += &format!(
                "# Training: replace the command with real work for the binaries, like production's\n\
                 # (a benchmark script, a replay of requests, a test corpus). {} is the binary of\n\
                 # the stage under test, $PGO_BUILD_BIN_DIR their directory; a string runs with\n\
                 # `bash -eo pipefail -c`, a list directly. Or train on the tests instead:\n\
                 # cargo = [\"test\", \"--workspace\"] (they exercise setup and error paths more than\n\
                 # hot ones).\n\
                 [[workload]]\n\
                 name = \"train\"\n\
                 role = \"train\"\n\
                 command = 'echo \"pgo-build.toml: {PLACEHOLDER}\" >&2; exit 1'\n\
                 {services_line}\
                 timeout = \"30m\"\n\n",
                variables
                    .first()
                    .map_or("$PGO_BUILD_BIN_<NAME>", String::as_str)
            );
        }
    }
    match benches.next() {
        Some(bench) => {
            text += &format!(
                "# Held out: another benchmark, `{}`, which training never runs. The speedup is\n\
                 # measured on it.\n",
                bench.name
            );
            text += &bench_workload(bench, "holdout");
        }
        None => {
            text += &format!(
                "# Held out: work training never sees, on other inputs. `run` ends by measuring the\n\
                 # speedup on it; `doctor` refuses this placeholder until it is replaced, e.g. with\n\
                 # command = '\"{}\" <other inputs than training>'\n\
                 [[workload]]\n\
                 name = \"holdout\"\n\
                 role = \"holdout\"\n\
                 command = 'echo \"pgo-build.toml: {HOLDOUT_PLACEHOLDER}\" >&2; exit 1'\n\
                 timeout = \"30m\"\n",
                variables
                    .first()
                    .map_or("$PGO_BUILD_BIN_<NAME>", String::as_str)
            );
        }
    }
    text
}

/// A `[[service]]` running `server`, stopped by SIGINT: the servers that exit normally on
/// any signal mostly do on Ctrl-C (tokio's `signal::ctrl_c`), while SIGTERM, the default,
/// kills those that handle only Ctrl-C before they write their profile.
fn service_stub(server: &BinTarget, live: bool) -> String {
    let comment = if live { "" } else { "# " };
    format!(
        "# `{name}` looks like a server: training starts it as a service before each run of\n\
         # the workloads that name it (`services = [\"{name}\"]`) and stops it after. It writes\n\
         # its profile only when it exits normally, so `stop.signal` must be one it handles:\n\
         # \"SIGINT\" for a server that stops on Ctrl-C, \"SIGTERM\" for one that handles\n\
         # SIGTERM (accepted: SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2), or\n\
         # `stop.command`. `ready` says when it accepts work: tcp, unix, log or command.\n\
         {comment}[[service]]\n\
         {comment}name = \"{name}\"\n\
         {comment}command = '\"${var}\"'\n\
         # ready = {{ tcp = \"127.0.0.1:<its port>\" }}\n\
         {comment}stop = {{ signal = \"SIGINT\" }}\n\n",
        name = server.name,
        var = bin_env_var(&server.name),
    )
}

fn bench_workload(bench: &BinTarget, role: &str) -> String {
    format!(
        "[[workload]]\n\
         name = \"bench-{}\"\n\
         role = \"{role}\"\n\
         cargo = [\"bench\", \"-p\", {:?}, \"--bench\", {:?}]\n\
         timeout = \"30m\"\n\n",
        bench.name, bench.package, bench.name
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace(benches: &[&str]) -> Workspace {
        let target = |name: &str| BinTarget {
            name: name.to_owned(),
            package: "pkg".to_owned(),
        };
        Workspace {
            root: "/ws/server".into(),
            target_dir: "/ws/server/target".into(),
            manifests: Vec::new(),
            binaries: vec![target("server"), target("cli-tool")],
            outside_path_dependencies: Default::default(),
            member_dependencies: Default::default(),
            direct_dependencies: Default::default(),
            targets: Vec::new(),
            benches: benches.iter().map(|b| target(b)).collect(),
            target_sources: Vec::new(),
            full_metadata: Default::default(),
        }
    }

    fn text_of(workspace: &Workspace) -> String {
        config_text(workspace, &Proposal::of(workspace, false))
    }

    #[test]
    fn the_commented_compare_section_states_the_defaults() {
        // Uncommented, the `[compare]` lines init writes give what leaving them out gives: the
        // comments say the defaults, not one the code no longer has.
        let text = text_of(&workspace(&[]));
        let section: String = text
            .lines()
            .skip_while(|line| !line.starts_with("# [compare]"))
            .take_while(|line| line.starts_with('#'))
            .filter_map(|line| line.strip_prefix("# "))
            .filter(|line| line.starts_with('[') || line.contains(" = "))
            .map(|line| format!("{}\n", line.split("  #").next().unwrap_or(line)))
            .collect();
        assert!(section.starts_with("[compare]"), "{text}");
        assert!(section.lines().count() >= 4, "{section}");
        let path = std::path::Path::new("/ws/x.toml");
        let base = text.replace("# [compare]", "");
        let stated = crate::config::Config::parse(&format!("{base}\n{section}"), path)
            .unwrap_or_else(|err| panic!("{err:#}\n{section}"));
        let default = crate::config::Config::parse(&base, path).unwrap();
        let (stated, default) = (&stated.compare, &default.compare);
        assert_eq!(
            stated
                .rounds
                .unwrap_or(crate::measure::metric::Rounds::Auto),
            default
                .rounds
                .unwrap_or(crate::measure::metric::Rounds::Auto),
            "{section}"
        );
        assert_eq!(stated.budget_secs(), default.budget_secs(), "{section}");
        assert_eq!(stated.margin(), default.margin(), "{section}");
    }

    #[test]
    fn every_variant_of_the_text_is_a_valid_configuration() {
        for benches in [&[][..], &["parse"][..], &["parse", "serve"][..]] {
            let text = text_of(&workspace(benches));
            let config = crate::config::Config::parse(&text, std::path::Path::new("/ws/x.toml"))
                .unwrap_or_else(|err| panic!("{err:#}\n{text}"));
            // A train and a held-out workload, always: without a held-out one `run`
            // measures nothing.
            let roles: Vec<crate::config::Role> = config.workloads.iter().map(|w| w.role).collect();
            assert_eq!(
                roles,
                [crate::config::Role::Train, crate::config::Role::Holdout],
                "{text}"
            );
            assert_eq!(
                config.build.bins.as_deref(),
                Some(&["server".to_owned(), "cli-tool".to_owned()][..])
            );
        }
        let two = text_of(&workspace(&["parse", "serve"]));
        assert!(
            two.contains("name = \"bench-serve\"\nrole = \"holdout\""),
            "{two}"
        );
        let none = text_of(&workspace(&[]));
        assert!(none.contains("$PGO_BUILD_BIN_SERVER"), "{none}");
        assert!(none.contains(PLACEHOLDER), "{none}");
        assert!(none.contains(HOLDOUT_PLACEHOLDER), "{none}");
        assert!(
            none.starts_with("#:schema ./pgo-build.schema.json\n"),
            "{none}"
        );
    }

    #[test]
    fn servers_get_a_service_the_placeholder_workload_names() {
        let config = |text: &str| {
            crate::config::Config::parse(text, std::path::Path::new("/ws/x.toml"))
                .unwrap_or_else(|err| panic!("{err:#}\n{text}"))
        };
        // "server" by its name; "cli-tool" is not one.
        let text = text_of(&workspace(&[]));
        let parsed = config(&text);
        let names: Vec<&str> = parsed.services.iter().map(|s| s.name()).collect();
        assert_eq!(names, ["server"], "{text}");
        assert_eq!(parsed.workloads[0].services, ["server"], "{text}");
        assert_eq!(parsed.services[0].stop.signal.as_deref(), Some("SIGINT"));
        // Beside a benchmark the stub is there to uncomment, not live.
        let text = text_of(&workspace(&["parse"]));
        assert!(config(&text).services.is_empty(), "{text}");
        assert!(
            text.contains("# [[service]]\n# name = \"server\""),
            "{text}"
        );
        // A server framework makes a server of any name, a client word never.
        let mut ws = workspace(&[]);
        ws.binaries = vec![
            BinTarget {
                name: "api".into(),
                package: "web".into(),
            },
            BinTarget {
                name: "web-cli".into(),
                package: "web".into(),
            },
            BinTarget {
                name: "tool".into(),
                package: "pkg".into(),
            },
        ];
        ws.direct_dependencies
            .insert("web".into(), vec!["serde".into(), "axum".into()]);
        let servers: Vec<&str> = likely_servers(&ws)
            .iter()
            .map(|b| b.name.as_str())
            .collect();
        assert_eq!(servers, ["api"]);
    }
    /// A benchmark that cannot run here (nightly-only, inputs missing) is named in a comment
    /// and not proposed; the next one that can run trains instead.
    #[test]
    fn benchmarks_that_cannot_run_here_are_not_proposed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("benches")).unwrap();
        let mut ws = workspace(&["nightly", "data", "plain"]);
        for (name, source) in [
            ("nightly", "#![feature(test)]\nextern crate test;\n"),
            (
                "data",
                "fn main() { std::fs::read(\"tests/corpus/a.md\").unwrap(); }\n",
            ),
            ("plain", "fn main() {}\n"),
        ] {
            let src_path = dir.path().join(format!("benches/{name}.rs"));
            std::fs::write(&src_path, source).unwrap();
            ws.target_sources
                .push(crate::cargo::target_source::TargetSource {
                    kind: "bench".into(),
                    name: name.into(),
                    package: "pkg".into(),
                    src_path,
                    package_root: dir.path().to_owned(),
                    required_features: Vec::new(),
                });
        }
        let proposal = Proposal::of(&ws, false);
        let names: Vec<&str> = proposal.benches.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(names, ["plain"]);
        let text = config_text(&ws, &proposal);
        assert!(
            text.contains(
                "# Not proposed: the benchmark `nightly` (package `pkg`) cannot run \
                 here: its source uses #![feature(test)]"
            ),
            "{text}"
        );
        assert!(text.contains("`tests/corpus/a.md`"), "{text}");
        let config = crate::config::Config::parse(&text, std::path::Path::new("/ws/x.toml"))
            .unwrap_or_else(|err| panic!("{err:#}\n{text}"));
        assert_eq!(
            config.workloads[0].cargo.as_deref(),
            Some(&["bench", "-p", "pkg", "--bench", "plain"].map(String::from)[..]),
            "{text}"
        );
        // A nightly compiler runs the first.
        let names: Vec<String> = Proposal::of(&ws, true)
            .benches
            .iter()
            .map(|b| b.name.clone())
            .collect();
        assert_eq!(names, ["nightly", "plain"]);
    }

    /// What `init` writes validates against the schema editors get, and the schema catches
    /// what loading refuses: a misspelt key, a wrong type.
    #[test]
    fn init_output_validates_and_a_wrong_key_does_not() {
        let validator = jsonschema::validator_for(&crate::config::config_schema::config_schema())
            .expect("a valid schema");
        let as_json = |text: &str| -> serde_json::Value {
            serde_json::to_value(toml::from_str::<toml::Value>(text).expect("TOML")).unwrap()
        };
        let benches_sets: [&[&str]; 3] = [&[], &["parse"], &["parse", "serve"]];
        for benches in benches_sets {
            let text = text_of(&workspace(benches));
            let errors: Vec<String> = validator
                .iter_errors(&as_json(&text))
                .map(|e| e.to_string())
                .collect();
            assert!(errors.is_empty(), "{errors:?}\n{text}");
        }
        for wrong in [
            "[build]\nbinz = [\"a\"]\n",
            "[compare]\nrounds = \"many\"\n",
            "[[service]]\nname = \"db\"\ncommand = \"db\"\nstop = { sginal = \"SIGINT\" }\n",
        ] {
            assert!(!validator.is_valid(&as_json(wrong)), "{wrong}");
            // Loading refuses it too: the schema says no more than pgo-build does.
            assert!(
                crate::config::Config::parse(wrong, std::path::Path::new("/ws/x.toml")).is_err(),
                "{wrong}"
            );
        }
    }
}
