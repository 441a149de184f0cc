//! The variants `explore` knows: the built-in ones (baseline, pgo, +lto, +cgu1, +split,
//! +bolt) and the user's `[[explore.variant]]`s, which settings train alike, and their names.

use anyhow::{Result, bail};

use crate::config::{self, BuildVariant, CBuild};
use crate::report::ExploreVariantRecord;
use crate::report::VariantStatus;

/// Machine function splitting: the cold blocks of hot functions move out of the hot code, by
/// the profile (rustc 1.95 passes it to LLVM; whether it helps is what explore measures).
pub const SPLIT_FLAG: &str = "-Cllvm-args=-enable-split-machine-functions";

/// Flags that act only where there is a profile, so a build with them trains exactly as one
/// without: instrumentation is added before codegen, and LLVM's machine function splitter
/// returns early for functions without profile data. A variant that adds only these is
/// optimized with the profile trained without them (one training fewer).
pub(super) const PROFILE_USE_ONLY: [&str; 1] = [SPLIT_FLAG];

/// The settings a variant trains with: its own, less [`PROFILE_USE_ONLY`] flags.
pub(super) fn training_settings(settings: &BuildVariant) -> BuildVariant {
    BuildVariant {
        rustflags: settings
            .rustflags
            .iter()
            .filter(|flag| !PROFILE_USE_ONLY.contains(&flag.as_str()))
            .cloned()
            .collect(),
        ..settings.clone()
    }
}

/// The two variants every exploration measures: the others are judged against them.
pub(super) use crate::report::{BASELINE_VARIANT as BASELINE, PGO_VARIANT as PGO};

/// A build configuration to measure.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    pub name: String,
    /// What it adds to the workspace's own settings.
    pub build: BuildVariant,
    /// Built with the profile of its training.
    pub pgo: bool,
    /// Post-link optimized with BOLT.
    pub bolt: bool,
}

/// The built-in variants, in the order they are built and listed.
pub fn builtin_variants() -> Vec<Variant> {
    let lto = || ("lto", toml::Value::String("fat".to_owned()));
    let cgu1 = || ("codegen-units", toml::Value::Integer(1));
    let variant =
        |name: &str, overrides: Vec<(&str, toml::Value)>, flags: &[&str], pgo, bolt| Variant {
            name: name.to_owned(),
            build: BuildVariant {
                profile_overrides: overrides
                    .into_iter()
                    .map(|(key, value)| (key.to_owned(), value))
                    .collect(),
                rustflags: flags.iter().map(|f| f.to_string()).collect(),
                c: CBuild::User,
            },
            pgo,
            bolt,
        };
    let with_c = |c: CBuild, base: Variant| Variant {
        build: BuildVariant { c, ..base.build },
        ..base
    };
    vec![
        variant(BASELINE, vec![], &[], false, false),
        variant(PGO, vec![], &[], true, false),
        variant("pgo+lto", vec![lto()], &[], true, false),
        variant("pgo+cgu1", vec![cgu1()], &[], true, false),
        variant("pgo+lto+cgu1", vec![lto(), cgu1()], &[], true, false),
        variant("pgo+split", vec![], &[SPLIT_FLAG], true, false),
        variant("pgo+bolt", vec![], &[], true, true),
        variant("pgo+lto+cgu1+bolt", vec![lto(), cgu1()], &[], true, true),
        with_c(CBuild::Clang, variant(CLANG, vec![], &[], false, false)),
        with_c(CBuild::Pgo, variant(PGO_C, vec![], &[], true, false)),
        with_c(
            CBuild::PgoXlto,
            variant("pgo+c+xlto", vec![], &[], true, false),
        ),
    ]
}

/// The C variants: the C of build scripts compiled by rustc's clang without PGO (the compiler
/// switch alone), with cross-language PGO, and with cross-language ThinLTO too. Measured when
/// named, or by default where the workspace's build scripts compile C/C++ that they cover and
/// that clang is installed, or with `[pgo] cross_language` (`c_by_default`).
pub(super) const CLANG: &str = "clang";
pub(super) const PGO_C: &str = "pgo+c";

fn is_c_variant(variant: &Variant) -> bool {
    variant.build.c != CBuild::User
}

