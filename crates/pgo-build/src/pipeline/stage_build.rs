//! One stage's cargo build, shared by `build`, `instrument`, `optimize` (and `explore`'s builds
//! through them): the rustc wrapper and its memory budget, the link slots that bound the links,
//! staging the binaries into `<stage>/bin/` with their `stage.json`, and the checks every
//! staged build passes (size growth, BOLT-compatible profile). Its cargo environment
//! (`StageEnvironment`: pgo-build as linker, rustc wrapper and C compiler) is made here for
//! the stage's build and for cargo workloads, which build the stage's units again.
//!
//! Invariant kept here: instrumented and optimized builds differ only in the profile flags.
//! Both get `settings.common_rustflags`; what a stage adds is its `stage_rustflags`, and
//! `plain_flags` (BOLT's relocations) touches links only.

use anyhow::{Context as _, Result, bail};

use super::context::{Context, Session};
use super::rustc_budget;
use crate::cargo::build::{self, BuildOutput, BuildRequest, LinkerSetup};
use crate::cargo::manifest::StageInput;
use crate::cargo::manifest::StageManifest;
use crate::cargo::manifest::loaded_size;
use crate::cargo::manifest::stage_binary;
use crate::cargo::settings::BuildSettings;
use crate::cargo::settings::CONTINUOUS_FLAGS;
use crate::cargo::workspace::BinTarget;
use crate::cargo::{dep_info, rustflags, sccache};
use crate::config::{LinkJobs, StartupOrder, cargo_config};
use crate::layout::{Layout, Stage, relative_to};
use crate::profiles::{self, startup_order};
use crate::report::{BinaryRecord, CCompilerRecord, LinkSummary};
use crate::toolchain::cross_language;
use crate::util::units::human_bytes;
use crate::wrappers::{cc, linker};

/// Assumed peak memory of one link before any link was measured.
const DEFAULT_LINK_ESTIMATE: u64 = 2 << 30;

/// Added to the builds BOLT post-processes (see [`plain_flags`]).
pub const BOLT_INPUT_FLAGS: [&str; 3] = [
    "-Clink-arg=-Wl,--emit-relocs",
    "--cfg",
    "pgo_build_bolt_input",
];

