//! Release targets (`--target`, `[build] targets`): the triple every stage builds for, what
//! building and running it needs here, and running its binaries through cargo's runner.
//!
//! Cargo's own conventions decide everything: the linker is `target.<triple>.linker` (see
//! `linker::real_linker`), the runner `CARGO_TARGET_<TRIPLE>_RUNNER` or
//! `target.<triple>.runner` (or a matching `target.'cfg(…)'.runner`), as `cargo run` would use
//! it. Binaries of this machine's architecture (a static musl build on x86_64) run natively;
//! others run only through a runner (`qemu-aarch64 -L /usr/aarch64-linux-gnu`).
//!
//! Workloads run unchanged for every target: for a target with a runner, `PGO_BUILD_BIN_<NAME>`
//! names a small script in `<stage>/run/` that execs the runner with the staged binary, so the
//! staged binaries in `<stage>/bin/` stay the real ones. A process that an emulated binary
//! starts *directly* (by path, `current_exe()`) runs only when the kernel knows the runner
//! through binfmt_misc: [`binfmt_registered`] tells.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use cargo_metadata::cargo_platform::{Cfg, Platform as CfgPlatform};

use crate::config::cargo_config::CargoConfig;

/// The target one session builds for, as probed at its start.
#[derive(Debug, Clone)]
pub struct Platform {
    pub triple: String,
    /// Given with `--target` or `[build] targets`: its stages live in
    /// `target/pgo-build/<triple>/`.
    pub explicit: bool,
    /// `target_arch` (`x86_64`, `aarch64`).
    pub arch: String,
    /// `target_os`.
    pub os: String,
    /// `target_feature="crt-static"`: a statically linked C runtime (musl's default).
    pub static_crt: bool,
    /// rustc's library directory for the target, and whether its standard library is there.
    pub libdir: PathBuf,
    pub std_installed: bool,
    /// The linker rustc uses for the target (`target.<triple>.linker`, else `cc`).
    pub linker: OsString,
    pub runner: Option<Runner>,
}

/// cargo's runner for a target: the program and arguments put before the binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runner {
    pub argv: Vec<String>,
    /// Where it was configured (`target.aarch64-unknown-linux-gnu.runner in .cargo/config.toml`).
    pub source: String,
}

/// How this machine runs the target's binaries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Execution {
    /// Directly: the same architecture (and Linux).
    Native,
    /// Through cargo's runner; `emulated` when the architecture is not this machine's.
    Runner { runner: Runner, emulated: bool },
    /// Not at all here: why, and how to fix it.
    Impossible(String),
}

/// What [`Platform::probe`] reads; separated from the process so tests can supply it.
pub struct Probe<'a> {
    pub triple: &'a str,
    pub explicit: bool,
    pub cfg: &'a [Cfg],
    pub libdir: PathBuf,
    pub config: &'a CargoConfig,
    pub env: &'a dyn Fn(&str) -> Option<String>,
    pub linker: OsString,
}

impl Platform {
    pub fn probe(probe: &Probe) -> Result<Platform> {
        let value = |name: &str| {
            probe.cfg.iter().find_map(|cfg| match cfg {
                Cfg::KeyPair(key, value) if key == name => Some(value.clone()),
                _ => None,
            })
        };
        let static_crt = probe.cfg.iter().any(|cfg| {
            matches!(cfg, Cfg::KeyPair(key, value) if key == "target_feature" && value == "crt-static")
        });
        Ok(Platform {
            triple: probe.triple.to_owned(),
            explicit: probe.explicit,
            arch: value("target_arch").unwrap_or_default(),
            os: value("target_os").unwrap_or_default(),
            static_crt,
            std_installed: std_installed(&probe.libdir),
            libdir: probe.libdir.clone(),
            linker: probe.linker.clone(),
            runner: runner(probe)?,
        })
    }

    /// Whether this machine's processor runs the target's code (x86 on x86_64 too).
    pub fn native_arch(&self) -> bool {
        let here = std::env::consts::ARCH;
        self.arch == here || (here == "x86_64" && self.arch == "x86")
    }

