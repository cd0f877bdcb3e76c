//! A count-down latch's scripts (`latch_set.lua`, `latch_down.lua`, on `latch.lua`) and its
//! read: the only Rust code that knows their arguments and replies.

use super::call::{millis, Call, Lua};
use super::direct::{pipeline, text};
use super::reply::unexpected;
use super::Announce;
use crate::backend::LatchRead;
use crate::error::{Error, Result};
use crate::stores::redis::conn::Link;
use crate::stores::redis::keys::LockKeys;
use redis::Value;
use std::sync::LazyLock;
use std::time::Duration;

static SET: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(&[include_str!("latch.lua"), include_str!("latch_set.lua")].concat())
});
static DOWN: LazyLock<Lua> = LazyLock::new(|| {
    Lua::new(&[include_str!("latch.lua"), include_str!("latch_down.lua")].concat())
});

/// Sets the latch `keys` to `count` as the round `round`, if it is at zero or absent; it lapses
/// `expiry` from now.
pub(crate) fn latch_set(keys: &LockKeys, count: u32, round: &str, expiry: Duration) -> Call {
    Call::new(&SET, &[&keys.lock])
        .arg(count)
        .arg(round)
        .arg(millis(expiry))
}

/// Whether the count was set.
pub(crate) fn parse_latch_set(reply: &Value) -> Result<bool> {
    match reply {
        Value::Int(1) => Ok(true),
        Value::Int(0) => Ok(false),
        other => Err(unexpected("latch_set", other)),
    }
}

/// Counts the latch `keys` down once; it lapses `expiry` from now while it counts, `kept` from
/// now once at zero, when it is announced as `announce` says.
pub(crate) fn latch_down(
    keys: &LockKeys,
    expiry: Duration,
    kept: Duration,
    announce: Announce,
) -> Call {
    Call::new(&DOWN, &[&keys.lock])
        .arg(millis(expiry))
        .arg(millis(kept))
        .arg(&keys.channel)
        .arg(announce.command())
}

/// The count left.
pub(crate) fn parse_latch_down(reply: &Value) -> Result<u32> {
    match reply {
        Value::Int(left) => u32::try_from(*left).map_err(|_| unexpected("latch_down", reply)),
        other => Err(unexpected("latch_down", other)),
    }
}

/// The latch `keys` as Redis holds it, read in one pipeline without a script.
pub(crate) fn latch_read(con: &mut dyn Link, keys: &LockKeys) -> Result<LatchRead> {
    let commands = vec![
        redis::cmd("HMGET")
            .arg(&keys.lock)
            .arg("count")
            .arg("round")
            .clone(),
        redis::cmd("PTTL").arg(&keys.lock).clone(),
    ];
    let replies = pipeline(con, commands, &keys.lock)?;
    let [fields, ttl] = replies.as_slice() else {
        return Err(unexpected("a latch's read", &Value::Array(replies)));
    };
    let fields = match fields {
        Value::Array(fields) => fields.iter().map(text).collect::<Vec<_>>(),
        // The one refusal `pipeline` lets through.
        Value::ServerError(_) => {
            return Err(Error::WrongType {
                key: keys.lock.clone(),
            })
        }
        other => return Err(unexpected("a latch's read", other)),
    };
    let ttl = match ttl {
        Value::Int(ms) => u64::try_from(*ms).ok().map(Duration::from_millis),
        _ => None,
    };
    match fields.as_slice() {
        [Some(count), Some(round)] => {
            LatchRead::parse(&format!("{count} {round}"), &keys.lock, ttl)
        }
        [None, None] => Ok(LatchRead::absent()),
        _ => Err(Error::BadValue {
            key: keys.lock.clone(),
            detail: "it is not a latch's count and round".into(),
        }),
    }
}
