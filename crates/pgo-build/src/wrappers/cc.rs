//! C compiler wrapper mode: pgo-build as the `cc` crate's compiler in cross-language builds
//! (see cross_language.rs).
//!
//! A stage's wrapper is a directory `<pgo-build>/cc-wrapper/<hash>/` holding `spec.json` (the
//! real clang and clang++, the flags the stage adds, its log, sccache if cargo uses it) and two
//! symlinks to pgo-build named `clang` and `clang++` (the `cc` crate and cmake tell compilers
//! by name and by what they preprocess; both see a clang). `main` checks for this mode first:
//! cargo's other pgo-build variables are inherited by build scripts, the name is not.
//!
//! Each compile runs the real compiler with the stage's flags appended, passes its output
//! through, and logs one record to the stage's `cc.jsonl`: the crate whose build script
//! compiled it (`CARGO_PKG_NAME`), the sources, the object and the functions it defines (so
//! profile functions can be attributed to crates), and LLVM's profile warnings (summarised per
//! crate like rustc's, not passed through raw).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::cargo::build::Diagnostic;

const SPEC_FILE: &str = "spec.json";

/// What a stage's wrapper runs and adds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct WrapperSpec {
    pub clang: PathBuf,
    pub clangxx: PathBuf,
    /// Appended to every compile.
    pub flags: Vec<String>,
    /// Where compiles are logged (the stage's `cc.jsonl`).
    pub log: PathBuf,
    /// A compiler cache run in front of clang (sccache, when cargo uses it for rustc).
    pub launcher: Option<PathBuf>,
    /// `<cargo target dir>/<triple>`: build scripts of target units have their `OUT_DIR` in
    /// it (pgo-build always passes `--target`). C compiled for a host unit (a build
    /// dependency linked into a build script or proc macro, which rustc links without the
    /// profile runtime) gets clang without the flags.
    #[serde(default)]
    pub target_units: PathBuf,
    /// Packages whose C/C++ keeps the user's compiler (`[pgo] cross_language_exclude`): run
    /// as the user's own build runs it, no flags added.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// The user's C and C++ compilers for those (their `CC`/`CXX`, else `cc`/`c++`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<(PathBuf, PathBuf)>,
}

impl WrapperSpec {
    /// A short hash of the spec: the wrapper's directory name and each record's `spec`.
    pub fn id(&self) -> String {
        crate::util::files::sha256_hex(&serde_json::to_vec(self).unwrap_or_default())[..16]
            .to_owned()
    }

    /// Writes the wrapper under `root` (unless it is there already) and returns its
    /// `clang` and `clang++`.
    pub fn install(&self, root: &Path) -> Result<(PathBuf, PathBuf)> {
        let dir = root.join(self.id());
        let cc = dir.join("clang");
        let cxx = dir.join("clang++");
        let exe = crate::wrappers::linker::own_executable()?;
        crate::util::files::create_dir_all(&dir)?;
        crate::util::files::write_atomically(
            &dir.join(SPEC_FILE),
            &serde_json::to_vec_pretty(self)?,
        )?;
        for link in [&cc, &cxx] {
            let current = std::fs::read_link(link).ok();
            if current.as_deref() != Some(exe.as_path()) {
                let _ = std::fs::remove_file(link);
                std::os::unix::fs::symlink(&exe, link).with_context(|| {
                    format!("could not create the C compiler wrapper {}", link.display())
                })?;
            }
        }
        Ok((cc, cxx))
    }
}

/// A stage's installed wrapper: its spec, and the variables that make the `cc` crate use it.
pub struct StageCompiler {
    pub spec: WrapperSpec,
    pub env: Vec<(String, String)>,
}

/// One compile, as the wrapper logged it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct CompileRecord {
    /// [`WrapperSpec::id`] of the wrapper that ran it.
    pub spec: String,
    /// The package whose build script compiled it (`CARGO_PKG_NAME`).
    pub package: String,
    pub sources: Vec<String>,
    pub output: Option<String>,
    pub success: bool,
    /// Functions the object defines with external linkage.
    #[serde(default)]
    pub functions: Vec<String>,
    /// LLVM's profile warnings (`hash mismatch`, `no profile data available for function`).
    #[serde(default)]
    pub profile_warnings: Vec<String>,
    /// Flags of the build script left out so clang builds what the user's compiler would
    /// (see [`USERS_STDLIB_ONLY`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped_flags: Vec<String>,
    /// Compiled by the user's compiler: the package is in `[pgo] cross_language_exclude`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub excluded: bool,
    /// The compiler's first `error:` line, when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
}

