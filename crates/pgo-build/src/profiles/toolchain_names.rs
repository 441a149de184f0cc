//! Names a profile keeps across a rustc upgrade.
//!
//! Every rustc release used to rename every function a profile knows: the legacy mangling's
//! `17h…E` hash covers the crate's identity (which hashes rustc's version in) and the types
//! of the signature, hashed by the compiler's own rules. With stable names
//! (`wrappers::rustc::stable_names`, scheme 2) stage builds mangle with v0
//! (`-Csymbol-mangling-version=v0`, stable since rustc 1.59) and pin the version that goes
//! into crate identities (`RUSTC_FORCE_RUSTC_VERSION`, which rustc reads for reproducible
//! builds: it changes each crate's `StableCrateId`, so its v0 disambiguator `Cs…_`, its
//! codegen units' names and its `TypeId`s). A function of the workspace or a registry crate is
//! then named the same under every rustc (but in incremental compiles, which keep the real
//! version: see `stable_names`).
//!
//! What still changes is the standard library's crates, precompiled with the real version:
//! an instance of a generic of `core`, `alloc` or `std` (and std's own `hashbrown`) names them
//! by their disambiguators (`_RINvNtCs8NwYtU1Mohg_4core5slice…`). So the committed profile
//! records the disambiguators of the toolchain it was trained with ([`SysrootCrates`],
//! found by compiling a probe, [`PROBE_SOURCE`]), and a build with another rustc renames its
//! records to this toolchain's ([`rename_crates`]). v0 names refer back to earlier parts of
//! themselves by byte offset (`B<offset>_`), so a renamed crate of another length moves the
//! offsets after it: the name is parsed (RFC 2603's grammar) and every back-reference
//! rewritten. A name that does not parse is left as it is: a record under a name no function
//! has is ignored by rustc, never matched wrongly.
//!
//! Drop glue changed its name too: `core::ptr::drop_in_place::<T>` until rustc 1.95,
//! `core::ptr::drop_glue::<T>` in the 1.97 nightly. On jaq it held 12% of a profile's counts,
//! all of which found no function under the other name. The probe says which name this
//! toolchain gives it ([`drop_glue_name_in`]), and records under the other are renamed.
//!
//! A renamed record reaches its function only when the function hash (its control flow) is
//! also the same: code of the standard library that the new release changed, or that rustc
//! now lowers differently, is stale as any changed function is.

use std::collections::BTreeMap;

/// Crate name → v0 disambiguator (the base-62 digits of `Cs<digits>_`) of the standard
/// library's crates of one toolchain and target.
pub type SysrootCrates = BTreeMap<String, String>;

/// A crate compiled to find the standard library's disambiguators: it instantiates generics
/// of `core`, `alloc`, `std` and std's `hashbrown`, whose v0 names carry them.
pub const PROBE_SOURCE: &str = r#"
pub fn probe(v: &mut Vec<u64>, m: &mut std::collections::HashMap<u64, String>, s: &str) -> usize {
    v.sort();
    m.insert(v.len() as u64, format!("{s}{}", v.len()));
    m.get(&1).map_or(0, |t| t.len()) + s.find('x').unwrap_or(0)
}
"#;

/// The crates the probe's symbols name, by their disambiguators; a crate name seen with two
/// disambiguators (which the standard library never has) is left out, as is the probe itself.
pub fn sysroot_crates_in<'a>(symbols: impl Iterator<Item = &'a str>) -> SysrootCrates {
    let mut seen: BTreeMap<String, Option<String>> = BTreeMap::new();
    for symbol in symbols {
        let Some(parsed) = Parsed::of(symbol) else {
            continue;
        };
        for root in &parsed.roots {
            let (Some(disambiguator), name) = (&root.disambiguator, &root.name) else {
                continue;
            };
            seen.entry(name.clone())
                .and_modify(|known| {
                    if known.as_ref() != Some(disambiguator) {
                        *known = None;
                    }
                })
                .or_insert_with(|| Some(disambiguator.clone()));
        }
    }
    seen.into_iter()
        .filter(|(name, _)| name != "probe")
        .filter_map(|(name, d)| d.map(|d| (name, d)))
        .collect()
}

