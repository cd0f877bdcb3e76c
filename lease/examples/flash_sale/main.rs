//! A flash sale, end to end: several processes, each with several buyer threads, buy a small stock
//! kept in an SQLite file (or, with `--db postgres`, in PostgreSQL), until it is sold out; nothing
//! may be oversold.
//!
//! Four sales run one after the other, each on a fresh stock:
//!
//! 1. **redis-lease lock**: each purchase takes the lock on the item (one thread per process
//!    contends in the lock's store, the others queue in the process), raises the stock's fence
//!    to the hold's fencing token and reads what is left, then writes `left = seen - 1` and the
//!    order in one transaction whose `UPDATE ... WHERE item = ? AND left > 0 AND fence <=
//!    ?token` refuses a token lower than one that already wrote;
//! 2. **optimistic** (database only): `UPDATE ... SET left = left - 1, version = version + 1
//!    WHERE item = ? AND version = ?old`, read again and retried when another buyer got there first;
//! 3. **pessimistic** (database only): `BEGIN IMMEDIATE`, SQLite's way of taking the write lock
//!    before reading, as `SELECT ... FOR UPDATE` does in MySQL (and does here on PostgreSQL);
//!    then read, decrement, commit;
//! 4. **frozen holder**: the lock sale again, but one worker is stopped (SIGSTOP) while holding
//!    the lock, after checking its hold and before writing (it waits for the coordinator, which
//!    stops it); the coordinator resumes it (SIGCONT) once at least 2.5 leases have passed and a
//!    newer holder has written. Its late write is
//!    refused by the fencing check.
//!
//! With the stock in PostgreSQL, two more (`held` and `held-frozen`, with the crate's `postgres`
//! feature): the lock lives in the stock's own database, and each purchase is one write made
//! only while the buyer's hold holds the lock (`LeaseGuard::if_held`: the lock's check and the
//! stock's `UPDATE ... WHERE left > 0` with the order's `INSERT`, in one transaction), without a
//! fence; the frozen holder's late write is refused by that check.
//!
//! It prints each sale's figures side by side and ends with `oversold: N`, the items sold beyond
//! the stock over all sales (exit status 1 if not 0). The lock is on Redis at `REDIS_URL` if set,
//! else on a throwaway redis-server on a free port; with `--lock postgres`, in the PostgreSQL
//! database that holds the stock (its schema `lease`), so that the sale needs no Redis at all.
//!
//! `cargo run --release -p redis-lease --example flash_sale -- [--stock 100] [--procs 4]
//! [--threads 8] [--lease-ms 400] [--only lock,optimistic,pessimistic,frozen,held,held-frozen]
//! [--unfenced] [--db sqlite|postgres|postgres://URL] [--lock redis|postgres]`
//!
//! `--unfenced` drops the fencing check from the lock sales, to show what it prevents. `--db
//! postgres` starts a throwaway PostgreSQL server (Debian's `postgresql` package); a
//! `postgres://` URL names an existing database, whose `stock` and `orders` tables are dropped
//! and made afresh. `--lock postgres` needs one of them, and the crate's `postgres` feature
//! (`cargo run --release -p redis-lease --features postgres --example flash_sale -- --db
//! postgres --lock postgres`).
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod held;
mod lock_store;
mod sale;
mod store;
mod worker;

use lock_store::LockStore;
use sale::{Plan, Report};
use std::process::ExitCode;
use std::time::Duration;
use store::{Database, Result};

/// How a buyer keeps two buyers from selling the same item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// A redis-lease lock on the item, and a fenced write.
    Lock,
    /// The database alone: a version column, compare and retry.
    Optimistic,
    /// The database alone: the write lock taken before the read.
    Pessimistic,
    /// A redis-lease lock in the stock's own PostgreSQL, and each purchase a write made only
    /// while the hold holds.
    Held,
}

impl Strategy {
    fn name(self) -> &'static str {
        match self {
            Strategy::Lock => "lock",
            Strategy::Optimistic => "optimistic",
            Strategy::Pessimistic => "pessimistic",
            Strategy::Held => "held",
        }
    }

    fn parse(name: &str) -> Result<Strategy> {
        match name {
            "lock" => Ok(Strategy::Lock),
            "optimistic" => Ok(Strategy::Optimistic),
            "pessimistic" => Ok(Strategy::Pessimistic),
            "held" => Ok(Strategy::Held),
            _ => Err(format!("unknown strategy {name:?}").into()),
        }
    }
}

