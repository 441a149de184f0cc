//! Where a counted run's instructions went, from callgrind's per-function output: the
//! program's own Rust code, C/C++ compiled into the program, and everything outside it (shared
//! libraries, the loader, the shell, other programs). What the answer's "why" line names when
//! PGO does not pay: Rust-only PGO changes only the first, and a function of it that got
//! slower is where a loss is.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// The program's own functions kept per counted run, most instructions first.
pub const KEPT_FUNCTIONS: usize = 12;

/// One counted run of a workload (every process of it), split by whose code ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CodeCounts {
    /// Instructions in Rust functions of the program's own binaries (the workspace's build).
    pub rust: u64,
    /// In C or C++ functions compiled into them (a `-sys` crate's build script, `cc`).
    pub c_cpp: u64,
    /// Outside them: shared libraries, the dynamic loader, the shell, other programs.
    pub outside: u64,
    /// In functions of the program's own binaries whose symbols are stripped (callgrind names
    /// them by address): of no language it can tell.
    #[serde(default)]
    pub unnamed: u64,
    /// The program's own functions that ran the most instructions, most first.
    pub functions: Vec<FunctionInstructions>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FunctionInstructions {
    /// Demangled (Rust without its hash); C and C++ names as the symbol table has them.
    pub name: String,
    pub language: Language,
    /// Instructions run in the function itself (not in what it called).
    pub instructions: u64,
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Language {
    Rust,
    CCpp,
}

impl CodeCounts {
    /// Every instruction counted.
    pub fn total(&self) -> u64 {
        self.own() + self.outside
    }

    /// Instructions in the program's own code, named or not.
    pub fn own(&self) -> u64 {
        self.rust + self.c_cpp + self.unnamed
    }

    /// The kept function `name`'s instructions (0 when it was not among the kept).
    pub fn instructions_of(&self, name: &str) -> u64 {
        self.functions
            .iter()
            .find(|f| f.name == name)
            .map_or(0, |f| f.instructions)
    }
}

/// Every callgrind output file in `dir` (one per process), split by `own`: whether an object
/// (an executable or shared library, by path) is one of the program's binaries.
pub fn read_dir(dir: &Path, own: &dyn Fn(&str) -> bool) -> Result<CodeCounts> {
    let mut by_function: BTreeMap<(String, Language), u64> = BTreeMap::new();
    let mut counts = CodeCounts::default();
    // `own` may resolve paths: once per object.
    let mut owned: BTreeMap<String, bool> = BTreeMap::new();
    for entry in
        std::fs::read_dir(dir).with_context(|| format!("could not read {}", dir.display()))?
    {
        let path = entry?.path();
        let text = crate::util::files::read_to_string(&path)?;
        for (object, function, instructions) in self_costs(&text) {
            if !*owned.entry(object.clone()).or_insert_with(|| own(&object)) {
                counts.outside += instructions;
                continue;
            }
            let Some((name, language)) = classify(&function) else {
                counts.unnamed += instructions;
                continue;
            };
            match language {
                Language::Rust => counts.rust += instructions,
                Language::CCpp => counts.c_cpp += instructions,
            }
            *by_function.entry((name, language)).or_default() += instructions;
        }
    }
    let mut functions: Vec<FunctionInstructions> = by_function
        .into_iter()
        .map(|((name, language), instructions)| FunctionInstructions {
            name,
            language,
            instructions,
        })
        .collect();
    functions.sort_by(|a, b| {
        b.instructions
            .cmp(&a.instructions)
            .then(a.name.cmp(&b.name))
    });
    functions.truncate(KEPT_FUNCTIONS);
    counts.functions = functions;
    Ok(counts)
}

/// Per (object, function) of one callgrind output: the instructions run in the function
/// itself. Costs after a `calls=` line are the call's (inclusive) and are not the caller's.
/// Names may be compressed: `fn=(12) name` defines 12, a later `fn=(12)` refers to it;
/// objects (`ob=`, `cob=`) and functions (`fn=`, `cfn=`) number apart.
fn self_costs(text: &str) -> Vec<(String, String, u64)> {
    let mut objects: BTreeMap<String, String> = BTreeMap::new();
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    let mut positions = 1;
    let (mut object, mut function) = (String::new(), String::new());
    let mut costs: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut call_cost_next = false;
    // Cost lines follow the header's `events:` line; before it, `cmd:` may hold a workload's
    // script, whose lines may start with anything.
    let mut in_body = false;
    for line in text.lines() {
        if let Some(spec) = line.strip_prefix("positions:") {
            positions = spec.split_whitespace().count().max(1);
        } else if line.starts_with("events:") {
            in_body = true;
        } else if line.starts_with("part:") {
            // A later part's header (a dump) starts again.
            in_body = false;
        } else if !in_body {
            continue;
        } else if let Some(spec) = line.strip_prefix("ob=") {
            object = compressed(&mut objects, spec);
        } else if let Some(spec) = line.strip_prefix("cob=") {
            compressed(&mut objects, spec);
        } else if let Some(spec) = line.strip_prefix("fn=") {
            function = compressed(&mut names, spec);
        } else if let Some(spec) = line.strip_prefix("cfn=") {
            compressed(&mut names, spec);
        } else if line.starts_with("calls=") {
            call_cost_next = true;
        } else if line.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '+' | '-' | '*')) {
            if std::mem::take(&mut call_cost_next) {
                continue;
            }
            // Positions first, then the events: Ir is the first (and the only one counted).
            let instructions = line
                .split_whitespace()
                .nth(positions)
                .and_then(|ir| ir.parse::<u64>().ok())
                .unwrap_or(0);
            *costs.entry((object.clone(), function.clone())).or_default() += instructions;
        }
    }
    costs.into_iter().map(|((o, f), n)| (o, f, n)).collect()
}

