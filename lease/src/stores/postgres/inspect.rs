//! What the store holds for a lock, read in one round trip: the name's row (its counter, the
//! family holding it, a semaphore's permits) and its live holds, as a [`LockState`].

use super::place::PgPlace;
use crate::backend::Kind;
use crate::error::{Error, Result};
use crate::state::LockState;
use postgres_blocking::{Pipeline, Row};
use std::time::Duration;

/// The family of holds a primitive of `kind` takes (see `schema.sql`).
fn family(kind: Kind) -> &'static str {
    match kind {
        Kind::Semaphore { .. } => "semaphore",
        Kind::Read | Kind::Write => "rw",
        Kind::Lock | Kind::Fair | Kind::Leader => "lock",
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

pub(super) fn inspect(place: &PgPlace, deadline: std::time::Instant) -> Result<LockState> {
    let shared = &place.shared;
    let key = Some(place.key.as_str());
    let outcomes = shared.call(&place.key, deadline, |conn| {
        let mut pipeline = Pipeline::new();
        pipeline.push(&shared.sql.name, &[key])?;
        pipeline.push(&shared.sql.holds, &[key])?;
        pipeline.push(&shared.sql.waiting, &[key])?;
        conn.pipeline_atomic(&pipeline, deadline)
    })?;
    let [name, holds, waiting] = outcomes.as_slice() else {
        return Err(Error::Protocol(format!(
            "postgres: an inspection gave {} results",
            outcomes.len()
        )));
    };
    let mut state = state_of(place, name.rows().first(), holds.rows())
        .map_err(|error| Error::Protocol(format!("postgres: an inspection's rows: {error}")))?;
    if place.id.kind == Kind::Fair {
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
    place: &PgPlace,
    name: Option<&Row>,
    holds: &[Row],
) -> postgres_blocking::Result<LockState> {
    let kind = place.id.kind;
    let mut state = LockState::empty(&place.id.name);
    state.node = Some(place.shared.shown.clone());
    let mut declared = None;
    if let Some(name) = name {
        let fence = name.get::<u64>("fence")?;
        state.last_token = (fence > 0).then_some(fence);
        if let Some(held_as) = name.get::<Option<&str>>("family")? {
            if held_as != family(kind) {
                state.problems.push(format!(
                    "{:?} is held as a {held_as}, not a {}",
                    place.key,
                    kind.label()
                ));
                state.foreign = Some(place.key.clone());
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
