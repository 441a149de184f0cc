//! `pgo-build bolt`: post-link optimization with BOLT, on top of PGO (or of the baseline).
//!
//! BOLT rewrites a linked binary from a profile of that exact binary: instrument it with
//! `llvm-bolt -instrument`, run the train workloads against the instrumented copies, merge each
//! binary's per-process `.fdata` files with `merge-fdata`, optimize. What makes it work the
//! first time:
//! - inputs must keep relocations (`-Wl,--emit-relocs`, added when `[bolt] enabled`) and symbols;
//!   others are refused with the fix, before anything runs;
//! - instrumented binaries write their profile only on a normal exit: pgo-build-rt turns
//!   SIGTERM/SIGINT into `exit()` during BOLT training (`PGO_BUILD_BOLT_TRAINING`), and a binary
//!   with no profile is named and staged un-BOLTed rather than optimized from nothing;
//! - no `-update-debug-sections` unless asked (it can take an hour per binary), and
//!   `-no-huge-pages` unless asked (2 MiB alignment padded an 830 KB binary to 4.4 MB here);
//! - outputs are staged as real files, so siblings found through `current_exe()` are BOLTed too.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context as _, Result, bail};

use crate::cargo::manifest::StageInput;
use crate::cargo::manifest::StageManifest;
use crate::cargo::manifest::StagedBinary;
use crate::cargo::workspace::BinTarget;
use crate::layout::Stage;
use crate::pipeline::context::{Context, Session};
use crate::pipeline::requests::BoltRequest;
use crate::pipeline::stage_build::stage_binaries;
use crate::pipeline::workload_runs::{PreparedRun, Training, run_training, training_workloads};
use crate::report::BoltRecord;
use crate::report::tables::bolt_table;
use crate::toolchain::{self, LlvmTool};
use crate::util::command::Cmd;

/// The optimization flags for LLVM 22's llvm-bolt (each checked against its `--help`;
/// `-icf=1` is deprecated there). `-use-gnu-stack` keeps the output acceptable to GNU strip.
pub const DEFAULT_ARGS: [&str; 8] = [
    "-reorder-blocks=ext-tsp",
    "-reorder-functions=cdsort",
    "-split-functions",
    "-split-all-cold",
    "-split-eh",
    "-icf=all",
    "-use-gnu-stack",
    "-dyno-stats",
];
/// pgo-build-rt's variable for BOLT training (see `pgo_build_rt::BOLT_TRAINING_ENV`).
const BOLT_TRAINING_ENV: &str = "PGO_BUILD_BOLT_TRAINING";

/// A run of BOLT's training: pgo-build-rt exits normally at a stop signal, so BOLT's
/// instrumentation writes its profile at exit.
fn bolt_training_run(_: &crate::config::Workload) -> Result<PreparedRun> {
    Ok(PreparedRun::env(vec![(
        BOLT_TRAINING_ENV.to_owned(),
        "1".to_owned(),
    )]))
}

