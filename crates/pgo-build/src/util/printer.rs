//! All user-facing output goes through [`Printer`], so that `-q` and `-v` mean the same thing
//! in every stage. Progress and logs go to stderr; tables meant to be read or piped go to
//! stdout.
//!
//! Nothing here panics on a closed pipe (`pgo-build … | head -1`, a log reader that quit):
//! `println!` and `eprintln!` would, so the rest of `src/` never uses them (`tests/tidy.rs`).
//! Progress lost to a closed stderr is dropped and the command goes on; data written to a
//! closed stdout ends quietly, as the reader asked no more.

use std::collections::BTreeSet;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use comfy_table::{ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verbosity {
    Quiet,
    Normal,
    Verbose,
}

/// Cheap to clone: clones share what has been shown (see [`Printer::warn_once`]).
#[derive(Debug, Clone)]
pub struct Printer {
    verbosity: Verbosity,
    /// What [`Printer::warn_once`] and [`Printer::first_showing`] have let through: one
    /// command's stages (and `explore`'s builds) would otherwise repeat each other's warnings.
    shown: Arc<Mutex<BTreeSet<String>>>,
    /// Where spinners draw: each on its own line, so runs side by side (instruction counts of
    /// a round's variants at once) do not draw over each other.
    spinners: indicatif::MultiProgress,
}

impl Printer {
    pub fn new(verbosity: Verbosity) -> Printer {
        Printer {
            verbosity,
            shown: Arc::default(),
            spinners: indicatif::MultiProgress::new(),
        }
    }

    /// The same verbosity with nothing shown yet: one target's commands repeat what another
    /// target's said, since it may hold for both.
    pub fn with_fresh_memory(&self) -> Printer {
        Printer::new(self.verbosity)
    }

    /// A warning, unless this printer (or a clone) has given the same one already.
    pub fn warn_once(&self, message: String) {
        // Keyed apart from the texts of `first_showing` (a compiler's warnings).
        if self.first_showing(&format!("pgo-build warning\n{message}")) {
            self.warn(message);
        }
    }

    /// Whether `text` (a compiler warning, a table) is shown for the first time: true once,
    /// false when this printer or a clone has been asked before.
    pub fn first_showing(&self, text: &str) -> bool {
        self.shown
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(text.to_owned())
    }

    pub fn is_verbose(&self) -> bool {
        self.verbosity == Verbosity::Verbose
    }

    /// Greppable step boundary: `pgo-build step <name> start` (the words scripts grep for
    /// predate the name "step").
    pub fn step_start(&self, step: &str) {
        if self.verbosity > Verbosity::Quiet {
            stderr_line(&format!("pgo-build step {step} start"));
        }
    }

    /// Greppable start of one target's commands: `pgo-build target <triple>`.
    pub fn target_start(&self, triple: &str) {
        if self.verbosity > Verbosity::Quiet {
            stderr_line(&format!("pgo-build target {triple}"));
        }
    }

    /// Greppable step boundary: `pgo-build step <name> ok|failed|cached <seconds>s`; with
    /// `--quiet`, only a step that did not end `ok` (`shown_when_quiet`).
    pub fn step_end(&self, step: &str, result: &str, shown_when_quiet: bool, duration: Duration) {
        if self.verbosity > Verbosity::Quiet || shown_when_quiet {
            stderr_line(&format!(
                "pgo-build step {step} {result} {:.2}s",
                duration.as_secs_f64()
            ));
        }
    }

    pub fn info(&self, message: impl std::fmt::Display) {
        if self.verbosity > Verbosity::Quiet {
            stderr_line(&prose(&format!("  {message}")));
        }
    }

    /// Details only shown with `-v`: exact command lines, per-file decisions. Never wrapped:
    /// a command line is copied as it is.
    pub fn detail(&self, message: impl std::fmt::Display) {
        if self.is_verbose() {
            stderr_line(&format!("  {message}"));
        }
    }

    pub fn warn(&self, message: impl std::fmt::Display) {
        stderr_line(&prose(&format!("warning: {message}")));
    }

    /// Text from a tool (rendered rustc diagnostics), passed through unchanged.
    pub fn passthrough(&self, text: &str) {
        if self.verbosity > Verbosity::Quiet {
            self.passthrough_always(text);
        }
    }

    /// Text from a tool shown even with `-q` (rustc's errors).
    pub fn passthrough_always(&self, text: &str) {
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
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
        let bar = self.spinners.add(indicatif::ProgressBar::new_spinner());
        if let Ok(style) = indicatif::ProgressStyle::with_template("  {spinner} {msg} ({elapsed})")
        {
            bar.set_style(style);
        }
        bar.set_message(message.into());
        bar.enable_steady_tick(Duration::from_millis(120));
        bar
    }

    pub fn error(&self, error: &anyhow::Error) {
        stderr_line(&prose(&format!("error: {error:#}")));
    }
}

/// One line on stderr, for progress and for the wrappers' messages under cargo. A closed
/// stderr drops it: the work goes on, and what it does is in `report.json` and the logs.
pub fn stderr_line(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{text}");
}

/// A command's data on stdout (JSON, completions, a man page). A reader that closed the pipe
/// (`| head -1`) wanted no more: that ends the output quietly; other write errors are errors.
pub fn stdout_data(data: &[u8]) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(data).and_then(|()| out.flush()) {
        Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::new(err).context("could not write to standard output"))
        }
        _ => Ok(()),
    }
}

