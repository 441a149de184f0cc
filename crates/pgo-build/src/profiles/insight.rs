//! Reading what a profile says: per-function counts (from `llvm-profdata merge --text`),
//! demangled names, the crate each function belongs to, hot functions, crate shares, and the
//! functions one profile has hot where another has them cold or absent.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use crate::toolchain::LlvmTool;
use crate::util::command::Cmd;
use crate::util::printer::Printer;

/// One function's record in an instrumentation profile.
#[derive(Debug, Clone, Serialize)]
pub struct FunctionCounts {
    /// As stored: `[module;]mangled`.
    pub key: String,
    /// Demangled, without the hash suffix.
    pub name: String,
    /// The crate the function is defined in (from its demangled path).
    pub krate: String,
    /// Sum of its counters: how much of the training ran through it.
    pub total: u64,
}

/// Every function of `profile` (an indexed or raw profile).
pub fn functions(
    profile: &Path,
    profdata: &LlvmTool,
    printer: &Printer,
) -> Result<Vec<FunctionCounts>> {
    let text = Cmd::new(&profdata.path)
        .args(["merge", "--text", "-o", "-"])
        .arg(profile)
        .stdout_checked(printer)?;
    Ok(parse_text_profile(&text))
}

/// Parses llvm-profdata's text format: records separated by blank lines, each a name, then
/// `# Func Hash:`, `# Num Counters:` N, `# Counter Values:` and N values (value-profile data may
/// follow and is skipped).
pub fn parse_text_profile(text: &str) -> Vec<FunctionCounts> {
    let mut functions = Vec::new();
    for record in text.split("\n\n") {
        let lines: Vec<&str> = record
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let Some(key) = lines
            .iter()
            .find(|l| !l.starts_with('#') && !l.starts_with(':'))
        else {
            continue;
        };
        let after = |marker: &str| lines.iter().position(|l| *l == marker).map(|i| i + 1);
        let (Some(count_at), Some(values_at)) =
            (after("# Num Counters:"), after("# Counter Values:"))
        else {
            continue;
        };
        let count: usize = lines
            .get(count_at)
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let total = lines
            .iter()
            .skip(values_at)
            .take(count)
            .filter_map(|v| v.parse::<u64>().ok())
            .fold(0u64, |sum, v| sum.saturating_add(v));
        let (name, krate) = demangle(key);
        functions.push(FunctionCounts {
            key: key.to_string(),
            name,
            krate,
            total,
        });
    }
    functions
}

/// (readable name, crate) of a profile key `[module;]symbol`; see [`crate_of`].
pub fn demangle(key: &str) -> (String, String) {
    let symbol = key.rsplit(';').next().unwrap_or(key);
    let name = crate::util::names::legacy_shape(&format!("{:#}", rustc_demangle::demangle(symbol)));
    let krate = crate_of(&name).unwrap_or_else(|| UNKNOWN_CRATE.to_owned());
    (name, krate)
}

/// What functions without a crate in their name (`main`, C functions) are counted under.
pub const UNKNOWN_CRATE: &str = "(no crate)";

const STD_CRATES: [&str; 5] = ["std", "core", "alloc", "proc_macro", "test"];

/// The crate whose code a demangled function is: the first segment of its path; for
/// `<Type as Trait>::f` the crate of `Type`, unless that is a primitive, a type parameter or
/// a standard-library type and `Trait` is not (`<[u8] as tokei::SliceExt>::trim` is tokei's);
/// for drop glue (`core::ptr::drop_in_place<T>`, or `drop_glue<T>`) the crate of `T`. `None` for names without a
/// crate: primitives, type parameters and unqualified symbols like `main`.
pub fn crate_of(name: &str) -> Option<String> {
    let name = name.trim();
    if let Some(rest) = name.strip_prefix('<') {
        let inner = &rest[..crate::util::names::closing_angle(rest)?];
        let (self_type, trait_path) = match split_top_level(inner, " as ") {
            Some((self_type, trait_path)) => (self_type, Some(trait_path)),
            None => (inner, None),
        };
        let type_crate = crate_of_type(self_type);
        let trait_crate = trait_path.and_then(crate_of);
        return match (type_crate, trait_crate) {
            (Some(ty), Some(tr)) if is_std(&ty) && !is_std(&tr) => Some(tr),
            (Some(ty), _) => Some(ty),
            (None, trait_crate) => trait_crate,
        };
    }
    if let Some(dropped) = ["core::ptr::drop_in_place<", "core::ptr::drop_glue<"]
        .iter()
        .find_map(|glue| name.strip_prefix(glue))
        .and_then(|rest| Some(&rest[..crate::util::names::closing_angle(rest)?]))
    {
        return crate_of_type(dropped).or_else(|| Some("core".to_owned()));
    }
    // A qualified path: its first segment. A lone identifier has no crate in it.
    let (first, _) = name.split_once("::")?;
    let is_identifier = !first.is_empty()
        && first.chars().all(|c| c.is_alphanumeric() || c == '_')
        && !first.starts_with(|c: char| c.is_ascii_digit());
    is_identifier.then(|| first.to_owned())
}

