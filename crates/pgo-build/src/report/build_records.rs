//! The records of what a stage's build did, as `report.json` keeps them per stage: its links
//! (`links`), what sccache served (`sccache`), the C compiler of its build scripts
//! (`c_compilers`), and its rustc against the memory budget (`rustc_memory`). Re-exported by
//! `records`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What one rustc compiles: one of rustc's crate types (its first `--crate-type`), or a
/// package's build script (cargo compiles it as a binary named `build_script_*`). The
/// memory budget's estimates, its guesses and cargo's timing units are told apart by it.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum CrateKind {
    /// rustc's own default, without a `--crate-type`.
    #[default]
    Bin,
    Lib,
    Rlib,
    Dylib,
    Cdylib,
    Staticlib,
    ProcMacro,
    BuildScript,
}

impl CrateKind {
    const ALL: [CrateKind; 8] = [
        CrateKind::Bin,
        CrateKind::Lib,
        CrateKind::Rlib,
        CrateKind::Dylib,
        CrateKind::Cdylib,
        CrateKind::Staticlib,
        CrateKind::ProcMacro,
        CrateKind::BuildScript,
    ];

    /// As rustc's `--crate-type` and the records write it.
    pub fn name(self) -> &'static str {
        match self {
            CrateKind::Bin => "bin",
            CrateKind::Lib => "lib",
            CrateKind::Rlib => "rlib",
            CrateKind::Dylib => "dylib",
            CrateKind::Cdylib => "cdylib",
            CrateKind::Staticlib => "staticlib",
            CrateKind::ProcMacro => "proc-macro",
            CrateKind::BuildScript => "build-script",
        }
    }

    /// Read from its name; `None` for a crate type rustc does not have.
    pub fn from_name(name: &str) -> Option<CrateKind> {
        CrateKind::ALL.into_iter().find(|kind| kind.name() == name)
    }

    /// A library of any type: what cargo's timing report calls a package's unnamed unit.
    pub fn is_library(self) -> bool {
        !matches!(self, CrateKind::Bin | CrateKind::BuildScript)
    }
}

impl std::fmt::Display for CrateKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Link figures of one build, for the report.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LinkSummary {
    /// Links allowed at once.
    pub slots: usize,
    /// How the number of slots was chosen.
    pub slots_reason: String,
    pub links: usize,
    /// The largest peak RSS of one link.
    pub max_rss_bytes: u64,
    /// Time links spent waiting for a slot, summed.
    pub wait_secs: f64,
}

/// What sccache did during one stage's build.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StageCache {
    /// rustc invocations sccache saw.
    pub requests: u64,
    pub hits: u64,
    pub misses: u64,
    /// Invocations sccache does not cache (binaries, build scripts, incremental builds).
    pub not_cacheable: u64,
    /// hits / (hits + misses).
    pub hit_rate: Option<f64>,
}

/// The C compiler of one stage's build scripts, and what it compiled.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CCompilerRecord {
    pub compiler: String,
    /// The first line of the compiler's `--version`.
    pub version: String,
    /// What pgo-build added to every C and C++ compile (after the user's own flags).
    pub flags: Vec<String>,
    /// Package → C/C++ files it compiled in this build (0 when cargo reused them).
    pub packages: BTreeMap<String, usize>,
    /// Package → libraries its build script links dynamically: C no build of the workspace
    /// compiles (a system library), which gets no profile.
    #[serde(default)]
    pub system_libraries: BTreeMap<String, Vec<String>>,
    /// Package → flags its build script gave that clang left out, to build what the user's
    /// compiler would (`-stdlib=libc++`, which g++ rejects and clang accepts).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub dropped_flags: BTreeMap<String, Vec<String>>,
    /// Packages whose C/C++ kept the user's compiler, without profile (`[pgo]
    /// cross_language_exclude`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded: Vec<String>,
}

/// What the rustc of one stage's build did against the budget, for the report.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RustcSummary {
    pub budget_bytes: u64,
    /// What of it rustc may use: the budget less `rustc_wrapper::OVERHEAD`.
    pub rustc_budget_bytes: u64,
    /// How the budget was chosen.
    pub budget_reason: String,
    /// rustc allowed at once (CPUs), and cargo's job slots.
    pub cpus: usize,
    pub cargo_jobs: u32,
    pub invocations: usize,
    /// The heaviest ten crates measured, heaviest first.
    pub heaviest: Vec<CrateFigures>,
    /// Time rustc spent waiting for admission, summed over crates.
    pub wait_secs: f64,
    /// Of it, the time a CPU slot was free but memory was not: what the budget cost.
    #[serde(default)]
    pub memory_wait_secs: f64,
    /// Mean of |peak - estimate| / peak over crates measured against an earlier measurement.
    pub estimate_error: Option<f64>,
    /// Crates whose peak exceeded their (measured, not guessed) estimate.
    pub overruns: Vec<CrateFigures>,
    /// Crates estimated above the whole budget, which ran alone.
    pub alone: Vec<CrateFigures>,
    /// Crates whose peak was not measured: behind sccache, its cache hits (no rustc ran).
    pub unmeasured: usize,
    /// The wall time of the stage's cargo build (its invocations together).
    #[serde(default)]
    pub build_secs: Option<f64>,
    /// What the dependency graph and the cores allowed at best (see cargo_timings.rs): a build
    /// near it is limited by them, not by the budget.
    #[serde(default)]
    pub lower_bound: Option<GraphBound>,
}

