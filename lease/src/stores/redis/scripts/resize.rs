//! A semaphore's resizing (`resize.lua`): the only Rust code that knows its arguments and its
//! reply.

use super::call::{Call, Lua};
use super::reply::unexpected;
use crate::error::Result;
use crate::stores::redis::keys::LockKeys;
use redis::Value;
use std::sync::LazyLock;

static RESIZE: LazyLock<Lua> = LazyLock::new(|| Lua::new(include_str!("resize.lua")));

/// Makes `permits` the number of permits of the semaphore `keys`.
pub(crate) fn resize(keys: &LockKeys, permits: u32) -> Call {
    Call::new(&RESIZE, &[&keys.lock]).arg(permits)
}

/// The number of permits declared before, if any was.
pub(crate) fn parse_resize(reply: &Value) -> Result<Option<u32>> {
    match reply {
        Value::Int(-1) => Ok(None),
        Value::Int(n) => u32::try_from(*n)
            .map(Some)
            .map_err(|_| unexpected("resize", reply)),
        other => Err(unexpected("resize", other)),
    }
}
