//! Carrying a committed profile's records over to the names their functions have now.
//!
//! A function with internal linkage is named in a profile by its codegen unit and its symbol,
//! `engine.86c8…-cgu.03;_ZN…E`, and rustc numbers codegen units by size: code added or moved
//! anywhere in a crate renumbers them (adding one function to the example's `engine` left 115
//! of its functions without data). Stable symbol names (`wrappers::rustc::stable_names`) keep
//! the symbol; what moves is the prefix, and the linkage, which follows the callers.
//!
//! A record of the same symbol and the same function hash (the CFG checksum, which also covers
//! the counter count) is the same function. So before the build, every local record with
//! counts is offered under each codegen unit name its crate may have now
//! ([`TextProfile::with_offered`]): rustc looks records up by name and hash and ignores names
//! no function has, so a moved function finds its data in the crate's one compile. Nothing
//! else is matched: a symbol whose hash changed is another function as far as a profile can
//! tell (two instances of one generic differ only there), and a wrong match is worse than none.
//!
//! What the offer misses (a function whose linkage changed between external and internal, a
//! unit numbered beyond it), rustc names with its codegen unit, symbol and function hash
//! (`-pgo-warn-missing-function`); those records are carried to the new name by a second
//! compile of the crate ([`plan`], `wrappers::rustc::crate_carry`) when they hold enough of the
//! counts ([`MIN_RECOMPILE_SHARE`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// An instrumentation profile in llvm-profdata's text format, split into records.
#[derive(Debug, Clone)]
pub struct TextProfile {
    /// Everything before the first record (`:ir`, flags, temporal traces).
    header: String,
    records: Vec<Record>,
}

/// One function's record.
#[derive(Debug, Clone)]
pub struct Record {
    /// As stored: `[module;]symbol`.
    pub name: String,
    pub hash: u64,
    /// Sum of its counters.
    pub total: u64,
    /// The lines after the name, verbatim.
    body: Vec<String>,
}

impl Record {
    /// The symbol, without the codegen unit a local function's name starts with.
    pub fn symbol(&self) -> &str {
        symbol_of(&self.name)
    }

    /// The crate whose codegen unit names it (none for a function with external linkage).
    fn unit_crate(&self) -> Option<&str> {
        self.name
            .rsplit_once(';')
            .map(|(module, _)| crate_of_module(module))
    }
}

fn symbol_of(name: &str) -> &str {
    name.rsplit_once(';').map_or(name, |(_, symbol)| symbol)
}

/// `engine.86c8327d2d4866f9-cgu.01` → `engine`.
pub fn crate_of_module(module: &str) -> &str {
    module.split('.').next().unwrap_or(module)
}

/// `engine.86c8327d2d4866f9-cgu.01` → `86c8327d2d4866f9`: the crate's identity (derived from
/// its `-C metadata`), which every one of its symbols carries too.
fn crate_hash_of_module(module: &str) -> Option<&str> {
    let (_, rest) = module.split_once('.')?;
    rest.split_once("-cgu").map(|(hash, _)| hash)
}

impl TextProfile {
    /// Parses `llvm-profdata merge --text` output: a record starts at a name line followed by
    /// `# Func Hash:`, and runs to the next blank line.
    pub fn parse(text: &str) -> TextProfile {
        let lines: Vec<&str> = text.lines().collect();
        let starts_record = |i: usize| lines.get(i + 1).is_some_and(|l| *l == "# Func Hash:");
        let first = (0..lines.len())
            .find(|&i| starts_record(i))
            .unwrap_or(lines.len());
        let mut header = lines[..first].join("\n");
        if !header.is_empty() {
            header.push('\n');
        }
        let mut records = Vec::new();
        let mut i = first;
        while i < lines.len() {
            if !starts_record(i) {
                i += 1;
                continue;
            }
            // From the line after the name: an empty name must not end its own record.
            let end = (i + 1..lines.len())
                .find(|&j| lines[j].is_empty())
                .unwrap_or(lines.len());
            let body: Vec<String> = lines[i + 1..end].iter().map(|l| l.to_string()).collect();
            let value_after = |marker: &str| {
                body.iter()
                    .position(|l| l == marker)
                    .and_then(|at| body.get(at + 1))
                    .and_then(|v| v.parse::<u64>().ok())
            };
            let hash = value_after("# Func Hash:").unwrap_or(0);
            let counters = value_after("# Num Counters:").unwrap_or(0) as usize;
            let total = body
                .iter()
                .position(|l| l == "# Counter Values:")
                .map_or(0, |at| {
                    body.iter()
                        .skip(at + 1)
                        .take(counters)
                        .filter_map(|v| v.parse::<u64>().ok())
                        .fold(0u64, u64::saturating_add)
                });
            records.push(Record {
                name: lines[i].to_owned(),
                hash,
                total,
                body,
            });
            i = end;
        }
        TextProfile { header, records }
    }

