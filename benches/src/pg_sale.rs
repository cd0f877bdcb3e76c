//! The flash sale on one PostgreSQL, after `lease/examples/flash_sale/`: a stock of items bought
//! by several processes of several threads until it is sold out, with the lock in the same
//! PostgreSQL as the stock, beside the database's own `SELECT ... FOR UPDATE`. The statements and
//! their round trips are the example's: under the lock, one transaction raises the stock's fence
//! to the hold's token and reads what is left, and a second writes `left = seen - 1` and the order
//! with the token checked in its `UPDATE`; the pessimistic buyer locks the row, decrements and
//! writes the order in one transaction. The stock's connections commit without waiting for the
//! WAL's flush (`synchronous_commit = off`, the example's server setting); the lock's calls keep
//! the store's own (on).

use crate::child::{self, ChildProcess};
use crate::pg_server::{connect, run, soon};
use postgres_blocking::Connection;
use redis_lease::Client;
use std::io::{BufRead, Write};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// The item on sale, and the lock's name.
const ITEM: &str = "sale:item";

/// How a buyer keeps two buyers from selling the same item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// The store's lock in the same PostgreSQL, and the fenced write.
    Lock,
    /// `SELECT ... FOR UPDATE`.
    ForUpdate,
}

impl Strategy {
    fn word(self) -> &'static str {
        match self {
            Strategy::Lock => "lock",
            Strategy::ForUpdate => "for-update",
        }
    }
}

/// One sale's figures.
#[derive(Clone, Debug, Default)]
pub struct Sale {
    pub purchases_per_s: f64,
    pub sold: u64,
    /// Items sold beyond the stock (orders past it, or stock below zero).
    pub oversold: i64,
    /// Fenced writes refused.
    pub fenced: u64,
    /// Latency of a purchase, ms.
    pub p50: f64,
    pub p99: f64,
    /// Every attempt made, the last (sold out) ones included, for the server's counters.
    pub attempts: u64,
}

/// Makes the stock afresh with `stock` items.
fn create(conn: &mut Connection, stock: u64) {
    run(
        conn,
        "DROP TABLE IF EXISTS sale_stock; DROP TABLE IF EXISTS sale_orders; \
         CREATE TABLE sale_stock (item text PRIMARY KEY, \"left\" bigint NOT NULL, \
         fence bigint NOT NULL DEFAULT 0); \
         CREATE TABLE sale_orders (id bigserial PRIMARY KEY, item text NOT NULL, \
         buyer text NOT NULL, token bigint)",
    );
    conn.execute(
        "INSERT INTO sale_stock (item, \"left\") VALUES ($1, $2::bigint)",
        &[Some(ITEM), Some(&stock.to_string())],
        soon(),
    )
    .expect("stock");
}

/// Runs one sale of `stock` items: `procs` processes (this binary run again as `child-buyer`)
/// of `threads` threads each.
pub fn sale(url: &str, strategy: Strategy, stock: u64, procs: usize, threads: usize) -> Sale {
    let mut conn = connect(url);
    create(&mut conn, stock);
    let threads_arg = threads.to_string();
    let mut buyers: Vec<ChildProcess> = (0..procs)
        .map(|_| ChildProcess::start("child-buyer", &[strategy.word(), url, &threads_arg]))
        .collect();
    let began = Instant::now();
    for buyer in &mut buyers {
        buyer.say("go");
    }
    let mut latencies: Vec<f64> = Vec::new();
    let (mut fenced, mut attempts) = (0, 0);
    for buyer in &mut buyers {
        // "attempts fenced latency-µs..."
        let line = buyer.line();
        let mut fields = line
            .split_whitespace()
            .map(|f| f.parse::<u64>().expect("a number"));
        attempts += fields.next().unwrap_or(0);
        fenced += fields.next().unwrap_or(0);
        latencies.extend(fields.map(|us| us as f64 / 1e3));
    }
    let elapsed = began.elapsed().as_secs_f64();
    for buyer in buyers {
        buyer.finish();
    }
    let row = conn
        .query_one(
            "SELECT \"left\", (SELECT count(*) FROM sale_orders) AS orders FROM sale_stock \
             WHERE item = $1",
            &[Some(ITEM)],
            soon(),
        )
        .expect("audit");
    let left: i64 = row.get("left").expect("left");
    let orders: i64 = row.get("orders").expect("orders");
    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| latencies.get(((latencies.len().max(1) - 1) as f64 * q) as usize);
    Sale {
        purchases_per_s: orders as f64 / elapsed,
        sold: orders as u64,
        oversold: (orders - stock as i64).max(-left).max(0),
        fenced,
        p50: at(0.5).copied().unwrap_or(0.0),
        p99: at(0.99).copied().unwrap_or(0.0),
        attempts,
    }
}

/// What one purchase came to.
enum Bought {
    Yes,
    SoldOut,
    Fenced,
}