pub fn bolt(cx: &Context, session: &mut Session, args: &BoltRequest) -> Result<()> {
    let bolt = toolchain::find_llvm_tool(toolchain::LLVM_BOLT, &cx.rustc, &cx.printer)
        .require(&cx.rustc)?;
    let merge_fdata = toolchain::find_llvm_tool(toolchain::MERGE_FDATA, &cx.rustc, &cx.printer)
        .require(&cx.rustc)?;
    let input_stage = if args.without_pgo {
        Stage::Baseline
    } else {
        Stage::Optimized
    };
    let hint = if args.without_pgo {
        "run `pgo-build build` first"
    } else {
        "run `pgo-build optimize` first"
    };
    let input = StageManifest::load(&cx.layout, input_stage, hint)?;
    // BOLT takes whatever is in bin/: it must be what the stage staged.
    let rebuild = if args.without_pgo {
        "build"
    } else {
        "optimize"
    };
    input.check_staged(input_stage.name(), rebuild)?;
    let runtime = crate::toolchain::targets::bolt_runtime_arch(&bolt.path);
    if let Some(reason) = cx.platform.bolt_unsupported(runtime.as_deref()) {
        return stage_unbolted(cx, session, &input, &reason);
    }
    let binaries = bolt_inputs(cx, &input)?;

    // Cargo workloads run binaries of their own (benches, tests), never the staged ones
    // BOLT instruments: they cannot train it.
    let (workloads, cargo): (Vec<_>, Vec<_>) = training_workloads(cx, &[])?
        .into_iter()
        .partition(|w| w.cargo.is_none());
    if let Some(first) = cargo.first() {
        cx.printer.info(format!(
            "BOLT training skips cargo workload `{}`{}: it runs binaries of its own, not the \
             staged ones BOLT optimizes",
            first.name(),
            if cargo.len() > 1 {
                " and the other cargo workloads"
            } else {
                ""
            }
        ));
    }
    // Commit point: the inputs, tools and workloads are checked.
    session.begin_outputs(cx)?;
    let raw_root = cx.layout.bolt_profiles_dir().join("raw");
    let instrumented = bolt_instrument(cx, session, &bolt, &input, &binaries, &raw_root)?;
    run_training(
        cx,
        session,
        Training {
            stage: Stage::BoltInstrumented,
            manifest: &instrumented,
            workloads: &workloads,
            log_prefix: "bolt-train",
            prepare: &bolt_training_run,
            finish: &|_, _| Ok(()),
        },
    )?;

    let work = fresh_dir(&cx.layout.work_dir(Stage::Bolt))?;
    let flags = bolt_flags(cx);
    let mut staged = Vec::new();
    session.report.bolt.clear();
    for binary in &binaries {
        let target = BinTarget {
            name: binary.name.clone(),
            package: binary.package.clone(),
        };
        let fdata = fdata_files(&raw_root.join(&binary.name))?;
        let mut record = BoltRecord {
            profile_files: fdata.len(),
            reason: None,
            ..unbolted_record(&input, binary, "")
        };
        if fdata.is_empty() {
            let reason = "no BOLT profile: no training workload ran it to a normal exit (BOLT's \
                          instrumentation writes only on exit; call pgo_build_rt::install() \
                          in programs stopped by SIGTERM/SIGINT)";
            cx.caution(format!(
                "`{}`: {reason}; it is staged un-BOLTed",
                binary.name
            ))?;
            record.reason = Some(reason.to_owned());
            staged.push(StageInput {
                bin: target,
                source: binary.path.clone(),
                pgo: binary.pgo,
                bolted: false,
            });
        } else {
            let output = work.join(&binary.name);
            bolt_optimize(
                cx,
                &bolt,
                &merge_fdata,
                binary,
                &fdata,
                &flags,
                &output,
                &mut record,
            )?;
            staged.push(StageInput {
                bin: target,
                source: output,
                pgo: binary.pgo,
                bolted: true,
            });
        }
        session.report.bolt.insert(binary.name.clone(), record);
    }
    stage_binaries(cx, session, Stage::Bolt, flags, staged, &[&input])?;
    cx.printer.table(bolt_table(&session.report.bolt));
    Ok(())
}

/// The target cannot be BOLTed here (`reason`): every selected binary of the input stage is
/// staged as it is, named, so later stages and `compare` find the bolt stage.
fn stage_unbolted(
    cx: &Context,
    session: &mut Session,
    input: &StageManifest,
    reason: &str,
) -> Result<()> {
    cx.caution(format!(
        "BOLT skipped for {}: {reason}. Its binaries are staged un-BOLTed",
        cx.platform.triple
    ))?;
    let mut staged = Vec::new();
    session.report.bolt.clear();
    for bin in &cx.bins {
        let binary = input_binary(input, bin)?;
        session
            .report
            .bolt
            .insert(binary.name.clone(), unbolted_record(input, binary, reason));
        staged.push(StageInput {
            bin: bin.clone(),
            source: binary.path.clone(),
            pgo: binary.pgo,
            bolted: false,
        });
    }
    let flags = bolt_flags(cx);
    stage_binaries(cx, session, Stage::Bolt, flags, staged, &[input])?;
    cx.printer.table(bolt_table(&session.report.bolt));
    Ok(())
}