    #[cfg(test)]
    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// Sum of every record's counters.
    pub fn total(&self) -> u64 {
        self.records
            .iter()
            .fold(0u64, |sum, r| sum.saturating_add(r.total))
    }

    /// The profile with every local record that has counts offered under the other codegen
    /// unit names its crate may have now (see [`unit_suffixes`]), so that a function that moved
    /// finds its data in the first compile: rustc looks a record up by name and function hash,
    /// and ignores the names no function has. Copies of one function from several units (an
    /// `#[inline]` function is copied into each unit that calls it) are summed under a name
    /// none of them had; a name that already has a record of that hash keeps only its own.
    pub fn with_offered(&self) -> String {
        self.with_carried(&CarryPlan::default())
    }

    /// [`TextProfile::with_offered`], and `plan`'s records added under their new names (the
    /// old records stay: other codegen units may still look them up), with indirect-call
    /// targets renamed to match, in the text format `llvm-profdata merge` reads back. Copies
    /// given one name are summed by the merge.
    pub fn with_carried(&self, plan: &CarryPlan) -> String {
        let by_name: BTreeMap<&str, Vec<&Record>> =
            self.records.iter().fold(BTreeMap::new(), |mut map, r| {
                map.entry(r.name.as_str()).or_default().push(r);
                map
            });
        // An indirect call's target, by the name its function has now (the same linkage as
        // before: a target is promoted only where it is visible anyway).
        let mut targets: BTreeMap<&str, String> = BTreeMap::new();
        for carried in &plan.carried {
            for old in &carried.from {
                let new = match old.contains(';') {
                    true => format!("{};{}", carried.module, carried.symbol),
                    false => carried.symbol.clone(),
                };
                targets.entry(old.as_str()).or_insert(new);
            }
        }
        let mut out = self.header.clone();
        let mut write = |name: &str, record: &Record| {
            out.push_str(name);
            out.push('\n');
            for line in &record.body {
                let renamed = line.rsplit_once(':').and_then(|(target, count)| {
                    let new = targets.get(target)?;
                    count
                        .parse::<u64>()
                        .is_ok()
                        .then(|| format!("{new}:{count}"))
                });
                out.push_str(renamed.as_deref().unwrap_or(line));
                out.push('\n');
            }
            out.push('\n');
        };
        let mut present: BTreeSet<(String, u64)> = BTreeSet::new();
        for record in &self.records {
            write(&record.name, record);
            present.insert((record.name.clone(), record.hash));
        }
        let offered = self.offered(&present);
        for (name, record) in &offered {
            write(name, record);
        }
        present.extend(offered.into_iter().map(|(name, r)| (name, r.hash)));
        for carried in &plan.carried {
            for new in carried.new_names(&by_name) {
                if present.contains(&(new.clone(), carried.hash)) {
                    continue;
                }
                for old in &carried.from {
                    for record in by_name.get(old.as_str()).into_iter().flatten() {
                        if record.hash == carried.hash {
                            write(&new, record);
                        }
                    }
                }
            }
        }
        out
    }

    /// The names under which [`TextProfile::with_offered`] offers local records with counts,
    /// other than the `(name, function hash)` pairs `present` has already.
    fn offered(&self, present: &BTreeSet<(String, u64)>) -> Vec<(String, &Record)> {
        let mut highest: BTreeMap<&str, usize> = BTreeMap::new();
        for record in &self.records {
            if let Some((module, _)) = record.name.rsplit_once(';')
                && let Some((unit_prefix, index)) = split_unit(module)
            {
                let slot = highest.entry(unit_prefix).or_default();
                *slot = (*slot).max(index);
            }
        }
        let suffixes: BTreeMap<&str, Vec<String>> = highest
            .into_iter()
            .map(|(unit_prefix, highest)| (unit_prefix, unit_suffixes(highest)))
            .collect();
        let mut offered = Vec::new();
        for record in self.records.iter().filter(|r| r.total > 0) {
            let Some((module, symbol)) = record.name.rsplit_once(';') else {
                continue;
            };
            let Some((unit_prefix, _)) = split_unit(module) else {
                continue;
            };
            for suffix in &suffixes[unit_prefix] {
                let name = format!("{unit_prefix}-cgu.{suffix};{symbol}");
                if !present.contains(&(name.clone(), record.hash)) {
                    offered.push((name, record));
                }
            }
        }
        offered
    }
}

