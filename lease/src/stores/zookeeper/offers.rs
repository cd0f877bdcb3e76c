//! What the semaphore and the election add to the recipe: a semaphore's number of permits,
//! stored in its lock node's data, checked by every acquisition and changed by a resize; and a
//! leader's proclamation, stored in its hold's node.

use super::ensemble::unavailable;
use super::paths;
use super::{inspect, LockNode};
use crate::backend::{Elects, Leading, Resizes};
use crate::error::{Error, Result};
use std::time::Instant;
use zookeeper_blocking::{Error as ZkError, Session};

impl Resizes for LockNode {
    fn resize(&self, permits: u32, deadline: Instant) -> Result<Option<u32>> {
        resize(self, permits, deadline)
    }
}

impl Elects for LockNode {
    fn proclaim(&self, owner: &str, hold: &str, value: &str, deadline: Instant) -> Result<bool> {
        proclaim(self, (owner, hold, value), deadline)
    }

    fn leader(&self, watch: bool, deadline: Instant) -> Result<Option<Leading>> {
        inspect::leader(self, watch, deadline)
    }
}

/// The leader of an election proclaims: `value` goes into its node's data, after its owner id
/// (see [`paths::node_data`]), if the node of its hold `hold` is still there; whether it was.
fn proclaim(
    place: &LockNode,
    (owner, hold, value): (&str, &str, &str),
    deadline: Instant,
) -> Result<bool> {
    let zk = &*place.zk;
    let held = zk.table.lock().held.get(hold).cloned();
    let Some(held) = held.filter(|held| held.owner == owner && !held.ending) else {
        return Ok(false);
    };
    let session = zk.ensemble.session(deadline)?;
    if session.session_id() != held.session {
        // Its session ended, and its node with it.
        return Ok(false);
    }
    let data = format!("{owner}{}{value}", paths::PROCLAIMED);
    match session.set_data(&held.node.path, data.as_bytes(), None, deadline) {
        Ok(_) => Ok(true),
        Err(ZkError::NoNode) => Ok(false),
        Err(error) => Err(unavailable(&error)),
    }
}

/// What a semaphore's node says of its number of permits, in its data: `permits=N`.
fn declared(data: &[u8]) -> Option<u32> {
    std::str::from_utf8(data)
        .ok()?
        .strip_prefix("permits=")?
        .parse()
        .ok()
}

/// Checks a semaphore's acquisition declaring `permits` against the number its node at `lock`
/// stores, which every contender declares while any other stands (`others`); stores it when
/// none does, or none is stored (with the node's version: two contenders that would store
/// different numbers at once are told apart, and the later one looks again).
pub(super) fn declare(
    session: &Session,
    lock: &str,
    permits: u32,
    others: bool,
    deadline: Instant,
) -> Result<()> {
    for _ in 0..3 {
        let (data, stat) = session
            .get_data(lock, false, deadline)
            .map_err(|error| unavailable(&error))?;
        match declared(&data) {
            Some(stored) if stored == permits => return Ok(()),
            Some(stored) if others => {
                return Err(Error::InvalidArgument(format!(
                    "the holders of semaphore {lock:?} declared {stored} permits, and this \
                     acquisition {permits}: resize the semaphore to change its number"
                )))
            }
            _ => {}
        }
        let data = format!("permits={permits}");
        match session.set_data(lock, data.as_bytes(), Some(stat.version), deadline) {
            Ok(_) => return Ok(()),
            // Another contender stored a number meanwhile: look at it.
            Err(ZkError::BadVersion) => continue,
            Err(error) => return Err(unavailable(&error)),
        }
    }
    Err(Error::Unavailable {
        server: session.server(),
        cause: crate::error::Cause::text(
            "zookeeper",
            format!("the number of permits of {lock:?} kept changing"),
        ),
    })
}

/// Makes `permits` the number of permits of the semaphore at `place`: the number declared
/// before, if any was.
fn resize(place: &LockNode, permits: u32, deadline: Instant) -> Result<Option<u32>> {
    let session = place.zk.ensemble.session(deadline)?;
    let lock = &place.path;
    session
        .ensure_path(lock, deadline)
        .map_err(|error| unavailable(&error))?;
    let (data, _) = session
        .get_data(lock, false, deadline)
        .map_err(|error| unavailable(&error))?;
    let data_now = format!("permits={permits}");
    session
        .set_data(lock, data_now.as_bytes(), None, deadline)
        .map_err(|error| unavailable(&error))?;
    Ok(declared(&data))
}
