//! The calls of the primitives whose holds live in keys of their own (a semaphore, a read-write
//! lock; see `shared.lua`): acquiring, releasing, and the operator's reading and clearing, which
//! go without a script as a lock's do (see `direct.rs`).

use super::call::{millis, Lua};
use super::direct::{pipeline, text};
use super::{Announce, Call, WAITER_MARK};
use crate::backend::Kind;
use crate::error::{Error, Result};
use crate::state::LockState;
use crate::stores::redis::conn::Link;
use crate::stores::redis::fencing::Epoch;
use crate::stores::redis::keys::LockKeys;
use redis::Value;
use std::sync::LazyLock;
use std::time::Duration;

static ACQUIRE: LazyLock<Lua> = LazyLock::new(|| Lua::new(include_str!("shared.lua")));
static RELEASE: LazyLock<Lua> = LazyLock::new(|| Lua::new(include_str!("shared_release.lua")));

/// An acquisition of a shared primitive: a new hold `id`, or a re-entry of `reenter`.
pub(super) fn acquire(
    keys: &LockKeys,
    owner: &str,
    lease: Duration,
    id: &str,
    reenter: Option<&str>,
    epoch: Epoch,
    waits: bool,
) -> Call {
    let (kind, permits, take) = match keys.kind {
        Kind::Semaphore { permits, take } => ("semaphore", permits, take),
        Kind::Write => ("write", 1, 1),
        _ => ("read", 1, 1),
    };
    let mark = if waits && keys.kind == Kind::Write {
        millis(WAITER_MARK)
    } else {
        0
    };
    let new_hold = keys.hold_key(id);
    let reentered = reenter.map_or_else(|| new_hold.clone(), |hold| keys.hold_key(hold));
    Call::new(
        &ACQUIRE,
        &[
            &keys.lock,
            &keys.fence,
            &keys.epoch,
            &new_hold,
            &reentered,
            &keys.writer,
        ],
    )
    .arg(millis(lease))
    .arg(owner)
    .arg(id)
    .arg(reenter.unwrap_or(""))
    .arg(epoch.arg())
    .arg(kind)
    .arg(permits)
    .arg(take)
    .arg(mark)
}

/// The release of acquisition `id` of the hold `hold`.
pub(super) fn release(
    keys: &LockKeys,
    owner: &str,
    hold: &str,
    id: &str,
    announce: Announce,
) -> Call {
    Call::new(
        &RELEASE,
        &[&keys.lock, &keys.hold_key(hold), &keys.hold_released(hold)],
    )
    .arg(owner)
    .arg(hold)
    .arg(id)
    .arg(&keys.channel)
    .arg(announce.command())
}

/// What a shared primitive's set names: its holds with their scores, the permits a semaphore
/// last declared, and the primitive it is marked as.
struct Holds {
    holds: Vec<(String, u64)>,
    declared: Option<u64>,
    marker: Option<String>,
}

/// What a shared primitive's set names; [`Error::WrongType`] if the key is not a sorted set.
/// One round trip.
fn holds(con: &mut dyn Link, keys: &LockKeys) -> Result<Holds> {
    let replies = pipeline(
        con,
        vec![redis::cmd("ZRANGE")
            .arg(&keys.lock)
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .clone()],
        &keys.lock,
    )?;
    let Some(Value::Array(items)) = replies.first() else {
        return Err(Error::WrongType {
            key: keys.lock.clone(),
        });
    };
    let mut found = Holds {
        holds: Vec::new(),
        declared: None,
        marker: None,
    };
    for pair in items.chunks(2) {
        let [member, score] = pair else { continue };
        let (Some(member), Some(score)) = (text(member), score_of(score)) else {
            continue;
        };
        if member.starts_with(':') {
            if member == ":semaphore" {
                found.declared = Some(score);
            }
            found.marker = Some(member);
        } else {
            found.holds.push((member, score));
        }
    }
    Ok(found)
}

/// A sorted set's score as a whole number.
fn score_of(value: &Value) -> Option<u64> {
    match value {
        Value::Double(score) if *score >= 0.0 => Some(*score as u64),
        other => text(other)?.parse::<f64>().ok().map(|score| score as u64),
    }
}