/// The child's side: `threads` buyers with a stock connection each (and, under the lock, one
/// client of the store shared by them) buy from "go" until sold out, then it prints its
/// attempts, its fenced writes and each purchase's latency in µs.
pub fn serve_buyer(strategy: &str, url: &str, threads: usize) {
    let strategy = if strategy == "lock" {
        Strategy::Lock
    } else {
        Strategy::ForUpdate
    };
    let client = Arc::new(
        Client::postgres(url)
            .command_timeout(Duration::from_secs(10))
            .connect_timeout(Duration::from_secs(10))
            .build()
            .expect("valid settings"),
    );
    let conns: Vec<Connection> = (0..threads)
        .map(|_| {
            let mut conn = connect(url);
            run(&mut conn, "SET synchronous_commit = off");
            conn
        })
        .collect();
    child::ready();
    let mut lines = std::io::stdin().lock().lines();
    assert_eq!(lines.next().and_then(Result::ok).as_deref(), Some("go"));
    let buyers: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(n, mut conn)| {
            let client = Arc::clone(&client);
            thread::spawn(move || {
                let lock = client.lock(ITEM).expect("valid name");
                let buyer = format!("buyer-{}-{n}", std::process::id());
                let (mut latencies, mut attempts, mut fenced) = (Vec::new(), 0u64, 0u64);
                loop {
                    let began = Instant::now();
                    attempts += 1;
                    let bought = match strategy {
                        Strategy::Lock => {
                            let guard = lock.lock().expect("acquired");
                            let token = guard.fencing_token().expect("a token").to_string();
                            let bought = buy_fenced(&mut conn, &buyer, &token);
                            guard.unlock().expect("released");
                            bought
                        }
                        Strategy::ForUpdate => buy_for_update(&mut conn, &buyer),
                    };
                    match bought {
                        Bought::Yes => latencies.push(began.elapsed().as_micros() as u64),
                        Bought::Fenced => fenced += 1,
                        Bought::SoldOut => break,
                    }
                }
                (latencies, attempts, fenced)
            })
        })
        .collect();
    let (mut latencies, mut attempts, mut fenced) = (Vec::new(), 0, 0);
    for buyer in buyers {
        let (more, tried, refused) = buyer.join().expect("no panic");
        latencies.extend(more);
        attempts += tried;
        fenced += refused;
    }
    let mut line = format!("{attempts} {fenced}");
    for us in latencies {
        line += &format!(" {us}");
    }
    let mut out = std::io::stdout();
    writeln!(out, "{line}").expect("parent alive");
    out.flush().expect("parent alive");
}

/// Runs `sql` with `params` and returns the rows it affected.
fn exec(conn: &mut Connection, sql: &str, params: &[Option<&str>]) -> u64 {
    conn.execute(sql, params, soon())
        .unwrap_or_else(|error| panic!("{sql}: {error}"))
}

/// The example's purchase under the lock: the fence raised to `token` and the stock read in one
/// transaction, then the fenced write and the order in another.
fn buy_fenced(conn: &mut Connection, buyer: &str, token: &str) -> Bought {
    run(conn, "BEGIN");
    let claimed = exec(
        conn,
        "UPDATE sale_stock SET fence = $1::bigint WHERE item = $2 AND fence <= $1::bigint",
        &[Some(token), Some(ITEM)],
    );
    if claimed == 0 {
        run(conn, "COMMIT");
        return Bought::Fenced;
    }
    let left: i64 = conn
        .query_one(
            "SELECT \"left\" FROM sale_stock WHERE item = $1",
            &[Some(ITEM)],
            soon(),
        )
        .and_then(|row| row.get(0))
        .expect("stock read");
    run(conn, "COMMIT");
    if left <= 0 {
        return Bought::SoldOut;
    }
    let seen = left.to_string();
    run(conn, "BEGIN");
    let updated = exec(
        conn,
        "UPDATE sale_stock SET \"left\" = $1::bigint - 1, fence = $2::bigint \
         WHERE item = $3 AND \"left\" > 0 AND fence <= $2::bigint",
        &[Some(&seen), Some(token), Some(ITEM)],
    );
    let bought = if updated == 1 {
        exec(
            conn,
            "INSERT INTO sale_orders (item, buyer, token) VALUES ($1, $2, $3::bigint)",
            &[Some(ITEM), Some(buyer), Some(token)],
        );
        Bought::Yes
    } else {
        Bought::Fenced
    };
    run(conn, "COMMIT");
    bought
}

/// The example's pessimistic purchase: `SELECT ... FOR UPDATE`, the decrement and the order in
/// one transaction.
fn buy_for_update(conn: &mut Connection, buyer: &str) -> Bought {
    run(conn, "BEGIN");
    let left: i64 = conn
        .query_one(
            "SELECT \"left\" FROM sale_stock WHERE item = $1 FOR UPDATE",
            &[Some(ITEM)],
            soon(),
        )
        .and_then(|row| row.get(0))
        .expect("stock read");
    if left <= 0 {
        run(conn, "COMMIT");
        return Bought::SoldOut;
    }
    exec(
        conn,
        "UPDATE sale_stock SET \"left\" = \"left\" - 1 WHERE item = $1",
        &[Some(ITEM)],
    );
    exec(
        conn,
        "INSERT INTO sale_orders (item, buyer) VALUES ($1, $2)",
        &[Some(ITEM), Some(buyer)],
    );
    run(conn, "COMMIT");
    Bought::Yes
}