/// Every variant known: the built-in ones, then `[[explore.variant]]`.
pub(super) fn known_variants(config: &config::Config) -> Result<Vec<Variant>> {
    let mut variants = builtin_variants();
    for own in &config.explore.variant {
        let name = own.name.get_ref();
        if variants.iter().any(|v| &v.name == name) {
            bail!(
                "[[explore.variant]] {name:?} in {} has the name of a built-in variant; built-in: \
                 {}. Rename it.",
                config.display_path(),
                builtin_variants()
                    .iter()
                    .map(|v| v.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        variants.push(Variant {
            name: name.clone(),
            build: BuildVariant {
                profile_overrides: own.profile_overrides.clone(),
                rustflags: own.rustflags.clone(),
                c: CBuild::User,
            },
            pgo: own.pgo,
            bolt: own.bolt,
        });
    }
    Ok(variants)
}

/// The variants `--variants` names (all known ones when it names none; the C variants only
/// with `c_by_default`), with `baseline` and `pgo` always first: they are the references.
pub fn select_variants(
    config: &config::Config,
    names: &[String],
    c_by_default: bool,
) -> Result<Vec<Variant>> {
    let known = known_variants(config)?;
    for name in names {
        if !known.iter().any(|v| &v.name == name) {
            bail!(
                "unknown variant `{name}`; variants: {} (add your own with [[explore.variant]] \
                 in {})",
                known
                    .iter()
                    .map(|v| v.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                config.display_path()
            );
        }
    }
    Ok(known
        .into_iter()
        .filter(|v| {
            let by_default = !is_c_variant(v) || c_by_default;
            (names.is_empty() && by_default)
                || v.name == BASELINE
                || v.name == PGO
                || names.contains(&v.name)
        })
        .collect())
}

pub(super) fn describe(variant: &Variant) -> String {
    let mut words = vec![if variant.pgo { "PGO" } else { "no PGO" }.to_owned()];
    if !variant.build.profile_overrides.is_empty() || !variant.build.rustflags.is_empty() {
        words.push(variant.build.describe());
    }
    if variant.bolt {
        words.push("BOLT".to_owned());
    }
    words.join(", ")
}

/// A measured record of a plain variant of that name, for tests of decisions.
#[cfg(test)]
pub(super) fn measured_record(name: &str) -> ExploreVariantRecord {
    let mut record = new_record(&Variant {
        name: name.to_owned(),
        build: BuildVariant::default(),
        pgo: name != BASELINE,
        bolt: false,
    });
    record.status = VariantStatus::Measured;
    record
}

pub(super) fn new_record(variant: &Variant) -> ExploreVariantRecord {
    ExploreVariantRecord {
        name: variant.name.clone(),
        pgo: variant.pgo,
        bolt: variant.bolt,
        profile_overrides: variant
            .build
            .profile_overrides
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect(),
        rustflags: variant.build.rustflags.clone(),
        // Until it is built.
        status: VariantStatus::NotBuilt,
        detail: None,
        bin_dir: None,
        steps: Vec::new(),
        build_secs: None,
        peak_memory_bytes: None,
        size_bytes: None,
        loaded_bytes: None,
        size_change: None,
        over_size_limit: false,
        vs_baseline: None,
        vs_pgo: None,
        rounds: None,
        front: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> config::Config {
        config::Config::parse(text, std::path::Path::new("/ws/pgo-build.toml")).unwrap()
    }

    use crate::layout::step::Step;

    fn names(variants: &[Variant]) -> Vec<&str> {
        variants.iter().map(|v| v.name.as_str()).collect()
    }

    /// A report of schema 12 called a variant's costs `stages`, each with a `stage`: read as
    /// steps, and written as steps again.
    #[test]
    fn a_variant_record_of_schema_12_reads_its_stages_as_steps() {
        let mut record = measured_record(PGO);
        record.steps.push(crate::report::ExploreStepCost {
            build: "target/pgo-build".to_owned(),
            step: Step::Train,
            secs: 1.5,
            peak_memory_bytes: None,
            cached: false,
        });
        let mut older = serde_json::to_value(&record).unwrap();
        let steps = older.as_object_mut().unwrap().remove("steps").unwrap();
        let mut stages = steps.clone();
        let cost = stages[0].as_object_mut().unwrap();
        let step = cost.remove("step").unwrap();
        cost.insert("stage".to_owned(), step);
        older["stages"] = stages;
        let read: ExploreVariantRecord = serde_json::from_value(older).unwrap();
        assert_eq!(read.steps.len(), 1);
        assert_eq!((read.steps[0].step, read.steps[0].secs), (Step::Train, 1.5));
        assert_eq!(serde_json::to_value(&read).unwrap()["steps"], steps);
    }

    #[test]
    fn the_references_are_always_selected_and_unknown_names_are_refused() {
        let own = config(
            "[[explore.variant]]\nname = \"opt1\"\nprofile_overrides = { opt-level = 1 }\npgo = false\n",
        );
        let all = select_variants(&own, &[], false).unwrap();
        assert_eq!(
            names(&all),
            [
                "baseline",
                "pgo",
                "pgo+lto",
                "pgo+cgu1",
                "pgo+lto+cgu1",
                "pgo+split",
                "pgo+bolt",
                "pgo+lto+cgu1+bolt",
                "opt1"
            ]
        );
        assert!(!all[8].pgo);
        let some = select_variants(&own, &["opt1".into(), "pgo+lto".into()], false).unwrap();
        assert_eq!(names(&some), ["baseline", "pgo", "pgo+lto", "opt1"]);
        let err = select_variants(&own, &["pgo+lt0".into()], false).unwrap_err();
        assert!(
            format!("{err:#}").contains("unknown variant `pgo+lt0`; variants: baseline, pgo,"),
            "{err:#}"
        );
        // Where the build compiles C/C++ (or cross-language PGO is on), the C variants too.
        let with_c = select_variants(&own, &[], true).unwrap();
        assert_eq!(
            names(&with_c)[8..],
            ["clang", "pgo+c", "pgo+c+xlto", "opt1"]
        );
        let clash = config("[[explore.variant]]\nname = \"pgo+lto\"\n");
        let err = select_variants(&clash, &[], false).unwrap_err();
        assert!(
            format!("{err:#}").contains("name of a built-in variant"),
            "{err:#}"
        );
    }

    #[test]
    fn split_trains_with_pgos_settings_and_lto_with_its_own() {
        let variants = builtin_variants();
        let settings = |name: &str| &variants.iter().find(|v| v.name == name).unwrap().build;
        assert_eq!(training_settings(settings("pgo+split")), *settings("pgo"));
        assert_eq!(training_settings(settings("pgo+lto")), *settings("pgo+lto"));
    }
}
