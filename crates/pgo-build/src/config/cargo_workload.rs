//! Workloads that are cargo commands (`cargo = ["bench", "--bench", "parse"]`): what is
//! accepted, and the command line that runs one against a stage's build.
//!
//! A cargo workload builds its own binaries (benches, tests, examples) in the stage's cargo
//! target dir with exactly the stage's cargo profile, target, features and rustflags, so the
//! library crates they share with the staged binaries are the very same units: the same
//! profile names, nothing rebuilt.

/// The cargo commands a workload may be.
pub const SUBCOMMANDS: [&str; 3] = ["bench", "test", "run"];

/// Cargo's own arguments: those before `--` (the rest goes to the program).
fn own_args(args: &[String]) -> &[String] {
    let end = args.iter().position(|a| a == "--").unwrap_or(args.len());
    &args[..end]
}

/// The targets a cargo workload names (`--bench parse`, `--test=api`, `--example demo`,
/// `--bin cli`), by kind: each must exist in the workspace, checked before anything runs.
pub fn named_targets(args: &[String]) -> Vec<(&'static str, String)> {
    let own = own_args(args);
    let mut named = Vec::new();
    for (i, arg) in own.iter().enumerate() {
        for kind in ["bench", "test", "example", "bin"] {
            let flag = format!("--{kind}");
            if *arg == flag {
                if let Some(name) = own.get(i + 1).filter(|n| !n.starts_with('-')) {
                    named.push((kind, name.clone()));
                }
            } else if let Some(name) = arg.strip_prefix(&format!("{flag}=")) {
                named.push((kind, name.to_owned()));
            }
        }
    }
    named
}

/// Why a cargo workload's named targets are not all in the workspace, if they are not.
pub fn check_targets(args: &[String], targets: &[(String, String)]) -> Result<(), String> {
    for (kind, name) in named_targets(args) {
        if !targets.iter().any(|(k, n)| k == kind && *n == name) {
            let known: Vec<&str> = targets
                .iter()
                .filter(|(k, _)| k == kind)
                .map(|(_, n)| n.as_str())
                .collect();
            return Err(format!(
                "`--{kind} {name}`: the workspace has no {kind} target `{name}` ({})",
                if known.is_empty() {
                    format!("it has no {kind} targets")
                } else {
                    format!("{kind} targets: {}", known.join(", "))
                }
            ));
        }
    }
    Ok(())
}

/// Refuses what cannot be a cargo workload: no or another subcommand, or flags that would
/// build somewhere else than the stage (its target dir, target, workspace).
pub fn check(args: &[String]) -> Result<(), String> {
    let Some(subcommand) = args.first() else {
        return Err("`cargo` is empty; give a cargo command, e.g. [\"bench\"]".to_owned());
    };
    if !SUBCOMMANDS.contains(&subcommand.as_str()) {
        return Err(format!(
            "`cargo {subcommand}` is not supported: a cargo workload is one of `cargo {}` (they \
             build and run benches, tests or examples)",
            SUBCOMMANDS.join("`, `cargo ")
        ));
    }
    for arg in own_args(args) {
        for flag in ["--target-dir", "--target", "--manifest-path"] {
            if arg == flag || arg.starts_with(&format!("{flag}=")) {
                return Err(format!(
                    "`{flag}` in `cargo`: pgo-build runs the command in the stage's own target \
                     dir, for the stage's target, in this workspace; remove it"
                ));
            }
        }
    }
    Ok(())
}

/// Refuses a `--release` or `--profile` that names another profile than the stage's.
pub fn check_profile(args: &[String], stage_profile: &str) -> Result<(), String> {
    let own = own_args(args);
    let mut named = Vec::new();
    for (i, arg) in own.iter().enumerate() {
        if arg == "--release" || arg == "-r" {
            named.push("release".to_owned());
        } else if arg == "--profile" {
            named.extend(own.get(i + 1).cloned());
        } else if let Some(profile) = arg.strip_prefix("--profile=") {
            named.push(profile.to_owned());
        }
    }
    match named.into_iter().find(|profile| profile != stage_profile) {
        Some(profile) => Err(format!(
            "it asks for cargo profile `{profile}`, but the stages are built with `{stage_profile}`. \
             Its binaries would get other codegen settings and symbol names, so their profiles \
             would not match the staged binaries (and the comparison would compare other \
             builds). Remove it: pgo-build passes --profile {stage_profile}"
        )),
        None => Ok(()),
    }
}

