//! A function's source text, found without parsing Rust: `fn name` in the file's code (string
//! literals, character literals and comments blanked out first), then its body to the matching
//! brace. `profile check` compares these between the sources a profile was trained on and the
//! current ones, so a changed file whose hot functions did not change is told apart from one
//! whose did. Every item named `name` in the file counts together: impls of several types with
//! a method of one name are one fingerprint.

use crate::util::names::closing_angle;

/// A hash of every `fn name` item in `source` (its signature and body), in order; `None` when
/// there is none.
pub fn fingerprint(source: &str, name: &str) -> Option<String> {
    let code = blank_literals_and_comments(source);
    let texts: Vec<&str> = items(&code, name)
        .into_iter()
        .map(|(at, end)| &source[at..end])
        .collect();
    if texts.is_empty() {
        return None;
    }
    Some(crate::util::files::sha256_hex(texts.join("\n").as_bytes())[..16].to_owned())
}

/// Whether some `fn name` item in `source` is generic over a type: a type or const parameter
/// (`fn f<T>`, not only lifetimes), or `impl Trait` among its arguments. Its instances are
/// compiled in the crates that use it, with their types. The enclosing `impl`'s parameters
/// are not seen here.
pub fn is_generic(source: &str, name: &str) -> bool {
    let code = blank_literals_and_comments(source);
    items(&code, name).into_iter().any(|(at, end)| {
        let item = &code[at..end];
        let signature = &item[..item.find(['{', ';']).unwrap_or(item.len())];
        let after_name = signature[3..].trim_start()[name.len()..].trim_start();
        let type_parameter = after_name.strip_prefix('<').is_some_and(|rest| {
            let list = &rest[..closing_angle(rest).unwrap_or(rest.len())];
            list.split(',')
                .map(str::trim)
                .any(|p| !p.is_empty() && !p.starts_with('\''))
        });
        // `impl Trait` among the arguments, not in the return type.
        let arguments = signature.split("->").next().unwrap_or(signature);
        type_parameter || arguments.contains("impl ")
    })
}

/// Where each `fn name` item of `code` (a source with its literals and comments blanked out, byte
/// for byte) starts and ends.
fn items(code: &str, name: &str) -> Vec<(usize, usize)> {
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("fn ").map(|n| from + n) {
        from = at + 3;
        let before_ok = at == 0 || !is_ident(bytes[at - 1]);
        let rest = code[at + 3..].trim_start();
        let name_at = code.len() - rest.len();
        let after = name_at + name.len();
        if !before_ok || !rest.starts_with(name) || bytes.get(after).is_some_and(|b| is_ident(*b)) {
            continue;
        }
        let Some(end) = item_end(bytes, after) else {
            continue;
        };
        found.push((at, end));
        from = end;
    }
    found
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Where the item whose name ends at `from` ends: after its body's closing brace, or after
/// the `;` of a declaration without one.
fn item_end(code: &[u8], from: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, b) in code.iter().enumerate().skip(from) {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            b';' if depth == 0 => return Some(i + 1),
            _ => {}
        }
    }
    None
}

