//! The toolchain: rustc (host triple, LLVM version) and an `llvm-profdata` of the same LLVM
//! major. Invariant: a tool whose LLVM major differs from rustc's is never used; the raw
//! profile format follows LLVM's version, so a mismatched tool fails or, worse, misreads.

pub mod cross_language;
pub mod targets;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::util::command::Cmd;
use crate::util::printer::Printer;

/// Why pgo-build cannot run on this operating system and architecture, if it cannot. It
/// reads processes from `/proc`, attributes profiles by ELF build ids and wraps GNU-style
/// linkers: Linux only, tested on x86_64 and aarch64.
pub fn platform_problem(os: &str, arch: &str) -> Option<String> {
    if os != "linux" {
        return Some(format!(
            "pgo-build runs on Linux (x86_64 and aarch64), and this is {os} on {arch}: it reads \
             processes from /proc, attributes profiles by ELF build ids and wraps the GNU-style \
             linkers of Linux. On another system, run it in a Linux container or VM, or use \
             rustc's -Cprofile-generate/-Cprofile-use by hand (the book's cargo-pgo page)"
        ));
    }
    None
}

/// Said of an architecture pgo-build is not tested on, which it still tries.
pub fn untested_arch(arch: &str) -> Option<String> {
    (!matches!(arch, "x86_64" | "aarch64")).then(|| {
        format!(
            "pgo-build is tested on Linux x86_64 and aarch64, not {arch}: it goes on, and a \
             problem it meets here is worth an issue"
        )
    })
}

/// An LLVM tool pgo-build uses, and how to find and install it.
#[derive(Debug, Clone, Copy)]
pub struct ToolSpec {
    pub name: &'static str,
    /// Names the tool explicitly; when set, nothing else is tried.
    pub env_var: &'static str,
    /// Arguments that make it print "LLVM version X.Y.Z" (`--version` alone fails for
    /// llvm-profdata 14).
    pub version_args: &'static [&'static str],
    /// The Debian package, without the `-<major>` suffix.
    pub apt_package: &'static str,
    /// Whether rustup's llvm-tools component ships it.
    pub in_rustup_llvm_tools: bool,
}

pub const LLVM_PROFDATA: ToolSpec = ToolSpec {
    name: "llvm-profdata",
    env_var: "PGO_BUILD_LLVM_PROFDATA",
    version_args: &["merge", "--version"],
    apt_package: "llvm",
    in_rustup_llvm_tools: true,
};

pub const LLVM_BOLT: ToolSpec = ToolSpec {
    name: "llvm-bolt",
    env_var: "PGO_BUILD_LLVM_BOLT",
    version_args: &["--version"],
    apt_package: "bolt",
    in_rustup_llvm_tools: false,
};

pub const MERGE_FDATA: ToolSpec = ToolSpec {
    name: "merge-fdata",
    env_var: "PGO_BUILD_MERGE_FDATA",
    version_args: &["--version"],
    apt_package: "bolt",
    in_rustup_llvm_tools: false,
};

#[derive(Debug, Clone)]
pub struct Rustc {
    pub program: OsString,
    /// `rustc 1.95.0 (59807616e 2026-04-14)`
    pub version_line: String,
    pub host: String,
    pub llvm_version: String,
    pub llvm_major: u32,
    pub sysroot: PathBuf,
    /// The host's `--print target-libdir --print cfg`, asked with the version.
    pub host_target: TargetPrint,
}

/// What `rustc --print target-libdir --print cfg` printed for one target: the library
/// directory's line, then the cfg lines.
#[derive(Debug, Clone, Default)]
pub struct TargetPrint(pub String);

impl TargetPrint {
    /// The library directory and the cfg lines.
    pub fn split(&self) -> (&str, &str) {
        self.0.split_once('\n').unwrap_or((&self.0, ""))
    }
}