/// `cargo <subcommand> --profile P --target T --target-dir D [--features F] <the user's
/// arguments without --release/--profile>`.
pub fn command_line(
    args: &[String],
    profile: &str,
    target: &str,
    target_dir: &std::path::Path,
    features: &[String],
    cargo_config: &[String],
) -> Vec<String> {
    let mut line = vec![
        args[0].clone(),
        "--profile".to_owned(),
        profile.to_owned(),
        "--target".to_owned(),
        target.to_owned(),
        "--target-dir".to_owned(),
        target_dir.display().to_string(),
    ];
    if !features.is_empty() {
        line.push("--features".to_owned());
        line.push(features.join(","));
    }
    for value in cargo_config {
        line.push("--config".to_owned());
        line.push(value.clone());
    }
    let own = own_args(&args[1..]).len() + 1;
    let mut skip_next = false;
    for (i, arg) in args.iter().enumerate().skip(1) {
        if skip_next {
            skip_next = false;
            continue;
        }
        if i < own && (arg == "--release" || arg == "-r" || arg.starts_with("--profile=")) {
            continue;
        }
        if i < own && arg == "--profile" {
            skip_next = true;
            continue;
        }
        line.push(arg.clone());
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_targets_must_be_in_the_workspace() {
        let args = |line: &str| -> Vec<String> { line.split(' ').map(str::to_owned).collect() };
        let targets = vec![
            ("bench".to_owned(), "parse".to_owned()),
            ("lib".to_owned(), "calc".to_owned()),
        ];
        assert_eq!(
            named_targets(&args("bench --bench parse --test=api -- --bench ignored")),
            [("bench", "parse".to_owned()), ("test", "api".to_owned())]
        );
        assert_eq!(
            check_targets(&args("bench --bench parse"), &targets),
            Ok(())
        );
        assert_eq!(check_targets(&args("bench"), &targets), Ok(()));
        let err = check_targets(&args("bench --bench prase"), &targets).unwrap_err();
        assert!(
            err.contains("no bench target `prase` (bench targets: parse)"),
            "{err}"
        );
        let err = check_targets(&args("test --test api"), &targets).unwrap_err();
        assert!(err.contains("it has no test targets"), "{err}");
    }

    fn words(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn only_bench_test_and_run_that_build_in_the_stage() {
        assert!(check(&words("bench --bench parse")).is_ok());
        assert!(check(&words("test -p engine")).is_ok());
        assert!(check(&words("run --example load -- --target-dir x")).is_ok());
        assert!(check(&[]).unwrap_err().contains("empty"));
        assert!(
            check(&words("build"))
                .unwrap_err()
                .contains("not supported")
        );
        assert!(
            check(&words("bench --target-dir /t"))
                .unwrap_err()
                .contains("--target-dir")
        );
        assert!(check(&words("test --target=x86_64-unknown-linux-musl")).is_err());
    }

    #[test]
    fn another_profile_is_refused_the_stage_profile_is_not_passed_twice() {
        assert!(check_profile(&words("bench --release"), "release").is_ok());
        assert!(check_profile(&words("bench --profile dist"), "dist").is_ok());
        let err = check_profile(&words("bench --release"), "dist").unwrap_err();
        assert!(err.contains("cargo profile `release`"), "{err}");
        assert!(check_profile(&words("test --profile=bench"), "release").is_err());
        // After `--` the words are the program's.
        assert!(check_profile(&words("run -- --profile x"), "release").is_ok());
        let line = command_line(
            &words("bench --release --bench parse -- --profile x"),
            "release",
            "x86_64-unknown-linux-gnu",
            std::path::Path::new("/t"),
            &[],
            &["profile.release.lto=\"fat\"".to_owned()],
        );
        assert_eq!(
            line.join(" "),
            "bench --profile release --target x86_64-unknown-linux-gnu --target-dir /t \
             --config profile.release.lto=\"fat\" --bench parse -- --profile x"
        );
    }
}
