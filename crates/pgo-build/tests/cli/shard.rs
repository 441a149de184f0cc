//! Training across machines: `train --shard --bundle`, `merge`, `pack`, `unpack`.

use std::path::Path;
use std::process::Command;

use crate::support::*;

/// The example's binaries with two train workloads, one of which splits itself in two: three
/// runs to shard.
const SHARDED_EXAMPLE_CONFIG: &str = r#"
[build]
bins = ["coordinator", "worker"]

[[workload]]
name = "small"
role = "train"
command = '"$PGO_BUILD_BIN_COORDINATOR" --queries workloads/train.queries --rows 60000 --seed 1 --workers 2'

[[workload]]
name = "split"
role = "train"
shards = 2
command = '"$PGO_BUILD_BIN_COORDINATOR" --queries workloads/train.queries --rows 30000 --seed $((3 + PGO_BUILD_SHARD_INDEX)) --workers 1 && echo "part $PGO_BUILD_SHARD_INDEX of $PGO_BUILD_SHARD_COUNT"'
"#;

fn profile_text(path: &Path) -> String {
    let output = Command::new(llvm_tool("llvm-profdata"))
        .args(["show", "--all-functions", "--counts"])
        .arg(path)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

/// The CI flow in three checkouts at three different paths: one job instruments and packs,
/// a training job unpacks and runs two shards into bundles, a third merges and optimizes.
/// The reference is what one machine makes of the same raw profiles: the training job's own
/// local `optimize` over both shards' runs.
#[test]
fn sharded_training_in_three_checkouts_gives_the_single_machine_build() {
    let artifacts = tempfile::tempdir().unwrap();
    let pack = artifacts.path().join("instrumented.tar.zst");
    let bundle = |i: usize| artifacts.path().join(format!("shard-{i}.pgo"));

    let instrument_job = Fixture::example("instrument-job");
    instrument_job.write("pgo-build.toml", SHARDED_EXAMPLE_CONFIG);
    instrument_job.run(&["instrument"]).success();
    instrument_job
        .run(&["pack", "instrumented", "--output", pack.to_str().unwrap()])
        .success()
        .stderr_contains("packed the instrumented stage (2 binaries)");

    let train_job = Fixture::example("ci/runner/work/train-job");
    train_job.write("pgo-build.toml", SHARDED_EXAMPLE_CONFIG);
    // Nothing is built here: the unpacked binaries are trained.
    train_job
        .run(&["unpack", pack.to_str().unwrap()])
        .success()
        .stderr_contains("unpacked the instrumented stage (2 binaries, packed ");
    train_job
        .run(&[
            "train",
            "--shard",
            "1/2",
            "--bundle",
            bundle(1).to_str().unwrap(),
        ])
        .success()
        .stderr_contains("shard 1/2: small, split.part2of2")
        .stderr_contains("wrote the bundle of shard 1/2");
    assert!(
        std::fs::read_to_string(train_job.layout().path("logs/train-split.part2of2.log"))
            .unwrap()
            .contains("part 1 of 2"),
        "PGO_BUILD_SHARD_INDEX/COUNT reach the workload"
    );
    train_job
        .run(&[
            "train",
            "--shard",
            "2/2",
            "--bundle",
            bundle(2).to_str().unwrap(),
        ])
        .success()
        .stderr_contains("shard 2/2: split.part1of2");
    assert!(
        !train_job.layout().path("baseline").exists()
            && !train_job
                .layout()
                .path("instrumented/cargo-target")
                .exists(),
        "the training job built something"
    );

    let merge_job = Fixture::example("m");
    merge_job.write("pgo-build.toml", SHARDED_EXAMPLE_CONFIG);
    let merged = merge_job.run(&[
        "merge",
        bundle(2).to_str().unwrap(),
        bundle(1).to_str().unwrap(),
    ]);
    merged
        .success()
        .stderr_contains("merged 2 bundles (4 profiles)");
    // Every shard's accounting, and the totals.
    assert!(
        merged.stdout().contains("┆ 1/2") && merged.stdout().contains("┆ all"),
        "{}",
        merged.describe()
    );
    let merge_optimize = merge_job.run(&["-v", "optimize"]);
    merge_optimize
        .success()
        .stderr_contains("using the profile merged from 2 training bundles");
    let report = merge_job.report();
    assert_eq!(report["bundles"]["bundles"].as_array().unwrap().len(), 2);
    assert_eq!(report["profiles"]["worker"]["valid_files"], 4, "{report:#}");

    // The single-machine reference from the same raw profiles.
    let train_optimize = train_job.run(&["-v", "optimize"]);
    train_optimize.success();
    // The same profile is named by the same path from both checkouts (a compile cache keys
    // on rustc's command line).
    let profile_use = |run: &Run| {
        let stderr = run.stderr();
        let start = stderr
            .find("-Cprofile-use=")
            .expect("no -Cprofile-use in -v output");
        stderr[start..]
            .split(['\x1f', '\'', ' '])
            .next()
            .unwrap()
            .to_owned()
    };
    assert_eq!(profile_use(&merge_optimize), profile_use(&train_optimize));
    assert!(!profile_use(&train_optimize).contains(train_job.root().to_str().unwrap()));
    let (single, sharded) = (merged_profile(&train_job), merged_profile(&merge_job));
    assert_eq!(profile_text(&single), profile_text(&sharded));
    assert_eq!(
        std::fs::read(&single).unwrap(),
        std::fs::read(&sharded).unwrap()
    );
    for name in ["coordinator", "worker"] {
        assert!(
            std::fs::read(train_job.stage_bin("optimized", name)).unwrap()
                == std::fs::read(merge_job.stage_bin("optimized", name)).unwrap(),
            "the optimized {name} of the merge job differs from the single-machine one"
        );
    }

    // A local training supersedes the merged bundles.
    merge_job.run(&["instrument"]).success();
    assert!(!merge_job.layout().path("profiles/bundles.json").exists());
}

/// A bundle with one manifest field replaced: another toolchain cannot be installed here.
pub(crate) fn rewrite_bundle(from: &Path, to: &Path, edit: impl Fn(&mut serde_json::Value)) {
    let mut archive =
        tar::Archive::new(zstd::Decoder::new(std::fs::File::open(from).unwrap()).unwrap());
    let mut builder =
        tar::Builder::new(zstd::Encoder::new(std::fs::File::create(to).unwrap(), 3).unwrap());
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().into_owned();
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut data).unwrap();
        if path == Path::new("manifest.json") {
            let mut manifest: serde_json::Value = serde_json::from_slice(&data).unwrap();
            edit(&mut manifest);
            data = serde_json::to_vec(&manifest).unwrap();
        }
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder
            .append_data(&mut header, &path, data.as_slice())
            .unwrap();
    }
    builder.into_inner().unwrap().finish().unwrap();
}