/// Every `_R…` symbol in `text` (an LLVM IR file, a symbol list).
pub fn v0_symbols(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| word.starts_with("_R") && word.len() > 2)
}

/// Whether a v0 symbol is an instance of generic code: rustc adds the instantiating crate
/// after the path of exactly those (and of the few functions shared between crates). Legacy
/// names cannot tell.
pub fn is_generic_instance(symbol: &str) -> bool {
    Parsed::of(symbol).is_some_and(|parsed| parsed.instantiated)
}

/// The names drop glue (`core::ptr::…::<T>`, the function that drops a `T`) has had across
/// rustc releases.
pub const DROP_GLUE_NAMES: [&str; 2] = ["drop_in_place", "drop_glue"];

/// What a profile trained with another rustc renames to this toolchain's names.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ToolchainRenames {
    /// (crate, old disambiguator) → new one ([`renames`]).
    pub crates: BTreeMap<(String, String), String>,
    /// This toolchain's name of drop glue (one of [`DROP_GLUE_NAMES`]): records under the
    /// other are renamed to it. `None`: left as they are.
    pub drop_glue: Option<&'static str>,
}

impl ToolchainRenames {
    pub fn is_empty(&self) -> bool {
        self.crates.is_empty() && self.drop_glue.is_none()
    }
}

/// The name drop glue has in `symbols` (a probe's), if any of them is drop glue: the newer
/// name where both appear (a toolchain may keep `drop_in_place` as a wrapper of its glue).
pub fn drop_glue_name_in<'a>(symbols: impl Iterator<Item = &'a str>) -> Option<&'static str> {
    let mut found = None;
    for symbol in symbols {
        let Some(parsed) = Parsed::of(symbol) else {
            continue;
        };
        for &(_, _, name) in &parsed.drop_glue {
            if name == DROP_GLUE_NAMES[1] {
                return Some(name);
            }
            found = Some(name);
        }
    }
    found
}

/// The renames from one toolchain's standard library to another's: (crate, old
/// disambiguator) → new one, for every crate both know that changed.
pub fn renames(then: &SysrootCrates, now: &SysrootCrates) -> BTreeMap<(String, String), String> {
    then.iter()
        .filter_map(|(name, old)| {
            let new = now.get(name)?;
            (new != old).then(|| ((name.clone(), old.clone()), new.clone()))
        })
        .collect()
}

/// `name` (a v0 symbol, or a profile's `unit;symbol`) with the crates of `renames` renamed, drop
/// glue named as this toolchain names it, and its back-references moved to match; `None` when
/// nothing in it is renamed or it does not parse.
pub fn rename(name: &str, renames: &ToolchainRenames) -> Option<String> {
    let (unit, symbol) = match name.rsplit_once(';') {
        Some((unit, symbol)) => (Some(unit), symbol),
        None => (None, name),
    };
    let parsed = Parsed::of(symbol)?;
    // Byte edits of the text after `_R`, in order: (start, end, replacement).
    let mut edits: Vec<(usize, usize, Edit)> = Vec::new();
    for root in &parsed.roots {
        if let (Some(old), Some(span)) = (&root.disambiguator, root.span)
            && let Some(new) = renames.crates.get(&(root.name.clone(), old.clone()))
        {
            edits.push((span.0, span.1, Edit::Text(new.clone())));
        }
    }
    if let Some(now) = renames.drop_glue {
        for &(start, end, then) in &parsed.drop_glue {
            if then != now {
                edits.push((start, end, Edit::Text(format!("{}{now}", now.len()))));
            }
        }
    }
    if edits.is_empty() {
        return None;
    }
    edits.extend(
        parsed
            .backrefs
            .iter()
            .map(|&(start, end, target)| (start, end, Edit::Backref(target))),
    );
    edits.sort_by_key(|edit| edit.0);
    let body = &symbol[2..];
    let mut out = String::with_capacity(symbol.len() + 8);
    out.push_str("_R");
    // (old end, new end) of every edit so far: where a position after it moved.
    let mut moved: Vec<(usize, usize)> = Vec::new();
    let new_position = |moved: &[(usize, usize)], old: usize| -> usize {
        match moved.iter().rev().find(|(end, _)| *end <= old) {
            Some((end, new_end)) => new_end + (old - end),
            None => old,
        }
    };
    let mut at = 0;
    for (start, end, edit) in edits {
        out.push_str(body.get(at..start)?);
        let replacement = match edit {
            Edit::Text(text) => text,
            Edit::Backref(target) => format!("B{}", base62(new_position(&moved, target) as u64)),
        };
        out.push_str(&replacement);
        moved.push((end, out.len() - 2));
        at = end;
    }
    out.push_str(body.get(at..)?);
    (out != symbol).then(|| match unit {
        Some(unit) => format!("{unit};{out}"),
        None => out,
    })
}

