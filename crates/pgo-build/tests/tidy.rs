//! The layering ARCHITECTURE.md describes, checked on the sources: no import circles (between
//! files, a folder's `mod.rs` and its children included, and between top-level modules), no
//! step of the pipeline reaching another step, or a step's internals from outside it, no
//! pipeline module but the dispatcher reading the command line (`cli`), no source file over
//! 800 lines, every module opening with a `//!` comment, and no
//! `println!`-style macro outside `util::printer` (they panic on a closed pipe).
//!
//! An edge is every `crate::`, `super::` or `self::` path in a file's code (its test module,
//! comments and string literals left out), resolved to the deepest module it names, and a
//! folder module's bare use of its own child (`records::X` in `report/mod.rs`). A `mod x;`
//! declaration is not an edge.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The steps of the pipeline: every module of `crates/pgo-build/src/pipeline/steps/` (a file
/// or a folder), read from the folder so a new step is held to the rule at once. Each may use
/// the shared pipeline modules, never another step.
fn steps() -> BTreeSet<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/pipeline/steps");
    std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("{}: {err}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter_map(|path| {
            let name = path.file_stem()?.to_str()?.to_owned();
            let module = path.is_dir() || path.extension().is_some_and(|e| e == "rs");
            (module && name != "mod").then_some(name)
        })
        .collect()
}

/// What ties steps together (besides the dispatcher, `pipeline/mod.rs`): these may call a
/// step's entry points (its root module), never its submodules.
const TIES: [&str; 3] = ["run", "gate", "explore"];

const MAX_LINES: usize = 800;

type Module = Vec<String>;

struct Source {
    path: PathBuf,
    /// The whole file.
    text: String,
    /// The code without its test module, comments and string literals.
    code: String,
}

fn name(module: &Module) -> String {
    if module.is_empty() {
        "crate".to_owned()
    } else {
        module.join("::")
    }
}

/// Every `.rs` file below `src`, by module path.
fn sources(src: &Path) -> BTreeMap<Module, Source> {
    let mut files = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).unwrap().with_extension("");
            let mut module: Module = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                module.last().map(String::as_str),
                Some("mod" | "main" | "lib")
            ) {
                module.pop();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = code_of(&text);
            files.insert(module, Source { path, text, code });
        }
    }
    files
}

