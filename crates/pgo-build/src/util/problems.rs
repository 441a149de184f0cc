//! Several problems found in one pass (a configuration file, `doctor`), given as one error
//! that names each: users fix them all at once instead of one run at a time.

use anyhow::{Result, bail};

/// No problem, one (as it is), or several in one error: `heading(count)`, then one line each.
pub fn all_of(
    mut problems: Vec<anyhow::Error>,
    heading: impl FnOnce(usize) -> String,
) -> Result<()> {
    match problems.len() {
        0 => Ok(()),
        1 => Err(problems.remove(0)),
        count => bail!(
            "{}:\n{}",
            heading(count),
            problems
                .iter()
                .map(|problem| format!("- {problem:#}"))
                .collect::<Vec<_>>()
                .join("\n")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_problem_stays_itself_and_several_are_listed() {
        assert!(all_of(Vec::new(), |n| format!("{n}")).is_ok());
        let one = all_of(vec![anyhow::anyhow!("a")], |n| format!("{n} problems"));
        assert_eq!(format!("{:#}", one.unwrap_err()), "a");
        let two = all_of(vec![anyhow::anyhow!("a"), anyhow::anyhow!("b")], |n| {
            format!("{n} problems")
        });
        assert_eq!(format!("{:#}", two.unwrap_err()), "2 problems:\n- a\n- b");
    }
}
