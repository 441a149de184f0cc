//! Turns parsed flags into a [`Session`] and dispatches on the command.

use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;

use crate::cli::{Cli, Command, ProfileCommand};
use crate::interrupt;
use crate::pipeline::{self, Session};
use crate::printer::{Printer, Verbosity};

pub fn main() -> ExitCode {
    let cli = Cli::parse();
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
        Command::Report(args) => return pipeline::show_report(&cli.global, args, &printer),
        _ => {}
    }
    let mut session = Session::new(&cli.global, printer)?;
    match &cli.command {
        Command::Doctor => session.stage("doctor", |s| s.doctor()),
        Command::Build => session.stage("build", |s| s.build_baseline()),
        Command::Instrument => session.stage("instrument", |s| s.instrument()),
        Command::Train(args) => session.stage("train", |s| s.train(args)),
        Command::Pack(args) => session.stage("pack", |s| s.pack(args)),
        Command::Unpack(args) => session.stage("unpack", |s| s.unpack(args)),
        Command::Merge(args) => session.stage("merge", |s| s.merge(args)),
        Command::Optimize(args) => session.stage("optimize", |s| s.optimize(args)),
        Command::Bolt(args) => session.stage("bolt", |s| s.bolt(args)),
        Command::Profile(args) => match &args.command {
            ProfileCommand::Show(show) => session.profile_show(show),
            ProfileCommand::Overlap(overlap) => {
                session.stage("overlap", |s| s.profile_overlap(overlap))
            }
        },
        Command::Export(args) => session.stage("export", |s| s.export(args)),
        Command::Compare(args) => session.stage("compare", |s| s.compare(args).map(drop)),
        Command::Run(args) => session.run_all(args),
        Command::Explore(args) => session.explore(args),
        Command::Clean | Command::Report(_) => unreachable!("handled above"),
    }
}
