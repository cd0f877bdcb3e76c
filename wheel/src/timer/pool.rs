//! The shards of every timer in the process: a timer takes its shards from here and gives them
//! back when it is dropped, so that they are never freed and a handle can hold a plain
//! `&'static Shard` and its task's key, with no reference count to change on every schedule and
//! cancel.
//!
//! A shard given back keeps its wheel's generations (see `Wheel::succeed`): a key that a handle
//! of the old timer still holds never matches a task of the next timer that takes the shard.
//! What stays allocated is the shard itself and an empty one-slot wheel, about 6 KiB a shard,
//! reused by the next timer built; a process never holds more shards than its timers held at
//! once.

use super::limit::PendingLimit;
use super::shard::Shard;
use crate::tick::Ticks;
use crate::wheel::{InvalidSlots, Wheel};
use parking_lot::Mutex;
use std::sync::Arc;

/// Shards that no timer uses.
static IDLE: Mutex<Vec<&'static Shard>> = Mutex::new(Vec::new());

/// A shard for a new timer, with an empty wheel of `slots` buckets.
pub(crate) fn take(
    slots: usize,
    ticks: Ticks,
    limit: Option<Arc<PendingLimit>>,
) -> Result<&'static Shard, InvalidSlots> {
    // In a `shuttle` check, every execution builds its own shards: a lock or an atomic of one
    // execution carries that execution's state, which the next must not see.
    let idle = if cfg!(shuttle) {
        None
    } else {
        IDLE.lock().pop()
    };
    match idle {
        Some(shard) => {
            if let Err(invalid) = shard.restart(slots, ticks, limit) {
                IDLE.lock().push(shard);
                return Err(invalid);
            }
            Ok(shard)
        }
        None => Ok(Box::leak(Box::new(Shard::new(
            Wheel::new(slots)?,
            ticks,
            limit,
        )))),
    }
}

/// Takes back the shards of a dropped timer.
pub(crate) fn give_back(shards: &[&'static Shard]) {
    for shard in shards {
        shard.retire();
    }
    if !cfg!(shuttle) {
        IDLE.lock().extend_from_slice(shards);
    }
}
