//! A committed profile across releases: trained on one release of the `releases` fixture,
//! exported, then used for the next with a version bump, a dependency bump and code that moved
//! between codegen units, with no training.

use std::process::{Child, Command};

use crate::support::{Fixture, copy_dir, llvm_tool, step_names};

/// The `releases` fixture trained and its profile committed (`pgo/profile.profdata`, set as
/// `[pgo] profile`), with `settings` in its `[pgo]` table.
fn committed(settings: &str) -> Fixture {
    let fixture = Fixture::new("releases");
    fixture.write(
        "pgo-build.toml",
        &format!(
            "[pgo]\n{settings}\n[[workload]]\nname = \"train\"\nrole = \"train\"\n\
             command = \"$PGO_BUILD_BIN_APP 200000\"\n\n\
             [[workload]]\nname = \"holdout\"\nrole = \"holdout\"\n\
             command = \"$PGO_BUILD_BIN_APP 20000\"\n"
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
    let check = fixture.run(&["profile", "check"]);
    check
        .success()
        .stderr_contains("100% of its counts are in code unchanged since it was trained")
        .stderr_contains("usable without training");
    insta::assert_snapshot!(
        "profile_check_after_version_bumps",
        crate::support::normalized(&fixture, &format!("{}{}", check.stderr(), check.stdout()))
    );
    // The release job's second command reads the text of the profile the first one wrote.
    fixture
        .run(&["optimize", "-v"])
        .success()
        .stderr_contains("the functions that still match hold 100% of its counts (0 of ")
        .stderr_lacks("merge --text");
    let staleness = &fixture.report()["staleness"];
    assert_eq!(staleness["stale_functions"], 0, "{staleness:#}");
    assert_eq!(staleness["carried_functions"], 0, "{staleness:#}");

    // Sixty functions added to the smallest module make its codegen unit the largest: rustc
    // renumbers the units, and the functions in them move.
    fixture.edit("kernel/src/generic.rs", |text| {
        let names: Vec<String> = (0..60).map(|i| format!("n{i}")).collect();
        format!("{text}\nfiller!({});\n", names.join(" "))
    });
    fixture.run(&["optimize"]).success();
    let staleness = &fixture.report()["staleness"];
    assert_eq!(staleness["share"], 0.0, "{staleness:#}");
    // Found in the first compile: no crate compiled twice.
    assert_eq!(
        staleness["recompiled"],
        serde_json::json!([]),
        "{staleness:#}"
    );
    // The added functions are the only ones without data (but for a moved function that
    // never ran: records without counts are not offered under other units).
    let diagnostics = &fixture.report()["optimize_diagnostics"]["per_crate"]["kernel"];
    let missing = diagnostics["missing_functions"].as_u64().unwrap();
    assert!((60..=63).contains(&missing), "{diagnostics:#}");

    // Where the functions are now, from a profile of this code trained afresh: the two
    // instances of one generic (the same body and function hash) moved, and the profile the
    // build used has each one's own counts under its new name (the u32 one ran ten times as
    // much).
    let fresh = checkout_of(&fixture, "fresh");
    fresh.edit("pgo-build.toml", |config| {
        config.replace("profile = \"pgo/profile.profdata\"\n", "")
    });
    fresh.run(&["run", "--no-compare"]).success();
    let records = |profile: &std::path::Path| -> Vec<(String, u64)> {
        let text = profile_text(profile);
        let lines: Vec<&str> = text.lines().collect();
        let mut found = Vec::new();
        for (at, line) in lines.iter().enumerate() {
            if line.contains("7generic4fold") && lines.get(at + 1) == Some(&"# Func Hash:") {
                let counters: usize = lines[at + 4].parse().unwrap();
                let total = lines[at + 6..at + 6 + counters]
                    .iter()
                    .map(|v| v.parse::<u64>().unwrap())
                    .sum();
                found.push((line.to_string(), total));
            }
        }
        found
    };
    let trained = records(&fixture.root().join("pgo/profile.profdata"));
    let now = records(&crate::support::merged_profile(&fresh));
    let used = records(&crate::support::merged_profile(&fixture));
    assert_eq!((trained.len(), now.len()), (2, 2), "{trained:?} {now:?}");
    let mut totals = Vec::new();
    for (name, _) in &now {
        let symbol = name.rsplit(';').next().unwrap();
        let (was, counts) = trained.iter().find(|(n, _)| n.ends_with(symbol)).unwrap();
        assert_ne!(was, name, "{symbol} did not move");
        let offered: Vec<u64> = used
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, c)| *c)
            .collect();
        assert_eq!(offered, [*counts], "{name}");
        totals.push(*counts);
    }
    totals.sort();
    assert!(totals[1] > 8 * totals[0] && totals[0] > 0, "{totals:?}");
    // With the committed profile's summary, which LLVM takes its hot and cold thresholds from
    // (stored after the header: field and cutoff counts, 6 fields, 3 words per cutoff): the
    // copies, which move the summary computed from the records, do not move the one rustc reads.
    let computed = |profile: &std::path::Path| -> String {
        let output = Command::new(llvm_tool("llvm-profdata"))
            .args(["show", "--detailed-summary"])
            .arg(profile)
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        let text = String::from_utf8(output.stdout).unwrap();
        text[text.find("Detailed summary").unwrap()..].to_owned()
    };
    let stored = |profile: &std::path::Path| -> Vec<u8> {
        let data = std::fs::read(profile).unwrap();
        let word = |i: usize| u64::from_le_bytes(data[i * 8..i * 8 + 8].try_into().unwrap());
        assert_eq!(word(9), 6);
        data[72..(11 + 6 + 3 * word(10) as usize) * 8].to_vec()
    };
    let committed_profile = fixture.root().join("pgo/profile.profdata");
    let used_profile = crate::support::merged_profile(&fixture);
    assert_ne!(computed(&used_profile), computed(&committed_profile));
    assert_eq!(stored(&used_profile), stored(&committed_profile));
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

/// The committed profile's records as text (`llvm-profdata merge --text`).
fn profile_text(profile: &std::path::Path) -> String {
    let output = Command::new(llvm_tool("llvm-profdata"))
        .args(["merge", "--text", "-o", "-"])
        .arg(profile)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

/// `fixture`'s committed profile made as if trained with another rustc: the metadata names
/// it, and its standard library had other crate disambiguators, which the profile's records
/// of its generics carry (each replaced by one of the same length, which keeps every v0
/// back-reference of the faked names valid; other lengths are the unit tests'). Returns how many records name
/// the standard library.
fn as_trained_with_another_rustc(fixture: &Fixture, sysroot_crates: bool) -> usize {
    let profile = fixture.root().join("pgo/profile.profdata");
    let metadata_file = fixture.root().join("pgo/profile.json");
    let mut metadata: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&metadata_file).unwrap()).unwrap();
    assert_eq!(metadata["name_scheme"], 2, "{metadata:#}");
    let mut text = profile_text(&profile);
    let mut roots = Vec::new();
    for krate in ["core", "alloc", "std"] {
        let Some(now) = metadata["sysroot_crates"][krate]
            .as_str()
            .map(str::to_owned)
        else {
            panic!("no {krate} in {metadata:#}");
        };
        // Another value of the same length (v0 disambiguators are u64s: the last digit
        // changed keeps it one).
        let last = if now.ends_with('0') { "1" } else { "0" };
        let then = format!("{}{last}", &now[..now.len() - 1]);
        assert_ne!(then, now);
        let (now_root, then_root) = (
            format!("Cs{now}_{}{krate}", krate.len()),
            format!("Cs{then}_{}{krate}", krate.len()),
        );
        text = text.replace(&now_root, &then_root);
        roots.push(then_root);
        metadata["sysroot_crates"][krate] = serde_json::json!(then);
    }
    let lines: Vec<&str> = text.lines().collect();
    let renamed = lines
        .windows(2)
        .filter(|pair| pair[1] == "# Func Hash:" && roots.iter().any(|r| pair[0].contains(r)))
        .count();
    let text_file = fixture.root().join("pgo/profile.proftext");
    std::fs::write(&text_file, text).unwrap();
    let merged = Command::new(llvm_tool("llvm-profdata"))
        .args(["merge", "-o"])
        .arg(&profile)
        .arg(&text_file)
        .output()
        .unwrap();
    assert!(merged.status.success(), "{merged:?}");
    std::fs::remove_file(&text_file).unwrap();
    let hash = Command::new("sha256sum").arg(&profile).output().unwrap();
    metadata["content_hash"] = serde_json::json!(&String::from_utf8_lossy(&hash.stdout)[..16]);
    metadata["rustc"] = serde_json::json!("rustc 1.94.0 (4a4ef493e 2026-03-02)");
    if !sysroot_crates {
        metadata.as_object_mut().unwrap().remove("sysroot_crates");
    }
    std::fs::write(&metadata_file, metadata.to_string()).unwrap();
    renamed
}