/// A build script's probes decide by the compiler in front of them: `flag_if_supported(
/// "-stdlib=libc++")` fails under g++ and is skipped in the user's own build, and succeeds under
/// clang, which then compiles the C++ against libc++ headers that nothing links (or that are
/// not installed). So the flag is left out unless the user's own flags ask for it: the C++
/// standard library stays the one the user's toolchain links.
const USERS_STDLIB_ONLY: &str = "-stdlib=libc++";

/// Whether the user's own C++ flags (the variables the `cc` crate reads) choose `flag`.
fn users_flags_choose(flag: &str) -> bool {
    let target = std::env::var("TARGET").unwrap_or_default();
    [
        "CXXFLAGS".to_owned(),
        "TARGET_CXXFLAGS".to_owned(),
        format!("CXXFLAGS_{target}"),
        format!("CXXFLAGS_{}", target.replace('-', "_")),
    ]
    .iter()
    .filter_map(|name| std::env::var(name).ok())
    .any(|value| value.split_whitespace().any(|word| word == flag))
}

/// When the `cc` crate (or cmake) started pgo-build as its C compiler: compiles and returns the
/// exit code.
pub fn run_if_wrapper() -> Option<u8> {
    let argv0 = PathBuf::from(std::env::args_os().next()?);
    let name = argv0.file_name()?.to_str()?;
    if name != "clang" && name != "clang++" {
        return None;
    }
    let spec_path = argv0.parent()?.join(SPEC_FILE);
    if !spec_path.is_file() {
        return None;
    }
    Some(match compile(&spec_path, name == "clang++") {
        Ok(code) => code,
        Err(err) => {
            crate::util::printer::stderr_line(&format!("pgo-build (C compiler wrapper): {err:#}"));
            1
        }
    })
}

/// Files the `cc` crate compiles to learn about the compiler, not the package's C.
const PROBE_SOURCES: [&str; 2] = ["flag_check.c", "detect_compiler_family.c"];

const SOURCE_EXTENSIONS: [&str; 9] = ["c", "cc", "cpp", "cxx", "c++", "C", "m", "mm", "S"];

fn compile(spec_path: &Path, cxx: bool) -> Result<u8> {
    let spec: WrapperSpec = serde_json::from_slice(&crate::util::files::read(spec_path)?)
        .with_context(|| format!("{} is not a wrapper spec", spec_path.display()))?;
    let given: Vec<OsString> = std::env::args_os().skip(1).collect();
    let package = std::env::var("CARGO_PKG_NAME").unwrap_or_default();
    let excluded = spec.exclude.contains(&package);
    let keep_stdlib = excluded || users_flags_choose(USERS_STDLIB_ONLY);
    let (args, dropped): (Vec<OsString>, Vec<OsString>) = given
        .into_iter()
        .partition(|arg| keep_stdlib || arg != USERS_STDLIB_ONLY);
    let users = spec
        .users
        .clone()
        .unwrap_or_else(|| (PathBuf::from("cc"), PathBuf::from("c++")));
    let real = match (excluded, cxx) {
        (true, false) => &users.0,
        (true, true) => &users.1,
        (false, false) => &spec.clang,
        (false, true) => &spec.clangxx,
    };
    let mut command = match &spec.launcher {
        Some(launcher) if !excluded => {
            let mut command = Command::new(launcher);
            command.arg(real);
            command
        }
        _ => Command::new(real),
    };
    let for_target = std::env::var_os("OUT_DIR")
        .is_none_or(|out_dir| Path::new(&out_dir).starts_with(&spec.target_units));
    command.args(&args).stderr(Stdio::piped());
    if for_target && !excluded {
        command.args(&spec.flags);
    }
    let mut child = command
        .spawn()
        .with_context(|| format!("could not start {}", real.display()))?;
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr is piped")
        .read_to_string(&mut stderr)?;
    let status = child.wait()?;
    let code = status
        .code()
        .map(|c| c as u8)
        .unwrap_or(128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0) as u8);
    let (profile_warnings, rest) = split_profile_warnings(&stderr);
    std::io::stderr().write_all(rest.as_bytes())?;
    let text = |arg: &OsString| arg.to_string_lossy().into_owned();
    // The cc crate's probes (is a flag supported, which compiler family) are not the C.
    let probe = args.iter().any(|a| {
        Path::new(a)
            .file_name()
            .is_some_and(|name| PROBE_SOURCES.iter().any(|p| name == *p))
    });
    let compiles = args.iter().any(|a| a == "-c") && !probe && for_target;
    if compiles {
        let output = args
            .iter()
            .position(|a| a == "-o")
            .and_then(|i| args.get(i + 1))
            .map(text);
        let record = CompileRecord {
            spec: spec.id(),
            package: package.clone(),
            sources: args
                .iter()
                .filter(|a| {
                    Path::new(a)
                        .extension()
                        .is_some_and(|e| SOURCE_EXTENSIONS.iter().any(|s| e == *s))
                })
                .map(text)
                .collect(),
            functions: match (&output, code) {
                (Some(object), 0) => defined_functions(Path::new(object)),
                _ => Vec::new(),
            },
            output,
            success: code == 0,
            profile_warnings,
            dropped_flags: dropped.iter().map(text).collect(),
            excluded,
            first_error: (code != 0)
                .then(|| {
                    rest.lines()
                        .find(|l| l.contains("error:"))
                        .map(|l| l.trim().to_owned())
                })
                .flatten(),
        };
        // The compile's outcome is clang's: a log that cannot be written is only reported.
        if let Err(err) = crate::wrappers::linker::append_record(&spec.log, &record) {
            crate::util::printer::stderr_line(&format!(
                "pgo-build (C compiler wrapper): could not record the compile in {}: {err:#}",
                spec.log.display()
            ));
        }
    }
    Ok(code)
}