/// Whether this build has the sales whose lock lives in the stock's PostgreSQL.
const HELD: bool = cfg!(feature = "postgres");

/// The command line, as `--name value` pairs and `--flag`s.
struct Args {
    values: Vec<(String, Option<String>)>,
}

impl Args {
    fn parse(args: impl Iterator<Item = String>, flags: &[&str]) -> Result<Args> {
        let mut values = Vec::new();
        let mut args = args.peekable();
        while let Some(arg) = args.next() {
            let name = arg
                .strip_prefix("--")
                .ok_or_else(|| format!("unexpected argument {arg:?}"))?
                .to_owned();
            if flags.contains(&name.as_str()) {
                values.push((name, None));
            } else {
                let value = args
                    .next()
                    .ok_or_else(|| format!("--{name} needs a value"))?;
                values.push((name, Some(value)));
            }
        }
        Ok(Args { values })
    }

    fn flag(&self, name: &str) -> bool {
        self.values.iter().any(|(n, _)| n == name)
    }

    fn text(&self, name: &str) -> Option<&str> {
        self.values
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.as_deref())
    }

    fn number<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T> {
        match self.text(name) {
            None => Ok(default),
            Some(value) => value
                .parse()
                .map_err(|_| format!("--{name}: not a number: {value:?}").into()),
        }
    }
}