/// A rustc upgrade: the workspace's functions keep their names (v0 symbols, crate identities
/// pinned), the standard library's generics are renamed to this toolchain's, and the profile
/// applies as it did; without the standard library's record, its generics' counts are lost,
/// and said.
#[test]
fn a_profile_trained_with_another_rustc_keeps_its_names_and_the_standard_librarys_are_renamed() {
    let fixture = committed("");
    let std_records = as_trained_with_another_rustc(&fixture, true);
    assert!(
        std_records > 0,
        "no record of the standard library's generics"
    );
    fixture
        .run(&["profile", "check"])
        .success()
        .stderr_contains("it was trained with rustc 1.94.0")
        .stderr_contains("usable without training");
    fixture
        .run(&["optimize"])
        .success()
        .stderr_contains("was trained with rustc 1.94.0")
        .stderr_contains(&format!(
            "{std_records} records of the standard library's code renamed"
        ))
        .stderr_contains("the functions that still match hold 100% of its counts");
    let staleness = &fixture.report()["staleness"];
    assert_eq!(staleness["stale_functions"], 0, "{staleness:#}");
    let without_data = |fixture: &Fixture| -> u64 {
        let per_crate = &fixture.report()["optimize_diagnostics"]["per_crate"];
        ["app", "kernel"]
            .iter()
            .map(|krate| per_crate[krate]["missing_functions"].as_u64().unwrap_or(0))
            .sum()
    };
    let renamed_missing = without_data(&fixture);

    // Power: the same profile without the record of the standard library it was trained with:
    // the instances of its generics in the workspace's crates find no data.
    let unrecorded = committed("");
    as_trained_with_another_rustc(&unrecorded, false);
    unrecorded
        .run(&["optimize"])
        .success()
        .stderr_contains("the profile does not record the standard library it was trained with");
    let unrenamed_missing = without_data(&unrecorded);
    assert!(
        unrenamed_missing >= renamed_missing + 10,
        "functions without data: {renamed_missing} renamed, {unrenamed_missing} not"
    );
}

