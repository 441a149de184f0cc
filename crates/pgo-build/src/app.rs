//! Turns parsed flags into a [`Session`] and dispatches on the command.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Parser;

use crate::cli::{Cli, Command, ProfileCommand, RunArgs};
use crate::exec::interrupt;
use crate::layout::step::Step;
use crate::pipeline::{self, Loaded, Session};
use crate::util::printer::{Printer, Verbosity};

/// Installed as `cargo-pgo-build` (a link to pgo-build), cargo runs it for `cargo pgo-build
/// …` with `pgo-build` as the first argument.
const CARGO_SUBCOMMAND: &str = "cargo-pgo-build";

pub fn main() -> ExitCode {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let as_cargo_subcommand = args.first().is_some_and(|argv0| {
        std::path::Path::new(argv0)
            .file_name()
            .is_some_and(|name| name == CARGO_SUBCOMMAND)
    });
    if as_cargo_subcommand && args.get(1).is_some_and(|arg| arg == "pgo-build") {
        args.remove(1);
    }
    let cli = Cli::parse_from(args);
    let verbosity = if cli.global.quiet {
        Verbosity::Quiet
    } else if cli.global.verbose {
        Verbosity::Verbose
    } else {
        Verbosity::Normal
    };
    let printer = Printer::new(verbosity);
    interrupt::install();
    match run(cli, printer) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            printer.error(&err);
            match err.downcast_ref::<interrupt::Interrupted>() {
                // 130 for SIGINT, 143 for SIGTERM, as if the signal had ended pgo-build.
                Some(interrupted) => ExitCode::from(interrupted.exit_code()),
                None => ExitCode::FAILURE,
            }
        }
    }
}

fn run(cli: Cli, printer: Printer) -> Result<()> {
    match &cli.command {
        Command::Clean => return pipeline::clean(&cli.global, &printer),
        Command::Init => return pipeline::init(&cli.global, &printer),
        Command::Report(args) => return pipeline::show_report(&cli.global, args, &printer),
        _ => {}
    }
    let loaded = Loaded::load(&cli.global, &printer)?;
    let targets = loaded.targets(&cli.global);
    // `doctor` checks every target before it fails; other commands stop at the first failure.
    let mut failed = Vec::new();
    for target in &targets {
        let Some(triple) = target else {
            let command = per_target_paths(&cli.command, loaded.host(), false)?;
            let mut session = Session::new(&cli.global, printer, &loaded, None)?;
            dispatch(&command, &mut session)?;
            continue;
        };
        printer.target_start(triple);
        let result = per_target_paths(&cli.command, triple, targets.len() > 1)
            .and_then(|command| {
                let mut session = Session::new(&cli.global, printer, &loaded, Some(triple))?;
                dispatch(&command, &mut session)
            })
            .with_context(|| format!("target {triple}"));
        match result {
            Err(err) if matches!(cli.command, Command::Doctor) => {
                printer.error(&err);
                failed.push(triple.as_str());
            }
            other => other?,
        }
    }
    if !failed.is_empty() {
        bail!("doctor found problems for {} (above)", failed.join(", "));
    }
    Ok(())
}

/// The command for one target: `{target}` in its file arguments (`export --output`, `pack
/// --output`, `train --bundle`, `unpack`, `merge`) replaced by the triple. With several
/// targets each of them must contain it, or every target would write (or read) the same file.
fn per_target_paths(command: &Command, triple: &str, several: bool) -> Result<Command> {
    let expand = |path: &mut PathBuf, flag: &str| -> Result<()> {
        let text = path.to_string_lossy();
        if several && !text.contains("{target}") {
            bail!(
                "{flag} {} would be the same file for every target: put {{target}} in it \
                 (e.g. profiles/{{target}}.profdata), which becomes each target's triple",
                path.display()
            );
        }
        *path = PathBuf::from(text.replace("{target}", triple));
        Ok(())
    };
    let mut command = command.clone();
    match &mut command {
        Command::Export(args) => {
            if let Some(output) = &mut args.output {
                expand(output, "export --output")?;
            }
        }
        Command::Pack(args) => expand(&mut args.output, "pack --output")?,
        Command::Train(args) => {
            if let Some(bundle) = &mut args.bundle {
                expand(bundle, "train --bundle")?;
            }
        }
        Command::Unpack(args) => expand(&mut args.archive, "unpack")?,
        Command::Merge(args) => {
            for bundle in &mut args.bundles {
                expand(bundle, "merge")?;
            }
        }
        _ => {}
    }
    Ok(command)
}

fn dispatch(command: &Command, session: &mut Session) -> Result<()> {
    match command {
        Command::Doctor => session.stage(Step::Doctor, |s| s.doctor()),
        Command::Build => session.stage(Step::Build, |s| s.build_baseline()),
        Command::Instrument => session.stage(Step::Instrument, |s| s.instrument()),
        Command::Train(args) => session.stage(Step::Train, |s| {
            let trained = s.train(args)?;
            match &args.bundle {
                Some(path) => s.write_bundle(path, &trained),
                None => Ok(()),
            }
        }),
        Command::Pack(args) => session.stage(Step::Pack, |s| s.pack(args)),
        Command::Unpack(args) => session.stage(Step::Unpack, |s| s.unpack(args)),
        Command::Merge(args) => session.stage(Step::Merge, |s| s.merge(args)),
        Command::Optimize(args) => session.stage(Step::Optimize, |s| s.optimize(args)),
        Command::Bolt(args) => session.stage(Step::Bolt, |s| s.bolt(args)),
        Command::Profile(args) => match &args.command {
            ProfileCommand::Show(show) => session.profile_show(show),
            ProfileCommand::Overlap(overlap) => {
                session.stage(Step::Overlap, |s| s.profile_overlap(overlap))
            }
        },
        Command::Export(args) => session.stage(Step::Export, |s| s.export(args)),
        Command::Compare(args) => session.stage(Step::Compare, |s| s.compare(args).map(drop)),
        Command::Run(args) => session.run_all(args),
        Command::Gate(args) => session.stage(Step::Gate, |s| s.gate(args)),
        Command::Explore(args) => session.explore(args),
        Command::Clean | Command::Init | Command::Report(_) => unreachable!("handled above"),
    }?;
    // A build stage completed by its own command counts as `run`'s would.
    let completed = match command {
        Command::Build => Some((Step::Build, RunArgs::default())),
        Command::Instrument => Some((Step::Instrument, RunArgs::default())),
        // A shard, or some workloads only, is not the whole training `run` would do.
        Command::Train(args) if args.shard.is_none() && args.workloads.is_empty() => {
            Some((Step::Train, RunArgs::default()))
        }
        Command::Optimize(args) => Some((
            Step::Optimize,
            RunArgs {
                optimize: args.clone(),
                ..RunArgs::default()
            },
        )),
        Command::Bolt(args) => Some((
            Step::Bolt,
            RunArgs {
                bolt_without_pgo: args.without_pgo,
                ..RunArgs::default()
            },
        )),
        _ => None,
    };
    if let Some((step, args)) = completed {
        session.record_completed(step, &args)?;
    }
    Ok(())
}
