//! The bound the dependency graph puts on a build's wall time, from cargo's `--timings`
//! report: every stage's build writes one (`<stage>/cargo-target/cargo-timings/
//! cargo-timing.html`), whose `UNIT_DATA` lists each unit it compiled or ran, when its metadata
//! was ready, and the units its end (or its metadata) unblocked last. With the package graph
//! (`cargo metadata`), those give the units' dependencies, so the longest path through them —
//! with each rustc's own wall time, as the wrapper measured it, not counting its wait for
//! admission — is a time no schedule could beat; so is the work spread over the cores.
//! The larger of the two is the lower bound beside the build's wall time: when the wall is near
//! it, the graph (or the cores) limit the build, not the memory budget.
//!
//! Where the package graph is not at hand, cargo's edges alone (a subset) still give a lower
//! bound, a weaker one; durations are those of this build, measured under its budget and its
//! contention. Unreadable or missing data leaves no bound, never an error: the
//! report is cargo's own, not a stable interface.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::cargo::workspace::PackageDeps;
use crate::report::CrateKind;
pub use crate::report::GraphBound;

/// One unit of cargo's timing report.
#[derive(Debug, Clone, Deserialize)]
pub struct TimedUnit {
    pub i: usize,
    /// The package.
    pub name: String,
    pub version: String,
    pub target: UnitTarget,
    pub duration: f64,
    #[serde(default)]
    pub unblocked_units: Vec<usize>,
    #[serde(default)]
    pub unblocked_rmeta_units: Vec<usize>,
    /// When its metadata was ready, from its start (cargo before sections).
    #[serde(default)]
    pub rmeta_time: Option<f64>,
    /// `[["frontend", {start, end}], ["codegen", …]]`: the frontend ends with the metadata.
    #[serde(default)]
    pub sections: Option<Vec<(String, Section)>>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Section {
    pub end: f64,
}

/// What a unit builds, read once from the report's `target` text: `""` (the library),
/// `" build-script"`, `" build-script (run)"`, `` " app \"bin\"" ``.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "String")]
pub enum UnitTarget {
    /// The package's library, of any crate type.
    Lib,
    /// Compiling the package's build script.
    BuildScript,
    /// Running it: no rustc.
    BuildScriptRun,
    /// A binary, by its target name.
    Bin(String),
    /// Anything else (a test, an example; a later cargo's text), as written.
    Other(String),
}

impl From<String> for UnitTarget {
    fn from(text: String) -> UnitTarget {
        match text.trim() {
            "" => UnitTarget::Lib,
            "build-script" => UnitTarget::BuildScript,
            "build-script (run)" => UnitTarget::BuildScriptRun,
            other => match other.strip_suffix(" \"bin\"") {
                Some(name) => UnitTarget::Bin(name.to_owned()),
                None => UnitTarget::Other(other.to_owned()),
            },
        }
    }
}

impl TimedUnit {
    /// What the unit is, as the rustc wrapper names it: (kind, the crate name of a binary),
    /// where `Lib` stands for a library of any type (cargo's timing report does not say
    /// which); `None` for a build script's run, which is no rustc.
    pub fn rustc_kind(&self) -> Option<(CrateKind, Option<String>)> {
        match &self.target {
            UnitTarget::Lib => Some((CrateKind::Lib, None)),
            UnitTarget::BuildScript => Some((CrateKind::BuildScript, None)),
            UnitTarget::Bin(name) => Some((CrateKind::Bin, Some(name.replace('-', "_")))),
            UnitTarget::BuildScriptRun | UnitTarget::Other(_) => None,
        }
    }