/// A real rustc upgrade: the fixture trained with this machine's rustc, its profile used by
/// the nightly the machine image carries (1.97, which names drop glue `core::ptr::drop_glue`
/// where 1.95 has `core::ptr::drop_in_place`). The standard library's crates and drop glue
/// are renamed to the nightly's, and the profile still applies.
#[test]
fn a_profile_trained_with_one_rustc_is_used_by_the_next() {
    let output = Command::new("rustup")
        .args(["run", "nightly", "rustc", "-V"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "this test needs the nightly toolchain the machine image carries (rustup toolchain \
         list): {output:?}"
    );
    let nightly = String::from_utf8(output.stdout).unwrap().trim().to_owned();
    let fixture = committed("");
    let metadata: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture.root().join("pgo/profile.json")).unwrap(),
    )
    .unwrap();
    let stable = metadata["rustc"].as_str().unwrap().to_owned();
    assert_ne!(stable, nightly, "trained with the nightly already");
    let mut optimize = fixture.command(&["optimize"]);
    optimize.env("RUSTUP_TOOLCHAIN", "nightly");
    let optimize = fixture.run_with(optimize);
    optimize
        .success()
        .stderr_contains(&format!(
            "was trained with {stable}, this build uses {nightly}"
        ))
        .stderr_contains(
            "records of the standard library's code renamed to this toolchain's names",
        );
    // Drop glue under the nightly's name (from 1.97 on): the profile the build used has no
    // record left under the old one, and has records under the new.
    let minor = |version: &str| -> u32 {
        let number = version.split_whitespace().nth(1).unwrap();
        number.split('.').nth(1).unwrap().parse().unwrap()
    };
    if minor(&stable) < 97 && minor(&nightly) >= 97 {
        optimize.stderr_contains("drop glue as `core::ptr::drop_glue`");
        let used =
            std::fs::read_to_string(fixture.layout().path("profiles/carry/committed.proftext"))
                .unwrap();
        assert!(used.contains("4core3ptr9drop_glue"), "no drop glue renamed");
        assert!(
            !used.contains("4core3ptr13drop_in_place"),
            "drop glue left unrenamed"
        );
    }
    let staleness = &fixture.report()["staleness"];
    let kept = 1.0 - staleness["share"].as_f64().unwrap();
    assert!(kept >= 0.8, "{staleness:#}");
    let without_data =
        fixture.report()["optimize_diagnostics"]["per_crate"]["app"]["missing_functions"]
            .as_u64()
            .unwrap_or(0);
    assert!(
        without_data <= 2,
        "{:#}",
        fixture.report()["optimize_diagnostics"]
    );
}

