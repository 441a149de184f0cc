//! How much of a committed profile applies to the current sources, told without building
//! (`pgo-build profile check`): each function's counts are placed by the package its code is
//! in and, where the profile's metadata has them, by the source file.
//!
//! With stable symbol names a function keeps its name unless its code changed, and one that
//! moved to another codegen unit is carried over; so a function of an unchanged package
//! applies for certain, one in an unchanged file of a changed package most likely (a callee
//! inlined from a changed file can still change it), and one in a changed file may not. The
//! file is found from the function's path (`kernel::table::count` in `src/table.rs`), which
//! is what rustc's module system makes likely but not certain.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::cargo::source_fingerprints::{PackageSources, SourceRecord};
use crate::cargo::workspace::PackageDeps;
use crate::profiles::insight::{FunctionCounts, crate_of};
use crate::util::names::closing_angle;

/// Where a function's counts stand in the current sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Standing {
    /// Its package's sources are unchanged (or it is the toolchain's: the standard library).
    Unchanged,
    /// Its package changed, its file did not.
    UnchangedFile,
    /// Its file changed, its own source did not (`cargo::fn_source`).
    UnchangedFunction,
    /// Its own source is unchanged, but it is generic over a type and a package that uses it
    /// changed: its instances are compiled there, with that package's types, whose inlined
    /// code changes them when those types' code changed (a function's data is dropped when
    /// its compiled body changed). Counted as applying, and as the range's low end.
    UnchangedGeneric,
    /// Its file changed, and its own source could not be told apart (not fingerprinted, or a
    /// package without per-file hashes).
    ChangedFile,
    /// Its own source changed: its data will be dropped.
    ChangedFunction,
    /// Its package is present in another set of versions: every symbol has another name.
    Renamed,
    /// Its package is no longer in the build.
    Gone,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Prediction {
    pub total_counts: u64,
    pub counts: BTreeMap<Standing, u64>,
    /// Per crate (where its code is): counts by standing.
    pub per_crate: BTreeMap<String, BTreeMap<Standing, u64>>,
    /// Functions in changed files, gone or renamed, most counts first: (name, counts, file).
    pub at_risk: Vec<AtRisk>,
}

#[derive(Debug, Clone, Serialize)]
pub struct AtRisk {
    pub name: String,
    pub counts: u64,
    pub standing: Standing,
    /// The source file it was placed in (`package/src/table.rs`), when one was.
    pub file: Option<String>,
}

impl Prediction {
    pub fn share(&self, standings: &[Standing]) -> f64 {
        let counts: u64 = standings
            .iter()
            .map(|s| self.counts.get(s).copied().unwrap_or(0))
            .sum();
        counts as f64 / self.total_counts.max(1) as f64
    }

    /// The share expected to apply: unchanged packages, files and functions, generic ones
    /// included.
    pub fn applies(&self) -> f64 {
        self.share(&[
            Standing::Unchanged,
            Standing::UnchangedFile,
            Standing::UnchangedFunction,
            Standing::UnchangedGeneric,
        ])
    }

    /// The share that applies unless rustc's MIR inlining carries changed code into an
    /// unchanged function: [`Prediction::applies`] without the generic code instantiated by
    /// changed packages (which keeps its data unless the types it is instantiated with
    /// changed, which the profile's symbol names cannot tell).
    pub fn applies_at_least(&self) -> f64 {
        self.applies() - self.share(&[Standing::UnchangedGeneric])
    }
}

/// The crates of the Rust toolchain itself: unchanged as long as rustc is.
pub const TOOLCHAIN_CRATES: [&str; 5] = ["std", "core", "alloc", "proc_macro", "panic_unwind"];

/// `used_by_changed`: the packages (by name) that a changed package depends on, directly or
/// not: where their generic code may be instantiated with changed types.
pub fn predict(
    functions: &[FunctionCounts],
    then: &SourceRecord,
    now: &SourceRecord,
    used_by_changed: &BTreeSet<String>,
) -> Prediction {
    let mut prediction = Prediction::default();
    for function in functions {
        let (mut standing, file) = standing_of(function, then, now);
        // Functions without counts weigh nothing: their sources are not read.
        if standing <= Standing::UnchangedFunction
            && function.total > 0
            && let Some((key, package)) = now.package_of(&function.krate)
            && used_by_changed.contains(key.split(' ').next().unwrap_or(key))
            && is_generic(function, package)
        {
            standing = Standing::UnchangedGeneric;
        }
        prediction.total_counts += function.total;
        *prediction.counts.entry(standing).or_default() += function.total;
        *prediction
            .per_crate
            .entry(function.krate.clone())
            .or_default()
            .entry(standing)
            .or_default() += function.total;
        if standing > Standing::UnchangedFunction && function.total > 0 {
            // Named with the functions at risk, though counted as applying.
            prediction.at_risk.push(AtRisk {
                name: function.name.clone(),
                counts: function.total,
                standing,
                file,
            });
        }
    }
    prediction
        .at_risk
        .sort_by(|a, b| b.counts.cmp(&a.counts).then_with(|| a.name.cmp(&b.name)));
    prediction
}

