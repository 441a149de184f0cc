//! A plain benchmark of the engine (`harness = false`, standard library only): runs every query
//! of a query file over a generated table and prints the time per pass. pgo-build uses it as a
//! cargo workload: `cargo bench --bench queries -- FILE ROWS SEED PASSES`.

use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let file = args
        .first()
        .map_or("workloads/train.queries", String::as_str);
    let number =
        |i: usize, default: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let (rows, seed, passes) = (number(1, 200_000) as usize, number(2, 1), number(3, 3));
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()));
    let table = engine::Table::generate(seed, rows);
    let mut checksum = 0i64;
    for pass in 0..passes {
        let started = Instant::now();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            checksum = checksum.wrapping_add(engine::run_query(line, &table).expect("query runs"));
        }
        println!(
            "pass {pass}: {:.1} ms",
            started.elapsed().as_secs_f64() * 1e3
        );
    }
    println!("checksum {checksum}");
}
