//! `pgo-build profile show`: what a profile holds, hottest functions first, as tables or as
//! JSON (`ShownProfile`).

use std::path::Path;

use anyhow::{Result, bail};
use comfy_table::Table;

use super::profile_inputs::inspected_profile;
use crate::config::StartupOrder;
use crate::layout::Stage;
use crate::pipeline::context::Context;
use crate::pipeline::requests::ShowRequest;
use crate::profiles::{Accounting, insight, startup_order};
use crate::util::printer::Fitted;
use crate::wrappers::cc;

/// `profile show --json`'s record of a profile: its functions' counts (`hot`, `shares`), the
/// C/C++ part's counts where a build script compiled any, the last training's coverage and
/// the temporal traces with the functions their order covers.
fn shown_profile(
    profile: &Path,
    functions: &[insight::FunctionCounts],
    (hot, shares): (&[&insight::FunctionCounts], &[(String, f64)]),
    c_total: Option<u64>,
    accounting: Option<&Accounting>,
    (traces, ordered): (crate::report::Traces, Option<usize>),
) -> crate::report::ShownProfile {
    use crate::report::{CrateShare, HotFunction, LanguageShares, ShownCoverage};
    let total: u64 = functions
        .iter()
        .fold(0, |sum, f| sum.saturating_add(f.total));
    let share = |count: u64| count as f64 / total.max(1) as f64;
    crate::report::ShownProfile {
        coverage: accounting
            .iter()
            .flat_map(|a| a.per_binary.iter())
            .map(|(name, f)| {
                let coverage = ShownCoverage {
                    covered: f.covered_functions,
                    instrumented: f.instrumented_functions,
                };
                (name.clone(), coverage)
            })
            .collect(),
        crates: shares
            .iter()
            .map(|(krate, share)| CrateShare {
                krate: krate.clone(),
                share: *share,
            })
            .collect(),
        functions: functions.len(),
        hottest: hot
            .iter()
            .map(|f| HotFunction {
                count: f.total,
                krate: f.krate.clone(),
                name: f.name.clone(),
                share: share(f.total),
            })
            .collect(),
        languages: c_total.map(|c| LanguageShares {
            c: share(c),
            rust: share(total - c),
        }),
        ordered_functions: ordered,
        profile: profile.to_owned(),
        temporal_traces: traces,
        total_count: total,
    }
}

pub fn profile_show(cx: &Context, args: &ShowRequest) -> Result<()> {
    if let Some(binary) = &args.binary
        && !cx.bins.iter().any(|b| &b.name == binary)
    {
        bail!("--binary {binary}: not a selected binary");
    }
    let (profile, accounting) = inspected_profile(cx, args.binary.as_deref())?;
    let profdata = cx.profdata()?.clone();
    let mut functions = insight::functions(&profile, &profdata, &cx.printer)?;
    // C compiled by build scripts in a cross-language training: named by its package.
    let origins = cc::COrigins::new(&cc::read_log(
        &cx.layout.c_compile_log(Stage::Instrumented),
        None,
    ));
    origins.attribute(&mut functions);
    let total: u64 = functions
        .iter()
        .fold(0, |sum, f| sum.saturating_add(f.total));
    let c_total: u64 = functions
        .iter()
        .filter(|f| f.krate.ends_with(cc::C_SUFFIX))
        .map(|f| f.total)
        .sum();
    let hot = insight::hottest(&functions, args.top);
    let shares = insight::crate_shares(&functions);
    let traces = startup_order::traces(&profdata, &profile, &cx.printer)?;
    let ordered = if traces.kept > 0 {
        let dir = cx.layout.profiles_dir();
        Some(startup_order::order_file(&profdata, &profile, &dir, &cx.printer)?.1)
    } else {
        None
    };
    if args.json {
        let shown = shown_profile(
            &profile,
            &functions,
            (&hot, &shares),
            (!origins.is_empty()).then_some(c_total),
            accounting.as_ref(),
            (traces, ordered),
        );
        cx.printer.table(serde_json::to_string_pretty(&shown)?);
        return Ok(());
    }
    let mut table = Table::new();
    table
        .fitted()
        .set_header(["#", "Function", "Crate", "Count", "Share"]);
    for (rank, function) in hot.iter().enumerate() {
        table.add_row([
            (rank + 1).to_string(),
            crate::util::units::shortened(&function.name, 90),
            function.krate.clone(),
            function.total.to_string(),
            format!(
                "{:.1}%",
                100.0 * function.total as f64 / total.max(1) as f64
            ),
        ]);
    }
    cx.printer.table(crate::util::printer::rendered(table));
    let mut crates = Table::new();
    crates.fitted().set_header(["Crate", "Share of all counts"]);
    for (krate, share) in &shares {
        crates.add_row([krate.clone(), format!("{:.1}%", share * 100.0)]);
    }
    cx.printer.table(crate::util::printer::rendered(crates));
    if !origins.is_empty() {
        let c_functions = functions.iter().filter(|f| f.krate.ends_with(cc::C_SUFFIX));
        let (c_run, c_all) = c_functions.fold((0, 0), |(run, all), f| {
            (run + usize::from(f.total > 0), all + 1)
        });
        cx.printer.info(format!(
            "languages: Rust {:.1}%, C/C++ {:.1}% of all counts; {c_run} of {c_all} C/C++ \
             functions in the profile ran",
            100.0 * (total - c_total) as f64 / total.max(1) as f64,
            100.0 * c_total as f64 / total.max(1) as f64,
        ));
    }
    if let Some(accounting) = &accounting {
        let mut coverage = Table::new();
        coverage
            .fitted()
            .set_header(["Binary", "Functions run / instrumented"]);
        for (binary, figures) in &accounting.per_binary {
            if args.binary.as_ref().is_none_or(|b| b == binary) {
                coverage.add_row([binary.clone(), figures.coverage_text()]);
            }
        }
        cx.printer.table(crate::util::printer::rendered(coverage));
    }
    match ordered {
        Some(functions) => cx.printer.info(format!(
            "temporal traces: {} kept of {} processes; the start-up order they give covers \
             {functions} functions",
            traces.kept, traces.seen
        )),
        None if cx.config.pgo.startup_order != StartupOrder::Off => cx.printer.warn(
            "no temporal traces in this profile: [pgo] startup_order needs a training with \
             binaries instrumented for them (`pgo-build instrument`, then `train`)",
        ),
        None => {}
    }
    Ok(())
}