/// `source` with the contents of string and character literals and of comments replaced by
/// spaces (byte for byte, so offsets stay), so braces and `fn` in them are not code.
fn blank_literals_and_comments(source: &str) -> String {
    let bytes = source.as_bytes();
    let mut out = bytes.to_vec();
    let mut i = 0;
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        // `to` may fall before `from` in a file cut off inside a literal's opening: nothing.
        for b in out.get_mut(from..to.min(bytes.len())).into_iter().flatten() {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    };
    while i < bytes.len() {
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                let end = source[i..].find('\n').map_or(bytes.len(), |n| i + n);
                blank(&mut out, i, end);
                i = end;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                let mut j = i;
                while j < bytes.len() {
                    if bytes[j..].starts_with(b"/*") {
                        depth += 1;
                        j += 2;
                    } else if bytes[j..].starts_with(b"*/") {
                        depth -= 1;
                        j += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        j += 1;
                    }
                }
                blank(&mut out, i, j);
                i = j;
            }
            b'r' if !(i > 0 && is_ident(bytes[i - 1]))
                && matches!(bytes.get(i + 1), Some(b'"' | b'#')) =>
            {
                let hashes = bytes[i + 1..].iter().take_while(|b| **b == b'#').count();
                let open = i + 1 + hashes;
                if bytes.get(open) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let close = format!("\"{}", "#".repeat(hashes));
                let end = source[open + 1..]
                    .find(&close)
                    .map_or(bytes.len(), |n| open + 1 + n + close.len());
                blank(&mut out, open + 1, end.saturating_sub(close.len()));
                i = end;
            }
            b'"' => {
                let mut j = i + 1;
                while j < bytes.len() && bytes[j] != b'"' {
                    j += if bytes[j] == b'\\' { 2 } else { 1 };
                }
                blank(&mut out, i + 1, j);
                i = j + 1;
            }
            // A character literal ('x', '\n', '\u{7b}'), not a lifetime ('a).
            b'\'' => {
                let end = if bytes.get(i + 1) == Some(&b'\\') {
                    source[i + 2..].find('\'').map(|n| i + 2 + n)
                } else {
                    let width = source[i + 1..].chars().next().map_or(1, char::len_utf8);
                    (bytes.get(i + 1 + width) == Some(&b'\'')).then_some(i + 1 + width)
                };
                match end {
                    Some(end) => {
                        blank(&mut out, i + 1, end);
                        i = end + 1;
                    }
                    None => i += 1,
                }
            }
            _ => i += 1,
        }
    }
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = r##"
/// Counts words; "fn words" in a comment is not the item.
pub fn words(line: &str) -> usize {
    let braces = "{{ not code }}";
    let raw = r#"fn words() { "#;
    let c = '{';
    line.split(|ch: char| ch == ' ' || ch == '}').filter(|w: &&'static str| !w.is_empty()).count()
}

fn words_too() -> usize { 1 }

impl Table {
    fn words(&self) -> usize { 2 }
}
"##;

    #[test]
    fn a_function_is_found_past_literals_comments_and_lifetimes() {
        let base = fingerprint(SOURCE, "words").unwrap();
        // Another function of the file changes, and nothing else: the same fingerprint.
        let other = SOURCE.replace(
            "fn words_too() -> usize { 1 }",
            "fn words_too() -> usize { 7 }",
        );
        assert_eq!(fingerprint(&other, "words").unwrap(), base);
        // Its body changes: another one; so does a method of the same name.
        let body = SOURCE.replace("!w.is_empty()", "w.len() > 1");
        assert_ne!(fingerprint(&body, "words").unwrap(), base);
        let method = SOURCE.replace("{ 2 }", "{ 3 }");
        assert_ne!(fingerprint(&method, "words").unwrap(), base);
        assert!(fingerprint(SOURCE, "missing").is_none());
        assert!(fingerprint("fn f();", "f").is_some());
    }

    #[test]
    fn a_function_generic_over_a_type_is_told_from_one_over_lifetimes_only() {
        assert!(!is_generic(SOURCE, "words"));
        assert!(is_generic("fn run<'a, D: DataT>(x: &'a D) {}", "run"));
        assert!(is_generic("fn f<const N: usize>() {}", "f"));
        assert!(is_generic(
            "fn f(it: impl Iterator<Item = u8>) -> u8 { 0 }",
            "f"
        ));
        assert!(!is_generic("fn f<'a>(x: &'a str) -> &'a str { x }", "f"));
        // A body that names generics does not make the function generic.
        assert!(!is_generic("fn f() { let v: Vec<u8> = g::<u8>(); }", "f"));
        assert!(!is_generic("fn f() -> u8 { /* fn f<T>() */ 0 }", "f"));
        assert!(!is_generic(
            "fn f(x: u8) -> impl Iterator<Item = u8> { 0..x }",
            "f"
        ));
    }
}
