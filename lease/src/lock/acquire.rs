//! One acquisition, for every store: the [`Contender`] finds its way to the lock; here, what it
//! came to is counted, a place it kept in the store while it waited is given up if it did not
//! get the lock, and a hold it got becomes a guard, watched by the watchdog from when its
//! attempt was sent. Also what the contender settles on its way: this owner's releases of
//! unknown outcome, and a grant a releaser of this client left it.

use super::contender::Contender;
use super::core::Core;
use super::guard::{Acquisition, LeaseGuard};
use super::handoff::Offer;
use super::release::{self, Grants, Holding};
use crate::backend::{HoldEnd, Place};
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::events::AcquireOutcome;
use crate::policy::{LeaseKind, Wait};
use crate::watchdog::Hold;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A hold just acquired, before its guard exists.
pub(super) struct Acquired {
    pub(super) hold: Arc<str>,
    pub(super) id: String,
    pub(super) token: Option<u64>,
    pub(super) holds: u64,
    /// When the command that made it was sent, on the watchdog's clock.
    pub(super) sent_at: Instant,
}

/// The lock an acquisition is for, and on whose behalf.
pub(crate) struct Request<'a> {
    pub(crate) core: &'a Arc<Core>,
    pub(crate) place: &'a Arc<dyn Place>,
    pub(crate) owner: String,
    /// The default lease, renewed, or a fixed one.
    pub(crate) lease: LeaseKind,
    pub(crate) max_hold: Option<Duration>,
    /// Ends the wait from another thread.
    pub(crate) cancel: Option<&'a Cancel>,
}

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

/// Sends again this owner's releases of the lock whose outcome is unknown, so that a hold the
/// owner believes released does not keep it waiting, all by `deadline`. Those still unanswered
/// are kept for next time; the acquisition goes on unless Redis refused (a hold left over only
/// makes it wait).
pub(super) fn settle_releases(lock: &Request<'_>, deadline: Instant) -> Result<()> {
    let (core, owner) = (lock.core, lock.owner.as_str());
    for unsettled in core.take_unsettled(lock.place.id(), owner) {
        // Not settled again: `send` remembers it again.
        let outcome = release::send(
            core,
            &**lock.place,
            owner,
            &unsettled.hold,
            &unsettled.id,
            deadline,
            Grants::No,
        );
        if outcome.settled {
            log::debug!(
                "an unsettled release of {:?} is settled",
                lock.place.id().name
            );
        }
        if let Err(error @ (Error::Refused { .. } | Error::WrongType { .. })) = outcome.released {
            return Err(error);
        }
    }
    Ok(())
}

/// Closes the contender's offer before it acts by itself, and returns the hold if a releaser of
/// this client granted it the lock meanwhile. If what became of a grant cannot be learnt, the
/// grant, claimed or not, is released before the owner's next acquisition of the lock (should
/// neither its releaser's withdrawal nor the claim's undoing have reached Redis).
pub(super) fn settle_offer(lock: &Request<'_>, offer: &Offer) -> Result<Option<Acquired>> {
    let core = lock.core;
    let now = core.watchdog().now();
    let taken = offer
        .settle(
            &**lock.place,
            core.backend().call_timeout(),
            now,
            core.call_deadline(),
        )
        .inspect_err(|_| core.grant_unknown(lock.place.id(), &lock.owner, offer.hold()))?;
    Ok(taken.map(|taken| Acquired {
        hold: Arc::clone(offer.hold()),
        id: taken.id,
        token: taken.token,
        holds: 1,
        sent_at: taken.sent_at,
    }))
}

/// The guard of a hold just acquired, watched by the watchdog from when it was sent. If the
/// watchdog cannot take it on, the hold is given back.
fn guard(lock: &Request<'_>, acquired: Acquired, lease: Duration) -> Result<LeaseGuard> {
    let (core, place, owner) = (lock.core, lock.place, lock.owner.as_str());
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
                owner,
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
    // A store whose holds outlive their lease ends a lost one as soon as its holder was told.
    let ending = Arc::clone(place);
    let hold = Arc::clone(&acquired.hold);
    watched.on_lost(Box::new(move |_| ending.ended(&hold, HoldEnd::Lost)));
    core.acquired(place.id(), owner, &acquired.hold);
    log::debug!(
        "lock {:?} acquired (token {:?}, holds {})",
        place.id().name,
        acquired.token,
        acquired.holds
    );
    Ok(LeaseGuard::new(Acquisition {
        holding: Holding::new(
            Arc::clone(core),
            Arc::clone(place),
            owner.to_owned(),
            acquired.hold,
            acquired.id,
        ),
        token: acquired.token,
        holds: acquired.holds,
        lease,
        watched,
    }))
}