impl Rustc {
    /// Asks the rustc cargo would use (`$RUSTC`, else `rustc` on PATH) from the workspace root,
    /// so a `rust-toolchain.toml` there is honoured.
    pub fn detect(workspace_root: &Path, printer: &Printer) -> Result<Rustc> {
        let program = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
        // Two queries at once, each a rustup proxy's start-up and rustc's: the version, and
        // the sysroot with the host's library directory and cfg, which a host build's context
        // would otherwise ask for in a third call after these.
        let (verbose_version, printed) = std::thread::scope(|scope| {
            let printed = scope.spawn(|| {
                Cmd::new(&program)
                    .args([
                        "--print",
                        "sysroot",
                        "--print",
                        "target-libdir",
                        "--print",
                        "cfg",
                    ])
                    .cwd(workspace_root)
                    .stdout_checked(printer)
            });
            let verbose_version = Cmd::new(&program)
                .arg("-vV")
                .cwd(workspace_root)
                .stdout_checked(printer);
            let printed = printed
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("the rustc query's thread panicked")));
            (verbose_version, printed)
        });
        let verbose_version = verbose_version
            .context("could not ask rustc for its version; is a Rust toolchain installed?")?;
        let printed = printed?;
        let (sysroot, host_target) = printed.split_once('\n').unwrap_or((&printed, ""));
        let mut rustc =
            Rustc::from_verbose_version(program, &verbose_version, sysroot.trim().into())?;
        rustc.host_target = TargetPrint(host_target.to_owned());
        Ok(rustc)
    }

    fn from_verbose_version(program: OsString, text: &str, sysroot: PathBuf) -> Result<Rustc> {
        let field = |name: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(name))
                .map(|value| value.trim().to_owned())
        };
        let host = field("host:").context("`rustc -vV` printed no `host:` line")?;
        let llvm_version = field("LLVM version:").with_context(|| {
            format!("`rustc -vV` printed no `LLVM version:` line; is this rustc built with LLVM?\n{text}")
        })?;
        let llvm_major = parse_major(&llvm_version)
            .with_context(|| format!("unrecognised LLVM version {llvm_version:?} from rustc"))?;
        Ok(Rustc {
            program,
            version_line: text.lines().next().unwrap_or_default().to_owned(),
            host,
            llvm_version,
            llvm_major,
            sysroot,
            host_target: TargetPrint::default(),
        })
    }
}

/// A located LLVM tool and the version it reported.
#[derive(Debug, Clone)]
pub struct LlvmTool {
    pub path: PathBuf,
    pub version: String,
}

/// One place looked at while searching for a tool, and what was found there.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub path: PathBuf,
    pub outcome: String,
}

#[derive(Debug)]
pub struct Search {
    pub tool: Option<LlvmTool>,
    pub considered: Vec<Candidate>,
    /// Set when the user named the tool with an environment variable.
    pub from_env: Option<&'static str>,
    pub spec: ToolSpec,
}

/// Finds a tool matching rustc's LLVM major, in the order: its environment variable
/// (exclusively, when set), rustup's llvm-tools, `<name>-<major>` on PATH,
/// `/usr/lib/llvm-<major>/bin`, a plain `<name>` on PATH.
pub fn find_llvm_tool(spec: ToolSpec, rustc: &Rustc, printer: &Printer) -> Search {
    let name = spec.name;
    let major = rustc.llvm_major;
    if let Some(explicit) = std::env::var_os(spec.env_var) {
        let path = PathBuf::from(explicit);
        let (tool, candidate) = probe(&path, spec.version_args, major, printer);
        return Search {
            tool,
            considered: vec![candidate],
            from_env: Some(spec.env_var),
            spec,
        };
    }
    let mut places = vec![
        rustc
            .sysroot
            .join("lib/rustlib")
            .join(&rustc.host)
            .join("bin")
            .join(name),
    ];
    places.extend(which(&format!("{name}-{major}")));
    places.push(PathBuf::from(format!("/usr/lib/llvm-{major}/bin/{name}")));
    places.extend(which(name));

    let mut considered = Vec::new();
    for path in places {
        if !path.exists() {
            considered.push(Candidate {
                path,
                outcome: "not found".into(),
            });
            continue;
        }
        let (tool, candidate) = probe(&path, spec.version_args, major, printer);
        considered.push(candidate);
        if tool.is_some() {
            return Search {
                tool,
                considered,
                from_env: None,
                spec,
            };
        }
    }
    Search {
        tool: None,
        considered,
        from_env: None,
        spec,
    }
}

fn probe(
    path: &Path,
    version_args: &[&str],
    major: u32,
    printer: &Printer,
) -> (Option<LlvmTool>, Candidate) {
    let output = Cmd::new(path).args(version_args).output(printer);
    let candidate = |outcome: String| Candidate {
        path: path.to_owned(),
        outcome,
    };
    let text = match output {
        Ok(output) if output.status.success() => {
            String::from_utf8_lossy(&output.stdout).into_owned()
        }
        Ok(output) => {
            return (
                None,
                candidate(format!("`--version` failed ({})", output.status)),
            );
        }
        Err(err) => {
            return (
                None,
                candidate(format!("could not run it: {}", err.root_cause())),
            );
        }
    };
    let Some(version) = text
        .split("LLVM version")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
    else {
        return (
            None,
            candidate(format!("unrecognised `--version` output: {}", text.trim())),
        );
    };
    match parse_major(version) {
        Some(found) if found == major => (
            Some(LlvmTool {
                path: path.to_owned(),
                version: version.to_owned(),
            }),
            candidate(format!("LLVM {version}: matches")),
        ),
        _ => (
            None,
            candidate(format!(
                "LLVM {version}: does not match rustc's LLVM {major} and cannot read its profiles"
            )),
        ),
    }
}

