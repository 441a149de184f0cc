//! The cargo workspace being optimized: its root, target directory and binary targets, read
//! from `cargo metadata`, and the selection of binaries a run builds.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use cargo_metadata::{Metadata, TargetKind};

use crate::exec::bin_env_var;
use crate::util::command::Cmd;
use crate::util::printer::Printer;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinTarget {
    pub name: String,
    pub package: String,
}

/// A package of the build's dependency graph and what it depends on (`cargo metadata`'s
/// resolve): (name, version) of its normal and of its build dependencies.
#[derive(Debug, Clone, Default)]
pub struct PackageDeps {
    pub name: String,
    pub version: String,
    pub normal: Vec<(String, String)>,
    pub build: Vec<(String, String)>,
}

#[derive(Debug, Clone)]
pub struct Workspace {
    pub root: PathBuf,
    pub target_dir: PathBuf,
    /// Cargo.toml of the workspace and of every member.
    pub manifests: Vec<PathBuf>,
    /// Every binary target of every workspace member.
    pub binaries: Vec<BinTarget>,
    /// Path dependencies of members that live outside the workspace root, by name. Cargo
    /// hashes such a package's absolute path into its `-C metadata` (paths inside the root
    /// are hashed relative to it), so its symbol names, and those of every crate depending on
    /// it, change when the checkout moves: a profile recorded at another path misses them.
    pub outside_path_dependencies: std::collections::BTreeMap<String, PathBuf>,
    /// Member package → the members it depends on.
    pub member_dependencies: std::collections::BTreeMap<String, Vec<String>>,
    /// Member package → every package it depends on directly (normal dependencies): what
    /// `init` guesses servers from.
    pub direct_dependencies: std::collections::BTreeMap<String, Vec<String>>,
    /// Every target of every member by kind ("bin", "bench", "test", "example", …) and name:
    /// what a cargo workload's `--bench NAME` may name.
    pub targets: Vec<(String, String)>,
    /// Every bench target of every member, with its package (what `init` trains on).
    pub benches: Vec<BinTarget>,
    /// Every bench and test target of every member, with its source: what `init` and
    /// `doctor` check runs here before proposing or running it.
    pub target_sources: Vec<crate::cargo::target_source::TargetSource>,
    /// `cargo metadata` with dependencies, by target, once per command: a stage build asks
    /// before (duplicated packages) and after (the graph's bound), `profile check` and
    /// `export` for sources, and each call costs about a tenth of a second.
    pub full_metadata: FullMetadata,
}

/// The cache behind [`Workspace::full_metadata`]; shared by clones of one workspace. Each
/// entry keeps the modification times of Cargo.lock and the manifests it was read with: a
/// branch switched during a long `run` is read again. A read started ahead
/// ([`Workspace::prefetch_full_metadata`]) waits in `pending` until it is first needed.
#[derive(Debug, Clone, Default)]
pub struct FullMetadata {
    read: std::sync::Arc<std::sync::Mutex<MetadataByTarget>>,
    pending: std::sync::Arc<std::sync::Mutex<BTreeMap<String, PendingRead>>>,
}

/// Target → (the modification times it was read with, the metadata).
type MetadataByTarget = BTreeMap<String, (Stamp, Metadata)>;

/// The modification times of Cargo.lock and of every manifest.
type Stamp = Vec<Option<std::time::SystemTime>>;

type PendingRead = std::thread::JoinHandle<Result<(Stamp, Metadata)>>;

fn stamp_of(root: &Path, manifests: &[PathBuf]) -> Stamp {
    std::iter::once(root.join("Cargo.lock"))
        .chain(manifests.iter().cloned())
        .map(|file| std::fs::metadata(file).and_then(|m| m.modified()).ok())
        .collect()
}