/// The packages that a package whose sources changed (or that is new) depends on, directly
/// or not, by name.
pub fn used_by_changed(
    graph: &[PackageDeps],
    then: &SourceRecord,
    now: &SourceRecord,
) -> BTreeSet<String> {
    let changed = |name: &str| {
        now.packages
            .iter()
            .filter(|(key, _)| key.split(' ').next() == Some(name))
            .any(|(key, package)| {
                then.packages
                    .get(key)
                    .is_none_or(|p| p.hash != package.hash)
            })
    };
    let dependencies: BTreeMap<&str, Vec<&str>> = graph
        .iter()
        .map(|p| {
            (
                p.name.as_str(),
                p.normal.iter().map(|(n, _)| n.as_str()).collect(),
            )
        })
        .collect();
    let mut used = BTreeSet::new();
    let mut pending: Vec<&str> = graph
        .iter()
        .map(|p| p.name.as_str())
        .filter(|name| changed(name))
        .collect();
    while let Some(name) = pending.pop() {
        for dependency in dependencies.get(name).into_iter().flatten() {
            if used.insert((*dependency).to_owned()) {
                pending.push(dependency);
            }
        }
    }
    used
}

/// Whether a function is generic over a type: its v0 symbol is a generic instance, its name
/// shows its impl's type parameters (`Ctx<D>::lut`: legacy symbol names keep them as
/// written), or its source says so.
fn is_generic(function: &FunctionCounts, package: &PackageSources) -> bool {
    let symbol = function.key.rsplit(';').next().unwrap_or(&function.key);
    if super::toolchain_names::is_generic_instance(symbol) || names_type_parameters(&function.name)
    {
        return true;
    }
    let (Some(file), Some(item)) = (
        file_of(&function.name, &function.krate, package),
        item_name(&function.name),
    ) else {
        return false;
    };
    package.generic_now(&file, item)
}

/// Whether a demangled name has a type's generic arguments that are parameters, by
/// convention one or two letters starting with a capital (`List<T>`, `Ctx<D>`), rather than
/// concrete types (`Vec<u8>`, `Foo<String>`).
fn names_type_parameters(name: &str) -> bool {
    let bytes = name.as_bytes();
    name.char_indices().any(|(at, c)| {
        if c != '<' || at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_')
        {
            return false;
        }
        let rest = &name[at + 1..];
        let list = &rest[..closing_angle(rest).unwrap_or(rest.len())];
        list.split(',').map(str::trim).any(|argument| {
            (1..=2).contains(&argument.len())
                && argument.starts_with(|c: char| c.is_ascii_uppercase())
                && argument.bytes().all(|b| b.is_ascii_alphanumeric())
        })
    })
}

fn standing_of(
    function: &FunctionCounts,
    then: &SourceRecord,
    now: &SourceRecord,
) -> (Standing, Option<String>) {
    let Some((key, before)) = then.package_of(&function.krate) else {
        // The toolchain's crates, and code of no package (C, `main` shims).
        return (Standing::Unchanged, None);
    };
    if TOOLCHAIN_CRATES.contains(&function.krate.as_str()) {
        return (Standing::Unchanged, None);
    }
    let Some(after) = now.packages.get(key) else {
        return match now.package_of(&function.krate) {
            Some(_) => (Standing::Renamed, None),
            None => (Standing::Gone, None),
        };
    };
    if after.hash == before.hash {
        return (Standing::Unchanged, None);
    }
    let name = key.split(' ').next().unwrap_or(key);
    let Some(file) = file_of(&function.name, &function.krate, before) else {
        return (Standing::ChangedFile, None);
    };
    let standing = if after.files.get(&file) == before.files.get(&file) {
        Standing::UnchangedFile
    } else {
        let item = item_name(&function.name);
        let recorded = item.and_then(|item| before.functions.get(&format!("{file}::{item}")));
        match (recorded, item) {
            (Some(then), Some(item)) => match after.fingerprint_now(&file, item) {
                Some(now) if now == *then => Standing::UnchangedFunction,
                _ => Standing::ChangedFunction,
            },
            _ => Standing::ChangedFile,
        }
    };
    (standing, Some(format!("{name}/{file}")))
}

