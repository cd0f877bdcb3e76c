//! The lock recipe on ephemeral sequential nodes, as Curator's `InterProcessMutex` and kazoo's
//! `Lock` make it, and its hard cases:
//!
//! - A contender creates one node under the lock, named with a guid of its own turn; the lowest
//!   sequence holds the lock. A create whose reply was lost is looked for by that guid before
//!   any new create, so a contender never has two nodes in one queue.
//! - A contender that is not first watches only the node just before its own (no herd), and
//!   looks again when it goes. That node may go without ever having held the lock (its session
//!   expired while it waited): looking again, rather than assuming the lock passed, covers it.
//! - A contender whose node went while it waited (deleted by an operator) makes a new one.
//! - Re-entry is counted here, in the process, as Curator counts it; a re-entry first checks that
//!   the hold's node is still its session's.
//! - A hold's fencing token is its node's creation zxid: every later holder's node was created
//!   later, by the ensemble's one order of writes, so tokens rise strictly for each new holder
//!   of a name, across leader elections and reconnections.

use super::ensemble::unavailable;
use super::line::{Blocker, Line};
use super::offers::declare;
use super::paths::{self, token, Claim};
use super::reaper::Job;
use super::table::{HeldNode, Node, Waiting};
use super::{Ensembled, LockNode};
use crate::backend::Kind;
use crate::backend::{Attempt, Attempted, Release, ReleaseOutcome, Released};
use crate::error::{Error, Result};
use std::time::Instant;
use zookeeper_blocking::{CreateMode, Error as ZkError, Session};

/// How many times a contender whose node vanished from under it makes a new one in one attempt.
const NEW_NODES: usize = 2;

pub(super) fn attempt(
    place: &LockNode,
    attempt: &Attempt<'_>,
    deadline: Instant,
) -> Result<Attempted> {
    let zk = &*place.zk;
    let lock = place.path.clone();
    let session = zk.ensemble.session(deadline)?;
    if attempt.lease > session.timeout() {
        return Err(Error::InvalidArgument(format!(
            "a lease of {:?} is longer than the ZooKeeper session's timeout ({:?}): the session \
             is the lease, so a lease may not outlast it",
            attempt.lease,
            session.timeout()
        )));
    }
    if let Some(hold) = attempt.reenter {
        if let Some(reentered) = reenter(zk, &session, hold, attempt.now, deadline)? {
            return Ok(reentered);
        }
    }
    let claim = Claim::of(place.id.kind);
    let mut made = 0;
    let mut node = own_node(zk, &session, &lock, attempt, claim, deadline)?;
    loop {
        // The listing's answer proves the session (the lease) alive when it was asked. A
        // semaphore's contender may be let in by any node ahead going: it watches the listing.
        let asked_at = (attempt.now)();
        let children = session
            .get_children(&lock, matches!(claim, Claim::Take(_)), deadline)
            .map_err(|error| unavailable(&error))?
            .0;
        let queue = paths::queue(children);
        let name = paths::child_name(&node.path);
        let Some(at) = queue.iter().position(|(_, child)| child == name) else {
            // Deleted while it waited: its place is gone, and a new node queues at the end.
            zk.table
                .lock()
                .waiting
                .remove(&waiting_key(&lock, attempt.owner));
            made += 1;
            if made > NEW_NODES {
                return Ok(Attempted::Busy { ttl: None });
            }
            node = own_node(zk, &session, &lock, attempt, claim, deadline)?;
            continue;
        };
        if let Kind::Semaphore { permits, .. } = place.id.kind {
            if let Err(error) = declare(&session, &lock, permits, queue.len() > 1, deadline) {
                abandon(place, attempt.owner);
                return Err(error);
            }
        }
        let blocker = blocker(zk, place.id.kind, &lock, &queue[..at], attempt.owner);
        if blocker == Blocker::None {
            let mut table = zk.table.lock();
            table.waiting.remove(&waiting_key(&lock, attempt.owner));
            table.held.insert(
                attempt.id.to_owned(),
                HeldNode {
                    node: node.clone(),
                    owner: attempt.owner.to_owned(),
                    session: session.session_id(),
                    count: 1,
                    deleting: false,
                    ending: false,
                },
            );
            return Ok(Attempted::Acquired {
                holds: 1,
                token: Some(node.token),
                confirmed_at: Some(asked_at),
                reserved: None,
            });
        }
        let watched = match blocker {
            Blocker::Node(index) => index,
            // The listing is watched.
            Blocker::Any | Blocker::None => return Ok(Attempted::Busy { ttl: None }),
        };
        let predecessor = format!("{lock}/{}", queue[watched].1);
        match session.exists(&predecessor, true, deadline) {
            Ok(Some(_)) => return Ok(Attempted::Busy { ttl: None }),
            // Gone between the listing and the watch: look again.
            Ok(None) if Instant::now() < deadline => continue,
            Ok(None) => return Ok(Attempted::Busy { ttl: None }),
            Err(error) => return Err(unavailable(&error)),
        }
    }
}