/// `cargo metadata` with dependencies for `target`, and the stamp taken before it ran (a file
/// changed while it ran makes the next use read again).
fn read_full_metadata(
    root: &Path,
    manifests: &[PathBuf],
    target: &str,
    printer: &Printer,
) -> Result<(Stamp, Metadata)> {
    let stamp = stamp_of(root, manifests);
    let json = Cmd::new(cargo_program())
        .args([
            "metadata",
            "--format-version",
            "1",
            "--filter-platform",
            target,
        ])
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .cwd(root)
        .stdout_checked(printer)
        .context("could not read the dependency graph with `cargo metadata`")?;
    let metadata = cargo_metadata::MetadataCommand::parse(json)
        .context("could not parse `cargo metadata` output")?;
    Ok((stamp, metadata))
}

/// Which binaries to build: `-p`, `--bin` and `[build] bins` in one place.
#[derive(Debug, Default)]
pub struct Selection<'a> {
    pub packages: &'a [String],
    /// `--bin` flags; when empty, `[build] bins` from the config applies.
    pub cli_bins: &'a [String],
    pub config_bins: Option<&'a [String]>,
}

/// The cargo program cargo itself would re-run (`$CARGO` when run by cargo).
pub fn cargo_program() -> OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

impl Workspace {
    pub fn load(manifest_path: Option<&Path>, printer: &Printer) -> Result<Workspace> {
        let mut cmd =
            Cmd::new(cargo_program()).args(["metadata", "--no-deps", "--format-version", "1"]);
        if let Some(path) = manifest_path {
            let path = std::path::absolute(path)
                .with_context(|| format!("could not resolve {}", path.display()))?;
            // Cargo reads its config files (`[build] target-dir`, …) from its working
            // directory up: the workspace's, wherever pgo-build was started.
            if let Some(dir) = path.parent() {
                cmd = cmd.cwd(dir);
            }
            cmd = cmd.arg("--manifest-path").arg(path);
        }
        let json = cmd
            .stdout_checked(printer)
            .context("could not read the workspace with `cargo metadata`")?;
        let metadata = cargo_metadata::MetadataCommand::parse(json)
            .context("could not parse `cargo metadata` output")?;
        Ok(Workspace::from_metadata(&metadata))
    }

    /// Starts reading the dependency graph for `target` in the background, for a command that
    /// will need it after other work (a tenth of a second of cargo's, off the critical path).
    /// Nothing is lost when the read fails: the first use reads again and says why.
    pub fn prefetch_full_metadata(&self, target: &str, printer: &Printer) {
        let Ok(mut pending) = self.full_metadata.pending.lock() else {
            return;
        };
        if pending.contains_key(target) {
            return;
        }
        let (root, manifests, target_owned, printer) = (
            self.root.clone(),
            self.manifests.clone(),
            target.to_owned(),
            printer.clone(),
        );
        let read = std::thread::spawn(move || {
            read_full_metadata(&root, &manifests, &target_owned, &printer)
        });
        pending.insert(target.to_owned(), read);
    }

    /// The dependency graph for `target` (`cargo metadata` with dependencies).
    fn full_metadata(&self, target: &str, printer: &Printer) -> Result<Metadata> {
        let prefetched = self
            .full_metadata
            .pending
            .lock()
            .ok()
            .and_then(|mut pending| pending.remove(target))
            .and_then(|read| read.join().ok())
            .and_then(Result::ok);
        if let Some(read) = prefetched
            && let Ok(mut cache) = self.full_metadata.read.lock()
        {
            cache.insert(target.to_owned(), read);
        }
        let stamp = stamp_of(&self.root, &self.manifests);
        if let Ok(cache) = self.full_metadata.read.lock()
            && let Some((read_with, metadata)) = cache.get(target)
            && *read_with == stamp
        {
            return Ok(metadata.clone());
        }
        let (stamp, metadata) = read_full_metadata(&self.root, &self.manifests, target, printer)?;
        if let Ok(mut cache) = self.full_metadata.read.lock() {
            cache.insert(target.to_owned(), (stamp, metadata.clone()));
        }
        Ok(metadata)
    }

