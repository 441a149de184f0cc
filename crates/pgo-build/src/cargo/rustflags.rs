//! The user's own rustflags, found exactly where cargo finds them.
//!
//! pgo-build must add profile flags without losing the user's: cargo takes the first of
//! `CARGO_ENCODED_RUSTFLAGS`, `RUSTFLAGS`, every matching `target.<triple>` / `target.<cfg>`
//! rustflags, `build.rustflags`. Setting `RUSTFLAGS` for our flags would silently drop flags
//! that live in `.cargo/config.toml` (a known bug of other PGO drivers), so we resolve the
//! user's flags ourselves and pass user + ours through `CARGO_ENCODED_RUSTFLAGS`.

use std::path::Path;

use anyhow::{Context, Result, bail};
use cargo_metadata::cargo_platform::{Cfg, Platform};

use crate::config::cargo_config::CargoConfig;

/// The flags cargo would have passed to rustc for target crates, and where they came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserFlags {
    pub flags: Vec<String>,
    pub source: String,
}

/// The flag among `flags` that strips symbols (`-Cstrip=symbols`, `-C strip=…`, a linker's
/// `-s`/`--strip-all`), if any: BOLT needs the symbols, and lld refuses `--strip-all` with
/// `--emit-relocs`. Stripping only debug info is fine.
pub fn stripping_flag(flags: &[String]) -> Option<String> {
    let strips_symbols = |value: &str| !matches!(value, "none" | "false" | "debuginfo");
    let strips_at_link = |args: &str| {
        args.split([' ', ','])
            .any(|arg| matches!(arg, "-s" | "--strip-all" | "-strip-all"))
    };
    let mut words = flags.iter().peekable();
    while let Some(flag) = words.next() {
        let codegen = match flag.as_str() {
            "-C" | "--codegen" => words.peek().map(|next| next.as_str()),
            _ => flag
                .strip_prefix("-C")
                .or_else(|| flag.strip_prefix("--codegen=")),
        };
        let Some(option) = codegen else {
            continue;
        };
        let offending = match option.split_once('=') {
            Some(("strip", value)) => strips_symbols(value),
            Some(("link-arg" | "link-args", args)) => strips_at_link(args),
            _ => false,
        };
        if offending {
            return Some(if flag.starts_with("-C") && flag.len() > 2 {
                flag.clone()
            } else {
                format!("{flag} {option}")
            });
        }
    }
    None
}

/// What the resolution reads; separated from the process so tests can supply it.
pub struct Sources<'a> {
    pub env: &'a dyn Fn(&str) -> Option<String>,
    pub config: &'a CargoConfig,
    /// The triple cargo builds for (`--target`).
    pub target: &'a str,
    pub target_cfg: &'a [Cfg],
}

impl UserFlags {
    pub fn resolve(sources: &Sources) -> Result<UserFlags> {
        let env = sources.env;
        let flags = if let Some(encoded) = env("CARGO_ENCODED_RUSTFLAGS") {
            let flags = if encoded.is_empty() {
                Vec::new()
            } else {
                encoded.split('\u{1f}').map(str::to_owned).collect()
            };
            UserFlags {
                flags,
                source: "CARGO_ENCODED_RUSTFLAGS".into(),
            }
        } else if let Some(plain) = env("RUSTFLAGS") {
            UserFlags {
                flags: plain.split_whitespace().map(str::to_owned).collect(),
                source: "RUSTFLAGS".into(),
            }
        } else {
            from_config(sources)?
        };
        flags.check_no_profile_flags()?;
        Ok(flags)
    }

    fn check_no_profile_flags(&self) -> Result<()> {
        let mut previous = "";
        for flag in &self.flags {
            let joined = format!("{previous}{flag}");
            if ["profile-generate", "profile-use", "profile-sample-use"]
                .iter()
                .any(|name| joined.contains(name))
            {
                bail!(
                    "the rustflags from {} already contain a profile flag ({flag}); pgo-build adds \
                     -Cprofile-generate and -Cprofile-use itself, per stage. Remove it from {}.",
                    self.source,
                    self.source
                );
            }
            previous = if flag == "-C" { "-C" } else { "" };
        }
        Ok(())
    }
}

