//! An election leader's proclamation (`proclaim.lua`): the only Rust code that knows its
//! arguments and its reply.

use super::call::{Call, Lua};
use super::reply::unexpected;
use super::Announce;
use crate::error::Result;
use crate::stores::redis::keys::LockKeys;
use redis::Value;
use std::sync::LazyLock;

static PROCLAIM: LazyLock<Lua> = LazyLock::new(|| Lua::new(include_str!("proclaim.lua")));

/// `owner`'s proclamation of `value` while its hold `hold` leads the election `keys`, announced
/// as `announce` says.
pub(crate) fn proclaim(
    keys: &LockKeys,
    owner: &str,
    hold: &str,
    value: &str,
    announce: Announce,
) -> Call {
    Call::new(&PROCLAIM, &[&keys.lock])
        .arg(owner)
        .arg(hold)
        .arg(value)
        .arg(&keys.channel)
        .arg(announce.command())
}

/// Whether the proclamation was stored: `false` if the hold no longer led.
pub(crate) fn parse_proclaim(reply: &Value) -> Result<bool> {
    match reply {
        Value::Int(1) => Ok(true),
        Value::Int(0) => Ok(false),
        other => Err(unexpected("proclaim", other)),
    }
}
