//! Why PGO does not pay, in one line, where the answer ships nothing: from what was
//! measured, the causes that hold, with the change that addresses each. Held-out runs so short
//! that process start is what they time (alone); else hot held-out code training left cold
//! (`profile overlap`) and, beside it, what counted runs show (callgrind, by function): the
//! program's own code running more instructions under the candidate, C/C++ that Rust-only PGO
//! leaves alone, or work mostly outside the program; with neither, training that represents the
//! held-out work poorly, or covers it, or how to find out. A pure function of the [`Report`].

use crate::layout::Stage;
use crate::measure::code_counts::{CodeCounts, KEPT_FUNCTIONS, Language};
use crate::measure::metric::Metric;
use crate::report::records::WorkloadComparison;
use crate::report::report_file::Report;
use crate::util::units::{grouped, percent, shortened};

/// A held-out run shorter than this is mostly process start and loading, which PGO barely
/// changes.
const SHORT_RUN_SECS: f64 = 0.005;

/// The program's own code running this much more under the candidate is where a loss is.
const OWN_CODE_ROSE: f64 = 0.01;

/// C/C++ compiled into the program this large a share of all the instructions counted is what
/// Rust-only PGO misses.
const C_CPP_SHARE: f64 = 0.3;

/// Work this large a share outside the program is work PGO cannot change.
const OUTSIDE_SHARE: f64 = 0.5;

/// Stripped code this large a share of the program's own instructions hides whose code ran.
const STRIPPED_SHARE: f64 = 0.5;

/// How long a function's demangled name may run in the line: its start names it.
const NAME_CHARS: usize = 72;

/// Where nothing ships: why, in one line, from what was measured, with the change that
/// addresses it (the causes in the module's order). Hot code training left cold and what the
/// counted runs show are said together: a program can have both.
pub(super) fn why_it_does_not_pay(report: &Report, judged: &[&WorkloadComparison]) -> String {
    if let Some(line) = short_runs(judged, report) {
        return line;
    }
    let cold = cold_in_training(report);
    let counted = from_counts(report, judged, cold.is_some());
    let stripped = stripped(report, judged);
    if cold.is_none() && counted.is_none() {
        return match stripped {
            Some(note) => format!("{}; {note}", from_overlap(report)),
            None => from_overlap(report),
        };
    }
    let lost = counted.as_ref().is_some_and(|c| c.lost);
    let clauses: Vec<String> = cold
        .into_iter()
        .chain(counted.map(|c| c.clause))
        .chain(stripped)
        .collect();
    format!(
        "Why it {} here: {}",
        if lost { "did not pay" } else { "may not pay" },
        clauses.join("; ")
    )
}

/// Held-out runs under [`SHORT_RUN_SECS`], by wall or CPU time (counted runs are the
/// counter's times, not the program's).
fn short_runs(judged: &[&WorkloadComparison], report: &Report) -> Option<String> {
    let timed = report
        .compare
        .as_ref()
        .is_some_and(|c| c.metric != Metric::Instructions);
    let longest = judged
        .iter()
        .flat_map(|w| w.candidates.values())
        .map(|s| {
            s.reference_median_wall_secs
                .max(s.candidate_median_wall_secs)
        })
        .fold(0.0, f64::max);
    (timed && longest > 0.0 && longest < SHORT_RUN_SECS).then(|| {
        format!(
            "Why it may not pay here: a held-out run takes {:.1} ms, much of it process start \
             and loading, which PGO barely changes: give each held-out run more of the \
             program's own work (a larger input, more of it per process)",
            longest * 1000.0
        )
    })
}

/// Functions hot in held-out work (5% of its counts or more) and at most a tenth as hot in
/// training, in any binary: the hottest named.
fn cold_in_training(report: &Report) -> Option<String> {
    let cold = cold_functions(report);
    let [(binary, first), rest @ ..] = cold.as_slice() else {
        return None;
    };
    Some(format!(
        "training left cold what held-out work runs most: `{}` \
         {} is {:.0}% of `{binary}`'s held-out counts and {:.1}% of training's{}; a train \
         workload doing what the held-out one does addresses it (one more workload each \
         training)",
        // A generic adapter's demangled name runs to lines: its start names it.
        shortened(&first.name, NAME_CHARS),
        // "(no crate)" for a C function already has its parentheses.
        if first.krate.starts_with('(') {
            first.krate.clone()
        } else {
            format!("({})", first.krate)
        },
        first.test_share * 100.0,
        first.base_share * 100.0,
        match rest.len() {
            0 => String::new(),
            n => format!(", and {n} more like it"),
        }
    ))
}