/// `2026-12-01 00:20:13 UTC` for a time, for stamps in logs.
pub fn utc_text(time: std::time::SystemTime) -> String {
    let secs = time
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// "5 min ago": a time span for messages about earlier runs.
pub fn ago(elapsed: std::time::Duration) -> String {
    format!("{} ago", duration(elapsed))
}

/// "90 s", "5 min", "3 h", "2 days": a time span, to the unit that matters.
pub fn duration(span: std::time::Duration) -> String {
    let secs = span.as_secs();
    match secs {
        0..120 => format!("{secs} s"),
        120..7200 => format!("{} min", secs / 60),
        7200..172_800 => format!("{} h", secs / 3600),
        _ => format!("{} days", secs / 86_400),
    }
}

/// Without a terminal (piped, CI logs), tables are laid out for this many columns: a stable
/// width, and one that most log viewers show without wrapping.
const PIPED_TABLE_WIDTH: u16 = 120;

/// The width tables fit: `COLUMNS` when set, else the terminal's, else [`PIPED_TABLE_WIDTH`].
pub fn table_width() -> u16 {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|columns| columns.trim().parse().ok())
        .filter(|columns| *columns >= 20)
        .or_else(|| Table::new().width())
        .unwrap_or(PIPED_TABLE_WIDTH)
}

/// Every table's style: pgo-build's borders, cells wrapped to fit [`table_width`].
pub trait Fitted {
    fn fitted(&mut self) -> &mut Self;
}

impl Fitted for Table {
    fn fitted(&mut self) -> &mut Table {
        self.load_preset(UTF8_FULL_CONDENSED)
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_width(table_width())
    }
}

/// A table as text that fits [`table_width`] without breaking a word: laid out as a table
/// when every column can be as wide as its longest word, else stacked, one record after
/// another with a line per column ("Header: value"), which a narrow terminal reads whole.
pub fn rendered(mut table: Table) -> String {
    let width = usize::from(table_width());
    let header: Vec<String> = table
        .header()
        .map(|row| row.cell_iter().map(|cell| cell.content()).collect())
        .unwrap_or_default();
    let rows: Vec<Vec<String>> = table
        .row_iter()
        .map(|row| row.cell_iter().map(|cell| cell.content()).collect())
        .collect();
    let columns = rows
        .iter()
        .map(Vec::len)
        .chain([header.len()])
        .max()
        .unwrap_or(0);
    let longest_word = |column: usize| {
        std::iter::once(&header)
            .chain(&rows)
            .filter_map(|row| row.get(column))
            .flat_map(|cell| cell.split_whitespace())
            .map(|word| word.chars().count())
            .max()
            .unwrap_or(0)
    };
    // Each column: its longest word and a space either side; then the borders.
    let floors: Vec<usize> = (0..columns).map(|c| longest_word(c) + 2).collect();
    let borders = columns + 1;
    if floors.iter().sum::<usize>() + borders <= width {
        for (column, floor) in table.column_iter_mut().zip(&floors) {
            column.set_constraint(comfy_table::ColumnConstraint::LowerBoundary(
                comfy_table::Width::Fixed(u16::try_from(*floor).unwrap_or(u16::MAX)),
            ));
        }
        return table.to_string();
    }
    stacked(&header, &rows, width)
}