    pub fn execution(&self) -> Execution {
        let emulated = !self.native_arch();
        match &self.runner {
            Some(runner) => Execution::Runner {
                runner: runner.clone(),
                emulated,
            },
            None if !emulated && self.os == "linux" => Execution::Native,
            None => Execution::Impossible(format!(
                "{arch} binaries ({triple}) cannot run on this {here} machine and cargo has no \
                 runner for {triple}: install an emulator (`apt-get install qemu-user`) and set \
                 `target.{triple}.runner = [\"qemu-{arch}\", \"-L\", \"/usr/{gnu}\"]` in \
                 .cargo/config.toml (or {var}); training and compare run \
                 the binaries",
                arch = self.arch,
                triple = self.triple,
                here = std::env::consts::ARCH,
                gnu = gnu_prefix(&self.arch),
                var = cargo_target_var(&self.triple, "RUNNER"),
            )),
        }
    }

    /// An error unless the target's binaries can be built here: its standard library.
    pub fn require_std(&self) -> Result<()> {
        if !self.std_installed {
            bail!(
                "the standard library for {triple} is not installed (nothing in {}): run \
                 `rustup target add {triple}`",
                self.libdir.display(),
                triple = self.triple
            );
        }
        Ok(())
    }

    /// Why llvm-bolt cannot optimize this target's binaries here, if it cannot. `runtime` is
    /// the architecture of llvm-bolt's instrumentation runtime (`libbolt_rt_instr.a`), if known.
    pub fn bolt_unsupported(&self, runtime: Option<&str>) -> Option<String> {
        if !["x86_64", "aarch64", "riscv64"].contains(&self.arch.as_str()) {
            return Some(format!(
                "llvm-bolt rewrites x86_64, aarch64 and riscv64 binaries only, not {}",
                self.arch
            ));
        }
        if self.static_crt {
            // Checked with a static-pie musl binary: the instrumented binary ran and wrote
            // nothing, as its libc never calls the DT_FINI hook BOLT's runtime dumps from.
            return Some(format!(
                "{} links its C runtime statically, and BOLT's instrumented binaries write their \
                 profile from a DT_FINI hook that a static binary never runs (no profile would \
                 be written)",
                self.triple
            ));
        }
        match runtime {
            Some(runtime) if runtime != self.arch => Some(format!(
                "llvm-bolt's instrumentation runtime here is built for {runtime}, so it cannot \
                 instrument {} binaries: run `pgo-build bolt` for {} on a {} machine",
                self.arch, self.triple, self.arch
            )),
            _ => None,
        }
    }
}

#[cfg(test)]
impl Platform {
    /// A platform as [`Platform::probe`] would find it, for other modules' tests.
    pub fn for_tests(triple: &str, arch: &str, linker: &str) -> Platform {
        Platform {
            triple: triple.to_owned(),
            explicit: true,
            arch: arch.to_owned(),
            os: "linux".to_owned(),
            static_crt: false,
            libdir: PathBuf::new(),
            std_installed: true,
            linker: linker.into(),
            runner: None,
        }
    }
}

impl Execution {
    /// The runner's program and arguments, when there is one.
    pub fn runner(&self) -> Option<&Runner> {
        match self {
            Execution::Runner { runner, .. } => Some(runner),
            _ => None,
        }
    }

    /// Emulated: times and counts measure the emulator, not the target's processor.
    pub fn emulated(&self) -> bool {
        matches!(self, Execution::Runner { emulated: true, .. })
    }
}

impl Runner {
    /// The emulator's sysroot (`-L DIR`), which processes started directly (through
    /// binfmt_misc, without these arguments) find through `QEMU_LD_PREFIX`.
    pub fn ld_prefix(&self) -> Option<&str> {
        let at = self.argv.iter().position(|arg| arg == "-L")?;
        self.argv.get(at + 1).map(String::as_str)
    }

    pub fn display(&self) -> String {
        self.argv.join(" ")
    }
}

/// Cargo's per-target variable for `key`: `CARGO_TARGET_<TRIPLE>_<KEY>`
/// (`CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER`).
pub fn cargo_target_var(triple: &str, key: &str) -> String {
    format!(
        "CARGO_TARGET_{}_{key}",
        triple.to_uppercase().replace(['-', '.'], "_")
    )
}

