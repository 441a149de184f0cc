//! Names users give that pgo-build derives paths and other names from (workloads, explore
//! variants): what they may be, in one place, so a derived name never leaves its directory
//! and never collides with pgo-build's own entries. And the one reading of the angle brackets
//! in Rust names (`closing_angle`), which demangled names and source signatures share, and
//! the one shape a demangled name is compared in (`legacy_shape`).

/// A workload's name: `profiles/raw/<name>/`, `logs/<command>-<name>.log`. (A workload
/// named like one run of a workload with `shards`, `<name>.part<I>of<K>`, is refused where
/// runs are listed, in `config.rs`.)
pub fn check_workload(name: &str) -> Result<(), String> {
    check_chars(
        name,
        "-_.",
        "workload name",
        "letters, digits, '-', '_' and '.'",
    )
}

/// A service's name: it names its log (`<workload log>.<service>.log`).
pub fn check_service(name: &str) -> Result<(), String> {
    check_chars(name, "-_", "service name", "letters, digits, '-' and '_'")
}

/// A workload metric's name: a distribution's percentiles are `<name>.p<P>` (that it is not
/// one of `--metric`'s built-in names is checked with them, in `config`).
pub fn check_metric(name: &str) -> Result<(), String> {
    check_chars(name, "-_", "metric name", "letters, digits, '-' and '_'")
}

/// An explore variant's name: `explore/<name>/bin/`, beside explore's own `builds/` and
/// `measurements.json`.
pub fn check_variant(name: &str) -> Result<(), String> {
    check_chars(
        name,
        "-_.+",
        "explore variant name",
        "letters, digits, '-', '_', '.' and '+'",
    )?;
    if EXPLORE_ENTRIES.contains(&name) {
        return Err(format!(
            "explore variant name {name:?} is the name of explore's own entry in \
             target/pgo-build/explore/: rename it"
        ));
    }
    Ok(())
}

/// What `explore` keeps beside the variants' directories.
const EXPLORE_ENTRIES: [&str; 2] = ["builds", "measurements.json"];

fn check_chars(name: &str, others: &str, what: &str, allowed: &str) -> Result<(), String> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || others.contains(c))
        || name.starts_with('.')
    {
        return Err(format!(
            "{what} {name:?} must use only {allowed} and not start with '.' (it names a \
             directory)"
        ));
    }
    Ok(())
}

/// The index in `text` of the `>` that closes an `<` just before it (`->` is not one).
pub fn closing_angle(text: &str) -> Option<usize> {
    let mut depth = 1usize;
    let mut previous = ' ';
    for (index, c) in text.char_indices() {
        match c {
            '<' => depth += 1,
            '>' if previous != '-' => {
                depth -= 1;
                if depth == 0 {
                    return Some(index);
                }
            }
            _ => {}
        }
        previous = c;
    }
    None
}

/// A demangled v0 name as a legacy one reads: without a function's own generic arguments
/// (`sort::<u64, F>` → `sort`), which v0 names spell out and every reader of names here
/// (crate attribution, `profile check`'s items) takes as part of the path; drop glue keeps its
/// type (`drop_in_place::<T>` → `drop_in_place<T>`, the 1.97 nightly's `drop_glue::<T>` too), as
/// legacy names have it. Legacy names
/// have no `::<` and are returned as they are.
pub fn legacy_shape(name: &str) -> String {
    legacy_shape_within(name, 0)
}

/// Drop glue of drop glue nests; deeper than any real name is left as it is.
fn legacy_shape_within(name: &str, depth: usize) -> String {
    if depth > 16 {
        return name.to_owned();
    }
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find("::<") {
        let (before, after) = rest.split_at(at);
        out.push_str(before);
        let inner = &after[3..];
        let Some(close) = closing_angle(inner) else {
            out.push_str(after);
            return out;
        };
        if before.ends_with("drop_in_place") || before.ends_with("drop_glue") {
            out.push('<');
            out.push_str(&legacy_shape_within(&inner[..close], depth + 1));
            out.push('>');
        }
        rest = &inner[close + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_names_stay_in_their_directory_and_off_pgo_builds_own() {
        for good in ["t0", "api-load", "bench_1.2", "w.parts"] {
            assert_eq!(check_workload(good), Ok(()), "{good}");
        }
        for bad in ["", ".hidden", "../up", "a/b", "a b"] {
            assert!(check_workload(bad).is_err(), "{bad}");
        }
        assert_eq!(check_variant("pgo+o2"), Ok(()));
        for bad in ["builds", "measurements.json", "a/b", ".x"] {
            assert!(check_variant(bad).is_err(), "{bad}");
        }
    }
}