    /// Every package of the dependency graph (for `target`) with its normal and build
    /// dependencies, by name and version (what cargo's timing report names units by).
    pub fn package_graph(&self, target: &str, printer: &Printer) -> Result<Vec<PackageDeps>> {
        Ok(graph_of(&self.full_metadata(target, printer)?))
    }

    /// [`Workspace::package_sources`] and [`Workspace::package_graph`] from one `cargo
    /// metadata`.
    pub fn package_sources_and_graph(
        &self,
        target: &str,
        printer: &Printer,
    ) -> Result<(
        crate::cargo::source_fingerprints::SourceRecord,
        Vec<PackageDeps>,
    )> {
        let metadata = self.full_metadata(target, printer)?;
        Ok((sources_of(&metadata), graph_of(&metadata)))
    }

    /// The sources of every package of the dependency graph (for `target`), fingerprinted.
    pub fn package_sources(
        &self,
        target: &str,
        printer: &Printer,
    ) -> Result<crate::cargo::source_fingerprints::SourceRecord> {
        Ok(sources_of(&self.full_metadata(target, printer)?))
    }

    /// Packages of the dependency graph (for `target`) whose build scripts compile C or C++
    /// through a build-dependency on one of `builders` (`cc`, `cmake`, …): package → builder.
    pub fn build_script_compilers(
        &self,
        target: &str,
        builders: &[&str],
        printer: &Printer,
    ) -> Result<BTreeMap<String, String>> {
        let metadata = self.full_metadata(target, printer)?;
        let in_graph = packages_in_graph(&metadata);
        Ok(metadata
            .packages
            .iter()
            .filter(|p| in_graph.contains(&p.id))
            .filter_map(|package| {
                let builder = package.dependencies.iter().find(|d| {
                    d.kind == cargo_metadata::DependencyKind::Build
                        && builders.contains(&d.name.as_str())
                })?;
                Some((package.name.to_string(), builder.name.clone()))
            })
            .collect())
    }

    fn from_metadata(metadata: &Metadata) -> Workspace {
        let of_kind = |kind: TargetKind| -> Vec<BinTarget> {
            metadata
                .workspace_packages()
                .iter()
                .flat_map(|package| {
                    package
                        .targets
                        .iter()
                        .filter(|target| target.kind.contains(&kind))
                        .map(|target| BinTarget {
                            name: target.name.clone(),
                            package: package.name.to_string(),
                        })
                })
                .collect()
        };
        let binaries = of_kind(TargetKind::Bin);
        let benches = of_kind(TargetKind::Bench);
        let target_sources = metadata
            .workspace_packages()
            .iter()
            .flat_map(|package| {
                let package_root = package
                    .manifest_path
                    .parent()
                    .map(|dir| dir.as_std_path().to_owned())
                    .unwrap_or_default();
                package.targets.iter().filter_map(move |target| {
                    let kind = [TargetKind::Bench, TargetKind::Test]
                        .into_iter()
                        .find(|kind| target.kind.contains(kind))?;
                    Some(crate::cargo::target_source::TargetSource {
                        kind: kind.to_string(),
                        name: target.name.clone(),
                        package: package.name.to_string(),
                        src_path: target.src_path.clone().into_std_path_buf(),
                        package_root: package_root.clone(),
                        required_features: target.required_features.clone(),
                    })
                })
            })
            .collect();
        let targets = metadata
            .workspace_packages()
            .iter()
            .flat_map(|package| &package.targets)
            .flat_map(|target| {
                target
                    .kind
                    .iter()
                    .map(|kind| (kind.to_string(), target.name.clone()))
            })
            .collect();
        let root = metadata.workspace_root.clone().into_std_path_buf();
        let mut manifests: Vec<PathBuf> = metadata
            .workspace_packages()
            .iter()
            .map(|package| package.manifest_path.clone().into_std_path_buf())
            .collect();
        manifests.push(root.join("Cargo.toml"));
        manifests.sort();
        manifests.dedup();
        let outside_path_dependencies = metadata
            .workspace_packages()
            .iter()
            .flat_map(|package| &package.dependencies)
            .filter_map(|dependency| {
                let path = dependency.path.as_ref()?.as_std_path();
                (!path.starts_with(&root)).then(|| (dependency.name.clone(), path.to_owned()))
            })
            .collect();
        let members: Vec<String> = metadata
            .workspace_packages()
            .iter()
            .map(|p| p.name.to_string())
            .collect();
        // Member package → the names of its dependencies that `keep` accepts.
        let dependencies_of = |keep: &dyn Fn(&cargo_metadata::Dependency) -> bool| {
            metadata
                .workspace_packages()
                .iter()
                .map(|package| {
                    let deps = package
                        .dependencies
                        .iter()
                        .filter(|d| keep(d))
                        .map(|d| d.name.clone())
                        .collect();
                    (package.name.to_string(), deps)
                })
                .collect()
        };
        let member_dependencies = dependencies_of(&|d| members.contains(&d.name));
        let direct_dependencies =
            dependencies_of(&|d| d.kind == cargo_metadata::DependencyKind::Normal);
        Workspace {
            root,
            target_dir: metadata.target_directory.clone().into_std_path_buf(),
            manifests,
            binaries,
            outside_path_dependencies,
            member_dependencies,
            direct_dependencies,
            targets,
            benches,
            target_sources,
            full_metadata: FullMetadata::default(),
        }
    }