/// The name a compressed `(id) name` or `(id)` stands for, remembering new ids.
fn compressed(known: &mut BTreeMap<String, String>, spec: &str) -> String {
    let spec = spec.trim();
    let Some(rest) = spec.strip_prefix('(') else {
        return spec.to_owned();
    };
    let Some((id, name)) = rest.split_once(')') else {
        return spec.to_owned();
    };
    let name = name.trim();
    if name.is_empty() {
        known.get(id).cloned().unwrap_or_else(|| format!("({id})"))
    } else {
        known.insert(id.to_owned(), name.to_owned());
        name.to_owned()
    }
}

/// A symbol's language by its mangling (callgrind runs with `--demangle=no`): Rust's legacy
/// (`_ZN…17h<16 hex>E`) and v0 (`_R…`) schemes, else C or C++; `None` for a stripped symbol
/// (an address, or `???`). Rust names come back demangled without their hash. LLVM's suffixes
/// (`.llvm.123` of a ThinLTO-promoted local, `.cold`) are dropped, so a function keeps its
/// name across builds; a legacy Rust name may hold dots of its own (`$LT$a..b..C$GT$`), so
/// its end is found by its lengths, not at the first dot.
fn classify(symbol: &str) -> Option<(String, Language)> {
    // Callgrind may append `'2` to a function seen again recursively.
    let symbol = symbol.split('\'').next().unwrap_or(symbol);
    let rust = legacy_rust(symbol).or_else(|| {
        let bare = symbol.split('.').next().unwrap_or(symbol);
        bare.starts_with("_R").then_some(bare)
    });
    if let Some(mangled) = rust
        && let Ok(demangled) = rustc_demangle::try_demangle(mangled)
    {
        // In the shape profiles' names have (`profiles::insight`), so the two compare.
        return Some((
            crate::util::names::legacy_shape(&format!("{demangled:#}")),
            Language::Rust,
        ));
    }
    let bare = symbol.split('.').next().unwrap_or(symbol);
    if bare.is_empty() || bare == "???" || bare.starts_with("0x") {
        return None;
    }
    Some((bare.to_owned(), Language::CCpp))
}

