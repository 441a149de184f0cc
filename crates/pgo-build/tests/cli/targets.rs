//! Release targets: musl, aarch64 through qemu, `doctor` per target.

use std::path::Path;

use crate::support::*;

const MUSL: &str = "x86_64-unknown-linux-musl";

const AARCH64: &str = "aarch64-unknown-linux-gnu";

/// The ELF header's machine (62 x86_64, 183 aarch64) and whether the binary asks for a program
/// interpreter (a dynamic loader): a static binary has no PT_INTERP program header.
fn elf_machine_and_interpreter(path: &Path) -> (u16, bool) {
    let data = std::fs::read(path).unwrap();
    assert_eq!(&data[..4], b"\x7fELF", "{} is not ELF", path.display());
    let u16_at = |at: usize| u16::from_le_bytes([data[at], data[at + 1]]);
    let phoff = u64::from_le_bytes(data[0x20..0x28].try_into().unwrap()) as usize;
    let (entry_size, count) = (u16_at(0x36) as usize, u16_at(0x38) as usize);
    let interpreter = (0..count).any(|i| {
        let at = phoff + i * entry_size;
        u32::from_le_bytes(data[at..at + 4].try_into().unwrap()) == 3
    });
    (u16_at(18), interpreter)
}

#[test]
fn a_static_musl_target_is_trained_and_optimized_in_its_own_stages() {
    let fixture = Fixture::new("twobins");
    fixture
        .config(&["$PGO_BUILD_BIN_APP work 20000 && $PGO_BUILD_BIN_HELPER"])
        .prepend_config(&format!(
            "[build]\ntargets = [\"{MUSL}\"]\n\n[bolt]\nenabled = true\n\n"
        ));
    fixture
        .run(&["run", "--no-compare"])
        .success()
        .stderr_contains(&format!("pgo-build target {MUSL}"))
        // BOLT's instrumented static binaries never write a profile: named, staged as they are.
        .stderr_contains(&format!("BOLT skipped for {MUSL}"))
        .stderr_contains("links its C runtime statically");
    assert!(
        !fixture.layout().path("optimized").exists(),
        "a target's stages live in target/pgo-build/<triple>/"
    );
    let optimized = fixture.target_layout(MUSL).bin("optimized", "app");
    let baseline = fixture.target_layout(MUSL).bin("baseline", "app");
    for binary in [&optimized, &baseline] {
        assert_eq!(
            elf_machine_and_interpreter(binary),
            (62, false),
            "{} is not a static x86_64 binary",
            binary.display()
        );
    }
    assert_eq!(
        run_binary(&optimized, &["work", "3000"]),
        run_binary(&baseline, &["work", "3000"])
    );
    let report = fixture.target_layout(MUSL).report();
    assert_eq!(report["target"], MUSL);
    let merged = &report["merged_profile"];
    assert!(merged["total_functions"].as_u64().unwrap() > 0, "{merged}");
    assert!(
        report["profiles"]["app"]["covered_functions"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(
        report["binaries"]["app"]["optimized"]["pgo"], true,
        "{report}"
    );
    assert_eq!(report["bolt"]["app"]["bolted"], false, "{report}");
    // The bolt stage holds the optimized binary, un-BOLTed.
    assert_eq!(
        std::fs::read(fixture.target_layout(MUSL).bin("bolt", "app")).unwrap(),
        std::fs::read(&optimized).unwrap()
    );
    fixture
        .run(&["report"])
        .success()
        .stderr_contains(&format!("pgo-build target {MUSL}"));
    // A committed profile per target: `{target}` in the path is the triple, and the profile
    // exported for one target is refused for another.
    fixture
        .run(&["export", "--output", "pgo/{target}.profdata"])
        .success();
    let exported = fixture.root().join(format!("pgo/{MUSL}.profdata"));
    assert!(exported.is_file());
    for extension in ["profdata", "json"] {
        std::fs::copy(
            fixture.root().join(format!("pgo/{MUSL}.{extension}")),
            fixture.root().join(format!("pgo/{AARCH64}.{extension}")),
        )
        .unwrap();
    }
    fixture.prepend_config("[pgo]\nprofile = \"pgo/{target}.profdata\"\n\n");
    fixture
        .run(&["optimize", "--target", AARCH64])
        .failure()
        .stderr_contains(&format!("was made for {MUSL}, this build is for {AARCH64}"));
    fixture
        .run(&[
            "export",
            "--output",
            "both.profdata",
            "--target",
            MUSL,
            "--target",
            AARCH64,
        ])
        .failure()
        .stderr_contains("export --output both.profdata would be the same file for every target");
}

/// The twobins fixture set up for aarch64 through qemu-user, as cargo would run it.
fn aarch64_fixture(train: &[&str]) -> Fixture {
    let fixture = Fixture::new("twobins");
    fixture.config(train).write(
        ".cargo/config.toml",
        &format!(
            "[target.{AARCH64}]\nlinker = \"aarch64-linux-gnu-gcc\"\n\
             runner = [\"qemu-aarch64\", \"-L\", \"/usr/aarch64-linux-gnu\"]\n"
        ),
    );
    fixture
}

#[test]
fn an_aarch64_target_trains_through_cargos_runner_and_children_started_by_variable_too() {
    // `app spawn` starts $PGO_BUILD_BIN_HELPER itself: a process an emulated binary starts.
    let fixture = aarch64_fixture(&["$PGO_BUILD_BIN_APP work 20000", "$PGO_BUILD_BIN_APP spawn"]);
    fixture
        .append_config("[[workload]]\nname = \"held\"\nrole = \"holdout\"\ncommand = \"$PGO_BUILD_BIN_APP work 30000\"\n")
        .prepend_config("[compare]\nrounds = 2\n\n[bolt]\nenabled = true\n\n");
    fixture
        .run(&["run", "--target", AARCH64])
        .success()
        // Debian's llvm-bolt instruments with an x86_64 runtime only: named, staged as it is.
        .stderr_contains(&format!("BOLT skipped for {AARCH64}"))
        .stderr_contains("instrumentation runtime here is built for x86_64")
        .stderr_contains("ran under the emulator `qemu-aarch64 -L /usr/aarch64-linux-gnu`")
        .stderr_contains("not aarch64 hardware");
    let report = fixture.target_layout(AARCH64).report();
    assert_eq!(
        report["profiles"]["helper"]["valid_files"], 1,
        "{}",
        report["profiles"]
    );
    assert!(
        report["compare"]["emulated"]
            .as_str()
            .unwrap()
            .contains("qemu-aarch64")
    );
    let optimized = fixture.target_layout(AARCH64).bin("optimized", "app");
    let baseline = fixture.target_layout(AARCH64).bin("baseline", "app");
    assert_eq!(
        elf_machine_and_interpreter(&optimized).0,
        183,
        "not an aarch64 ELF"
    );
    assert_eq!(
        report["binaries"]["app"]["optimized"]["pgo"], true,
        "{report}"
    );
    let under_qemu = |binary: &Path| {
        run_binary(
            Path::new("qemu-aarch64"),
            &[
                "-L",
                "/usr/aarch64-linux-gnu",
                binary.to_str().unwrap(),
                "work",
                "3000",
            ],
        )
    };
    assert_eq!(under_qemu(&optimized), under_qemu(&baseline));
    // Instruction counts of an emulator mean nothing: refused, naming what can be measured.
    fixture
        .run(&["compare", "--target", AARCH64, "--metric", "instructions"])
        .failure()
        .stderr_contains("--metric instructions cannot be measured for aarch64-unknown-linux-gnu")
        .stderr_contains("--metric wall or cpu");
}

#[test]
fn an_emulated_binary_starting_a_sibling_directly_is_explained_without_binfmt() {
    let fixture = aarch64_fixture(&["$PGO_BUILD_BIN_APP spawn-sibling"]);
    fixture.run(&["instrument", "--target", AARCH64]).success();
    let train = fixture.run(&["train", "--target", AARCH64]);
    let registered = std::fs::read_to_string("/proc/sys/fs/binfmt_misc/qemu-aarch64")
        .is_ok_and(|entry| entry.starts_with("enabled"));
    if registered {
        // The kernel runs it through qemu; QEMU_LD_PREFIX (from the runner's -L) finds its loader.
        train.success();
    } else {
        train
            .failure()
            .stderr_contains("exit status: 127")
            .stderr_contains("Start them through $PGO_BUILD_BIN_<NAME>")
            .stderr_contains("qemu-user-binfmt");
    }
}

#[test]
fn doctor_names_each_missing_piece_of_a_target_with_its_fix() {
    let fixture = Fixture::new("twobins");
    fixture.config(&["$PGO_BUILD_BIN_APP work 10"]).write(
        ".cargo/config.toml",
        "[target.riscv64gc-unknown-linux-gnu]\nlinker = \"riscv64-linux-gnu-gcc-missing\"\n\
         runner = \"qemu-riscv64-missing -L /usr/riscv64-linux-gnu\"\n",
    );
    fixture
        .run(&[
            "doctor",
            "--target",
            "riscv64gc-unknown-linux-gnu",
            "--target",
            AARCH64,
        ])
        .failure()
        // Not installed by scripts/install-deps, so missing on every machine the tests run on.
        .stderr_contains("rustup target add riscv64gc-unknown-linux-gnu")
        .stderr_contains("the linker `riscv64-linux-gnu-gcc-missing`")
        .stderr_contains("apt-get install gcc-riscv64-linux-gnu")
        .stderr_contains("the runner `qemu-riscv64-missing`")
        .stderr_contains("apt-get install qemu-user")
        // The second target is checked too: no linker and no runner configured for it.
        .stderr_contains(&format!(
            "`target.{AARCH64}.linker = \"aarch64-linux-gnu-gcc\"`"
        ))
        .stderr_contains(&format!("target.{AARCH64}.runner = [\"qemu-aarch64\""))
        .stderr_contains(&format!(
            "doctor found problems for riscv64gc-unknown-linux-gnu, {AARCH64}"
        ));
    let builds = fixture.run(&["build", "--target", "riscv64gc-unknown-linux-gnu"]);
    builds
        .failure()
        .stderr_contains("rustup target add riscv64gc-unknown-linux-gnu");
}
