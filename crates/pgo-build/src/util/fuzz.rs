//! Test support for the no-panic properties of every reader of a file pgo-build reads: inputs
//! made by mutating real files (bytes set, cut, removed, inserted, repeated, and values that
//! readers trip on spliced in), so most mutants stay close to what the readers parse, and
//! [`no_panic_or_hang`], which runs a reader on one input in a thread of its own and turns a
//! panic or a hang into a test failure.
//!
//! Each property runs [`CASES`] inputs (proptest, a fixed seed per run is not needed: a
//! failure prints the shrunk input). The seeds are real files from a run of the `twobins`
//! fixture, in `tests/fixtures/seeds/`.

use std::time::Duration;

use proptest::prelude::*;
use proptest::sample::Index;

/// Inputs each property tries.
pub const CASES: u32 = 2000;

/// How long one input may take before it counts as a hang.
const HANG: Duration = Duration::from_secs(20);

/// Values readers trip on: empty and huge numbers, negative ones, NaN written as text, deep
/// nesting, other types where one is expected, merge-conflict markers, a NUL.
const AWKWARD: &[&str] = &[
    "",
    "0",
    "-1",
    "18446744073709551616",
    "-9223372036854775809",
    "1e309",
    "NaN",
    "\"\"",
    "null",
    "[]",
    "{}",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
    "\"\\u0000\"",
    "true",
    "<<<<<<< HEAD\n",
    "=======\n",
    ">>>>>>> other\n",
    "\u{0}",
    "é",
    "\n",
    "#",
    "=",
];

#[derive(Debug, Clone)]
enum Edit {
    Set(Index, u8),
    Cut(Index),
    Remove(Index, Index),
    Insert(Index, Vec<u8>),
    Repeat(Index, Index),
}

fn apply(seed: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut bytes = seed.to_vec();
    for edit in edits {
        let len = bytes.len();
        let at = |index: &Index| if len == 0 { 0 } else { index.index(len + 1) };
        match edit {
            Edit::Set(index, byte) if len > 0 => {
                let i = index.index(len);
                bytes[i] = *byte;
            }
            Edit::Set(..) => {}
            Edit::Cut(index) => bytes.truncate(at(index)),
            Edit::Remove(from, span) => {
                let from = at(from);
                let to = (from + span.index(17)).min(len);
                bytes.drain(from..to);
            }
            Edit::Insert(index, inserted) => {
                let i = at(index);
                bytes.splice(i..i, inserted.iter().copied());
            }
            Edit::Repeat(from, span) => {
                let from = at(from);
                let to = (from + span.index(65)).min(len);
                let copy = bytes[from..to].to_vec();
                bytes.splice(to..to, copy);
            }
        }
    }
    bytes
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        3 => (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Edit::Set(i, b)),
        1 => any::<Index>().prop_map(Edit::Cut),
        2 => (any::<Index>(), any::<Index>()).prop_map(|(i, n)| Edit::Remove(i, n)),
        2 => (any::<Index>(), prop::collection::vec(any::<u8>(), 1..12))
            .prop_map(|(i, bytes)| Edit::Insert(i, bytes)),
        3 => (any::<Index>(), prop::sample::select(AWKWARD))
            .prop_map(|(i, text)| Edit::Insert(i, text.as_bytes().to_vec())),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(i, n)| Edit::Repeat(i, n)),
    ]
}

/// Mutants of `seed` (one to eight edits each), and now and then bytes of no shape at all.
pub fn mutants(seed: &[u8]) -> impl Strategy<Value = Vec<u8>> + use<> {
    let seed = seed.to_vec();
    prop_oneof![
        9 => prop::collection::vec(edit(), 1..8).prop_map(move |edits| apply(&seed, &edits)),
        1 => prop::collection::vec(any::<u8>(), 0..256),
    ]
}