/// `text` without its `#[cfg(test)] mod tests { … }` (last in a file, by this project's
/// convention), comments, and the contents of string and char literals.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').unwrap_or(rest.len());
            i += end;
        } else if rest.starts_with("/*") {
            i += rest.find("*/").map_or(rest.len(), |end| end + 2);
        } else if let Some(hashes) = raw_string_start(rest) {
            let close = format!("\"{}", "#".repeat(hashes));
            let body = 2 + hashes;
            i += rest[body..]
                .find(&close)
                .map_or(rest.len(), |end| body + end + close.len());
            out.push_str("\"\"");
        } else if bytes[i] == b'"' {
            let mut j = i + 1;
            while j < bytes.len() && bytes[j] != b'"' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            i = j + 1;
            out.push_str("\"\"");
        } else if let Some(len) = char_literal(rest) {
            i += len;
            out.push_str("' '");
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// `r"`, `r#"`, … at the start of `text` (not inside an identifier): the number of `#`.
fn raw_string_start(text: &str) -> Option<usize> {
    let after = text.strip_prefix('r')?;
    let hashes = after.len() - after.trim_start_matches('#').len();
    after[hashes..].starts_with('"').then_some(hashes)
}

/// The length of a char literal at the start of `text` (`'a'`, `'\n'`, `'{'`), not a lifetime.
fn char_literal(text: &str) -> Option<usize> {
    let mut chars = text.char_indices();
    if chars.next()?.1 != '\'' {
        return None;
    }
    let (_, first) = chars.next()?;
    if first == '\\' {
        let close = text[2..].find('\'')?;
        return Some(close + 3);
    }
    let (at, second) = chars.next()?;
    (second == '\'').then_some(at + 1)
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths in `code` that start with `prefix::` (`crate`, `super`, `self`, or a child
/// module's name), as their segments after it, grouped imports (`x::{a, b::c}`) expanded.
fn paths_after(code: &str, prefix: &str) -> Vec<Vec<String>> {
    let needle = format!("{prefix}::");
    let mut paths = Vec::new();
    let mut from = 0;
    while let Some(found) = code[from..].find(&needle) {
        let start = from + found;
        from = start + needle.len();
        let before = code[..start].chars().next_back();
        // `pub(in crate::x)` is a visibility, not a use.
        if before.is_some_and(|c| is_ident(c) || c == ':') || code[..start].ends_with("(in ") {
            continue;
        }
        collect_path(&code[from..], Vec::new(), &mut paths);
    }
    paths
}

/// The path at the start of `rest` (segments, or a `{…}` group), appended to `base`.
fn collect_path(rest: &str, base: Vec<String>, out: &mut Vec<Vec<String>>) {
    if let Some(group) = rest.strip_prefix('{') {
        let mut depth = 0;
        let mut end = group.len();
        for (at, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    end = at;
                    break;
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
        let inner = &group[..end];
        let mut depth = 0;
        let mut item_start = 0;
        for (at, c) in inner.char_indices().chain([(inner.len(), ',')]) {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    collect_path(inner[item_start..at].trim(), base.clone(), out);
                    item_start = at + 1;
                }
                _ => {}
            }
        }
        return;
    }
    let mut segments = base;
    let mut rest = rest;
    loop {
        let len = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        if len == 0 {
            break;
        }
        segments.push(rest[..len].to_owned());
        rest = &rest[len..];
        match rest.strip_prefix("::") {
            Some(next) if next.starts_with('{') => {
                collect_path(next, segments, out);
                return;
            }
            Some(next) => rest = next,
            None => break,
        }
    }
    if !segments.is_empty() {
        out.push(segments);
    }
}

/// The deepest module of `files` that `base` + `segments` names.
fn resolve(files: &BTreeMap<Module, Source>, base: &[String], segments: &[String]) -> Module {
    for take in (0..=segments.len()).rev() {
        let mut module: Module = base.to_vec();
        module.extend(segments[..take].iter().cloned());
        if files.contains_key(&module) {
            return module;
        }
    }
    base.to_vec()
}

/// The child modules a file declares (`mod x;`, `pub mod x;`, `pub(crate) mod x;`).
fn declared_children(code: &str) -> Vec<String> {
    let mut children = Vec::new();
    for line in code.lines() {
        let line = line.trim_start();
        let line = line
            .strip_prefix("pub ")
            .or_else(|| line.split_once(") ").map(|(_, rest)| rest))
            .filter(|_| line.starts_with("pub"))
            .unwrap_or(line);
        if let Some(name) = line.strip_prefix("mod ")
            && let Some(name) = name.strip_suffix(';')
        {
            children.push(name.trim().to_owned());
        }
    }
    children
}

/// Module → the modules its code names.
fn edges(files: &BTreeMap<Module, Source>) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut edges = BTreeMap::new();
    for (module, source) in files {
        let parent: Module = module[..module.len().saturating_sub(1)].to_vec();
        let mut targets = BTreeSet::new();
        for (prefix, base) in [
            ("crate", Vec::new()),
            ("super", parent),
            ("self", module.clone()),
        ] {
            for segments in paths_after(&source.code, prefix) {
                targets.insert(resolve(files, &base, &segments));
            }
        }
        for child in declared_children(&source.code) {
            let mut child_module = module.clone();
            child_module.push(child.clone());
            let used = !paths_after(&source.code, &child).is_empty()
                || source.code.contains(&format!("use {child};"));
            if used && files.contains_key(&child_module) {
                targets.insert(child_module);
            }
        }
        targets.remove(module);
        targets.retain(|t| files.contains_key(t));
        edges.insert(module.clone(), targets);
    }
    edges
}

/// Strongly connected components of more than one node (Tarjan).
fn circles<N: Ord + Clone>(graph: &BTreeMap<N, BTreeSet<N>>) -> Vec<Vec<N>> {
    struct Walk<'a, N> {
        graph: &'a BTreeMap<N, BTreeSet<N>>,
        index: BTreeMap<N, usize>,
        low: BTreeMap<N, usize>,
        stack: Vec<N>,
        on_stack: BTreeSet<N>,
        found: Vec<Vec<N>>,
    }
    fn visit<N: Ord + Clone>(walk: &mut Walk<N>, node: &N) {
        let at = walk.index.len();
        walk.index.insert(node.clone(), at);
        walk.low.insert(node.clone(), at);
        walk.stack.push(node.clone());
        walk.on_stack.insert(node.clone());
        for next in walk.graph.get(node).into_iter().flatten() {
            if !walk.index.contains_key(next) {
                visit(walk, next);
                let low = walk.low[node].min(walk.low[next]);
                walk.low.insert(node.clone(), low);
            } else if walk.on_stack.contains(next) {
                let low = walk.low[node].min(walk.index[next]);
                walk.low.insert(node.clone(), low);
            }
        }
        if walk.low[node] == walk.index[node] {
            let mut component = Vec::new();
            loop {
                let member = walk.stack.pop().unwrap();
                walk.on_stack.remove(&member);
                let done = &member == node;
                component.push(member);
                if done {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                walk.found.push(component);
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !walk.index.contains_key(node) {
            visit(&mut walk, node);
        }
    }
    walk.found
}

fn describe_circle(component: &[Module], edges: &BTreeMap<Module, BTreeSet<Module>>) -> String {
    let mut lines = vec![format!(
        "import circle: {}",
        component.iter().map(name).collect::<Vec<_>>().join(", ")
    )];
    for from in component {
        for to in &edges[from] {
            if component.contains(to) {
                lines.push(format!("    {} -> {}", name(from), name(to)));
            }
        }
    }
    lines.join("\n")
}

/// The dispatcher, `run`, `gate` and `explore` (with their submodules).
fn ties_steps(module: &Module) -> bool {
    match module.as_slice() {
        [pipeline] => pipeline == "pipeline",
        [pipeline, tie, ..] => pipeline == "pipeline" && TIES.contains(&tie.as_str()),
        _ => false,
    }
}

/// The problems of the tree at `src`, one text each.
fn problems(src: &Path) -> Vec<String> {
    let files = sources(src);
    let edges = edges(&files);
    let mut problems = Vec::new();
    for component in circles(&edges) {
        problems.push(describe_circle(&component, &edges));
    }
    let mut top: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, targets) in &edges {
        let unit = |m: &Module| m.first().cloned().unwrap_or_else(|| "crate".to_owned());
        let entry = top.entry(unit(from)).or_default();
        entry.extend(targets.iter().map(unit).filter(|t| *t != unit(from)));
    }
    for component in circles(&top) {
        let mut lines = vec![format!("top-level import circle: {}", component.join(", "))];
        for from in &component {
            for (module, targets) in &edges {
                if module.first() != Some(from) {
                    continue;
                }
                for to in targets {
                    if to
                        .first()
                        .is_some_and(|t| t != from && component.contains(t))
                    {
                        lines.push(format!("    {} -> {}", name(module), name(to)));
                    }
                }
            }
        }
        problems.push(lines.join("\n"));
    }
    // The command line reaches the pipeline through the dispatcher alone, as typed requests.
    for (from, targets) in &edges {
        if from.len() > 1
            && from[0] == "pipeline"
            && let Some(to) = targets
                .iter()
                .find(|t| t.first().is_some_and(|t| t == "cli"))
        {
            problems.push(format!(
                "{} uses {}: only the dispatcher (pipeline/mod.rs) reads the command line; \
                 steps take their typed request (pipeline/requests.rs)",
                name(from),
                name(to)
            ));
        }
    }
    let steps = steps();
    assert!(
        ["compare", "train", "optimize"]
            .iter()
            .all(|step| steps.contains(*step)),
        "the steps read from pipeline/steps/ miss a step: {steps:?}"
    );
    let step_of = |m: &Module| -> Option<String> {
        (m.len() >= 3 && m[0] == "pipeline" && m[1] == "steps" && steps.contains(&m[2]))
            .then(|| m[2].clone())
    };
    for (from, targets) in &edges {
        for to in targets {
            let Some(step) = step_of(to) else { continue };
            match step_of(from) {
                Some(own) if own == step => {}
                Some(_) => problems.push(format!(
                    "the step {} uses the step {}: steps share code through the shared \
                     pipeline modules, and only run, gate and explore tie steps together",
                    name(from),
                    name(to)
                )),
                None if to.len() > 3 && ties_steps(from) => problems.push(format!(
                    "{} reaches into the step's internals ({}): call its entry points \
                         (pipeline::steps::{step})",
                    name(from),
                    name(to)
                )),
                None if !ties_steps(from) => problems.push(format!(
                    "{} uses the step {}: only run, gate and explore tie steps together",
                    name(from),
                    name(to)
                )),
                None => {}
            }
        }
    }
    for (module, source) in &files {
        let lines = source.code.lines().count();
        if lines > MAX_LINES {
            problems.push(format!(
                "{} has {lines} lines besides its tests (at most {MAX_LINES}): split it where \
                 it divides",
                source.path.display()
            ));
        }
        // `code` has its string literals emptied: a probe program's `println!` is text.
        for print in ["println!", "eprintln!", "print!", "eprint!"] {
            let used = source
                .code
                .match_indices(print)
                .any(|(at, _)| !source.code[..at].ends_with(|c: char| is_ident(c)));
            if used && module != &["util".to_owned(), "printer".to_owned()] {
                problems.push(format!(
                    "{} uses `{print}`, which panics on a closed pipe (`| head -1`): write \
                     through util::printer (`Printer`, `stderr_line`, `stdout_data`)",
                    source.path.display()
                ));
            }
        }
        if !source.text.starts_with("//!") {
            problems.push(format!(
                "{} ({}) does not open with a `//!` comment saying what it owns",
                source.path.display(),
                name(module)
            ));
        }
    }
    problems
}

#[test]
fn the_layering_holds() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let problems = problems(&src);
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
}

/// pgo-build-rt runs inside the user's programs: a closed stderr must not panic them either.
#[test]
fn the_runtime_crate_prints_nothing_with_macros_that_panic() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../pgo-build-rt/src");
    let mut found = Vec::new();
    for (module, source) in sources(&src) {
        for print in ["println!", "eprintln!", "print!", "eprint!"] {
            if source
                .code
                .match_indices(print)
                .any(|(at, _)| !source.code[..at].ends_with(is_ident))
            {
                found.push(format!("{} uses `{print}`", name(&module)));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn test_files_stay_under_the_line_limit() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut dirs = vec![tests];
    let mut long = Vec::new();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() && path.file_name().is_some_and(|n| n != "fixtures") {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let lines = std::fs::read_to_string(&path).unwrap().lines().count();
                if lines > MAX_LINES {
                    long.push(format!("{} has {lines} lines", path.display()));
                }
            }
        }
    }
    assert!(long.is_empty(), "{}", long.join("\n"));
}

/// The checks themselves, on small trees written here (`tidy/checks.rs`): each kind of
/// problem is found.
#[path = "tidy/checks.rs"]
mod checks;

/// ARCHITECTURE.md's codemap and the source files' names (`tidy/codemap.rs`).
#[path = "tidy/codemap.rs"]
mod codemap;

/// A function longer than this is split along its seams.
const MAX_FUNCTION_LINES: usize = 120;

/// The functions that were longer when the rule came, with their length then: a listed
/// function may not grow, and one that fits the limit leaves the list, so it only shrinks.
const LONG_FUNCTIONS: &[(&str, &str, usize)] = &[];

/// Every function with a body in `text`, with its length in lines (rustfmt's layout: the body
/// ends at the first `}` alone at the indentation of the line that says `fn`).
fn functions(text: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let mut rest = trimmed;
        if let Some(after) = rest.strip_prefix("pub") {
            rest = match after.strip_prefix('(') {
                Some(scoped) => scoped.split_once(") ").map_or("", |(_, r)| r),
                None => after.trim_start(),
            };
        }
        for qualifier in ["const ", "async ", "unsafe "] {
            rest = rest.strip_prefix(qualifier).unwrap_or(rest);
        }
        let Some(signature) = rest.strip_prefix("fn ") else {
            continue;
        };
        let name: String = signature.chars().take_while(|c| is_ident(*c)).collect();
        // A declaration without a body (in a trait) ends with `;` before any `{`.
        let opens = lines[start..]
            .iter()
            .find(|l| l.trim_end().ends_with('{') || l.trim_end().ends_with(';'));
        if opens.is_none_or(|l| l.trim_end().ends_with(';')) {
            continue;
        }
        let end = lines[start + 1..]
            .iter()
            .position(|l| l.strip_prefix(indent) == Some("}"))
            .map_or(lines.len(), |at| start + 1 + at);
        found.push((name, end - start + 1));
    }
    found
}

