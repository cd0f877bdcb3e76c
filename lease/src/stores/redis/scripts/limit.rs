//! A rate limiter's scripts (`limit_take.lua`, `limit_look.lua`, `limit_reconfigure.lua`, each
//! after what they share, `limit.lua`): the only Rust code that knows their arguments and
//! their replies.

use super::call::{Call, Lua};
use super::reply::unexpected;
use crate::backend::Taken;
use crate::error::Result;
use crate::rate::{store_time, LimiterState, RateLimit};
use crate::stores::redis::keys::LockKeys;
use redis::Value;
use std::sync::LazyLock;
use std::time::Duration;

/// The refusals every script asks before its first write (`access.lua`), and what the limiter's
/// scripts share: prepended to each of them. The checks of a lock's hold and counter
/// (`checks.lua`) and the steps on its holds (`holds.lua`), which the other scripts carry, are
/// left out: a limiter has no holds, and every function a script defines costs it on every call
/// (about 0.45 µs for the ten of `checks.lua`).
const SHARED: [&str; 2] = [include_str!("access.lua"), include_str!("limit.lua")];

/// A limiter's script: what they share, then `body`.
fn limiter_lua(body: &str) -> Lua {
    let code = [SHARED[0], SHARED[1], body].concat();
    let script = redis::Script::new(&code);
    Lua { code, script }
}

static TAKE: LazyLock<Lua> = LazyLock::new(|| limiter_lua(include_str!("limit_take.lua")));
static LOOK: LazyLock<Lua> = LazyLock::new(|| limiter_lua(include_str!("limit_look.lua")));
static RECONFIGURE: LazyLock<Lua> =
    LazyLock::new(|| limiter_lua(include_str!("limit_reconfigure.lua")));

/// `lua` on the limiter `keys` (its hash and its log), declaring `limit`.
fn declaring(lua: &'static Lua, keys: &LockKeys, limit: &RateLimit) -> Call {
    let log = keys.limiter_log();
    let (mode, [a, b, c]) = limit.wire();
    Call::new(lua, &[keys.lock.as_str(), log.as_str()])
        .arg(mode)
        .arg(a)
        .arg(b)
        .arg(c)
}

/// Takes `n` grants of the limiter `keys` under `limit`.
pub(crate) fn take(keys: &LockKeys, limit: &RateLimit, n: u64) -> Call {
    declaring(&TAKE, keys, limit).arg(n)
}

/// Reads the limiter `keys`, counted by `limit` if it stores none.
pub(crate) fn look(keys: &LockKeys, limit: &RateLimit) -> Call {
    declaring(&LOOK, keys, limit)
}

/// Stores `limit` as the limiter's.
pub(crate) fn reconfigure(keys: &LockKeys, limit: &RateLimit) -> Call {
    declaring(&RECONFIGURE, keys, limit)
}

fn number(value: &Value) -> Option<u64> {
    match value {
        Value::Int(n) => u64::try_from(*n).ok(),
        _ => None,
    }
}

/// A stored limit, as the scripts reply it: its mode and three numbers.
fn stored(items: &[Value]) -> Option<RateLimit> {
    let [Value::BulkString(mode), a, b, c] = items else {
        return None;
    };
    let numbers = [number(a)?, number(b)?, number(c)?];
    RateLimit::from_wire(std::str::from_utf8(mode).ok()?, numbers)
}

/// What a take came to.
pub(crate) fn parse_take(reply: &Value) -> Result<Taken> {
    let wrong = || unexpected("a rate limiter's take", reply);
    let Value::Array(items) = reply else {
        return Err(wrong());
    };
    let taken = match items.as_slice() {
        [Value::Int(1), at, available] => Taken::Granted {
            at: number(at).ok_or_else(wrong)?,
            available: number(available).ok_or_else(wrong)?,
        },
        [Value::Int(0), _, wait, available] => Taken::Wait {
            wait: Duration::from_micros(number(wait).ok_or_else(wrong)?),
            available: number(available).ok_or_else(wrong)?,
        },
        [Value::Int(2), rest @ ..] => Taken::Declared {
            stored: stored(rest).ok_or_else(wrong)?,
        },
        _ => return Err(wrong()),
    };
    Ok(taken)
}

/// The limiter `name` as the look script read it (`node` left for the caller).
pub(crate) fn parse_look(name: &str, reply: &Value) -> Result<LimiterState> {
    let wrong = || unexpected("a rate limiter's read", reply);
    let Value::Array(items) = reply else {
        return Err(wrong());
    };
    let [now, is_stored, mode, a, b, c, used, available, next] = items.as_slice() else {
        return Err(wrong());
    };
    let limit = stored(&[mode.clone(), a.clone(), b.clone(), c.clone()]).ok_or_else(wrong)?;
    Ok(LimiterState {
        name: name.to_owned(),
        node: None,
        limit: (number(is_stored) == Some(1)).then_some(limit),
        used: number(used).ok_or_else(wrong)?,
        available: number(available).ok_or_else(wrong)?,
        next_in: number(next).map(Duration::from_micros),
        now: store_time(number(now).ok_or_else(wrong)?),
    })
}

/// What a reconfiguration came to: the limit stored before (if one was), or, refused, the
/// stored limit of the other mode whose grants still count.
pub(crate) fn parse_reconfigure(
    reply: &Value,
) -> Result<std::result::Result<Option<RateLimit>, RateLimit>> {
    let wrong = || unexpected("a rate limiter's reconfiguration", reply);
    let Value::Array(items) = reply else {
        return Err(wrong());
    };
    match items.as_slice() {
        [Value::Int(0)] => Ok(Ok(None)),
        [Value::Int(1), rest @ ..] => Ok(Ok(Some(stored(rest).ok_or_else(wrong)?))),
        [Value::Int(2), rest @ ..] => Ok(Err(stored(rest).ok_or_else(wrong)?)),
        _ => Err(wrong()),
    }
}
