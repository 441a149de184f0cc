//! `report.json` against its schema, and `pgo-build report` (HTML, Markdown).

use crate::support::schema::*;
use crate::support::*;

#[test]
fn the_report_matches_its_schema_and_renders_as_html_and_markdown() {
    let fixture = train_holdout_fixture(
        "$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_HELPER",
        "$PGO_BUILD_BIN_APP work 3000",
    );
    let summary = fixture.root().join("step-summary.md");
    let mut run = fixture.command(&["run", "--compare-rounds", "2"]);
    run.env("GITHUB_STEP_SUMMARY", &summary);
    fixture.run_with(run).success();
    check_schema(&fixture.report(), &report_schema(), "report");
    assert!(
        std::fs::read_to_string(&summary)
            .unwrap()
            .contains("| optimize | ok |")
    );

    let page = fixture.root().join("report.html");
    fixture
        .run(&["report", "--html", page.to_str().unwrap()])
        .success();
    let html = std::fs::read_to_string(&page).unwrap();
    let mut reader = quick_xml::Reader::from_str(&html);
    let mut elements = 0;
    loop {
        match reader.read_event() {
            Ok(quick_xml::events::Event::Eof) => break,
            Ok(quick_xml::events::Event::Start(_) | quick_xml::events::Event::Empty(_)) => {
                elements += 1
            }
            Ok(_) => {}
            Err(err) => panic!(
                "report.html is not well-formed at {}: {err}",
                reader.buffer_position()
            ),
        }
    }
    assert!(elements > 50, "{elements} elements");
    for text in [
        "<svg",
        "instrument",
        "optimize",
        "compare",
        "A/B comparison",
        "holdout (holdout): optimized vs baseline",
    ] {
        assert!(html.contains(text), "report.html lacks {text:?}");
    }
    let duration = fixture.report()["steps"][1]["duration_secs"]
        .as_f64()
        .unwrap();
    assert!(
        html.contains(&format!("{duration:.2}s")),
        "the build's duration is on the page"
    );

    let run = fixture.run(&["report", "--markdown"]);
    run.success();
    assert!(
        run.stdout()
            .contains("| Step | Result | Duration | Share |"),
        "{}",
        run.describe()
    );
    let run = fixture.run(&["report", "--json"]);
    let json: serde_json::Value = serde_json::from_str(&run.stdout()).unwrap();
    assert_eq!(
        json["schema_version"],
        report_schema()["properties"]["schema_version"]["const"]
    );

    // The verdict is about the binaries staged now, and says so once they are rebuilt.
    assert!(!fixture.run(&["report"]).stderr().contains("Out of date"));
    fixture.edit("app/src/main.rs", |text| format!("{text}\n// changed\n"));
    fixture.run(&["build"]).success();
    let report = fixture.run(&["report"]);
    report.success().stderr_contains(
        "Out of date: the baseline build was rebuilt (or removed) since this comparison, so its \
         verdicts are about binaries that are no longer staged. `pgo-build compare` measures \
         the ones there now.",
    );
    // The markdown and the HTML page say so too, above the answer.
    let markdown = fixture.run(&["report", "--markdown"]).stdout();
    let note = markdown.find("> **Out of date: the baseline build was rebuilt");
    let answer = markdown.find("### Verdict");
    assert!(
        note.is_some() && answer.is_some() && note < answer,
        "{markdown}"
    );
    let page = fixture.root().join("report.html");
    fixture
        .run(&["report", "--html", page.to_str().unwrap()])
        .success();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("<p class=\"warning\"><strong>Out of date: the baseline build was"),
        "{html}"
    );
}

#[test]
fn a_garbled_report_is_called_corrupt_with_the_command_that_rewrites_it() {
    let fixture = Fixture::new("twobins");
    std::fs::create_dir_all(fixture.layout().dir()).unwrap();
    std::fs::write(fixture.layout().path("report.json"), "{ garbled").unwrap();
    fixture
        .run(&["report"])
        .failure()
        .stderr_contains("report.json is corrupt")
        .stderr_contains("`pgo-build run`");
}