#[test]
fn merge_refuses_bundles_of_other_trainings_and_duplicate_shards_and_warns_about_missing_ones() {
    let fixture = Fixture::new("twobins");
    fixture.config(&[
        "$PGO_BUILD_BIN_APP work 1000",
        "$PGO_BUILD_BIN_HELPER",
        "$PGO_BUILD_BIN_APP work 2000",
    ]);
    fixture.run(&["instrument"]).success();
    let dir = tempfile::tempdir().unwrap();
    let bundle = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    for i in 1..=3 {
        fixture
            .run(&[
                "train",
                "--shard",
                &format!("{i}/3"),
                "--bundle",
                &bundle(&format!("s{i}.pgo")),
            ])
            .success();
    }
    fixture
        .run(&[
            "merge",
            &bundle("s1.pgo"),
            &bundle("s2.pgo"),
            &bundle("s1.pgo"),
        ])
        .failure()
        .stderr_contains("are both shard 1/3");
    fixture
        .run(&["merge", &bundle("s1.pgo"), &bundle("s3.pgo")])
        .success()
        .stderr_contains("shard 2/3 missing");
    fixture
        .run(&["--strict", "merge", &bundle("s1.pgo"), &bundle("s3.pgo")])
        .failure()
        .stderr_contains("shard 2/3 missing");
    // Shard 1's bundle relabelled as shard 2: its manifest lies, its content does not.
    rewrite_bundle(
        Path::new(&bundle("s1.pgo")),
        Path::new(&bundle("s1-as-2.pgo")),
        |m| {
            m["shard"]["index"] = 2.into();
        },
    );
    fixture
        .run(&[
            "merge",
            &bundle("s1.pgo"),
            &bundle("s1-as-2.pgo"),
            &bundle("s3.pgo"),
        ])
        .failure()
        .stderr_contains("hold the same profiles");

    rewrite_bundle(
        Path::new(&bundle("s2.pgo")),
        Path::new(&bundle("other-rustc.pgo")),
        |m| {
            m["rustc"] = "rustc 1.94.0 (4a4ef493e 2026-03-02)".into();
        },
    );
    fixture
        .run(&[
            "merge",
            &bundle("s1.pgo"),
            &bundle("other-rustc.pgo"),
            &bundle("s3.pgo"),
        ])
        .failure()
        .stderr_contains("refusing to merge bundles of different trainings")
        .stderr_contains("rustc: ")
        .stderr_contains("rustc 1.94.0");

    // Shard 2 trained by an instrumented build with other codegen settings.
    let mut instrument = fixture.command(&["instrument"]);
    instrument.env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "3");
    fixture.run_with(instrument).success();
    let mut train = fixture.command(&[
        "train",
        "--shard",
        "2/3",
        "--bundle",
        &bundle("other-settings.pgo"),
    ]);
    train.env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "3");
    fixture.run_with(train).success();
    fixture
        .run(&[
            "merge",
            &bundle("s1.pgo"),
            &bundle("other-settings.pgo"),
            &bundle("s3.pgo"),
        ])
        .failure()
        .stderr_contains("settings_fingerprint: ")
        .stderr_contains("instrumented build: ");
    // A bundle whose settings differ from this checkout's is refused too, naming the setting.
    let mut merge = fixture.command(&["merge", &bundle("other-settings.pgo")]);
    merge.env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "5");
    fixture
        .run_with(merge)
        .failure()
        .stderr_contains("refusing to merge")
        .stderr_contains("profile settings");
    // Not a bundle at all.
    std::fs::write(dir.path().join("junk.pgo"), "not an archive").unwrap();
    fixture
        .run(&["merge", &bundle("junk.pgo")])
        .failure()
        .stderr_contains("junk.pgo");
}