/// The crate of a type as demangled names write it (`&mut alloc::vec::Vec<T>`, `[u8]`, `T`).
fn crate_of_type(ty: &str) -> Option<String> {
    let mut ty = ty.trim();
    for prefix in ["&", "mut ", "*const ", "*mut ", "dyn "] {
        while let Some(rest) = ty.strip_prefix(prefix) {
            ty = rest.trim_start();
        }
    }
    if ty.starts_with('[') || ty.starts_with('(') {
        // Slices, arrays and tuples belong to no crate.
        return None;
    }
    crate_of(ty)
}

fn is_std(krate: &str) -> bool {
    STD_CRATES.contains(&krate)
}

/// `text` split at the first `separator` outside any brackets.
fn split_top_level<'a>(text: &'a str, separator: &str) -> Option<(&'a str, &'a str)> {
    let mut depth = 0i32;
    let mut previous = ' ';
    for (index, c) in text.char_indices() {
        match c {
            '<' | '(' | '[' | '{' => depth += 1,
            '>' if previous != '-' => depth -= 1,
            ')' | ']' | '}' => depth -= 1,
            _ if depth == 0 && text[index..].starts_with(separator) => {
                return Some((&text[..index], &text[index + separator.len()..]));
            }
            _ => {}
        }
        previous = c;
    }
    None
}

/// The `n` functions with the largest counts, hottest first.
pub fn hottest(functions: &[FunctionCounts], n: usize) -> Vec<&FunctionCounts> {
    let mut sorted: Vec<&FunctionCounts> = functions.iter().filter(|f| f.total > 0).collect();
    sorted.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.name.cmp(&b.name)));
    sorted.truncate(n);
    sorted
}

/// Each crate's share of the total count, largest first.
pub fn crate_shares(functions: &[FunctionCounts]) -> Vec<(String, f64)> {
    // Saturating: counts of a profile given to `--weight`ed merges may reach u64::MAX.
    let total: u64 = functions
        .iter()
        .fold(0, |sum, f| sum.saturating_add(f.total));
    let mut per_crate: BTreeMap<&str, u64> = BTreeMap::new();
    for function in functions {
        let share = per_crate.entry(&function.krate).or_default();
        *share = share.saturating_add(function.total);
    }
    let mut shares: Vec<(String, f64)> = per_crate
        .into_iter()
        .filter(|(_, count)| *count > 0)
        .map(|(krate, count)| (krate.to_owned(), count as f64 / total.max(1) as f64))
        .collect();
    shares.sort_by(|a, b| b.1.total_cmp(&a.1));
    shares
}

pub use crate::report::Missed;

