//! One typed builder for every external command pgo-build runs (cargo, rustc, llvm-profdata,
//! workloads). It renders the exact command line, including environment changes, so `-v`
//! output can be pasted into a shell to reproduce any step by hand.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use anyhow::{Context, Result, bail};

use crate::util::printer::Printer;

#[derive(Debug, Clone)]
pub struct Cmd {
    program: OsString,
    args: Vec<OsString>,
    env_set: Vec<(OsString, OsString)>,
    env_remove: Vec<OsString>,
    cwd: Option<PathBuf>,
}

/// pgo-build's own arguments after the program name, for logs and records. Not
/// `std::env::args`, which panics on an argument that is not UTF-8 (a path flag may hold one).
pub fn own_arguments() -> Vec<String> {
    std::env::args_os()
        .skip(1)
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect()
}

impl Cmd {
    pub fn new(program: impl AsRef<OsStr>) -> Cmd {
        Cmd {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            env_set: Vec::new(),
            env_remove: Vec::new(),
            cwd: None,
        }
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Cmd {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Cmd
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Cmd {
        self.env_set
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Cmd {
        self.env_remove.push(key.as_ref().to_owned());
        self
    }

    pub fn cwd(mut self, dir: impl AsRef<Path>) -> Cmd {
        self.cwd = Some(dir.as_ref().to_owned());
        self
    }

    /// The command as a shell line: `(cd DIR && env -u X K=V program args…)`.
    pub fn display(&self) -> String {
        let mut words = Vec::new();
        if !self.env_remove.is_empty() || !self.env_set.is_empty() {
            words.push("env".to_owned());
        }
        for key in &self.env_remove {
            words.push(format!("-u {}", shell_quote(key)));
        }
        for (key, value) in &self.env_set {
            // CARGO_ENCODED_RUSTFLAGS separates flags with 0x1f; show it readably.
            let value = value.to_string_lossy().replace('\u{1f}', "\\x1f");
            words.push(format!(
                "{}={}",
                key.to_string_lossy(),
                shell_quote(OsStr::new(&value))
            ));
        }
        words.push(shell_quote(&self.program));
        words.extend(self.args.iter().map(|a| shell_quote(a)));
        let line = words.join(" ");
        match &self.cwd {
            Some(dir) => format!("(cd {} && {line})", shell_quote(dir.as_os_str())),
            None => line,
        }
    }

    /// The std command, for callers that need to manage the child themselves.
    pub fn to_command(&self) -> Command {
        let mut command = Command::new(&self.program);
        command.args(&self.args);
        for key in &self.env_remove {
            command.env_remove(key);
        }
        for (key, value) in &self.env_set {
            command.env(key, value);
        }
        if let Some(dir) = &self.cwd {
            command.current_dir(dir);
        }
        command
    }

    /// Starts the command; fails with the command line when the program cannot be started.
    pub fn spawn(
        &self,
        printer: &Printer,
        stdout: Stdio,
        stderr: Stdio,
    ) -> Result<std::process::Child> {
        printer.detail(format!("$ {}", self.display()));
        self.to_command()
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("could not start `{}`", self.display()))
    }

    /// Runs to completion with captured output, whatever the exit status.
    pub fn output(&self, printer: &Printer) -> Result<Output> {
        self.spawn(printer, Stdio::piped(), Stdio::piped())?
            .wait_with_output()
            .with_context(|| format!("could not wait for `{}`", self.display()))
    }

    /// Runs to completion and returns stdout; a non-zero exit is an error carrying stderr.
    pub fn stdout_checked(&self, printer: &Printer) -> Result<String> {
        let output = self.output(printer)?;
        if !output.status.success() {
            // Quoted, so the tool's "error:" lines do not read as pgo-build's own.
            let said: Vec<String> = String::from_utf8_lossy(&output.stderr)
                .trim_end()
                .lines()
                .map(|line| format!("  | {line}"))
                .collect();
            bail!(
                "`{}` failed ({}); it said:\n{}",
                self.display(),
                output.status,
                said.join("\n")
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}

fn shell_quote(word: &OsStr) -> String {
    let text = word.to_string_lossy();
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+%@".contains(c));
    if plain {
        text.into_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_a_pasteable_shell_line() {
        let cmd = Cmd::new("cargo")
            .args(["build", "--bin", "my bin"])
            .env("CARGO_ENCODED_RUSTFLAGS", "-Ca\u{1f}-Cb")
            .env_remove("RUSTFLAGS")
            .cwd("/w s");
        assert_eq!(
            cmd.display(),
            r"(cd '/w s' && env -u RUSTFLAGS CARGO_ENCODED_RUSTFLAGS='-Ca\x1f-Cb' cargo build --bin 'my bin')"
        );
    }

    #[test]
    fn failing_command_reports_its_stderr() {
        let printer = Printer::new(crate::util::printer::Verbosity::Quiet);
        let err = Cmd::new("sh")
            .args(["-c", "echo broken >&2; exit 3"])
            .stdout_checked(&printer)
            .unwrap_err();
        let text = format!("{err:#}");
        assert!(text.contains("exit status: 3"), "{text}");
        // Quoted, never a line of its own that reads as pgo-build's.
        assert!(text.contains("it said:\n  | broken"), "{text}");
    }
}
