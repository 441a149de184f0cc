//! `pgo-build bolt`: BOLTed binaries, and the inputs it refuses.

use crate::support::*;

#[test]
fn bolted_binaries_run_and_match_the_baseline() {
    let fixture = bolt_fixture(
        &["$PGO_BUILD_BIN_APP work 20000 && $PGO_BUILD_BIN_HELPER"],
        "",
    );
    fixture
        .run(&["run", "--no-compare"])
        .success()
        .stderr_contains("pgo-build step bolt ok");
    for (name, args) in [("app", &["work", "3000"][..]), ("helper", &[][..])] {
        let bolted = fixture.stage_bin("bolt", name);
        assert!(
            std::fs::symlink_metadata(&bolted)
                .unwrap()
                .file_type()
                .is_file()
        );
        assert_eq!(
            run_binary(&bolted, args),
            run_binary(&fixture.stage_bin("baseline", name), args),
            "{name}"
        );
    }
    let record = &fixture.report()["bolt"]["app"];
    assert_eq!(record["bolted"], true, "{record}");
    assert_eq!(record["input"], "optimized");
    assert!(
        record["functions_with_profile"]
            .as_str()
            .unwrap()
            .ends_with("functions"),
        "{record}"
    );
    // `compare` accepts the bolt variant.
    fixture
        .run(&["compare", "baseline", "bolt", "--rounds", "2"])
        .success();
    assert!(fixture.report()["compare"]["workloads"][0]["candidates"]["bolt"].is_object());
}

#[test]
fn a_binary_linked_without_relocations_is_refused_with_the_fix() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 1000 && $PGO_BUILD_BIN_HELPER"]);
    fixture.run(&["run", "--no-compare"]).success();
    fixture
        .run(&["bolt"])
        .failure()
        .stderr_contains("linked without relocations")
        .stderr_contains("set `[bolt] enabled = true`");
    assert!(!fixture.stage_bin("bolt", "app").exists());
}

#[test]
fn a_stripped_binary_is_refused_with_the_fix() {
    // Built stripped while BOLT was off, then handed to `bolt`.
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 1000"]);
    let mut build = fixture.command(&["build"]);
    build.env("CARGO_PROFILE_RELEASE_STRIP", "symbols");
    fixture.run_with(build).success();
    let mut bolt = fixture.command(&["bolt", "--without-pgo"]);
    bolt.env("CARGO_PROFILE_RELEASE_STRIP", "symbols");
    fixture
        .run_with(bolt)
        .failure()
        .stderr_contains("stripped (no symbol table)")
        .stderr_contains("no `strip` in the cargo profile");
}

#[test]
fn bolt_with_a_stripping_profile_is_refused_before_building() {
    let fixture = bolt_fixture(&["$PGO_BUILD_BIN_APP work 1000"], "");
    let manifest = std::fs::read_to_string(fixture.root().join("Cargo.toml")).unwrap();
    fixture.write(
        "Cargo.toml",
        &format!("{manifest}\n[profile.release]\nstrip = true\n"),
    );
    for command in ["doctor", "build"] {
        fixture
            .run(&[command])
            .failure()
            .stderr_contains("the `release` profile strips symbols (strip = true in")
            .stderr_contains("`[build] profile_overrides = { strip = \"debuginfo\" }`");
    }
    assert!(!fixture.layout().path("baseline/cargo-target").exists());
    // The fix it names works, the profile left as it is: the override is what cargo uses.
    fixture.edit("pgo-build.toml", |text| {
        format!("[build]\nprofile_overrides = {{ strip = \"debuginfo\" }}\n\n{text}")
    });
    fixture.run(&["doctor"]).success();
    fixture.run(&["build"]).success();
    // And the other way round: an override that strips is refused whatever the profile says.
    fixture.edit("pgo-build.toml", |text| {
        text.replace("strip = \"debuginfo\"", "strip = \"symbols\"")
    });
    fixture
        .run(&["build"])
        .failure()
        .stderr_contains("(strip = symbols in [build] profile_overrides of")
        .stderr_contains(
            "Make it `strip = \"debuginfo\"` (or remove it) in [build] profile_overrides",
        );
}

#[test]
fn bolt_with_stripping_rustflags_is_refused_before_building() {
    let fixture = bolt_fixture(&["$PGO_BUILD_BIN_APP work 1000"], "");
    for flags in ["-Cstrip=symbols", "-C link-arg=-s"] {
        let mut command = fixture.command(&["build"]);
        command.env("RUSTFLAGS", flags);
        fixture
            .run_with(command)
            .failure()
            .stderr_contains("the rustflags (RUSTFLAGS) strip symbols")
            .stderr_contains("-Cstrip=debuginfo");
        assert!(
            !fixture.layout().path("baseline/cargo-target").exists(),
            "refused only after building with {flags}"
        );
    }
}

#[test]
fn a_binary_no_workload_runs_is_named_and_not_bolted() {
    let fixture = bolt_fixture(&["$PGO_BUILD_BIN_APP work 5000"], "funcs = [\"main\"]");
    fixture.run(&["build"]).success();
    let run = fixture.run(&["-v", "bolt", "--without-pgo"]);
    run.success().stderr_contains("`helper`: no BOLT profile");
    // `[bolt] funcs` reaches llvm-bolt.
    run.stderr_contains("-funcs=main");
    let report = fixture.report();
    assert_eq!(report["bolt"]["helper"]["bolted"], false);
    assert_eq!(report["bolt"]["app"]["bolted"], true);
    assert_eq!(report["bolt"]["app"]["input"], "baseline");
    assert_eq!(
        std::fs::read(fixture.stage_bin("bolt", "helper")).unwrap(),
        std::fs::read(fixture.stage_bin("baseline", "helper")).unwrap(),
        "the un-BOLTed binary is staged as it was"
    );
}

#[test]
fn a_staged_binary_replaced_after_staging_is_refused_by_every_consumer() {
    let fixture = bolt_fixture(
        &["$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_HELPER"],
        "",
    );
    fixture.run(&["run", "--no-compare"]).success();
    let optimized = fixture.stage_bin("optimized", "app");
    let staged = std::fs::read(&optimized).unwrap();
    // The baseline's app copied over the optimized one.
    std::fs::copy(fixture.stage_bin("baseline", "app"), &optimized).unwrap();
    fixture
        .run(&["bolt"])
        .failure()
        .stderr_contains("is not the binary the optimized stage staged")
        .stderr_contains("pgo-build optimize");
    // The same size, one byte changed: caught by the content hash recorded at staging.
    let mut changed = staged.clone();
    let middle = changed.len() / 2;
    changed[middle] ^= 0xff;
    std::fs::write(&optimized, &changed).unwrap();
    for args in [
        &["bolt"][..],
        &["compare", "--rounds", "1", "baseline", "optimized"],
    ] {
        fixture
            .run(args)
            .failure()
            .stderr_contains("the same size as what was staged, but other content");
    }
    let instrumented = fixture.stage_bin("instrumented", "app");
    let mut data = std::fs::read(&instrumented).unwrap();
    let middle = data.len() / 2;
    data[middle] ^= 0xff;
    std::fs::write(&instrumented, &data).unwrap();
    let pack = fixture.root().join("instrumented.tar.zst");
    fixture
        .run(&["pack", "instrumented", "--output", pack.to_str().unwrap()])
        .failure()
        .stderr_contains("is not the binary the instrumented stage staged");
    // Put back as staged, every consumer takes it again.
    std::fs::write(&optimized, &staged).unwrap();
    fixture.run(&["bolt"]).success();
}
