//! Cargo's configuration files, found and parsed once, in cargo's precedence order: the
//! files cargo reads for a build started in the workspace root (from `/` down to the root,
//! then `$CARGO_HOME/config.toml` lowest). pgo-build reads rustflags, the target's linker and
//! profile settings from them, always through this one view.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

#[derive(Debug, Clone)]
pub struct CargoConfig {
    /// Lowest precedence first.
    files: Vec<(PathBuf, toml::Table)>,
}

impl CargoConfig {
    /// The files cargo would read when run in `cwd`.
    pub fn discover(cwd: &Path, cargo_home: Option<&Path>) -> Result<CargoConfig> {
        CargoConfig::from_files(config_files(cwd, cargo_home))
    }

    /// Parses `paths`, lowest precedence first.
    pub fn from_files(paths: Vec<PathBuf>) -> Result<CargoConfig> {
        let files = paths
            .into_iter()
            .map(|path| {
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("could not read cargo config {}", path.display()))?;
                let table = toml::from_str(&text)
                    .with_context(|| format!("could not parse cargo config {}", path.display()))?;
                Ok((path, table))
            })
            .collect::<Result<_>>()?;
        Ok(CargoConfig { files })
    }

    /// Every file with its contents, lowest precedence first.
    pub fn files(&self) -> &[(PathBuf, toml::Table)] {
        &self.files
    }

    /// The value at `keys` in the highest-precedence file that sets it, and that file.
    pub fn lookup(&self, keys: &[&str]) -> Option<(&Path, &toml::Value)> {
        self.files.iter().rev().find_map(|(path, table)| {
            let (first, rest) = keys.split_first()?;
            let mut value = table.get(*first)?;
            for key in rest {
                value = value.get(*key)?;
            }
            Some((path.as_path(), value))
        })
    }
}

/// Cargo's config files for a build started in `cwd`, lowest precedence first.
fn config_files(cwd: &Path, cargo_home: Option<&Path>) -> Vec<PathBuf> {
    let in_dir = |dir: &Path| {
        ["config.toml", "config"]
            .iter()
            .map(|name| dir.join(name))
            .find(|file| file.is_file())
    };
    let mut files: Vec<PathBuf> = cwd
        .ancestors()
        .filter_map(|dir| in_dir(&dir.join(".cargo")))
        .collect();
    files.reverse();
    if let Some(home_file) = cargo_home.and_then(in_dir)
        && !files.contains(&home_file)
    {
        files.insert(0, home_file);
    }
    files
}

/// The `[profile]` table of the workspace manifest, if any.
pub fn manifest_profiles(workspace_root: &Path) -> Result<Option<toml::Value>> {
    let manifest = workspace_root.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .with_context(|| format!("could not read {}", manifest.display()))?;
    let table: toml::Table =
        toml::from_str(&text).with_context(|| format!("could not parse {}", manifest.display()))?;
    Ok(table.get("profile").cloned())
}

/// The cargo profile settings that affect codegen: `[profile]` of the workspace manifest and of
/// cargo config files, and `CARGO_PROFILE_*` variables.
pub fn profile_settings(
    manifest_profiles: Option<&toml::Value>,
    cargo_config: &CargoConfig,
) -> String {
    let mut parts: Vec<String> = manifest_profiles
        .map(|p| format!("Cargo.toml: {p}"))
        .into_iter()
        .collect();
    for (file, table) in cargo_config.files() {
        if let Some(profile) = table.get("profile") {
            parts.push(format!("{}: {profile}", file.display()));
        }
    }
    // `vars_os`: `vars` panics on a variable that is not UTF-8 (anyone's, not only cargo's).
    let mut vars: Vec<String> = std::env::vars_os()
        .filter(|(key, _)| key.as_encoded_bytes().starts_with(b"CARGO_PROFILE_"))
        .map(|(key, value)| format!("{}={}", key.display(), value.display()))
        .collect();
    vars.sort();
    parts.extend(vars);
    parts.join("; ")
}

/// The `strip` setting of cargo profile `profile` and where it comes from:
/// `CARGO_PROFILE_<NAME>_STRIP`, else cargo config files (deepest first), else the workspace
/// manifest. Custom profiles inheriting `strip` are not followed.
pub fn strip_setting(
    manifest_profiles: Option<&toml::Value>,
    cargo_config: &CargoConfig,
    profile: &str,
) -> Option<(String, String)> {
    let var = format!(
        "CARGO_PROFILE_{}_STRIP",
        profile.to_uppercase().replace('-', "_")
    );
    if let Ok(value) = std::env::var(&var) {
        return Some((value, var));
    }
    let (origin, strip) = match cargo_config.lookup(&["profile", profile, "strip"]) {
        Some((file, strip)) => (file.display().to_string(), strip),
        None => (
            "Cargo.toml".to_owned(),
            manifest_profiles?.get(profile)?.get("strip")?,
        ),
    };
    let value = strip
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| strip.to_string());
    Some((value, origin))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_files_are_ordered_home_first_then_outermost() {
        let root = tempfile::tempdir().unwrap();
        let inner = root.path().join("a/b");
        std::fs::create_dir_all(inner.join(".cargo")).unwrap();
        std::fs::create_dir_all(root.path().join("a/.cargo")).unwrap();
        std::fs::create_dir_all(root.path().join("home")).unwrap();
        std::fs::write(inner.join(".cargo/config.toml"), "[build]\njobs = 3\n").unwrap();
        std::fs::write(
            root.path().join("a/.cargo/config"),
            "[build]\njobs = 2\n[term]\nquiet = true\n",
        )
        .unwrap();
        std::fs::write(root.path().join("home/config.toml"), "").unwrap();
        let config = CargoConfig::discover(&inner, Some(&root.path().join("home"))).unwrap();
        let paths: Vec<&PathBuf> = config.files().iter().map(|(p, _)| p).collect();
        assert_eq!(
            paths,
            [
                &root.path().join("home/config.toml"),
                &root.path().join("a/.cargo/config"),
                &inner.join(".cargo/config.toml")
            ]
        );
        // The deepest file wins; keys only set higher up are still found.
        let (file, jobs) = config.lookup(&["build", "jobs"]).unwrap();
        assert_eq!(
            (file, jobs.as_integer()),
            (inner.join(".cargo/config.toml").as_path(), Some(3))
        );
        assert!(config.lookup(&["term", "quiet"]).is_some());
        assert!(config.lookup(&["build", "target"]).is_none());
    }

    #[test]
    fn a_broken_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        std::fs::write(&file, "[build\n").unwrap();
        let err = CargoConfig::from_files(vec![file.clone()]).err().unwrap();
        assert!(
            format!("{err:#}").contains(&file.display().to_string()),
            "{err:#}"
        );
    }
}