/// What keeps an acquisition of `kind` by `owner` from holding the lock at `lock`, behind the
/// contenders `ahead` (see [`Line`]): a reader holds behind the write hold `owner` has in this
/// client (a downgrade).
fn blocker(
    zk: &Ensembled,
    kind: Kind,
    lock: &str,
    ahead: &[(u64, String)],
    owner: &str,
) -> Blocker {
    let table = zk.table.lock();
    let mut line = Line::default();
    for (_, child) in ahead {
        let claim = paths::claim(child);
        let own_write = kind == Kind::Read
            && claim == Some(Claim::Exclusive)
            && table
                .held_at(&format!("{lock}/{child}"))
                .is_some_and(|held| held.owner == owner);
        line.read(claim, own_write);
    }
    line.blocker(kind)
}

fn waiting_key(lock: &str, owner: &str) -> (String, String) {
    (lock.to_owned(), owner.to_owned())
}

/// Another acquisition of a hold this client has, if the hold's node is still its session's.
fn reenter(
    zk: &Ensembled,
    session: &Session,
    hold: &str,
    attempt_now: &(dyn Fn() -> Instant + Sync),
    deadline: Instant,
) -> Result<Option<Attempted>> {
    let sid = session.session_id();
    let Some(node) = zk
        .table
        .lock()
        .held
        .get(hold)
        .filter(|held| held.session == sid)
        .map(|held| held.node.clone())
    else {
        return Ok(None);
    };
    let asked_at = (attempt_now)();
    let stat = session
        .exists(&node.path, false, deadline)
        .map_err(|error| unavailable(&error))?;
    if stat.is_none_or(|stat| stat.ephemeral_owner != sid) {
        return Ok(None);
    }
    let mut table = zk.table.lock();
    let Some(held) = table.held.get_mut(hold).filter(|held| !held.ending) else {
        return Ok(None);
    };
    held.count += 1;
    Ok(Some(Attempted::Acquired {
        holds: held.count,
        token: Some(node.token),
        confirmed_at: Some(asked_at),
        reserved: None,
    }))
}

/// The contender's node under `lock`: the one it has, the one a lost create made (found by its
/// guid), or a new one.
fn own_node(
    zk: &Ensembled,
    session: &Session,
    lock: &str,
    attempt: &Attempt<'_>,
    claim: Claim,
    deadline: Instant,
) -> Result<Node> {
    let sid = session.session_id();
    let key = waiting_key(lock, attempt.owner);
    let waiting = {
        let mut table = zk.table.lock();
        let entry = table.waiting.entry(key.clone()).or_insert_with(|| Waiting {
            guid: attempt.id.to_owned(),
            session: sid,
            node: None,
            unanswered: false,
        });
        if entry.session != sid {
            // Its node went with its session.
            *entry = Waiting {
                guid: attempt.id.to_owned(),
                session: sid,
                node: None,
                unanswered: false,
            };
        }
        entry.clone()
    };
    if let Some(node) = waiting.node {
        return Ok(node);
    }
    // Only a create whose reply was lost can have left a node to find (as Curator's protected
    // mode looks only then): a fresh contender creates at once.
    let found = match waiting.unanswered {
        true => find(session, lock, &waiting.guid, deadline)?,
        false => None,
    };
    let node = match found {
        Some(node) => node,
        None => {
            let created = create(session, lock, &waiting.guid, attempt.owner, claim, deadline);
            // Any failure may hide an applied create (a lost reply, a connection that broke
            // mid-reply): the next attempt looks for its node first.
            if created.is_err() {
                if let Some(entry) = zk.table.lock().waiting.get_mut(&key) {
                    entry.unanswered = true;
                }
            }
            created?
        }
    };
    if let Some(entry) = zk.table.lock().waiting.get_mut(&key) {
        entry.node = Some(node.clone());
    }
    Ok(node)
}

/// The node the contender `guid` has under `lock`, if a create of its made one.
fn find(session: &Session, lock: &str, guid: &str, deadline: Instant) -> Result<Option<Node>> {
    let children = match session.get_children(lock, false, deadline) {
        Ok((children, _)) => children,
        Err(ZkError::NoNode) => return Ok(None),
        Err(error) => return Err(unavailable(&error)),
    };
    let Some(child) = children.iter().find(|child| paths::is_of(child, guid)) else {
        return Ok(None);
    };
    let path = format!("{lock}/{child}");
    match session.exists(&path, false, deadline) {
        Ok(Some(stat)) => Ok(Some(Node {
            path,
            token: token(stat.czxid)?,
        })),
        Ok(None) => Ok(None),
        Err(error) => Err(unavailable(&error)),
    }
}

