//! The semaphore, the read-write lock and the fair lock beside the lock, in one run against a
//! redis-server the binary starts:
//!
//! - uncontended acquire + release pairs per second from one thread: a lock, a semaphore's
//!   permit, a read lock, a write lock, a fair lock (and the ratio of each pair's cost to the
//!   lock's);
//! - 8 threads of one client: on one lock, on a semaphore of 4 permits, and as 8 readers of one
//!   read-write lock (pairs per second);
//! - hand-off across processes: a holder releases, a waiter in another process (its own client,
//!   woken by pub/sub) holds; for the lock and the fair lock.
//!
//! Each figure is measured `ROUNDS` times, the kinds in turn within each round, and the median is
//! printed, with the ratio to the lock's taken within each round.
//!
//! Run: `cargo run --release -p benches --bin primitive_figures [quick]`.
#![allow(clippy::print_stdout)]

use benches::figures::{median, quantile, Request};
use benches::handoff;
use redis_lease::{Client, Lock};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};
use testkit::RedisServer;

const THREADS: usize = 8;

struct Scale {
    rounds: usize,
    pairs: usize,
    contention: Duration,
    handoffs: usize,
}

/// The primitives measured, each as the `Lock` its acquisitions go through.
fn kinds(client: &Client, name: &str) -> Vec<(&'static str, Lock)> {
    let rw = client
        .read_write_lock(&format!("{name}:rw"))
        .expect("valid");
    vec![
        ("lock", client.lock(&format!("{name}:lock")).expect("valid")),
        (
            "semaphore (1 of 4 permits)",
            client
                .semaphore(&format!("{name}:semaphore"), 4)
                .and_then(|s| s.taking(1))
                .expect("valid"),
        ),
        ("read lock", rw.read_lock().clone()),
        (
            "write lock",
            client
                .read_write_lock(&format!("{name}:rw-w"))
                .expect("valid")
                .write_lock()
                .clone(),
        ),
        (
            "fair lock",
            client.fair_lock(&format!("{name}:fair")).expect("valid"),
        ),
    ]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("child-waiter") {
        child_waiter(&args[1], &args[2]);
        return;
    }
    let quick = Request::from_args(&args).quick;
    let scale = if quick {
        Scale {
            rounds: 1,
            pairs: 50,
            contention: Duration::from_millis(200),
            handoffs: 10,
        }
    } else {
        Scale {
            rounds: 15,
            pairs: 600,
            contention: Duration::from_secs(2),
            handoffs: 200,
        }
    };
    let server = RedisServer::start();
    let url = server.url();
    let client = Client::open(&url).expect("valid settings");
    uncontended(&client, &scale);
    server_time(&client, &server, &scale);
    contended(&client, &scale);
    handoffs(&url, &scale);
}

/// Pairs per second of `lock` from one thread, over `pairs` pairs.
fn pairs_per_second(lock: &Lock, pairs: usize) -> f64 {
    let began = Instant::now();
    for _ in 0..pairs {
        lock.lock().expect("free").unlock().expect("held");
    }
    pairs as f64 / began.elapsed().as_secs_f64()
}

fn uncontended(client: &Client, scale: &Scale) {
    let kinds = kinds(client, "pairs");
    for (_, lock) in &kinds {
        pairs_per_second(lock, scale.pairs / 10 + 1);
    }
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); kinds.len()];
    for _ in 0..scale.rounds {
        for (i, (_, lock)) in kinds.iter().enumerate() {
            rates[i].push(pairs_per_second(lock, scale.pairs));
        }
    }
    println!("## One thread, uncontended: acquire + release pairs");
    println!();
    println!(
        "| primitive | pairs/s (median of {}) | cost per pair / the lock's (median) |",
        scale.rounds
    );
    println!("|---|---|---|");
    for (i, (name, _)) in kinds.iter().enumerate() {
        let ratios: Vec<f64> = (0..scale.rounds)
            .map(|round| rates[0][round] / rates[i][round])
            .collect();
        println!(
            "| {name} | {:.0} | {:.2}x |",
            median(rates[i].clone()),
            median(ratios)
        );
    }
    println!();
}

/// The server's time per uncontended pair of each primitive: `EVALSHA` microseconds from
/// `INFO commandstats` over `pairs` pairs (acquisition and release scripts), which the machine's
/// other load disturbs less than the wall clock.
fn server_time(client: &Client, server: &RedisServer, scale: &Scale) {
    let kinds = kinds(client, "server");
    let mut con = server.connection();
    let mut micros: Vec<Vec<f64>> = vec![Vec::new(); kinds.len()];
    for _ in 0..scale.rounds.min(5) {
        for (i, (_, lock)) in kinds.iter().enumerate() {
            let () = redis::cmd("CONFIG")
                .arg("RESETSTAT")
                .query(&mut con)
                .expect("CONFIG RESETSTAT");
            for _ in 0..scale.pairs {
                lock.lock().expect("free").unlock().expect("held");
            }
            let info: String = redis::cmd("INFO")
                .arg("commandstats")
                .query(&mut con)
                .expect("INFO");
            let usec = info
                .lines()
                .find_map(|line| line.strip_prefix("cmdstat_evalsha:"))
                .and_then(|fields| {
                    fields
                        .split(',')
                        .find_map(|field| field.strip_prefix("usec="))
                })
                .and_then(|usec| usec.parse::<f64>().ok())
                .unwrap_or(0.0);
            micros[i].push(usec / scale.pairs as f64);
        }
    }
    println!("## The server's time per uncontended pair (EVALSHA, INFO commandstats)");
    println!();
    println!("| primitive | µs per pair (median) | / the lock's |");
    println!("|---|---|---|");
    let lock = median(micros[0].clone());
    for (i, (name, _)) in kinds.iter().enumerate() {
        let own = median(micros[i].clone());
        println!("| {name} | {own:.1} | {:.2}x |", own / lock);
    }
    println!();
}