/// The selected binaries of the input stage, refused as a whole when any cannot be BOLTed.
fn bolt_inputs(cx: &Context, input: &StageManifest) -> Result<Vec<StagedBinary>> {
    let mut binaries = Vec::new();
    let mut refusals = Vec::new();
    for bin in &cx.bins {
        let binary = input_binary(input, bin)?;
        let data = std::fs::read(&binary.path)
            .with_context(|| format!("could not read {}", binary.path.display()))?;
        if let Err(reason) = check_input(&data) {
            refusals.push(format!(
                "  - `{}` ({}): {reason}",
                bin.name,
                binary.path.display()
            ));
        }
        binaries.push(binary.clone());
    }
    if !refusals.is_empty() {
        bail!(
            "BOLT cannot optimize these binaries:\n{}\nFix: set `[bolt] enabled = true` in {} and re-run \
             `pgo-build {}` (pgo-build then links with -Wl,--emit-relocs), or add \
             -Clink-arg=-Wl,--emit-relocs to your rustflags; keep symbols (no `strip` in the \
             cargo profile).",
            refusals.join("\n"),
            cx.config.display_path(),
            if input.stage == Stage::Baseline {
                "build"
            } else {
                "optimize"
            }
        );
    }
    Ok(binaries)
}

/// BOLT-instruments every binary into the bolt-instrumented stage, each writing
/// `raw_root/<binary>/prof.<pid>.fdata`.
fn bolt_instrument(
    cx: &Context,
    session: &mut Session,
    bolt: &LlvmTool,
    input: &StageManifest,
    binaries: &[StagedBinary],
    raw_root: &Path,
) -> Result<StageManifest> {
    fresh_dir(raw_root)?;
    let work = fresh_dir(&cx.layout.work_dir(Stage::BoltInstrumented))?;
    let mut inputs = Vec::new();
    for binary in binaries {
        let profile_dir = raw_root.join(&binary.name);
        crate::util::files::create_dir_all(&profile_dir)?;
        let output = work.join(&binary.name);
        Cmd::new(&bolt.path)
            .arg(&binary.path)
            .arg("-instrument")
            .arg(format!(
                "-instrumentation-file={}",
                profile_dir.join("prof").display()
            ))
            .arg("-instrumentation-file-append-pid")
            .arg("-o")
            .arg(&output)
            .stdout_checked(&cx.printer)
            .with_context(|| format!("llvm-bolt could not instrument `{}`", binary.name))?;
        inputs.push(StageInput {
            bin: BinTarget {
                name: binary.name.clone(),
                package: binary.package.clone(),
            },
            source: output,
            pgo: binary.pgo,
            bolted: false,
        });
    }
    stage_binaries(
        cx,
        session,
        Stage::BoltInstrumented,
        Vec::new(),
        inputs,
        &[input],
    )
}

#[allow(clippy::too_many_arguments)]
fn bolt_optimize(
    cx: &Context,
    bolt: &LlvmTool,
    merge_fdata: &LlvmTool,
    binary: &StagedBinary,
    fdata: &[PathBuf],
    flags: &[String],
    output: &Path,
    record: &mut BoltRecord,
) -> Result<()> {
    let merged = cx
        .layout
        .bolt_profiles_dir()
        .join(format!("{}.fdata", binary.name));
    Cmd::new(&merge_fdata.path)
        .args(fdata)
        .arg("-o")
        .arg(&merged)
        .stdout_checked(&cx.printer)
        .with_context(|| {
            format!(
                "merge-fdata could not merge the BOLT profiles of `{}`",
                binary.name
            )
        })?;
    let cmd = Cmd::new(&bolt.path)
        .arg(&binary.path)
        .arg("-o")
        .arg(output)
        .arg(format!("-data={}", merged.display()))
        .args(flags);
    let started = Instant::now();
    let result = cmd.output(&cx.printer)?;
    let text = String::from_utf8_lossy(&result.stdout).into_owned()
        + &String::from_utf8_lossy(&result.stderr);
    if !result.status.success() {
        let tail: Vec<&str> = text
            .lines()
            .rev()
            .take(20)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        bail!(
            "llvm-bolt failed on `{}` ({}):\n{}\nCommand: {}\nIf it fails in C/C++ code linked into the \
             binary, restrict BOLT to Rust's functions with `[bolt] funcs = [\"^_R.*\"]` (v0 \
             mangling) in {}.",
            binary.name,
            result.status,
            tail.join("\n"),
            cmd.display(),
            cx.config.display_path()
        );
    }
    record.bolted = true;
    record.seconds = Some(started.elapsed().as_secs_f64());
    record.size_after = std::fs::metadata(output)?.len();
    let (functions, branches) = parse_bolt_output(&text);
    record.functions_with_profile = functions;
    record.taken_branches = branches;
    Ok(())
}