/// Creates the contender's node, and the lock's node first if it is missing.
fn create(
    session: &Session,
    lock: &str,
    guid: &str,
    owner: &str,
    claim: Claim,
    deadline: Instant,
) -> Result<Node> {
    let prefix = paths::contender_prefix(lock, guid, claim);
    let mode = CreateMode::EphemeralSequential;
    let created = match session.create(&prefix, owner.as_bytes(), mode, deadline) {
        Err(ZkError::NoNode) => {
            session
                .ensure_path(lock, deadline)
                .map_err(|error| unavailable(&error))?;
            session.create(&prefix, owner.as_bytes(), mode, deadline)
        }
        created => created,
    };
    let (path, stat) = created.map_err(|error| unavailable(&error))?;
    Ok(Node {
        path,
        token: token(stat.czxid)?,
    })
}

/// Withdraws `owner`'s node from the queue of `keys`'s lock: deleted before this returns when
/// the ensemble answers within a call timeout, so that this client's next attempt never finds it
/// ahead in the queue (a semaphore's try would count it as a permit held); otherwise, and where
/// the node's create went unanswered, through the reaper.
pub(super) fn abandon(place: &LockNode, owner: &str) {
    let (zk, lock) = (&*place.zk, place.path.clone());
    let Some(waiting) = zk.table.lock().waiting.remove(&waiting_key(&lock, owner)) else {
        return;
    };
    let job = match waiting.node {
        Some(node) => {
            let session = zk
                .ensemble
                .current()
                .filter(|session| session.session_id() == waiting.session);
            if let Some(session) = session {
                let deadline = Instant::now() + zk.call_timeout;
                if let Ok(()) | Err(ZkError::NoNode) = session.delete(&node.path, None, deadline) {
                    return;
                }
            }
            Job::Node {
                path: node.path,
                session: waiting.session,
            }
        }
        None if waiting.unanswered => Job::Guid {
            lock,
            guid: waiting.guid,
            session: waiting.session,
        },
        // No create went out unanswered: there is no node.
        None => return,
    };
    zk.reaper.reap(job);
}

pub(super) fn release(
    place: &LockNode,
    release: &Release<'_>,
    deadline: Instant,
) -> ReleaseOutcome {
    let zk = &*place.zk;
    let settled = |released| ReleaseOutcome {
        released: Ok(released),
        settled: true,
    };
    let held = {
        let mut table = zk.table.lock();
        let Some(held) = table.held.get_mut(release.hold) else {
            let released = match table.was_released(release.id) {
                true => Released::AlreadyApplied,
                false => Released::NotOwner,
            };
            return settled(released);
        };
        if held.owner != release.owner {
            return settled(Released::NotOwner);
        }
        if held.count > 1 {
            held.count -= 1;
            return settled(Released::Applied {
                holds_left: held.count,
            });
        }
        held.clone()
    };
    let forget = |released| {
        let mut table = zk.table.lock();
        table.held.remove(release.hold);
        table.released(release.id);
        settled(released)
    };
    let Some(session) = zk
        .ensemble
        .current()
        .filter(|session| session.session_id() == held.session)
    else {
        // Its session expired, and its node with it.
        return forget(Released::NotOwner);
    };
    // A delete whose connection was lost may have been applied: it is sent again, once, within
    // the same deadline (a call made while the session reconnects waits for it).
    let mut deleted = session.delete(&held.node.path, None, deadline);
    let mut sent_before = held.deleting;
    if matches!(deleted, Err(ZkError::ConnectionLoss)) && Instant::now() < deadline {
        sent_before = true;
        deleted = session.delete(&held.node.path, None, deadline);
    }
    match deleted {
        Ok(()) => forget(Released::Applied { holds_left: 0 }),
        Err(ZkError::NoNode) if sent_before => forget(Released::AlreadyApplied),
        Err(ZkError::NoNode | ZkError::SessionExpired | ZkError::Closed) => {
            forget(Released::NotOwner)
        }
        Err(error) => {
            if let Some(held) = zk.table.lock().held.get_mut(release.hold) {
                held.deleting = true;
            }
            // Left in place, the node would keep the lock until the session ends.
            zk.reaper.reap(Job::Node {
                path: held.node.path.clone(),
                session: held.session,
            });
            ReleaseOutcome {
                released: Err(unavailable(&error)),
                settled: false,
            }
        }
    }
}
