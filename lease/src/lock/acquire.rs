//! The one acquire loop, for every deployment: a turn in the local queue, then attempts through
//! the backend until the lock is held or the wait is over, sleeping between attempts until a
//! release wakes the waiter (an announcement, or a release by a thread of this client, which may
//! grant the lock to the sleeping contender directly), or until a bounded re-check is due. A wait
//! with a deadline rides out a deployment that cannot serve for a while (a failover): an attempt
//! that fails for a passing reason is made again, shortly, until the deadline.

use super::core::Core;
use super::guard::{Acquisition, LeaseGuard};
use super::handoff::Offer;
use super::release::{self, Grants, Holding};
use crate::backend::{scope, Attempt, Attempted, HoldEnd, Kind, Place};
use crate::cancel::{self, Cancel};
use crate::error::{Error, Result};
use crate::events::AcquireOutcome;
use crate::local_queue::Refused;
use crate::policy::{LeaseKind, Wait};

use crate::waiters::Watch;
use crate::watchdog::{self, Hold};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A hold just acquired, before its guard exists.
struct Acquired {
    hold: Arc<str>,
    id: String,
    token: Option<u64>,
    holds: u64,
    /// When the command that made it was sent, on the watchdog's clock.
    sent_at: Instant,
}

/// The lock an acquisition is for, and on whose behalf.
pub(crate) struct Request<'a> {
    pub(crate) core: &'a Arc<Core>,
    pub(crate) place: &'a Arc<dyn Place>,
    pub(crate) owner: String,
    pub(crate) max_hold: Option<Duration>,
    /// Ends the wait from another thread.
    pub(crate) cancel: Option<&'a Cancel>,
}