/// Debian's directory name for an architecture's cross sysroot (`/usr/aarch64-linux-gnu`).
fn gnu_prefix(arch: &str) -> String {
    format!("{arch}-linux-gnu")
}

/// Whether `libdir` holds a standard library (`libstd-*.rlib`).
fn std_installed(libdir: &Path) -> bool {
    std::fs::read_dir(libdir).is_ok_and(|entries| {
        entries.flatten().any(|entry| {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            name.starts_with("libstd-") && name.ends_with(".rlib")
        })
    })
}

/// cargo's runner for the triple: `CARGO_TARGET_<TRIPLE>_RUNNER`, else `target.<triple>.runner`,
/// else a `target.'cfg(…)'.runner` matching the target (cargo refuses two matching ones).
fn runner(probe: &Probe) -> Result<Option<Runner>> {
    let var = cargo_target_var(probe.triple, "RUNNER");
    if let Some(line) = (probe.env)(&var) {
        let argv: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
        if argv.is_empty() {
            bail!("{var} is set but empty");
        }
        return Ok(Some(Runner { argv, source: var }));
    }
    let mut found = None;
    // Files come deepest first, so the first value found wins, as in cargo.
    for (file, table) in probe.config.files() {
        let Some(targets) = table.get("target").and_then(|t| t.as_table()) else {
            continue;
        };
        for (key, entry) in targets {
            let Some(value) = entry.get("runner") else {
                continue;
            };
            let matches = if key.starts_with("cfg(") {
                let platform: CfgPlatform = key.parse().with_context(|| {
                    format!("could not parse the cargo config key target.{key}")
                })?;
                platform.matches(probe.triple, probe.cfg)
            } else {
                key == probe.triple
            };
            if !matches || found.is_some() {
                continue;
            }
            let source = format!("target.{key}.runner in {}", file.display());
            let argv = runner_words(value, file).with_context(|| source.clone())?;
            found = Some(Runner { argv, source });
        }
    }
    Ok(found)
}

/// A runner value: a string of words or a list; a program given as a relative path (not a
/// bare name) is relative to the directory holding `.cargo/`, as cargo has it.
fn runner_words(value: &toml::Value, file: &Path) -> Result<Vec<String>> {
    let mut words: Vec<String> = match value {
        toml::Value::String(line) => line.split_whitespace().map(str::to_owned).collect(),
        toml::Value::Array(items) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map(str::to_owned)
                    .context("must be a list of strings")
            })
            .collect::<Result<_>>()?,
        _ => bail!("must be a string or a list of strings"),
    };
    let Some(program) = words.first_mut() else {
        bail!("is empty");
    };
    let path = Path::new(program.as_str());
    if path.components().count() > 1 && path.is_relative() {
        let base = file
            .parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("."));
        *program = base.join(path).display().to_string();
    }
    Ok(words)
}

/// Whether the kernel runs `arch` binaries through an emulator itself: an enabled binfmt_misc
/// entry whose magic is an ELF header of that machine (Debian's qemu-user-binfmt registers
/// `qemu-aarch64` with `/usr/libexec/qemu-binfmt/aarch64-binfmt-P`, so names do not tell).
/// Then a process an emulated binary starts directly runs too.
pub fn binfmt_registered(arch: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc/sys/fs/binfmt_misc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        std::fs::read_to_string(entry.path()).is_ok_and(|text| binfmt_entry_runs(&text, arch))
    })
}

/// Whether a binfmt_misc entry (`/proc/sys/fs/binfmt_misc/<name>`) is enabled and matches ELF
/// executables of `arch` at offset 0.
fn binfmt_entry_runs(entry: &str, arch: &str) -> bool {
    let field = |key: &str| entry.lines().find_map(|line| line.strip_prefix(key));
    let magic: Option<Vec<u8>> = field("magic ").and_then(|hex| {
        (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok())
            .collect()
    });
    entry.starts_with("enabled")
        && field("offset ").is_none_or(|offset| offset.trim() == "0")
        && magic.is_some_and(|magic| elf_arch(&magic).as_deref() == Some(arch))
}