#[test]
fn unpack_refuses_a_pack_for_other_settings_and_train_refuses_a_bad_shard() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 1000"]);
    fixture.run(&["instrument"]).success();
    let dir = tempfile::tempdir().unwrap();
    // An output that cannot be a file is refused before anything is written, and nothing
    // half-made stays beside it.
    let taken = dir.path().join("taken");
    std::fs::create_dir(&taken).unwrap();
    fixture
        .run(&["pack", "instrumented", "-o", taken.to_str().unwrap()])
        .failure()
        .stderr_contains("is a directory; name a file");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["taken"], "{left:?}");
    let pack = dir.path().join("i.tar.zst");
    fixture
        .run(&["pack", "instrumented", "-o", pack.to_str().unwrap()])
        .success();
    // A damaged pack is refused and leaves the instrumented stage there as it was.
    let data = std::fs::read(&pack).unwrap();
    let damaged = dir.path().join("damaged.tar.zst");
    std::fs::write(&damaged, &data[..data.len() - 200]).unwrap();
    fixture
        .run(&["unpack", damaged.to_str().unwrap()])
        .failure()
        .stderr_contains("is damaged or truncated");
    fixture.run(&["train"]).success();
    let other = Fixture::new("twobins");
    other.config(&["$PGO_BUILD_BIN_APP work 1000"]);
    let mut unpack = other.command(&["unpack", pack.to_str().unwrap()]);
    unpack.env("CARGO_PROFILE_RELEASE_LTO", "fat");
    other
        .run_with(unpack)
        .failure()
        .stderr_contains("refusing to unpack")
        .stderr_contains("profile settings");
    assert!(!other.stage_bin("instrumented", "app").exists());
    other.run(&["unpack", pack.to_str().unwrap()]).success();
    assert!(other.stage_bin("instrumented", "app").is_file());
    other
        .run(&["train", "--shard", "3/2", "--bundle", "x.pgo"])
        .failure()
        .stderr_contains("expected I/N with 1 <= I <= N");
    other
        .run(&["train", "--shard", "1/2"])
        .failure()
        .stderr_contains("--bundle");
}