/// One edit of a text's lines: line formats break where a line goes missing, comes twice,
/// is emptied or swaps places, which byte edits rarely hit.
#[derive(Debug, Clone)]
enum LineEdit {
    Drop(Index),
    Double(Index),
    Empty(Index),
    Swap(Index, Index),
    Replace(Index, &'static str),
}

fn apply_to_lines(seed: &str, edits: &[LineEdit]) -> String {
    let mut lines: Vec<&str> = seed.split('\n').collect();
    for edit in edits {
        let len = lines.len();
        if len == 0 {
            break;
        }
        match edit {
            LineEdit::Drop(i) => {
                lines.remove(i.index(len));
            }
            LineEdit::Double(i) => {
                let i = i.index(len);
                lines.insert(i, lines[i]);
            }
            LineEdit::Empty(i) => lines[i.index(len)] = "",
            LineEdit::Swap(a, b) => lines.swap(a.index(len), b.index(len)),
            LineEdit::Replace(i, text) => lines[i.index(len)] = text,
        }
    }
    lines.join("\n")
}

fn line_edit() -> impl Strategy<Value = LineEdit> {
    prop_oneof![
        any::<Index>().prop_map(LineEdit::Drop),
        any::<Index>().prop_map(LineEdit::Double),
        any::<Index>().prop_map(LineEdit::Empty),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| LineEdit::Swap(a, b)),
        (any::<Index>(), prop::sample::select(AWKWARD)).prop_map(|(i, t)| LineEdit::Replace(i, t)),
    ]
}

/// Mutants of a text file, as text (invalid UTF-8 replaced: these readers take `&str`): byte
/// edits, line edits, or both.
pub fn text_mutants(seed: &str) -> impl Strategy<Value = String> + use<> {
    let (by_line, both) = (seed.to_owned(), seed.to_owned());
    prop_oneof![
        mutants(seed.as_bytes()).prop_map(|bytes| String::from_utf8_lossy(&bytes).into_owned()),
        prop::collection::vec(line_edit(), 1..6)
            .prop_map(move |edits| apply_to_lines(&by_line, &edits)),
        (
            prop::collection::vec(line_edit(), 1..4),
            prop::collection::vec(edit(), 1..4)
        )
            .prop_map(move |(lines, bytes)| {
                let text = apply_to_lines(&both, &lines);
                String::from_utf8_lossy(&apply(text.as_bytes(), &bytes)).into_owned()
            }),
    ]
}

/// The proptest configuration of these properties: [`CASES`] inputs, no files of failures
/// written into the source tree.
pub fn config() -> ProptestConfig {
    ProptestConfig {
        cases: CASES,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Runs `read` on one input in a thread of its own: a panic fails the property (with the
/// input, shrunk), and so does taking longer than [`HANG`].
pub fn no_panic_or_hang<T: Send + 'static>(read: impl FnOnce() -> T + Send + 'static) {
    within(HANG, read)
}

fn within<T: Send + 'static>(hang: Duration, read: impl FnOnce() -> T + Send + 'static) {
    let (sender, receiver) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let _ = sender.send(read());
    });
    match receiver.recv_timeout(hang) {
        Ok(_) => {
            let _ = reader.join();
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            let panic = reader.join().err();
            let message = panic
                .as_ref()
                .and_then(|p| {
                    p.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                })
                .unwrap_or_default();
            panic!("the reader panicked: {message}");
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("the reader took more than {hang:?}: a hang")
        }
    }
}

/// Mutants of a seed file of `tests/fixtures/seeds/` (see [`mutants`]).
pub fn seed_mutants(name: &str) -> impl Strategy<Value = Vec<u8>> + use<> {
    mutants(seed(name).as_bytes())
}

/// A seed file of `tests/fixtures/seeds/`.
pub fn seed(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/seeds")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_or_hanging_reader_fails() {
        let panicked = std::panic::catch_unwind(|| no_panic_or_hang(|| panic!("boom")));
        assert!(panicked.is_err());
        let hung = std::panic::catch_unwind(|| {
            within(Duration::from_millis(50), || {
                std::thread::sleep(Duration::from_secs(2));
            })
        });
        let message = hung.unwrap_err();
        let text = message
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        assert!(text.contains("a hang"), "{text}");
        no_panic_or_hang(|| 1 + 1);
    }
}