    /// How long after its start its metadata was ready (unblocking dependents that only need
    /// it); `None` when the report does not say.
    fn metadata_after(&self) -> Option<f64> {
        self.rmeta_time.or_else(|| {
            self.sections
                .as_ref()?
                .iter()
                .find(|(name, _)| name == "frontend")
                .map(|(_, s)| s.end)
        })
    }
}

/// The units of a `cargo-timing.html`; `None` when it has none to read.
pub fn read(path: &Path) -> Option<Vec<TimedUnit>> {
    let html = std::fs::read_to_string(path).ok()?;
    let data = &html[html.find("const UNIT_DATA = ")? + "const UNIT_DATA = ".len()..];
    serde_json::Deserializer::from_str(data)
        .into_iter::<Vec<TimedUnit>>()
        .next()?
        .ok()
}

impl GraphBound {
    /// Adds the bound of a build that ran after this one (`batch_size`: one cargo per batch).
    pub fn then(self, next: GraphBound) -> GraphBound {
        let mut critical_path = self.critical_path;
        critical_path.extend(next.critical_path);
        GraphBound {
            secs: self.secs + next.secs,
            critical_path_secs: self.critical_path_secs + next.critical_path_secs,
            work_secs: self.work_secs + next.work_secs,
            critical_path,
        }
    }
}

/// The bound of a stage's build: of each cargo invocation's report, added up (see
/// [`lower_bound`] for `own`). `None` when a report is missing (no bound rather than a wrong
/// one).
pub fn build_bound(
    timings: &[Option<Vec<TimedUnit>>],
    own: &dyn Fn(&TimedUnit) -> Option<(f64, f64)>,
    packages: &[PackageDeps],
    cpus: usize,
) -> Option<GraphBound> {
    timings
        .iter()
        .map(|units| Some(lower_bound(units.as_ref()?, own, packages, cpus)))
        .reduce(|a, b| Some(a?.then(b?)))
        .flatten()
}

/// The units of the `--timings` report cargo just wrote in `cargo_target`. Cargo keeps a dated
/// copy of every report beside `cargo-timing.html` (the last one): those go, or every build
/// would add one.
pub fn take(cargo_target: &Path) -> Option<Vec<TimedUnit>> {
    let dir = cargo_target.join("cargo-timings");
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with("cargo-timing-")
        {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    read(&dir.join("cargo-timing.html"))
}

/// What a unit waits for from one it depends on: its metadata (a library of a library, with
/// cargo's pipelining) or its end (whatever links, or runs, or is a build script's run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Needs {
    Metadata,
    End,
}

/// The bound of one cargo build. `own(unit)` is (rustc wall time, wait for admission) as the
/// wrapper logged it for that unit: a unit's time is its rustc's own, and its metadata came
/// that much earlier than cargo saw it; other units (build script runs) take cargo's duration.
/// The edges are cargo's own (the dependency that unblocked each unit last) and, from
/// `packages`, every dependency of the units' packages: a library waits for the metadata of
/// its dependencies' libraries, a binary for their end and its own library's, a library and
/// its binaries for their build script's run, a build script for its build dependencies.
pub fn lower_bound(
    units: &[TimedUnit],
    own: impl Fn(&TimedUnit) -> Option<(f64, f64)>,
    packages: &[PackageDeps],
    cpus: usize,
) -> GraphBound {
    let times: BTreeMap<usize, (f64, f64)> = units
        .iter()
        .map(|unit| {
            let (duration, waited) = own(unit).unwrap_or((unit.duration, 0.0));
            // Without the metadata's time, dependents could have started with it: 0.
            let metadata = unit
                .metadata_after()
                .map_or(0.0, |after| (after - waited).min(duration).max(0.0));
            (unit.i, (duration, metadata))
        })
        .collect();
    let needs = edges(units, packages);
    // Earliest start of each unit: after what it needs, each as early as it could be.
    let mut earliest: BTreeMap<usize, (f64, Option<usize>)> = BTreeMap::new();
    fn visit(
        i: usize,
        needs: &BTreeMap<usize, Vec<(usize, Needs)>>,
        times: &BTreeMap<usize, (f64, f64)>,
        earliest: &mut BTreeMap<usize, (f64, Option<usize>)>,
        visiting: &mut Vec<usize>,
    ) -> f64 {
        if let Some((start, _)) = earliest.get(&i) {
            return *start;
        }
        // A circle (an edge the build did not have) adds nothing rather than loop.
        if visiting.contains(&i) {
            return 0.0;
        }
        visiting.push(i);
        let mut start = (0.0, None);
        for (before, need) in needs.get(&i).into_iter().flatten() {
            let Some((duration, metadata)) = times.get(before) else {
                continue;
            };
            let at = visit(*before, needs, times, earliest, visiting)
                + match need {
                    Needs::Metadata => metadata,
                    Needs::End => duration,
                };
            if at > start.0 {
                start = (at, Some(*before));
            }
        }
        visiting.pop();
        earliest.insert(i, start);
        start.0
    }
    let mut visiting = Vec::new();
    for unit in units {
        visit(unit.i, &needs, &times, &mut earliest, &mut visiting);
    }
    let end = |i: usize| earliest.get(&i).map_or(0.0, |e| e.0) + times[&i].0;
    let last = units
        .iter()
        .map(|u| u.i)
        .max_by(|a, b| end(*a).total_cmp(&end(*b)));
    let by_index: BTreeMap<usize, &TimedUnit> = units.iter().map(|u| (u.i, u)).collect();
    let mut critical_path = Vec::new();
    let mut at = last;
    while let Some(i) = at {
        if let Some(unit) = by_index.get(&i) {
            critical_path.push(label(unit));
        }
        at = earliest.get(&i).and_then(|e| e.1);
    }
    critical_path.reverse();
    let critical_path_secs = last.map_or(0.0, end);
    let work_secs = times.values().map(|(d, _)| d).sum::<f64>() / cpus.max(1) as f64;
    GraphBound {
        secs: critical_path_secs.max(work_secs),
        critical_path_secs,
        work_secs,
        critical_path,
    }
}

/// Unit → the units it needs, and what of them.
fn edges(units: &[TimedUnit], packages: &[PackageDeps]) -> BTreeMap<usize, Vec<(usize, Needs)>> {
    let mut needs: BTreeMap<usize, Vec<(usize, Needs)>> = BTreeMap::new();
    for unit in units {
        for (after, need) in unit.unblocked_units.iter().map(|j| (j, Needs::End)).chain(
            unit.unblocked_rmeta_units
                .iter()
                .map(|j| (j, Needs::Metadata)),
        ) {
            needs.entry(*after).or_default().push((unit.i, need));
        }
    }
    let of = |name: &str, version: &str, target: fn(&UnitTarget) -> bool| -> Vec<usize> {
        units
            .iter()
            .filter(|u| u.name == name && u.version == version && target(&u.target))
            .map(|u| u.i)
            .collect()
    };
    let lib = |t: &UnitTarget| *t == UnitTarget::Lib;
    for package in packages {
        let (name, version) = (package.name.as_str(), package.version.as_str());
        let libs = of(name, version, lib);
        let bins = of(name, version, |t| matches!(t, UnitTarget::Bin(_)));
        let scripts = of(name, version, |t| *t == UnitTarget::BuildScript);
        let runs = of(name, version, |t| *t == UnitTarget::BuildScriptRun);
        let mut add = |to: &[usize], from: &[usize], need: Needs| {
            for to in to {
                for from in from {
                    needs.entry(*to).or_default().push((*from, need));
                }
            }
        };
        add(&libs, &runs, Needs::End);
        add(&bins, &runs, Needs::End);
        add(&bins, &libs, Needs::End);
        for (dep, dep_version) in &package.normal {
            let dep_libs = of(dep, dep_version, lib);
            add(&libs, &dep_libs, Needs::Metadata);
            add(&bins, &dep_libs, Needs::End);
        }
        for (dep, dep_version) in &package.build {
            add(&scripts, &of(dep, dep_version, lib), Needs::End);
        }
    }
    needs
}

/// `package` (its library), `package/build-script`, `package/build-script (run)`,
/// `package/app (bin)`.
fn label(unit: &TimedUnit) -> String {
    match &unit.target {
        UnitTarget::Lib => unit.name.clone(),
        UnitTarget::BuildScript => format!("{}/build-script", unit.name),
        UnitTarget::BuildScriptRun => format!("{}/build-script (run)", unit.name),
        UnitTarget::Bin(name) => format!("{}/{name} (bin)", unit.name),
        UnitTarget::Other(other) => format!("{}/{other}", unit.name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(i: usize, name: &str, target: &str, duration: f64) -> TimedUnit {
        TimedUnit {
            i,
            name: name.into(),
            version: "1.0.0".into(),
            target: UnitTarget::from(target.to_owned()),
            duration,
            unblocked_units: Vec::new(),
            unblocked_rmeta_units: Vec::new(),
            rmeta_time: None,
            sections: None,
        }
    }

    #[test]
    fn the_bound_is_the_longest_chain_or_the_work_over_the_cores() {
        // heavy (10 s, metadata after 4 s) → app bin (2 s) needs its metadata; a build script
        // (1 s) runs (0.5 s) before heavy starts; light (3 s) depends on nothing.
        let mut script = unit(0, "heavy", " build-script", 1.0);
        script.unblocked_units = vec![1];
        let mut run = unit(1, "heavy", " build-script (run)", 0.5);
        run.unblocked_units = vec![2];
        let mut heavy = unit(2, "heavy", "", 16.0);
        heavy.sections = Some(vec![
            ("frontend".into(), Section { end: 10.0 }),
            ("codegen".into(), Section { end: 16.0 }),
        ]);
        heavy.unblocked_rmeta_units = vec![3];
        let app = unit(3, "app", " app \"bin\"", 2.0);
        let light = unit(4, "light", "", 3.0);
        let units = vec![script, run, heavy, app, light];
        // The wrapper measured heavy's rustc at 10 s after a 6 s wait: its metadata came 4 s
        // into its rustc.
        let own = |u: &TimedUnit| match (u.name.as_str(), u.rustc_kind()) {
            ("heavy", Some((CrateKind::Lib, _))) => Some((10.0, 6.0)),
            (_, Some(_)) => Some((u.duration, 0.0)),
            _ => None,
        };
        let bound = lower_bound(&units, own, &[], 2);
        // 1 + 0.5 + 10 (heavy ends after its codegen; app ended at 1.5 + 4 + 2 = 7.5).
        assert!((bound.critical_path_secs - 11.5).abs() < 1e-9, "{bound:?}");
        assert_eq!(
            bound.critical_path,
            ["heavy/build-script", "heavy/build-script (run)", "heavy"]
        );
        assert!((bound.work_secs - (1.0 + 0.5 + 10.0 + 2.0 + 3.0) / 2.0).abs() < 1e-9);
        assert_eq!(bound.secs, bound.critical_path_secs);
        // On one core the work decides.
        assert!((lower_bound(&units, own, &[], 1).secs - 16.5).abs() < 1e-9);
        assert_eq!(
            units[3].rustc_kind(),
            Some((CrateKind::Bin, Some("app".to_owned())))
        );
        assert_eq!(units[1].rustc_kind(), None);
        // A target the report writes otherwise (an example's) is no binary of the build.
        let example = unit(5, "app", " demo \"example\"", 1.0);
        assert_eq!(example.target, UnitTarget::Other("demo \"example\"".into()));
        assert_eq!(example.rustc_kind(), None);
        assert_eq!(label(&example), "app/demo \"example\"");
    }

    #[test]
    fn the_package_graph_adds_the_dependencies_cargo_does_not_name() {
        // app (bin, 5 s) uses b (3 s), which uses a (4 s, metadata after 2 s); c (1 s) ended
        // last, so cargo names only c as unblocking app.
        let mut a = unit(0, "a", "", 4.0);
        a.sections = Some(vec![("frontend".into(), Section { end: 2.0 })]);
        a.unblocked_rmeta_units = vec![1];
        let b = unit(1, "b", "", 3.0);
        let mut c = unit(2, "c", "", 1.0);
        c.unblocked_units = vec![3];
        let app = unit(3, "app", " app \"bin\"", 5.0);
        let units = [a, b, c, app];
        let own = |u: &TimedUnit| Some((u.duration, 0.0));
        assert!((lower_bound(&units, own, &[], 4).critical_path_secs - 6.0).abs() < 1e-9);
        let deps = |name: &str, on: &[&str]| PackageDeps {
            name: name.into(),
            version: "1.0.0".into(),
            normal: on.iter().map(|d| (d.to_string(), "1.0.0".into())).collect(),
            build: Vec::new(),
        };
        let packages = [deps("app", &["b", "c"]), deps("b", &["a"]), deps("a", &[])];
        let bound = lower_bound(&units, own, &packages, 4);
        // a's metadata (2 s), b (3 s), app (5 s).
        assert!((bound.critical_path_secs - 10.0).abs() < 1e-9, "{bound:?}");
        assert_eq!(bound.critical_path, ["a", "b", "app/app (bin)"]);
    }

    #[test]
    fn units_are_read_from_cargos_report_and_anything_else_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cargo-timing.html");
        assert!(read(&path).is_none());
        std::fs::write(
            &path,
            r#"<script>
const UNIT_DATA = [
  {"i": 0, "name": "libc", "version": "0.2.1", "mode": "todo", "target": "", "features": [],
   "start": 0.41, "duration": 0.73, "unblocked_units": [3], "unblocked_rmeta_units": [],
   "sections": [["frontend", {"start": 0.0, "end": 0.68}], ["codegen", {"start": 0.68, "end": 0.73}]]}
];
const CONCURRENCY_DATA = [];
</script>"#,
        )
        .unwrap();
        let units = read(&path).unwrap();
        assert_eq!(units[0].unblocked_units, [3]);
        assert_eq!(units[0].metadata_after(), Some(0.68));
        std::fs::write(&path, "<html>no data</html>").unwrap();
        assert!(read(&path).is_none());
    }
}