/// [`cold_in_training`]'s functions, hottest first, with their binary.
fn cold_functions(report: &Report) -> Vec<(&String, &crate::report::Missed)> {
    let mut cold: Vec<(&String, &crate::report::Missed)> = report
        .overlap
        .iter()
        .flat_map(|(binary, o)| o.missed_by_training.iter().map(move |m| (binary, m)))
        .filter(|(_, m)| m.left_cold())
        .collect();
    cold.sort_by(|a, b| b.1.test_share.total_cmp(&a.1.test_share));
    cold
}

/// What the counted runs say, as a clause of the why line.
struct Counted {
    clause: String,
    /// A loss measured in the program's own code, not only a likely cause.
    lost: bool,
}

/// From the last counted run of each side (callgrind, by function), of the judged workload
/// whose own code rose most against all its instructions: the program's own code ran at least
/// [`OWN_CODE_ROSE`] of them more under the candidate (named by the function that rose most,
/// where one did), with C/C++ said beside it; else C/C++ compiled into the program, with
/// cross-language PGO off, made [`C_CPP_SHARE`] of the instructions; else the work ran mostly
/// outside the program. `cold_named`: the line already names training as a cause, so the
/// function's training is not said again.
fn from_counts(
    report: &Report,
    judged: &[&WorkloadComparison],
    cold_named: bool,
) -> Option<Counted> {
    let compare = report.compare.as_ref()?;
    let candidate = compare
        .candidates
        .iter()
        .find(|c| *c == Stage::Optimized.name())
        .or(compare.candidates.first())?;
    let rise = |base: &CodeCounts, under: Option<&CodeCounts>| {
        under.map_or(f64::NEG_INFINITY, |under| {
            (under.own() as f64 - base.own() as f64) / base.total().max(1) as f64
        })
    };
    let (workload, base, under) = judged
        .iter()
        .filter_map(|w| {
            let base = w.code.get(&compare.reference)?;
            Some((&w.workload, base, w.code.get(candidate)))
        })
        .max_by(|a, b| rise(a.1, a.2).total_cmp(&rise(b.1, b.2)))?;
    let cross_language = report.c_compilers.contains_key(&Stage::Optimized);
    let share = |part: u64| part as f64 / base.total().max(1) as f64;
    let c_cpp = (!cross_language && share(base.c_cpp) >= C_CPP_SHARE).then(|| {
        let rust = match (base.rust, under) {
            (0, _) | (_, None) => String::new(),
            (rust, Some(under)) => format!(
                " (its Rust code ran {:.2}× the instructions under {candidate})",
                under.rust as f64 / rust as f64
            ),
        };
        format!(
            "{} of the instructions of a counted run of `{workload}` are C/C++ compiled into \
             the program ({}), which Rust-only PGO leaves as it was{rust}: `--cross-language` \
             profiles them too, with the C/C++ built by the clang of rustc's LLVM in place of \
             your compiler (`pgo-build explore` measures that switch alone beside it){}",
            percent(share(base.c_cpp)),
            hottest_of(base, Language::CCpp),
            // Profiled from training that misses the held-out work, the C is laid out for the
            // wrong work too (oxipng, bench/c-hot-path: 4.9% more instructions than clang alone).
            if cold_named {
                ", once training runs what the held-out work runs: profiled from training that \
                 misses it, the C is laid out for other work too"
            } else {
                ""
            }
        )
    });
    if let Some(under) = under.filter(|under| rise(base, Some(under)) >= OWN_CODE_ROSE) {
        let mut clause = format!(
            "the program's own code ran {:.2}× the instructions under {candidate} in a counted \
             run of `{workload}` ({} → {}){}",
            under.own() as f64 / base.own().max(1) as f64,
            grouped(base.own()),
            grouped(under.own()),
            where_it_rose(report, base, under, cold_named, cross_language)
        );
        if let Some(c_cpp) = c_cpp {
            clause = format!("{clause}; {c_cpp}");
        }
        return Some(Counted { clause, lost: true });
    }
    if let Some(clause) = c_cpp {
        return Some(Counted {
            clause,
            lost: false,
        });
    }
    (share(base.outside) >= OUTSIDE_SHARE).then(|| Counted {
        clause: format!(
            "{} of the instructions of a counted run of `{workload}` are outside the program \
             (shared libraries, the loader, the shell, other programs), which PGO does not \
             change: give each held-out run more of the program's own work",
            percent(share(base.outside))
        ),
        lost: false,
    })
}