    /// The crate names of the workspace's own code in `bin`: the binary's crate, its
    /// package's library and every member it depends on, directly or not.
    pub fn own_crates(&self, bin: &BinTarget) -> std::collections::BTreeSet<String> {
        let crate_name = |name: &str| name.replace('-', "_");
        let mut crates = std::collections::BTreeSet::from([crate_name(&bin.name)]);
        let mut pending = vec![bin.package.clone()];
        let mut seen = std::collections::BTreeSet::new();
        while let Some(package) = pending.pop() {
            if !seen.insert(package.clone()) {
                continue;
            }
            crates.insert(crate_name(&package));
            pending.extend(
                self.member_dependencies
                    .get(&package)
                    .into_iter()
                    .flatten()
                    .cloned(),
            );
        }
        crates
    }

    pub fn select(&self, selection: &Selection) -> Result<Vec<BinTarget>> {
        for package in selection.packages {
            if !self.binaries.iter().any(|bin| &bin.package == package) {
                bail!(
                    "package `{package}` (-p) is not a workspace member with binary targets; \
                     packages with binaries: {}",
                    self.list(|bin| bin.package.clone())
                );
            }
        }
        let mut selected: Vec<BinTarget> = self
            .binaries
            .iter()
            .filter(|bin| {
                selection.packages.is_empty() || selection.packages.contains(&bin.package)
            })
            .cloned()
            .collect();
        let (names, origin) = if !selection.cli_bins.is_empty() {
            (Some(selection.cli_bins), "--bin")
        } else {
            (selection.config_bins, "[build] bins")
        };
        if let Some(names) = names {
            for name in names {
                if !selected.iter().any(|bin| &bin.name == name) {
                    bail!(
                        "binary `{name}` ({origin}) is not a binary target of the selected \
                         packages; available: {}",
                        self.list(|bin| bin.name.clone())
                    );
                }
            }
            selected.retain(|bin| names.contains(&bin.name));
        }
        if selected.is_empty() {
            bail!(
                "the workspace at {} has no binary targets to build",
                self.root.display()
            );
        }
        for (i, bin) in selected.iter().enumerate() {
            if let Some(other) = selected[..i].iter().find(|other| other.name == bin.name) {
                bail!(
                    "binary `{}` is defined by both `{}` and `{}`; staged binaries share one \
                     bin/ directory, so select one with -p",
                    bin.name,
                    other.package,
                    bin.package
                );
            }
            // Workloads find binaries by variable: two names mapping to one would shadow one.
            let variable = bin_env_var(&bin.name);
            if variable == crate::exec::BIN_DIR_ENV {
                bail!(
                    "binary `{}` (package `{}`) would be ${variable} for workloads, which is \
                     pgo-build's own variable for the directory of the stage's binaries; \
                     leave it out (-p, --bin or [build] bins) or rename it",
                    bin.name,
                    bin.package
                );
            }
            if let Some(other) = selected[..i]
                .iter()
                .find(|other| bin_env_var(&other.name) == variable)
            {
                bail!(
                    "binaries `{}` (package `{}`) and `{}` (package `{}`) would both be \
                     ${variable} for workloads; select one of them (-p, --bin or [build] bins) \
                     or rename one",
                    other.name,
                    other.package,
                    bin.name,
                    bin.package
                );
            }
        }
        Ok(selected)
    }