/// `engine.86c8327d2d4866f9-cgu.03` → (`engine.86c8327d2d4866f9`, 3).
fn split_unit(module: &str) -> Option<(&str, usize)> {
    let (unit_prefix, index) = module.rsplit_once("-cgu.")?;
    Some((unit_prefix, index.parse().ok()?))
}

/// More codegen units than any crate is built with (cargo's largest default is 256).
const MAX_UNITS: usize = 4096;

/// The suffixes a crate's codegen units may have in another build: rustc numbers a crate's `n`
/// units `0..n` by size, zero-padded to the digits of `n - 1` (`cgu.03` of 16), so code that
/// grows, shrinks or moves renames them. As many as the profile shows (`highest`), and at
/// least 16, cargo's release default; every padding up to the widest.
fn unit_suffixes(highest: usize) -> Vec<String> {
    // Bounded: the index comes from a profile's names, and no crate has more units than this.
    let count = highest.min(MAX_UNITS).saturating_add(1).max(16);
    let widest = (count - 1).to_string().len();
    (0..count)
        .flat_map(|index| {
            let digits = index.to_string().len();
            (digits..=widest).map(move |width| format!("{index:0width$}"))
        })
        .collect()
}

/// A function rustc found no profile data for: `<module>: no profile data available for
/// function <symbol> Hash = <hash> up to <n> count discarded`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    pub module: String,
    pub symbol: String,
    pub hash: u64,
}

impl Missing {
    pub fn parse(message: &str) -> Option<Missing> {
        let (module, rest) = message.split_once(": no profile data available for function ")?;
        let (symbol, rest) = rest.split_once(" Hash = ")?;
        let hash = rest.split_whitespace().next()?.parse().ok()?;
        Some(Missing {
            module: module.trim().to_owned(),
            symbol: symbol.trim().to_owned(),
            hash,
        })
    }
}

/// What one crate's compile can get back from the profile.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CarryPlan {
    pub carried: Vec<CarriedFunction>,
    /// Functions without data whose symbol the profile has with another function hash: their
    /// code changed (and they moved).
    pub changed: Vec<String>,
    /// Functions without data the profile does not know at all: new code, or renamed.
    pub new_code: usize,
    /// Crates whose identity changed since the profile: every symbol of theirs has another
    /// name now, so none of their records applies.
    #[serde(default)]
    pub renamed_crates: Vec<RenamedCrate>,
    /// The whole profile's counts, which the carried ones are weighed against.
    #[serde(default)]
    pub profile_counts: u64,
}

/// A crate whose codegen units carry another hash than in the profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenamedCrate {
    pub krate: String,
    /// The hash its codegen units had in the profile, and has now.
    pub was: String,
    pub now: String,
}

/// One function found under another name, and the records it gets.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CarriedFunction {
    pub module: String,
    pub symbol: String,
    pub hash: u64,
    /// The records' names in the profile (several: copies from several codegen units).
    pub from: Vec<String>,
    /// Their counters' sum.
    pub total: u64,
}

impl CarriedFunction {
    /// The names rustc may look it up by: `module;symbol` if it has internal linkage now,
    /// `symbol` if external (the warning does not say which); each only where no record
    /// already has that name.
    fn new_names(&self, existing: &BTreeMap<&str, Vec<&Record>>) -> Vec<String> {
        [
            format!("{};{}", self.module, self.symbol),
            self.symbol.clone(),
        ]
        .into_iter()
        .filter(|name| !existing.contains_key(name.as_str()))
        .collect()
    }
}

/// The share of the profile's counts that one crate's carried records must hold for a second
/// compile: the offer leaves few behind (functions whose linkage changed between external and
/// internal), and a large crate's second compile can cost as much as the rest of the build.
pub const MIN_RECOMPILE_SHARE: f64 = 0.005;