/// Pairs per second of `THREADS` threads, each taking `lock` again and again for `run`.
fn threads_pairs(lock: &Lock, run: Duration) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let start = Arc::new(Barrier::new(THREADS + 1));
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let (lock, stop, done, start) =
                (lock.clone(), stop.clone(), done.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    let guard = lock.lock().expect("acquired");
                    done.fetch_add(1, Ordering::Relaxed);
                    guard.unlock().expect("held");
                }
            })
        })
        .collect();
    start.wait();
    let began = Instant::now();
    thread::sleep(run);
    let counted = done.load(Ordering::Relaxed);
    let elapsed = began.elapsed();
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().expect("no panic");
    }
    counted as f64 / elapsed.as_secs_f64()
}

fn contended(client: &Client, scale: &Scale) {
    let rw = client.read_write_lock("threads:rw").expect("valid");
    let kinds = [
        ("lock", client.lock("threads:lock").expect("valid")),
        (
            "semaphore of 4 permits",
            client
                .semaphore("threads:semaphore", 4)
                .and_then(|s| s.taking(1))
                .expect("valid"),
        ),
        ("read lock (8 readers)", rw.read_lock().clone()),
    ];
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); kinds.len()];
    for _ in 0..scale.rounds {
        for (i, (_, lock)) in kinds.iter().enumerate() {
            rates[i].push(threads_pairs(lock, scale.contention));
        }
    }
    println!("## {THREADS} threads of one client on one name");
    println!();
    println!(
        "| primitive | pairs/s (median of {}) | / the lock's (median) |",
        scale.rounds
    );
    println!("|---|---|---|");
    for (i, (name, _)) in kinds.iter().enumerate() {
        let ratios: Vec<f64> = (0..scale.rounds)
            .map(|round| rates[i][round] / rates[0][round])
            .collect();
        println!(
            "| {name} | {:.0} | {:.2}x |",
            median(rates[i].clone()),
            median(ratios)
        );
    }
    println!();
}

/// Hand-off samples (ms) of `kind` ("lock" or "fair") to a waiter in another process.
fn handoff(url: &str, kind: &str, handoffs: usize) -> Vec<f64> {
    let holder = Client::open(url).expect("valid settings");
    let lock = handoff_lock(&holder, kind);
    handoff::across_processes(&[url, kind], &lock, handoffs, Duration::from_millis(5))
}

fn handoff_lock(client: &Client, kind: &str) -> Lock {
    match kind {
        "fair" => client.fair_lock("handoff:fair").expect("valid"),
        _ => client.lock("handoff:lock").expect("valid"),
    }
}

fn handoffs(url: &str, scale: &Scale) {
    let mut lock_p50 = Vec::new();
    let mut fair_p50 = Vec::new();
    let mut ratios = Vec::new();
    let (mut lock_all, mut fair_all) = (Vec::new(), Vec::new());
    for _ in 0..scale.rounds {
        let mut lock = handoff(url, "lock", scale.handoffs);
        let mut fair = handoff(url, "fair", scale.handoffs);
        lock.sort_by(f64::total_cmp);
        fair.sort_by(f64::total_cmp);
        let (l, f) = (quantile(&lock, 0.5), quantile(&fair, 0.5));
        lock_p50.push(l);
        fair_p50.push(f);
        ratios.push(f / l);
        lock_all.extend(lock);
        fair_all.extend(fair);
    }
    lock_all.sort_by(f64::total_cmp);
    fair_all.sort_by(f64::total_cmp);
    println!("## Hand-off across processes (a release, to the waiter in another process holding)");
    println!();
    println!(
        "| primitive | p50 ms (median of {}) | p99 ms (all rounds) | p50 / the lock's (median) |",
        scale.rounds
    );
    println!("|---|---|---|---|");
    println!(
        "| lock | {:.3} | {:.3} | 1.00x |",
        median(lock_p50),
        quantile(&lock_all, 0.99)
    );
    println!(
        "| fair lock | {:.3} | {:.3} | {:.2}x |",
        median(fair_p50),
        quantile(&fair_all, 0.99),
        median(ratios)
    );
}

/// The child side: the waiter of [`handoff`].
fn child_waiter(url: &str, kind: &str) {
    let client = Client::open(url).expect("valid settings");
    handoff::serve_waiter(&handoff_lock(&client, kind));
}