/// Runs the sales, or, as `flash_sale worker ...`, one worker process of a sale.
pub fn main() -> ExitCode {
    let mut args = std::env::args().skip(1).peekable();
    let outcome = if args.peek().map(String::as_str) == Some("worker") {
        args.next();
        Args::parse(args, &["freeze", "unfenced"]).and_then(run_worker)
    } else {
        Args::parse(args, &["unfenced"]).and_then(run_sales)
    };
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("flash_sale: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_worker(args: Args) -> Result<ExitCode> {
    worker::run(worker::WorkerArgs {
        strategy: Strategy::parse(args.text("strategy").ok_or("--strategy is needed")?)?,
        db: Database::parse(args.text("db").ok_or("--db is needed")?)?,
        lock_at: args.text("lock-at").map(str::to_owned),
        threads: args.number("threads", 1)?,
        lease: Duration::from_millis(args.number("lease-ms", 400)?),
        id: args.number("id", 0)?,
        freeze: args.flag("freeze"),
        fenced: !args.flag("unfenced"),
    })?;
    Ok(ExitCode::SUCCESS)
}

fn run_sales(args: Args) -> Result<ExitCode> {
    let on_postgres = args.text("db").is_some_and(|db| db != "sqlite");
    let only = args.text("only").unwrap_or(if on_postgres && HELD {
        "lock,optimistic,pessimistic,frozen,held,held-frozen"
    } else {
        "lock,optimistic,pessimistic,frozen"
    });
    let sales: Vec<&str> = only.split(',').collect();
    for sale in &sales {
        if ![
            "lock",
            "optimistic",
            "pessimistic",
            "frozen",
            "held",
            "held-frozen",
        ]
        .contains(sale)
        {
            return Err(format!("--only: unknown sale {sale:?}").into());
        }
        if sale.starts_with("held") && !(on_postgres && HELD) {
            return Err(format!(
                "--only {sale}: the lock lives in the stock's PostgreSQL (--db postgres), with \
                 the crate's postgres feature"
            )
            .into());
        }
    }
    let lock_store = LockStore::parse(args.text("lock").unwrap_or("redis"))?;
    let dir = tempfile::tempdir().map_err(|e| format!("cannot make a temporary dir: {e}"))?;
    // Kept alive (and stopped on drop) until the sales are over, as the Redis server below.
    let mut pg_server = None;
    let postgres = match args.text("db").unwrap_or("sqlite") {
        "sqlite" => None,
        "postgres" => {
            // Like the SQLite file's `synchronous = NORMAL`: a commit does not wait for its WAL
            // to reach the disk.
            let started = testkit::PgServer::start_with(testkit::PgOptions {
                tls: None,
                settings: vec![("synchronous_commit".into(), "off".into())],
            });
            let url = started.url();
            pg_server = Some(started);
            Some(url)
        }
        url if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            Some(url.to_owned())
        }
        other => {
            return Err(
                format!("--db: sqlite, postgres or a postgres:// URL, not {other:?}").into(),
            )
        }
    };
    let needs_lock = sales.iter().any(|s| *s == "lock" || *s == "frozen");
    // Kept alive (and killed on drop) until the sales are over.
    let mut server = None;
    let lock_at = match (lock_store, needs_lock) {
        (_, false) => None,
        (LockStore::Postgres, true) => Some(postgres.clone().ok_or(
            "--lock postgres takes the lock in the stock's database: it needs --db postgres or \
             a postgres:// URL",
        )?),
        (LockStore::Redis, true) => match std::env::var("REDIS_URL") {
            Ok(url) => Some(url),
            Err(_) => {
                let started = testkit::RedisServer::start();
                let url = started.url();
                server = Some(started);
                Some(url)
            }
        },
    };
    let plan = Plan {
        postgres,
        exe: std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?,
        dir: dir.path().to_owned(),
        lock_at,
        stock: args.number("stock", 100)?,
        procs: args.number("procs", 4)?,
        threads: args.number("threads", 8)?,
        lease: Duration::from_millis(args.number("lease-ms", 400)?),
        fenced: !args.flag("unfenced"),
    };
    if plan.procs < 2 || plan.threads < 1 || plan.stock < 1 {
        return Err("needs --procs 2 or more, --threads 1 or more, --stock 1 or more".into());
    }
    println!(
        "flash sale: {} items, {} processes x {} threads, stock in {}, lease {} ms, lock {}, \
         fencing check {}",
        plan.stock,
        plan.procs,
        plan.threads,
        match (&plan.postgres, &pg_server) {
            (None, _) => "SQLite (WAL)".to_owned(),
            (Some(_), Some(_)) => "a throwaway PostgreSQL (synchronous_commit off)".to_owned(),
            (Some(url), None) => format!("PostgreSQL at {url}"),
        },
        plan.lease.as_millis(),
        match (&plan.lock_at, lock_store) {
            (None, _) => "(not needed)".to_owned(),
            (Some(_), LockStore::Postgres) => "in the stock's PostgreSQL".to_owned(),
            (Some(url), LockStore::Redis) => format!("on Redis at {url}"),
        },
        if plan.fenced { "on" } else { "OFF" },
    );

    let mut reports = Vec::new();
    for sale in sales {
        let (strategy, freeze, label) = match sale {
            "lock" => (Strategy::Lock, false, "redis-lease lock"),
            "optimistic" => (Strategy::Optimistic, false, "optimistic"),
            "pessimistic" => (Strategy::Pessimistic, false, "pessimistic"),
            "held" => (Strategy::Held, false, "write while held"),
            "held-frozen" => (Strategy::Held, true, "held, frozen"),
            _ => (Strategy::Lock, true, "frozen holder"),
        };
        println!();
        println!("== {label}");
        let report = sale::run(&plan, strategy, freeze, label)?;
        print_report(&report);
        reports.push(report);
    }
    drop(server.take());
    drop(pg_server.take());

    println!();
    println!(
        "{:<17} {:>5} {:>9} {:>8} {:>7} {:>8} {:>12} {:>8} {:>8}",
        "sale", "sold", "sold out", "fenced", "lost", "retries", "purchases/s", "p50 ms", "p99 ms"
    );
    for r in &reports {
        println!(
            "{:<17} {:>5} {:>9} {:>8} {:>7} {:>8} {:>12.0} {:>8.2} {:>8.2}",
            r.label,
            r.audit.orders,
            r.sold_out,
            r.fenced,
            r.lost,
            r.retries,
            r.throughput(),
            r.latency_ms(0.50),
            r.latency_ms(0.99)
        );
    }
    let oversold: i64 = reports.iter().map(|r| r.audit.oversold()).sum();
    println!("oversold: {oversold}");
    Ok(if oversold == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn print_report(r: &Report) {
    let a = &r.audit;
    println!(
        "  sold {} (orders {}, stock left {} of {}), refused: {} sold out, {} by fencing, \
         {} holds lost before the write, {} optimistic retries",
        r.sold, a.orders, a.left, a.initial, r.sold_out, r.fenced, r.lost, r.retries
    );
    println!(
        "  {} attempts in {:.2} s: {:.0} purchases/s, latency per attempt p50 {:.2} ms, \
         p99 {:.2} ms",
        r.latencies_us.len(),
        r.elapsed.as_secs_f64(),
        r.throughput(),
        r.latency_ms(0.50),
        r.latency_ms(0.99)
    );
    println!("  oversold: {}", a.oversold());
}
