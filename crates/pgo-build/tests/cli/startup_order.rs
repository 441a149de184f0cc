//! `[pgo] startup_order`: temporal traces and the optimized link order.

use std::path::{Path, PathBuf};

use crate::support::schema::*;
use crate::support::*;

/// The addresses in `binary` of the symbols named in `order_file`, in the file's order (those
/// the binary has).
fn ordered_addresses(binary: &Path, order_file: &Path) -> Vec<u64> {
    use object::{Object, ObjectSymbol};
    let data = std::fs::read(binary).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let addresses: std::collections::HashMap<String, u64> = file
        .symbols()
        .filter_map(|s| Some((s.name().ok()?.to_owned(), s.address())))
        .collect();
    std::fs::read_to_string(order_file)
        .unwrap()
        .lines()
        .filter_map(|name| addresses.get(name).copied())
        .collect()
}

#[test]
fn startup_order_orders_the_optimized_link_from_temporal_traces() {
    let fixture = Fixture::new("twobins");
    fixture
        .config(&["$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_APP primes 2000 && $PGO_BUILD_BIN_HELPER"])
        .prepend_config("[pgo]\nstartup_order = \"ordering-file\"\n\n");
    fixture.run(&["run", "--no-compare"]).success();
    let report = fixture.report();
    let order = &report["startup_order"];
    assert!(order["traces"]["kept"].as_u64().unwrap() >= 3, "{order}");
    assert!(order["ordered_functions"].as_u64().unwrap() > 3, "{order}");
    let order_file = PathBuf::from(order["order_file"].as_str().unwrap());
    // Passed to the linker: lld placed the ordered functions first, in the file's order.
    let optimized = fixture.stage_bin("optimized", "app");
    let addresses = ordered_addresses(&optimized, &order_file);
    assert!(addresses.len() >= 3, "{addresses:?}");
    assert!(
        addresses.windows(2).all(|pair| pair[0] < pair[1]),
        "not in the order file's order: {addresses:?}"
    );
    for args in [&["work", "3000"][..], &["primes", "3000"]] {
        assert_eq!(
            run_binary(&optimized, args),
            run_binary(&fixture.stage_bin("baseline", "app"), args)
        );
    }
    fixture
        .run(&["profile", "show"])
        .success()
        .stderr_contains("temporal traces: ")
        .stderr_contains("the start-up order they give covers");
    let markdown = fixture.run(&["report", "--markdown"]);
    assert!(
        markdown
            .success()
            .stdout()
            .contains("Start-up order: ordering-file, from "),
        "{}",
        markdown.describe()
    );
    // Balanced partitioning from the same profile: lld reads the profile itself.
    let config = std::fs::read_to_string(fixture.root().join("pgo-build.toml")).unwrap();
    fixture.write(
        "pgo-build.toml",
        &config.replace("\"ordering-file\"", "\"balanced-compression\""),
    );
    fixture.run(&["optimize"]).success();
    let balanced = fixture.stage_bin("optimized", "app");
    assert_eq!(
        run_binary(&balanced, &["work", "3000"]),
        run_binary(&fixture.stage_bin("baseline", "app"), &["work", "3000"])
    );
    assert_eq!(
        fixture.report()["startup_order"]["mode"],
        "balanced-compression"
    );
    // Page faults of each variant, paired like the other metrics, and every staged binary's
    // compressed size.
    fixture
        .run(&["compare", "--metric", "faults", "--rounds", "3"])
        .success();
    let report = fixture.report();
    let summary = &report["compare"]["workloads"][0]["candidates"]["optimized"]["faults"];
    assert!(summary["median_ratio"].as_f64().unwrap() > 0.0, "{summary}");
    let runs = report["compare"]["workloads"][0]["runs"]
        .as_array()
        .unwrap();
    assert!(
        runs.iter().all(|run| run["faults"].as_u64().unwrap() > 50),
        "{runs:?}"
    );
    check_schema(&report, &report_schema(), "report");
    let compressed = report["binaries"]["app"]["optimized"]["compressed_bytes"]
        .as_u64()
        .unwrap();
    let size = report["binaries"]["app"]["optimized"]["size_bytes"]
        .as_u64()
        .unwrap();
    assert!(
        compressed > 1000 && compressed < size,
        "{compressed} of {size}"
    );
}

#[test]
fn startup_order_without_traces_or_without_lld_is_refused() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 2000 && $PGO_BUILD_BIN_HELPER"]);
    fixture.run(&["instrument"]).success();
    fixture.run(&["train"]).success();
    // Trained without temporal instrumentation: nothing to order from.
    fixture.prepend_config("[pgo]\nstartup_order = \"balanced\"\n\n");
    fixture
        .run(&["optimize"])
        .failure()
        .stderr_contains("needs the temporal traces of a training")
        .stderr_contains("has none");
    fixture.run(&["instrument"]).success();
    fixture.run(&["train"]).success();
    fixture.run(&["optimize"]).success();
    // A link through GNU ld cannot take lld's options: found by a probe link before any
    // build (doctor, so `run` before its first; instrument; optimize), not at the last link.
    let with_bfd = |command: &str| {
        let mut run = fixture.command(&[command]);
        run.env("RUSTFLAGS", "-Clink-arg=-fuse-ld=bfd");
        fixture.run_with(run)
    };
    for command in ["doctor", "instrument", "run"] {
        let refused = with_bfd(command);
        refused
            .failure()
            .stderr_contains(
                "[pgo] startup_order = \"balanced\" passes the function order to the linker",
            )
            .stderr_contains("this link runs `cc` without lld")
            .stderr_contains("found before any build");
        assert!(
            !refused.stderr().contains("cargo build of"),
            "{command}: {}",
            refused.describe()
        );
    }
    // The same from `[build] rustflags` in pgo-build.toml, which reach the builds as cargo
    // configuration rather than RUSTFLAGS.
    let config = std::fs::read_to_string(fixture.root().join("pgo-build.toml")).unwrap();
    fixture.write(
        "pgo-build.toml",
        &config.replace(
            "[pgo]\n",
            "[build]\nrustflags = [\"-Clink-arg=-fuse-ld=bfd\"]\n\n[pgo]\n",
        ),
    );
    fixture
        .run(&["doctor"])
        .failure()
        .stderr_contains("this link runs `cc` without lld")
        .stderr_contains("found before any build");
    fixture.write("pgo-build.toml", &config);
    // optimize refuses too, before building (here already for the rustflags that differ
    // from the instrumented build's).
    let refused = with_bfd("optimize");
    refused.failure();
    assert!(
        !refused.stderr().contains("cargo build of"),
        "{}",
        refused.describe()
    );
}
