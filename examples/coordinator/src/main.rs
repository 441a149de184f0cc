//! The front end: checks every query, starts worker processes (the `worker` binary beside its
//! own executable), hands each a share of the queries, prints the answers in order and stops
//! the workers with SIGTERM, the way orchestrators stop replicas.
//!
//! `coordinator --queries FILE [--workers N] [--rows N] [--seed S] [--repeat R]`; as a server,
//! `coordinator serve …`, and its load generator, `coordinator load …` (see `serve.rs`).

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

struct Options {
    queries: PathBuf,
    workers: usize,
    rows: usize,
    seed: u64,
    repeat: usize,
}

fn options() -> Result<Options, String> {
    let mut options = Options {
        queries: PathBuf::new(),
        workers: 2,
        rows: 100_000,
        seed: 1,
        repeat: 1,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--queries" => options.queries = value()?.into(),
            "--workers" => {
                options.workers = value()?.parse().map_err(|e| format!("--workers: {e}"))?
            }
            "--rows" => options.rows = value()?.parse().map_err(|e| format!("--rows: {e}"))?,
            "--seed" => options.seed = value()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--repeat" => {
                options.repeat = value()?.parse().map_err(|e| format!("--repeat: {e}"))?
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if options.queries.as_os_str().is_empty() {
        return Err(
            "usage: coordinator --queries FILE [--workers N] [--rows N] [--seed S] [--repeat R]"
                .into(),
        );
    }
    Ok(options)
}

mod serve;

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    let result = match args.peek().map(String::as_str) {
        Some("serve") => serve::serve(args.skip(1)),
        Some("load") => serve::load(args.skip(1)),
        _ => run(),
    };
    if let Err(message) = result {
        eprintln!("coordinator: {message}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let options = options()?;
    let text = std::fs::read_to_string(&options.queries)
        .map_err(|e| format!("cannot read {}: {e}", options.queries.display()))?;
    let mut queries = Vec::new();
    for _ in 0..options.repeat {
        for line in text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            // The front end rejects bad queries before any worker sees them.
            engine::parse_query(line).map_err(|e| format!("bad query {line:?}: {e}"))?;
            queries.push(line.to_owned());
        }
    }
    let worker_bin = std::env::current_exe()
        .map_err(|e| format!("cannot find own executable: {e}"))?
        .with_file_name("worker");
    let handles: Vec<_> = (0..options.workers.max(1))
        .map(|index| {
            let share: Vec<(usize, String)> = queries
                .iter()
                .enumerate()
                .filter(|(id, _)| id % options.workers.max(1) == index)
                .map(|(id, q)| (id, q.clone()))
                .collect();
            let worker_bin = worker_bin.clone();
            let (seed, rows) = (options.seed, options.rows);
            std::thread::spawn(move || run_worker(&worker_bin, seed, rows, share))
        })
        .collect();
    let mut answers = Vec::new();
    for handle in handles {
        answers.extend(
            handle
                .join()
                .map_err(|_| "worker thread panicked".to_string())??,
        );
    }
    answers.sort();
    let mut checksum: u64 = 0;
    for (id, value) in &answers {
        println!("{id}\t{value}\t{}", queries[*id]);
        checksum = checksum.wrapping_mul(31).wrapping_add(*value as u64);
    }
    println!("checksum {checksum:016x} ({} queries)", answers.len());
    Ok(())
}

fn run_worker(
    bin: &PathBuf,
    seed: u64,
    rows: usize,
    share: Vec<(usize, String)>,
) -> Result<Vec<(usize, i64)>, String> {
    let mut child = Command::new(bin)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start worker {}: {e}", bin.display()))?;
    // Kept open: a replica serves until it is told to stop.
    let mut stdin = child.stdin.take().expect("piped");
    writeln!(stdin, "TABLE {seed} {rows}").map_err(|e| e.to_string())?;
    for (id, query) in &share {
        writeln!(stdin, "QUERY {id} {query}").map_err(|e| e.to_string())?;
    }
    stdin.flush().map_err(|e| e.to_string())?;
    let mut answers = Vec::new();
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    while answers.len() < share.len() {
        let line = match lines.next() {
            Some(line) => line.map_err(|e| e.to_string())?,
            None => {
                return Err(format!(
                    "worker stopped after {} of {} answers",
                    answers.len(),
                    share.len()
                ));
            }
        };
        let mut words = line.split(' ');
        match (words.next(), words.next(), words.next()) {
            (Some("RESULT"), Some(id), Some(value)) => answers.push((
                id.parse().map_err(|_| format!("bad answer {line:?}"))?,
                value.parse().map_err(|_| format!("bad answer {line:?}"))?,
            )),
            _ => return Err(format!("worker answered {line:?}")),
        }
    }
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let status = child.wait().map_err(|e| e.to_string())?;
    drop(stdin);
    // Stopped as asked: by the signal, or by an exit that reports it (128 + signal), as
    // pgo-build-rt does while BOLT trains.
    let stopped = std::os::unix::process::ExitStatusExt::signal(&status) == Some(libc::SIGTERM)
        || status.code() == Some(128 + libc::SIGTERM);
    if !status.success() && !stopped {
        return Err(format!("worker exited with {status}"));
    }
    if answers.len() != share.len() {
        return Err(format!(
            "worker answered {} of {} queries",
            answers.len(),
            share.len()
        ));
    }
    Ok(answers)
}
