//! `pgo-build doctor`: what pgo-build found (rustc, LLVM tools, workspace, binaries, config)
//! and whether it can run; the first step of `run`.

use std::ffi::OsString;

use anyhow::{Context as _, Result, bail};

use crate::config::Role;
use crate::layout::{Layout, Stage};
use crate::pipeline::context::{Context, Session, c_settings};
use crate::pipeline::workload_runs::{check_cargo_targets, runnable_bins};
use crate::toolchain;
use crate::toolchain::targets::{self, Execution, Platform};
use crate::util::command::Cmd;
use crate::util::printer::Printer;

mod workloads;
use workloads::{
    binaries_no_workload_names, placeholder_left, unnamed_binaries_warning,
    unrunnable_cargo_targets,
};

use crate::toolchain::cross_language::COVERED_BUILDERS;

/// What pgo-build found, and every problem that would stop a run, each with its fix (not only
/// the first): an error naming them all when there are any.
pub fn doctor(cx: &Context, session: &mut Session) -> Result<()> {
    let printer = &cx.printer;
    let mut problems: Vec<anyhow::Error> = Vec::new();
    problems.extend(check_cargo_targets(cx, &cx.config.workloads).err());
    printer.info(format!(
        "rustc: {} (host {}, LLVM {})",
        cx.rustc.version_line, cx.rustc.host, cx.rustc.llvm_version
    ));
    printer.info(format!("workspace: {}", cx.workspace.root.display()));
    printer.info(format!(
        "binaries: {}",
        cx.bins
            .iter()
            .map(|b| b.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    // Only what was found: "no user rustflags" needs no empty list beside it.
    if cx.user_flags.flags.is_empty() {
        printer.info("user rustflags: none");
    } else {
        printer.info(format!(
            "user rustflags ({}): {}",
            cx.user_flags.source,
            cx.user_flags.flags.join(" ")
        ));
    }
    printer.info(format!(
        "config: {} ({} train, {} holdout workloads)",
        cx.config.path.as_ref().map_or(
            "none (`pgo-build init` writes one to start from)".to_owned(),
            |p| p.display().to_string()
        ),
        cx.config.workloads_with_role(Role::Train).count(),
        cx.config.workloads_with_role(Role::Holdout).count()
    ));
    let search = toolchain::find_llvm_tool(toolchain::LLVM_PROFDATA, &cx.rustc, printer);
    for candidate in &search.considered {
        printer.detail(format!(
            "llvm-profdata candidate {}: {}",
            candidate.path.display(),
            candidate.outcome
        ));
    }
    for spec in [toolchain::LLVM_BOLT, toolchain::MERGE_FDATA] {
        let found = toolchain::find_llvm_tool(spec, &cx.rustc, printer);
        match (&found.tool, cx.config.bolt.enabled) {
            (Some(tool), _) => printer.info(format!(
                "{}: {} (LLVM {})",
                spec.name,
                tool.path.display(),
                tool.version
            )),
            (None, true) => problems.extend(
                found
                    .require(&cx.rustc)
                    .context("[bolt] enabled = true needs it")
                    .err(),
            ),
            (None, false) => printer.info(format!(
                "{}: not found (only needed for BOLT: `apt-get install {}-{}`)",
                spec.name, spec.apt_package, cx.rustc.llvm_major
            )),
        }
    }
    if let Some(problem) = no_training(cx) {
        printer.warn(problem);
    }
    if let Some(note) = no_holdout(cx) {
        printer.warn(note);
    }
    let placeholders = placeholder_left(cx).err();
    // Beside a placeholder, which names no binary until it is replaced, it would be noise.
    if placeholders.is_none() {
        let unnamed = binaries_no_workload_names(cx);
        if !unnamed.is_empty() {
            printer.warn(unnamed_binaries_warning(cx, &unnamed));
        }
    }
    problems.extend(placeholders);
    problems.extend(unrunnable_cargo_targets(cx).err());
    problems.extend(crate::pipeline::stage_build::check_bolt_compatible_profile(cx).err());
    problems.extend(crate::pipeline::stage_build::check_lld_before_building(cx).err());
    problems.extend(doctor_c(cx).err());
    if cx.platform.explicit {
        problems.extend(doctor_target(cx).err());
    }
    match search.require(&cx.rustc) {
        Ok(tool) => {
            printer.info(format!(
                "llvm-profdata: {} (LLVM {})",
                tool.path.display(),
                tool.version
            ));
            session.report.rustc = Some(cx.rustc.version_line.clone());
            session.report.llvm_profdata =
                Some(format!("{} (LLVM {})", tool.path.display(), tool.version));
            cx.found_profdata(tool);
        }
        Err(problem) => problems.push(problem),
    }
    all_problems(problems)
}

/// No problem, one (as it is), or several in one error, each on its own line.
fn all_problems(problems: Vec<anyhow::Error>) -> Result<()> {
    crate::util::problems::all_of(problems, |count| format!("doctor found {count} problems"))
}

/// A configuration without a holdout workload runs, but measures nothing: said, since the
/// proof pgo-build exists for is then missing.
fn no_holdout(cx: &Context) -> Option<String> {
    if cx
        .config
        .workloads_with_role(Role::Holdout)
        .next()
        .is_some()
    {
        return None;
    }
    Some(format!(
        "{} has no holdout workload: `run` builds and trains, but `compare` and `gate` then \
         measure nothing, so nothing shows the optimized build is faster. Add a [[workload]] \
         with role = \"holdout\" that runs work training never saw",
        cx.config.display_path()
    ))
}

/// `pgo-build doctor` outside a cargo workspace (or in one it cannot load): rustc and the LLVM
/// tools pgo-build would use, each found or not with how to get it. An error when
/// llvm-profdata, which every run needs, is missing.
pub fn doctor_toolchain(printer: &Printer) -> Result<()> {
    let here = std::env::current_dir().context("could not read the current directory")?;
    let rustc = toolchain::Rustc::detect(&here, printer)?;
    printer.info(format!(
        "rustc: {} (host {}, LLVM {})",
        rustc.version_line, rustc.host, rustc.llvm_version
    ));
    let mut problems = Vec::new();
    match toolchain::find_llvm_tool(toolchain::LLVM_PROFDATA, &rustc, printer).require(&rustc) {
        Ok(tool) => printer.info(format!(
            "llvm-profdata: {} (LLVM {})",
            tool.path.display(),
            tool.version
        )),
        Err(problem) => problems.push(problem),
    }
    for spec in [toolchain::LLVM_BOLT, toolchain::MERGE_FDATA] {
        match toolchain::find_llvm_tool(spec, &rustc, printer).tool {
            Some(tool) => printer.info(format!(
                "{}: {} (LLVM {})",
                spec.name,
                tool.path.display(),
                tool.version
            )),
            None => printer.info(format!(
                "{}: not found (only needed for BOLT: `apt-get install {}-{}`)",
                spec.name, spec.apt_package, rustc.llvm_major
            )),
        }
    }
    let clang = crate::toolchain::cross_language::locate(
        crate::toolchain::cross_language::CBuild::Pgo,
        &rustc.host,
        &rustc.host,
        rustc.llvm_major,
        &|key| std::env::var(key).ok(),
        printer,
    );
    match clang {
        Ok(Some(c)) => printer.info(format!("clang: {} ({})", c.clang.display(), c.version)),
        _ => printer.info(format!(
            "clang: none of LLVM {} (only needed for cross-language PGO: `apt-get install \
             clang-{}`)",
            rustc.llvm_major, rustc.llvm_major
        )),
    }
    all_problems(problems)
}

/// Whether a cargo workspace is where `doctor` runs: `--manifest-path`, or a Cargo.toml here
/// or in a directory above (where cargo would look).
pub fn in_a_workspace(manifest_path: Option<&std::path::Path>) -> bool {
    manifest_path.is_some()
        || std::env::current_dir()
            .is_ok_and(|here| here.ancestors().any(|dir| dir.join("Cargo.toml").is_file()))
}

/// The C and C++ that build scripts compile: which packages, whether cross-language PGO
/// would cover them, and whether the clang it needs is installed.
fn doctor_c(cx: &Context) -> Result<()> {
    let printer = &cx.printer;
    let compilers = match cx.workspace.build_script_compilers(
        &cx.settings.target,
        &[COVERED_BUILDERS[0], COVERED_BUILDERS[1], "autotools"],
        printer,
    ) {
        Ok(compilers) => compilers,
        Err(err) => {
            printer.detail(format!("C/C++ of build scripts: not known ({err:#})"));
            return Ok(());
        }
    };
    let on = cx.config.pgo.cross_language != crate::config::CBuild::User;
    if compilers.is_empty() {
        printer.info("C/C++: no build script compiles any (nothing for cross-language PGO)");
        return Ok(());
    }
    let (covered, other): (Vec<_>, Vec<_>) = compilers
        .iter()
        .partition(|(_, builder)| COVERED_BUILDERS.contains(&builder.as_str()));
    let list = |packages: &[(&String, &String)]| {
        packages
            .iter()
            .map(|(package, builder)| format!("{package} ({builder})"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !covered.is_empty() {
        printer.info(format!(
            "C/C++ compiled by build scripts: {}; cross-language PGO {}",
            list(&covered),
            if on {
                "is on and profiles it"
            } else {
                "would profile it (`[pgo] cross_language = true`, or --cross-language)"
            }
        ));
    }
    if !other.is_empty() {
        printer.info(format!(
            "C/C++ built by other build systems: {}; their compilers are theirs, so \
             cross-language PGO does not cover them",
            list(&other)
        ));
    }
    let located = c_settings(
        crate::toolchain::cross_language::CBuild::Pgo,
        &cx.settings.target,
        &cx.rustc,
        &cx.config.pgo.cross_language_exclude,
        printer,
    );
    match located {
        Ok(Some(c)) => {
            printer.info(format!(
                "clang for cross-language PGO: {} ({})",
                c.clang.display(),
                c.version
            ));
            if let Err(problem) = probe_clang(cx, &c) {
                if on {
                    return Err(problem);
                }
                printer.info(format!(
                    "cross-language PGO could not run here: {problem:#}"
                ));
            }
            if on {
                warn_of_another_baseline_compiler(cx, &c);
            }
        }
        Ok(None) => {}
        // Only a failure when the configuration asks for it (the session would not exist).
        Err(err) => printer.info(format!("cross-language PGO could not run here: {err:#}")),
    }
    Ok(())
}

/// Said before any build: with cross-language PGO the baseline's C keeps the user's compiler,
/// so when that is not the clang the PGO builds use, the comparison measures the switch of
/// compilers as well as PGO.
fn warn_of_another_baseline_compiler(
    cx: &Context,
    c: &crate::toolchain::cross_language::CSettings,
) {
    let (compiler, version) = crate::toolchain::cross_language::users_compiler_identity(
        &cx.settings.target,
        &cx.rustc.host,
        &cx.printer,
    );
    if version == c.version {
        return;
    }
    cx.printer.warn(format!(
        "the baseline's C/C++ keeps your compiler, {compiler} ({version}), and the PGO \
         builds' is {} ({}): the comparison will measure the compiler switch as well as PGO. \
         To measure PGO alone, set CC={} and CXX={} for every command; `pgo-build explore \
         --variants clang,pgo,pgo+c` separates the two",
        c.clang.display(),
        c.version,
        c.clang.display(),
        c.clangxx.display()
    ));
}

/// A C and a C++ file compiled by the clang cross-language PGO would use, with the
/// instrumented stage's profile flag, before any build: a clang that cannot find the C++
/// standard library's headers (or the target's) fails here, named, not in a build script.
fn probe_clang(cx: &Context, c: &crate::toolchain::cross_language::CSettings) -> Result<()> {
    let dir = cx.layout.root().join("clang-probe");
    crate::util::files::create_dir_all(&dir)?;
    let probes = [
        (
            &c.clang,
            "probe.c",
            "#include <stdio.h>\nint probe(void) { return puts(\"c\"); }\n",
        ),
        (
            &c.clangxx,
            "probe.cpp",
            "#include <string>\n#include <unordered_map>\nint probe() { \
             std::unordered_map<std::string, int> m; m[\"c++\"] = 1; return m.size(); }\n",
        ),
    ];
    for (compiler, file, text) in probes {
        let source = dir.join(file);
        crate::util::files::write(&source, text)?;
        let mut cmd = Cmd::new(compiler)
            .args(["-c", "-O2", "-fprofile-generate"])
            .arg(&source)
            .arg("-o")
            .arg(dir.join(format!("{file}.o")))
            .cwd(&dir);
        if cx.platform.explicit {
            cmd = cmd.arg(format!("--target={}", cx.platform.triple));
        }
        let output = cmd.output(&cx.printer)?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let first = stderr
                .lines()
                .find(|l| l.contains("error"))
                .unwrap_or("no error line")
                .trim()
                .to_owned();
            bail!(
                "{} cannot compile a {} file for cross-language PGO: {first}. Fix: install \
                 what it lacks (for the C++ standard library, the libstdc++ development \
                 package of the GCC clang finds), set PGO_BUILD_CLANG to another clang of LLVM \
                 {}, or turn cross-language PGO off",
                compiler.display(),
                if file.ends_with(".c") { "C" } else { "C++" },
                cx.rustc.llvm_major
            );
        }
    }
    crate::util::files::remove_dir_all(&dir)?;
    cx.printer.info(format!(
        "{} and {} compile C and C++ with -fprofile-generate here",
        c.clang.display(),
        c.clangxx.display()
    ));
    Ok(())
}

/// How the target's binaries run here (natively, through a runner, or not at all): said, and
/// what is missing added to `problems`.
fn check_execution(platform: &Platform, printer: &Printer, problems: &mut Vec<String>) {
    let execution = platform.execution();
    match &execution {
        Execution::Native => {
            printer.info(format!("runs here: natively ({})", std::env::consts::ARCH))
        }
        Execution::Runner { runner, emulated } => {
            if program_exists(std::ffi::OsStr::new(&runner.argv[0])) {
                printer.info(format!(
                    "runner: {} ({}){}",
                    runner.display(),
                    runner.source,
                    if *emulated {
                        "; times measured under it are the emulator's"
                    } else {
                        ""
                    }
                ));
            } else {
                problems.push(format!(
                    "the runner `{}` ({}) is not installed: {}",
                    runner.argv[0],
                    runner.source,
                    if runner.argv[0].starts_with("qemu-") {
                        "`apt-get install qemu-user`"
                    } else {
                        "install it or fix the runner"
                    }
                ));
            }
            if *emulated {
                printer.info(if targets::binfmt_registered(&platform.arch) {
                    format!(
                        "processes that {} binaries start directly run through binfmt_misc",
                        platform.arch
                    )
                } else {
                    format!(
                        "processes that {} binaries start directly (by path, current_exe()) \
                         cannot run here (no binfmt_misc entry for qemu-{}); children \
                         started through $PGO_BUILD_BIN_<NAME> run through the runner",
                        platform.arch, platform.arch
                    )
                });
            }
        }
        Execution::Impossible(why) => problems.push(why.clone()),
    }
}

/// A release target: its standard library, linker and runner, each missing one named with
/// its fix; then a small program built and run for it, natively or through the runner.
fn doctor_target(cx: &Context) -> Result<()> {
    let platform = &cx.platform;
    let triple = &platform.triple;
    let printer = &cx.printer;
    printer.info(format!(
        "target: {triple} ({} {}, {} C runtime)",
        platform.arch,
        platform.os,
        if platform.static_crt {
            "static"
        } else {
            "dynamic"
        }
    ));
    let mut problems = Vec::new();
    match platform.require_std() {
        Ok(()) => printer.info(format!("standard library: {}", platform.libdir.display())),
        Err(err) => problems.push(format!("{err}")),
    }
    let linker = platform.linker.to_string_lossy().into_owned();
    let linker_found = program_exists(&platform.linker);
    if !linker_found {
        problems.push(format!(
            "the linker `{linker}` for {triple} is not installed{}",
            cross_gcc_fix(platform)
        ));
    } else if !platform.native_arch() && linker == "cc" {
        problems.push(format!(
            "{triple} has no linker configured, and this machine's `cc` cannot link {} \
             binaries: set `target.{triple}.linker = \"{}-linux-gnu-gcc\"` in \
             .cargo/config.toml{}",
            platform.arch,
            platform.arch,
            cross_gcc_fix(platform)
        ));
    } else {
        printer.info(format!("linker: {linker}"));
    }
    if let Some(cc) = dependency_c_compiler(platform, &cx.rustc.host)
        && !program_exists(std::ffi::OsStr::new(&cc))
    {
        printer.warn(format!(
            "crates with C code (built with the cc crate: jemalloc, zstd, ring, …) compile it \
             for {triple} with `{cc}`, which is not installed: install it ({}) or set \
             CC_{} if the workspace has such crates",
            if cc == "musl-gcc" {
                "`apt-get install musl-tools`".to_owned()
            } else {
                format!("`apt-get install gcc-{}-linux-gnu`", platform.arch)
            },
            triple.replace('-', "_")
        ));
    }
    check_execution(platform, printer, &mut problems);
    if problems.is_empty() {
        try_target(cx)?;
        printer.info(format!("a test program for {triple} built and ran here"));
    }
    if cx.config.bolt.enabled {
        let bolt = toolchain::find_llvm_tool(toolchain::LLVM_BOLT, &cx.rustc, printer);
        let runtime = bolt
            .tool
            .as_ref()
            .and_then(|tool| targets::bolt_runtime_arch(&tool.path));
        if let Some(reason) = platform.bolt_unsupported(runtime.as_deref()) {
            printer.warn(format!(
                "BOLT is not possible for {triple} here ({reason}): `bolt` stages its \
                 binaries un-BOLTed"
            ));
        }
    }
    if !problems.is_empty() {
        bail!(
            "it cannot be built and run here:\n{}",
            problems
                .iter()
                .map(|p| format!("  - {p}"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    Ok(())
}

/// Builds a small program for the target and runs it as workloads will (natively or
/// through the runner): what no inspection of files proves.
fn try_target(cx: &Context) -> Result<()> {
    let probe = Layout::at(cx.layout.root().join("doctor-probe"));
    if probe.root().exists() {
        crate::util::files::remove_dir_all(probe.root())?;
    }
    let bin_dir = probe.bin_dir(Stage::Baseline);
    crate::util::files::create_dir_all(&bin_dir)?;
    let source = probe.root().join("probe.rs");
    crate::util::files::write(&source, "fn main() { println!(\"pgo-build probe\"); }\n")?;
    let mut linker = OsString::from("linker=");
    linker.push(&cx.platform.linker);
    Cmd::new(&cx.rustc.program)
        .args(["--target", &cx.platform.triple, "-C"])
        .arg(linker)
        .arg("-o")
        .arg(bin_dir.join("probe"))
        .arg(&source)
        .cwd(probe.root())
        .stdout_checked(&cx.printer)
        .with_context(|| format!("could not build a test program for {}", cx.platform.triple))?;
    let (run_dir, env) = runnable_bins(cx, &probe, Stage::Baseline, &["probe"])?;
    let program = run_dir.join("probe");
    let mut cmd = Cmd::new(&program).cwd(probe.root());
    for (key, value) in env {
        cmd = cmd.env(key, value);
    }
    let output = cmd.stdout_checked(&cx.printer).with_context(|| {
        format!(
            "a test program built for {} did not run here",
            cx.platform.triple
        )
    })?;
    if output.trim() != "pgo-build probe" {
        bail!(
            "a test program built for {} printed {:?} instead of \"pgo-build probe\"",
            cx.platform.triple,
            output.trim()
        );
    }
    crate::util::files::remove_dir_all(probe.root())?;
    Ok(())
}

/// Why training cannot run, when the configuration has no train workload and no
/// committed profile: said by `doctor`, and by `run` before it builds anything.
pub(in crate::pipeline) fn no_training(cx: &Context) -> Option<String> {
    if cx.config.pgo.profile.is_some()
        || cx.config.workloads_with_role(Role::Train).next().is_some()
    {
        return None;
    }
    Some(cx.no_train_workloads())
}

/// Whether `program` (a bare name looked up on PATH, or a path) exists.
fn program_exists(program: &std::ffi::OsStr) -> bool {
    let path = std::path::Path::new(program);
    if path.components().count() > 1 {
        return path.is_file();
    }
    !toolchain::which(&program.to_string_lossy()).is_empty()
}

/// The C compiler the cc crate picks for the target's C code when nothing names one
/// (`CC_<triple>`, `TARGET_CC`): `musl-gcc` for x86_64 musl, `<arch>-linux-gnu-gcc` for another
/// architecture's GNU target; none for the host itself.
fn dependency_c_compiler(
    platform: &crate::toolchain::targets::Platform,
    host: &str,
) -> Option<String> {
    let underscored = format!("CC_{}", platform.triple.replace('-', "_"));
    let named = [
        format!("CC_{}", platform.triple),
        underscored,
        "TARGET_CC".to_owned(),
    ];
    if platform.triple == host || named.iter().any(|var| std::env::var_os(var).is_some()) {
        return None;
    }
    if platform.triple == "x86_64-unknown-linux-musl" {
        Some("musl-gcc".to_owned())
    } else if platform.triple.ends_with("-linux-gnu") && !platform.native_arch() {
        Some(format!("{}-linux-gnu-gcc", platform.arch))
    } else {
        None
    }
}

/// The Debian package of a GNU cross compiler for the target's architecture, as a fix.
fn cross_gcc_fix(platform: &crate::toolchain::targets::Platform) -> String {
    if platform.native_arch() {
        String::new()
    } else {
        format!(
            " (`apt-get install gcc-{}-linux-gnu`)",
            platform.arch.replace('_', "-")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::toolchain::targets::Platform;

    #[test]
    fn the_c_compiler_of_dependencies_is_the_one_the_cc_crate_would_pick() {
        let host = "x86_64-unknown-linux-gnu";
        let musl = Platform::for_tests("x86_64-unknown-linux-musl", "x86_64", "cc");
        let aarch64 = Platform::for_tests("aarch64-unknown-linux-gnu", "aarch64", "cc");
        let native = Platform::for_tests(host, "x86_64", "cc");
        assert_eq!(
            dependency_c_compiler(&musl, host).as_deref(),
            Some("musl-gcc")
        );
        assert_eq!(
            dependency_c_compiler(&aarch64, host).as_deref(),
            Some("aarch64-linux-gnu-gcc")
        );
        assert_eq!(dependency_c_compiler(&native, host), None);
    }
}