/// Default (or `[bolt] args`) optimization flags plus the settings of `[bolt]`.
fn bolt_flags(cx: &Context) -> Vec<String> {
    let config = &cx.config.bolt;
    let mut flags = match &config.args {
        Some(args) => args.clone(),
        None => DEFAULT_ARGS.map(str::to_owned).to_vec(),
    };
    if !config.huge_pages {
        flags.push("-no-huge-pages".to_owned());
    }
    if config.keep_debug_info {
        flags.push("-update-debug-sections".to_owned());
    }
    if !config.funcs.is_empty() {
        flags.push(format!("-funcs={}", config.funcs.join(",")));
    }
    flags.extend(config.extra_args.iter().cloned());
    flags
}

/// Why BOLT cannot use a binary: stripped of symbols, or linked without relocations.
pub fn check_input(data: &[u8]) -> Result<(), String> {
    use object::{Object, ObjectSection};
    let file = object::File::parse(data)
        .map_err(|err| format!("not an executable BOLT can read: {err}"))?;
    if file.section_by_name(".symtab").is_none() {
        return Err("stripped (no symbol table); BOLT needs symbols".to_owned());
    }
    let relocations = file.sections().any(|section| {
        section
            .name()
            .is_ok_and(|name| name.starts_with(".rela.text"))
    });
    if !relocations {
        return Err(
            "linked without relocations (no .rela.text); BOLT needs -Wl,--emit-relocs".to_owned(),
        );
    }
    Ok(())
}

/// (functions with profile, taken branches before → after) from llvm-bolt's output.
fn parse_bolt_output(text: &str) -> (Option<String>, Option<String>) {
    let functions = text
        .lines()
        .find(|line| line.contains("have non-empty execution profile"))
        .and_then(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let at = words.iter().position(|w| *w == "out")?;
            Some(format!(
                "{} of {} functions",
                words.get(at.checked_sub(1)?)?,
                words.get(at + 2)?
            ))
        });
    let branches: Vec<&str> = text
        .lines()
        .filter(|line| line.trim_end().contains(": taken branches"))
        .collect();
    let taken = match branches.as_slice() {
        [before, after, ..] => {
            let count = |line: &str| line.split(':').next().unwrap_or("").trim().to_owned();
            let change = after
                .rsplit_once('(')
                .map(|(_, rest)| format!(" ({}", rest.trim()))
                .unwrap_or_default();
            Some(format!("{} → {}{change}", count(before), count(after)))
        }
        _ => None,
    };
    (functions, taken)
}

fn fdata_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries {
            let path = entry?.path();
            if path.extension().is_some_and(|ext| ext == "fdata")
                && std::fs::metadata(&path)?.len() > 0
            {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

fn fresh_dir(dir: &Path) -> Result<PathBuf> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)
            .with_context(|| format!("could not clear {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))?;
    Ok(dir.to_owned())
}

/// A selected binary in the stage BOLT works from.
fn input_binary<'a>(input: &'a StageManifest, bin: &BinTarget) -> Result<&'a StagedBinary> {
    input.binary(&bin.name).with_context(|| {
        format!(
            "binary `{}` is not in the {} stage; build it first",
            bin.name, input.stage
        )
    })
}

/// The record of a binary staged as it is (`reason` says why).
fn unbolted_record(input: &StageManifest, binary: &StagedBinary, reason: &str) -> BoltRecord {
    BoltRecord {
        input: input.stage,
        bolted: false,
        reason: Some(reason.to_owned()),
        profile_files: 0,
        seconds: None,
        size_before: binary.size_bytes,
        size_after: binary.size_bytes,
        functions_with_profile: None,
        taken_branches: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bolt_output_is_summarised() {
        let text = "BOLT-INFO: 155 out of 781 functions in the binary (19.8%) have non-empty execution profile\n\
                    BOLT-INFO: program-wide dynostats after all optimizations before SCTC and FOP:\n\
                    \x20              41691 : taken branches\n\
                    \x20              22095 : taken branches (-47.0%)\n";
        let (functions, branches) = parse_bolt_output(text);
        assert_eq!(functions.as_deref(), Some("155 of 781 functions"));
        assert_eq!(branches.as_deref(), Some("41691 → 22095 (-47.0%)"));
        assert_eq!(parse_bolt_output("nothing"), (None, None));
    }

    #[test]
    fn non_executables_are_refused() {
        assert!(
            check_input(b"not an elf")
                .unwrap_err()
                .contains("not an executable")
        );
    }
}