/// LLVM's profile warnings (each a `warning:` line of `-Wbackend-plugin`) apart from the rest of
/// clang's output, less the "N warnings generated." they leave behind.
fn split_profile_warnings(stderr: &str) -> (Vec<String>, String) {
    let mut warnings = Vec::new();
    let mut rest = String::new();
    for line in stderr.lines() {
        let message = line.split("warning: ").nth(1).unwrap_or("");
        if crate::profiles::diagnostics::classify(message).is_some() {
            warnings.push(message.trim_end_matches(" [-Wbackend-plugin]").to_owned());
        } else {
            rest.push_str(line);
            rest.push('\n');
        }
    }
    if !warnings.is_empty() {
        rest = rest
            .lines()
            .filter(|l| !(l.ends_with(" generated.") && l.contains("warning")))
            .map(|l| format!("{l}\n"))
            .collect();
    }
    (warnings, rest)
}

/// Functions an object defines with external linkage: profile records name them without a
/// file prefix, so these tell which package they came from.
fn defined_functions(object_path: &Path) -> Vec<String> {
    use object::{Object, ObjectSymbol, SymbolKind};
    let Ok(data) = std::fs::read(object_path) else {
        return Vec::new();
    };
    let Ok(file) = object::File::parse(&*data) else {
        return Vec::new();
    };
    file.symbols()
        .filter(|s| s.is_definition() && s.is_global() && s.kind() == SymbolKind::Text)
        .filter_map(|s| s.name().ok().map(str::to_owned))
        .collect()
}

/// The compiles logged in `log` (by the wrapper `spec`, when given): the last record per
/// object.
pub fn read_log(log: &Path, spec: Option<&str>) -> Vec<CompileRecord> {
    let Ok(text) = std::fs::read_to_string(log) else {
        return Vec::new();
    };
    let mut by_output: BTreeMap<String, CompileRecord> = BTreeMap::new();
    for record in text
        .lines()
        .filter_map(|line| serde_json::from_str::<CompileRecord>(line).ok())
        .filter(|r| spec.is_none_or(|spec| r.spec == spec))
    {
        let key = record
            .output
            .clone()
            .unwrap_or_else(|| record.sources.join(" "));
        by_output.insert(key, record);
    }
    by_output.into_values().collect()
}

/// Drops the records of other wrappers from `log` (an earlier profile's optimized build), so
/// the log holds one build's compiles, not every build's; a record of this wrapper stays, for
/// objects cargo reuses.
pub fn forget_other_wrappers(log: &Path, spec: &str) -> Result<()> {
    let Ok(text) = std::fs::read_to_string(log) else {
        return Ok(());
    };
    let kept: String = text
        .lines()
        .filter(|line| {
            serde_json::from_str::<CompileRecord>(line).is_ok_and(|record| record.spec == spec)
        })
        .map(|line| format!("{line}\n"))
        .collect();
    if kept.len() != text.len() {
        crate::util::files::write_atomically(log, kept.as_bytes())?;
    }
    Ok(())
}

/// How C packages are named beside Rust crates: `zstd-sys` compiles C, and its Rust is
/// `zstd_sys`.
pub fn c_crate_name(package: &str) -> String {
    format!("{}{C_SUFFIX}", package.replace('-', "_"))
}

pub const C_SUFFIX: &str = " (C)";