pub(crate) fn acquire(
    lock: &Request<'_>,
    kind: LeaseKind,
    wait: Wait,
) -> Result<Option<LeaseGuard>> {
    let started = Instant::now();
    let mut contended = false;
    let acquired = contend(lock, kind, wait, &mut contended);
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

/// The acquisition itself: the local queue, then attempts until held or given up.
fn contend(
    lock: &Request<'_>,
    kind: LeaseKind,
    wait: Wait,
    contended: &mut bool,
) -> Result<Option<LeaseGuard>> {
    let core = lock.core;
    let place = lock.place;
    let id = place.id();
    let lease = kind.lease(core.default_lease())?;
    let started = Instant::now();
    let owner = lock.owner.clone();
    // The releases sent again on entering the queue and the attempt after them share one
    // command timeout, however many releases there are: a call that does not wait returns
    // within it.
    let mut first_call_by = None;
    // A re-entry does not queue: the thread ahead of it may be waiting for this very hold. Once
    // the owner holds the lock no more (its guards gone), it queues as any contender.
    let mut turn = None;
    let mut waiting: Option<(Watch, Arc<Offer>)> = None;
    if id.kind == Kind::Write
        && core.reentrant(id, &owner).is_none()
        && core
            .reentrant_in(&scope(&id.name, Kind::Read), &owner)
            .is_some()
    {
        return Err(Error::InvalidArgument(format!(
            "{owner} holds the read lock of {:?}: a read lock cannot be upgraded to a write \
             lock (the writer would wait for itself); release it first",
            id.name
        )));
    }
    let cancelled = || lock.cancel.is_some_and(Cancel::is_cancelled);
    loop {
        if cancelled() {
            return Err(Error::Cancelled {
                name: id.name.clone(),
            });
        }
        let reenter = if id.kind.reentrant() {
            core.reentrant(id, &owner)
        } else {
            None
        };
        if turn.is_none() && reenter.is_none() {
            turn = match core.contend(id, &owner, wait.deadline(started), lock.cancel) {
                Ok(turn) => Some(turn),
                Err(Refused::Full { waiting }) => {
                    return Err(Error::QueueFull {
                        name: id.name.clone(),
                        waiting,
                    })
                }
                Err(Refused::TimedOut) => return wait.gave_up(&id.name, started),
                Err(Refused::Cancelled) => {
                    return Err(Error::Cancelled {
                        name: id.name.clone(),
                    })
                }
            };
            let call_by = core.call_deadline();
            settle_releases(lock, &owner, call_by)?;
            first_call_by = Some(call_by);
        }
        // A releaser of this client may have granted the lock while this thread slept.
        if let Some((_, offer)) = &waiting {
            if let Some(acquired) = settle_offer(lock, offer)? {
                drop(turn);
                return guard(lock, &owner, acquired, lease, kind).map(Some);
            }
        }
        if let Some(until) = turn.as_ref().and_then(|turn| turn.yield_until()) {
            cancel::sleep_until(lock.cancel, until);
        }
        let acquisition = core.ids().next();
        let sent_at = core.watchdog().now();
        let now = || core.watchdog().now();
        let attempt = Attempt {
            owner: &owner,
            lease,
            id: &acquisition,
            reenter: reenter.as_deref(),
            valid_until: watchdog::valid_until(sent_at, lease),
            now: &now,
            waits: !matches!(wait, Wait::No),
        };
        let call_by = first_call_by.take().unwrap_or_else(|| core.call_deadline());
        let attempted = match place.attempt(&attempt, call_by) {
            Ok(attempted) => attempted,
            Err(error) => match wait.retry_at(&error) {
                Some(at) => {
                    log::debug!("lock {:?}: {error}; trying again", id.name);
                    cancel::sleep_until(lock.cancel, at);
                    continue;
                }
                None => return Err(error),
            },
        };
        match attempted {
            Attempted::Acquired {
                holds,
                token,
                confirmed_at,
            } => {
                let hold = match (holds, reenter) {
                    (1, _) => Arc::from(acquisition.as_str()),
                    (_, Some(hold)) => hold,
                    (_, None) => {
                        return Err(Error::Protocol(format!(
                            "an acquisition of {:?} re-entered a hold it did not name",
                            id.name
                        )))
                    }
                };
                drop(turn);
                let acquired = Acquired {
                    hold,
                    id: acquisition,
                    token,
                    holds,
                    sent_at: confirmed_at.map_or(sent_at, |at| at.max(sent_at)),
                };
                return guard(lock, &owner, acquired, lease, kind).map(Some);
            }
            Attempted::Busy { ttl } => {
                *contended = true;
                let deadline = match wait {
                    Wait::No => return Ok(None),
                    Wait::Until(deadline) => deadline,
                };
                let now = Instant::now();
                if deadline.is_some_and(|deadline| now >= deadline) {
                    return wait.gave_up(&id.name, started);
                }
                let Some(turn) = &mut turn else {
                    // A re-entry refused: its hold may be gone, or (RedLock) too few masters
                    // answered. Queueing could wait behind a thread that waits for this hold:
                    // it looks again after a pause instead.
                    let pause = now + core.backend().pause(ttl);
                    let until = deadline.map_or(pause, |d| d.min(pause));
                    cancel::sleep_until(lock.cancel, until);
                    continue;
                };
                let Some((watch, offer)) = &waiting else {
                    // Watch, then look again: a release between the attempt and the watch would
                    // otherwise go unseen until the next re-check.
                    let confirm_by = core.call_deadline();
                    let confirm_by = deadline.map_or(confirm_by, |d| d.min(confirm_by));
                    let watch = core.waiters().watch(place.wake_key(), confirm_by);
                    let hold: Arc<str> = Arc::from(core.ids().next().as_str());
                    let offer = Offer::new(owner.clone(), hold, lease);
                    turn.offer(&offer);
                    waiting = Some((watch, offer));
                    continue;
                };
                let pause = now + core.backend().pause(ttl);
                let until = deadline.map_or(pause, |d| d.min(pause));
                offer.open(core.watchdog().now());
                watch.wait_or_cancel(until, lock.cancel);
            }
        }
    }
}

/// Sends again this owner's releases of the lock whose outcome is unknown, so that a hold the
/// owner believes released does not keep it waiting, all by `deadline`. Those still unanswered
/// are kept for next time; the acquisition goes on unless Redis refused (a hold left over only
/// makes it wait).
fn settle_releases(lock: &Request<'_>, owner: &str, deadline: Instant) -> Result<()> {
    let core = lock.core;
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
fn settle_offer(lock: &Request<'_>, offer: &Offer) -> Result<Option<Acquired>> {
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
fn guard(
    lock: &Request<'_>,
    owner: &str,
    acquired: Acquired,
    lease: Duration,
    kind: LeaseKind,
) -> Result<LeaseGuard> {
    let core = lock.core;
    let place = lock.place;
    let watched = core.watchdog().watch(Hold {
        name: Arc::from(place.id().name.as_str()),
        address: place.hold_address(&acquired.hold),
        owner: Arc::from(owner),
        hold: Arc::clone(&acquired.hold),
        lease,
        renew: kind.renewed(),
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
