//! What the store holds for a lock, read in one round trip: the name's row (its counter, the
//! family holding it, a semaphore's permits) and its live holds, as a [`LockState`].

use super::shared::Shared;
use crate::backend::Kind;
use crate::backend::LockId;
use crate::error::{Error, Result};
use crate::state::LockState;
use postgres_blocking::{Pipeline, Row};
use std::time::Duration;

/// The family of holds a primitive of `kind` takes (see `schema.sql`).
fn family(kind: Kind) -> &'static str {
    match kind {
        Kind::Semaphore { .. } => "semaphore",
        Kind::Read | Kind::Write => "rw",
        Kind::Lock | Kind::Fair | Kind::Leader | Kind::Latch => "lock",
        // A rate limiter's are rows of its own (see `limiter.rs`), never holds.
        Kind::Limiter => "limiter",
    }
}

/// Whether a hold taking `side` shows as a holder of the primitive `kind`: a read-write lock's
/// sides each show their own.
fn shows(kind: Kind, side: &str) -> bool {
    match kind {
        Kind::Read => side == "read",
        Kind::Write => side == "write",
        _ => true,
    }
}

/// What the store holds for the lock `id` at `key`.
pub(super) fn inspect(
    shared: &Shared,
    id: &LockId,
    key: &str,
    deadline: std::time::Instant,
) -> Result<LockState> {
    let outcomes = shared.call(key, deadline, |conn| {
        let mut pipeline = Pipeline::new();
        pipeline.push(&shared.sql.name, &[Some(key)])?;
        pipeline.push(&shared.sql.holds, &[Some(key)])?;
        pipeline.push(&shared.sql.waiting, &[Some(key)])?;
        conn.pipeline_atomic(&pipeline, deadline)
    })?;
    let [name, holds, waiting] = outcomes.as_slice() else {
        return Err(Error::Protocol(format!(
            "postgres: an inspection gave {} results",
            outcomes.len()
        )));
    };
    let mut state = state_of(shared, id, key, name.rows().first(), holds.rows())
        .map_err(|error| Error::Protocol(format!("postgres: an inspection's rows: {error}")))?;
    if id.kind == Kind::Fair {
        // A fair lock's line is kept in the store: how many wait in it.
        state.waiting = waiting
            .rows()
            .first()
            .and_then(|row| row.get::<u64>(0).ok());
    }
    Ok(state)
}

/// The lock's state from its name's row (if any) and its live holds' rows.
fn state_of(
    shared: &Shared,
    id: &LockId,
    key: &str,
    name: Option<&Row>,
    holds: &[Row],
) -> postgres_blocking::Result<LockState> {
    let kind = id.kind;
    let mut state = LockState::empty(&id.name);
    state.node = Some(shared.shown.clone());
    let mut declared = None;
    if let Some(name) = name {
        let fence = name.get::<u64>("fence")?;
        state.last_token = (fence > 0).then_some(fence);
        if let Some(held_as) = name.get::<Option<&str>>("family")? {
            if held_as != family(kind) {
                state.problems.push(format!(
                    "{key:?} is held as a {held_as}, not a {}",
                    kind.label()
                ));
                state.foreign = Some(key.to_owned());
                return Ok(state);
            }
        }
        declared = name.get::<Option<u64>>("permits")?;
    }
    let mut in_use = 0;
    for hold in holds {
        let take = hold.get::<u64>("take")?;
        in_use += take;
        if !shows(kind, hold.get::<&str>("side")?) {
            continue;
        }
        state
            .holders
            .push((hold.get::<String>("owner")?, hold.get::<u64>("holds")?));
        let token = hold.get::<u64>("token")?;
        state.hold_token = state.hold_token.max(Some(token));
        let ttl = hold
            .get::<Option<u64>>("ttl_ms")?
            .map(Duration::from_millis);
        state.ttl = state.ttl.max(ttl);
        if kind == Kind::Leader && state.proclaimed.is_none() {
            state.proclaimed = hold.get::<Option<String>>("proclaimed")?;
        }
    }
    if let Kind::Semaphore { .. } = kind {
        state.permits = declared;
        state.permits_in_use = Some(in_use);
    }
    Ok(state)
}