fn from_config(sources: &Sources) -> Result<UserFlags> {
    let mut target_flags = Vec::new();
    let mut target_sources = Vec::new();
    let mut build_flags = Vec::new();
    let mut build_sources = Vec::new();
    for (file, value) in sources.config.files() {
        if let Some(targets) = value.get("target").and_then(|t| t.as_table()) {
            for (key, table) in targets {
                if !target_key_matches(key, sources)? {
                    continue;
                }
                if let Some(flags) = table.get("rustflags") {
                    target_flags.extend(flag_list(
                        flags,
                        file,
                        &format!("target.{key}.rustflags"),
                    )?);
                    target_sources.push(format!("target.{key}.rustflags in {}", file.display()));
                }
            }
        }
        if let Some(flags) = value.get("build").and_then(|b| b.get("rustflags")) {
            build_flags.extend(flag_list(flags, file, "build.rustflags")?);
            build_sources.push(format!("build.rustflags in {}", file.display()));
        }
    }
    let triple_var = crate::toolchain::targets::cargo_target_var(sources.target, "RUSTFLAGS");
    if let Some(flags) = (sources.env)(&triple_var) {
        target_flags.extend(flags.split_whitespace().map(str::to_owned));
        target_sources.push(triple_var);
    }
    if let Some(flags) = (sources.env)("CARGO_BUILD_RUSTFLAGS") {
        build_flags.extend(flags.split_whitespace().map(str::to_owned));
        build_sources.push("CARGO_BUILD_RUSTFLAGS".into());
    }
    // As in cargo: any target rustflags win over build.rustflags entirely.
    Ok(if !target_sources.is_empty() {
        UserFlags {
            flags: target_flags,
            source: target_sources.join(", "),
        }
    } else if !build_sources.is_empty() {
        UserFlags {
            flags: build_flags,
            source: build_sources.join(", "),
        }
    } else {
        UserFlags {
            flags: Vec::new(),
            source: "no user rustflags".into(),
        }
    })
}

fn target_key_matches(key: &str, sources: &Sources) -> Result<bool> {
    if key.starts_with("cfg(") {
        let platform: Platform = key
            .parse()
            .with_context(|| format!("could not parse the cargo config key target.{key}"))?;
        Ok(platform.matches(sources.target, sources.target_cfg))
    } else {
        Ok(key == sources.target)
    }
}

fn flag_list(value: &toml::Value, file: &Path, key: &str) -> Result<Vec<String>> {
    match value {
        toml::Value::String(text) => Ok(text.split_whitespace().map(str::to_owned).collect()),
        toml::Value::Array(items) => items
            .iter()
            .map(|item| {
                item.as_str().map(str::to_owned).with_context(|| {
                    format!("{key} in {} must be a list of strings", file.display())
                })
            })
            .collect(),
        _ => bail!(
            "{key} in {} must be a string or a list of strings",
            file.display()
        ),
    }
}

