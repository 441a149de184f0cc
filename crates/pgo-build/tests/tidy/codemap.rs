//! The codemap kept true: ARCHITECTURE.md names every command's code and tests, every file of
//! `tests/cli/`, and only files that exist; no two source files share a name.

use std::collections::BTreeMap;
use std::path::Path;

use super::sources;

/// A file's name says what it is without its folder: two `workload.rs` or `file.rs` in two
/// layers make a newcomer open the wrong one (`mod.rs` aside; a command's file is named by
/// its command, which is unique).
#[test]
fn no_two_source_files_share_a_name() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for source in sources(&src).values() {
        let name = source
            .path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if name != "mod.rs" {
            let relative = source.path.strip_prefix(&src).unwrap();
            by_name
                .entry(name)
                .or_default()
                .push(relative.display().to_string());
        }
    }
    let shared: Vec<String> = by_name
        .into_values()
        .filter(|paths| paths.len() > 1)
        .map(|paths| paths.join(" and "))
        .collect();
    assert!(
        shared.is_empty(),
        "files sharing a name: {}",
        shared.join("; ")
    );
}

/// The codemap stays true through renames: every `.rs` file ARCHITECTURE.md names is a file of
/// the crate's sources or tests. A bare name in a folder's paragraph (one opening with
/// "**`exec/`** —") must be in that folder, so a stale `workload.rs` there is not excused by
/// `config/workload.rs`; a name with a folder must end a path of that folder.
#[test]
fn every_file_architecture_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let architecture = std::fs::read_to_string(root.join("../../ARCHITECTURE.md")).unwrap();
    let mut files = Vec::new();
    let mut dirs = vec![
        root.join("src"),
        root.join("tests"),
        root.join("../pgo-build-rt"),
    ];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path.to_string_lossy().into_owned());
            }
        }
    }
    let src = root.join("src").to_string_lossy().into_owned();
    let mut folder: Option<String> = None;
    let (mut named, mut missing) = (0, Vec::new());
    for line in architecture.lines() {
        if line.starts_with('#') {
            folder = None;
        } else if let Some(rest) = line.strip_prefix("**`")
            && let Some((name, _)) = rest.split_once("`**")
            && name.ends_with('/')
        {
            folder = Some(name.to_owned());
        }
        let names = line
            .split('`')
            .skip(1)
            .step_by(2)
            .flat_map(|code| code.split(|c: char| c.is_whitespace() || c == ','))
            .map(|word| word.split("::").next().unwrap_or(word))
            .filter(|word| word.ends_with(".rs") && !word.contains('*'));
        for name in names {
            named += 1;
            let within = match (&folder, name.contains('/')) {
                (Some(folder), false) => format!("{src}/{folder}"),
                _ => String::new(),
            };
            let exists = files
                .iter()
                .any(|file| file.starts_with(&within) && file.ends_with(&format!("/{name}")));
            if !exists {
                missing.push(match &folder {
                    Some(folder) if !within.is_empty() => format!("{name} (in {folder})"),
                    _ => name.to_owned(),
                });
            }
        }
    }
    // The codemap names well over a hundred files: far fewer means the reading broke.
    assert!(
        named > 100,
        "read only {named} file names from ARCHITECTURE.md"
    );
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names files that do not exist: {missing:?}"
    );
}

#[test]
fn architecture_names_every_cli_test_file() {
    // ARCHITECTURE.md's Tests section lists the files of tests/cli/ by command family; a file
    // it does not name is a command's tests a newcomer cannot find from there.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let architecture = std::fs::read_to_string(root.join("../../ARCHITECTURE.md")).unwrap();
    // The list itself, not the whole section: "a `compare` killed" elsewhere names no file.
    let list = architecture
        .split("\n## Tests\n")
        .nth(1)
        .and_then(|section| section.split("one command family (").nth(1))
        .and_then(|rest| rest.split("`tests/tidy.rs` checks that this list").next())
        .expect("ARCHITECTURE.md's Tests section lists the command families");
    let mut unnamed: Vec<String> = std::fs::read_dir(root.join("tests/cli"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "rs"))
        .filter_map(|path| Some(path.file_stem()?.to_str()?.to_owned()))
        .filter(|name| name != "main" && !list.contains(&format!("`{name}`")))
        .collect();
    unnamed.sort();
    assert!(
        unnamed.is_empty(),
        "ARCHITECTURE.md's Tests section does not name tests/cli/{{{}}}.rs",
        unnamed.join(",")
    );
}

/// A command's home is found from its name: ARCHITECTURE.md's table has a row for every command
/// of `cli.rs`, its entry function is in the file the row names, and the test file it names
/// runs the command.
#[test]
fn every_command_has_a_row_naming_its_code_and_its_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let architecture = std::fs::read_to_string(root.join("../../ARCHITECTURE.md")).unwrap();
    let cli = std::fs::read_to_string(root.join("src/cli.rs")).unwrap();
    // The variants of `pub enum Command`, in clap's kebab-case.
    let body = cli
        .split("pub enum Command {")
        .nth(1)
        .and_then(|rest| rest.split("\n}").next())
        .expect("cli.rs has `pub enum Command`");
    let commands: Vec<String> = body
        .lines()
        .filter_map(|line| {
            let line = line.strip_prefix("    ")?;
            let name: String = line
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            (name.starts_with(|c: char| c.is_ascii_uppercase())
                && line[name.len()..].starts_with([',', '(', ' ']))
            .then_some(name)
        })
        .map(|name| {
            name.chars()
                .enumerate()
                .fold(String::new(), |mut out, (i, c)| {
                    if c.is_ascii_uppercase() && i > 0 {
                        out.push('-');
                    }
                    out.push(c.to_ascii_lowercase());
                    out
                })
        })
        .collect();
    assert!(commands.len() >= 15, "{commands:?}");
    let rows: Vec<Vec<String>> = architecture
        .lines()
        .filter(|line| line.starts_with("| `"))
        .map(|line| line.split('|').map(|cell| cell.trim().to_owned()).collect())
        .collect();
    let mut problems = Vec::new();
    for command in &commands {
        let Some(row) = rows.iter().find(|row| row[1] == format!("`{command}`")) else {
            problems.push(format!("no row for `{command}`"));
            continue;
        };
        let ticked = |cell: &str| -> Vec<String> {
            cell.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect()
        };
        let (entries, sources, tests) = (ticked(&row[2]), ticked(&row[3]), ticked(&row[4]));
        // The files a row names: a folder's named files, or the one file.
        let base = sources.first().cloned().unwrap_or_default();
        let files: Vec<std::path::PathBuf> = if base.ends_with('/') {
            sources[1..]
                .iter()
                .map(|f| root.join("src").join(&base).join(f))
                .collect()
        } else {
            sources.iter().map(|f| root.join("src").join(f)).collect()
        };
        let text: String = files
            .iter()
            .map(|file| {
                std::fs::read_to_string(file).unwrap_or_else(|_| {
                    problems.push(format!("`{command}`: {} does not exist", file.display()));
                    String::new()
                })
            })
            .collect();
        for entry in &entries {
            if !text.contains(&format!("pub fn {entry}(")) {
                problems.push(format!("`{command}`: no `pub fn {entry}(` in {sources:?}"));
            }
        }
        for test in &tests {
            let runs = std::fs::read_to_string(root.join("tests/cli").join(test))
                .unwrap_or_default()
                .contains(&format!("\"{command}\""));
            if !runs {
                problems.push(format!("`{command}`: tests/cli/{test} does not run it"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
