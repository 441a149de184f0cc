//! The checks of `tidy.rs` themselves, on small trees written here: each kind of problem is
//! found.

use super::*;

fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

#[test]
fn a_clean_tree_has_no_problems() {
    let dir = tree(&[
        (
            "main.rs",
            "//! main\nmod a;\nmod b;\nfn main() { a::f(); }\n",
        ),
        (
            "a/mod.rs",
            "//! a\npub mod x;\npub fn f() { x::g(); crate::b::h(); }\n",
        ),
        ("a/x.rs", "//! x\npub fn g() {}\n"),
        (
            "b.rs",
            "//! b\npub fn h() { let s = \"crate::a::f\"; }\n// crate::a\n",
        ),
    ]);
    assert_eq!(problems(dir.path()), Vec::<String>::new());
}

#[test]
fn a_circle_between_top_level_modules_is_found() {
    let dir = tree(&[
        ("main.rs", "//! main\nmod a;\nmod b;\n"),
        ("a.rs", "//! a\nuse crate::b::B;\npub struct A;\n"),
        ("b/mod.rs", "//! b\npub mod inner;\npub struct B;\n"),
        ("b/inner.rs", "//! inner\nuse crate::a::A;\n"),
    ]);
    let found = problems(dir.path());
    assert!(
        found
            .iter()
            .any(|p| p.starts_with("top-level import circle: a, b")),
        "{found:?}"
    );
}

#[test]
fn a_circle_between_a_folder_and_its_child_is_found() {
    let dir = tree(&[
        ("main.rs", "//! main\nmod report;\n"),
        (
            "report/mod.rs",
            "//! report\nmod records;\npub use records::Record;\npub fn human() {}\n",
        ),
        (
            "report/records.rs",
            "//! records\npub struct Record;\nfn f() { super::human(); }\n",
        ),
    ]);
    let found = problems(dir.path());
    assert!(
        found
            .iter()
            .any(|p| p.starts_with("import circle: report, report::records")),
        "{found:?}"
    );
}

#[test]
fn steps_reaching_each_other_or_their_internals_are_found() {
    let dir = tree(&[
        ("main.rs", "//! main\nmod pipeline;\n"),
        ("pipeline/mod.rs", "//! p\nmod steps;\nmod gate;\n"),
        (
            "pipeline/steps/mod.rs",
            "//! s\nmod train;\nmod optimize;\nmod compare;\n",
        ),
        ("pipeline/steps/train.rs", "//! t\npub fn train() {}\n"),
        (
            "pipeline/steps/optimize.rs",
            "//! o\nuse super::train::train;\npub fn optimize() { train(); }\n",
        ),
        ("pipeline/steps/compare/mod.rs", "//! c\npub mod rounds;\n"),
        (
            "pipeline/steps/compare/rounds.rs",
            "//! r\npub fn round() {}\n",
        ),
        (
            "pipeline/gate.rs",
            "//! g\nuse crate::pipeline::steps::compare::rounds::round;\n",
        ),
    ]);
    let found = problems(dir.path()).join("\n");
    assert!(
        found.contains("the step pipeline::steps::optimize uses the step pipeline::steps::train"),
        "{found}"
    );
    assert!(
        found.contains("pipeline::gate reaches into the step's internals"),
        "{found}"
    );
}

#[test]
fn a_pipeline_module_reading_the_command_line_is_found() {
    let dir = tree(&[
        ("main.rs", "//! main\nmod cli;\nmod pipeline;\n"),
        ("cli.rs", "//! c\npub struct RunArgs;\n"),
        (
            "pipeline/mod.rs",
            "//! p\nmod run;\nuse crate::cli::RunArgs;\n",
        ),
        ("pipeline/run.rs", "//! r\nuse crate::cli::RunArgs;\n"),
    ]);
    let found = problems(dir.path()).join("\n");
    assert!(
        found.contains("pipeline::run uses cli: only the dispatcher"),
        "{found}"
    );
    assert!(!found.contains("pipeline uses cli"), "{found}");
}

#[test]
fn long_files_and_files_without_a_module_comment_are_found() {
    let long = format!("//! long\n{}", "fn f() {}\n".repeat(MAX_LINES + 1));
    let dir = tree(&[("main.rs", "mod long;\n"), ("long.rs", &long)]);
    let found = problems(dir.path()).join("\n");
    assert!(found.contains("long.rs has 802 lines"), "{found}");
    assert!(
        found.contains("does not open with a `//!` comment"),
        "{found}"
    );
}

#[test]
fn printing_macros_outside_the_printer_are_found() {
    let dir = tree(&[
        (
            "main.rs",
            "//! m\nmod util;\nmod a;\nfn main() { eprintln!(\"x\"); }\n",
        ),
        ("util/mod.rs", "//! u\npub mod printer;\n"),
        (
            "util/printer.rs",
            "//! p\npub fn line() { eprintln!(\"ok here\"); }\n",
        ),
        (
            "a.rs",
            "//! a\nfn probe() -> &'static str { \"println!()\" }\n\
             #[cfg(test)]\nmod tests { fn t() { println!(); } }\n",
        ),
    ]);
    let found = problems(dir.path()).join("\n");
    assert!(found.contains("main.rs uses `eprintln!`"), "{found}");
    assert!(!found.contains("printer.rs uses"), "{found}");
    assert!(!found.contains("a.rs uses"), "{found}");
}

#[test]
fn strings_comments_and_lifetimes_are_not_code() {
    assert_eq!(
        code_of("fn f<'a>(x: &'a str) { let c = '{'; let s = r#\"crate::x\"#; }\n// crate::y\n"),
        "fn f<'a>(x: &'a str) { let c = ' '; let s = \"\"; }\n\n"
    );
}