impl CarryPlan {
    /// Whether a recompile gets enough: the carried records hold at least
    /// [`MIN_RECOMPILE_SHARE`] of the profile's counts.
    pub fn worth_recompiling(&self) -> bool {
        let carried = self
            .carried
            .iter()
            .fold(0u64, |sum, c| sum.saturating_add(c.total));
        carried > 0 && carried as f64 >= MIN_RECOMPILE_SHARE * self.profile_counts as f64
    }
}

/// Matches `missing` against `profile`: the records of the same symbol and function hash,
/// from the same crate's codegen units or with external linkage.
pub fn plan(profile: &TextProfile, missing: &[Missing]) -> CarryPlan {
    let mut by_symbol: BTreeMap<&str, Vec<&Record>> = BTreeMap::new();
    for record in &profile.records {
        by_symbol.entry(record.symbol()).or_default().push(record);
    }
    // Each crate's identity in the profile, from its codegen units' names.
    let mut profile_hashes: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for record in &profile.records {
        if let Some((module, _)) = record.name.rsplit_once(';')
            && let Some(hash) = crate_hash_of_module(module)
        {
            profile_hashes
                .entry(crate_of_module(module))
                .or_default()
                .insert(hash);
        }
    }
    let mut plan = CarryPlan {
        profile_counts: profile.total(),
        ..CarryPlan::default()
    };
    let mut seen = BTreeSet::new();
    for function in missing {
        if !seen.insert((&function.module, &function.symbol)) {
            continue;
        }
        let krate = crate_of_module(&function.module);
        if let (Some(now), Some(was)) = (
            crate_hash_of_module(&function.module),
            profile_hashes.get(krate),
        ) && !was.contains(now)
            && !plan.renamed_crates.iter().any(|r| r.krate == krate)
        {
            plan.renamed_crates.push(RenamedCrate {
                krate: krate.to_owned(),
                was: was.iter().next().map_or(String::new(), |h| (*h).to_owned()),
                now: now.to_owned(),
            });
        }
        let same_symbol: Vec<&Record> = by_symbol
            .get(function.symbol.as_str())
            .into_iter()
            .flatten()
            .copied()
            .filter(|r| r.unit_crate().is_none_or(|c| c == krate))
            .collect();
        let same: Vec<&Record> = same_symbol
            .iter()
            .copied()
            .filter(|r| r.hash == function.hash)
            .collect();
        if same.is_empty() {
            match same_symbol.is_empty() {
                true => plan.new_code += 1,
                false => plan.changed.push(function.symbol.clone()),
            }
            continue;
        }
        let mut from: Vec<String> = same.iter().map(|r| r.name.clone()).collect();
        from.sort();
        from.dedup();
        plan.carried.push(CarriedFunction {
            module: function.module.clone(),
            symbol: function.symbol.clone(),
            hash: function.hash,
            from,
            total: same.iter().fold(0u64, |sum, r| sum.saturating_add(r.total)),
        });
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str, hash: u64, counts: &[u64]) -> String {
        let values: Vec<String> = counts.iter().map(u64::to_string).collect();
        format!(
            "{name}\n# Func Hash:\n{hash}\n# Num Counters:\n{}\n# Counter Values:\n{}\n\n",
            counts.len(),
            values.join("\n")
        )
    }

    fn missing(module: &str, symbol: &str, hash: u64) -> Missing {
        Missing {
            module: module.into(),
            symbol: symbol.into(),
            hash,
        }
    }

    const U32: &str = "_ZN3app4work17h1111111111111111E";
    const U64: &str = "_ZN3app4work17h2222222222222222E";

    fn profile() -> TextProfile {
        let mut text = "# IR level Instrumentation Flag\n:ir\n".to_owned();
        text += &record(&format!("app.aa-cgu.1;{U32}"), 7, &[10, 5]);
        text += &record(&format!("app.aa-cgu.2;{U64}"), 7, &[900, 1]);
        text += &record("_ZN3app4main17h3333333333333333E", 9, &[1]);
        text += &record(&format!("lib.bb-cgu.0;{U32}"), 7, &[4]);
        text += "_ZN3app6caller17h4444444444444444E\n# Func Hash:\n3\n# Num Counters:\n1\n\
                 # Counter Values:\n8\n# Num Value Kinds:\n1\n\
                 # ValueKind = IPVK_IndirectCallTarget:\n0\n# NumValueSites:\n1\n1\n\
                 app.aa-cgu.1;_ZN3app4work17h1111111111111111E:8\n\n";
        TextProfile::parse(&text)
    }

    #[test]
    fn records_are_read_with_their_hash_and_counts() {
        let profile = profile();
        assert_eq!(profile.records().len(), 5);
        assert_eq!(profile.records()[1].symbol(), U64);
        assert_eq!(profile.records()[1].total, 901);
        assert_eq!(profile.records()[4].total, 8);
        assert_eq!(profile.total(), 15 + 901 + 1 + 4 + 8);
    }

    #[test]
    fn warnings_are_parsed() {
        let message = "engine.86c8-cgu.15: no profile data available for function \
                       _ZN4core5slice4sort17h1ffcE Hash = 886271540491465525 up to 0 count \
                       discarded";
        assert_eq!(
            Missing::parse(message),
            Some(missing(
                "engine.86c8-cgu.15",
                "_ZN4core5slice4sort17h1ffcE",
                886271540491465525
            ))
        );
        assert_eq!(Missing::parse("unused variable: `x`"), None);
    }

    #[test]
    fn a_moved_function_is_carried_and_two_instances_of_one_generic_keep_their_own_counts() {
        let profile = profile();
        let plan = plan(
            &profile,
            &[
                missing("app.aa-cgu.5", U32, 7),
                missing("app.aa-cgu.6", U64, 7),
                missing("app.aa-cgu.5", U32, 7),
            ],
        );
        assert_eq!(plan.carried.len(), 2);
        // The same symbol from another crate's codegen unit is not the same copy.
        assert_eq!(plan.carried[0].from, [format!("app.aa-cgu.1;{U32}")]);
        assert_eq!(plan.carried[0].total, 15);
        assert_eq!(plan.carried[1].from, [format!("app.aa-cgu.2;{U64}")]);
        assert_eq!(plan.carried[1].total, 901);
        assert!(plan.worth_recompiling());

        let carried = TextProfile::parse(&profile.with_carried(&plan));
        let named = |name: &str| -> Vec<u64> {
            carried
                .records()
                .iter()
                .filter(|r| r.name == name)
                .map(|r| r.total)
                .collect()
        };
        assert_eq!(named(&format!("app.aa-cgu.5;{U32}")), [15]);
        assert_eq!(named(&format!("app.aa-cgu.6;{U64}")), [901]);
        // External linkage now is possible too; the old names stay.
        assert_eq!(named(U64), [901]);
        assert_eq!(named(&format!("app.aa-cgu.2;{U64}")), [901]);
        // The indirect call's target follows its function.
        let caller = carried
            .records()
            .iter()
            .find(|r| r.name.contains("caller"))
            .unwrap();
        assert!(caller.body.contains(&format!("app.aa-cgu.5;{U32}:8")));
    }

    #[test]
    fn local_records_with_counts_are_offered_under_every_unit_name_of_their_crate() {
        assert_eq!(unit_suffixes(2).len(), 26);
        assert_eq!(&unit_suffixes(2)[..3], ["0", "00", "1"]);
        assert_eq!(unit_suffixes(2).last().unwrap(), "15");
        assert_eq!(unit_suffixes(99).len(), 100 + 10);

        let mut text = "# IR level Instrumentation Flag\n:ir\n".to_owned();
        text += &record(&format!("app.aa-cgu.1;{U32}"), 7, &[10, 5]);
        text += &record(&format!("app.aa-cgu.2;{U64}"), 7, &[900, 1]);
        // An inline copy in another unit, and one whose pre-inlined body differs there.
        text += &record(&format!("app.aa-cgu.3;{U64}"), 7, &[100, 0]);
        text += &record(&format!("app.aa-cgu.4;{U64}"), 8, &[3, 0]);
        text += &record("app.aa-cgu.1;_ZN3app4cold17h5555555555555555E", 7, &[0]);
        text += &record("_ZN3app4main17h3333333333333333E", 9, &[1]);
        let profile = TextProfile::parse(&text);
        let offered = TextProfile::parse(&profile.with_offered());
        let named = |name: &str| -> Vec<(u64, u64)> {
            let mut found: Vec<(u64, u64)> = offered
                .records()
                .iter()
                .filter(|r| r.name == name)
                .map(|r| (r.hash, r.total))
                .collect();
            found.sort();
            found
        };
        // Two instances of one generic, each under its own symbol with its own counts.
        assert_eq!(named(&format!("app.aa-cgu.05;{U32}")), [(7, 15)]);
        assert_eq!(named(&format!("app.aa-cgu.5;{U32}")), [(7, 15)]);
        // Copies of one function with one hash are written apart (the merge sums them).
        assert_eq!(
            named(&format!("app.aa-cgu.12;{U64}")),
            [(7, 100), (7, 901), (8, 3)]
        );
        // A name that has a record of that hash keeps only its own.
        assert_eq!(named(&format!("app.aa-cgu.2;{U64}")), [(7, 901), (8, 3)]);
        assert_eq!(named(&format!("app.aa-cgu.1;{U32}")), [(7, 15)]);
        // Records without counts, and external ones, stay as they are.
        assert_eq!(
            offered
                .records()
                .iter()
                .filter(|r| r.name.contains("cold"))
                .count(),
            1
        );
        assert_eq!(named("_ZN3app4main17h3333333333333333E"), [(9, 1)]);
        // Nothing under another crate's units.
        assert!(
            offered
                .records()
                .iter()
                .all(|r| r.name.starts_with("app.aa-cgu.") || !r.name.contains(';'))
        );
    }

    #[test]
    fn a_crate_whose_units_carry_another_hash_was_renamed() {
        let plan = plan(
            &profile(),
            &[
                missing("app.cc-cgu.0", "_ZN3app4main17h9999999999999999E", 9),
                missing("app.cc-cgu.1", "_ZN3app3new17h5555555555555555E", 7),
                missing("lib.bb-cgu.3", "_ZN3lib3new17h5555555555555555E", 7),
            ],
        );
        assert_eq!(
            plan.renamed_crates,
            [RenamedCrate {
                krate: "app".into(),
                was: "aa".into(),
                now: "cc".into()
            }]
        );
    }

    #[test]
    fn a_changed_body_and_new_code_are_not_matched() {
        let plan = plan(
            &profile(),
            &[
                missing("app.aa-cgu.5", U32, 8),
                missing("app.aa-cgu.5", "_ZN3app3new17h5555555555555555E", 7),
            ],
        );
        assert!(plan.carried.is_empty());
        assert_eq!(plan.changed, [U32]);
        // Carried counts below MIN_RECOMPILE_SHARE of the profile's are left behind.
        let mut small = super::plan(&profile(), &[missing("app.aa-cgu.5", U32, 7)]);
        assert!(small.worth_recompiling());
        small.profile_counts = 15 * 1000;
        assert!(!small.worth_recompiling());
        assert_eq!(plan.new_code, 1);
        assert!(!plan.worth_recompiling());
    }

    /// A text profile with a value profile (indirect-call targets) and a local function's
    /// record under its codegen unit: the shapes the text readers meet.
    const TEXT_PROFILE: &str = "# IR level Instrumentation Flag\n:ir\n\
        _ZN3app4work17h1c1297dff430a494E\n# Func Hash:\n146835646621254984\n\
        # Num Counters:\n3\n# Counter Values:\n998\n1\n0\n# Num Value Kinds:\n1\n\
        # ValueKind = IPVK_IndirectCallTarget:\n0\n# NumValueSites:\n1\n1\n\
        _ZN3app6helper17habcdef0123456789E:998\n\n\
        app.c1c6f0e2d9a3b8f5-cgu.07:_ZN3app5local17h0000000000000001E\n# Func Hash:\n\
        831214097464178561\n# Num Counters:\n2\n# Counter Values:\n1\n0\n\n";

    proptest::proptest! {
        #![proptest_config(crate::util::fuzz::config())]

        /// llvm-profdata's text format, cut or garbled: read (and offered under other units'
        /// names) without a panic or a hang, by both of its readers.
        #[test]
        fn any_text_profile_is_read_without_a_panic_or_hang(
            text in crate::util::fuzz::text_mutants(TEXT_PROFILE)
        ) {
            crate::util::fuzz::no_panic_or_hang(move || {
                let profile = TextProfile::parse(&text);
                let _ = (profile.total(), profile.with_offered());
                crate::profiles::insight::parse_text_profile(&text).len()
            });
        }
    }
}