/// Writes `dir/<name>` for each binary: a script that execs the runner with the staged binary
/// and the script's arguments. Returns `dir`.
pub fn write_runner_scripts(
    dir: &Path,
    bin_dir: &Path,
    names: &[&str],
    runner: &Runner,
) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))?;
    for name in names {
        let binary = std::path::absolute(bin_dir.join(name))?;
        let mut line: Vec<String> = runner.argv.iter().map(|w| shell_quote(w)).collect();
        line.push(shell_quote(&binary.display().to_string()));
        let script = format!(
            "#!/bin/sh\n# pgo-build: runs {} through cargo's runner ({})\nexec {} \"$@\"\n",
            binary.display(),
            runner.source,
            line.join(" ")
        );
        let path = dir.join(name);
        let partial = dir.join(format!(".{name}.partial"));
        crate::util::files::write(&partial, script)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o755))?;
        crate::util::files::rename(&partial, &path)?;
    }
    Ok(dir.to_owned())
}

fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The architecture llvm-bolt's instrumentation runtime (`<llvm>/lib/libbolt_rt_instr.a`,
/// beside the real `bin/llvm-bolt` that `bolt` may be a link to) was built for, if found.
pub fn bolt_runtime_arch(bolt: &Path) -> Option<String> {
    let real = std::fs::canonicalize(bolt).ok()?;
    let runtime = real.parent()?.parent()?.join("lib/libbolt_rt_instr.a");
    archive_arch(&runtime)
}

/// The architecture (`x86_64`, `aarch64`) of the first object in an archive such as BOLT's
/// `libbolt_rt_instr.a`.
pub fn archive_arch(path: &Path) -> Option<String> {
    let data = std::fs::read(path).ok()?;
    let archive = object::read::archive::ArchiveFile::parse(&*data).ok()?;
    let member = archive.members().flatten().next()?;
    elf_arch(member.data(&*data).ok()?)
}