/// A profile in llvm-profdata's text format with [`rename`] applied to every function
/// name in it (records, indirect-call targets, temporal traces); returns it and how many
/// records were renamed.
pub fn rename_text_profile(text: &str, renames: &ToolchainRenames) -> (String, usize) {
    let lines: Vec<&str> = text.lines().collect();
    let mut renamed_records = 0;
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    for (at, line) in lines.iter().enumerate() {
        let starts_record = lines.get(at + 1) == Some(&"# Func Hash:");
        let renamed = if starts_record {
            let renamed = rename(line, renames);
            renamed_records += usize::from(renamed.is_some());
            renamed
        } else if line.contains(',') {
            // A temporal trace ([pgo] startup_order): names separated by commas.
            let names: Vec<String> = line
                .split(',')
                .map(|name| rename(name, renames).unwrap_or_else(|| name.to_owned()))
                .collect();
            let joined = names.join(",");
            (joined != *line).then_some(joined)
        } else {
            // An indirect call's target: `name:count`.
            line.rsplit_once(':').and_then(|(target, count)| {
                count.parse::<u64>().ok()?;
                Some(format!("{}:{count}", rename(target, renames)?))
            })
        };
        out.push_str(renamed.as_deref().unwrap_or(line));
        out.push('\n');
    }
    (out, renamed_records)
}

enum Edit {
    Text(String),
    /// A back-reference to this position of the original.
    Backref(usize),
}

/// v0's base-62 number: `_` for 0, else the digits of n − 1 and `_`.
fn base62(n: u64) -> String {
    const DIGITS: &[u8; 62] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    if n == 0 {
        return "_".to_owned();
    }
    let mut value = n - 1;
    let mut digits = Vec::new();
    loop {
        digits.push(DIGITS[(value % 62) as usize]);
        value /= 62;
        if value == 0 {
            break;
        }
    }
    digits.reverse();
    digits.push(b'_');
    String::from_utf8(digits).unwrap_or_default()
}

/// A crate root of a parsed name.
struct Root {
    name: String,
    /// The base-62 digits of `Cs<digits>_`; `None` for a crate without one.
    disambiguator: Option<String>,
    /// Where the digits are, after `_R`.
    span: Option<(usize, usize)>,
}

