//! PostgreSQL (feature `postgres`): a lease store, not an advisory-lock wrapper. A hold is a row
//! whose expiry the database's clock sets and judges (`clock_timestamp()`), taken over lazily
//! once it has lapsed, so no reaper runs anywhere; a name's fencing counter is a row that only
//! rises, committed synchronously; every call is one function of the store's schema in one
//! round trip and keeps no session state, so a transaction-mode pooler (PgBouncer) carries it;
//! waiters are woken by `NOTIFY` on one listening connection per client.
//!
//! `schema.sql` is the store (its tables and functions), `schema.rs` its statements and first
//! use, `place.rs` a lock's calls, `limiter.rs` a rate limiter's, `inspect.rs` what it holds, `renew.rs` the renewals,
//! `listen.rs` the listening connection, `pool.rs` the calls' connections, `settings.rs` what a
//! client is built from, `errors.rs` PostgreSQL's errors as the crate's, `shared.rs` what every
//! lock of a client shares, `store.rs` the backend; `latch.rs` a count-down latch's calls,
//! `write.rs` writes made only while a hold holds.

mod errors;
mod inspect;
mod latch;
mod limiter;
mod listen;
mod place;
mod pool;
mod renew;
mod schema;
mod settings;
mod shared;
mod store;
mod write;

pub(crate) use settings::PostgresSettings;

use crate::backend::{Backend, Settings};
use crate::error::Result;
use schema::Statements;
use shared::Shared;
use std::sync::Arc;
use store::PgStore;

/// The builder's settings that no PostgreSQL client honours, and why.
const FOREIGN: [(&str, &str); 6] = [
    (
        "zookeeper_auth",
        "it is ZooKeeper's (a PostgreSQL password goes in the URL or with password)",
    ),
    (
        "max_connections",
        "calls wait for no connection: each opens one when none is idle",
    ),
    (
        "pipelining",
        "a call's statements run in one round trip already",
    ),
    (
        "replica_acks",
        "commits are synchronous: a standby's acknowledgement is the server's \
         synchronous_standby_names",
    ),
    ("quorum", "it is RedLock's"),
    ("retry_delay", "it is RedLock's"),
];

/// The SQL that makes the store in `schema`, checked.
pub(crate) fn schema_sql(schema: &str) -> Result<String> {
    settings::check_schema(schema)?;
    Ok(Statements::new(schema).install_sql())
}

/// A client of the PostgreSQL server `pg.url` names, after the settings it cannot honour are
/// refused. It connects to nothing yet: the schema is checked by the first call.
pub(crate) fn build(
    settings: &Settings,
    pg: &PostgresSettings,
    pool_size: usize,
) -> Result<Box<dyn Backend>> {
    for (setting, why) in FOREIGN {
        settings.refuse(&[setting], "PostgreSQL", why)?;
    }
    let connecting = pg.connecting(settings)?;
    let shared = Arc::new(Shared::new(
        connecting.calls,
        Statements::new(&connecting.schema),
        connecting.shown,
        settings.prefix.clone(),
        pool_size,
        (settings.connect_timeout, settings.command_timeout),
    ));
    Ok(Box::new(PgStore {
        shared,
        listen: connecting.listen,
    }))
}
