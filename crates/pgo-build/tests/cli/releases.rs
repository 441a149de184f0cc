//! A committed profile across releases: trained on one release of the `releases` fixture,
//! exported, then used for the next with a version bump, a dependency bump and code that moved
//! between codegen units, with no training.

use crate::support::Fixture;

/// The `releases` fixture trained and its profile committed (`pgo/profile.profdata`, set as
/// `[pgo] profile`), with `settings` in its `[pgo]` table.
fn committed(settings: &str) -> Fixture {
    let fixture = Fixture::new("releases");
    fixture.write(
        "pgo-build.toml",
        &format!(
            "[pgo]\n{settings}\n[[workload]]\nname = \"train\"\nrole = \"train\"\n\
             command = \"$PGO_BUILD_BIN_APP 200000\"\n"
        ),
    );
    fixture.run(&["run", "--no-compare"]).success();
    fixture
        .run(&["export", "--output", "pgo/profile.profdata"])
        .success();
    fixture.edit("pgo-build.toml", |config| {
        config.replace("[pgo]\n", "[pgo]\nprofile = \"pgo/profile.profdata\"\n")
    });
    fixture
}

/// The next release: the workspace's version and the `kernel` dependency's bumped.
fn bump_versions(fixture: &Fixture) {
    fixture.edit("Cargo.toml", |text| {
        text.replace("version = \"0.1.0\"", "version = \"0.2.0\"")
    });
    fixture.edit("kernel/Cargo.toml", |text| {
        text.replace("version = \"1.0.0\"", "version = \"1.1.0\"")
    });
}

#[test]
fn a_committed_profile_survives_version_bumps_and_follows_code_into_other_codegen_units() {
    let fixture = committed("");
    bump_versions(&fixture);
    // Told without building: nothing changed but versions.
    fixture
        .run(&["profile", "check"])
        .success()
        .stderr_contains("100% of its counts are in code unchanged since it was trained")
        .stderr_contains("usable without training");
    fixture
        .run(&["optimize"])
        .success()
        .stderr_contains("the functions that still match hold 100% of its counts (0 of ");
    let staleness = &fixture.report()["staleness"];
    assert_eq!(staleness["stale_functions"], 0, "{staleness:#}");
    assert_eq!(staleness["carried_functions"], 0, "{staleness:#}");

    // Sixty functions added to the smallest module make its codegen unit the largest: rustc
    // renumbers the units, and the functions in them move.
    fixture.edit("kernel/src/generic.rs", |text| {
        let names: Vec<String> = (0..60).map(|i| format!("n{i}")).collect();
        format!("{text}\nfiller!({});\n", names.join(" "))
    });
    fixture
        .run(&["optimize"])
        .success()
        .stderr_contains("found in other codegen units and carried over")
        .stderr_contains("1 crate recompiled");
    let staleness = &fixture.report()["staleness"];
    assert_eq!(staleness["share"], 0.0, "{staleness:#}");
    assert_eq!(
        staleness["recompiled"],
        serde_json::json!(["kernel/kernel"])
    );
    // The added functions are the only ones without data.
    assert_eq!(
        staleness["per_crate"]["kernel"]["new_functions"], 60,
        "{staleness:#}"
    );
    // Two instances of one generic, the same body and function hash, each carried with its
    // own counts: the u32 one ran ten times as much.
    let folds: Vec<&serde_json::Value> = staleness["carried"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] == "kernel::generic::fold")
        .collect();
    assert_eq!(folds.len(), 2, "{staleness:#}");
    for fold in &folds {
        let (now, from) = (fold["now"].as_str().unwrap(), &fold["from"]);
        let symbol = now.rsplit(';').next().unwrap();
        assert_eq!(from.as_array().unwrap().len(), 1, "{fold}");
        assert!(from[0].as_str().unwrap().ends_with(&format!(";{symbol}")));
        assert_ne!(from[0].as_str().unwrap(), now);
    }
    let (wide, narrow) = (
        folds[1]["counts"].as_u64().unwrap(),
        folds[0]["counts"].as_u64().unwrap(),
    );
    assert!(
        narrow > 8 * wide && wide > 0,
        "the instances' counts: {narrow} and {wide}"
    );
    // The crate's second compile found them: rustc reports no moved function without data.
    let diagnostics = &fixture.report()["optimize_diagnostics"]["per_crate"]["kernel"];
    assert_eq!(diagnostics["missing_functions"], 60, "{diagnostics:#}");
}

#[test]
fn a_function_whose_body_changed_is_dropped_and_named_by_its_share() {
    let fixture = committed("");
    fixture.edit("kernel/src/table.rs", |text| {
        text.replace(
            "counts[bucket] += 2;",
            "counts[bucket] += 2;\n        if bucket == 999_999 {\n            counts[0] = 0;\n        }",
        )
    });
    fixture.run(&["optimize"]).success().stderr_contains(
        "Changed since the profile was recorded, most counts first: kernel::table::count (",
    );
    let staleness = &fixture.report()["staleness"];
    assert_eq!(staleness["changed"][0]["name"], "kernel::table::count");
    // A tenth of the counts or more, but far from all: weighed by counts, not functions.
    let share = staleness["share"].as_f64().unwrap();
    assert!(share > 0.1 && share < 0.5, "{staleness:#}");
    // Weighed by counts, it is refused above max_stale.
    fixture.edit("pgo-build.toml", |config| {
        config.replace("[pgo]\n", "[pgo]\nmax_stale = 0.05\n")
    });
    fixture.run(&["optimize"]).failure().stderr_contains(
        "the committed profile is stale: the functions that changed or were renamed hold ",
    );
}

#[test]
fn without_stable_names_a_version_bump_renames_every_function_and_the_profile_is_refused() {
    let fixture = committed("stable_names = false\n");
    bump_versions(&fixture);
    fixture
        .run(&["optimize"])
        .failure()
        .stderr_contains("the committed profile is stale")
        .stderr_contains(
            "Renamed (every symbol of theirs has another hash: with [pgo] stable_names = false",
        );
    let staleness = &fixture.report()["staleness"];
    assert_eq!(
        staleness["renamed_crates"],
        serde_json::json!(["app", "kernel"]),
        "{staleness:#}"
    );
    // A profile made without stable names is refused before any build with them.
    fixture.edit("pgo-build.toml", |config| {
        config.replace("stable_names = false\n", "")
    });
    fixture
        .run(&["optimize"])
        .failure()
        .stderr_contains("was made with cargo's symbol names, this build has stable ones");
}
