//! Cross-language PGO: the C a build script compiles through the `cc` crate (fixture `cdep`),
//! instrumented and optimized with the Rust's profile by clang of rustc's LLVM.

use crate::support::schema::*;
use crate::support::*;

/// The C file of the fixture, changed so `mix_checksum`'s control flow differs from the
/// training's (a second loop).
fn change_mix_checksum(fixture: &Fixture) {
    fixture.edit("checksum/csrc/mix.c", |text| {
        text.replacen(
            "    return sum;\n}",
            "    for (uint64_t j = 0; j < (len & 7); j++) {\n        if (sum & 1) sum ^= j; \
             else sum += scramble(j);\n    }\n    return sum;\n}",
            1,
        )
    });
}

/// The section names of an object file (`readelf -SW`).
fn sections(object: &str) -> String {
    let output = std::process::Command::new("readelf")
        .args(["-SW", object])
        .output()
        .unwrap();
    assert!(output.status.success(), "readelf failed on {object}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The last logged compile of `mix.c` in a stage.
fn mix_compile(fixture: &Fixture, stage: &str) -> serde_json::Value {
    let log = std::fs::read_to_string(fixture.layout().path(&format!("{stage}/cc.jsonl")))
        .unwrap_or_else(|err| panic!("no C compile log for the {stage} stage: {err}"));
    let line = log
        .lines()
        .rfind(|l| l.contains("mix.c"))
        .unwrap_or_else(|| panic!("mix.c was not compiled in the {stage} stage:\n{log}"));
    serde_json::from_str(line).unwrap()
}

#[test]
fn the_c_is_trained_into_the_same_profile_and_the_optimized_c_uses_it() {
    let fixture = Fixture::new("cdep");
    let run = fixture.run(&["run", "--compare-rounds", "2"]);
    run.success()
        .stderr_contains("clang for cross-language PGO")
        // The baseline's C is the user's compiler's: the comparison says what it measures,
        // and so does the run before its first build.
        .stderr_contains("the comparison measures the compiler switch as well as PGO");
    let stderr = run.stderr();
    let up_front = stderr
        .find("the comparison will measure the compiler switch as well as PGO")
        .expect("said before any build");
    assert!(
        up_front < stderr.find("cargo build of").unwrap(),
        "{stderr}"
    );
    assert!(
        stderr[up_front..].contains("To measure PGO alone, set CC="),
        "{stderr}"
    );
    let report = fixture.report();
    check_schema(&report, &report_schema(), "report");
    let differ = report["compare"]["c_compilers_differ"].as_str().unwrap();
    assert!(
        differ.contains("in baseline and by ") && differ.contains("clang"),
        "{differ}"
    );
    let compilers = &report["c_compilers"];
    // The baseline keeps the user's compiler (the machine's `cc`), and the report says which.
    assert_eq!(compilers["baseline"]["compiler"], "cc", "{compilers}");
    let baseline_version = compilers["baseline"]["version"].as_str().unwrap();
    assert!(
        !baseline_version.is_empty() && baseline_version != "version unknown",
        "{compilers}"
    );
    assert_eq!(compilers["baseline"]["flags"], serde_json::json!([]));
    let instrumented = compilers["instrumented"]["flags"].to_string();
    assert!(
        instrumented.contains("-fprofile-generate"),
        "{instrumented}"
    );
    assert_eq!(compilers["instrumented"]["packages"]["checksum"], 1);
    let merged = merged_profile(&fixture);
    let used = compilers["optimized"]["flags"][0].as_str().unwrap();
    assert!(
        used.starts_with("-fprofile-use=")
            && used.ends_with(merged.file_name().unwrap().to_str().unwrap()),
        "the C uses the Rust's merged profile {}: {used}",
        merged.display()
    );
    assert!(
        compilers["optimized"]["version"]
            .as_str()
            .unwrap()
            .contains(&format!("clang version {}", llvm_major())),
        "{compilers}"
    );

    // The C functions are in the merged profile with counts, named by their package.
    let show = fixture.run(&["profile", "show", "--json", "--top", "5"]);
    show.success();
    let shown: serde_json::Value = serde_json::from_str(&show.stdout()).unwrap();
    let hottest = &shown["hottest"][0];
    assert_eq!(hottest["name"], "mix_checksum", "{shown}");
    assert_eq!(hottest["crate"], "checksum (C)", "{shown}");
    assert!(hottest["count"].as_u64().unwrap() > 1_000_000, "{shown}");
    let hot_static = shown["hottest"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"].as_str().unwrap().ends_with("scramble"))
        .unwrap_or_else(|| panic!("the static C function is not in the profile: {shown}"));
    assert_eq!(hot_static["crate"], "checksum (C)");
    assert!(shown["languages"]["c"].as_f64().unwrap() > 0.5, "{shown}");

    // clang used the counts: the function training never ran is laid out as unlikely, which
    // the instrumented (profile-less) compile of the same file does not do.
    let optimized = mix_compile(&fixture, "optimized");
    assert_eq!(
        optimized["profile_warnings"],
        serde_json::json!([]),
        "{optimized}"
    );
    let optimized_sections = sections(optimized["output"].as_str().unwrap());
    assert!(
        optimized_sections.contains(".text.unlikely.mix_never_called"),
        "{optimized_sections}"
    );
    let instrumented_sections = sections(
        mix_compile(&fixture, "instrumented")["output"]
            .as_str()
            .unwrap(),
    );
    assert!(!instrumented_sections.contains(".text.unlikely."));
    let markdown = fixture.run(&["report", "--markdown"]);
    markdown.success();
    assert!(
        markdown.stdout().contains("| instrumented | /")
            && markdown
                .stdout()
                .contains("| -fprofile-generate | checksum: 1 |"),
        "the report says which C compiler and flags each stage used:\n{}",
        markdown.stdout()
    );
    let expected = run_binary(&fixture.stage_bin("baseline", "checksum"), &["1000", "2"]);
    assert_eq!(
        run_binary(&fixture.stage_bin("optimized", "checksum"), &["1000", "2"]),
        expected
    );
}

#[test]
fn changed_c_is_summarised_per_crate_and_changed_c_settings_are_refused() {
    let fixture = Fixture::new("cdep");
    fixture.run(&["instrument"]).success();
    fixture.run(&["train"]).success();

    // The user's C flags are part of the settings the profile was recorded with.
    let mut command = fixture.command(&["optimize"]);
    command.env("CFLAGS", "-O1");
    fixture
        .run_with(command)
        .failure()
        .stderr_contains("C compiler: instrumented with")
        .stderr_contains("CFLAGS=\"-O1\"");
    assert!(!fixture.stage_bin("optimized", "checksum").exists());

    change_mix_checksum(&fixture);
    let optimized = fixture.run(&["optimize"]);
    optimized
        .success()
        .stderr_contains("1 functions changed since the profile was recorded");
    assert!(
        optimized.stdout().contains("checksum (C)"),
        "{}",
        optimized.describe()
    );
    assert!(
        !optimized.stderr().contains("hash mismatch"),
        "clang's raw warnings are summarised, not passed through:\n{}",
        optimized.describe()
    );
    let summary = &fixture.report()["optimize_diagnostics"]["per_crate"]["checksum (C)"];
    assert_eq!(summary["mismatched_functions"], 1, "{summary}");
    fixture
        .run(&["--strict", "optimize"])
        .failure()
        .stderr_contains("changed since the profile was recorded");
}

#[test]
fn a_clang_of_another_llvm_major_is_refused_with_the_fix() {
    let fixture = Fixture::new("cdep");
    let fake = fixture.root().join("tools/clang-14");
    fixture.write_executable(
        "tools/clang-14",
        "#!/bin/sh\necho 'Ubuntu clang version 14.0.6'\necho 'Target: x86_64-pc-linux-gnu'\n",
    );
    for variable in ["CC", "PGO_BUILD_CLANG"] {
        let mut command = fixture.command(&["instrument"]);
        command.env(variable, &fake);
        fixture
            .run_with(command)
            .failure()
            .stderr_contains(&format!("{variable}={}", fake.display()))
            .stderr_contains("clang 14 writes another raw profile format")
            .stderr_contains(&format!("apt-get install {}", llvm_tool("clang")));
    }
    assert!(!fixture.layout().path("instrumented").exists());
    // Off, the user's compiler is the user's business.
    fixture.edit("pgo-build.toml", |t| t.replace("cross_language = true", ""));
    let mut command = fixture.command(&["build"]);
    command.env("PGO_BUILD_CLANG", &fake);
    fixture.run_with(command).success();
}

/// The `.comment` strings of a binary: each compiler that contributed code names itself.
fn comment(binary: &std::path::Path) -> String {
    let output = std::process::Command::new("readelf")
        .args(["-p", ".comment"])
        .arg(binary)
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Every C compile logged under a directory (explore's builds each have their own layout).
fn compiles_under(dir: &std::path::Path) -> Vec<serde_json::Value> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() && path.file_name().unwrap() != "cargo-target" {
            found.extend(compiles_under(&path));
        } else if path.file_name().unwrap() == "cc.jsonl" {
            let text = std::fs::read_to_string(&path).unwrap();
            found.extend(text.lines().map(|l| serde_json::from_str(l).unwrap()));
        }
    }
    found
}

#[test]
fn explore_tells_the_compiler_switch_from_cross_language_pgo_and_thin_lto() {
    let fixture = Fixture::new("cdep");
    // Off in the configuration: the C variants are measured when named.
    fixture.edit("pgo-build.toml", |t| t.replace("cross_language = true", ""));
    fixture
        .run(&[
            "explore",
            "--variants",
            "clang,pgo+c,pgo+c+xlto",
            "--rounds",
            "2",
        ])
        .success()
        .stderr_contains("exploring 5 variants: baseline, pgo, clang, pgo+c, pgo+c+xlto");
    let explore = &fixture.report()["explore"];
    for variant in explore["variants"].as_array().unwrap() {
        assert_eq!(variant["status"], "measured", "{variant}");
    }
    let binary = |name: &str| {
        fixture
            .layout()
            .path("explore")
            .join(name)
            .join("bin/checksum")
    };
    for name in ["baseline", "pgo"] {
        assert!(
            !comment(&binary(name)).contains("clang version"),
            "{name}: the user's cc"
        );
    }
    for name in ["clang", "pgo+c", "pgo+c+xlto"] {
        let comment = comment(&binary(name));
        assert!(
            comment.contains(&format!("clang version {}", llvm_major())),
            "{name}: {comment}"
        );
    }
    // Only the ThinLTO variant's C objects are LLVM bitcode, for the link to optimize.
    let compiles = compiles_under(&fixture.layout().path("explore"));
    let bitcode: Vec<bool> = compiles
        .iter()
        .map(|c| {
            let object = std::fs::read(c["output"].as_str().unwrap()).unwrap();
            object.starts_with(b"BC\xC0\xDE")
        })
        .collect();
    assert!(bitcode.iter().any(|b| *b), "{compiles:?}");
    assert!(bitcode.iter().any(|b| !*b), "{compiles:?}");
}

#[test]
fn cross_language_thin_lto_is_refused_when_the_link_is_not_lld() {
    let fixture = Fixture::new("cdep");
    fixture.edit("pgo-build.toml", |t| {
        t.replace("cross_language = true", "cross_language = \"thin-lto\"")
    });
    let mut command = fixture.command(&["instrument"]);
    command.env("RUSTFLAGS", "-Clink-arg=-fuse-ld=bfd");
    fixture
        .run_with(command)
        .failure()
        .stderr_contains("cross-language ThinLTO leaves LLVM bitcode for the linker")
        .stderr_contains("without lld");
    fixture.edit("pgo-build.toml", |t| t.replace("\"thin-lto\"", "\"thin\""));
    fixture
        .run(&["doctor"])
        .failure()
        .stderr_contains("expected true, false or \"thin-lto\"");
}

/// In continuous mode the counters live in the mapped profile file: C compiled without
/// counter relocation would keep its counts in memory, and they would be lost.
#[test]
fn continuous_mode_keeps_the_c_counts() {
    let fixture = Fixture::new("cdep");
    fixture.run(&["--continuous", "instrument"]).success();
    fixture.run(&["--continuous", "train"]).success();
    let show = fixture.run(&["profile", "show", "--json", "--top", "1"]);
    show.success();
    let shown: serde_json::Value = serde_json::from_str(&show.stdout()).unwrap();
    assert_eq!(shown["hottest"][0]["name"], "mix_checksum", "{shown}");
    assert!(
        shown["hottest"][0]["count"].as_u64().unwrap() > 1_000_000,
        "{shown}"
    );
}

/// sccache as cargo's rustc wrapper caches the C too: the wrapper runs clang through it, and a
/// clean rebuild of the instrumented stage takes the C from the cache.
#[test]
fn sccache_caches_the_profiled_c() {
    let cache = tempfile::tempdir().unwrap();
    // A server of this test's own, on a port of its own.
    let port = crate::support::free_port().to_string();
    let fixture = Fixture::new("cdep");
    let sccache = |args: &[&str]| {
        let mut command = std::process::Command::new("sccache");
        command
            .args(args)
            .env("SCCACHE_DIR", cache.path())
            .env("SCCACHE_SERVER_PORT", &port);
        command.output().unwrap()
    };
    let c_hits = || {
        let output = sccache(&["--show-stats", "--stats-format=json"]);
        let stats: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        stats["stats"]["cache_hits"]["counts"]["C/C++"]
            .as_u64()
            .unwrap_or(0)
    };
    for _ in 0..2 {
        let _ = std::fs::remove_dir_all(fixture.root().join("target"));
        let mut command = fixture.command(&["instrument"]);
        command
            .env("RUSTC_WRAPPER", "sccache")
            .env("SCCACHE_DIR", cache.path())
            .env("SCCACHE_SERVER_PORT", &port);
        fixture.run_with(command).success();
    }
    let hits = c_hits();
    sccache(&["--stop-server"]);
    assert_eq!(hits, 1, "the second build's mix.c came from the cache");
    let compile = mix_compile(&fixture, "instrumented");
    assert!(compile["success"].as_bool().unwrap(), "{compile}");
}

/// C that a build dependency compiles is linked into a build script, which rustc links
/// without the profile runtime: it gets clang without the profile flags (with them, the
/// instrumented build failed to link the build script: value profiling calls the runtime).
#[test]
fn c_of_a_build_dependency_is_not_instrumented() {
    let fixture = Fixture::new("cdep");
    fixture
        .write(
            "hostc/Cargo.toml",
            "[package]\nname = \"hostc\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
             [build-dependencies]\ncc = \"1\"\n",
        )
        .write(
            "hostc/build.rs",
            "fn main() {\n    cc::Build::new().file(\"csrc/table.c\").compile(\"table\");\n}\n",
        )
        .write(
            "hostc/csrc/table.c",
            "#include <string.h>\ntypedef int (*op)(int);\nstatic int twice(int x) { return 2 * x; }\n\
             static int thrice(int x) { return 3 * x; }\n\
             int table_value(int n, char *buf, int len) {\n    op ops[2] = {twice, thrice};\n\
             \x20   memset(buf, n, len);\n    return ops[n & 1](n) + buf[len - 1];\n}\n",
        )
        .write(
            "hostc/src/lib.rs",
            "unsafe extern \"C\" {\n    fn table_value(n: i32, buf: *mut u8, len: i32) -> i32;\n}\n\
             pub fn value(n: i32) -> i32 {\n    let mut buf = vec![0u8; 64];\n\
             \x20   unsafe { table_value(n, buf.as_mut_ptr(), buf.len() as i32) }\n}\n",
        )
        .edit("Cargo.toml", |t| t.replace("[\"checksum\"]", "[\"checksum\", \"hostc\"]"))
        .edit("checksum/Cargo.toml", |t| format!("{t}hostc = {{ path = \"../hostc\" }}\n"))
        .edit("checksum/build.rs", |t| {
            t.replacen(
                "fn main() {\n",
                "fn main() {\n    println!(\"cargo:rustc-env=HOST_VALUE={}\", hostc::value(7));\n",
                1,
            )
        });
    fixture.run(&["instrument"]).success();
    fixture.run(&["train"]).success();
    let compiled: Vec<serde_json::Value> =
        std::fs::read_to_string(fixture.layout().path("instrumented/cc.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    assert!(
        compiled.iter().all(|c| c["package"] == "checksum"),
        "only the target's C is profiled and logged: {compiled:?}"
    );
}

/// A library the build script links from the system is C no build compiles: named, so a user
/// knows that part gets no profile (xz2 did this with the system's liblzma in the bench).
#[test]
fn a_system_library_a_build_script_links_is_named_as_unprofiled() {
    let fixture = Fixture::new("cdep");
    fixture.edit("checksum/build.rs", |t| {
        t.replacen(
            "fn main() {\n",
            "fn main() {\n    println!(\"cargo:rustc-link-lib=dylib=z\");\n",
            1,
        )
    });
    fixture
        .run(&["instrument"])
        .success()
        .stderr_contains("C/C++ from the system, which no build here compiles")
        .stderr_contains("checksum links z");
    let compilers = &fixture.report()["c_compilers"]["instrumented"];
    assert_eq!(
        compilers["system_libraries"]["checksum"],
        serde_json::json!(["z"])
    );
    assert_eq!(
        compilers["packages"]["checksum"], 1,
        "its own C is still profiled"
    );
}

/// A build script that probes `-stdlib=libc++` (as unrar-ng-sys does) builds under clang what
/// it builds under the user's g++: the flag is left out, the C++ compiles against the standard
/// library the toolchain links, and its functions are in the profile with counts.
#[test]
fn a_build_scripts_libcxx_probe_keeps_the_users_cxx_standard_library() {
    let fixture = Fixture::new("cppdep");
    fixture
        .run(&["run", "--no-compare"])
        .success()
        .stderr_contains("words: its build script's -stdlib=libc++ left out");
    let report = fixture.report();
    check_schema(&report, &report_schema(), "report");
    for stage in ["instrumented", "optimized"] {
        assert_eq!(
            report["c_compilers"][stage]["dropped_flags"]["words"],
            serde_json::json!(["-stdlib=libc++"]),
            "{stage}: {}",
            report["c_compilers"]
        );
    }
    let show = fixture.run(&["profile", "show", "--json", "--top", "40"]);
    show.success();
    let shown: serde_json::Value = serde_json::from_str(&show.stdout()).unwrap();
    let counted = shown["hottest"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "distinct_words")
        .unwrap_or_else(|| panic!("the C++ function is not in the profile: {shown}"));
    assert_eq!(counted["crate"], "words (C)", "{shown}");
    assert!(counted["count"].as_u64().unwrap() > 1000, "{shown}");
    let expected = run_binary(&fixture.stage_bin("baseline", "words"), &["3000", "2"]);
    assert_eq!(
        run_binary(&fixture.stage_bin("optimized", "words"), &["3000", "2"]),
        expected
    );
}

/// C/C++ that clang cannot compile: the failure names the package, the compiler's first error
/// and the exclusion; excluded, the package's C/C++ keeps the user's compiler, said and
/// recorded, while the rest of the build stays cross-language.
#[test]
fn a_package_whose_cxx_clang_cannot_compile_is_named_and_can_be_excluded() {
    let fixture = Fixture::new("cppdep");
    fixture.edit("words/cppsrc/words.cpp", |text| {
        format!("#ifdef __clang__\n#error \"words.cpp is GCC-only\"\n#endif\n{text}")
    });
    fixture
        .run(&["run", "--no-compare"])
        .failure()
        .stderr_contains("the C/C++ of `words` did not compile with")
        .stderr_contains("words: ")
        .stderr_contains("error: \"words.cpp is GCC-only\"")
        .stderr_contains("cross_language_exclude = [\"words\"]");
    fixture.edit("pgo-build.toml", |text| {
        text.replace(
            "cross_language = true",
            "cross_language = true\ncross_language_exclude = [\"words\"]",
        )
    });
    fixture
        .run(&["run", "--no-compare"])
        .success()
        .stderr_contains("C/C++ of words compiled by your own compiler, without profile");
    let report = fixture.report();
    check_schema(&report, &report_schema(), "report");
    assert_eq!(
        report["c_compilers"]["optimized"]["excluded"],
        serde_json::json!(["words"]),
        "{}",
        report["c_compilers"]
    );
    let expected = run_binary(&fixture.stage_bin("baseline", "words"), &["3000", "2"]);
    assert_eq!(
        run_binary(&fixture.stage_bin("optimized", "words"), &["3000", "2"]),
        expected
    );
}

/// doctor compiles a C and a C++ probe with the clang cross-language PGO would use, so a clang
/// that cannot build C++ here (its standard library's headers missing: a fault the machine's
/// real clang does not have, so a stand-in plays it) is named before any build.
#[test]
fn doctor_finds_a_clang_that_cannot_compile_cxx_before_any_build() {
    let fixture = Fixture::new("cppdep");
    let tools = tempfile::tempdir().unwrap();
    let (clang_name, cxx_name) = (llvm_tool("clang"), llvm_tool("clang++"));
    let clang = tools.path().join(&clang_name);
    std::fs::write(&clang, format!("#!/bin/sh\nexec {clang_name} \"$@\"\n")).unwrap();
    std::fs::write(
        tools.path().join(&cxx_name),
        format!(
            "#!/bin/sh\ncase \"$*\" in *--version*) exec {cxx_name} \"$@\";; esac\n\
             echo \"probe.cpp:1:10: fatal error: 'string' file not found\" >&2; exit 1\n"
        ),
    )
    .unwrap();
    for name in [&clang_name, &cxx_name] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            tools.path().join(name),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
    }
    for args in [&["doctor"][..], &["run", "--no-compare"]] {
        let mut command = fixture.command(args);
        command.env("PGO_BUILD_CLANG", &clang);
        let refused = fixture.run_with(command);
        refused
            .failure()
            .stderr_contains("cannot compile a C++ file for cross-language PGO")
            .stderr_contains("'string' file not found");
        assert!(
            !refused.stderr().contains("cargo build of"),
            "{}",
            refused.describe()
        );
    }
    // The machine's own clang passes.
    fixture
        .run(&["doctor"])
        .success()
        .stderr_contains("compile C and C++ with -fprofile-generate here");
}

/// Rust-only PGO leaves the C alone, and the C is where this program's work is: the answer
/// says so from its counted runs and names `--cross-language`; with it, the same program ships.
#[test]
fn when_the_work_is_c_the_answer_says_so_and_cross_language_pgo_is_what_pays() {
    let fixture = Fixture::new("cdep");
    fixture.edit("pgo-build.toml", |text| {
        text.replace("cross_language = true", "cross_language = false")
    });
    fixture.append_config("\n[compare]\nmetric = \"instructions\"\n");
    let rust_only = fixture.run(&["run", "--compare-rounds", "2"]);
    rust_only.success();
    let stdout = rust_only.stdout();
    assert!(!stdout.contains("Ship "), "{stdout}");
    let report = fixture.report();
    check_schema(&report, &report_schema(), "report");
    assert!(
        report["compare"]["counter"]
            .as_str()
            .is_some_and(|c| c.contains("callgrind")),
        "this test needs callgrind's counts by function (perf stat counts totals only)"
    );
    let code = &report["compare"]["workloads"][0]["code"];
    let baseline = &code["baseline"];
    let share = baseline["c_cpp"].as_f64().unwrap()
        / (baseline["c_cpp"].as_f64().unwrap() + baseline["rust"].as_f64().unwrap());
    assert!(share > 0.5, "{code}");
    assert_eq!(baseline["functions"][0]["name"], "mix_checksum", "{code}");
    assert_eq!(baseline["functions"][0]["language"], "c_cpp", "{code}");
    let why = stdout
        .lines()
        .find(|l| l.contains("Why it"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        why.contains("are C/C++ compiled into the program (`mix_checksum` first), which Rust-only PGO leaves as it was")
            && why.contains("`--cross-language` profiles them too"),
        "{why}"
    );
    // What it names pays: the C profiled too, the same held-out work ships.
    fixture.edit("pgo-build.toml", |text| {
        text.replace("cross_language = false", "cross_language = true")
    });
    let cross = fixture.run(&["run", "--compare-rounds", "2"]);
    cross.success().stdout_contains("Ship optimized: ");
    assert!(!cross.stdout().contains("Why it"), "{}", cross.describe());
}

/// Where a comparison by wall time ships nothing and counted nothing, `run` counts one run of
/// each side of the held-out work for the answer's why: the same cause named as by a
/// comparison by instructions.
#[test]
fn a_comparison_by_wall_time_that_ships_nothing_counts_whose_code_ran_once() {
    let fixture = Fixture::new("cdep");
    fixture.edit("pgo-build.toml", |text| {
        text.replace("cross_language = true", "cross_language = false")
            // Slower by wall time for certain: a verdict, so no instruction fallback counts.
            .replace(
                "command = \"$PGO_BUILD_BIN_CHECKSUM 400000 20\"",
                "command = \"$PGO_BUILD_BIN_CHECKSUM 400000 20; if [ \\\"$PGO_BUILD_STAGE\\\" = optimized ]; then sleep 0.3; fi\"",
            )
    });
    let run = fixture.run(&["run", "--compare-rounds", "7"]);
    run.success()
        .stderr_contains("nothing ships: counting whose code the held-out work runs (one run of each held-out workload on baseline and optimized");
    let stdout = run.stdout();
    assert!(stdout.contains("Do not ship optimized"), "{stdout}");
    let report = fixture.report();
    check_schema(&report, &report_schema(), "report");
    let compare = &report["compare"];
    assert_eq!(compare["metric"], "wall", "{compare}");
    assert!(compare["counter"].is_null(), "{compare}");
    let code = &compare["workloads"][0]["code"];
    assert_eq!(
        code["baseline"]["functions"][0]["name"], "mix_checksum",
        "{code}"
    );
    assert!(code["optimized"]["c_cpp"].as_u64().unwrap() > 0, "{code}");
    // Its own logs: the comparison's are as it left them.
    assert!(
        fixture
            .layout()
            .path("logs/count-bigger-baseline.log")
            .is_file()
    );
    assert!(
        fixture
            .layout()
            .path("logs/compare-bigger-baseline.log")
            .is_file()
    );
    let why = stdout
        .lines()
        .find(|l| l.contains("Why it"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        why.contains("are C/C++ compiled into the program (`mix_checksum` first)"),
        "{why}"
    );
}

/// `explore` measures the C variants unasked where build scripts compile C/C++ (and the clang
/// they need is installed), not only with cross-language PGO already on: the answer's why
/// names `--cross-language`, and `explore` is where its worth is measured.
#[test]
fn explore_measures_the_c_variants_where_build_scripts_compile_c() {
    let fixture = Fixture::new("cdep");
    fixture.edit("pgo-build.toml", |text| {
        text.replace("cross_language = true", "cross_language = false")
    });
    // Nothing is built within no budget: what explore would measure is what it lists.
    let run = fixture.run(&["explore", "--budget", "0s"]);
    run.stderr_contains(
        "C/C++ compiled by build scripts (checksum): measuring the C variants too (clang alone, \
         then with cross-language PGO)",
    );
    let variants = fixture.report()["explore"]["variants"].clone();
    let names: Vec<&str> = variants
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    for c_variant in ["clang", "pgo+c", "pgo+c+xlto"] {
        assert!(names.contains(&c_variant), "{names:?}");
    }
    // Without C in the build, none of them.
    let rust_only = Fixture::new("twobins");
    rust_only.config(&["$PGO_BUILD_BIN_APP work 10"]);
    rust_only.append_config(
        "\n[[workload]]\nname = \"held\"\nrole = \"holdout\"\ncommand = \"$PGO_BUILD_BIN_APP work 20\"\n",
    );
    let run = rust_only.run(&["explore", "--budget", "0s"]);
    assert!(
        !run.stderr().contains("measuring the C variants"),
        "{}",
        run.describe()
    );
    let variants = rust_only.report()["explore"]["variants"].clone();
    let names: Vec<&str> = variants
        .as_array()
        .unwrap_or_else(|| panic!("{}", run.describe()))
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"pgo+lto"), "{names:?}");
    assert!(
        !names
            .iter()
            .any(|n| ["clang", "pgo+c", "pgo+c+xlto"].contains(n)),
        "{names:?}"
    );
}
