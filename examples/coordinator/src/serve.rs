//! The coordinator as a server, and the load generator that measures it.
//!
//! `coordinator serve --listen ADDR [--addr-file FILE] [--rows N] [--seed S]` answers queries
//! over TCP, one connection per thread: `QUERY <text>` → `RESULT <value>` or `ERROR <message>`.
//! It prints `listening on <addr>` once it accepts connections (and writes the address to
//! `--addr-file`, so `--listen 127.0.0.1:0` picks a free port). SIGTERM stops it; in an
//! instrumented build `pgo_build_rt::install()` writes its profile first.
//!
//! `coordinator load --addr-file FILE --queries FILE [--connections N] [--repeat R]` sends every
//! query R times over N connections and reports what users of a server watch: throughput
//! (`throughput: <queries/s>`) and per-request latencies (as JSON lines to
//! `$PGO_BUILD_METRICS` when set, and their percentiles on stdout).

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Instant;

use engine::{Table, run_query};

pub fn serve(mut args: impl Iterator<Item = String>) -> Result<(), String> {
    pgo_build_rt::install();
    let (mut listen, mut addr_file, mut rows, mut seed) =
        ("127.0.0.1:0".to_owned(), None, 200_000usize, 1u64);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--listen" => listen = value()?,
            "--addr-file" => addr_file = Some(value()?),
            "--rows" => rows = value()?.parse().map_err(|e| format!("--rows: {e}"))?,
            "--seed" => seed = value()?.parse().map_err(|e| format!("--seed: {e}"))?,
            other => return Err(format!("serve: unknown flag {other}")),
        }
    }
    let table = Arc::new(Table::generate(seed, rows));
    let listener =
        TcpListener::bind(&listen).map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    if let Some(file) = addr_file {
        // Written whole under another name first: a client never reads half an address.
        let partial = format!("{file}.partial");
        std::fs::write(&partial, addr.to_string()).map_err(|e| format!("{partial}: {e}"))?;
        std::fs::rename(&partial, &file).map_err(|e| format!("{file}: {e}"))?;
    }
    println!("listening on {addr}");
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let table = Arc::clone(&table);
        std::thread::spawn(move || answer(stream, &table));
    }
    Ok(())
}

fn answer(stream: TcpStream, table: &Table) {
    let Ok(reader) = stream.try_clone() else {
        return;
    };
    let mut out = BufWriter::new(stream);
    for line in BufReader::new(reader).lines() {
        let Ok(line) = line else { return };
        let reply = match line.strip_prefix("QUERY ") {
            Some(query) => match run_query(query, table) {
                Ok(value) => format!("RESULT {value}"),
                Err(message) => format!("ERROR {message}"),
            },
            None => format!("ERROR unknown request {line:?}"),
        };
        if writeln!(out, "{reply}").and_then(|()| out.flush()).is_err() {
            return;
        }
    }
}

pub fn load(mut args: impl Iterator<Item = String>) -> Result<(), String> {
    let (mut addr_file, mut queries, mut connections, mut repeat) = (None, None, 2usize, 1usize);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--addr-file" => addr_file = Some(value()?),
            "--queries" => queries = Some(value()?),
            "--connections" => {
                connections = value()?
                    .parse()
                    .map_err(|e| format!("--connections: {e}"))?
            }
            "--repeat" => repeat = value()?.parse().map_err(|e| format!("--repeat: {e}"))?,
            other => return Err(format!("load: unknown flag {other}")),
        }
    }
    let (Some(addr_file), Some(queries)) = (addr_file, queries) else {
        return Err("usage: coordinator load --addr-file FILE --queries FILE [--connections N] [--repeat R]".into());
    };
    let addr = std::fs::read_to_string(&addr_file).map_err(|e| format!("{addr_file}: {e}"))?;
    let text = std::fs::read_to_string(&queries).map_err(|e| format!("{queries}: {e}"))?;
    let queries: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect();
    let connections = connections.max(1);
    let started = Instant::now();
    let handles: Vec<_> = (0..connections)
        .map(|index| {
            let share: Vec<String> = (0..repeat)
                .flat_map(|_| queries.iter())
                .enumerate()
                .filter(|(i, _)| i % connections == index)
                .map(|(_, q)| q.clone())
                .collect();
            let addr = addr.trim().to_owned();
            std::thread::spawn(move || client(&addr, &share))
        })
        .collect();
    let mut latencies_ms = Vec::new();
    let mut checksum: u64 = 0;
    for handle in handles {
        let (latencies, sum) = handle.join().map_err(|_| "client thread panicked")??;
        latencies_ms.extend(latencies);
        checksum = checksum.wrapping_add(sum);
    }
    let elapsed = started.elapsed().as_secs_f64();
    if let Ok(path) = std::env::var("PGO_BUILD_METRICS") {
        let mut file = BufWriter::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| format!("{path}: {e}"))?,
        );
        for ms in &latencies_ms {
            writeln!(file, r#"{{"name":"latency","value":{ms:.4}}}"#).map_err(|e| e.to_string())?;
        }
        file.flush().map_err(|e| e.to_string())?;
    }
    latencies_ms.sort_by(f64::total_cmp);
    let at = |p: f64| {
        latencies_ms
            [((p * latencies_ms.len() as f64).ceil() as usize).clamp(1, latencies_ms.len()) - 1]
    };
    println!("requests: {}", latencies_ms.len());
    println!(
        "throughput: {:.1} queries/s",
        latencies_ms.len() as f64 / elapsed
    );
    println!(
        "latency ms: p50 {:.3}, p95 {:.3}, p99 {:.3}",
        at(0.50),
        at(0.95),
        at(0.99)
    );
    println!("checksum {checksum:016x}");
    Ok(())
}

/// Sends each query and waits for its answer; returns each request's latency in ms.
fn client(addr: &str, queries: &[String]) -> Result<(Vec<f64>, u64), String> {
    let stream = TcpStream::connect(addr).map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    let mut lines = BufReader::new(stream.try_clone().map_err(|e| e.to_string())?).lines();
    let mut out = BufWriter::new(stream);
    let mut latencies = Vec::with_capacity(queries.len());
    let mut checksum: u64 = 0;
    for query in queries {
        let sent = Instant::now();
        writeln!(out, "QUERY {query}")
            .and_then(|()| out.flush())
            .map_err(|e| format!("sending to {addr}: {e}"))?;
        let reply = lines
            .next()
            .ok_or(format!("{addr} closed the connection"))?
            .map_err(|e| e.to_string())?;
        latencies.push(sent.elapsed().as_secs_f64() * 1000.0);
        match reply.strip_prefix("RESULT ") {
            Some(value) => {
                let value: i64 = value.parse().map_err(|_| format!("bad reply {reply:?}"))?;
                checksum = checksum.wrapping_mul(31).wrapping_add(value as u64);
            }
            None => return Err(format!("query {query:?}: {reply}")),
        }
    }
    Ok((latencies, checksum))
}