/// A legacy Rust symbol without what follows it (`_ZN` + length-prefixed parts + `E`, the last
/// part Rust's hash, `h` and 16 hex digits); `None` for anything else (C++ has no such hash).
fn legacy_rust(symbol: &str) -> Option<&str> {
    let rest = symbol.strip_prefix("_ZN")?;
    let (mut at, mut last) = (0, None);
    while !rest[at..].starts_with('E') {
        let digits = rest[at..].bytes().take_while(u8::is_ascii_digit).count();
        let len: usize = rest[at..at + digits].parse().ok()?;
        let end = (at + digits).checked_add(len)?;
        last = Some(rest.get(at + digits..end)?);
        at = end;
    }
    let hash = last?;
    let is_hash = hash.len() == 17
        && hash.starts_with('h')
        && hash.bytes().skip(1).all(|b| b.is_ascii_hexdigit());
    is_hash.then(|| &symbol[..3 + at + 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of a real callgrind output (3.19, `--demangle=no`, names compressed): a
    /// Rust main calling a C function and into libc, with a call's inclusive cost that must
    /// not count as the caller's.
    const OUTPUT: &str = "\
version: 1
creator: callgrind-3.19.0
pid: 4242
cmd:  /bin/sh -c /w/target/pgo-build/baseline/bin/app work
+5 is not a cost line of a script
part: 1

positions: line
events: Ir
summary: 1180
ob=(1) /usr/lib/x86_64-linux-gnu/libc.so.6
fl=(1) ???
fn=(1) memcpy
0 100
ob=(2) /w/target/pgo-build/baseline/bin/app
fl=(2) ???
fn=(2) _ZN3app4main17h0123456789abcdefE
0 500
cfn=(3) mix_checksum
calls=1 0
0 300
+2 20
cob=(1)
cfn=(1)
calls=2 0
0 100
fn=(3)
0 300
fn=(4) _ZN4core3fmt5write17hfedcba9876543210E'2
0 60
fn=(5) _ZNSt6vectorIiE9push_backEi
0 100
fn=(6) _ZN3app5parse17h0011223344556677E.llvm.4242
0 40
fn=(7) 0x000000000001a2b0
0 30
totals: 1250
";

    #[test]
    fn self_costs_are_split_into_own_rust_own_c_and_outside() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("callgrind.4242"), OUTPUT).unwrap();
        let counts = read_dir(dir.path(), &|object| object.starts_with("/w/")).unwrap();
        // main's own 500 + 20, fmt::write's 60, parse's 40 (its ThinLTO suffix dropped); not
        // the 300 or 100 its calls cost, nor the script's line before the header ends.
        assert_eq!(counts.rust, 620);
        assert_eq!(counts.c_cpp, 400);
        assert_eq!(counts.outside, 100);
        assert_eq!(counts.unnamed, 30);
        assert_eq!(counts.total(), 1150);
        let names: Vec<(&str, Language, u64)> = counts
            .functions
            .iter()
            .map(|f| (f.name.as_str(), f.language, f.instructions))
            .collect();
        assert_eq!(
            names,
            [
                ("app::main", Language::Rust, 520),
                ("mix_checksum", Language::CCpp, 300),
                ("_ZNSt6vectorIiE9push_backEi", Language::CCpp, 100),
                ("core::fmt::write", Language::Rust, 60),
                ("app::parse", Language::Rust, 40),
            ]
        );
        assert_eq!(counts.instructions_of("app::main"), 520);
        assert_eq!(counts.instructions_of("absent"), 0);
    }

    #[test]
    fn rust_is_told_from_c_and_cpp_by_its_mangling() {
        let language = |symbol: &str| classify(symbol).map(|(_, language)| language);
        assert_eq!(
            language("_RNvCs1234_3app4main"),
            Some(Language::Rust),
            "v0: Rust"
        );
        let name = |symbol: &str| classify(symbol).unwrap().0;
        assert_eq!(name("_ZN3app4main17h0123456789abcdefE"), "app::main");
        assert_eq!(name("_ZN3app4main17h0123456789abcdefE.cold"), "app::main");
        assert_eq!(
            language("_ZN3app4mainE"),
            Some(Language::CCpp),
            "no hash: C++"
        );
        assert_eq!(
            language("_ZN3app4main17hXYZ456789abcdefE"),
            Some(Language::CCpp)
        );
        assert_eq!(
            language("_ZN3app4main17hé23456789abcdefE"),
            Some(Language::CCpp)
        );
        assert_eq!(name("deflate_slow.llvm.77"), "deflate_slow");
        // A trait impl's legacy name holds dots of its own: found by its lengths.
        let impl_symbol = "_ZN70_$LT$oxipng..filters..BigEnt$u20$as$u20$oxipng..filters..Evaluator$GT$8evaluate17h0123456789abcdefE.llvm.42";
        assert_eq!(language(impl_symbol), Some(Language::Rust));
        assert_eq!(
            name(impl_symbol),
            "<oxipng::filters::BigEnt as oxipng::filters::Evaluator>::evaluate"
        );
        assert_eq!(legacy_rust("_ZN3app4mainE"), None);
        assert_eq!(legacy_rust("_ZN3app"), None, "cut short");
        assert_eq!(legacy_rust("_ZN99app4main17h0123456789abcdefE"), None);
        assert_eq!(
            legacy_rust("_ZN99999999999999999999999999app"),
            None,
            "no overflow"
        );
        assert_eq!(language("0x000000000001a2b0"), None, "stripped");
        assert_eq!(language("???"), None);
    }
}
