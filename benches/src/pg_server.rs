//! The PostgreSQL server the figures run on, and what it counts: a throwaway server
//! (`testkit::PgServer`) with `pg_stat_statements` loaded and PL/pgSQL functions timed, direct
//! connections to it, and the server's counters over a stretch of work (commits, WAL records,
//! bytes and flushes, time in statements and in the store's functions).
//!
//! PostgreSQL 15 keeps a backend's counts of commits, WAL and function calls in the backend
//! until it reports them (at most once a second, or when it exits); so counters are read once
//! every connection of a figure has closed, and divided by every pair made on them, warm-up
//! included. `pg_stat_statements` counts at once.

use postgres_blocking::{Config, Connection};
use std::thread;
use std::time::{Duration, Instant};
use testkit::{PgOptions, PgServer};

/// How long one direct call may take.
const CALL: Duration = Duration::from_secs(30);

/// A deadline for one direct call.
pub fn soon() -> Instant {
    Instant::now() + CALL
}

/// A server for the figures: default durability (`synchronous_commit` on, `fsync` on), with
/// `extra` settings on top.
pub fn start(extra: &[(&str, &str)]) -> PgServer {
    let mut settings: Vec<(String, String)> = [
        ("shared_preload_libraries", "pg_stat_statements"),
        ("pg_stat_statements.track", "all"),
        ("track_functions", "pl"),
        ("track_wal_io_timing", "on"),
        ("max_connections", "300"),
    ]
    .iter()
    .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
    .collect();
    settings.extend(
        extra
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned())),
    );
    let server = PgServer::start_with(PgOptions {
        tls: None,
        settings,
    });
    server
        .psql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .expect("pg_stat_statements");
    server
}

/// A connection of its own to `url`.
pub fn connect(url: &str) -> Connection {
    let config = Config::from_url(url).expect("a valid URL");
    Connection::connect(&config, soon()).expect("connected")
}

/// Runs `sql` (no parameters, no rows wanted) on `conn`.
pub fn run(conn: &mut Connection, sql: &str) {
    conn.batch_execute(sql, soon())
        .unwrap_or_else(|error| panic!("{sql}: {error}"));
}

/// One number `sql` returns (its first column of its one row), as f64.
pub fn number(conn: &mut Connection, sql: &str) -> f64 {
    let row = conn
        .query_one(sql, &[], soon())
        .unwrap_or_else(|error| panic!("{sql}: {error}"));
    row.get::<Option<f64>>(0)
        .unwrap_or_else(|error| panic!("{sql}: {error}"))
        .unwrap_or(0.0)
}

/// The text `sql` returns (its first column of its one row).
pub fn text(conn: &mut Connection, sql: &str) -> String {
    conn.query_one(sql, &[], soon())
        .and_then(|row| row.get::<String>(0))
        .unwrap_or_else(|error| panic!("{sql}: {error}"))
}

/// Waits (up to 10 s) until no connection but `conn`'s own is open to the database: the
/// figure's clients are gone, and with them their unreported counts.
pub fn wait_alone(conn: &mut Connection) {
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        let others = number(
            conn,
            "SELECT count(*)::float8 FROM pg_stat_activity WHERE backend_type = 'client backend' \
             AND pid <> pg_backend_pid()",
        );
        if others == 0.0 {
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// What the server counted, all its clients together.
#[derive(Clone, Copy, Default, Debug)]
pub struct Counts {
    /// Transactions committed in the database.
    pub commits: f64,
    /// WAL records written.
    pub wal_records: f64,
    /// WAL bytes written.
    pub wal_bytes: f64,
    /// WAL flushes to disk (`fsync` or `fdatasync`), by backends and the WAL writer.
    pub wal_syncs: f64,
    /// Milliseconds spent in those flushes.
    pub wal_sync_ms: f64,
    /// Top-level statements executed, and the milliseconds their execution took.
    pub statements: f64,
    pub statement_ms: f64,
    /// Calls of the store's PL/pgSQL functions called by clients (`acquire`, `release`,
    /// `renew`, ...), and the milliseconds spent in them (nested calls included).
    pub store_calls: f64,
    pub store_ms: f64,
}

impl Counts {
    /// The counters now, read on `conn` (whose own reports are flushed first). `schema` is the
    /// store's, whose top-level functions are counted.
    pub fn now(conn: &mut Connection, schema: &str) -> Counts {
        run(conn, "SELECT pg_stat_force_next_flush()");
        let row = conn
            .query_one(
                "SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = \
                 current_database())::float8 AS commits, w.wal_records::float8 AS records, \
                 w.wal_bytes::float8 AS bytes, w.wal_sync::float8 AS syncs, \
                 w.wal_sync_time::float8 AS sync_ms, \
                 (SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE toplevel)::float8 \
                 AS statements, \
                 (SELECT coalesce(sum(total_exec_time), 0) FROM pg_stat_statements WHERE \
                 toplevel)::float8 AS statement_ms, \
                 (SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions WHERE schemaname \
                 = $1 AND funcname IN ('acquire', 'release', 'renew', 'undo', 'withdraw'))::float8 \
                 AS store_calls, \
                 (SELECT coalesce(sum(total_time), 0) FROM pg_stat_user_functions WHERE \
                 schemaname = $1 AND funcname IN ('acquire', 'release', 'renew', 'undo', \
                 'withdraw'))::float8 AS store_ms \
                 FROM pg_stat_wal w",
                &[Some(schema)],
                soon(),
            )
            .expect("the server's counters");
        let get = |name: &str| row.get::<f64>(name).expect("a counter");
        Counts {
            commits: get("commits"),
            wal_records: get("records"),
            wal_bytes: get("bytes"),
            wal_syncs: get("syncs"),
            wal_sync_ms: get("sync_ms"),
            statements: get("statements"),
            statement_ms: get("statement_ms"),
            store_calls: get("store_calls"),
            store_ms: get("store_ms"),
        }
    }

    /// What was counted since `earlier`, per `per` (pairs, sections, purchases), less what the
    /// counting itself cost (one statement and one commit per reading).
    pub fn per(self, earlier: Counts, per: f64) -> Counts {
        let per = per.max(1.0);
        let d = |now: f64, then: f64| (now - then).max(0.0) / per;
        Counts {
            commits: d(self.commits - 1.0, earlier.commits),
            wal_records: d(self.wal_records, earlier.wal_records),
            wal_bytes: d(self.wal_bytes, earlier.wal_bytes),
            wal_syncs: d(self.wal_syncs, earlier.wal_syncs),
            wal_sync_ms: d(self.wal_sync_ms, earlier.wal_sync_ms),
            statements: d(self.statements - 1.0, earlier.statements),
            statement_ms: d(self.statement_ms, earlier.statement_ms),
            store_calls: d(self.store_calls, earlier.store_calls),
            store_ms: d(self.store_ms, earlier.store_ms),
        }
    }
}

/// The advisory-lock key of `name` (the floors lock by a number, as their users do).
pub fn advisory_key(name: &str) -> String {
    // FNV-1a, folded into a non-negative i64.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in name.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    (hash >> 1).to_string()
}