/// The cfg values rustc sets for the target, for `target.'cfg(…)'` keys.
pub fn target_cfg(cfg_output: &str) -> Vec<Cfg> {
    cfg_output
        .lines()
        .filter_map(|line| line.parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_way_to_strip_symbols_is_found() {
        let flags = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        for stripping in [
            &["-Cstrip=symbols"][..],
            &["-C", "strip=symbols"],
            &["--codegen", "strip=symbols"],
            &["-Copt-level=3", "-Clink-arg=-s"],
            &["-Clink-arg=-Wl,--strip-all"],
            &["-C", "link-args=-Wl,-O1 -s"],
        ] {
            assert!(stripping_flag(&flags(stripping)).is_some(), "{stripping:?}");
        }
        for keeping in [
            &["-Cstrip=debuginfo"][..],
            &["-C", "strip=none"],
            &["-Clink-arg=-Wl,--strip-debug"],
            &["-Ctarget-cpu=native"],
        ] {
            assert_eq!(stripping_flag(&flags(keeping)), None, "{keeping:?}");
        }
        assert_eq!(
            stripping_flag(&flags(&["-C", "strip=symbols"])).as_deref(),
            Some("-C strip=symbols")
        );
    }
    use std::collections::HashMap;

    const HOST: &str = "x86_64-unknown-linux-gnu";

    fn resolve(env: &[(&str, &str)], configs: &[&str]) -> Result<UserFlags> {
        let dir = tempfile::tempdir().unwrap();
        let mut files = Vec::new();
        for (i, text) in configs.iter().enumerate() {
            let file = dir.path().join(format!("config{i}.toml"));
            std::fs::write(&file, text).unwrap();
            files.push(file);
        }
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let lookup = move |key: &str| env.get(key).cloned();
        let cfg = target_cfg("target_os=\"linux\"\nunix\ntarget_arch=\"x86_64\"\n");
        let config = CargoConfig::from_files(files).unwrap();
        UserFlags::resolve(&Sources {
            env: &lookup,
            config: &config,
            target: HOST,
            target_cfg: &cfg,
        })
    }

    #[test]
    fn build_rustflags_from_config_files_are_joined_in_precedence_order() {
        let flags = resolve(
            &[],
            &[
                "[build]\nrustflags = [\"--cfg\", \"home\"]\n",
                "[build]\nrustflags = \"--cfg deep\"\n",
            ],
        )
        .unwrap();
        assert_eq!(flags.flags, ["--cfg", "home", "--cfg", "deep"]);
    }

    #[test]
    fn target_rustflags_win_over_build_rustflags() {
        let flags = resolve(
            &[],
            &[&format!(
                "[build]\nrustflags = [\"-Cbuild\"]\n[target.{HOST}]\nrustflags = [\"-Ctriple\"]\n[target.'cfg(unix)']\nrustflags = [\"-Ccfg\"]\n[target.'cfg(windows)']\nrustflags = [\"-Cwin\"]\n[target.aarch64-unknown-linux-gnu]\nrustflags = [\"-Cother\"]\n"
            )],
        )
        .unwrap();
        assert_eq!(flags.flags.len(), 2, "{flags:?}");
        assert!(flags.flags.contains(&"-Ctriple".to_owned()));
        assert!(flags.flags.contains(&"-Ccfg".to_owned()));
    }

    #[test]
    fn environment_wins_over_config_files() {
        let config = "[build]\nrustflags = [\"-Cconfig\"]\n";
        let flags = resolve(&[("RUSTFLAGS", "-Cenv  -Cmore")], &[config]).unwrap();
        assert_eq!(flags.flags, ["-Cenv", "-Cmore"]);
        let flags = resolve(
            &[
                ("RUSTFLAGS", "-Cenv"),
                ("CARGO_ENCODED_RUSTFLAGS", "-Ca b\u{1f}-Cc"),
            ],
            &[config],
        )
        .unwrap();
        assert_eq!(flags.flags, ["-Ca b", "-Cc"]);
        let flags = resolve(&[("CARGO_BUILD_RUSTFLAGS", "-Cbuildenv")], &[config]).unwrap();
        assert_eq!(flags.flags, ["-Cconfig", "-Cbuildenv"]);
    }

    #[test]
    fn existing_profile_flags_are_refused() {
        let err = resolve(&[("RUSTFLAGS", "-C profile-use=/x.profdata")], &[]).unwrap_err();
        assert!(format!("{err}").contains("RUSTFLAGS"), "{err}");
        assert!(resolve(&[("RUSTFLAGS", "-Cprofile-generate=/x")], &[]).is_err());
    }
}