impl Search {
    /// The tool, or an error listing every place looked at and how to install a matching one.
    pub fn require(self, rustc: &Rustc) -> Result<LlvmTool> {
        if let Some(tool) = self.tool {
            return Ok(tool);
        }
        let name = self.spec.name;
        let major = rustc.llvm_major;
        let mut message = format!(
            "no {name} for LLVM {major} was found; rustc ({}) uses LLVM {}, and profiles can \
             only be read by tools of the same LLVM major.\n",
            rustc.version_line, rustc.llvm_version
        );
        if let Some(var) = self.from_env {
            message.push_str(&format!("{var} names a tool that cannot be used:\n"));
        } else {
            message.push_str("Looked at:\n");
        }
        for candidate in &self.considered {
            message.push_str(&format!(
                "  {}: {}\n",
                candidate.path.display(),
                candidate.outcome
            ));
        }
        let rustup = if self.spec.in_rustup_llvm_tools {
            "`rustup component add llvm-tools` (rustup toolchains), or "
        } else {
            ""
        };
        let env = match self.from_env {
            Some(var) => format!("fix or unset {var}"),
            None => format!("set {} to an LLVM {major} {name}", self.spec.env_var),
        };
        message.push_str(&format!(
            "Fix: {rustup}`apt-get install {}-{major}` (Debian/Ubuntu), or {env}.",
            self.spec.apt_package
        ));
        bail!(message)
    }
}

fn parse_major(version: &str) -> Option<u32> {
    version.split('.').next()?.trim().parse().ok()
}

/// `name` on PATH: the first match, if it is there.
pub(crate) fn which(name: &str) -> Vec<PathBuf> {
    let Some(path) = std::env::var_os("PATH") else {
        return Vec::new();
    };
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .filter(|candidate| candidate.is_file())
        .take(1)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_systems_are_refused_and_other_architectures_named() {
        for (os, arch) in [
            ("macos", "aarch64"),
            ("windows", "x86_64"),
            ("freebsd", "x86_64"),
        ] {
            let problem = platform_problem(os, arch).expect(os);
            assert!(
                problem.contains(&format!("this is {os} on {arch}")),
                "{problem}"
            );
            assert!(problem.contains("Linux (x86_64 and aarch64)"), "{problem}");
        }
        assert_eq!(platform_problem("linux", "x86_64"), None);
        assert_eq!(platform_problem("linux", "riscv64"), None);
        assert!(untested_arch("riscv64").is_some_and(|note| note.contains("not riscv64")));
        assert_eq!(untested_arch("aarch64"), None);
    }

    const RUSTC_VV: &str = "rustc 1.95.0 (59807616e 2026-04-14)\nbinary: rustc\ncommit-hash: 59807616e1fa2540724bfbac14d7976d7e4a3860\ncommit-date: 2026-04-14\nhost: x86_64-unknown-linux-gnu\nrelease: 1.95.0\nLLVM version: 22.1.2\n";

    #[test]
    fn parses_rustc_verbose_version() {
        let rustc =
            Rustc::from_verbose_version("rustc".into(), RUSTC_VV, "/sysroot".into()).unwrap();
        assert_eq!(rustc.host, "x86_64-unknown-linux-gnu");
        assert_eq!(rustc.llvm_major, 22);
        assert_eq!(rustc.version_line, "rustc 1.95.0 (59807616e 2026-04-14)");
    }

    #[test]
    fn rustc_without_llvm_is_an_error() {
        let text = RUSTC_VV.replace("LLVM version: 22.1.2\n", "");
        assert!(Rustc::from_verbose_version("rustc".into(), &text, "/s".into()).is_err());
    }

    #[test]
    fn mismatched_tool_is_rejected_with_the_fix() {
        let rustc =
            Rustc::from_verbose_version("rustc".into(), RUSTC_VV, "/sysroot".into()).unwrap();
        let fake = tempfile::tempdir().unwrap();
        let tool = fake.path().join("llvm-profdata");
        std::fs::write(&tool, "#!/bin/sh\necho 'Debian LLVM version 14.0.6'\n").unwrap();
        std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let printer = Printer::new(crate::util::printer::Verbosity::Quiet);
        let (found, candidate) = probe(&tool, &["merge", "--version"], 22, &printer);
        assert!(found.is_none());
        assert!(
            candidate.outcome.contains("LLVM 14.0.6"),
            "{}",
            candidate.outcome
        );
        let search = Search {
            tool: None,
            considered: vec![candidate],
            from_env: Some(LLVM_PROFDATA.env_var),
            spec: LLVM_PROFDATA,
        };
        let err = format!("{:#}", search.require(&rustc).unwrap_err());
        assert!(err.contains("apt-get install llvm-22"), "{err}");
        assert!(err.contains("rustup component add llvm-tools"), "{err}");
    }
}