/// What Redis holds for a semaphore or a side of a read-write lock: its live holds (a read
/// lock's readers, a write lock's writer, a semaphore's every holder), the permits in use and
/// declared, and the fencing counter. Two round trips.
pub(crate) fn inspect(con: &mut dyn Link, keys: &LockKeys) -> Result<LockState> {
    let mut state = LockState::empty(&keys.name);
    let expected = match keys.kind {
        Kind::Semaphore { .. } => ":semaphore",
        _ => ":rw",
    };
    let Holds {
        holds,
        declared,
        marker,
    } = match holds(con, keys) {
        Ok(found)
            if found
                .marker
                .as_deref()
                .is_none_or(|marker| marker == expected) =>
        {
            found
        }
        Ok(_) | Err(Error::WrongType { .. }) => {
            state.problems.push(format!(
                "key {:?} holds something else than a {}",
                keys.lock,
                keys.kind.label()
            ));
            Holds {
                holds: Vec::new(),
                declared: None,
                marker: None,
            }
        }
        Err(error) => return Err(error),
    };
    if marker.is_none() && !holds.is_empty() {
        state.problems.push(format!(
            "key {:?} is a sorted set that no {} marked",
            keys.lock,
            keys.kind.label()
        ));
        return Ok(state);
    }
    let mut commands = vec![
        redis::cmd("TYPE").arg(&keys.fence).clone(),
        redis::cmd("GET").arg(&keys.fence).clone(),
    ];
    for (hold, _) in &holds {
        let key = keys.hold_key(hold);
        commands.push(redis::cmd("HGETALL").arg(&key).clone());
        commands.push(redis::cmd("PTTL").arg(&key).clone());
    }
    let replies = pipeline(con, commands, &keys.lock)?;
    let [fence_type, fence, rest @ ..] = replies.as_slice() else {
        return Err(Error::Protocol(format!("inspection replied {replies:?}")));
    };
    super::direct::read_fence(&mut state, keys, fence_type, fence);
    let mut in_use = 0;
    for ((_, score), replies) in holds.iter().zip(rest.chunks(2)) {
        let [Value::Array(fields), Value::Int(ttl)] = replies else {
            continue;
        };
        if *ttl == -2 || fields.is_empty() {
            // Lapsed: the next acquisition drops it.
            continue;
        }
        let side = match keys.kind {
            Kind::Read => *score == 0,
            Kind::Write => *score == 1,
            _ => true,
        };
        in_use += score;
        if !side {
            continue;
        }
        for pair in fields.chunks(2) {
            let [field, value] = pair else { continue };
            let (Some(field), Some(value)) = (text(field), text(value)) else {
                continue;
            };
            match field.as_str() {
                ":token" => {
                    let token = value.parse().ok();
                    state.hold_token = state.hold_token.max(token);
                }
                other if other.starts_with(':') => {}
                owner => match value.parse() {
                    Ok(count) => state.holders.push((owner.to_owned(), count)),
                    Err(_) => state.problems.push(format!(
                        "the hold count of {owner:?} in a hold of {:?} is not a number",
                        keys.lock
                    )),
                },
            }
        }
        let ttl = u64::try_from(*ttl).ok().map(Duration::from_millis);
        state.ttl = state.ttl.max(ttl);
    }
    if let Kind::Semaphore { .. } = keys.kind {
        state.permits = declared;
        state.permits_in_use = Some(in_use);
    }
    Ok(state)
}

/// Deletes a shared primitive whoever holds it: its set, every hold it names, a waiting writer's
/// mark; and announces it. Returns whether there was a set. Two round trips.
pub(crate) fn force_release(
    con: &mut dyn Link,
    keys: &LockKeys,
    announce: Announce,
) -> Result<bool> {
    let holds = match holds(con, keys) {
        Ok(found) => found.holds,
        Err(Error::WrongType { .. }) => Vec::new(),
        Err(error) => return Err(error),
    };
    let mut delete = redis::cmd("DEL");
    delete.arg(&keys.lock).arg(&keys.writer);
    for (hold, _) in &holds {
        delete.arg(keys.hold_key(hold));
    }
    super::direct::delete_and_announce(con, keys, delete, announce)
}
