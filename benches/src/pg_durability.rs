//! What durability costs the PostgreSQL store, measured (`commits`), and the store's two schemas
//! the durability figures run on (what a crash does to them is `pg_crash.rs`).
//!
//! - `commits`: a one-row `UPDATE` committed with `synchronous_commit` on and off (one
//!   connection, then 8), and the store's lock + unlock as it ships (its functions commit
//!   synchronously whatever the session says) beside the same functions made to commit
//!   asynchronously (a copy of the schema, `lease_async`, whose `enter` and `renew` set the
//!   setting off instead: a variant made here to be measured, not something the store offers).

use crate::pg_floors::{timed, Measured};
use crate::pg_server::{self, connect, run, soon, Counts};
use postgres_blocking::Connection;
use redis_lease::Client;
use std::time::Duration;

/// The store's schema as it ships, and the asynchronous copy.
pub(crate) const SHIPPED: &str = "lease";
pub(crate) const ASYNC: &str = "lease_async";

/// A client of the store in `schema`.
pub(crate) fn client(url: &str, schema: &str) -> Client {
    Client::postgres(url)
        .postgres_schema(schema)
        .default_lease(Duration::from_secs(10))
        .command_timeout(Duration::from_millis(500))
        .build()
        .expect("valid settings")
}

/// Makes the store's schema `schema` (by a client's first call) and, for [`ASYNC`], rewrites
/// its functions that force synchronous commits to turn them off instead.
pub(crate) fn install(url: &str, conn: &mut Connection, schema: &str) {
    client(url, schema).ping().expect("the store answers");
    if schema != ASYNC {
        return;
    }
    for function in ["enter(text)", "renew(text[], text[], bigint[])"] {
        let sql = format!("SELECT pg_get_functiondef('{schema}.{function}'::regprocedure)");
        let text = conn
            .query_one(&sql, &[], soon())
            .and_then(|row| row.get::<String>(0))
            .expect("a function's definition");
        let forced = "set_config('synchronous_commit', 'on', true)";
        assert!(
            text.contains(forced),
            "{function} forces synchronous commits"
        );
        run(
            conn,
            &text.replace(forced, "set_config('synchronous_commit', 'off', true)"),
        );
    }
}

/// One row of `commits`.
pub struct CommitRow {
    pub what: &'static str,
    pub threads: usize,
    pub measured: Measured,
    pub counts: Counts,
}

/// `commits`: the cost of a commit, on and off, each `run_for`.
pub fn commits(run_for: Duration) -> Vec<CommitRow> {
    let server = pg_server::start(&[]);
    let url = server.url();
    let mut stats = connect(&url);
    run(
        &mut stats,
        "CREATE TABLE counter (id int PRIMARY KEY, n bigint NOT NULL); \
         INSERT INTO counter SELECT g, 0 FROM generate_series(0, 63) g",
    );
    for schema in [SHIPPED, ASYNC] {
        install(&url, &mut stats, schema);
    }
    let mut rows = Vec::new();
    for threads in [1, 8] {
        for setting in ["on", "off"] {
            let (measured, counts) = counted(&mut stats, SHIPPED, || {
                let url = url.clone();
                let sql = format!("SET synchronous_commit = {setting}");
                timed(
                    threads,
                    run_for,
                    move |n| {
                        let mut conn = connect(&url);
                        run(&mut conn, &sql);
                        (conn, n.to_string())
                    },
                    |(conn, id), _| {
                        conn.execute(
                            "UPDATE counter SET n = n + 1 WHERE id = $1::int",
                            &[Some(id)],
                            soon(),
                        )
                        .expect("update");
                    },
                )
            });
            rows.push(CommitRow {
                what: if setting == "on" {
                    "one-row `UPDATE`, `synchronous_commit = on`"
                } else {
                    "one-row `UPDATE`, `synchronous_commit = off`"
                },
                threads,
                measured,
                counts,
            });
        }
        for schema in [SHIPPED, ASYNC] {
            let (measured, counts) = counted(&mut stats, schema, || {
                let client = client(&url, schema);
                let measured = timed(
                    threads,
                    run_for,
                    |n| client.lock(&format!("commits:{n}")).expect("valid name"),
                    |lock, _| {
                        lock.lock().expect("acquired").unlock().expect("released");
                    },
                );
                drop(client);
                measured
            });
            let what = if schema == SHIPPED {
                "the store's lock + unlock, as it ships (on)"
            } else {
                "the same functions committing with `synchronous_commit` off"
            };
            rows.push(CommitRow {
                what,
                threads,
                measured,
                counts,
            });
        }
    }
    rows
}

fn counted(
    stats: &mut Connection,
    schema: &str,
    work: impl FnOnce() -> Measured,
) -> (Measured, Counts) {
    pg_server::wait_alone(stats);
    let before = Counts::now(stats, schema);
    let measured = work();
    pg_server::wait_alone(stats);
    let after = Counts::now(stats, schema);
    (measured, after.per(before, measured.total as f64))
}
