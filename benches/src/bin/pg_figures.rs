//! Prints the figures of `redis-lease`'s PostgreSQL store beside PostgreSQL's own locks, all on
//! one throwaway PostgreSQL 15 that the binary starts (`testkit::PgServer`: `fsync` and
//! `synchronous_commit` on, the server's defaults), each figure's two sides in turn in one run:
//!
//! - `uncontended`: one thread, one lock reused: acquire + release pairs per second, against
//!   `pg_advisory_lock` + `pg_advisory_unlock` on one connection;
//! - `contended`: 8 threads of one client on one name, an empty critical section: sections per
//!   second, against the advisory lock taken by 8 threads with a connection each;
//! - `handoff`: the holder keeps the lock 10 ms and releases; a waiter in another process (this
//!   binary run again) takes it: p50 / p99 / max from the release to the waiter holding, against
//!   an advisory lock released and taken the same way;
//! - `names`: 64 threads on random names among 10,000: pairs per second, against the advisory
//!   floor with 64 connections; the store's client with its default pool (8 idle connections
//!   kept) and with 64;
//! - `sale`: the flash sale (`benches/src/pg_sale.rs`): 1,000 items bought by 4 processes of 8
//!   threads, the lock in the same PostgreSQL as the stock, against `SELECT ... FOR UPDATE`;
//!   purchases per second and `oversold`;
//! - `commits` and `crash`: what a commit costs with `synchronous_commit` on and off, and what
//!   a crash of the server does to holds and tokens (`benches/src/pg_durability.rs`,
//!   `benches/src/pg_crash.rs`).
//!
//! Per operation, what the server counted (`benches/src/pg_server.rs`): transactions committed,
//! WAL flushes, WAL bytes, and the time spent executing statements (`pg_stat_statements`) and in
//! the store's functions (`track_functions`).
//!
//! Run: `cargo run --release -p benches --bin pg_figures [quick] [SECTION...]`: 5 s per figure,
//! 500 hand-off rounds, or with `quick` 300 ms, 20 rounds and 60 items (the smoke run of
//! `scripts/test`); every section unless some are named.
#![allow(clippy::print_stdout)]

use benches::figures::{loadavg, quantile, Request};
use benches::pg_floors::{self, timed, Measured};
use benches::pg_sale::{self, Strategy};
use benches::pg_server::{self, connect, wait_alone, Counts};
use benches::{handoff, names};
use benches::{pg_crash, pg_durability};
use postgres_blocking::Connection;
use redis_lease::{Client, Lock};
use std::time::Duration;

const THREADS: usize = 8;
const MANY_THREADS: usize = 64;
/// How long a holder keeps the lock before a hand-off, so the waiter is surely waiting.
const HOLD: Duration = Duration::from_millis(10);
/// The store's schema (the default).
const SCHEMA: &str = "lease";

struct Scale {
    run: Duration,
    rounds: usize,
    stock: u64,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("child-waiter") => return child_waiter(&args[1]),
        Some("child-advisory-waiter") => return pg_floors::serve_advisory_waiter(&args[1]),
        Some("child-buyer") => {
            let threads = args[3].parse().expect("a thread count");
            return pg_sale::serve_buyer(&args[1], &args[2], threads);
        }
        _ => {}
    }
    let request = Request::from_args(&args);
    let scale = if request.quick {
        Scale {
            run: Duration::from_millis(300),
            rounds: 20,
            stock: 60,
        }
    } else {
        Scale {
            run: Duration::from_secs(5),
            rounds: 500,
            stock: 1000,
        }
    };
    println!(
        "# PostgreSQL store figures ({})",
        if request.quick { "quick" } else { "full" }
    );
    println!();
    println!("load at start (/proc/loadavg): {}", loadavg());
    let server = pg_server::start(&[]);
    let url = server.url();
    let mut stats = connect(&url);
    // The store's schema is made here, outside every figure.
    client(&url, 8).ping().expect("the store answers");
    println!(
        "server: PostgreSQL {}",
        pg_server::text(&mut stats, "SHOW server_version")
    );
    if request.wants("uncontended") {
        uncontended(&url, &mut stats, &scale);
    }
    if request.wants("where") {
        where_time_goes(&url, &mut stats, &scale);
    }
    if request.wants("contended") {
        contended(&url, &mut stats, &scale);
    }
    if request.wants("handoff") {
        handoffs(&url, &scale);
    }
    if request.wants("names") {
        many_names(&url, &mut stats, &scale);
    }
    if request.wants("sale") {
        sale(&url, &mut stats, &scale);
    }
    drop(stats);
    drop(server);
    if request.wants("commits") {
        commits(&scale);
    }
    if request.wants("crash") {
        crashes(&scale);
    }
    println!();
    println!("load at end (/proc/loadavg): {}", loadavg());
}

