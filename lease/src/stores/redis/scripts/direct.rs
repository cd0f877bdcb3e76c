//! The commands sent without a script: reading a lock's state, and deleting it whoever holds
//! it. They are an operator's last resort, so they work where scripts may not: on a full server
//! (`OOM` refuses scripts that write, and every command queued in a `MULTI`), and on keys of the
//! wrong type. They are sent as one pipeline, which Redis runs back to back.

use super::Announce;
use crate::error::{Error, Result};
use crate::state::LockState;
use crate::stores::redis::conn::Link;
use crate::stores::redis::keys::LockKeys;
use redis::Value;
use std::time::Duration;

/// The replies of `commands`, sent in one write. A command refused for a key of another type
/// answers with its `Value::ServerError` among them; any other refusal (a redirect, a missing
/// permission) is the error of the whole exchange.
pub(super) fn pipeline(
    con: &mut dyn Link,
    commands: Vec<redis::Cmd>,
    key: &str,
) -> Result<Vec<Value>> {
    let replies = con
        .exchange(&commands)
        .map_err(|error| Error::from_redis(error, key).at(con.server()))?;
    for reply in &replies {
        if let Value::ServerError(error) = reply {
            if error.code() != "WRONGTYPE" {
                return Err(Error::from_redis(error.clone().into(), key).at(con.server()));
            }
        }
    }
    Ok(replies)
}

pub(super) fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(text) => Some(text.clone()),
        Value::Okay => Some("OK".into()),
        _ => None,
    }
}

/// What Redis holds for the lock, read in one pipeline.
pub(crate) fn inspect(con: &mut dyn Link, keys: &LockKeys) -> Result<LockState> {
    let fair = keys.kind == crate::backend::Kind::Fair;
    let mut commands = vec![
        redis::cmd("TYPE").arg(&keys.lock).clone(),
        redis::cmd("HGETALL").arg(&keys.lock).clone(),
        redis::cmd("PTTL").arg(&keys.lock).clone(),
        redis::cmd("TYPE").arg(&keys.fence).clone(),
        redis::cmd("GET").arg(&keys.fence).clone(),
        redis::cmd("TYPE").arg(&keys.epoch).clone(),
    ];
    if fair {
        commands.push(redis::cmd("ZCARD").arg(&keys.queue).clone());
    }
    let replies = pipeline(con, commands, &keys.lock)?;
    let [lock_type, fields, ttl, fence_type, fence, note_type, line @ ..] = replies.as_slice()
    else {
        return Err(Error::Protocol(format!("inspection replied {replies:?}")));
    };
    let mut state = LockState::empty(&keys.name);
    if let [Value::Int(waiting)] = line {
        state.waiting = u64::try_from(*waiting).ok();
    }
    let lock_type = text(lock_type).unwrap_or_default();
    match lock_type.as_str() {
        "none" => {}
        "hash" => {
            let pairs = match fields {
                Value::Array(items) => items.chunks(2).filter_map(|pair| match pair {
                    [field, value] => Some((text(field)?, text(value)?)),
                    _ => None,
                }),
                _ => return Err(Error::Protocol(format!("HGETALL replied {fields:?}"))),
            };
            for (field, value) in pairs {
                match field.as_str() {
                    ":token" => state.hold_token = value.parse().ok(),
                    ":value" => state.proclaimed = Some(value),
                    other if other.starts_with(':') => {}
                    owner => match value.parse() {
                        Ok(holds) => state.holders.push((owner.to_owned(), holds)),
                        Err(_) => state.problems.push(format!(
                            "the hold count of {owner:?} in {:?} is not a number",
                            keys.lock
                        )),
                    },
                }
            }
            if let Value::Int(ms) = ttl {
                state.ttl = u64::try_from(*ms).ok().map(Duration::from_millis);
            }
        }
        "zset" => {
            state.foreign = Some(keys.lock.clone());
            state.problems.push(format!(
                "key {:?} holds a zset, not a lock (a hash): a semaphore's or a read-write lock's \
             (look at it as one: `lease status --permits N` or `--read`)",
                keys.lock
            ))
        }
        other => {
            state.foreign = Some(keys.lock.clone());
            state.problems.push(format!(
                "key {:?} holds a {other}, not a lock (a hash)",
                keys.lock
            ));
        }
    }
    read_fence(&mut state, keys, fence_type, fence);
    match text(note_type).unwrap_or_default().as_str() {
        "none" | "string" => {}
        other => state.problems.push(format!(
            "epoch note {:?} holds a {other}, not a string (deleting it is safe: the epoch is read again)",
            keys.epoch
        )),
    }
    Ok(state)
}

/// The fencing counter into `state`, from its `TYPE` and `GET` replies.
pub(super) fn read_fence(
    state: &mut LockState,
    keys: &LockKeys,
    fence_type: &Value,
    fence: &Value,
) {
    match (text(fence_type).unwrap_or_default().as_str(), text(fence)) {
        ("none", _) => {}
        ("string", Some(value)) => match value.parse::<u64>() {
            Ok(token) if token < i64::MAX as u64 => state.last_token = Some(token),
            Ok(_) => state.mark_exhausted(format!(
                "fencing counter {:?} has reached the largest token",
                keys.fence
            )),
            Err(_) => state.problems.push(format!(
                "fencing counter {:?} is not a whole number from 0",
                keys.fence
            )),
        },
        (other, _) => state.problems.push(format!(
            "fencing counter {:?} holds a {other}, not a number",
            keys.fence
        )),
    }
}

/// Deletes the lock whatever holds it (whatever type its key has), and announces it. Returns
/// whether there was a key.
pub(crate) fn force_release(
    con: &mut dyn Link,
    keys: &LockKeys,
    announce: Announce,
) -> Result<bool> {
    delete_and_announce(
        con,
        keys,
        redis::cmd("DEL").arg(&keys.lock).clone(),
        announce,
    )
}

/// Runs `delete` (a `DEL` of the primitive's keys) and announces the name as freed, in one
/// pipeline; whether anything was deleted.
pub(super) fn delete_and_announce(
    con: &mut dyn Link,
    keys: &LockKeys,
    delete: redis::Cmd,
    announce: Announce,
) -> Result<bool> {
    let replies = pipeline(
        con,
        vec![
            delete,
            redis::cmd(announce.command())
                .arg(&keys.channel)
                .arg("freed")
                .clone(),
        ],
        &keys.lock,
    )?;
    match replies.first() {
        Some(Value::Int(deleted)) => Ok(*deleted > 0),
        Some(Value::ServerError(error)) => Err(Error::from_redis(error.clone().into(), &keys.lock)),
        other => Err(Error::Protocol(format!("DEL replied {other:?}"))),
    }
}
