//! All user-facing output goes through [`Printer`], so that `-q` and `-v` mean the same thing
//! in every stage. Progress and logs go to stderr; tables meant to be read or piped go to
//! stdout.

use std::io::Write;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verbosity {
    Quiet,
    Normal,
    Verbose,
}

#[derive(Debug, Clone, Copy)]
pub struct Printer {
    verbosity: Verbosity,
}

impl Printer {
    pub fn new(verbosity: Verbosity) -> Printer {
        Printer { verbosity }
    }

    pub fn is_verbose(&self) -> bool {
        self.verbosity == Verbosity::Verbose
    }

    /// Greppable stage boundary: `pgo-build stage <name> start`.
    pub fn stage_start(&self, stage: &str) {
        if self.verbosity > Verbosity::Quiet {
            eprintln!("pgo-build stage {stage} start");
        }
    }

    /// Greppable stage boundary: `pgo-build stage <name> ok|failed|skipped <seconds>s`.
    pub fn stage_end(&self, stage: &str, result: &str, duration: Duration) {
        if self.verbosity > Verbosity::Quiet || result != "ok" {
            eprintln!(
                "pgo-build stage {stage} {result} {:.2}s",
                duration.as_secs_f64()
            );
        }
    }

    pub fn info(&self, message: impl std::fmt::Display) {
        if self.verbosity > Verbosity::Quiet {
            eprintln!("  {message}");
        }
    }

    /// Details only shown with `-v`: exact command lines, per-file decisions.
    pub fn detail(&self, message: impl std::fmt::Display) {
        if self.is_verbose() {
            eprintln!("  {message}");
        }
    }

    pub fn warn(&self, message: impl std::fmt::Display) {
        eprintln!("warning: {message}");
    }

    /// Text from a tool (rendered rustc diagnostics), passed through unchanged.
    pub fn passthrough(&self, text: &str) {
        if self.verbosity > Verbosity::Quiet {
            eprint!("{text}");
        }
    }

    /// Tables and summaries: shown even with `-q`.
    pub fn table(&self, text: impl std::fmt::Display) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{text}");
    }

    /// A spinner with elapsed time for a long step. Drawn only at normal verbosity and only
    /// when stderr is a terminal (indicatif hides it otherwise): nothing animated in CI logs.
    pub fn spinner(&self, message: impl Into<String>) -> indicatif::ProgressBar {
        if self.verbosity != Verbosity::Normal {
            return indicatif::ProgressBar::hidden();
        }
        let bar = indicatif::ProgressBar::new_spinner();
        if let Ok(style) = indicatif::ProgressStyle::with_template("  {spinner} {msg} ({elapsed})")
        {
            bar.set_style(style);
        }
        bar.set_message(message.into());
        bar.enable_steady_tick(Duration::from_millis(120));
        bar
    }

    pub fn error(&self, error: &anyhow::Error) {
        eprintln!("error: {error:#}");
    }
}

/// "5 min ago": a time span for messages about earlier runs.
pub fn ago(elapsed: std::time::Duration) -> String {
    let secs = elapsed.as_secs();
    match secs {
        0..120 => format!("{secs} s ago"),
        120..7200 => format!("{} min ago", secs / 60),
        7200..172_800 => format!("{} h ago", secs / 3600),
        _ => format!("{} days ago", secs / 86_400),
    }
}