/// A client of the store with `pool` idle connections kept.
fn client(url: &str, pool: usize) -> Client {
    // Calls on a busy machine may stall for a moment (a WAL flush waits for the disk): a
    // figure measures them rather than failing.
    Client::postgres(url)
        .default_lease(Duration::from_secs(10))
        .command_timeout(Duration::from_secs(10))
        .connect_timeout(Duration::from_secs(10))
        .pool_size(pool)
        .build()
        .expect("valid settings")
}

/// Runs `work` between two readings of the server's counters, every connection of the work
/// closed before the second; returns what it measured and the counts per operation.
fn counted(stats: &mut Connection, work: impl FnOnce() -> Measured) -> (Measured, Counts) {
    wait_alone(stats);
    let before = Counts::now(stats, SCHEMA);
    let measured = work();
    wait_alone(stats);
    let after = Counts::now(stats, SCHEMA);
    (measured, after.per(before, measured.total as f64))
}

/// The header of a table of rates.
fn header(title: &str, unit: &str) {
    println!();
    println!("## {title}");
    println!(
        "| lock | {unit} | / floor | commits per op | WAL flushes per op | WAL bytes per op | \
         server µs per op (statements) | store calls per op | µs per store call |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
}

/// One row of a table of rates.
fn row(name: &str, measured: Measured, counts: Counts, floor: f64) {
    let per_call = if counts.store_calls > 0.0 {
        format!("{:.1}", counts.store_ms / counts.store_calls * 1e3)
    } else {
        "–".to_owned()
    };
    println!(
        "| {name} | {:.0} | {:.2} | {:.2} | {:.2} | {:.0} | {:.1} | {:.2} | {per_call} |",
        measured.per_s,
        measured.per_s / floor.max(f64::MIN_POSITIVE),
        counts.commits,
        counts.wal_syncs,
        counts.wal_bytes,
        counts.statement_ms * 1e3,
        counts.store_calls,
    );
}

fn uncontended(url: &str, stats: &mut Connection, scale: &Scale) {
    let floor = counted(stats, || pg_floors::one_key(url, 1, scale.run));
    let lease = counted(stats, || {
        let url = url.to_owned();
        timed(
            1,
            scale.run,
            move |_| {
                let client = client(&url, 8);
                let lock = client.lock("uncontended").expect("valid name");
                (client, lock)
            },
            |(_, lock), _| pair(lock),
        )
    });
    header(
        &format!(
            "uncontended lock + unlock, one thread, one lock reused ({:?})",
            scale.run
        ),
        "pairs/s",
    );
    row("**redis-lease**", lease.0, lease.1, floor.0.per_s);
    row(
        "floor: `pg_advisory_lock` + `pg_advisory_unlock`, one connection",
        floor.0,
        floor.1,
        floor.0.per_s,
    );
}

/// Uncontended pairs again, with every statement the server ran for them, the functions' own
/// included (`pg_stat_statements.track = all`), by time per pair.
fn where_time_goes(url: &str, stats: &mut Connection, scale: &Scale) {
    wait_alone(stats);
    pg_server::run(stats, "SELECT pg_stat_statements_reset()");
    let measured = {
        let url = url.to_owned();
        timed(
            1,
            scale.run,
            move |_| {
                let client = client(&url, 8);
                let lock = client.lock("where").expect("valid name");
                (client, lock)
            },
            |(_, lock), _| pair(lock),
        )
    };
    let rows = stats
        .query(
            "SELECT toplevel, calls::float8 AS calls, total_exec_time::float8 AS ms, \
             regexp_replace(left(query, 90), '\\s+', ' ', 'g') AS query FROM pg_stat_statements \
             WHERE query NOT LIKE '%pg_stat%' ORDER BY total_exec_time DESC LIMIT 16",
            &[],
            pg_server::soon(),
        )
        .expect("pg_stat_statements");
    println!();
    println!(
        "## where a pair's time goes in the server: {} uncontended pairs, each statement's \
         execution (`pg_stat_statements`, nested ones too)",
        measured.total
    );
    println!("| statement | top level | calls per pair | µs per pair |");
    println!("|---|---|---|---|");
    let pairs = measured.total.max(1) as f64;
    for row in &rows {
        let query: String = row.get("query").expect("query");
        println!(
            "| `{}` | {} | {:.2} | {:.1} |",
            query.replace('|', "\\|"),
            row.get::<bool>("toplevel").expect("toplevel"),
            row.get::<f64>("calls").expect("calls") / pairs,
            row.get::<f64>("ms").expect("ms") / pairs * 1e3,
        );
    }
}

fn pair(lock: &Lock) {
    lock.lock().expect("acquired").unlock().expect("released");
}

fn contended(url: &str, stats: &mut Connection, scale: &Scale) {
    let floor = counted(stats, || pg_floors::one_key(url, THREADS, scale.run));
    let lease = counted(stats, || {
        let client = client(url, 8);
        let measured = timed(
            THREADS,
            scale.run,
            |_| client.lock("contended").expect("valid name"),
            |lock, _| pair(lock),
        );
        drop(client);
        measured
    });
    header(
        &format!(
            "{THREADS} threads on one name, empty critical section ({:?}); the store's threads \
             share one client",
            scale.run
        ),
        "sections/s",
    );
    row("**redis-lease**", lease.0, lease.1, floor.0.per_s);
    row(
        &format!("floor: advisory lock, {THREADS} connections"),
        floor.0,
        floor.1,
        floor.0.per_s,
    );
}

fn handoffs(url: &str, scale: &Scale) {
    let floor = summary(pg_floors::handoff(url, scale.rounds, HOLD));
    let holder = client(url, 8);
    let lock = holder.lock("handoff").expect("valid name");
    let lease = summary(handoff::across_processes(&[url], &lock, scale.rounds, HOLD));
    drop(holder);
    println!();
    println!(
        "## hand-off across two processes: release to the waiting process holding ({} rounds, \
         holder keeps it {HOLD:?})",
        scale.rounds
    );
    println!("| lock | p50 ms | p99 ms | max ms | p50 / floor's |");
    println!("|---|---|---|---|---|");
    for (name, (p50, p99, max)) in [
        ("**redis-lease**", lease),
        ("floor: advisory lock released and taken", floor),
    ] {
        println!(
            "| {name} | {p50:.3} | {p99:.3} | {max:.3} | {:.2} |",
            p50 / floor.0
        );
    }
}

/// p50, p99 and max of `samples`.
fn summary(mut samples: Vec<f64>) -> (f64, f64, f64) {
    samples.sort_by(f64::total_cmp);
    (
        quantile(&samples, 0.5),
        quantile(&samples, 0.99),
        samples[samples.len() - 1],
    )
}

fn child_waiter(url: &str) {
    let client = client(url, 8);
    handoff::serve_waiter(&client.lock("handoff").expect("valid name"));
}

fn many_names(url: &str, stats: &mut Connection, scale: &Scale) {
    let floor = counted(stats, || {
        pg_floors::many_names(url, MANY_THREADS, names::NAMES, scale.run)
    });
    let mut rows = Vec::new();
    for pool in [8, MANY_THREADS] {
        let measured = counted(stats, || {
            let client = client(url, pool);
            let measured = timed(
                MANY_THREADS,
                scale.run,
                |_| client.clone(),
                |client, rng| {
                    let name = format!("name:{}", rng.below(names::NAMES));
                    pair(&client.lock(&name).expect("valid name"));
                },
            );
            drop(client);
            measured
        });
        rows.push((pool, measured));
    }
    header(
        &format!(
            "{MANY_THREADS} threads on random names among {}, one client ({:?})",
            names::NAMES,
            scale.run
        ),
        "pairs/s",
    );
    for (pool, (measured, counts)) in rows {
        let name = format!("**redis-lease**, pool of {pool}");
        row(&name, measured, counts, floor.0.per_s);
    }
    row(
        &format!("floor: advisory lock, {MANY_THREADS} connections"),
        floor.0,
        floor.1,
        floor.0.per_s,
    );
}

fn sale(url: &str, stats: &mut Connection, scale: &Scale) {
    let mut sales = Vec::new();
    for strategy in [Strategy::ForUpdate, Strategy::Lock] {
        let mut found = pg_sale::Sale::default();
        let (_, counts) = counted(stats, || {
            found = pg_sale::sale(url, strategy, scale.stock, 4, THREADS);
            Measured {
                per_s: found.purchases_per_s,
                total: found.sold,
            }
        });
        sales.push((strategy, found, counts));
    }
    let floor = sales[0].1.purchases_per_s;
    println!();
    println!(
        "## flash sale: {} items, 4 processes × {THREADS} threads, the stock and the lock in one \
         PostgreSQL",
        scale.stock
    );
    println!(
        "| buyers | purchases/s | / `FOR UPDATE` | p50 ms | p99 ms | oversold | fenced | \
         commits per purchase | WAL flushes per purchase | store calls per purchase |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (strategy, sale, counts) in &sales {
        let name = match strategy {
            Strategy::Lock => "**redis-lease lock + fenced write**",
            Strategy::ForUpdate => "`SELECT ... FOR UPDATE`",
        };
        println!(
            "| {name} | {:.0} | {:.2} | {:.2} | {:.2} | {} | {} | {:.2} | {:.2} | {:.2} |",
            sale.purchases_per_s,
            sale.purchases_per_s / floor.max(f64::MIN_POSITIVE),
            sale.p50,
            sale.p99,
            sale.oversold,
            sale.fenced,
            counts.commits,
            counts.wal_syncs,
            counts.store_calls,
        );
    }
    let oversold: i64 = sales.iter().map(|(_, sale, _)| sale.oversold).sum();
    println!();
    println!("oversold: {oversold}");
}

fn commits(scale: &Scale) {
    let run = scale.run.min(Duration::from_secs(3));
    let rows = pg_durability::commits(run);
    println!();
    println!("## what a commit costs, `synchronous_commit` on and off ({run:?} each)");
    println!(
        "| what | threads | per s | µs per op (one thread) | commits per op | WAL flushes per op \
         | ms flushing per op |"
    );
    println!("|---|---|---|---|---|---|---|");
    for row in rows {
        let each = if row.threads == 1 {
            format!("{:.0}", 1e6 / row.measured.per_s.max(f64::MIN_POSITIVE))
        } else {
            String::new()
        };
        println!(
            "| {} | {} | {:.0} | {each} | {:.2} | {:.2} | {:.3} |",
            row.what,
            row.threads,
            row.measured.per_s,
            row.counts.commits,
            row.counts.wal_syncs,
            row.counts.wal_sync_ms
        );
    }
}

fn crashes(scale: &Scale) {
    let before = (scale.run * 2 / 5).max(Duration::from_millis(300));
    let rounds = if scale.rounds > 100 { 3 } else { 1 };
    let trials = pg_crash::crash(before, rounds);
    println!();
    println!(
        "## a crash of the server under load: 4 threads of one client, 8 names each taken and \
         released in turn, a hold kept every 8th turn; the server crashed after {before:?} and \
         started again at once; {rounds} trials of each"
    );
    println!(
        "| functions commit | crash | acquisitions acknowledged (before the crash) | names whose \
         token went back | holds kept before the crash: rows after it | releases before the \
         crash: holds back after it | earliest lost acknowledgement, ms before the crash | crash \
         to answering, ms | failed calls | WAL written, not flushed: ms of it, mean / max |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for trial in trials {
        println!(
            "| {} | {:?} | {} ({}) | {} | {} of {} | {} of {} | {} | {:.0} | {} | {:.1} / {:.1} |",
            if trial.synchronous {
                "synchronously (as shipped)"
            } else {
                "asynchronously"
            },
            trial.how,
            trial.acked,
            trial.acked_before,
            trial.tokens_back,
            trial.kept_rows,
            trial.kept,
            trial.released_back,
            trial.released,
            trial
                .lost_window
                .map_or("none lost".to_owned(), |at| format!(
                    "{:.0}",
                    at.as_secs_f64() * 1e3
                )),
            trial.down.as_secs_f64() * 1e3,
            trial.failed_calls,
            trial.unflushed_ms.0,
            trial.unflushed_ms.1,
        );
    }
}