/// What renaming needs of a v0 name: its crate roots and back-references (start, end,
/// target), positions counted after `_R`.
struct Parsed {
    roots: Vec<Root>,
    backrefs: Vec<(usize, usize, usize)>,
    /// Where drop glue's name (`<length><name>` of `core::ptr::<name>`) is, and which of
    /// [`DROP_GLUE_NAMES`] it is.
    drop_glue: Vec<(usize, usize, &'static str)>,
    /// An instantiating crate follows the path: a generic instance.
    instantiated: bool,
}

impl Parsed {
    fn of(symbol: &str) -> Option<Parsed> {
        let body = symbol.strip_prefix("_R")?;
        // An encoding version (`_R0…`) is not one this reads.
        if body.starts_with(|c: char| c.is_ascii_digit()) {
            return None;
        }
        let mut parser = Parser {
            s: body.as_bytes(),
            at: 0,
            depth: 0,
            roots: Vec::new(),
            backrefs: Vec::new(),
            drop_glue: Vec::new(),
        };
        parser.path()?;
        // The instantiating crate, then perhaps a vendor suffix (`.llvm.123`), left as it is.
        let instantiated = parser
            .peek()
            .is_some_and(|c| c.is_ascii_uppercase() && c != b'E');
        if instantiated {
            parser.path()?;
        }
        Some(Parsed {
            roots: parser.roots,
            backrefs: parser.backrefs,
            drop_glue: parser.drop_glue,
            instantiated,
        })
    }
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
    depth: usize,
    roots: Vec<Root>,
    backrefs: Vec<(usize, usize, usize)>,
    drop_glue: Vec<(usize, usize, &'static str)>,
}

/// Deeper than any real name: a guard against crafted input, not a limit of the grammar.
const MAX_DEPTH: usize = 300;

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.at += 1;
        Some(c)
    }

    fn eat(&mut self, c: u8) -> bool {
        let found = self.peek() == Some(c);
        if found {
            self.at += 1;
        }
        found
    }

    fn enter(&mut self) -> Option<()> {
        self.depth += 1;
        (self.depth <= MAX_DEPTH).then_some(())
    }

