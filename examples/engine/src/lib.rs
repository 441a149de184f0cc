//! A tiny analytical query engine: a query language, a compiler to stack bytecode, and an
//! interpreter that evaluates the bytecode over generated rows. Branchy, CPU-bound work of
//! the kind profile-guided optimization helps with.
//!
//! Query syntax: `AGG(expr) [where predicate]` or `count [where predicate]`, with
//! AGG one of sum, min, max, avg; columns c0..c7; integer literals; `+ - * / %`, comparisons
//! (`< <= > >= == !=`), `and`, `or`, `not`, `abs(e)`, `min(a, b)`, `max(a, b)`,
//! `if(cond, a, b)` and `x between lo and hi`.

pub mod bytecode;
pub mod closure;
pub mod data;
pub mod parse;

pub use bytecode::{Program, compile};
pub use data::Table;
pub use parse::{Aggregate, Query, parse_query};

/// Compiles and runs a query over a table; returns the aggregate.
pub fn run_query(text: &str, table: &Table) -> Result<i64, String> {
    let query = parse_query(text)?;
    // Filters run as closure trees, values as bytecode: two evaluator shapes real engines use.
    let filter = query.filter.as_ref().map(closure::compile_closure);
    let value = query.value.as_ref().map(compile);
    let mut stack = Vec::with_capacity(64);
    let mut count: i64 = 0;
    let mut acc: i64 = match query.aggregate {
        Aggregate::Min => i64::MAX,
        Aggregate::Max => i64::MIN,
        _ => 0,
    };
    for row in table.rows() {
        if let Some(filter) = &filter
            && filter(row) == 0
        {
            continue;
        }
        count += 1;
        let v = match &value {
            Some(program) => program.eval(row, &mut stack),
            None => 1,
        };
        acc = match query.aggregate {
            Aggregate::Count => acc + 1,
            Aggregate::Sum | Aggregate::Avg => acc.wrapping_add(v),
            Aggregate::Min => acc.min(v),
            Aggregate::Max => acc.max(v),
        };
    }
    Ok(match query.aggregate {
        Aggregate::Avg if count > 0 => acc / count,
        Aggregate::Min | Aggregate::Max if count == 0 => 0,
        _ => acc,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_compute_what_they_say() {
        let table = Table::generate(7, 1000);
        let manual: i64 = table
            .rows()
            .filter(|r| r[0] % 7 < 3)
            .map(|r| r[1] * 3 + r[2])
            .sum();
        assert_eq!(
            run_query("sum(c1 * 3 + c2) where c0 % 7 < 3", &table).unwrap(),
            manual
        );
        let count = table.rows().filter(|r| (10..=500).contains(&r[3])).count() as i64;
        assert_eq!(
            run_query("count where c3 between 10 and 500", &table).unwrap(),
            count
        );
        let max = table.rows().map(|r| (r[2] - r[7]).abs()).max().unwrap();
        assert_eq!(run_query("max(abs(c2 - c7))", &table).unwrap(), max);
        let iffy: i64 = table
            .rows()
            .map(|r| if r[5] == 2 { r[1] } else { -1 })
            .sum();
        assert_eq!(
            run_query("sum(if(c5 == 2, c1, 0 - 1))", &table).unwrap(),
            iffy
        );
    }

    #[test]
    fn syntax_errors_are_reported() {
        assert!(parse_query("sum(c1 +)").is_err());
        assert!(parse_query("median(c1)").is_err());
        assert!(parse_query("sum(c9)").is_err());
    }
}