/// Where the program's own code ran mostly in functions whose symbols are stripped, the
/// counts cannot tell Rust from C/C++: said, with the setting that keeps the names.
fn stripped(report: &Report, judged: &[&WorkloadComparison]) -> Option<String> {
    let reference = &report.compare.as_ref()?.reference;
    let (workload, base) = judged
        .iter()
        .find_map(|w| Some((&w.workload, w.code.get(reference)?)))?;
    (base.own() > 0 && base.unnamed as f64 >= STRIPPED_SHARE * base.own() as f64).then(|| {
        format!(
            "whose code a counted run of `{workload}` ran in cannot be told: {} of the \
             program's own instructions ran in functions whose symbols are stripped (`strip` in \
             its release profile); `[build] profile_overrides = {{ strip = \"debuginfo\" }}` \
             keeps their names (symbols are not loaded: the size the gate judges stays the same)",
            percent(base.unnamed as f64 / base.own() as f64)
        )
    })
}

/// ", most of the rise in `f` (+N, …)": the kept function whose instructions rose most, and
/// what training did with it; nothing where no kept function rose.
fn where_it_rose(
    report: &Report,
    base: &CodeCounts,
    under: &CodeCounts,
    cold_named: bool,
    cross_language: bool,
) -> String {
    let Some(rise) = largest_rise(base, under) else {
        return String::new();
    };
    let net = under.own().saturating_sub(base.own());
    let how_much = if rise.instructions * 2 >= net && rise.instructions <= net {
        "most of the rise in"
    } else {
        "the largest single rise in"
    };
    // A C/C++ function is in the profile only with cross-language PGO.
    let profiled = rise.language == Language::Rust || cross_language;
    format!(
        ", {how_much} `{}` ({}+{}, what was inlined into it included){}",
        shortened(rise.name, NAME_CHARS),
        if rise.at_least { "at least " } else { "" },
        grouped(rise.instructions),
        if cold_named || !profiled {
            String::new()
        } else {
            training_of(report, rise.name)
        }
    )
}

/// A kept function's rise over the reference.
struct Rise<'a> {
    name: &'a str,
    language: Language,
    instructions: u64,
    /// The reference did not keep it: it ran at most the fewest of those kept there, so the
    /// rise is at least this.
    at_least: bool,
}

/// The kept function of `under` whose instructions rose most over `base`'s. A function
/// `base` did not keep ran there at most its smallest kept count when `base` kept a full list,
/// else not at all.
fn largest_rise<'a>(base: &CodeCounts, under: &'a CodeCounts) -> Option<Rise<'a>> {
    let full = base.functions.len() >= KEPT_FUNCTIONS;
    let floor = match base.functions.last() {
        Some(last) if full => last.instructions,
        _ => 0,
    };
    under
        .functions
        .iter()
        .map(|f| {
            let kept = base.instructions_of(&f.name);
            let before = if kept > 0 { kept } else { floor };
            Rise {
                name: &f.name,
                language: f.language,
                instructions: f.instructions.saturating_sub(before),
                at_least: kept == 0 && floor > 0,
            }
        })
        .filter(|r| r.instructions > 0)
        .max_by_key(|r| r.instructions)
}

/// What the overlap says of a function's training, when it was measured: left cold (the fix:
/// train on it), or not listed as left cold (LLVM's choices from the profile may be what
/// lost). The overlap lists the held-out functions training missed most, not every function
/// it ran, so "not listed" is all it says.
fn training_of(report: &Report, name: &str) -> String {
    if report.overlap.is_empty() {
        return String::new();
    }
    let cold = report
        .overlap
        .values()
        .flat_map(|o| &o.missed_by_training)
        .any(|m| m.name == name && m.cold_in_training());
    if cold {
        ", which training left cold: a train workload doing what the held-out one does \
         addresses it"
            .to_owned()
    } else {
        ", which `profile overlap` does not list as left cold by training: the choices LLVM \
         made from the profile may be what lost here; `pgo-build explore` measures other \
         settings"
            .to_owned()
    }
}