    fn base62(&mut self) -> Option<u64> {
        if self.eat(b'_') {
            return Some(0);
        }
        let mut value: u64 = 0;
        loop {
            let c = self.next()?;
            let digit = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'z' => 10 + c - b'a',
                b'A'..=b'Z' => 36 + c - b'A',
                b'_' => return value.checked_add(1),
                _ => return None,
            };
            value = value.checked_mul(62)?.checked_add(u64::from(digit))?;
        }
    }

    fn disambiguator(&mut self) -> Option<Option<(usize, usize)>> {
        if !self.eat(b's') {
            return Some(None);
        }
        let start = self.at;
        self.base62()?;
        Some(Some((start, self.at - 1)))
    }

    /// `0`, or digits not starting with 0: `000` is three numbers (closures' empty names).
    fn decimal(&mut self) -> Option<usize> {
        let start = self.at;
        if self.eat(b'0') {
            return Some(0);
        }
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.at += 1;
        }
        std::str::from_utf8(&self.s[start..self.at])
            .ok()?
            .parse()
            .ok()
    }

    /// `[u] <decimal> [_] <bytes>`: returns the bytes.
    fn undisambiguated_identifier(&mut self) -> Option<&str> {
        self.eat(b'u');
        let len = self.decimal()?;
        self.eat(b'_');
        let start = self.at;
        let end = start.checked_add(len)?;
        let bytes = self.s.get(start..end)?;
        self.at = end;
        std::str::from_utf8(bytes).ok()
    }

    fn identifier(&mut self) -> Option<()> {
        self.disambiguator()?;
        self.undisambiguated_identifier().map(drop)
    }

    fn backref(&mut self, start: usize) -> Option<()> {
        let target = usize::try_from(self.base62()?).ok()?;
        // Back-references point back only; anything else is not a v0 name.
        (target < start).then_some(())?;
        self.backrefs.push((start, self.at, target));
        Some(())
    }

    /// Parses a path; returns it written out (`core::ptr`) when it is made of a crate and
    /// names only (what finds drop glue), else `None`.
    fn path(&mut self) -> Option<Option<String>> {
        self.enter()?;
        let start = self.at;
        let mut plain = None;
        match self.next()? {
            b'C' => {
                let span = self.disambiguator()?;
                let name = self.undisambiguated_identifier()?.to_owned();
                let disambiguator =
                    span.map(|(from, to)| String::from_utf8_lossy(&self.s[from..to]).into_owned());
                plain = Some(name.clone());
                self.roots.push(Root {
                    name,
                    disambiguator,
                    span,
                });
            }
            b'M' => {
                self.disambiguator()?;
                self.path()?;
                self.type_()?;
            }
            b'X' => {
                self.disambiguator()?;
                self.path()?;
                self.type_()?;
                self.path()?;
            }
            b'Y' => {
                self.type_()?;
                self.path()?;
            }
            b'N' => {
                let namespace = self.next()?;
                let parent = self.path()?;
                self.disambiguator()?;
                let name_start = self.at;
                let name = self.undisambiguated_identifier()?.to_owned();
                if namespace == b'v'
                    && parent.as_deref() == Some("core::ptr")
                    && let Some(glue) = DROP_GLUE_NAMES.iter().find(|glue| **glue == name)
                {
                    self.drop_glue.push((name_start, self.at, glue));
                }
                plain = parent.map(|parent| format!("{parent}::{name}"));
            }
            b'I' => {
                self.path()?;
                while !self.eat(b'E') {
                    self.generic_arg()?;
                }
            }
            b'B' => self.backref(start)?,
            _ => return None,
        }
        self.depth -= 1;
        Some(plain)
    }

    fn generic_arg(&mut self) -> Option<()> {
        if self.eat(b'L') {
            return self.base62().map(drop);
        }
        if self.eat(b'K') {
            return self.const_();
        }
        self.type_()
    }

    fn lifetime(&mut self) -> Option<()> {
        if self.eat(b'L') {
            self.base62()?;
        }
        Some(())
    }

    fn binder(&mut self) -> Option<()> {
        if self.eat(b'G') {
            self.base62()?;
        }
        Some(())
    }

    fn type_(&mut self) -> Option<()> {
        self.enter()?;
        let start = self.at;
        match self.peek()? {
            b'a'..=b'z' => self.at += 1,
            b'C' | b'M' | b'X' | b'Y' | b'N' | b'I' => {
                self.path()?;
            }
            _ => match self.next()? {
                b'A' => {
                    self.type_()?;
                    self.const_()?;
                }
                b'S' | b'P' | b'O' => self.type_()?,
                b'R' | b'Q' => {
                    self.lifetime()?;
                    self.type_()?;
                }
                b'F' => {
                    self.binder()?;
                    self.eat(b'U');
                    if self.eat(b'K') && !self.eat(b'C') {
                        self.undisambiguated_identifier()?;
                    }
                    while !self.eat(b'E') {
                        self.type_()?;
                    }
                    self.type_()?;
                }
                b'D' => {
                    self.binder()?;
                    while !self.eat(b'E') {
                        self.path()?;
                        while self.eat(b'p') {
                            self.undisambiguated_identifier()?;
                            self.type_()?;
                        }
                    }
                    self.lifetime()?;
                }
                b'T' => {
                    while !self.eat(b'E') {
                        self.type_()?;
                    }
                }
                b'B' => self.backref(start)?,
                _ => return None,
            },
        }
        self.depth -= 1;
        Some(())
    }

    fn hex_digits(&mut self) -> Option<()> {
        while !self.eat(b'_') {
            if !self.next()?.is_ascii_hexdigit() {
                return None;
            }
        }
        Some(())
    }

    fn const_(&mut self) -> Option<()> {
        self.enter()?;
        let start = self.at;
        match self.next()? {
            b'p' => {}
            b'B' => self.backref(start)?,
            // Integers (signed ones perhaps negative), bool, char, str: hex digits and `_`.
            b'a' | b's' | b'l' | b'x' | b'n' | b'i' => {
                self.eat(b'n');
                self.hex_digits()?;
            }
            b'h' | b't' | b'm' | b'y' | b'o' | b'j' | b'b' | b'c' | b'e' => self.hex_digits()?,
            b'R' | b'Q' => {
                if self.eat(b'e') {
                    self.hex_digits()?;
                } else {
                    self.const_()?;
                }
            }
            b'A' | b'T' => {
                while !self.eat(b'E') {
                    self.const_()?;
                }
            }
            b'V' => {
                self.path()?;
                match self.next()? {
                    b'U' => {}
                    b'T' => {
                        while !self.eat(b'E') {
                            self.const_()?;
                        }
                    }
                    b'S' => {
                        while !self.eat(b'E') {
                            self.identifier()?;
                            self.const_()?;
                        }
                    }
                    _ => return None,
                }
            }
            _ => return None,
        }
        self.depth -= 1;
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // One function's instance as rustc 1.95.0 and the 1.97.0 nightly name it (v0, the same
    // crate identity for `l`): only the standard library's disambiguators differ.
    const STABLE: &str = "_RINvNtNtNtCsgEmfK2I1SDS_4core5slice4sort6stable14driftsort_mainyNvYyNtNtB8_3cmp10PartialOrd2ltINtNtCslNYArtu3iFV_5alloc3vec3VecyEECsintiYeUIQKy_1l";
    const NIGHTLY: &str = "_RINvNtNtNtCs8NwYtU1Mohg_4core5slice4sort6stable14driftsort_mainyNvYyNtNtB8_3cmp10PartialOrd2ltINtNtCsbEht8wFNRx7_5alloc3vec3VecyEECsintiYeUIQKy_1l";

    fn crates(pairs: &[(&str, &str)]) -> SysrootCrates {
        pairs
            .iter()
            .map(|(n, d)| (n.to_string(), d.to_string()))
            .collect()
    }

    /// The crate renames alone, as a build with another rustc has them.
    fn renames(then: &SysrootCrates, now: &SysrootCrates) -> ToolchainRenames {
        ToolchainRenames {
            crates: super::renames(then, now),
            drop_glue: None,
        }
    }

    // The probe's drop glue for `Option<String>` as rustc 1.95.0 and the 1.97.0 nightly name
    // it: the crates' disambiguators and the function's name differ.
    const GLUE_STABLE: &str = "_RINvNtCsgEmfK2I1SDS_4core3ptr13drop_in_placeINtNtB4_6option6OptionNtNtCslNYArtu3iFV_5alloc6string6StringEECsXXId2UFtzW_5probe";
    const GLUE_NIGHTLY: &str = "_RINvNtCs8NwYtU1Mohg_4core3ptr9drop_glueINtNtB4_6option6OptionNtNtCsbEht8wFNRx7_5alloc6string6StringEECs9Nzo2GONLPA_5probe";
    // And of `(String, String)`: the second `String` refers back past the function's name.
    const PAIR_STABLE: &str = "_RINvNtCsgEmfK2I1SDS_4core3ptr13drop_in_placeTNtNtCslNYArtu3iFV_5alloc6string6StringBH_EECsXXId2UFtzW_5probe";
    const PAIR_NIGHTLY: &str = "_RINvNtCs8NwYtU1Mohg_4core3ptr9drop_glueTNtNtCsbEht8wFNRx7_5alloc6string6StringBC_EECs9Nzo2GONLPA_5probe";

    #[test]
    fn drop_glue_is_named_as_this_toolchain_names_it() {
        assert_eq!(
            drop_glue_name_in([STABLE, GLUE_STABLE].into_iter()),
            Some("drop_in_place")
        );
        assert_eq!(
            drop_glue_name_in([GLUE_NIGHTLY].into_iter()),
            Some("drop_glue")
        );
        assert_eq!(drop_glue_name_in([STABLE, NIGHTLY].into_iter()), None);
        assert_eq!(
            drop_glue_name_in([GLUE_STABLE, GLUE_NIGHTLY].into_iter()),
            Some("drop_glue")
        );
        let stable = sysroot_crates_in([GLUE_STABLE].into_iter());
        let nightly = sysroot_crates_in([GLUE_NIGHTLY].into_iter());
        // The probe's own crate (left out of what is recorded: no profile names it).
        let probe = |from: &str, to: &str| (("probe".to_owned(), from.to_owned()), to.to_owned());
        let to_nightly = ToolchainRenames {
            crates: super::renames(&stable, &nightly)
                .into_iter()
                .chain([probe("XXId2UFtzW", "9Nzo2GONLPA")])
                .collect(),
            drop_glue: Some("drop_glue"),
        };
        // The name's length changes, and the back-references after it move: the very name
        // the nightly gives it.
        assert_eq!(
            rename(GLUE_STABLE, &to_nightly).as_deref(),
            Some(GLUE_NIGHTLY)
        );
        let to_stable = ToolchainRenames {
            crates: super::renames(&nightly, &stable)
                .into_iter()
                .chain([probe("9Nzo2GONLPA", "XXId2UFtzW")])
                .collect(),
            drop_glue: Some("drop_in_place"),
        };
        assert_eq!(
            rename(GLUE_NIGHTLY, &to_stable).as_deref(),
            Some(GLUE_STABLE)
        );
        // A back-reference after the renamed name (the tuple's second `String`) moves with it.
        assert_eq!(
            rename(PAIR_STABLE, &to_nightly).as_deref(),
            Some(PAIR_NIGHTLY)
        );
        assert_eq!(
            rename(PAIR_NIGHTLY, &to_stable).as_deref(),
            Some(PAIR_STABLE)
        );
        // Drop glue alone, the crates kept; a name already this toolchain's is left alone.
        let glue_only = ToolchainRenames {
            crates: BTreeMap::new(),
            drop_glue: Some("drop_glue"),
        };
        let renamed = rename(GLUE_STABLE, &glue_only).unwrap();
        assert_eq!(
            format!("{:#}", rustc_demangle::demangle(&renamed)),
            "core::ptr::drop_glue::<core::option::Option<alloc::string::String>>"
        );
        assert_eq!(rename(&renamed, &glue_only), None);
        // A function of that name elsewhere is another function.
        assert_eq!(
            rename("_RNvNtCsintiYeUIQKy_1l3ptr13drop_in_place", &glue_only),
            None
        );
        assert_eq!(rename(STABLE, &glue_only), None);
    }

    #[test]
    fn renames_the_standard_librarys_crates_to_another_toolchains() {
        let then = sysroot_crates_in([STABLE].into_iter());
        assert_eq!(
            then,
            crates(&[
                ("alloc", "lNYArtu3iFV"),
                ("core", "gEmfK2I1SDS"),
                ("l", "intiYeUIQKy")
            ])
        );
        let now = crates(&[("alloc", "bEht8wFNRx7"), ("core", "8NwYtU1Mohg")]);
        let renames = renames(&then, &now);
        assert_eq!(rename(STABLE, &renames).as_deref(), Some(NIGHTLY));
        // A profile's local name keeps its unit.
        assert_eq!(
            rename(&format!("l.d6111b54dbaa1178-cgu.0;{STABLE}"), &renames),
            Some(format!("l.d6111b54dbaa1178-cgu.0;{NIGHTLY}"))
        );
        // Nothing of a crate not renamed; nothing of a name that is not v0.
        assert_eq!(rename("_RNvCsintiYeUIQKy_1l4work", &renames), None);
        assert_eq!(rename("_ZN1l4work17h0cb799c2fd354b74E", &renames), None);
    }

    #[test]
    fn a_renamed_crate_of_another_length_moves_the_back_references_after_it() {
        let then = crates(&[("core", "gEmfK2I1SDS")]);
        for new in ["1", "", "zzzzzzzzzz", "8NwYtU1Mohg"] {
            let renames = renames(&then, &crates(&[("core", new)]));
            let renamed = rename(STABLE, &renames).unwrap();
            // rustc-demangle follows the back-references: the same path, the new crate.
            let before = format!("{:#}", rustc_demangle::demangle(STABLE));
            let after = format!("{:#}", rustc_demangle::demangle(&renamed));
            assert_eq!(before, after, "{renamed}");
            assert!(
                before.contains("<u64 as core::cmp::PartialOrd>::lt"),
                "{before}"
            );
            assert!(renamed.contains(&format!("Cs{new}_4core")), "{renamed}");
            // And back again.
            let back = self::renames(&crates(&[("core", new)]), &then);
            assert_eq!(rename(&renamed, &back).as_deref(), Some(STABLE));
        }
    }

    #[test]
    fn a_text_profile_is_renamed_records_and_call_targets_alike() {
        let then = crates(&[("core", "gEmfK2I1SDS"), ("alloc", "lNYArtu3iFV")]);
        let now = crates(&[("core", "8NwYtU1Mohg"), ("alloc", "bEht8wFNRx7")]);
        let text = format!(
            ":ir\n{STABLE}\n# Func Hash:\n7\n# Num Counters:\n1\n# Counter Values:\n5\n\
             # Num Value Kinds:\n1\n# ValueKind = IPVK_IndirectCallTarget:\n0\n\
             # NumValueSites:\n1\n1\n{STABLE}:5\n\n_RNvCsintiYeUIQKy_1l4work\n# Func Hash:\n\
             8\n# Num Counters:\n1\n# Counter Values:\n3\n"
        );
        let (renamed, count) = rename_text_profile(&text, &renames(&then, &now));
        assert_eq!(count, 1);
        assert_eq!(renamed, text.replace(STABLE, NIGHTLY));
        // A temporal trace: `name,name,` (llvm-profdata writes a trailing comma).
        let traces = format!(
            ":ir\n:temporal_prof_traces\n# Num Temporal Profile Traces:\n1\n\
             # Temporal Profile Trace Stream Size:\n1\n# Weight:\n1\n\
             {STABLE},_RNvCsintiYeUIQKy_1l4work,\n"
        );
        let (renamed, _) = rename_text_profile(&traces, &renames(&then, &now));
        assert_eq!(renamed, traces.replace(STABLE, NIGHTLY));
    }

    #[test]
    fn nested_closures_names_are_numbers_of_their_own() {
        // Three closures' empty names, `0` each, after a disambiguator: `s_000`.
        let name = "_RINvNtNtCsjrHSEGnQ3l9_3std3sys9backtrace28___rust_begin_short_backtraceNCNCNCINvNtNtB6_6thread9lifecycle15spawn_uncheckedNCNvNtCsjFtcwGIUzkO_12pgo_build_rt13signal_thread7install0uEs_000uEB21_";
        let renames = renames(&crates(&[("std", "jrHSEGnQ3l9")]), &crates(&[("std", "1")]));
        let renamed = rename(name, &renames).unwrap();
        assert_eq!(
            format!("{:#}", rustc_demangle::demangle(name)),
            format!("{:#}", rustc_demangle::demangle(&renamed))
        );
    }

    #[test]
    fn generic_instances_carry_their_instantiating_crate() {
        assert!(is_generic_instance(STABLE));
        assert!(!is_generic_instance("_RNvCsintiYeUIQKy_1l4work"));
        assert!(!is_generic_instance("_ZN1l4work17h0cb799c2fd354b74E"));
        assert!(!is_generic_instance("_R"));
    }

    #[test]
    fn base62_is_v0s() {
        assert_eq!(base62(0), "_");
        assert_eq!(base62(1), "0_");
        assert_eq!(base62(9), "8_");
        assert_eq!(base62(63), "10_");
    }

    #[test]
    fn what_does_not_parse_is_left_alone() {
        let renames = renames(
            &crates(&[("core", "gEmfK2I1SDS")]),
            &crates(&[("core", "1")]),
        );
        for broken in [
            "_R",
            "_RC",
            "_RNvCsgEmfK2I1SDS_4cor",
            "_RB_",
            "_R0C4core",
            "_RIC4coreB9999_E",
        ] {
            assert_eq!(rename(broken, &renames), None, "{broken}");
        }
        // Deep nesting ends, no overflow.
        let deep = format!(
            "_R{}Csg_4core{}",
            "INvCsg_4core1a".repeat(2000),
            "E".repeat(2000)
        );
        assert_eq!(rename(&deep, &renames), None);
    }
}