/// Functions hot in `test` but cold (less than a tenth of their test share) or absent in
/// `base`, largest test share first.
pub fn missed_by(base: &[FunctionCounts], test: &[FunctionCounts], n: usize) -> Vec<Missed> {
    let sum = |functions: &[FunctionCounts]| {
        functions
            .iter()
            .fold(0u64, |sum, f| sum.saturating_add(f.total))
            .max(1) as f64
    };
    let (base_total, test_total) = (sum(base), sum(test));
    let base_by_key: BTreeMap<&str, u64> = base.iter().map(|f| (f.key.as_str(), f.total)).collect();
    let mut missed: Vec<Missed> = test
        .iter()
        .filter(|f| f.total > 0)
        .filter_map(|f| {
            let test_share = f.total as f64 / test_total;
            let base_share =
                base_by_key.get(f.key.as_str()).copied().unwrap_or(0) as f64 / base_total;
            (base_share < test_share / 10.0).then(|| Missed {
                name: f.name.clone(),
                krate: f.krate.clone(),
                test_share,
                base_share,
            })
        })
        .collect();
    missed.sort_by(|a, b| b.test_share.total_cmp(&a.test_share));
    missed.truncate(n);
    missed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Demangled names from the profiles of two real programs: tokei 12.1.2 (a line counter
    /// from the crate registry) and the example workspace.
    #[test]
    fn functions_are_attributed_to_the_crate_whose_code_they_are() {
        for (name, expected) in [
            // A trait of the program implemented for a primitive slice.
            ("<[u8] as tokei::utils::ext::SliceExt>::trim", Some("tokei")),
            // The type's crate, over a standard-library trait.
            (
                "<humantime::date::Error as core::fmt::Display>::fmt",
                Some("humantime"),
            ),
            (
                "<aho_corasick::dfa::PremultipliedByteClass<S> as aho_corasick::automaton::Automaton>::is_match_or_dead_state",
                Some("aho_corasick"),
            ),
            (
                "<clap::args::arg_builder::option::OptBuilder as clap::args::any_arg::AnyArg>::aliases",
                Some("clap"),
            ),
            // A type parameter or a reference to one: the trait's crate.
            ("<T as alloc::borrow::ToOwned>::to_owned", Some("alloc")),
            ("<&T as core::fmt::Debug>::fmt", Some("core")),
            ("<T as serde::de::Expected>::fmt", Some("serde")),
            // A standard type with a program's trait: the program's; with std's: std's.
            (
                "<alloc::vec::Vec<T> as serde::ser::Serialize>::serialize",
                Some("serde"),
            ),
            (
                "<alloc::vec::Vec<T,A> as core::ops::drop::Drop>::drop",
                Some("alloc"),
            ),
            (
                "<tokei::language::language_type::LanguageType::parse_jupyter::_::<impl serde::de::Deserialize for tokei::language::language_type::LanguageType::parse_jupyter::JupyterMetadata>::deserialize::__FieldVisitor as serde::de::Visitor>::visit_str",
                Some("tokei"),
            ),
            // Closures, by the function they are in.
            (
                "toml::tokens::Tokenizer::basic_string::{{closure}}",
                Some("toml"),
            ),
            ("coordinator::options::{{closure}}", Some("coordinator")),
            (
                "engine::closure::compile_closure::{{closure}}",
                Some("engine"),
            ),
            // Drop glue, by the type it drops.
            (
                "core::ptr::drop_in_place<engine::closure::compile_closure::{{closure}}>",
                Some("engine"),
            ),
            ("core::ptr::drop_in_place<u8>", Some("core")),
            // The 1.97 nightly's name of drop glue.
            ("core::ptr::drop_glue<jaq_json::Val>", Some("jaq_json")),
            // No crate: the C entry point, primitives, type parameters.
            ("main", None),
            ("u8", None),
            ("T", None),
        ] {
            assert_eq!(crate_of(name).as_deref(), expected, "{name}");
        }
    }

    #[test]
    fn no_crate_is_a_primitive_or_a_type_parameter() {
        // Every function of tokei's profile (sampled above) gets a crate that is a real path
        // segment, never `?`, `T`, `P`, `F`, `usize`, `char` or `u8`.
        for name in [
            "<usize as core::iter::range::Step>::forward_unchecked",
            "<char as core::fmt::Debug>::fmt",
            "<P as ignore::walk::ParallelVisitorBuilder>::build",
            "<F as core::ops::function::FnOnce<A>>::call_once",
        ] {
            let krate = crate_of(name).unwrap();
            assert!(
                !["?", "T", "P", "F", "usize", "char", "u8"].contains(&krate.as_str()),
                "{name}: {krate}"
            );
        }
    }

    const TEXT: &str = "# IR level Instrumentation Flag\n:ir\n\
        _ZN3app13collatz_steps17h0123456789abcdefE\n# Func Hash:\n1\n# Num Counters:\n2\n# Counter Values:\n900\n100\n\n\
        app.abc-cgu.0;_ZN4core3ptr13drop_in_place17h0123456789abcdefE\n# Func Hash:\n2\n# Num Counters:\n1\n# Counter Values:\n50\n# Num Value Kinds:\n0\n\n\
        _ZN70_$LT$alloc..vec..Vec$LT$T$C$A$GT$$u20$as$u20$core..ops..drop..Drop$GT$4drop17h92821238d5cfac9dE\n# Func Hash:\n3\n# Num Counters:\n1\n# Counter Values:\n0\n";

    #[test]
    fn v0_names_read_as_legacy_ones() {
        for (v0, legacy, krate) in [
            (
                "_RINvNtNtNtCsgEmfK2I1SDS_4core5slice4sort6stable14driftsort_mainyNvYyNtNtB8_3cmp10PartialOrd2ltINtNtCslNYArtu3iFV_5alloc3vec3VecyEECsintiYeUIQKy_1l",
                "core::slice::sort::stable::driftsort_main",
                "core",
            ),
            ("_RNvCsintiYeUIQKy_1l4work", "l::work", "l"),
            (
                "_RINvNtCsgEmfK2I1SDS_4core3ptr13drop_in_placeNtCsintiYeUIQKy_1l5ThingECsintiYeUIQKy_1l",
                "core::ptr::drop_in_place<l::Thing>",
                "l",
            ),
            // The nightly's drop glue keeps its type and its crate too.
            (
                "_RINvNtCs8NwYtU1Mohg_4core3ptr9drop_glueNtCsintiYeUIQKy_1l5ThingECsintiYeUIQKy_1l",
                "core::ptr::drop_glue<l::Thing>",
                "l",
            ),
        ] {
            assert_eq!(demangle(v0), (legacy.to_owned(), krate.to_owned()), "{v0}");
        }
        assert_eq!(crate::util::names::legacy_shape("a::b<T>::c"), "a::b<T>::c");
        assert_eq!(
            crate::util::names::legacy_shape("a::f::<fn() -> u8>::g"),
            "a::f::g"
        );
        assert_eq!(
            crate::util::names::legacy_shape("a::f::<broken"),
            "a::f::<broken"
        );
        let deep = format!(
            "{}T{}",
            "core::ptr::drop_in_place::<".repeat(5000),
            ">".repeat(5000)
        );
        assert!(crate::util::names::legacy_shape(&deep).len() <= deep.len());
    }

    #[test]
    fn text_profiles_are_parsed_and_demangled() {
        let functions = parse_text_profile(TEXT);
        assert_eq!(functions.len(), 3);
        assert_eq!(functions[0].name, "app::collatz_steps");
        assert_eq!(functions[0].krate, "app");
        assert_eq!(functions[0].total, 1000);
        assert_eq!(functions[1].krate, "core");
        assert_eq!(functions[1].total, 50);
        assert_eq!(functions[2].krate, "alloc", "{}", functions[2].name);
    }

    #[test]
    fn hottest_and_shares() {
        let functions = parse_text_profile(TEXT);
        let hot = hottest(&functions, 5);
        assert_eq!(hot.len(), 2, "zero-count functions are not hot");
        assert_eq!(hot[0].name, "app::collatz_steps");
        let shares = crate_shares(&functions);
        assert_eq!(shares[0].0, "app");
        assert!((shares[0].1 - 1000.0 / 1050.0).abs() < 1e-9);
    }

    #[test]
    fn functions_training_misses_are_listed() {
        let base = parse_text_profile(TEXT);
        let mut test = base.clone();
        test[1].total = 5000; // drop_in_place: hot in test, 5% of base.
        test.push(FunctionCounts {
            key: "new".into(),
            name: "app::new".into(),
            krate: "app".into(),
            total: 3000,
        });
        let missed = missed_by(&base, &test, 10);
        let names: Vec<&str> = missed.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["core::ptr::drop_in_place", "app::new"]);
        assert_eq!(missed[1].base_share, 0.0);
    }
}