    fn list(&self, key: impl Fn(&BinTarget) -> String) -> String {
        let mut names: Vec<String> = self.binaries.iter().map(key).collect();
        names.sort();
        names.dedup();
        names.join(", ")
    }
}

/// The packages of the resolved dependency graph (for the target `full_metadata` was asked
/// for): what a build compiles, as opposed to every package the lock file names.
fn packages_in_graph(metadata: &Metadata) -> std::collections::BTreeSet<cargo_metadata::PackageId> {
    metadata
        .resolve
        .iter()
        .flat_map(|r| r.nodes.iter().map(|n| n.id.clone()))
        .collect()
}

/// The packages of `metadata`'s resolved graph with their normal and build dependencies.
fn graph_of(metadata: &Metadata) -> Vec<PackageDeps> {
    use cargo_metadata::DependencyKind;
    let named: BTreeMap<_, _> = metadata
        .packages
        .iter()
        .map(|p| (&p.id, (p.name.to_string(), p.version.to_string())))
        .collect();
    let nodes = metadata.resolve.iter().flat_map(|r| r.nodes.iter());
    nodes
        .filter_map(|node| {
            let (name, version) = named.get(&node.id)?.clone();
            let mut package = PackageDeps {
                name,
                version,
                ..PackageDeps::default()
            };
            for dep in &node.deps {
                let Some(named) = named.get(&dep.pkg) else {
                    continue;
                };
                let kinds = dep.dep_kinds.iter().map(|k| k.kind);
                for kind in kinds {
                    match kind {
                        DependencyKind::Normal => package.normal.push(named.clone()),
                        DependencyKind::Build => package.build.push(named.clone()),
                        _ => {}
                    }
                }
            }
            Some(package)
        })
        .collect()
}

