//! The documentation holds together: every page of the book is in its table of contents,
//! every relative link of the book, the README and ARCHITECTURE.md leads to a file (and a
//! heading) that exists, every `PGO_BUILD_*` variable the source names is documented, and
//! every figure quoted from a bench names the result file it came from and its date, and is a
//! value that file holds (as written, as a percentage or a change, or inverted), and no page
//! repeats a claim the code has made false. (`mdbook build docs` in `.ci/run` renders the
//! book; this checks what mdbook does not.)

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn files_under(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_under(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

/// The text outside fenced code blocks and inline code spans: links in code are not links.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            out.push('\n');
            continue;
        }
        if fenced {
            out.push('\n');
            continue;
        }
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
            } else if !in_code {
                out.push(c);
            }
        }
        out.push('\n');
    }
    out
}

/// Every `[text](target)` target of the prose.
fn link_targets(text: &str) -> Vec<String> {
    let prose = prose(text);
    let mut targets = Vec::new();
    let mut rest = prose.as_str();
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        if let Some(end) = rest.find(')') {
            targets.push(rest[..end].trim().to_owned());
        }
    }
    targets
}

/// mdbook's id of a heading: lower-case, letters, digits, `-` and `_` kept, spaces as `-`.
fn heading_id(heading: &str) -> String {
    heading
        .replace('`', "")
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_ascii_lowercase())
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

fn heading_ids(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut ids = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if !fenced && line.starts_with('#') {
            ids.insert(heading_id(line.trim_start_matches('#').trim()));
        }
    }
    ids
}

/// What a book page shows: its text with `{{#include}}`d files inlined.
fn rendered(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        match line
            .trim()
            .strip_prefix("{{#include ")
            .and_then(|l| l.strip_suffix("}}"))
        {
            Some(included) => {
                out += &std::fs::read_to_string(path.parent().unwrap().join(included))
                    .unwrap_or_else(|err| {
                        panic!("{}: {{{{#include {included}}}}}: {err}", path.display())
                    })
            }
            None => out += line,
        }
        out.push('\n');
    }
    out
}