/// Fingerprints the source of `functions` holding at least `min_share` of the counts (see
/// `cargo::fn_source`) into `record`, for `profile check` to compare later.
pub fn fingerprint_functions(
    functions: &[FunctionCounts],
    record: &mut SourceRecord,
    min_share: f64,
) {
    let total: u64 = functions.iter().map(|f| f.total).sum();
    for function in functions {
        if (function.total as f64) < total as f64 * min_share {
            continue;
        }
        let Some(package) = record.package_of_mut(&function.krate) else {
            continue;
        };
        let (Some(file), Some(item)) = (
            file_of(&function.name, &function.krate, package),
            item_name(&function.name),
        ) else {
            continue;
        };
        if let Some(fingerprint) = package.fingerprint_now(&file, item) {
            package
                .functions
                .insert(format!("{file}::{item}"), fingerprint);
        }
    }
}

/// The name of the `fn` item a function is (or a closure is in): the last identifier of its
/// path (`kernel::table::count` → `count`, `a::f::{{closure}}` → `f`).
fn item_name(name: &str) -> Option<&str> {
    let name = match name.rsplit_once(">::") {
        Some((_, method)) if name.starts_with('<') => method,
        _ => name,
    };
    name.rsplit("::")
        .map(|s| s.split('<').next().unwrap_or(s))
        .find(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
}

/// The source file a function's code most likely is in: the longest prefix of its module path
/// that names a file of the package (`src/a/b.rs` or `src/a/b/mod.rs`), else the crate root.
fn file_of(name: &str, krate: &str, package: &PackageSources) -> Option<String> {
    if package.files.is_empty() {
        return None;
    }
    let path = item_path(name);
    let segments: Vec<&str> = path
        .split("::")
        .skip_while(|s| *s != krate)
        .skip(1)
        .filter(|s| !s.is_empty() && !s.starts_with('{'))
        .collect();
    for len in (1..=segments.len()).rev() {
        let module = segments[..len].join("/");
        for file in [format!("src/{module}.rs"), format!("src/{module}/mod.rs")] {
            if package.files.contains_key(&file) {
                return Some(file);
            }
        }
    }
    ["src/lib.rs", "src/main.rs"]
        .into_iter()
        .find(|root| package.files.contains_key(*root))
        .map(str::to_owned)
}

/// The path of the item a demangled name is in: `<a::T as b::Tr>::f` → `a::T` (the type's, or
/// the trait's when the type is the standard library's, as [`crate_of`] decides), generic
/// arguments dropped.
fn item_path(name: &str) -> String {
    let name = name.trim();
    let path = match name.strip_prefix('<') {
        Some(rest) => {
            let inner = &rest[..closing_angle(rest).unwrap_or(rest.len())];
            match inner.split_once(" as ") {
                Some((ty, tr)) if crate_of(ty) != crate_of(name) => tr.to_owned(),
                Some((ty, _)) => ty.to_owned(),
                None => inner.to_owned(),
            }
        }
        None => name.to_owned(),
    };
    let mut depth = 0;
    let mut previous = ' ';
    path.chars()
        .filter(|&c| {
            let arrow = previous == '-';
            previous = c;
            match c {
                '<' => depth += 1,
                // `fn(..) -> T` in a type: not a closing bracket.
                '>' if !arrow => depth -= 1,
                _ => return depth == 0,
            }
            false
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn function(name: &str, krate: &str, total: u64) -> FunctionCounts {
        FunctionCounts {
            key: name.into(),
            name: name.into(),
            krate: krate.into(),
            total,
        }
    }

    fn package(version: &str, hash: &str, files: &[(&str, &str)]) -> PackageSources {
        PackageSources {
            version: version.into(),
            crates: vec!["kernel".into()],
            hash: hash.into(),
            files: files
                .iter()
                .map(|(f, h)| (f.to_string(), h.to_string()))
                .collect(),
            ..PackageSources::default()
        }
    }

    fn record(packages: &[(&str, PackageSources)]) -> SourceRecord {
        SourceRecord {
            packages: packages
                .iter()
                .map(|(k, p)| (k.to_string(), p.clone()))
                .collect(),
        }
    }

    #[test]
    fn a_v0_instance_of_a_generic_impl_is_generic_though_its_name_shows_concrete_types() {
        // v0 names spell the types an instance was made for (`Ctx<u8>`), not the impl's
        // parameters (`Ctx<D>`): the symbol's instantiating crate says it is generic.
        let instance = FunctionCounts {
            key: "core.abc-cgu.0;_RNvMNtCs1_8core_lib3ctxINtB2_3CtxhE3lutCs2_3app".to_owned(),
            name: "<core_lib::ctx::Ctx<u8>>::lut".to_owned(),
            krate: "core_lib".to_owned(),
            total: 1,
        };
        assert!(!names_type_parameters(&instance.name));
        assert!(is_generic(&instance, &PackageSources::default()));
        let plain = FunctionCounts {
            key: "_RNvNtCs1_8core_lib3ctx4init".to_owned(),
            name: "core_lib::ctx::init".to_owned(),
            ..instance
        };
        assert!(!is_generic(&plain, &PackageSources::default()));
    }

    #[test]
    fn counts_are_placed_by_package_and_file() {
        let files = [
            ("src/lib.rs", "1"),
            ("src/table.rs", "2"),
            ("src/scan.rs", "3"),
        ];
        let then = record(&[("kernel", package("1.0.0", "a", &files))]);
        let functions = [
            function("kernel::table::count", "kernel", 40),
            function(
                "<kernel::table::Table as core::fmt::Debug>::fmt",
                "kernel",
                10,
            ),
            function("kernel::scan::run_in", "kernel", 30),
            function("kernel::fold32", "kernel", 15),
            function("core::ptr::drop_in_place<alloc::string::String>", "core", 5),
        ];
        // Unchanged: everything applies.
        let same = predict(&functions, &then, &then, &BTreeSet::new());
        assert_eq!(same.applies(), 1.0);
        assert!(same.at_risk.is_empty());
        // One file changed: its functions are at risk, the others most likely apply.
        let changed = [
            ("src/lib.rs", "1"),
            ("src/table.rs", "9"),
            ("src/scan.rs", "3"),
        ];
        let now = record(&[("kernel", package("1.1.0", "b", &changed))]);
        let prediction = predict(&functions, &then, &now, &BTreeSet::new());
        assert!((prediction.applies() - 0.5).abs() < 1e-9, "{prediction:?}");
        assert_eq!(prediction.at_risk[0].name, "kernel::table::count");
        assert_eq!(
            prediction.at_risk[0].file.as_deref(),
            Some("kernel/src/table.rs")
        );
        assert_eq!(prediction.at_risk.len(), 2);
        assert_eq!(prediction.counts[&Standing::UnchangedFile], 45);
        // In several versions now: renamed; no longer in the build: gone.
        let renamed = record(&[("kernel 1.1.0", package("1.1.0", "a", &files))]);
        assert_eq!(
            predict(&functions, &then, &renamed, &BTreeSet::new()).counts[&Standing::Renamed],
            95
        );
        let gone = predict(
            &functions,
            &then,
            &SourceRecord::default(),
            &BTreeSet::new(),
        );
        assert_eq!(gone.counts[&Standing::Gone], 95);
        assert_eq!(gone.counts[&Standing::Unchanged], 5);
    }

    #[test]
    fn in_a_changed_file_a_fingerprinted_function_is_told_changed_or_not() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        let table = "pub fn count(x: u32) -> u32 { x + 1 }\npub fn other() -> u32 { 1 }\n";
        std::fs::write(dir.path().join("src/table.rs"), table).unwrap();
        std::fs::write(dir.path().join("src/lib.rs"), "pub mod table;").unwrap();
        let mut then = record(&[(
            "kernel",
            package("1.0.0", "a", &[("src/lib.rs", "1"), ("src/table.rs", "2")]),
        )]);
        then.packages.get_mut("kernel").unwrap().dir = dir.path().to_owned();
        let functions = [
            function("kernel::table::count", "kernel", 60),
            function("kernel::table::other", "kernel", 40),
        ];
        fingerprint_functions(&functions, &mut then, 0.5);
        assert_eq!(then.packages["kernel"].functions.len(), 1);
        let mut now = then.clone();
        let mut edited = |text: &str| {
            std::fs::write(dir.path().join("src/table.rs"), text).unwrap();
            now.packages
                .get_mut("kernel")
                .unwrap()
                .files
                .insert("src/table.rs".into(), "3".into());
            now.packages.get_mut("kernel").unwrap().hash = "b".into();
            predict(&functions, &then, &now, &BTreeSet::new())
        };
        // Another function of the file changed: the fingerprinted one still applies.
        let prediction = edited(&table.replace("{ 1 }", "{ 2 }"));
        assert_eq!(prediction.counts[&Standing::UnchangedFunction], 60);
        assert_eq!(prediction.counts[&Standing::ChangedFile], 40);
        // It changed itself.
        let prediction = edited(&table.replace("x + 1", "x + 2"));
        assert_eq!(prediction.counts[&Standing::ChangedFunction], 60);
    }

    #[test]
    fn generic_code_used_by_a_changed_package_is_at_risk_though_its_source_is_not() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        let lib = "pub fn run<'a, D: Data>(d: &'a D) -> u32 { d.get() }\npub fn plain(x: u32) -> u32 { x }\n";
        std::fs::write(dir.path().join("src/lib.rs"), lib).unwrap();
        let mut then = record(&[
            ("core_lib", package("1.0.0", "a", &[("src/lib.rs", "1")])),
            ("values", package("2.0.0", "v", &[])),
        ]);
        for (name, package) in &mut then.packages {
            package.crates = vec![name.clone()];
        }
        then.packages.get_mut("core_lib").unwrap().dir = dir.path().to_owned();
        let functions = [
            function("core_lib::run", "core_lib", 30),
            function("core_lib::plain", "core_lib", 50),
            function("core_lib::Ctx<D>::lut", "core_lib", 20),
        ];
        let mut now = then.clone();
        now.packages.get_mut("values").unwrap().hash = "w".into();
        let graph = [
            PackageDeps {
                name: "app".into(),
                version: "1.0.0".into(),
                normal: vec![("values".into(), "2.0.1".into())],
                build: vec![],
            },
            PackageDeps {
                name: "values".into(),
                version: "2.0.1".into(),
                normal: vec![("core_lib".into(), "1.0.0".into())],
                build: vec![],
            },
        ];
        let used = used_by_changed(&graph, &then, &now);
        assert_eq!(used, BTreeSet::from(["core_lib".to_owned()]));
        let prediction = predict(&functions, &then, &now, &used);
        // `run` by its source, `Ctx<D>::lut` by its name; `plain` is not generic.
        assert_eq!(prediction.counts[&Standing::UnchangedGeneric], 50);
        assert_eq!(prediction.counts[&Standing::Unchanged], 50);
        assert_eq!(prediction.applies(), 1.0);
        assert!((prediction.applies_at_least() - 0.5).abs() < 1e-9);
        assert_eq!(prediction.at_risk.len(), 2);
        // Nothing that uses it changed: all of it applies.
        let prediction = predict(
            &functions,
            &then,
            &then,
            &used_by_changed(&graph, &then, &then),
        );
        assert_eq!(prediction.applies(), 1.0);
    }

    #[test]
    fn type_parameters_are_told_from_concrete_arguments_in_names() {
        assert!(names_type_parameters("core_lib::Ctx<D>::lut"));
        assert!(names_type_parameters(
            "<a::List<T> as core::ops::drop::Drop>::drop"
        ));
        assert!(!names_type_parameters("a::Table<u8>::get"));
        assert!(!names_type_parameters("a::Table<String>::get"));
        assert!(!names_type_parameters("<impl a::TermId>::run"));
        assert!(!names_type_parameters("<T as a::Tr>::f"));
    }

    #[test]
    fn item_names_are_the_fn_items() {
        assert_eq!(item_name("kernel::table::count"), Some("count"));
        assert_eq!(item_name("kernel::f::{{closure}}"), Some("f"));
        assert_eq!(
            item_name("<kernel::T as core::fmt::Debug>::fmt"),
            Some("fmt")
        );
        assert_eq!(item_name("kernel::generic::fold<u32>"), Some("fold"));
    }

    #[test]
    fn item_paths_drop_generic_arguments_and_take_the_type_of_an_impl() {
        assert_eq!(
            item_path("kernel::generic::fold<u32>"),
            "kernel::generic::fold"
        );
        assert_eq!(
            item_path("<kernel::table::Table as core::fmt::Debug>::fmt"),
            "kernel::table::Table"
        );
        assert_eq!(
            item_path("<alloc::vec::Vec<u8> as kernel::text::Words>::words"),
            "kernel::text::Words"
        );
    }
}