/// The sources of every package of `metadata`'s resolved graph, fingerprinted.
fn sources_of(metadata: &Metadata) -> crate::cargo::source_fingerprints::SourceRecord {
    let in_graph = packages_in_graph(metadata);
    let packages: Vec<_> = metadata
        .packages
        .iter()
        .filter(|p| in_graph.contains(&p.id))
        .collect();
    let mut versions: BTreeMap<&str, std::collections::BTreeSet<String>> = BTreeMap::new();
    for package in &packages {
        versions
            .entry(package.name.as_str())
            .or_default()
            .insert(package.version.to_string());
    }
    let duplicated: Vec<String> = versions
        .into_iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|(name, _)| name.to_owned())
        .collect();
    let compiled = |target: &&cargo_metadata::Target| {
        !target.kind.iter().any(|k| {
            matches!(
                k,
                TargetKind::Test
                    | TargetKind::Bench
                    | TargetKind::Example
                    | TargetKind::CustomBuild
            )
        })
    };
    let described: Vec<(String, String, &Path, Vec<String>)> = packages
        .iter()
        .filter_map(|package| {
            let dir = package.manifest_path.parent()?.as_std_path();
            let crates = package
                .targets
                .iter()
                .filter(compiled)
                .map(|t| t.name.replace('-', "_"))
                .collect();
            Some((
                package.name.to_string(),
                package.version.to_string(),
                dir,
                crates,
            ))
        })
        .collect();
    crate::cargo::source_fingerprints::SourceRecord::of(&described, &duplicated)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> Workspace {
        let bin = |name: &str, package: &str| BinTarget {
            name: name.into(),
            package: package.into(),
        };
        Workspace {
            root: "/ws".into(),
            target_dir: "/ws/target".into(),
            manifests: vec![],
            binaries: vec![
                bin("server", "srv"),
                bin("worker", "srv"),
                bin("cli", "tools"),
            ],
            targets: Vec::new(),
            benches: Vec::new(),
            target_sources: Vec::new(),
            outside_path_dependencies: Default::default(),
            member_dependencies: Default::default(),
            direct_dependencies: Default::default(),
            full_metadata: Default::default(),
        }
    }

    fn names(bins: Vec<BinTarget>) -> Vec<String> {
        bins.into_iter().map(|b| b.name).collect()
    }

    #[test]
    fn default_selects_every_binary() {
        let all = workspace().select(&Selection::default()).unwrap();
        assert_eq!(names(all), ["server", "worker", "cli"]);
    }

    #[test]
    fn packages_and_bins_filter_and_cli_overrides_config() {
        let ws = workspace();
        let packages = ["srv".to_owned()];
        let picked = ws
            .select(&Selection {
                packages: &packages,
                ..Selection::default()
            })
            .unwrap();
        assert_eq!(names(picked), ["server", "worker"]);
        let config = ["cli".to_owned()];
        let cli = ["worker".to_owned()];
        let picked = ws
            .select(&Selection {
                packages: &[],
                cli_bins: &cli,
                config_bins: Some(&config),
            })
            .unwrap();
        assert_eq!(names(picked), ["worker"]);
    }

    #[test]
    fn binaries_that_share_a_variable_name_are_an_error_naming_both() {
        let mut ws = workspace();
        for (name, package) in [("my-app", "a"), ("my_app", "b")] {
            ws.binaries.push(BinTarget {
                name: name.into(),
                package: package.into(),
            });
        }
        let err = ws.select(&Selection::default()).unwrap_err().to_string();
        assert!(err.contains("`my-app` (package `a`)"), "{err}");
        assert!(err.contains("`my_app` (package `b`)"), "{err}");
        assert!(err.contains("$PGO_BUILD_BIN_MY_APP"), "{err}");
        let bins = ["my-app".to_owned(), "cli".to_owned()];
        assert!(
            ws.select(&Selection {
                config_bins: Some(&bins),
                ..Selection::default()
            })
            .is_ok()
        );
    }

    #[test]
    fn a_binary_that_would_shadow_pgo_builds_own_variable_is_refused_before_any_build() {
        let mut ws = workspace();
        ws.binaries.push(BinTarget {
            name: "dir".into(),
            package: "tools".into(),
        });
        let err = ws.select(&Selection::default()).unwrap_err().to_string();
        assert!(err.contains("binary `dir` (package `tools`)"), "{err}");
        assert!(err.contains("$PGO_BUILD_BIN_DIR"), "{err}");
    }

    #[test]
    fn unknown_names_are_errors_listing_what_exists() {
        let ws = workspace();
        let bins = ["nope".to_owned()];
        let err = ws
            .select(&Selection {
                config_bins: Some(&bins),
                ..Selection::default()
            })
            .unwrap_err();
        assert!(err.to_string().contains("[build] bins"), "{err}");
        assert!(err.to_string().contains("cli, server, worker"), "{err}");
        let packages = ["nope".to_owned()];
        assert!(
            ws.select(&Selection {
                packages: &packages,
                ..Selection::default()
            })
            .is_err()
        );
    }
}