#[test]
fn every_relative_link_leads_to_a_file_and_heading_that_exist() {
    let root = repo();
    let mut pages = Vec::new();
    files_under(&root.join("docs/src"), "md", &mut pages);
    pages.push(root.join("README.md"));
    pages.push(root.join("ARCHITECTURE.md"));
    let mut broken = Vec::new();
    for page in &pages {
        let text = rendered(page);
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") || target.is_empty() {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor)),
                None => (target.as_str(), None),
            };
            let resolved = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(file)
            };
            if !resolved.exists() {
                broken.push(format!("{}: {target}: no such file", page.display()));
                continue;
            }
            if let Some(anchor) = anchor
                && resolved.extension().is_some_and(|e| e == "md")
                && !heading_ids(&rendered(&resolved)).contains(anchor)
            {
                broken.push(format!("{}: {target}: no such heading", page.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_page_of_the_book_is_in_its_table_of_contents() {
    let src = repo().join("docs/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<PathBuf> = link_targets(&summary)
        .into_iter()
        .map(|t| src.join(t))
        .collect();
    let mut pages = Vec::new();
    files_under(&src, "md", &mut pages);
    let missing: Vec<String> = pages
        .iter()
        .filter(|p| !p.ends_with("SUMMARY.md") && !listed.contains(*p))
        .map(|p| p.display().to_string())
        .collect();
    assert!(missing.is_empty(), "not in SUMMARY.md: {missing:?}");
    for page in &listed {
        assert!(
            page.exists(),
            "SUMMARY.md lists {} which does not exist",
            page.display()
        );
    }
}

#[test]
fn every_pgo_build_variable_of_the_source_is_documented() {
    let root = repo();
    let page = std::fs::read_to_string(root.join("docs/src/reference/environment.md")).unwrap();
    let mut sources = Vec::new();
    files_under(&root.join("crates"), "rs", &mut sources);
    let mut names = BTreeSet::new();
    for source in &sources {
        let text = std::fs::read_to_string(source).unwrap();
        // String literals that are a whole variable name.
        for (at, _) in text.match_indices("\"PGO_BUILD_") {
            let rest = &text[at + 1..];
            let end = rest
                .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                .unwrap_or(rest.len());
            if rest[end..].starts_with('"') && !rest[..end].ends_with('_') {
                names.insert(rest[..end].to_owned());
            }
        }
    }
    // One row covers every binary's variable; the tests' own examples of it are not others.
    let undocumented: Vec<&String> = names
        .iter()
        .filter(|n| n.as_str() == "PGO_BUILD_BIN_DIR" || !n.starts_with("PGO_BUILD_BIN_"))
        .filter(|n| !page.contains(&format!("`{n}`")))
        .collect();
    assert!(
        undocumented.is_empty(),
        "not in docs/src/reference/environment.md: {undocumented:?}"
    );
    assert!(
        names.len() > 20,
        "found only {names:?}: is the scan broken?"
    );
}

/// A measured figure: a decimal (`0.758`, `1.043×`, `−4.3%`), a number with a unit sign
/// (`27%`, `2×`), or a number followed by a unit word (`388 s`, `1.23 GiB`). Versions
/// (`14.1.1`), dates, counts and names (`p99`, `x86_64`) are not figures.
fn is_figure(token: &str, next: Option<&str>) -> bool {
    let token = token.trim_start_matches(['+', '-', '−', '~', '≈']);
    let number = token.trim_end_matches(['%', '×']);
    let unit_sign = number.len() < token.len();
    let digits_and_dots = !number.is_empty()
        && number.chars().all(|c| c.is_ascii_digit() || c == '.')
        && number.starts_with(|c: char| c.is_ascii_digit())
        && number.ends_with(|c: char| c.is_ascii_digit());
    if !digits_and_dots {
        return false;
    }
    let unit_word = next
        .map(|n| n.trim_end_matches(['.', ',', ';', ')']))
        .is_some_and(|n| {
            ["s", "ms", "min", "seconds", "minutes", "KiB", "MiB", "GiB"].contains(&n)
        });
    match number.matches('.').count() {
        0 => unit_sign || unit_word,
        1 => true,
        _ => false,
    }
}

/// The paragraphs and table rows of a page's prose, each as one string.
fn blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current = String::new();
    for line in prose(text).lines() {
        let row = line.trim_start().starts_with('|');
        if line.trim().is_empty() || row {
            if !current.trim().is_empty() {
                blocks.push(std::mem::take(&mut current));
            }
            current.clear();
            if row {
                blocks.push(line.to_owned());
            }
        } else {
            current.push_str(line);
            current.push('\n');
        }
    }
    if !current.trim().is_empty() {
        blocks.push(current);
    }
    blocks
}

/// The names after `prefix` in `text` (`bench/aa-busy` → `aa-busy`).
fn names_after<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    text.match_indices(prefix)
        .map(|(at, _)| {
            let rest = &text[at + prefix.len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'))
                .unwrap_or(rest.len());
            rest[..end].trim_end_matches('.')
        })
        .collect()
}

#[test]
fn every_figure_quoted_from_a_bench_names_its_kept_result_and_date() {
    let repo = repo();
    let mut pages = vec![repo.join("README.md")];
    files_under(&repo.join("docs/src"), "md", &mut pages);
    let mut problems = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        // Inline code is where bench names are written: read the raw lines, fenced code out.
        let mut fenced = false;
        let raw: String = text
            .lines()
            .filter(|line| {
                if line.trim_start().starts_with("```") {
                    fenced = !fenced;
                    return false;
                }
                !fenced
            })
            .collect::<Vec<_>>()
            .join("\n");
        for block in blocks(&raw.replace('`', "")) {
            let benches: Vec<&str> = names_after(&block, "bench/")
                .into_iter()
                .filter(|name| !["results", "lib", ""].contains(name))
                .chain(block.contains("scripts/example").then_some("example"))
                .collect();
            let tokens: Vec<&str> = block
                .split(|c: char| c.is_whitespace() || "(),;:|*[]".contains(c))
                .map(|t| t.trim_end_matches(['.', ',']))
                .filter(|t| !t.is_empty())
                .collect();
            // A version after the tool's name ("rustc 1.59") is not a figure either.
            let version =
                |i: usize| i > 0 && ["rustc", "Rust", "LLVM", "version"].contains(&tokens[i - 1]);
            let figures: Vec<&str> = tokens
                .iter()
                .enumerate()
                .filter(|(i, t)| is_figure(t, tokens.get(i + 1).copied()) && !version(*i))
                .map(|(_, t)| *t)
                .collect();
            if benches.is_empty() || figures.is_empty() {
                continue;
            }
            let where_ = format!(
                "{}: {:.100}…",
                page.strip_prefix(&repo).unwrap_or(page).display(),
                block.trim()
            );
            let mut dated = false;
            let mut results = 0;
            for name in names_after(&block, "bench/results/") {
                let name = name.trim_end_matches(".json");
                let path = repo.join(format!("bench/results/{name}.json"));
                let Ok(text) = std::fs::read_to_string(&path) else {
                    problems.push(format!(
                        "{where_} names {}, which is not kept",
                        path.display()
                    ));
                    continue;
                };
                results += 1;
                if let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) {
                    let mut held = Vec::new();
                    numbers_in(&json, &mut held);
                    for figure in &figures {
                        if !holds(&held, figure) {
                            problems.push(format!(
                                "{where_} quotes {figure}, which {} does not hold (as written, \
                                 as a percentage or change, or inverted)",
                                path.display()
                            ));
                        }
                    }
                }
                // Results kept over several runs say these per entry.
                let has = |key: &str| text.contains(&format!("\"{key}\": "));
                if !(has("date") && has("commit") && has("machine")) {
                    problems.push(format!(
                        "{} lacks a date, commit or machine",
                        path.display()
                    ));
                }
                // Any of the dates of a result kept over several runs will do.
                let dates = text
                    .match_indices("\"date\": \"")
                    .map(|(at, m)| &text[at + m.len()..][..10]);
                dated |= dates.into_iter().any(|date| block.contains(date));
            }
            if results == 0 {
                problems.push(format!(
                    "{where_} quotes {} from {} with no kept result (bench/results/<name>.json)",
                    figures.join(" "),
                    benches.join(", ")
                ));
            } else if !dated {
                problems.push(format!(
                    "{where_} does not say when its result was measured (the result file's date)"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Every number of a result file.
fn numbers_in(value: &serde_json::Value, out: &mut Vec<f64>) {
    match value {
        serde_json::Value::Number(n) => out.extend(n.as_f64()),
        serde_json::Value::Array(items) => items.iter().for_each(|v| numbers_in(v, out)),
        serde_json::Value::Object(map) => map.values().for_each(|v| numbers_in(v, out)),
        _ => {}
    }
}

/// Whether a quoted figure (`1.043×`, `−7.9%`, `388 s`, `0.758`) is one of `held` as written
/// at its precision: the number itself, or as a percentage (`0.213` → `21.3%`), a change
/// (`0.921` → `-7.9%`, `1.043` → `+4.3%`), or inverted (`0.8` → `1.25×` faster).
fn holds(held: &[f64], figure: &str) -> bool {
    let number = figure
        .trim_start_matches(['+', '-', '−', '~', '≈'])
        .trim_end_matches(['%', '×']);
    let Ok(value) = number.parse::<f64>() else {
        return true;
    };
    let decimals = number.split_once('.').map_or(0, |(_, d)| d.len()) as i32;
    let scale = 10f64.powi(decimals);
    // Rounded either way at the quoted precision (a bound may be rounded outward).
    let matches = |x: f64| {
        x.is_finite()
            && [(x * scale).round(), (x * scale).floor(), (x * scale).ceil()]
                .iter()
                .any(|r| (r / scale - value).abs() < 0.5 / scale / 10.0)
    };
    held.iter().any(|&x| {
        // The figure's sign is read as words ("−0.35 to +0.33 ms"), so a held value's
        // magnitude is what it must match.
        [
            x.abs(),
            x.abs() * 100.0,
            (x - 1.0).abs() * 100.0,
            if x != 0.0 { 1.0 / x } else { f64::NAN },
            if x != 0.0 {
                (1.0 / x - 1.0).abs() * 100.0
            } else {
                f64::NAN
            },
        ]
        .into_iter()
        .any(matches)
    })
}

#[test]
fn a_quoted_figure_must_be_a_value_its_result_file_holds() {
    let held = [0.92095, 1.0432, 388.2, 0.8, 0.213, -0.3454];
    for figure in [
        "−7.9%", "1.043×", "+4.3%", "388 ", "1.25×", "21.3%", "0.921", "−0.35",
    ] {
        assert!(holds(&held, figure.trim()), "{figure}");
    }
    for figure in ["−8.2%", "1.06×", "21.7%", "0.97"] {
        assert!(!holds(&held, figure), "{figure}");
    }
}

/// Claims the code has made false, each with what is true now. A page that repeats one
/// contradicts the code.
const CONTRADICTED: [(&str, &str); 8] = [
    (
        "ABBA",
        "rounds run in a random order drawn afresh each round",
    ),
    (
        "in alternating order",
        "rounds run in a random order drawn afresh each round",
    ),
    (
        "bootstrap interval",
        "the interval is the paired test inverted",
    ),
    (
        "each at 2.5%",
        "the two paired tests are combined into one exact test",
    ),
    ("rounds = 10", "the default rounds are auto"),
    ("(default 10)", "the default rounds are auto"),
    ("Seed of the bootstrap", "the seed draws the rounds' order"),
    (
        "twice the cores",
        "cargo gets twice the cores' job slots only when memory could wait",
    ),
];

#[test]
fn no_page_repeats_a_claim_the_code_made_false() {
    let repo = repo();
    let mut pages = vec![repo.join("README.md"), repo.join("ARCHITECTURE.md")];
    files_under(&repo.join("docs/src"), "md", &mut pages);
    let mut problems = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for (claim, truth) in CONTRADICTED {
            if text.contains(claim) {
                problems.push(format!(
                    "{} says {claim:?}, but {truth}",
                    page.strip_prefix(&repo).unwrap_or(page).display()
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn figures_are_told_from_versions_counts_and_names() {
    let figures = |text: &str| {
        let tokens: Vec<&str> = text.split_whitespace().collect();
        tokens
            .iter()
            .enumerate()
            .filter(|(i, t)| is_figure(t, tokens.get(i + 1).copied()))
            .map(|(_, t)| t.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        figures(
            "ripgrep 14.1.1 on 2 cores: 0.758 of it, −4.3% faults, 27% less, 388 s, 1.2× p99 x86_64 2026-12-03"
        ),
        ["0.758", "−4.3%", "27%", "388", "1.2×"]
    );
}
