//! The environment pgo-build starts its rustc wrapper with (each stage build sets it for
//! cargo: `pipeline/rustc_budget.rs`), and reading it.

pub const MODE_ENV: &str = "PGO_BUILD_RUSTC_WRAPPER_MODE";
/// The user's own rustc wrapper (sccache, …), run in front of rustc.
pub const CHAINED_ENV: &str = "PGO_BUILD_CHAINED_RUSTC_WRAPPER";
pub const LEDGER_ENV: &str = "PGO_BUILD_MEMORY_LEDGER";
pub const BUDGET_ENV: &str = "PGO_BUILD_MEMORY_BUDGET";
pub const CPUS_ENV: &str = "PGO_BUILD_RUSTC_CPUS";
pub const ESTIMATES_ENV: &str = "PGO_BUILD_RUSTC_ESTIMATES";
pub const LOG_ENV: &str = "PGO_BUILD_RUSTC_LOG";
/// The workspace root, where cargo runs rustc for members (see `layout::absolute_own_path`).
pub const WORKSPACE_ROOT_ENV: &str = "PGO_BUILD_WORKSPACE_ROOT";

/// A number the environment gives, if it is one.
pub(super) fn env_number(key: &str) -> Option<u64> {
    std::env::var(key).ok()?.parse().ok()
}