/// Each row as a record: its first cell as a title, then "Header: value" per other cell.
fn stacked(header: &[String], rows: &[Vec<String>], width: usize) -> String {
    let flat = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut records = Vec::new();
    for row in rows {
        let mut record = row.first().map(|title| flat(title)).unwrap_or_default();
        for (column, cell) in row.iter().enumerate().skip(1) {
            let value = flat(cell);
            if value.is_empty() {
                continue;
            }
            let name = header.get(column).map(|h| flat(h)).unwrap_or_default();
            record.push_str(&format!("\n  {name}: {value}"));
        }
        records.push(wrap(&record, width));
    }
    records.join("\n\n")
}

/// Sentences for a person at a terminal: wrapped at spaces to its width, each continuation
/// indented two more than the line it continues. Piped (CI logs, tests, `2>file`) a message
/// stays one line, whole for grep.
fn prose(text: &str) -> String {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return text.to_owned();
    }
    wrap(text, usize::from(table_width()))
}

/// `text` wrapped to `width` columns at spaces; a word longer than the width (a path) keeps
/// a line of its own.
fn wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let lead = line.len() - line.trim_start().len();
        // "warning: …" and "error: …" continue under the message, "  - …" under the item.
        let indent = " ".repeat((lead + 2).min(width / 2));
        let mut current = line[..lead].to_owned();
        let mut has_word = false;
        for word in line[lead..].split(' ').filter(|w| !w.is_empty()) {
            if has_word && current.chars().count() + 1 + word.chars().count() > width {
                out.push_str(&current);
                out.push('\n');
                current = indent.clone();
                has_word = false;
            }
            if has_word {
                current.push(' ');
            }
            current.push_str(word);
            has_word = true;
        }
        out.push_str(&current);
        out.push('\n');
    }
    out.pop();
    out
}

/// `text` wrapped at spaces to [`table_width`], each continuation indented two more than the
/// line it continues: a block printed with the tables (the verdict), whether or not stderr is
/// a terminal.
pub fn fit_indented(text: &str) -> String {
    wrap(text, usize::from(table_width()))
}

/// `text` with every line longer than [`table_width`] wrapped at spaces: the legends printed
/// under tables fit like the tables do.
pub fn fit_lines(text: &str) -> String {
    let width = usize::from(table_width());
    let mut out = String::new();
    for line in text.lines() {
        // A line that fits keeps its indentation (a stacked table's fields).
        if line.chars().count() <= width {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let mut current = String::new();
        for word in line.split(' ') {
            if !current.is_empty() && current.chars().count() + 1 + word.chars().count() > width {
                out.push_str(&current);
                out.push('\n');
                current.clear();
            } else if !current.is_empty() {
                current.push(' ');
            }
            current.push_str(word);
        }
        out.push_str(&current);
        out.push('\n');
    }
    out.pop();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_wraps_at_spaces_under_the_line_it_continues() {
        let text = "warning: one two three four five six seven eight nine ten\n  - alpha beta gamma delta epsilon";
        let wrapped = wrap(text, 20);
        assert_eq!(
            wrapped,
            "warning: one two\n  three four five\n  six seven eight\n  nine ten\n  - alpha beta gamma\n    delta epsilon"
        );
        assert!(
            wrapped.lines().all(|l| l.chars().count() <= 20),
            "{wrapped}"
        );
        // A word wider than the width keeps a line of its own; nothing is lost.
        let long = wrap("  see /a/very/long/path/that/does/not/fit here", 12);
        assert_eq!(
            long,
            "  see\n    /a/very/long/path/that/does/not/fit\n    here"
        );
    }

    #[test]
    fn legends_wrap_at_spaces_to_the_table_width() {
        let width = usize::from(table_width());
        let legend = "word ".repeat(100) + "\nshort line";
        let fitted = fit_lines(&legend);
        assert!(
            fitted.lines().all(|l| l.chars().count() <= width),
            "{fitted}"
        );
        assert!(fitted.ends_with("\nshort line"), "{fitted}");
        assert_eq!(fitted.split_whitespace().count(), 102);
    }

    #[test]
    fn times_are_written_as_utc_dates() {
        let at = |secs| std::time::UNIX_EPOCH + Duration::from_secs(secs);
        assert_eq!(utc_text(at(0)), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc_text(at(1_796_083_213)), "2026-12-01 00:00:13 UTC");
        assert_eq!(utc_text(at(951_782_400)), "2000-02-29 00:00:00 UTC");
    }
}