/// One stage's cargo build of `bins`, with the links bounded (see linker.rs) and their
/// figures recorded in the report.
pub(super) fn cargo_build(
    cx: &Context,
    session: &mut Session,
    stage: Stage,
    bins: &[BinTarget],
    stage_rustflags: &[String],
    carry: Option<&std::path::Path>,
    show_diagnostic: &dyn Fn(&build::Diagnostic) -> bool,
) -> Result<BuildOutput> {
    cx.platform.require_std()?;
    let StageEnvironment {
        linker: setup,
        link_slots: (slots, slots_reason),
        mut rustc,
        c_compiler,
    } = StageEnvironment::new(cx, &cx.layout, stage, &cx.settings, stage_rustflags)?;
    if let Some(setup) = carry {
        rustc.env.push((
            crate::wrappers::rustc::crate_carry::ENV.to_owned(),
            setup.display().to_string(),
        ));
    }
    // Commit point of build, instrument and optimize: everything they check holds.
    session.begin_outputs(cx)?;
    let log = cx.layout.links_log(stage);
    if log.exists() {
        crate::util::files::remove_file(&log)?;
    }
    let rustc_log = cx.layout.rustc_log(stage);
    if rustc_log.exists() {
        crate::util::files::remove_file(&rustc_log)?;
    }
    let request = BuildRequest {
        stage,
        bins,
        settings: &cx.settings,
        stage_rustflags,
        jobs: Some(rustc.summary.cargo_jobs),
        workspace_root: &cx.workspace.root,
        layout: &cx.layout,
        linker: &setup,
        rustc_wrapper: &rustc.env,
        c_compiler: c_compiler.as_ref().map_or(&[], |c| c.env.as_slice()),
        batch_size: cx.config.build.batch_size,
    };
    // Warnings this command has shown already (an earlier stage's build) are counted, not
    // printed again.
    let repeated = std::cell::Cell::new(0usize);
    let filter = |diagnostic: &build::Diagnostic| {
        if !show_diagnostic(diagnostic) {
            return false;
        }
        if cx.printer.first_showing(&diagnostic.rendered) {
            return true;
        }
        repeated.set(repeated.get() + 1);
        false
    };
    // Figures of an earlier build (perhaps with another wrapper) do not describe this one.
    session.report.sccache.remove(&stage);
    session.report.rustc_memory.remove(&stage);
    let cache = sccache::wrapper(&cx.cargo_config)
        .and_then(|program| Some((sccache::counters(&program, &cx.printer)?, program)));
    let built = build::build(&request, &cx.printer, &filter);
    if let Some((before, program)) = cache
        && let Some(after) = sccache::counters(&program, &cx.printer)
    {
        let figures = before.since(after);
        cx.printer.detail(format!(
            "sccache ({} stage): {} hits, {} misses, {} not cacheable",
            stage.name(),
            figures.hits,
            figures.misses,
            figures.not_cacheable
        ));
        session.report.sccache.insert(stage, figures);
    }
    let mut output = match (built, &c_compiler) {
        (Err(err), Some(c)) => return Err(c_compile_failures(&c.spec, err)),
        (built, _) => built?,
    };
    session.report.c_compilers.remove(&stage);
    if let Some(c) = &c_compiler {
        let diagnostics = record_c_compiles(cx, session, stage, &c.spec, &output.dynamic_libs);
        output.diagnostics.extend(diagnostics);
    } else if cx.settings.c.is_some() {
        // Cross-language PGO is on and this stage keeps the user's compiler (the baseline):
        // recorded too, so the report says what the comparison set against clang.
        let (compiler, version) = cross_language::users_compiler_identity(
            &cx.settings.target,
            &cx.rustc.host,
            &cx.printer,
        );
        session.report.c_compilers.insert(
            stage,
            CCompilerRecord {
                compiler,
                version,
                ..CCompilerRecord::default()
            },
        );
    }
    if repeated.get() > 0 {
        cx.printer.info(format!(
            "the same {} compiler warning{} as an earlier build (shown above)",
            repeated.get(),
            if repeated.get() == 1 { "" } else { "s" }
        ));
    }
    let records = linker::read_log(&log);
    session.report.links.insert(
        stage,
        LinkSummary::from_records(slots, slots_reason, &records),
    );
    rustc_budget::record(cx, session, stage, rustc.summary, &output)?;
    Ok(output)
}

/// The environment of a cargo build for a stage: pgo-build as its linker (link slots, the
/// stage's linker flag), as its rustc wrapper (the memory budget, stable names) and, where the
/// settings build C with clang, as its C compiler. Stage builds and cargo workloads (which
/// build the stage's units again) both take it from here, so a workload's cargo builds as the
/// stage's did.
pub(super) struct StageEnvironment {
    pub linker: LinkerSetup,
    /// How many links may run at once, and why that many (the report's link summary).
    pub link_slots: (usize, String),
    pub rustc: rustc_budget::RustcWrapper,
    pub c_compiler: Option<cc::StageCompiler>,
}

impl StageEnvironment {
    pub(super) fn new(
        cx: &Context,
        layout: &Layout,
        stage: Stage,
        settings: &BuildSettings,
        stage_rustflags: &[String],
    ) -> Result<StageEnvironment> {
        // Resolved once per build: "auto" is what is available when the build starts.
        let budget = cx.config.build.memory_budget.resolve();
        let (linker, slots, slots_reason) = linker_setup(cx, layout, stage, budget.0)?;
        let rustc = rustc_budget::wrapper_setup(cx, stage, budget)?;
        let c_compiler = c_compiler_setup(cx, layout, stage, settings, stage_rustflags)?;
        Ok(StageEnvironment {
            linker,
            link_slots: (slots, slots_reason),
            rustc,
            c_compiler,
        })
    }
}

