//! A replica: reads a table description and queries on stdin and answers on stdout, until it
//! is stopped with SIGTERM (as orchestrators stop replicas) or its input ends.
//!
//! `pgo_build_rt::install()` is what lets the instrumented build still write its profile when
//! SIGTERM stops it; without it this binary would be optimized from nothing.
//!
//! Protocol, one command a line: `TABLE <seed> <rows>`, then `QUERY <id> <text>`; answers are
//! `RESULT <id> <value>` or `ERROR <id> <message>`.

use std::io::{BufRead, BufWriter, Write};

use engine::{Table, run_query};

fn main() {
    pgo_build_rt::install();
    let stdin = std::io::stdin();
    let mut out = BufWriter::new(std::io::stdout().lock());
    let mut table = None;
    for line in stdin.lock().lines() {
        let line = line.expect("reading stdin");
        let mut words = line.splitn(3, ' ');
        match words.next() {
            Some("TABLE") => {
                let seed: u64 = words
                    .next()
                    .and_then(|w| w.parse().ok())
                    .expect("TABLE seed");
                let rows: usize = words
                    .next()
                    .and_then(|w| w.trim().parse().ok())
                    .expect("TABLE rows");
                table = Some(Table::generate(seed, rows));
            }
            Some("QUERY") => {
                let id = words.next().unwrap_or("?");
                let text = words.next().unwrap_or_default();
                let table = table.as_ref().expect("QUERY before TABLE");
                match run_query(text, table) {
                    Ok(value) => writeln!(out, "RESULT {id} {value}"),
                    Err(message) => writeln!(out, "ERROR {id} {message}"),
                }
                .expect("writing stdout");
                out.flush().expect("writing stdout");
            }
            Some("") | None => {}
            Some(other) => panic!("unknown command {other:?}"),
        }
    }
}
