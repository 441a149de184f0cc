//! What `doctor` checks of the workloads before any build: placeholders `init` left, cargo
//! workloads whose targets cannot run here, binaries no train workload names.

use anyhow::{Result, bail};

use crate::cargo::target_source::{TargetSource, Unrunnable};
use crate::config::{Role, Workload, WorkloadCommand};
use crate::offline::init::{HOLDOUT_PLACEHOLDER, PLACEHOLDER};
use crate::pipeline::context::Context;

/// Whether `command` is one of the placeholders `init` writes (exactly their text: a command
/// that only mentions the words is the user's own).
fn is_placeholder(command: &WorkloadCommand) -> bool {
    let placeholder = |text: &str| text.contains(PLACEHOLDER) || text.contains(HOLDOUT_PLACEHOLDER);
    match command {
        WorkloadCommand::Shell(text) => placeholder(text),
        WorkloadCommand::Argv(words) => words.iter().any(|w| placeholder(w)),
    }
}

/// Refuses a configuration whose workload still runs a placeholder `pgo-build init` wrote: it
/// would fail only after the instrumented build, and `doctor` should not pass it. Each is named
/// with the line of the file to edit and what to put there.
pub(super) fn placeholder_left(cx: &Context) -> Result<()> {
    let left: Vec<&Workload> = cx
        .config
        .workloads
        .iter()
        .filter(|w| is_placeholder(&w.command))
        .collect();
    if left.is_empty() {
        return Ok(());
    }
    let text = cx
        .config
        .path
        .as_ref()
        .and_then(|path| std::fs::read_to_string(path).ok())
        .unwrap_or_default();
    let what = left
        .iter()
        .map(|workload| {
            // The placeholder's line: the first at or after the workload's name that holds it.
            let from = crate::config::line_of(&text, workload.name.span().start);
            let at = text
                .lines()
                .enumerate()
                .skip(from.saturating_sub(1))
                .find(|(_, line)| line.contains(PLACEHOLDER) || line.contains(HOLDOUT_PLACEHOLDER))
                .map_or_else(String::new, |(i, _)| format!(" (line {})", i + 1));
            let with = match workload.role {
                Role::Holdout => {
                    "work training never sees: the binaries on other inputs, the speedup is \
                     measured there"
                }
                Role::Train => {
                    "real work for the binaries, like production's (a benchmark script, a replay \
                     of requests, a test corpus), or `cargo = [\"test\", \"--workspace\"]` to \
                     train on the tests"
                }
            };
            format!(
                "  - `{}`{at}: replace its `command` with {with}",
                workload.name()
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    bail!(
        "{} `pgo-build init` wrote; edit {}:\n{what}",
        if left.len() == 1 {
            "1 workload still runs the placeholder".to_owned()
        } else {
            format!("{} workloads still run the placeholders", left.len())
        },
        cx.config.display_path()
    )
}

/// The bench and test targets a cargo workload runs: those it names (`--bench parse`, in the
/// packages `-p` selects when it selects any), or with none named every target of its
/// subcommand's kind in those packages, except targets behind `required-features`. The bool
/// says whether they were named.
fn targets_run_by<'a>(cx: &'a Context, args: &[String]) -> (Vec<&'a TargetSource>, bool) {
    let own = &args[..args.iter().position(|a| a == "--").unwrap_or(args.len())];
    let mut packages: Vec<&str> = Vec::new();
    for (i, arg) in own.iter().enumerate() {
        if arg == "-p" || arg == "--package" {
            packages.extend(own.get(i + 1).map(String::as_str));
        } else if let Some(package) = arg.strip_prefix("--package=") {
            packages.push(package);
        }
    }
    let in_packages =
        |source: &TargetSource| packages.is_empty() || packages.contains(&source.package.as_str());
    let named = crate::config::cargo_workload::named_targets(args);
    let subcommand = args.first().map(String::as_str).unwrap_or_default();
    let sources = cx
        .workspace
        .target_sources
        .iter()
        .filter(|source| in_packages(source))
        .filter(|source| {
            if named.is_empty() {
                source.kind == subcommand && source.required_features.is_empty()
            } else {
                named
                    .iter()
                    .any(|(kind, name)| *kind == source.kind && *name == source.name)
            }
        })
        .collect();
    (sources, !named.is_empty())
}

/// Cargo workloads running a bench or test target whose source cannot run here. A target the
/// workload names that needs a nightly compiler on a stable one is refused (E0554 at its first
/// build); a target it runs without naming it, or files a source names that are missing (read
/// from its string literals, which a run may create or not need), are said as warnings.
pub(super) fn unrunnable_cargo_targets(cx: &Context) -> Result<()> {
    let nightly = crate::cargo::target_source::accepts_feature_gates(&cx.rustc.version_line);
    let mut problems = Vec::new();
    for workload in &cx.config.workloads {
        let Some(args) = &workload.cargo else {
            continue;
        };
        let (sources, named) = targets_run_by(cx, args);
        for source in sources {
            for why in source.unrunnable(nightly) {
                let (fix, refused) = match why {
                    Unrunnable::NightlyOnly { .. } => (
                        "train on a target that builds on this toolchain, or run pgo-build with a \
                         nightly one (`cargo +nightly pgo-build`)",
                        named,
                    ),
                    Unrunnable::MissingInputs { .. } => (
                        "put the files there if it reads them (a published crate often ships \
                         without its test data), or train on another target",
                        false,
                    ),
                };
                let text = format!(
                    "workload `{}` runs the {} target `{}` (package `{}`), but {why}: {fix}",
                    workload.name(),
                    source.kind,
                    source.name,
                    source.package
                );
                if refused {
                    problems.push(text);
                } else {
                    cx.printer.warn(text);
                }
            }
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    bail!(
        "{} in {}:\n  - {}",
        if problems.len() == 1 {
            "a cargo workload cannot run here"
        } else {
            "cargo workloads cannot run here"
        },
        cx.config.display_path(),
        problems.join("\n  - ")
    )
}

/// Binaries that no train workload or service names (`$PGO_BUILD_BIN_<NAME>`, or
/// `$PGO_BUILD_BIN_DIR`), in its command or in a script file it runs, and that the members'
/// own sources never name, when no cargo workload trains the shared code: `optimize` would
/// refuse them after two builds and training. Said, not refused: how a binary starts another
/// cannot be known from the text alone.
pub(super) fn binaries_no_workload_names(cx: &Context) -> Vec<String> {
    let training: Vec<&Workload> = cx.config.workloads_with_role(Role::Train).collect();
    if cx.config.pgo.profile.is_some()
        || training.is_empty()
        || training.iter().any(|w| w.cargo.is_some())
    {
        return Vec::new();
    }
    let mut texts: Vec<String> = Vec::new();
    let mut add = |command: &WorkloadCommand,
                   env: &std::collections::BTreeMap<String, String>,
                   cwd: Option<&std::path::PathBuf>| {
        let words: Vec<String> = match command {
            WorkloadCommand::Shell(text) => text.split_whitespace().map(str::to_owned).collect(),
            WorkloadCommand::Argv(words) => words.clone(),
        };
        let dir = cwd.map_or_else(
            || cx.workspace.root.clone(),
            |cwd| cx.workspace.root.join(cwd),
        );
        for word in &words {
            // A script the command runs, read as well (its own calls stay unseen).
            let path = dir.join(word.trim_matches(['"', '\'']));
            if path.is_file()
                && let Ok(script) = std::fs::read(&path)
                && script.len() < 1 << 20
            {
                texts.push(String::from_utf8_lossy(&script).into_owned());
            }
        }
        texts.push(words.join(" "));
        texts.extend(env.values().cloned());
    };
    for workload in &training {
        add(&workload.command, &workload.env, workload.cwd.as_ref());
        for service in cx
            .config
            .services
            .iter()
            .filter(|s| workload.services.iter().any(|n| n == s.name()))
        {
            add(&service.command, &service.env, service.cwd.as_ref());
        }
    }
    if texts.iter().any(|text| text.contains("PGO_BUILD_BIN_DIR")) {
        return Vec::new();
    }
    let unnamed: Vec<&crate::cargo::workspace::BinTarget> = cx
        .bins
        .iter()
        .filter(|bin| {
            let var = crate::exec::bin_env_var(&bin.name);
            !texts.iter().any(|text| names_variable(text, &var))
        })
        .collect();
    if unnamed.is_empty() {
        return Vec::new();
    }
    let sources = member_sources(cx);
    unnamed
        .into_iter()
        // A binary the workspace's own code names (`current_exe().with_file_name("worker")`,
        // its variable) is taken for one another binary starts.
        .filter(|bin| {
            let literal = format!("\"{}\"", bin.name);
            let var = crate::exec::bin_env_var(&bin.name);
            !sources
                .iter()
                .any(|text| text.contains(&literal) || names_variable(text, &var))
        })
        .map(|bin| bin.name.clone())
        .collect()
}

/// The Rust sources under each member's `src/` (at most 4000 files of 1 MiB): where a binary
/// that starts another names it.
fn member_sources(cx: &Context) -> Vec<String> {
    let mut files = Vec::new();
    let mut dirs: Vec<std::path::PathBuf> = cx
        .workspace
        .manifests
        .iter()
        .filter_map(|manifest| Some(manifest.parent()?.join("src")))
        .collect();
    dirs.sort();
    dirs.dedup();
    'walk: while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => dirs.push(path),
                Ok(kind) if kind.is_file() && path.extension().is_some_and(|e| e == "rs") => {
                    files.push(path)
                }
                _ => {}
            }
            if files.len() >= 4000 {
                break 'walk;
            }
        }
    }
    files
        .iter()
        .filter(|path| std::fs::metadata(path).is_ok_and(|m| m.len() < 1 << 20))
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .collect()
}

/// Whether `text` names the variable `var` whole: `PGO_BUILD_BIN_APP` is not named by
/// `$PGO_BUILD_BIN_APP_CLI`.
fn names_variable(text: &str, var: &str) -> bool {
    text.match_indices(var).any(|(at, _)| {
        !text[at + var.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The warning for [`binaries_no_workload_names`], with the two ways out.
pub(super) fn unnamed_binaries_warning(cx: &Context, names: &[String]) -> String {
    let listed = names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let kept: Vec<String> = cx
        .bins
        .iter()
        .filter(|bin| !names.contains(&bin.name))
        .map(|bin| format!("{:?}", bin.name))
        .collect();
    let them = if names.len() == 1 { "it" } else { "them" };
    let variable = match names {
        [one] => format!("${}", crate::exec::bin_env_var(one)),
        _ => "$PGO_BUILD_BIN_<NAME>".to_owned(),
    };
    let leave_out = if kept.is_empty() {
        String::new()
    } else {
        format!(
            ", or leave {them} out with `[build] bins = [{}]`",
            kept.join(", ")
        )
    };
    format!(
        "no train workload names {listed} (by {variable} or $PGO_BUILD_BIN_DIR, in its \
         command, a script it runs, or a service): unless another binary starts {them}, \
         `optimize` will refuse {them} after building and training, for want of a profile. Add \
         a train workload that runs {them}{leave_out} in {}",
        cx.config.display_path()
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_variable_is_named_whole() {
        assert!(super::names_variable(
            "\"$PGO_BUILD_BIN_APP\" x",
            "PGO_BUILD_BIN_APP"
        ));
        assert!(super::names_variable(
            "${PGO_BUILD_BIN_APP}",
            "PGO_BUILD_BIN_APP"
        ));
        assert!(!super::names_variable(
            "$PGO_BUILD_BIN_APP_CLI x",
            "PGO_BUILD_BIN_APP"
        ));
        assert!(super::names_variable(
            "$PGO_BUILD_BIN_APP_CLI; $PGO_BUILD_BIN_APP",
            "PGO_BUILD_BIN_APP"
        ));
    }
}