/// pgo-build as the C compiler of a stage whose settings build C with clang (see
/// cross_language.rs): the wrapper's spec and the variables that name it. `None`: the C is
/// the user's. Also used by cargo workloads, which build the stage's binaries again.
fn c_compiler_setup(
    cx: &Context,
    layout: &Layout,
    stage: Stage,
    settings: &BuildSettings,
    stage_rustflags: &[String],
) -> Result<Option<cc::StageCompiler>> {
    let Some(c) = &settings.c else {
        return Ok(None);
    };
    let continuous = stage_rustflags.iter().any(|f| f == CONTINUOUS_FLAGS[0]);
    let Some(flags) = cross_language::stage_flags(c.mode, stage_rustflags, continuous) else {
        return Ok(None);
    };
    let spec = cc::WrapperSpec {
        clang: c.clang.clone(),
        clangxx: c.clangxx.clone(),
        flags,
        log: layout.c_compile_log(stage),
        launcher: sccache::wrapper(&cx.cargo_config).map(std::path::PathBuf::from),
        target_units: layout.cargo_target_dir(stage).join(&settings.target),
        exclude: c.exclude.clone(),
        users: (!c.exclude.is_empty()).then(|| {
            let own = |base| {
                cross_language::users_own_compiler(base, &settings.target, &cx.rustc.host).into()
            };
            (own("CC"), own("CXX"))
        }),
    };
    let (cc, cxx) = spec.install(&layout.root().join("cc-wrapper"))?;
    cc::forget_other_wrappers(&spec.log, &spec.id())?;
    let env = cross_language::compiler_env(&settings.target, &cc, &cxx, c.llvm_ar.as_deref());
    Ok(Some(cc::StageCompiler { spec, env }))
}

/// A stage's build that failed where clang compiled a package's C/C++: which package, the
/// compiler's first error and the way out, before cargo's and cc-rs's own output.
fn c_compile_failures(spec: &cc::WrapperSpec, err: anyhow::Error) -> anyhow::Error {
    let mut failed: Vec<(String, String)> = Vec::new();
    for record in cc::read_log(&spec.log, Some(&spec.id())) {
        if !record.success
            && !record.excluded
            && !failed.iter().any(|(package, _)| *package == record.package)
        {
            failed.push((
                record.package.clone(),
                record
                    .first_error
                    .clone()
                    .unwrap_or_else(|| "no error line".to_owned()),
            ));
        }
    }
    if failed.is_empty() {
        return err;
    }
    let packages: Vec<String> = failed.iter().map(|(p, _)| format!("{p:?}")).collect();
    err.context(format!(
        "the C/C++ of {} did not compile with {} under cross-language PGO:\n  - {}\nFix: \
         `[pgo] cross_language_exclude = [{}]` compiles it with your own compiler, without \
         profile (the rest stays cross-language), or turn cross-language PGO off",
        failed
            .iter()
            .map(|(p, _)| format!("`{p}`"))
            .collect::<Vec<_>>()
            .join(", "),
        spec.clang.display(),
        failed
            .iter()
            .map(|(package, error)| format!("{package}: {error}"))
            .collect::<Vec<_>>()
            .join("\n  - "),
        packages.join(", ")
    ))
}

