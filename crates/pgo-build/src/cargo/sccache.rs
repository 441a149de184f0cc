//! sccache as cargo's rustc wrapper: found where cargo finds it (`RUSTC_WRAPPER`,
//! `CARGO_BUILD_RUSTC_WRAPPER`, `build.rustc-wrapper`), and its counters read before and after
//! each stage's build, so `report.json` says what the cache did for that stage.
//!
//! pgo-build runs it for every stage as configured, behind its own rustc wrapper (see
//! rustc_wrapper.rs), and pgo-build's linker handling is a `-C linker` flag, which chains with it.

use std::ffi::OsString;

use crate::config::cargo_config::CargoConfig;
use crate::report::StageCache;
use crate::util::command::Cmd;
use crate::util::printer::Printer;

/// The rustc wrapper cargo would run, as cargo finds it (pgo-build runs it behind its own).
pub fn user_wrapper(cargo_config: &CargoConfig) -> Option<OsString> {
    ["RUSTC_WRAPPER", "CARGO_BUILD_RUSTC_WRAPPER"]
        .iter()
        .find_map(|key| std::env::var_os(key).filter(|v| !v.is_empty()))
        .or_else(|| {
            cargo_config
                .lookup(&["build", "rustc-wrapper"])
                .and_then(|(_, value)| value.as_str().map(OsString::from))
        })
}

/// The wrapper program cargo would run, when it is sccache.
pub fn wrapper(cargo_config: &CargoConfig) -> Option<OsString> {
    let program = user_wrapper(cargo_config)?;
    let name = std::path::Path::new(&program).file_stem()?.to_str()?;
    name.starts_with("sccache").then_some(program)
}

/// sccache's counters at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counters {
    requests: u64,
    hits: u64,
    misses: u64,
    not_cacheable: u64,
}

/// The server's counters (`sccache --show-stats --stats-format=json`), or `None` when sccache
/// cannot say (then the stage records nothing rather than a wrong figure).
pub fn counters(program: &OsString, printer: &Printer) -> Option<Counters> {
    let text = Cmd::new(program)
        .args(["--show-stats", "--stats-format=json"])
        .stdout_checked(printer)
        .ok()?;
    parse(&text)
}

fn parse(text: &str) -> Option<Counters> {
    let json: serde_json::Value = serde_json::from_str(text).ok()?;
    let stats = &json["stats"];
    let sum = |key: &str| -> u64 {
        stats[key]["counts"].as_object().map_or(0, |counts| {
            counts
                .values()
                .filter_map(|v| v.as_u64())
                .fold(0, u64::saturating_add)
        })
    };
    Some(Counters {
        requests: stats["compile_requests"].as_u64()?,
        hits: sum("cache_hits"),
        misses: sum("cache_misses"),
        not_cacheable: stats["requests_not_cacheable"]
            .as_u64()
            .unwrap_or(0)
            .saturating_add(stats["non_cacheable_compilations"].as_u64().unwrap_or(0)),
    })
}

impl Counters {
    /// What happened between `self` (before) and `after`.
    pub fn since(self, after: Counters) -> StageCache {
        let hits = after.hits.saturating_sub(self.hits);
        let misses = after.misses.saturating_sub(self.misses);
        StageCache {
            requests: after.requests.saturating_sub(self.requests),
            hits,
            misses,
            not_cacheable: after.not_cacheable.saturating_sub(self.not_cacheable),
            hit_rate: (hits + misses > 0).then(|| hits as f64 / (hits + misses) as f64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_read_from_sccache_json_and_differenced() {
        let before = parse(
            r#"{"stats":{"compile_requests":10,"requests_not_cacheable":1,
                "cache_hits":{"counts":{"Rust":3},"adv_counts":{}},
                "cache_misses":{"counts":{"Rust":4,"C/C++":1},"adv_counts":{}},
                "non_cacheable_compilations":2}}"#,
        )
        .unwrap();
        let after = parse(
            r#"{"stats":{"compile_requests":20,"requests_not_cacheable":2,
                "cache_hits":{"counts":{"Rust":9},"adv_counts":{}},
                "cache_misses":{"counts":{"Rust":5,"C/C++":1},"adv_counts":{}},
                "non_cacheable_compilations":4}}"#,
        )
        .unwrap();
        let stage = before.since(after);
        assert_eq!((stage.requests, stage.hits, stage.misses), (10, 6, 1));
        assert_eq!(stage.not_cacheable, 3);
        assert!((stage.hit_rate.unwrap() - 6.0 / 7.0).abs() < 1e-9);
        assert!(parse("not json").is_none());
    }
}