/// `[pgo] preinline = false`: the stage builds get LLVM's pre-instrumentation inlining off
/// (the profile then has records of the small functions it would have inlined), the profile
/// applies as it is, and a build with it on refuses that profile before building, saying why.
#[test]
fn a_profile_trained_without_preinlining_is_refused_by_a_build_with_it() {
    let fixture = committed("preinline = false\n");
    let metadata = |fixture: &Fixture, name: &str| -> serde_json::Value {
        let text = std::fs::read_to_string(fixture.root().join("pgo").join(name)).unwrap();
        serde_json::from_str(&text).unwrap()
    };
    let without = metadata(&fixture, "profile.json");
    let flags = without["rustflags"].as_array().unwrap();
    assert!(
        flags.iter().any(|f| f == "-Cllvm-args=-disable-preinline"),
        "{without:#}"
    );
    fixture.run(&["optimize"]).success();
    // (One standard-library function, with <0.1% of the counts, has another hash in the
    // optimized build than in the instrumented one without pre-inlining.)
    let staleness = &fixture.report()["staleness"];
    assert!(staleness["share"].as_f64().unwrap() < 0.01, "{staleness:#}");
    fixture.edit("pgo-build.toml", |config| {
        config.replace("preinline = false\n", "")
    });
    fixture
        .run(&["optimize"])
        .failure()
        .stderr_contains(
            "was trained with LLVM's pre-instrumentation inlining off ([pgo] preinline), this \
             build has it on",
        )
        .stderr_contains("set [pgo] preinline = false as it was trained");
    // The flag reached LLVM: trained with pre-inlining, the profile has fewer records (the
    // small functions are inside their callers').
    fixture.edit("pgo-build.toml", |config| {
        config.replace("profile = \"pgo/profile.profdata\"\n", "")
    });
    fixture.run(&["--retrain", "run", "--no-compare"]).success();
    fixture
        .run(&["export", "--output", "pgo/inlined.profdata"])
        .success();
    let with = metadata(&fixture, "inlined.json");
    assert!(
        with["functions"].as_u64().unwrap() < without["functions"].as_u64().unwrap(),
        "records with pre-inlining {}, without {}",
        with["functions"],
        without["functions"]
    );
}

/// A profile exported by an earlier pgo-build (legacy symbol names) is refused with the way
/// to export it once more, not built into a binary none of whose functions match.
#[test]
fn a_profile_with_legacy_names_is_refused_with_how_to_export_it_again() {
    let fixture = committed("");
    fixture.edit("pgo/profile.json", |text| {
        text.replace("\"name_scheme\": 2", "\"name_scheme\": 1")
    });
    fixture
        .run(&["optimize"])
        .failure()
        .stderr_contains("names functions by rustc's legacy symbols")
        .stderr_contains("export it again once");
}