/// LLVM's profile warnings of these compiles as diagnostics of their package's C, for the same
/// per-crate summary as rustc's.
pub fn diagnostics(records: &[CompileRecord]) -> Vec<Diagnostic> {
    records
        .iter()
        .flat_map(|record| {
            record.profile_warnings.iter().map(|message| Diagnostic {
                target: c_crate_name(&record.package),
                level: "warning".to_owned(),
                message: message.clone(),
                rendered: format!("warning: {message}\n"),
            })
        })
        .collect()
}

/// Which package's C each function of a profile is, by its profile name: `file.c;function`
/// for functions with internal linkage (by the source file), the bare name otherwise (by the
/// objects' symbols).
#[derive(Debug, Default)]
pub struct COrigins {
    by_function: BTreeMap<String, String>,
    by_file: BTreeMap<String, String>,
}

impl COrigins {
    pub fn new(records: &[CompileRecord]) -> COrigins {
        let mut origins = COrigins::default();
        for record in records {
            for function in &record.functions {
                origins
                    .by_function
                    .insert(function.clone(), record.package.clone());
            }
            for source in &record.sources {
                origins
                    .by_file
                    .insert(source.clone(), record.package.clone());
                if let Some(name) = Path::new(source).file_name() {
                    origins
                        .by_file
                        .entry(name.to_string_lossy().into_owned())
                        .or_insert_with(|| record.package.clone());
                }
            }
        }
        origins
    }

    pub fn is_empty(&self) -> bool {
        self.by_function.is_empty() && self.by_file.is_empty()
    }

    /// Gives the functions of a profile that are C their package's C crate name.
    pub fn attribute(&self, functions: &mut [crate::profiles::insight::FunctionCounts]) {
        for function in functions {
            if function.krate == crate::profiles::insight::UNKNOWN_CRATE
                && let Some(package) = self.package_of(&function.key)
            {
                function.krate = c_crate_name(package);
            }
        }
    }

    /// The package whose C defines the function a profile key names, if it is C.
    pub fn package_of(&self, key: &str) -> Option<&str> {
        match key.rsplit_once(';') {
            Some((file, function)) => self
                .by_file
                .get(file)
                .or_else(|| {
                    let name = Path::new(file).file_name()?.to_string_lossy().into_owned();
                    self.by_file.get(&name)
                })
                .or_else(|| self.by_function.get(function)),
            None => self.by_function.get(key),
        }
        .map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_warnings_are_taken_out_of_clangs_output() {
        let stderr = "warning: src/zstd.c: function control flow change detected (hash mismatch) \
                      ZSTD_compress Hash = 1 up to 2 count discarded [-Wbackend-plugin]\n\
                      warning: src/zstd.c: no profile data available for function cold Hash = 3 \
                      up to 0 count discarded [-Wbackend-plugin]\n\
                      src/x.c:1:1: warning: unused variable 'a'\n\
                      3 warnings generated.\n";
        let (warnings, rest) = split_profile_warnings(stderr);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(!warnings[0].contains("[-Wbackend-plugin]"));
        assert_eq!(rest, "src/x.c:1:1: warning: unused variable 'a'\n");
    }

    #[test]
    fn c_functions_are_attributed_to_the_package_that_compiled_them() {
        let record = |package: &str, source: &str, functions: &[&str]| CompileRecord {
            spec: "s".to_owned(),
            package: package.to_owned(),
            sources: vec![source.to_owned()],
            output: Some(format!("/out/{package}.o")),
            success: true,
            functions: functions.iter().map(|f| f.to_string()).collect(),
            profile_warnings: Vec::new(),
            dropped_flags: Vec::new(),
            excluded: false,
            first_error: None,
        };
        let origins = COrigins::new(&[
            record(
                "zstd-sys",
                "zstd/lib/compress/zstd_compress.c",
                &["ZSTD_compress"],
            ),
            record(
                "libsqlite3-sys",
                "/reg/sqlite3/sqlite3.c",
                &["sqlite3_step"],
            ),
        ]);
        assert_eq!(origins.package_of("ZSTD_compress"), Some("zstd-sys"));
        assert_eq!(
            origins.package_of("zstd/lib/compress/zstd_compress.c;ZSTD_count"),
            Some("zstd-sys")
        );
        assert_eq!(
            origins.package_of("sqlite3.c;sqlite3VdbeExec"),
            Some("libsqlite3-sys")
        );
        assert_eq!(origins.package_of("_ZN2xl4main17h52e5f56914015ca5E"), None);
        assert_eq!(c_crate_name("zstd-sys"), "zstd_sys (C)");
    }
}