/// The report's record of a stage's C compiles, and LLVM's profile warnings from them as
/// diagnostics of their package's C (summarised with rustc's).
fn record_c_compiles(
    cx: &Context,
    session: &mut Session,
    stage: Stage,
    spec: &cc::WrapperSpec,
    dynamic_libs: &std::collections::BTreeMap<String, Vec<String>>,
) -> Vec<build::Diagnostic> {
    let records = cc::read_log(&spec.log, Some(&spec.id()));
    let mut packages = std::collections::BTreeMap::new();
    for record in &records {
        *packages.entry(record.package.clone()).or_default() += 1;
    }
    if !records.is_empty() {
        cx.printer.info(format!(
            "C/C++ of build scripts ({} stage): {} files of {} compiled by {}{}",
            stage.name(),
            records.len(),
            packages.keys().cloned().collect::<Vec<_>>().join(", "),
            spec.clang.display(),
            match spec.flags.first() {
                Some(flag) => format!(" with {flag}"),
                None => String::new(),
            }
        ));
    }
    if !dynamic_libs.is_empty() {
        cx.printer.info(format!(
            "C/C++ from the system, which no build here compiles and no profile reaches ({} \
             stage): {}",
            stage.name(),
            dynamic_libs
                .iter()
                .map(|(package, libs)| format!("{package} links {}", libs.join(", ")))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    let mut dropped_flags: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for record in &records {
        let flags = dropped_flags.entry(record.package.clone()).or_default();
        for flag in &record.dropped_flags {
            if !flags.contains(flag) {
                flags.push(flag.clone());
            }
        }
    }
    dropped_flags.retain(|_, flags| !flags.is_empty());
    let excluded: Vec<String> = spec.exclude.clone();
    if !excluded.is_empty() {
        cx.printer.info(format!(
            "C/C++ of {} compiled by your own compiler, without profile ([pgo] \
             cross_language_exclude, {} stage)",
            excluded.join(", "),
            stage.name()
        ));
    }
    for (package, flags) in &dropped_flags {
        cx.printer.info(format!(
            "{package}: its build script's {} left out: the user's compiler rejects it where \
             clang accepts it, and the C++ standard library stays the one your toolchain links \
             (CXXFLAGS=-stdlib=libc++ keeps it)",
            flags.join(" ")
        ));
    }
    let c = cx.settings.c.as_ref();
    session.report.c_compilers.insert(
        stage,
        CCompilerRecord {
            compiler: spec.clang.display().to_string(),
            version: c.map(|c| c.version.clone()).unwrap_or_default(),
            flags: spec.flags.clone(),
            packages,
            system_libraries: dynamic_libs.clone(),
            dropped_flags,
            excluded,
        },
    );
    cc::diagnostics(&records)
}

/// pgo-build in front of the linker for a stage's builds (see linker.rs): the `-C linker`
/// flag and the wrapper's variables, with the link slots and why that many.
fn linker_setup(
    cx: &Context,
    layout: &Layout,
    stage: Stage,
    budget: u64,
) -> Result<(LinkerSetup, usize, String)> {
    let (slots, slots_reason) = link_slots(cx, budget);
    let log = layout.links_log(stage);
    let real = cx.platform.linker.clone();
    let wrapper = linker::wrapper(&layout.root().join("linker"), &real)?;
    let mut setup = LinkerSetup {
        flag: format!(
            "-Clinker={}",
            relative_to(&wrapper, &cx.workspace.root).display()
        ),
        env: vec![
            (linker::MODE_ENV.to_owned(), "1".to_owned()),
            (
                linker::REAL_LINKER_ENV.to_owned(),
                real.to_string_lossy().into_owned(),
            ),
            (linker::SLOTS_ENV.to_owned(), slots.to_string()),
            // Shared by every stage, target and explore build of the target directory, so
            // concurrent pgo-build processes share the bound too.
            (
                linker::SLOTS_DIR_ENV.to_owned(),
                Layout::link_slots_dir(&cx.workspace.target_dir)
                    .display()
                    .to_string(),
            ),
            (linker::LOG_ENV.to_owned(), log.display().to_string()),
        ],
    };
    // startup_order's function order is passed to the optimized link only; bitcode of
    // cross-language ThinLTO reaches every link of the stage.
    let startup_order_on = cx.config.pgo.startup_order != StartupOrder::Off;
    let needs = match lld_needed(cx) {
        Some(needs) if stage == Stage::Optimized || !startup_order_on => Some(needs),
        _ => xlto(cx).then(|| XLTO_NEEDS_LLD.to_owned()),
    };
    if let Some(needs) = needs {
        setup
            .env
            .push((startup_order::REQUIRE_LLD_ENV.to_owned(), needs));
    }
    cx.printer.detail(format!(
        "links: {slots} at a time ({slots_reason}); linker {}",
        real.to_string_lossy()
    ));
    Ok((setup, slots, slots_reason))
}

/// How many links may run at once: `[build] link_jobs`, or the memory budget divided by
/// the largest link measured so far (a conservative guess before the first build).
fn link_slots(cx: &Context, budget: u64) -> (usize, String) {
    let jobs = cx
        .jobs
        .map(|j| j as usize)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    if let Some(LinkJobs::Count(count)) = cx.config.build.link_jobs {
        return (count.max(1), format!("[build] link_jobs = {count}"));
    }
    let measured = Stage::ALL
        .into_iter()
        .flat_map(|stage| linker::read_log(&cx.layout.links_log(stage)))
        .map(|link: linker::LinkRecord| link.max_rss_bytes)
        .max();
    let (per_link, basis) = match measured {
        Some(bytes) if bytes > 0 => (
            bytes.saturating_add(bytes / 4),
            "largest link measured so far + 25%",
        ),
        _ => (
            DEFAULT_LINK_ESTIMATE,
            "no link measured yet: conservative guess",
        ),
    };
    let slots = ((budget / per_link.max(1)) as usize).clamp(1, jobs.max(1));
    (
        slots,
        format!(
            "memory budget {} / {} per link ({basis})",
            human_bytes(budget),
            human_bytes(per_link)
        ),
    )
}

/// Replaces `<stage>/bin/` with the given executables and records them, with the builds
/// of other stages they were made from (`upstream`) and the sources they were built from:
/// from cargo's dep-info, or for binaries rewritten from another stage's (BOLT), that
/// stage's.
pub(crate) fn stage_binaries(
    cx: &Context,
    session: &mut Session,
    stage: Stage,
    stage_rustflags: Vec<String>,
    executables: Vec<StageInput>,
    upstream: &[&StageManifest],
) -> Result<StageManifest> {
    if matches!(stage, Stage::Optimized | Stage::Bolt) {
        check_size_growth(cx, stage, &executables)?;
    }
    let sources: Vec<&std::path::Path> = executables.iter().map(|e| e.source.as_path()).collect();
    let lock_file = cx.workspace.root.join("Cargo.lock");
    let sources = dep_info::sources_fingerprint(
        &sources,
        &lock_file,
        &[cx.layout.root(), &profiles::checkout_independent_dir()],
        &cx.workspace.root,
    )
    .or_else(|| upstream.iter().find_map(|m| m.sources.clone()));
    session.begin_outputs(cx)?;
    let bin_dir = cx.layout.bin_dir(stage);
    if bin_dir.exists() {
        std::fs::remove_dir_all(&bin_dir)
            .with_context(|| format!("could not clear {}", bin_dir.display()))?;
    }
    let mut binaries = Vec::new();
    for input in executables {
        let bin = &input.bin;
        let staged = stage_binary(&input, &bin_dir)?;
        session
            .report
            .binaries
            .entry(bin.name.clone())
            .or_default()
            .insert(
                stage,
                BinaryRecord {
                    size_bytes: staged.size_bytes,
                    loaded_bytes: staged.loaded_bytes,
                    compressed_bytes: staged.compressed_bytes,
                    path: staged.path.clone(),
                    pgo: staged.pgo,
                    bolted: staged.bolted,
                },
            );
        cx.printer.info(format!(
            "{} -> {} ({})",
            bin.name,
            staged.path.display(),
            human_bytes(staged.size_bytes)
        ));
        binaries.push(staged);
    }
    let manifest = StageManifest {
        stage,
        settings: cx.settings.clone(),
        stage_rustflags,
        binaries,
        id: StageManifest::new_id(),
        sources,
        upstream: upstream.iter().map(|m| (m.stage, m.id.clone())).collect(),
    };
    manifest.save(&cx.layout, stage)?;
    Ok(manifest)
}

/// `[pgo] max_size_growth`: refuses to stage binaries that grew more than that over the
/// baseline's, naming each with both sizes. Sizes are loaded sizes (the file less debug
/// info and symbol tables: about what a stripped release ships), so BOLT dropping debug
/// info does not count as shrinking, nor more debug info as growth.
fn check_size_growth(cx: &Context, stage: Stage, executables: &[StageInput]) -> Result<()> {
    let Some(limit) = &cx.config.pgo.max_size_growth else {
        return Ok(());
    };
    let Ok(baseline) = StageManifest::load(&cx.layout, Stage::Baseline, "") else {
        return cx.caution(format!(
            "[pgo] max_size_growth = {:?} is not checked for the {} binaries: there is no \
             baseline build to compare with (run `pgo-build build`)",
            limit.text,
            stage.name()
        ));
    };
    let mut grown = Vec::new();
    for input in executables {
        let Some(reference) = baseline.binaries.iter().find(|b| b.name == input.bin.name) else {
            continue;
        };
        let loaded = |path: &std::path::Path| {
            std::fs::read(path)
                .map_err(anyhow::Error::from)
                .and_then(|data| loaded_size(&data))
                .with_context(|| format!("could not read {} as an executable", path.display()))
        };
        let size = loaded(&input.source)?;
        let reference_size = match reference.loaded_bytes {
            Some(bytes) => bytes,
            None => loaded(&reference.path)?,
        };
        let growth = size as f64 / reference_size.max(1) as f64 - 1.0;
        if growth > limit.fraction {
            grown.push(format!(
                "  {}: {} -> {} ({:+.1}%, without debug info and symbols)",
                input.bin.name,
                human_bytes(reference_size),
                human_bytes(size),
                growth * 100.0
            ));
        }
    }
    if !grown.is_empty() {
        bail!(
            "the {} binaries grew more than [pgo] max_size_growth = {:?} allows over the \
             baseline, so they were not staged:\n{}\nRaise the limit in {}, or build with \
             settings that grow less (`pgo-build explore` measures size and speed of each).",
            stage.name(),
            limit.text,
            grown.join("\n"),
            cx.config.display_path()
        );
    }
    Ok(())
}

pub(super) fn build_and_stage(
    cx: &Context,
    session: &mut Session,
    stage: Stage,
    stage_rustflags: Vec<String>,
) -> Result<StageManifest> {
    let output = cargo_build(
        cx,
        session,
        stage,
        &cx.bins.clone(),
        &stage_rustflags,
        None,
        &|_| true,
    )?;
    let executables = executables_of(&cx.bins, output, false);
    stage_binaries(cx, session, stage, stage_rustflags, executables, &[])
}

/// Flags of builds without profile flags beyond the user's: with BOLT enabled, links keep
/// relocations (BOLT needs them) and pgo-build-rt learns that BOLT may post-process it.
/// Link arguments and that cfg leave the profiled code's control flow untouched.
pub(super) fn plain_flags(cx: &Context) -> Vec<String> {
    if cx.config.bolt.enabled {
        BOLT_INPUT_FLAGS.map(str::to_owned).to_vec()
    } else {
        Vec::new()
    }
}

/// With BOLT enabled, refuses a cargo profile that strips symbols before any build: the
/// linker rejects `--strip-all` with `--emit-relocs`, and BOLT needs the symbols anyway.
pub(super) fn check_bolt_compatible_profile(cx: &Context) -> Result<()> {
    if !cx.config.bolt.enabled {
        return Ok(());
    }
    // `profile_overrides` reach cargo as `--config`, which beats the variable and the files.
    let overridden = cx.config.build.profile_overrides.get("strip");
    let strip = match overridden {
        Some(value) => Some((
            value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned),
            format!("[build] profile_overrides of {}", cx.config.display_path()),
        )),
        None => cargo_config::strip_setting(
            cx.manifest_profiles.as_ref(),
            &cx.cargo_config,
            &cx.settings.profile,
        ),
    };
    if let Some((strip, origin)) = strip
        && strip != "none"
        && strip != "false"
        && strip != "debuginfo"
    {
        let fix = match overridden {
            // The override beats the environment: only changing it helps.
            Some(_) => format!(
                "Make it `strip = \"debuginfo\"` (or remove it) in [build] profile_overrides of \
                 {}",
                cx.config.display_path()
            ),
            None => format!(
                "Keep the symbols for pgo-build's builds without editing the profile: `[build] \
                 profile_overrides = {{ strip = \"debuginfo\" }}` in {} (or \
                 CARGO_PROFILE_{}_STRIP=debuginfo in the environment)",
                cx.config.display_path(),
                cx.settings.profile.to_uppercase().replace('-', "_"),
            ),
        };
        bail!(
            "[bolt] enabled = true in {}, but the `{}` profile strips symbols (strip = {strip} \
             in {origin}): BOLT needs the symbol table, and linking with relocations \
             (-Wl,--emit-relocs) cannot be combined with stripping. {fix}; strip the BOLTed \
             binaries afterwards if needed.",
            cx.config.display_path(),
            cx.settings.profile
        );
    }
    if let Some(flag) = rustflags::stripping_flag(&cx.user_flags.flags) {
        bail!(
            "[bolt] enabled = true in {}, but the rustflags ({}) strip symbols: `{flag}`. \
             BOLT needs the symbol table, and linking with relocations (-Wl,--emit-relocs) \
             cannot be combined with stripping. Remove the flag (or use -Cstrip=debuginfo), \
             and strip the BOLTed binaries afterwards if needed.",
            cx.config.display_path(),
            cx.user_flags.source
        );
    }
    Ok(())
}

/// Pairs each binary with the executable cargo reported for it.
pub(super) fn executables_of(
    bins: &[BinTarget],
    mut output: BuildOutput,
    pgo: bool,
) -> Vec<StageInput> {
    bins.iter()
        .filter_map(|bin| {
            Some(StageInput {
                bin: bin.clone(),
                source: output.executables.remove(&bin.name)?,
                pgo,
                bolted: false,
            })
        })
        .collect()
}

/// Settings that only lld can carry out (`startup_order`'s function order, cross-language
/// ThinLTO's bitcode) against the link the builds will run: a probe program linked with the
/// builds' rustflags (wherever they were set) and linker, its link line printed by rustc and judged as the linker
/// wrapper judges the real one. Run by `doctor` (so `run` refuses before the first build) and
/// before `instrument`'s and `optimize`'s builds, not after hours of them.
pub(super) fn check_lld_before_building(cx: &Context) -> Result<()> {
    let Some(needs) = lld_needed(cx) else {
        return Ok(());
    };
    let probe = cx.layout.root().join("lld-probe");
    crate::util::files::create_dir_all(&probe)?;
    let source = probe.join("probe.rs");
    crate::util::files::write(&source, "fn main() {}\n")?;
    let mut linker = std::ffi::OsString::from("linker=");
    linker.push(&cx.platform.linker);
    let mut cmd = crate::util::command::Cmd::new(&cx.rustc.program)
        .args(["--print", "link-args", "-C"])
        .arg(linker)
        // The builds' own rustflags (the user's, `[build] rustflags`, pgo-build's), less
        // cross-language ThinLTO's bitcode, which a probe has no use for.
        .args(cx.settings.common_rustflags.iter().filter(|flag| {
            !crate::toolchain::cross_language::XLTO_RUSTFLAGS.contains(&flag.as_str())
        }))
        .arg("-o")
        .arg(probe.join("probe"))
        .arg(&source)
        .cwd(&probe);
    if cx.platform.explicit {
        cmd = cmd.args(["--target", &cx.platform.triple]);
    }
    let printed = cmd
        .stdout_checked(&cx.printer)
        .context("could not link a probe program to see which linker the builds will run")?;
    crate::util::files::remove_dir_all(&probe)?;
    // One line: the linker's words, each quoted (`"cc" "-m64" … "-fuse-ld=lld" …`).
    let words: Vec<std::ffi::OsString> = printed
        .split('"')
        .skip(1)
        .step_by(2)
        .map(std::ffi::OsString::from)
        .collect();
    match crate::profiles::startup_order::lld_missing(&words, &cx.platform.linker, &needs) {
        Some(problem) => bail!("{problem} (found before any build, by linking a probe program)"),
        None => Ok(()),
    }
}

/// Why cross-language ThinLTO's links need lld.
const XLTO_NEEDS_LLD: &str =
    "cross-language ThinLTO leaves LLVM bitcode for the linker to optimize";

fn xlto(cx: &Context) -> bool {
    cx.settings
        .c
        .as_ref()
        .is_some_and(|c| c.mode == crate::config::CBuild::PgoXlto)
}

/// Why this configuration needs the optimized link to be lld's, if it does: `startup_order`
/// (its function order), else cross-language ThinLTO (its bitcode).
fn lld_needed(cx: &Context) -> Option<String> {
    if cx.config.pgo.startup_order != StartupOrder::Off {
        Some(format!(
            "[pgo] startup_order = \"{}\" passes the function order to the linker",
            cx.config.pgo.startup_order.name()
        ))
    } else {
        xlto(cx).then(|| XLTO_NEEDS_LLD.to_owned())
    }
}
