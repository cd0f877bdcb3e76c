//! The resource the lock protects, on a Redis server of its own that is never faulted: a fenced
//! store (a script that refuses a token lower than the highest it accepted) and an unfenced
//! counter that clients read, then write, under the lock. The clients reach it through
//! [`Connection`].

mod connection;

pub use connection::Connection;

use redis::{Commands, ConnectionLike, RedisResult, Script};
use std::sync::LazyLock;

static FENCED_WRITE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("fenced_write.lua")));

pub const STORE: &str = "resource";
pub const LOG: &str = "resource:log";
pub const COUNTER: &str = "counter";

/// Writes to the fenced store with `token`; whether it was accepted.
pub fn fenced_write(con: &mut impl ConnectionLike, token: u64, client: &str) -> RedisResult<bool> {
    let accepted: i64 = FENCED_WRITE
        .key(STORE)
        .key(LOG)
        .arg(token)
        .arg(client)
        .invoke(con)?;
    Ok(accepted == 1)
}

/// Reads the counter and writes it back one higher, in two commands: safe only under the lock.
pub fn increment(con: &mut impl ConnectionLike) -> RedisResult<()> {
    let value: Option<u64> = con.get(COUNTER)?;
    con.set(COUNTER, value.unwrap_or(0) + 1)
}

/// One entry of the store's log: accepted or not, token, client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logged {
    pub accepted: bool,
    pub token: u64,
    pub client: String,
}

/// The store's write log in arrival order.
pub fn log(con: &mut impl ConnectionLike) -> RedisResult<Vec<Logged>> {
    let lines: Vec<String> = con.lrange(LOG, 0, -1)?;
    Ok(lines
        .iter()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ' ');
            let accepted = parts.next()? == "a";
            let token = parts.next()?.parse().ok()?;
            let client = parts.next()?.to_owned();
            Some(Logged {
                accepted,
                token,
                client,
            })
        })
        .collect())
}

/// The counter's final value.
pub fn counter(con: &mut impl ConnectionLike) -> RedisResult<u64> {
    let value: Option<u64> = con.get(COUNTER)?;
    Ok(value.unwrap_or(0))
}
