//! `explore --apply`: the recommended variant's settings written into `pgo-build.toml`
//! (toml_edit, keeping the user's comments and layout).

use anyhow::{Context as _, Result, bail};

use super::variants::{Variant, known_variants};
use crate::config;
use crate::pipeline::context::Context;
use crate::report::ExploreResult;
use crate::util::files::write_atomically;

/// `text` (pgo-build.toml, perhaps empty) with `[build] profile_overrides` and `rustflags`
/// and `[bolt] enabled` set to `variant`'s; comments and everything else are kept.
pub fn apply_to_config(text: &str, variant: &Variant) -> Result<String> {
    let mut document: toml_edit::DocumentMut = text.parse().context("it is not valid TOML")?;
    let build = document
        .entry("build")
        .or_insert(toml_edit::table())
        .as_table_like_mut()
        .context("`build` is not a table")?;
    if variant.build.profile_overrides.is_empty() {
        build.remove("profile_overrides");
    } else {
        let mut overrides = toml_edit::InlineTable::new();
        for (key, value) in &variant.build.profile_overrides {
            let value: toml_edit::Value = match value {
                toml::Value::String(s) => s.as_str().into(),
                toml::Value::Integer(i) => (*i).into(),
                toml::Value::Boolean(b) => (*b).into(),
                other => {
                    bail!("profile override {key} = {other} is not a string, integer or boolean")
                }
            };
            overrides.insert(key, value);
        }
        build.insert("profile_overrides", toml_edit::value(overrides));
    }
    if variant.build.rustflags.is_empty() {
        build.remove("rustflags");
    } else {
        let flags: toml_edit::Array = variant.build.rustflags.iter().map(String::as_str).collect();
        build.insert("rustflags", toml_edit::value(flags));
    }
    if build.is_empty() {
        document.remove("build");
    }
    let bolt = document
        .entry("bolt")
        .or_insert(toml_edit::table())
        .as_table_like_mut()
        .context("`bolt` is not a table")?;
    bolt.insert("enabled", toml_edit::value(variant.bolt));
    let pgo = document
        .entry("pgo")
        .or_insert(toml_edit::table())
        .as_table_like_mut()
        .context("`pgo` is not a table")?;
    match variant.build.c {
        config::CBuild::User | config::CBuild::Clang => {
            pgo.remove("cross_language");
        }
        config::CBuild::Pgo => {
            pgo.insert("cross_language", toml_edit::value(true));
        }
        config::CBuild::PgoXlto => {
            pgo.insert(
                "cross_language",
                toml_edit::value(config::CROSS_LANGUAGE_THIN_LTO),
            );
        }
    }
    if pgo.is_empty() {
        document.remove("pgo");
    }
    Ok(document.to_string())
}

/// `--apply`: the recommended variant's settings into `pgo-build.toml`.
pub(super) fn apply(cx: &Context, result: &ExploreResult) -> Result<()> {
    if let Some(why) = &result.undecided {
        bail!("--apply: nothing was applied, because the measurements cannot decide yet: {why}");
    }
    let Some(recommendation) = &result.recommendation else {
        bail!(
            "--apply: nothing was applied, because not every variant was built and \
             measured; run `pgo-build explore` again to finish first"
        );
    };
    let variants = known_variants(&cx.config)?;
    let variant = variants
        .iter()
        .find(|v| v.name == recommendation.variant)
        .expect("the recommendation is a known variant");
    if !variant.pgo {
        bail!(
            "--apply: nothing was applied, because the recommendation is `{}`, without PGO: \
             {}",
            variant.name,
            recommendation.evidence
        );
    }
    let path = cx
        .config
        .path
        .clone()
        .unwrap_or_else(|| cx.workspace.root.join(config::CONFIG_FILE_NAME));
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let updated = apply_to_config(&text, variant)
        .with_context(|| format!("--apply: could not edit {}", path.display()))?;
    // What is written must load: checked before it replaces the file.
    config::Config::parse(&updated, &path)
        .with_context(|| format!("--apply: the edited {} would not load", path.display()))?;
    write_atomically(&path, updated.as_bytes())?;
    cx.printer.info(format!(
        "applied `{}` to {}: [build] profile_overrides = {{{}}}, rustflags = {:?}, [bolt] \
         enabled = {}, [pgo] cross_language = {}. `pgo-build run` builds it from now on.",
        variant.name,
        path.display(),
        variant
            .build
            .profile_overrides
            .iter()
            .map(|(k, v)| format!("{k} = {v}"))
            .collect::<Vec<_>>()
            .join(", "),
        variant.build.rustflags,
        variant.bolt,
        match variant.build.c {
            config::CBuild::Pgo => "true".to_owned(),
            config::CBuild::PgoXlto => format!("{:?}", config::CROSS_LANGUAGE_THIN_LTO),
            config::CBuild::User | config::CBuild::Clang => "false".to_owned(),
        }
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::explore::variants::{SPLIT_FLAG, builtin_variants};

    #[test]
    fn applying_a_variant_sets_its_settings_and_keeps_the_rest_of_the_file() {
        let text = "# our settings\n[build]\nbins = [\"app\"] # only this one\n\n[bolt]\nenabled = false\nfuncs = [\"^_R\"]\n";
        let variants = builtin_variants();
        let lto = variants
            .iter()
            .find(|v| v.name == "pgo+lto+cgu1+bolt")
            .unwrap();
        let applied = apply_to_config(text, lto).unwrap();
        assert!(
            applied.starts_with("# our settings\n[build]\nbins = [\"app\"] # only this one\n"),
            "{applied}"
        );
        assert!(
            applied.contains("profile_overrides = { codegen-units = 1, lto = \"fat\" }"),
            "{applied}"
        );
        assert!(applied.contains("enabled = true"), "{applied}");
        assert!(applied.contains("funcs = [\"^_R\"]"), "{applied}");
        let parsed =
            config::Config::parse(&applied, std::path::Path::new("/ws/pgo-build.toml")).unwrap();
        assert_eq!(parsed.variant(), lto.build);
        assert!(parsed.bolt.enabled);
        // Back to plain pgo: the overrides go, the rest stays.
        let pgo = variants.iter().find(|v| v.name == "pgo").unwrap();
        let back = apply_to_config(&applied, pgo).unwrap();
        assert!(!back.contains("profile_overrides"), "{back}");
        assert!(back.contains("enabled = false"), "{back}");
        assert!(back.contains("# only this one"), "{back}");
        // From no file at all.
        let split = variants.iter().find(|v| v.name == "pgo+split").unwrap();
        let fresh = apply_to_config("", split).unwrap();
        let parsed =
            config::Config::parse(&fresh, std::path::Path::new("/ws/pgo-build.toml")).unwrap();
        assert_eq!(parsed.build.rustflags, [SPLIT_FLAG]);
        // The C variants set [pgo] cross_language, and a Rust-only variant takes it away.
        for name in ["pgo+c", "pgo+c+xlto"] {
            let c = variants.iter().find(|v| v.name == name).unwrap();
            let applied = apply_to_config(&fresh, c).unwrap();
            let parsed =
                config::Config::parse(&applied, std::path::Path::new("/ws/pgo-build.toml"))
                    .unwrap();
            assert_eq!(parsed.variant(), c.build, "{applied}");
            let back = apply_to_config(&applied, pgo).unwrap();
            assert!(!back.contains("cross_language"), "{back}");
        }
    }
}