#[test]
fn functions_stay_short_and_the_long_ones_only_shrink() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for source in sources(&src).values() {
        let file = source.path.strip_prefix(&src).unwrap().to_string_lossy();
        for (name, lines) in functions(&source.text) {
            if lines <= MAX_FUNCTION_LINES {
                continue;
            }
            match LONG_FUNCTIONS
                .iter()
                .find(|(f, n, _)| *f == file && *n == name)
            {
                Some((_, _, was)) if lines > *was => {
                    seen.insert((file.to_string(), name.clone()));
                    problems.push(format!(
                        "{file}: `{name}` grew to {lines} lines (it was {was}, the limit is \
                         {MAX_FUNCTION_LINES}): split it, don't grow it"
                    ));
                }
                Some(_) => {
                    seen.insert((file.to_string(), name));
                }
                None => problems.push(format!(
                    "{file}: `{name}` is {lines} lines, over the limit of {MAX_FUNCTION_LINES}: \
                     split it along its seams"
                )),
            }
        }
    }
    for (file, name, _) in LONG_FUNCTIONS {
        if !seen.contains(&(file.to_string(), name.to_string())) {
            problems.push(format!(
                "{file}: `{name}` is within the limit now (or gone): take it off LONG_FUNCTIONS"
            ));
        }
    }
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n"));
}

#[test]
fn function_lengths_are_read_as_rustfmt_lays_them_out() {
    let text = "fn a() {\n    x();\n}\n\ntrait T {\n    fn declared(&self);\n    fn b(&self) {\n        if y {\n        }\n    }\n}\npub(crate) fn c(\n    z: u8,\n) -> u8 {\n    z\n}\n";
    assert_eq!(
        functions(text),
        [("a".into(), 3), ("b".into(), 4), ("c".into(), 5)]
    );
}
