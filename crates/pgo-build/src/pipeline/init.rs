//! `pgo-build init`: a commented `pgo-build.toml` to start from, written from what `cargo
//! metadata` says of the workspace: its binaries, a train workload from its own benchmarks
//! when it has them (cargo workloads, run with each stage's settings), else a placeholder
//! that fails with what to write until it is replaced; a held-out workload from a second
//! benchmark, else a commented one; the settings a user is likely to change, commented.

use crate::cargo::workspace::{BinTarget, Workspace};
use crate::exec::bin_env_var;

/// What the placeholder train command says until it is replaced.
pub const PLACEHOLDER: &str = "replace the command of the train workload with real work";

pub fn config_text(workspace: &Workspace) -> String {
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
    let mut text = format!(
        "# pgo-build configuration of {name}, written by `pgo-build init` as a starting point.\n\
         # `pgo-build doctor` checks it and the toolchain; `pgo-build run` builds, trains,\n\
         # optimizes and compares. pgo-build's README explains every key.\n\
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
         # [compare]\n\
         # rounds = 10                # paired A/B rounds of the comparison\n\
         # margin = \"2%\"              # differences within ±2% count as none\n\
         # metric = \"wall\"            # or cpu, instructions, or a metric a workload reports\n\
         \n",
        quoted.join(", ")
    );
    let mut benches = workspace.benches.iter();
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
                 # speedup on it; without one nothing is measured. Uncomment and fill in:\n\
                 # [[workload]]\n\
                 # name = \"holdout\"\n\
                 # role = \"holdout\"\n\
                 # command = '\"{}\" <other inputs than training>'\n",
                variables
                    .first()
                    .map_or("$PGO_BUILD_BIN_<NAME>", String::as_str)
            );
        }
    }
    text
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
            targets: Vec::new(),
            benches: benches.iter().map(|b| target(b)).collect(),
        }
    }

    #[test]
    fn every_variant_of_the_text_is_a_valid_configuration() {
        for benches in [&[][..], &["parse"][..], &["parse", "serve"][..]] {
            let text = config_text(&workspace(benches));
            let config = crate::config::Config::parse(&text, std::path::Path::new("/ws/x.toml"))
                .unwrap_or_else(|err| panic!("{err:#}\n{text}"));
            assert_eq!(config.workloads.len(), benches.len().max(1), "{text}");
            assert_eq!(
                config.build.bins.as_deref(),
                Some(&["server".to_owned(), "cli-tool".to_owned()][..])
            );
        }
        let two = config_text(&workspace(&["parse", "serve"]));
        assert!(
            two.contains("name = \"bench-serve\"\nrole = \"holdout\""),
            "{two}"
        );
        let none = config_text(&workspace(&[]));
        assert!(none.contains("$PGO_BUILD_BIN_SERVER"), "{none}");
        assert!(none.contains(PLACEHOLDER), "{none}");
    }
}