/// The architecture an ELF header names (`e_machine`), as rustc's `target_arch` spells it.
/// Read from the bytes: an archive member is not aligned for a full parse.
fn elf_arch(data: &[u8]) -> Option<String> {
    if data.get(..4)? != b"\x7fELF" || data.get(5)? != &1 {
        return None; // not ELF, or not little-endian
    }
    let machine = u16::from_le_bytes([*data.get(18)?, *data.get(19)?]);
    let arch = match machine {
        object::elf::EM_X86_64 => "x86_64",
        object::elf::EM_386 => "x86",
        object::elf::EM_AARCH64 => "aarch64",
        object::elf::EM_RISCV => "riscv64",
        object::elf::EM_ARM => "arm",
        _ => "unknown",
    };
    Some(arch.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(lines: &str) -> Vec<Cfg> {
        lines.lines().filter_map(|line| line.parse().ok()).collect()
    }

    fn platform(
        triple: &str,
        cfg_lines: &str,
        config: &CargoConfig,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Platform {
        Platform::probe(&Probe {
            triple,
            explicit: true,
            cfg: &cfg(cfg_lines),
            libdir: PathBuf::from("/nonexistent"),
            config,
            env,
            linker: "cc".into(),
        })
        .unwrap()
    }

    const AARCH64: &str = "target_arch=\"aarch64\"\ntarget_os=\"linux\"\ntarget_env=\"gnu\"\nunix";
    const MUSL: &str = "target_arch=\"x86_64\"\ntarget_os=\"linux\"\ntarget_env=\"musl\"\ntarget_feature=\"crt-static\"\nunix";

    #[test]
    fn the_runner_comes_from_the_environment_then_the_triple_then_a_cfg_key() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".cargo/config.toml");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(
            &file,
            "[target.'cfg(target_arch = \"aarch64\")']\nrunner = \"qemu-aarch64 -L /usr/aarch64-linux-gnu\"\n",
        )
        .unwrap();
        let config = CargoConfig::from_files(vec![file.clone()]).unwrap();
        let none = |_: &str| None;
        let from_cfg = platform("aarch64-unknown-linux-gnu", AARCH64, &config, &none);
        let runner = from_cfg.runner.clone().unwrap();
        assert_eq!(
            runner.argv,
            ["qemu-aarch64", "-L", "/usr/aarch64-linux-gnu"]
        );
        assert_eq!(runner.ld_prefix(), Some("/usr/aarch64-linux-gnu"));
        assert!(from_cfg.execution().emulated());

        let env = |key: &str| {
            (key == "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER")
                .then(|| "qemu-aarch64-static".to_owned())
        };
        let from_env = platform("aarch64-unknown-linux-gnu", AARCH64, &config, &env);
        assert_eq!(from_env.runner.unwrap().argv, ["qemu-aarch64-static"]);

        std::fs::write(
            &file,
            "[target.aarch64-unknown-linux-gnu]\nrunner = [\"tools/run\", \"-x\"]\n",
        )
        .unwrap();
        let config = CargoConfig::from_files(vec![file]).unwrap();
        let relative = platform("aarch64-unknown-linux-gnu", AARCH64, &config, &none);
        assert_eq!(
            relative.runner.unwrap().argv,
            [
                dir.path().join("tools/run").display().to_string(),
                "-x".to_owned()
            ]
        );
    }

    #[test]
    fn foreign_binaries_without_a_runner_cannot_run_and_the_fix_is_named() {
        let config = CargoConfig::from_files(Vec::new()).unwrap();
        let none = |_: &str| None;
        let aarch64 = platform("aarch64-unknown-linux-gnu", AARCH64, &config, &none);
        let Execution::Impossible(why) = aarch64.execution() else {
            panic!("aarch64 without a runner ran");
        };
        assert!(why.contains("apt-get install qemu-user"), "{why}");
        assert!(
            why.contains("target.aarch64-unknown-linux-gnu.runner"),
            "{why}"
        );
        let musl = platform("x86_64-unknown-linux-musl", MUSL, &config, &none);
        assert_eq!(musl.execution(), Execution::Native);
        assert!(musl.static_crt);
        assert!(
            musl.bolt_unsupported(Some("x86_64"))
                .unwrap()
                .contains("statically")
        );
        assert!(
            aarch64
                .bolt_unsupported(Some("x86_64"))
                .unwrap()
                .contains("built for x86_64")
        );
        assert!(aarch64.bolt_unsupported(Some("aarch64")).is_none());
        let err = musl.require_std().unwrap_err().to_string();
        assert!(
            err.contains("rustup target add x86_64-unknown-linux-musl"),
            "{err}"
        );
    }

    #[test]
    fn the_bolt_runtime_of_debians_llvm_bolt_is_read_as_this_machines_architecture() {
        // scripts/install-deps installs bolt-<major> (the BOLT tests need it too).
        let major = std::process::Command::new("rustc")
            .arg("-vV")
            .output()
            .unwrap();
        let text = String::from_utf8(major.stdout).unwrap();
        let major = text
            .lines()
            .find_map(|line| line.strip_prefix("LLVM version: "))
            .and_then(|version| version.split('.').next())
            .unwrap()
            .to_owned();
        let bolt = PathBuf::from(format!("/usr/bin/llvm-bolt-{major}"));
        assert_eq!(
            bolt_runtime_arch(&bolt).as_deref(),
            Some(std::env::consts::ARCH)
        );
    }

    #[test]
    fn binfmt_entries_are_recognised_by_their_elf_machine() {
        // As /proc/sys/fs/binfmt_misc/qemu-aarch64 shows Debian's registration.
        let debian = "enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\nflags: POF\noffset 0\nmagic 7f454c460201010000000000000000000200b700\nmask ffffffffffffff00fffffffffffffffffeffffff\n";
        assert!(binfmt_entry_runs(debian, "aarch64"));
        assert!(!binfmt_entry_runs(debian, "riscv64"));
        assert!(!binfmt_entry_runs(
            &debian.replace("enabled", "disabled"),
            "aarch64"
        ));
        let jar = "enabled\ninterpreter /usr/bin/jexec\nflags: \noffset 0\nmagic 504b0304\n";
        assert!(!binfmt_entry_runs(jar, "aarch64"));
    }

    #[test]
    fn runner_scripts_pass_arguments_through() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let runner = Runner {
            argv: vec!["/bin/echo".into(), "it's".into()],
            source: "test".into(),
        };
        let run = write_runner_scripts(&dir.path().join("run"), &bin, &["app"], &runner).unwrap();
        let output = std::process::Command::new(run.join("app"))
            .args(["a b", "c"])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8(output.stdout).unwrap(),
            format!("it's {} a b c\n", bin.join("app").display())
        );
    }
}