/// A lower bound on a build's wall time, and what sets it (see cargo_timings.rs).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct GraphBound {
    /// The larger of the two below.
    pub secs: f64,
    /// The longest chain of units that had to wait for each other.
    pub critical_path_secs: f64,
    /// Every unit's time spread over the cores.
    pub work_secs: f64,
    /// The units of that chain, first to last (`package` for a library,
    /// `package/build-script`, `package/app (bin)`, …).
    pub critical_path: Vec<String>,
}

/// What sets a build's lower bound: its longest chain of crates, or its work over the cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundLimit {
    Graph,
    Cores,
}

impl std::fmt::Display for BoundLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BoundLimit::Graph => "graph",
            BoundLimit::Cores => "cores",
        })
    }
}

impl GraphBound {
    /// What sets the bound: the graph (the longest chain) or the cores (the work).
    pub fn limit(&self) -> BoundLimit {
        if self.critical_path_secs >= self.work_secs {
            BoundLimit::Graph
        } else {
            BoundLimit::Cores
        }
    }

    /// "at best 10.9s (its longest chain of crates: heavy/build-script → heavy → app/app (bin))".
    pub fn describe(&self) -> String {
        let why = match self.limit() {
            BoundLimit::Graph => {
                let mut chain = self.critical_path.clone();
                if chain.len() > 6 {
                    chain.splice(2..chain.len() - 3, ["…".to_owned()]);
                }
                format!("its longest chain of crates: {}", chain.join(" → "))
            }
            BoundLimit::Cores => "its work spread over the cores".to_owned(),
        };
        format!("at best {:.1}s ({why})", self.secs)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CrateFigures {
    /// `package/crate` (every build script is `build_script_build`).
    pub krate: String,
    pub kind: CrateKind,
    /// Absent: not measured (behind sccache, a cache hit: no rustc ran).
    pub peak_bytes: Option<u64>,
    pub estimate_bytes: u64,
    pub wall_secs: f64,
    pub wait_secs: f64,
    #[serde(default)]
    pub memory_wait_secs: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rustc log, report.json and the estimates' keys write a kind by its name: serde's
    /// name and `name()` are one, and each is read back as itself (an older log's "proc-macro"
    /// is the same kind).
    #[test]
    fn a_crate_kind_reads_back_from_the_name_it_is_written_as() {
        for kind in CrateKind::ALL {
            let written = serde_json::to_string(&kind).unwrap();
            assert_eq!(written, format!("\"{}\"", kind.name()));
            assert_eq!(serde_json::from_str::<CrateKind>(&written).unwrap(), kind);
            assert_eq!(CrateKind::from_name(kind.name()), Some(kind));
        }
        assert_eq!(CrateKind::from_name("executable"), None);
        assert!(serde_json::from_str::<CrateKind>("\"executable\"").is_err());
        // ALL is written by hand: it must name every variant serde knows, as the schema
        // lists them (`enum` values and `const`s).
        fn values(schema: &serde_json::Value, out: &mut Vec<String>) {
            match schema {
                serde_json::Value::Object(map) => {
                    for (key, value) in map {
                        match (key.as_str(), value) {
                            ("const", serde_json::Value::String(name)) => out.push(name.clone()),
                            ("enum", serde_json::Value::Array(names)) => out
                                .extend(names.iter().filter_map(|n| n.as_str().map(str::to_owned))),
                            _ => values(value, out),
                        }
                    }
                }
                serde_json::Value::Array(items) => items.iter().for_each(|i| values(i, out)),
                _ => {}
            }
        }
        let mut serde_names = Vec::new();
        values(
            &serde_json::to_value(schemars::schema_for!(CrateKind)).unwrap(),
            &mut serde_names,
        );
        serde_names.sort();
        let mut all: Vec<String> = CrateKind::ALL.iter().map(|k| k.name().to_owned()).collect();
        all.sort();
        assert_eq!(all, serde_names);
    }
}