fn total_count(profile: &Path) -> u64 {
    let output = Command::new(llvm_tool("llvm-profdata"))
        .args(["show", "--detailed-summary"])
        .arg(profile)
        .output()
        .unwrap();
    let text = String::from_utf8(output.stdout).unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix("Total count:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn merge_weights_multiply_each_bundles_counts() {
    let fixture = Fixture::new("twobins");
    // Shard 2 does ten times the work of shard 1.
    fixture.config(&[
        "$PGO_BUILD_BIN_APP work 1000",
        "$PGO_BUILD_BIN_APP work 10000",
    ]);
    fixture.run(&["instrument"]).success();
    let dir = tempfile::tempdir().unwrap();
    let bundle = |i: usize| {
        dir.path()
            .join(format!("s{i}.pgo"))
            .to_str()
            .unwrap()
            .to_owned()
    };
    for i in 1..=2 {
        let shard = format!("{i}/2");
        fixture
            .run(&["train", "--shard", &shard, "--bundle", &bundle(i)])
            .success();
    }
    let merged_total = |args: &[&str]| {
        fixture.run(args).success();
        let report = fixture.report();
        let weights: Vec<u64> = report["bundles"]["bundles"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["weight"].as_u64().unwrap())
            .collect();
        let totals: Vec<u64> = report["bundles"]["bundles"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["total_count"].as_u64().unwrap())
            .collect();
        (weights, totals, total_count(&merged_profile(&fixture)))
    };
    let (weights, totals, sum) = merged_total(&["merge", &bundle(1), &bundle(2)]);
    assert_eq!(weights, [1, 1]);
    assert_eq!(sum, totals[0] + totals[1], "counts add up by default");
    assert!(totals[1] > 5 * totals[0], "{totals:?}");

    let (weights, totals, sum) =
        merged_total(&["merge", "--weights", "equal", &bundle(1), &bundle(2)]);
    let expected = (totals[1] as f64 / totals[0] as f64).round() as u64;
    assert_eq!(weights, [expected, 1]);
    assert_eq!(sum, expected * totals[0] + totals[1]);

    let weight = format!("{}=3", bundle(2));
    let (weights, totals, sum) =
        merged_total(&["merge", "--weight", &weight, &bundle(2), &bundle(1)]);
    assert_eq!(weights, [1, 3], "in shard order, whatever the order given");
    assert_eq!(sum, totals[0] + 3 * totals[1]);
}

/// The twobins fixture as a git checkout with one commit (archives and target ignored).
fn committed_fixture() -> Fixture {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 1000"]);
    fixture.write(".gitignore", "target\n*.tar.zst\nCargo.lock\n");
    git(&fixture.root(), &["init", "-q"]);
    git(&fixture.root(), &["add", "-A"]);
    git(&fixture.root(), &["commit", "-qm", "one"]);
    fixture
}

fn git(dir: &Path, args: &[&str]) {
    let output = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {output:?}");
}

#[test]
fn unpack_refuses_a_pack_of_another_commit() {
    let fixture = committed_fixture();
    fixture.run(&["instrument"]).success();
    let pack = fixture.root().join("i.tar.zst");
    fixture
        .run(&["pack", "instrumented", "-o", pack.to_str().unwrap()])
        .success();

    let other = Fixture::at("twobins", "clone");
    std::fs::remove_dir_all(other.root()).unwrap();
    git(
        other.dir.path(),
        &[
            "clone",
            "-q",
            fixture.root().to_str().unwrap(),
            other.root().to_str().unwrap(),
        ],
    );
    other.write("app/src/extra.rs", "// a later change\n");
    git(&other.root(), &["add", "-A"]);
    git(&other.root(), &["commit", "-qm", "two"]);
    other
        .run(&["unpack", pack.to_str().unwrap()])
        .failure()
        .stderr_contains("git revision: the pack")
        .stderr_contains("Unpack into a checkout of the same commit");
    git(&other.root(), &["reset", "-q", "--hard", "HEAD~1"]);
    other.run(&["unpack", pack.to_str().unwrap()]).success();
}

#[test]
fn merge_refuses_a_bundle_of_another_commit() {
    let fixture = committed_fixture();
    fixture.run(&["instrument"]).success();
    let bundle = fixture.root().join("b.tar.zst");
    fixture
        .run(&["train", "--bundle", bundle.to_str().unwrap()])
        .success();
    // The sources moved on before the merge job ran.
    fixture.write("app/src/extra.rs", "// a later change\n");
    git(&fixture.root(), &["add", "-A"]);
    git(&fixture.root(), &["commit", "-qm", "two"]);
    fixture
        .run(&["merge", bundle.to_str().unwrap()])
        .failure()
        .stderr_contains("git revision: ")
        .stderr_contains("b.tar.zst was made at")
        .stderr_contains("the commit that instrumented");
    git(&fixture.root(), &["reset", "-q", "--hard", "HEAD~1"]);
    fixture.run(&["merge", bundle.to_str().unwrap()]).success();
}

#[test]
fn unpack_without_git_compares_the_sources_the_pack_was_built_from() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 1000"]);
    fixture.run(&["instrument"]).success();
    let pack = fixture.root().join("i.tar.zst");
    fixture
        .run(&["pack", "instrumented", "-o", pack.to_str().unwrap()])
        .success();
    // Another checkout (no git on either side) whose sources moved on.
    let other = Fixture::new("twobins");
    other.config(&["$PGO_BUILD_BIN_APP work 1000"]);
    other.edit("app/src/main.rs", |source| {
        format!("{source}\n// a later change\n")
    });
    other
        .run(&["unpack", pack.to_str().unwrap()])
        .failure()
        .stderr_contains("sources: 1 of the")
        .stderr_contains("app/src/main.rs");
    other.edit("app/src/main.rs", |source| {
        source.trim_end_matches("\n// a later change\n").to_owned()
    });
    other.run(&["unpack", pack.to_str().unwrap()]).success();
}
