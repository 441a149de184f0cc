//! Plain helpers every other module may use, and that use nothing of pgo-build's: user output
//! (`printer`), files written atomically (`files`), external commands (`command`), byte and
//! time units (`units`), the names users give things (`names`), content fingerprints
//! (`fingerprint`), stopping a polling thread at once (`stop`).

pub mod command;
pub mod files;
pub mod fingerprint;
#[cfg(test)]
pub mod fuzz;
pub mod names;
pub mod printer;
pub mod problems;
pub mod stop;
pub mod units;