/// Another checkout of `fixture`'s sources (its profile included, its build outputs not), in
/// `subdir` of a fresh directory: another CI job, or another machine.
fn checkout_of(fixture: &Fixture, subdir: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture.root(), &dir.path().join(subdir));
    Fixture {
        dir,
        subdir: subdir.to_owned(),
    }
}

/// The CI template's release workflow (`docs/ci/release.yml`, its commands as written there):
/// the baseline and the shipped stage each built once, in jobs of their own, and a third job
/// that builds nothing gates the release against the binaries of the last one.
#[test]
fn a_release_is_one_optimized_build_a_parallel_baseline_and_a_gate_against_the_last_release() {
    let gate_job = release_workflow(committed(""), false);
    let report = gate_job.report();
    // Judged against the last release too: the same code and profile, so no slower.
    let previous = report["compare"]["previous"].as_array().unwrap();
    assert!(!previous.is_empty(), "{:#}", report["compare"]);
}

/// The same template with `[bolt] enabled = true`: the release job BOLTs the optimized build,
/// packs both, and the gate ships the bolt stage.
#[test]
fn with_bolt_on_the_same_release_workflow_ships_the_bolt_stage() {
    let trained = committed("");
    trained.edit("pgo-build.toml", |config| {
        format!("{config}\n[bolt]\nenabled = true\n")
    });
    let gate_job = release_workflow(trained, true);
    let provenance: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(gate_job.root().join("target/pgo-build/provenance.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(provenance["variant"], "bolt", "{provenance:#}");
    assert_eq!(provenance["passed"], true, "{provenance:#}");
}

/// Runs the template's three jobs on checkouts of `trained` after a version bump, and returns
/// the gate's, which passed.
fn release_workflow(trained: Fixture, bolt: bool) -> Fixture {
    let last_release = tempfile::tempdir().unwrap();
    std::fs::copy(
        trained.stage_bin("optimized", "app"),
        last_release.path().join("app"),
    )
    .unwrap();
    bump_versions(&trained);
    let artifacts = tempfile::tempdir().unwrap();
    let artifact = |name: &str| artifacts.path().join(name).to_string_lossy().into_owned();

    let baseline_job = checkout_of(&trained, "runner/baseline");
    baseline_job.run(&["build"]).success();
    baseline_job
        .run(&[
            "pack",
            "baseline",
            "--output",
            &artifact("baseline.tar.zst"),
        ])
        .success();
    let release_job = checkout_of(&trained, "runner/release");
    release_job
        .run(&["optimize"])
        .success()
        .stderr_contains("the functions that still match hold 100% of its counts");
    let bolted = release_job.run(&["bolt", "--if-enabled"]);
    bolted.success();
    if !bolt {
        bolted.stderr_contains("BOLT is not enabled in");
        assert!(!release_job.root().join("target/pgo-build/bolt").exists());
    }
    release_job
        .run(&["pack", "shipped", "--output", &artifact("release.tar.zst")])
        .success()
        .stderr_contains(if bolt {
            "packed the bolt stage (1 binary, with the optimized stage it was made from)"
        } else {
            "packed the optimized stage (1 binary)"
        });
    if bolt {
        // BOLT's output of one optimized build is never packed beside another's.
        release_job.run(&["optimize"]).success();
        release_job
            .run(&["pack", "bolt", "--output", &artifact("stale.tar.zst")])
            .failure()
            .stderr_contains("the optimized stage was built again since BOLT ran on it")
            .stderr_contains("Run `pgo-build bolt` again, then pack it.");
        assert!(!artifacts.path().join("stale.tar.zst").exists());
    }

    let gate_job = checkout_of(&trained, "runner/gate");
    gate_job
        .run(&["unpack", &artifact("baseline.tar.zst")])
        .success();
    if bolt {
        // A bolt stage beside an optimized stage it was not made from is refused before
        // anything is unpacked.
        let mispaired = artifacts.path().join("mispaired.tar.zst");
        crate::shard::rewrite_bundle(
            &artifacts.path().join("release.tar.zst"),
            &mispaired,
            |manifest| manifest["upstream"]["id"] = serde_json::json!("another-build"),
        );
        gate_job
            .run(&["unpack", &mispaired.to_string_lossy()])
            .failure()
            .stderr_contains("made from another optimized build than the one packed beside it");
        assert!(!gate_job.root().join("target/pgo-build/bolt").exists());
    }
    let unpacked = gate_job.run(&["unpack", &artifact("release.tar.zst")]);
    unpacked.success();
    if bolt {
        unpacked
            .stderr_contains("unpacked the optimized stage")
            .stderr_contains("unpacked the bolt stage");
    }
    let against = last_release.path().to_string_lossy().into_owned();
    gate_job
        .run(&[
            "gate",
            "--against",
            &against,
            "--metric",
            "instructions",
            "--rounds",
            "2",
        ])
        .success();
    let report = gate_job.report();
    let stages: Vec<&str> = step_names(&report);
    assert!(
        !stages
            .iter()
            .any(|s| ["build", "optimize", "instrument", "bolt"].contains(s)),
        "the gate job built: {stages:?}"
    );
    let variants = report["compare"]["candidates"].to_string();
    assert!(
        variants.contains(if bolt { "\"bolt\"" } else { "\"optimized\"" }),
        "{variants}"
    );
    gate_job
}

/// redis-server on a port of its own, stopped when dropped.
struct Redis {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Redis {
    fn start() -> Redis {
        let dir = tempfile::tempdir().unwrap();
        let port = 17000 + (std::process::id() % 2000) as u16;
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(dir.path())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server (scripts/install-deps installs it)");
        let started = std::time::Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed().as_secs() < 20,
                "redis-server did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Redis {
            child,
            port,
            _dir: dir,
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One compile cache for every release, on machines that never see each other: sccache with
/// a Redis backend. A release build on one machine fills it; the same release built on another
/// machine (another path, another sccache server, an empty local disk) is served from it, and
/// pgo-build's memory budget still admits every rustc behind it.
#[test]
fn a_remote_compile_cache_serves_one_machines_release_build_to_another() {
    let redis = Redis::start();
    let trained = committed("");
    trained.edit("pgo-build.toml", |config| {
        format!("[build]\nmemory_budget = \"3GiB\"\n\n{config}")
    });
    let release_on = |subdir: &str, sccache_port: u32| {
        let checkout = checkout_of(&trained, subdir);
        let local = tempfile::tempdir().unwrap();
        let port = sccache_port.to_string();
        let mut command = checkout.command(&["optimize"]);
        command
            .env("RUSTC_WRAPPER", "sccache")
            .env(
                "SCCACHE_REDIS_ENDPOINT",
                format!("redis://127.0.0.1:{}", redis.port),
            )
            .env("SCCACHE_DIR", local.path())
            .env("SCCACHE_SERVER_PORT", &port);
        checkout.run_with(command).success();
        let _ = Command::new("sccache")
            .arg("--stop-server")
            .env("SCCACHE_SERVER_PORT", &port)
            .output();
        checkout
    };
    let base_port = 5300 + std::process::id() % 1000;
    let first = release_on("machine-one/src/app", base_port);
    let cold = first.report()["sccache"]["optimized"].clone();
    assert_eq!(cold["hits"], 0, "{cold}");
    // libc and pgo-build-rt (the workspace's own crates are keyed by their checkout's path).
    assert!(cold["misses"].as_u64().unwrap() >= 2, "{cold}");

    let second = release_on("machine-two/work/elsewhere", base_port + 1);
    let warm = second.report()["sccache"]["optimized"].clone();
    assert!(warm["hits"].as_u64().unwrap() >= 2, "{warm}");
    // The memory budget admitted every rustc: each one logged with its estimate.
    let rustc = &second.report()["rustc_memory"]["optimized"];
    assert_eq!(rustc["budget_bytes"], 3u64 << 30, "{rustc:#}");
    let logged =
        std::fs::read_to_string(second.layout().dir().join("optimized/rustc.jsonl")).unwrap();
    for krate in [
        "libc/libc",
        "pgo-build-rt/pgo_build_rt",
        "kernel/kernel",
        "app/app",
    ] {
        assert!(
            logged.contains(&format!("\"krate\":\"{krate}\"")),
            "{krate} not admitted: {logged}"
        );
    }
}