/// "`deflate_slow` first", or "none among the hottest" when no function of `language` was
/// kept.
fn hottest_of(counts: &CodeCounts, language: Language) -> String {
    counts
        .functions
        .iter()
        .find(|f| f.language == language)
        .map_or_else(
            || "none among the hottest".to_owned(),
            |f| format!("`{}` first", shortened(&f.name, NAME_CHARS)),
        )
}

/// From the overlap alone: training represents the held-out work poorly, or covers it; or,
/// unmeasured, how to find out.
fn from_overlap(report: &Report) -> String {
    let Some((binary, lowest)) = report
        .overlap
        .iter()
        .min_by(|a, b| a.1.edge_overlap.total_cmp(&b.1.edge_overlap))
    else {
        return "To see why: `pgo-build profile overlap` compares what training ran with what \
                held-out work runs, function by function (one instrumented run of each \
                held-out workload)"
            .to_owned();
    };
    let floor = lowest.min_overlap.unwrap_or(0.5);
    if lowest.edge_overlap < floor {
        return format!(
            "Why it may not pay here: training represents the held-out work of `{binary}` poorly \
             ({:.0}% overlap, under [pgo] min_overlap {:.0}%), though no single held-out \
             function stands out: train on work closer to the held-out work",
            lowest.edge_overlap * 100.0,
            floor * 100.0
        );
    }
    format!(
        "Training covers the held-out work ({:.0}% overlap or more, no hot held-out function left \
         cold): the profile is not what holds PGO back here; what is left is more rounds, where \
         a line above says they would tell, or other build settings (`pgo-build explore`)",
        lowest.edge_overlap * 100.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::code_counts::FunctionInstructions;

    const NOISE: [f64; 10] = [1.02, 0.97, 1.01, 0.99, 1.03, 0.98, 1.0, 1.02, 0.97, 1.01];

    fn counts(
        rust: u64,
        c_cpp: u64,
        outside: u64,
        functions: &[(&str, Language, u64)],
    ) -> CodeCounts {
        CodeCounts {
            rust,
            c_cpp,
            outside,
            unnamed: 0,
            functions: functions
                .iter()
                .map(|&(name, language, instructions)| FunctionInstructions {
                    name: name.into(),
                    language,
                    instructions,
                })
                .collect(),
        }
    }

    /// A report whose comparison ships nothing, with these counted runs of its first workload.
    fn report(baseline: CodeCounts, optimized: CodeCounts) -> Report {
        let mut report = crate::report::answer::fixtures::report(&NOISE, &NOISE, 1000);
        let workload = &mut report.compare.as_mut().unwrap().workloads[0];
        workload.code = [
            ("baseline".to_owned(), baseline),
            ("optimized".to_owned(), optimized),
        ]
        .into();
        report
    }

    fn why(report: &Report) -> String {
        let judged: Vec<&WorkloadComparison> =
            report.compare.as_ref().unwrap().workloads.iter().collect();
        why_it_does_not_pay(report, &judged)
    }

    #[test]
    fn counted_runs_name_the_function_that_got_slower_and_whether_training_ran_it() {
        use Language::*;
        let base = counts(
            80_000,
            0,
            300_000,
            &[
                ("helper::main", Rust, 79_000),
                ("core::fmt::write", Rust, 90),
            ],
        );
        // main rose by 100,000; fmt::write left the kept list (at most 90 before): no rise.
        let under = counts(
            181_000,
            0,
            300_000,
            &[
                ("helper::main", Rust, 179_000),
                ("std::rt::lang_start", Rust, 80),
            ],
        );
        let mut report = report(base, under);
        assert_eq!(
            why(&report),
            "Why it did not pay here: the program's own code ran 2.26× the instructions under \
             optimized in a counted run of `holdout` (80,000 → 181,000), most of the rise in \
             `helper::main` (+100,000, what was inlined into it included)"
        );
        // With the overlap: training ran it (the profile covers it), or left it cold.
        report.overlap.insert(
            "helper".into(),
            crate::report::OverlapRecord {
                edge_overlap: 1.0,
                min_overlap: None,
                missed_by_training: Vec::new(),
            },
        );
        assert!(why(&report).ends_with(
            "which `profile overlap` does not list as left cold by training: the choices LLVM \
             made from the profile may be what lost here; `pgo-build explore` measures other \
             settings"
        ));
        report
            .overlap
            .get_mut("helper")
            .unwrap()
            .missed_by_training
            .push(crate::report::Missed {
                name: "helper::main".into(),
                krate: "helper".into(),
                test_share: 0.04,
                base_share: 0.0,
            });
        assert!(
            why(&report).contains("which training left cold: a train workload"),
            "{}",
            why(&report)
        );
        // Hot enough to be named as training's cause: both causes in one line, training's
        // fix said once.
        report.overlap.get_mut("helper").unwrap().missed_by_training[0].test_share = 0.2;
        let line = why(&report);
        assert!(line.starts_with("Why it did not pay here: training left cold what held-out work runs most: `helper::main`"), "{line}");
        assert!(
            line.contains("; the program's own code ran 2.26× the instructions"),
            "{line}"
        );
        assert!(!line.contains("which training left cold"), "{line}");
    }

    #[test]
    fn a_rise_is_bounded_by_what_the_reference_kept_and_said_as_no_more_than_it_is() {
        use Language::*;
        // The reference kept a full list, the smallest 1,000: a function it did not keep ran
        // at most that there.
        let mut kept: Vec<(String, Language, u64)> = (0..KEPT_FUNCTIONS as u64)
            .map(|i| (format!("f{i}"), Rust, 10_000 - i * 100))
            .collect();
        kept.last_mut().unwrap().2 = 1_000;
        let kept: Vec<(&str, Language, u64)> =
            kept.iter().map(|(n, l, i)| (n.as_str(), *l, *i)).collect();
        let base = counts(100_000, 0, 0, &kept);
        let under = counts(103_000, 0, 0, &[("inlined_out", Rust, 9_000)]);
        let rise = largest_rise(&base, &under).unwrap();
        assert_eq!(
            (rise.name, rise.instructions, rise.at_least),
            ("inlined_out", 8_000, true)
        );
        // It rose by more than the net 3,000 (code moved between functions): not "most of".
        let line = why(&report(base, under));
        assert!(
            line.contains(", the largest single rise in `inlined_out` (at least +8,000, what was inlined into it included)"),
            "{line}"
        );
        // A short list is the whole of what ran: an absent function ran nothing there.
        let base = counts(100_000, 0, 0, &[("main", Rust, 90_000)]);
        let under = counts(
            103_000,
            0,
            0,
            &[("main", Rust, 90_500), ("new", Rust, 2_500)],
        );
        let rise = largest_rise(&base, &under).unwrap();
        assert_eq!(
            (rise.name, rise.instructions, rise.at_least),
            ("new", 2_500, false)
        );
        let line = why(&report(base, under));
        assert!(
            line.contains(", most of the rise in `new` (+2,500,"),
            "{line}"
        );
        // No kept function rose: the rise is said without one.
        let base = counts(100_000, 0, 0, &[("main", Rust, 90_000)]);
        let under = counts(103_000, 0, 0, &[("main", Rust, 90_000)]);
        let line = why(&report(base, under));
        assert!(line.ends_with("(100,000 → 103,000)"), "{line}");
    }

    #[test]
    fn the_workload_explained_is_the_one_whose_own_code_rose() {
        use Language::*;
        let flat = counts(50_000, 0, 50_000, &[("main", Rust, 50_000)]);
        let risen = counts(60_000, 0, 50_000, &[("main", Rust, 60_000)]);
        let mut report = report(flat.clone(), flat.clone());
        let workloads = &mut report.compare.as_mut().unwrap().workloads;
        workloads[1].code = [
            ("baseline".to_owned(), flat),
            ("optimized".to_owned(), risen),
        ]
        .into();
        let second = workloads[1].workload.clone();
        let line = why(&report);
        assert!(
            line.contains(&format!("in a counted run of `{second}`")),
            "{line}"
        );
    }

    #[test]
    fn stripped_code_is_not_called_c() {
        let stripped = CodeCounts {
            unnamed: 90_000,
            outside: 10_000,
            ..CodeCounts::default()
        };
        let mut report = report(stripped.clone(), stripped);
        let line = why(&report);
        assert!(line.starts_with("To see why"), "{line}");
        assert!(
            line.ends_with(
                "; whose code a counted run of `holdout` ran in cannot be told: 100% of the \
                 program's own instructions ran in functions whose symbols are stripped (`strip` \
                 in its release profile); `[build] profile_overrides = { strip = \"debuginfo\" }` \
                 keeps their names (symbols are not loaded: the size the gate judges stays the \
                 same)"
            ),
            "{line}"
        );
        // Beside another cause, said too: the counts could not tell more.
        report.overlap.insert(
            "oxipng".into(),
            crate::report::OverlapRecord {
                edge_overlap: 0.9,
                min_overlap: None,
                missed_by_training: vec![crate::report::Missed {
                    name: "oxipng::evaluate".into(),
                    krate: "oxipng".into(),
                    test_share: 0.24,
                    base_share: 0.0,
                }],
            },
        );
        let line = why(&report);
        assert!(
            line.starts_with("Why it may not pay here: training left cold what held-out work"),
            "{line}"
        );
        assert!(
            line.contains("; whose code a counted run of `holdout` ran in cannot be told"),
            "{line}"
        );
    }

    #[test]
    fn c_cpp_in_the_program_is_named_with_cross_language_pgo_until_it_is_on() {
        use Language::*;
        let base = counts(
            5_000,
            95_000,
            10_000,
            &[
                ("mix_checksum", CCpp, 94_000),
                ("checksum::main", Rust, 4_000),
            ],
        );
        let under = counts(
            5_000,
            95_000,
            10_000,
            &[
                ("mix_checksum", CCpp, 94_000),
                ("checksum::main", Rust, 4_000),
            ],
        );
        let mut report = report(base, under);
        assert_eq!(
            why(&report),
            "Why it may not pay here: 86.4% of the instructions of a counted run of `holdout` are \
             C/C++ compiled into the program (`mix_checksum` first), which Rust-only PGO leaves \
             as it was (its Rust code ran 1.00× the instructions under optimized): \
             `--cross-language` profiles them too, with the C/C++ built by the clang of rustc's \
             LLVM in place of your compiler (`pgo-build explore` measures that switch alone \
             beside it)"
        );
        // With held-out work training left cold, cross-language PGO comes after training
        // covers it: profiled from training that misses it, the C is laid out for other work.
        report.overlap.insert(
            "checksum".into(),
            crate::report::OverlapRecord {
                edge_overlap: 0.9,
                min_overlap: None,
                missed_by_training: vec![crate::report::Missed {
                    name: "deflate_compress_fastest".into(),
                    krate: "(no crate)".into(),
                    test_share: 0.24,
                    base_share: 0.0,
                }],
            },
        );
        let line = why(&report);
        assert!(
            line.starts_with(
                "Why it may not pay here: training left cold what held-out work runs most: \
                 `deflate_compress_fastest` (no crate) is 24% of `checksum`'s held-out counts"
            ),
            "{line}"
        );
        assert!(
            line.ends_with(
                "measures that switch alone beside it), once training runs what the held-out work \
                 runs: profiled from training that misses it, the C is laid out for other work too"
            ),
            "{line}"
        );
        report.overlap.clear();
        // Cross-language PGO already on: not offered again; the next cause is said instead.
        report
            .c_compilers
            .insert(Stage::Optimized, crate::report::CCompilerRecord::default());
        assert!(
            why(&report).starts_with("To see why: `pgo-build profile overlap`"),
            "{}",
            why(&report)
        );
    }

    #[test]
    fn work_mostly_outside_the_program_is_said_and_a_small_share_is_not() {
        use Language::*;
        let base = counts(20_000, 0, 80_000, &[("tool::main", Rust, 19_000)]);
        let mut report = report(base.clone(), base);
        assert!(
            why(&report).starts_with(
                "Why it may not pay here: 80.0% of the instructions of a counted run of `holdout` \
                 are outside the program"
            ),
            "{}",
            why(&report)
        );
        let inside = counts(60_000, 0, 40_000, &[("tool::main", Rust, 59_000)]);
        report.compare.as_mut().unwrap().workloads[0].code = [
            ("baseline".to_owned(), inside.clone()),
            ("optimized".to_owned(), inside),
        ]
        .into();
        assert!(why(&report).starts_with("To see why"), "{}", why(&report));
        // A rise under 1% is noise in the code's layout, not a loss to name.
        let mut risen = counts(60_500, 0, 40_000, &[("tool::main", Rust, 59_500)]);
        report.compare.as_mut().unwrap().workloads[0]
            .code
            .insert("optimized".into(), risen.clone());
        assert!(why(&report).starts_with("To see why"), "{}", why(&report));
        risen.rust = 61_000;
        risen.functions[0].instructions = 60_000;
        report.compare.as_mut().unwrap().workloads[0]
            .code
            .insert("optimized".into(), risen);
        assert!(
            why(&report).starts_with("Why it did not pay here: the program's own code ran 1.02×"),
            "{}",
            why(&report)
        );
    }
}
