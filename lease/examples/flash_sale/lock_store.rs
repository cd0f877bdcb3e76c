//! Where the lock lives: on Redis (`REDIS_URL`, else a throwaway redis-server), or, with `--lock
//! postgres`, in the PostgreSQL database that holds the stock (the crate's `postgres` feature);
//! and a client of it, chosen by its URL's scheme.

use super::store::Result;
use redis_lease::{Client, ClientBuilder};
use std::time::Duration;

/// What `--lock postgres` needs, and the command that builds it.
const NEEDS_FEATURE: &str = "--lock postgres needs redis-lease's postgres feature: cargo run \
     --release -p redis-lease --features postgres --example flash_sale -- --db postgres --lock \
     postgres";

/// Where the lock lives, as `--lock` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockStore {
    /// A Redis server.
    Redis,
    /// The PostgreSQL database of the stock.
    Postgres,
}

impl LockStore {
    /// Reads `--lock`; `postgres` only in a build with the crate's `postgres` feature.
    pub fn parse(name: &str) -> Result<LockStore> {
        match name {
            "redis" => Ok(LockStore::Redis),
            "postgres" if cfg!(feature = "postgres") => Ok(LockStore::Postgres),
            "postgres" => Err(NEEDS_FEATURE.into()),
            other => Err(format!("--lock: redis or postgres, not {other:?}").into()),
        }
    }
}

/// Whether `url` names a PostgreSQL database.
pub fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// A client of the lock's store at `url` (a Redis server or a PostgreSQL database), whose locks
/// are taken for `lease`.
pub fn client(url: &str, lease: Duration) -> Result<Client> {
    let builder = if is_postgres(url) {
        postgres(url)?
    } else {
        Client::builder(url)
    };
    builder.default_lease(lease).build().map_err(|e| {
        let shown = redis_lease::redact_url(url);
        format!("cannot connect to the lock's store at {shown}: {e}").into()
    })
}

#[cfg(feature = "postgres")]
fn postgres(url: &str) -> Result<ClientBuilder> {
    Ok(Client::postgres(url))
}

#[cfg(not(feature = "postgres"))]
fn postgres(_url: &str) -> Result<ClientBuilder> {
    Err(NEEDS_FEATURE.into())
}
