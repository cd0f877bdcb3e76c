//! One acquisition, for every store: the [`Contender`] finds its way to the lock; here, what it
//! came to is counted, a place it kept in the store while it waited is given up if it did not
//! get the lock, and a hold it got becomes a guard, watched by the watchdog from when its
//! attempt was sent (or, handed on by another thread, watched as it was already).

use super::baton::Baton;
use super::contender::Contender;
use super::guard::{Acquisition, LeaseGuard};
use super::registry::Live;
use super::release::{self, Grants, Holding, HoldingOf};
use super::request::{Acquired, Origin, Request};
use crate::backend::HoldEnd;
use crate::error::{Error, Result};
use crate::events::AcquireOutcome;
use crate::policy::Wait;
use crate::watchdog::{Hold, Watched};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Takes the lock for `lock`'s owner, waiting as `wait` says: the guard, `None` if the lock
/// stayed held (one attempt), or why not.
pub(crate) fn acquire(lock: &Request<'_>, wait: Wait) -> Result<Option<LeaseGuard>> {
    let started = Instant::now();
    let lease = lock.lease.lease(lock.core.default_lease())?;
    let mut contender = Contender::new(lock, lease, wait);
    let acquired = contender.run().and_then(|acquired| {
        acquired
            .map(|acquired| guard(lock, acquired, lease))
            .transpose()
    });
    let contended = contender.contended;
    if !matches!(acquired, Ok(Some(_))) {
        // A hold a releaser handed over as the wait ended is released, not left to the
        // watchdog (the contender takes one first whenever it can: this is a safety net).
        if let Ok(Some(left)) = contender.granted() {
            drop(guard(lock, left, lease));
        }
    }
    drop(contender);
    let outcome = match &acquired {
        Ok(Some(_)) if contended => AcquireOutcome::Contended,
        Ok(Some(_)) => AcquireOutcome::Uncontended,
        Ok(None) | Err(Error::Timeout { .. }) => AcquireOutcome::TimedOut,
        Err(Error::Cancelled { .. }) => AcquireOutcome::Cancelled,
        Err(_) => AcquireOutcome::Error,
    };
    lock.core.events().acquisition(outcome, started.elapsed());
    if !matches!(acquired, Ok(Some(_))) {
        // A backend that keeps a contender's place in the server while it waits (ZooKeeper's
        // nodes) gives it up, or it would stand in the queue ahead of later contenders.
        let waited = !matches!(wait, Wait::No);
        lock.place.abandon(&lock.owner, waited);
    }
    acquired
}

/// The guard of a hold just acquired, watched by the watchdog from when it was sent. If the
/// watchdog cannot take it on, the hold is given back. A hold handed on by another thread is
/// watched already.
fn guard(lock: &Request<'_>, acquired: Acquired, lease: Duration) -> Result<LeaseGuard> {
    let (core, place, owner) = (lock.core, lock.place, lock.owner.as_str());
    let (watched, live) = match acquired.origin {
        Origin::Passed(passed) => {
            let live = Live {
                hold: Arc::clone(&acquired.hold),
                store_owner: Arc::clone(passed.baton.store_owner()),
                baton: Some(passed.baton),
            };
            (passed.watched, live)
        }
        Origin::Reentered(ref live) => (watch(lock, &acquired, lease)?, live.clone()),
        Origin::Store => {
            let watched = watch(lock, &acquired, lease)?;
            let batons = core.hands_on(&**place) && lock.lease.renewed();
            let baton = match acquired.token {
                Some(token) if batons => Some(Baton::new(
                    Arc::from(owner),
                    Arc::clone(&acquired.hold),
                    lease,
                    token,
                    Arc::clone(&watched.status),
                )),
                _ => None,
            };
            if let (Some(baton), Some(reserved)) = (&baton, acquired.reserved) {
                baton.reserved(reserved);
            }
            let live = Live {
                hold: Arc::clone(&acquired.hold),
                store_owner: Arc::from(owner),
                baton,
            };
            (watched, live)
        }
    };
    // A store whose holds outlive their lease ends a lost one as soon as its holder was told.
    let ending = Arc::clone(place);
    let hold = Arc::clone(&acquired.hold);
    watched.on_lost(Box::new(move |_| ending.ended(&hold, HoldEnd::Lost)));
    core.acquired(place.id(), owner, &live);
    match acquired.token {
        Some(token) => log::debug!(
            "lock {:?} acquired (token {token}, holds {})",
            place.id().name,
            acquired.holds
        ),
        None => log::debug!(
            "lock {:?} acquired (no token, holds {})",
            place.id().name,
            acquired.holds
        ),
    }
    Ok(LeaseGuard::new(Acquisition {
        holding: Holding::new(
            Arc::clone(core),
            Arc::clone(place),
            HoldingOf {
                owner: owner.to_owned(),
                store_owner: live.store_owner,
                hold: acquired.hold,
                id: acquired.id,
                baton: live.baton,
            },
        ),
        token: acquired.token,
        holds: acquired.holds,
        lease,
        watched,
    }))
}

/// Watches a hold taken from the store, from when its attempt was sent. If the watchdog cannot
/// take it on, the hold is given back.
fn watch(lock: &Request<'_>, acquired: &Acquired, lease: Duration) -> Result<Watched> {
    let (core, place, owner) = (lock.core, lock.place, lock.owner.as_str());
    let store_owner = match &acquired.origin {
        Origin::Reentered(live) => &*live.store_owner,
        Origin::Store | Origin::Passed(_) => owner,
    };
    let watched = core.watchdog().watch(Hold {
        name: Arc::from(place.id().name.as_str()),
        address: place.hold_address(&acquired.hold),
        owner: Arc::from(owner),
        hold: Arc::clone(&acquired.hold),
        lease,
        renew: lock.lease.renewed(),
        max_hold: lock.max_hold,
        sent_at: acquired.sent_at,
    });
    let watched = match watched {
        Ok(watched) => watched,
        Err(error) => {
            let outcome = release::send(
                core,
                &**place,
                store_owner,
                &acquired.hold,
                &acquired.id,
                core.call_deadline(),
                Grants::Allowed,
            );
            if let Err(release) = outcome.released {
                log::warn!(
                    "giving back lock {:?} that could not be watched failed: {release}",
                    place.id().name
                );
            }
            return Err(error);
        }
    };
    Ok(watched)
}
