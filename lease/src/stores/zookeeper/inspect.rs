//! What the lock holds, as an operator reads it, and its forced release.

use super::ensemble::unavailable;
use super::line::holding;
use super::paths::token;
use super::paths::{self, Claim};
use super::{Ensembled, LockNode};
use crate::backend::{Kind, Leading};
use crate::error::Result;
use crate::state::LockState;
use std::time::{Duration, Instant, SystemTime};
use zookeeper_blocking::{Error as ZkError, Session};

/// The lock as ZooKeeper holds it: the lowest node's owner, session, creation time and token,
/// and how many contenders wait behind it.
pub(super) fn inspect(place: &LockNode, deadline: Instant) -> Result<LockState> {
    let (zk, lock, kind) = (&*place.zk, place.path.clone(), place.id.kind);
    let session = zk.ensemble.session(deadline)?;
    let mut state = LockState::empty(&place.id.name);
    state.node = session.server();
    let children = match session.get_children(&lock, false, deadline) {
        Ok((children, _)) => children,
        Err(ZkError::NoNode) => return Ok(state),
        Err(error) => return Err(unavailable(&error)),
    };
    let queue = paths::queue(children);
    if kind.shared() {
        return inspect_shared(zk, &session, kind, &lock, &queue, state, deadline);
    }
    for (_, child) in &queue {
        let path = format!("{lock}/{child}");
        let (data, stat) = match session.get_data(&path, false, deadline) {
            Ok(found) => found,
            // Released meanwhile: the next one holds it.
            Err(ZkError::NoNode) => continue,
            Err(error) => return Err(unavailable(&error)),
        };
        let (owner, proclaimed) = paths::node_data(&data);
        let holds = zk.table.lock().held_at(&path).map_or(1, |held| held.count);
        state.holders = vec![(owner, holds)];
        state.proclaimed = proclaimed;
        state.hold_token = Some(token(stat.czxid)?);
        state.last_token = state.hold_token;
        state.holder_session = Some(format!("{:#x}", stat.ephemeral_owner));
        state.held_since = u64::try_from(stat.ctime)
            .ok()
            .map(|millis| SystemTime::UNIX_EPOCH + Duration::from_millis(millis));
        let place = queue.iter().position(|(_, queued)| queued == child);
        state.waiting = Some(place.map_or(0, |place| queue.len() - place - 1) as u64);
        return Ok(state);
    }
    state.waiting = Some(0);
    Ok(state)
}

/// The node that leads the election at `place` (the lowest), with what it proclaimed; with
/// `watch`, the listing and that node's data are watched, so that a new leader or value wakes
/// the election's waiters.
pub(super) fn leader(place: &LockNode, watch: bool, deadline: Instant) -> Result<Option<Leading>> {
    let (zk, lock) = (&*place.zk, &place.path);
    let session = zk.ensemble.session(deadline)?;
    let children = match session.get_children(lock, watch, deadline) {
        Ok((children, _)) => children,
        Err(ZkError::NoNode) if watch => {
            // Armed on the node's creation: the first campaign makes it.
            session
                .exists(lock, true, deadline)
                .map_err(|error| unavailable(&error))?;
            return Ok(None);
        }
        Err(ZkError::NoNode) => return Ok(None),
        Err(error) => return Err(unavailable(&error)),
    };
    for (_, child) in paths::queue(children) {
        match session.get_data(&format!("{lock}/{child}"), watch, deadline) {
            Ok((data, stat)) => {
                return Ok(Some(Leading {
                    term: token(stat.czxid)?,
                    value: paths::node_data(&data).1,
                    ttl: None,
                }))
            }
            // Gone since the listing, which the watch on it tells: the next one leads.
            Err(ZkError::NoNode) => continue,
            Err(error) => return Err(unavailable(&error)),
        }
    }
    Ok(None)
}

/// [`inspect`] of a semaphore or a side of a read-write lock: every node that holds it.
fn inspect_shared(
    zk: &Ensembled,
    session: &Session,
    kind: Kind,
    lock: &str,
    queue: &[(u64, String)],
    mut state: LockState,
    deadline: Instant,
) -> Result<LockState> {
    let holding = holding(kind, queue, |index| {
        owner_of(session, &format!("{lock}/{}", queue[index].1), deadline)
    })?;
    let mut in_use = 0u64;
    for &index in &holding {
        let child = &queue[index].1;
        let path = format!("{lock}/{child}");
        let (data, stat) = match session.get_data(&path, false, deadline) {
            Ok(found) => found,
            Err(ZkError::NoNode) => continue,
            Err(error) => return Err(unavailable(&error)),
        };
        let owner = String::from_utf8_lossy(&data).into_owned();
        let holds = zk.table.lock().held_at(&path).map_or(1, |held| held.count);
        state.holders.push((owner, holds));
        let token = token(stat.czxid)?;
        state.hold_token = state.hold_token.max(Some(token));
        state.last_token = state.hold_token;
        if let Some(Claim::Take(n)) = paths::claim(child) {
            in_use += u64::from(n);
        }
    }
    state.waiting = Some((queue.len() - holding.len()) as u64);
    if let Kind::Semaphore { permits, .. } = kind {
        state.permits = Some(u64::from(permits));
        state.permits_in_use = Some(in_use);
    }
    Ok(state)
}

/// The owner the node at `path` names, or `None` if it is gone.
fn owner_of(session: &Session, path: &str, deadline: Instant) -> Result<Option<String>> {
    match session.get_data(path, false, deadline) {
        Ok((data, _)) => Ok(Some(String::from_utf8_lossy(&data).into_owned())),
        Err(ZkError::NoNode) => Ok(None),
        Err(error) => Err(unavailable(&error)),
    }
}

/// Deletes the node that holds the lock (every node that holds a semaphore or a read-write
/// lock's side); whether there was one.
pub(super) fn force_release(place: &LockNode, deadline: Instant) -> Result<bool> {
    let (zk, lock, kind) = (&*place.zk, place.path.clone(), place.id.kind);
    let session = zk.ensemble.session(deadline)?;
    let children = match session.get_children(&lock, false, deadline) {
        Ok((children, _)) => children,
        Err(ZkError::NoNode) => return Ok(false),
        Err(error) => return Err(unavailable(&error)),
    };
    let queue = paths::queue(children);
    if kind.shared() {
        let mut deleted = false;
        let holding = holding(kind, &queue, |index| {
            owner_of(&session, &format!("{lock}/{}", queue[index].1), deadline)
        })?;
        for index in holding {
            match session.delete(&format!("{lock}/{}", queue[index].1), None, deadline) {
                Ok(()) => deleted = true,
                Err(ZkError::NoNode) => {}
                Err(error) => return Err(unavailable(&error)),
            }
        }
        return Ok(deleted);
    }
    for (_, child) in queue {
        match session.delete(&format!("{lock}/{child}"), None, deadline) {
            Ok(()) => return Ok(true),
            Err(ZkError::NoNode) => continue,
            Err(error) => return Err(unavailable(&error)),
        }
    }
    Ok(false)
}
