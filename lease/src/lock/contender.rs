//! The contender: one acquisition's way to the lock, as a small state machine, the same on every
//! store. It takes a turn in the client's local queue (a re-entry does not queue), takes a grant
//! or a hold a releaser of this client may have left it, then attempts through the lock's place;
//! the store answering "busy", it watches the lock, looks once more, and sleeps until a release
//! wakes it, a bounded re-check is due, or the wait is over. Where a thread of this client holds
//! the lock with a baton (`baton.rs`), a waiting contender does not ask the store whether the
//! lock is free: it sleeps on its offer, once it has had tokens reserved for the holder to hand
//! it, and asks the store for a fresh block first when few are left. An attempt that fails for
//! a passing reason (a failover) is made again shortly while a wait with a deadline lasts. What it
//! settles on its way (this owner's releases of unknown outcome, a grant a releaser left it) is
//! `settle.rs`'s.
//!
//! Clocks: the wait (its deadline, its pauses, its sleeps) runs on the caller's clock,
//! `Instant::now()`, which a caller's deadline is read on; only what concerns a hold (when its
//! attempt was sent, when the contender's offer opened) is read on the watchdog's clock, which
//! its lease is counted on.

use super::baton::{Baton, Passed, TOKENS_RESERVED};
use super::core::Contention;
use super::handoff::{Offer, Taker};
use super::registry::Live;
use super::release;
use super::request::{Acquired, Origin, Request};
use super::settle::{settle_offer, settle_releases};
use crate::backend::{Attempt, Attempted, Kind, ReserveFor};
use crate::cancel;
use crate::error::{Error, Result};
use crate::local_queue::Refused;
use crate::policy::Wait;
use crate::waiters::Watch;
use crate::watchdog;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a step leads to: on, or the acquisition's end (held, not held, failed).
enum Next {
    On,
    End(Result<Option<Acquired>>),
}

/// What one attempt came to.
enum Tried {
    Taken(Acquired),
    Busy(Option<Duration>),
    /// Failed for a passing reason: made again after a pause, from the top.
    Again,
    Failed(Error),
}

/// One acquisition's state between attempts.
pub(super) struct Contender<'a> {
    lock: &'a Request<'a>,
    lease: Duration,
    wait: Wait,
    started: Instant,
    /// Its turn in the local queue; `None` before it has one, and for a re-entry.
    turn: Option<Contention<'a>>,
    /// Once the store said busy: the watch on the lock, and the offer releasers may grant.
    waiting: Option<(Watch, Arc<Offer>)>,
    /// The deadline of the first attempt after entering the queue, which it shares with the
    /// releases sent again on entering.
    first_call_by: Option<Instant>,
    /// Whether the store ever answered busy.
    pub(super) contended: bool,
    /// Whether the last sleep ended by a wake rather than its time: a wake that brought no hold
    /// is a release through the store (or a forced one) to look at there.
    woken: bool,
}

impl<'a> Contender<'a> {
    pub(super) fn new(lock: &'a Request<'a>, lease: Duration, wait: Wait) -> Contender<'a> {
        Contender {
            lock,
            lease,
            wait,
            started: Instant::now(),
            turn: None,
            waiting: None,
            first_call_by: None,
            contended: false,
            woken: false,
        }
    }

    /// Runs the acquisition to its end.
    pub(super) fn run(&mut self) -> Result<Option<Acquired>> {
        self.refuse_an_upgrade()?;
        loop {
            if let Next::End(end) = self.step() {
                return end;
            }
        }
    }

    /// One round: a grant or a hold handed on, a turn, an attempt (unless a thread of this
    /// client holds the lock with a baton), and what a busy answer leads to.
    fn step(&mut self) -> Next {
        // What a releaser left first: a hold handed over is taken even by a wait that ends.
        match self.granted() {
            Ok(Some(acquired)) => {
                self.end_turn();
                return Next::End(Ok(Some(acquired)));
            }
            Ok(None) => {}
            Err(error) => return Next::End(Err(error)),
        }
        if self.lock.cancel.is_some_and(cancel::Cancel::is_cancelled) {
            return Next::End(Err(self.cancelled()));
        }
        let reenter = self.reentered_hold();
        if self.turn.is_none() && reenter.is_none() {
            if let Next::End(end) = self.take_turn() {
                return Next::End(end);
            }
        }
        if let Some(until) = self.turn.as_ref().and_then(Contention::yield_until) {
            cancel::sleep_until(self.lock.cancel, until);
        }
        if let Some(acquired) = self.take_kept() {
            self.end_turn();
            return Next::End(Ok(Some(acquired)));
        }
        let baton = match (&reenter, &self.wait) {
            (None, Wait::Until(_)) => self.lock.core.baton(self.lock.place.id()),
            _ => None,
        };
        let woken = std::mem::take(&mut self.woken);
        if let Some(baton) = baton.as_ref().filter(|_| !woken) {
            let now = self.lock.core.watchdog().now();
            if self.waiting.is_none() || (baton.can_pass(now) && !baton.running_low()) {
                // Held here: watch first, then sleep until the holder hands it on.
                return self.busy(None);
            }
        }
        match self.attempt(reenter, baton.as_deref()) {
            Tried::Taken(acquired) => Next::End(Ok(Some(acquired))),
            Tried::Busy(ttl) => self.busy(ttl),
            Tried::Again => Next::On,
            Tried::Failed(error) => Next::End(Err(error)),
        }
    }

    /// A read hold of this client cannot become a write hold: the writer would wait for itself.
    fn refuse_an_upgrade(&self) -> Result<()> {
        let (core, id, owner) = (self.lock.core, self.lock.place.id(), &self.lock.owner);
        let reads = core
            .reentrant_in(&id.scope.of_kind(Kind::Read), owner)
            .is_some();
        if id.kind == Kind::Write && reads && core.reentrant(id, owner).is_none() {
            return Err(Error::InvalidArgument(format!(
                "{owner} holds the read lock of {:?}: a read lock cannot be upgraded to a write \
                 lock (the writer would wait for itself); release it first",
                id.name
            )));
        }
        Ok(())
    }

    /// The hold this owner holds through a live guard, which a re-entry names.
    fn reentered_hold(&self) -> Option<Live> {
        let id = self.lock.place.id();
        id.kind
            .reentrant()
            .then(|| self.lock.core.reentrant(id, &self.lock.owner))
            .flatten()
    }

    /// Waits for this thread's turn in the local queue, then sends again this owner's releases
    /// of unknown outcome, so that a hold it believes released does not keep it waiting.
    fn take_turn(&mut self) -> Next {
        let core = self.lock.core;
        let id = self.lock.place.id();
        let deadline = self.wait.deadline(self.started);
        let refused = match core.contend(id, &self.lock.owner, deadline, self.lock.cancel) {
            Ok(turn) => {
                self.turn = Some(turn);
                None
            }
            Err((refused, kept)) => {
                if let Some(kept) = kept {
                    release::release_kept(core, kept);
                }
                Some(refused)
            }
        };
        match refused {
            None => {}
            Some(Refused::Full { waiting }) => {
                return Next::End(Err(Error::QueueFull {
                    name: id.name.clone(),
                    waiting,
                }))
            }
            Some(Refused::TimedOut) => return Next::End(self.wait.gave_up(&id.name, self.started)),
            Some(Refused::Cancelled) => return Next::End(Err(self.cancelled())),
        }
        let call_by = core.call_deadline();
        if let Err(error) = settle_releases(self.lock, call_by) {
            return Next::End(Err(error));
        }
        self.first_call_by = Some(call_by);
        Next::On
    }

    /// Takes the hold a releaser of this client kept here for this contender, if one did and
    /// it fits (the same renewed lease, a token left, known valid for a third of its lease
    /// more); a kept hold that does not fit is released through the store.
    fn take_kept(&self) -> Option<Acquired> {
        let core = self.lock.core;
        let id = self.lock.place.id();
        self.turn.as_ref()?;
        let kept = core.take_kept(id)?;
        let baton = &kept.baton;
        let fits = baton.fits(self.lock.lease.renewed(), self.lease);
        let token = fits.then(|| baton.take_token()).flatten();
        let holder: Arc<str> = Arc::from(self.lock.owner.as_str());
        let margin = baton.pass_margin();
        let handed = token.and_then(|_| {
            core.watchdog()
                .hand_over(kept.watched.entry, &holder, self.lock.max_hold, margin)
        });
        let (Some((token, rivals)), Some(watched)) = (token, handed) else {
            release::release_kept(core, kept);
            return None;
        };
        baton.passed(holder, token, Arc::clone(&watched.status));
        core.granted(id, rivals);
        Some(Acquired {
            hold: Arc::clone(baton.hold()),
            id: kept.id.clone(),
            token: Some(token),
            holds: 1,
            sent_at: core.watchdog().now(),
            reserved: None,
            origin: Origin::Passed(Passed {
                baton: Arc::clone(baton),
                id: kept.id,
                token,
                watched,
            }),
        })
    }

    /// Ends this thread's turn in the local queue, passing it on; the last thread of this
    /// client to leave releases the hold kept here, if one is.
    fn end_turn(&mut self) {
        if let Some(kept) = self.turn.take().and_then(Contention::finish) {
            release::release_kept(self.lock.core, kept);
        }
    }

    /// The hold a releaser of this client granted or handed on while this thread slept, if
    /// one did.
    pub(super) fn granted(&self) -> Result<Option<Acquired>> {
        match &self.waiting {
            Some((_, offer)) => settle_offer(self.lock, offer),
            None => Ok(None),
        }
    }

    /// One attempt in the store; with `baton`, the holder of this client it finds holding the
    /// lock gets tokens reserved to hand on. One that failed for a passing reason (a failover)
    /// while a wait with a deadline lasts is made again after a pause.
    fn attempt(&mut self, reenter: Option<Live>, baton: Option<&Baton>) -> Tried {
        let core = self.lock.core;
        let acquisition = core.ids().next();
        let sent_at = core.watchdog().now();
        let now = || core.watchdog().now();
        let owner = reenter
            .as_ref()
            .map_or(self.lock.owner.as_str(), |live| &*live.store_owner);
        let attempt = Attempt {
            owner,
            lease: self.lease,
            id: &acquisition,
            reenter: reenter.as_ref().map(|live| &*live.hold),
            valid_until: watchdog::valid_until(sent_at, self.lease),
            now: &now,
            waits: !matches!(self.wait, Wait::No),
            reserve: self.reserve(reenter.is_some(), baton),
        };
        let call_by = self
            .first_call_by
            .take()
            .unwrap_or_else(|| core.call_deadline());
        match self.lock.place.attempt(&attempt, call_by) {
            Ok(Attempted::Busy { ttl }) => Tried::Busy(ttl),
            Ok(Attempted::Reserved { ttl, reserved }) => {
                if let Some(baton) = baton {
                    baton.reserved(reserved);
                }
                Tried::Busy(ttl)
            }
            Ok(Attempted::Acquired {
                holds,
                token,
                confirmed_at,
                reserved,
            }) => {
                let (hold, origin) = match (holds, reenter) {
                    (1, _) => (Arc::from(acquisition.as_str()), Origin::Store),
                    (_, Some(live)) => (Arc::clone(&live.hold), Origin::Reentered(live)),
                    (_, None) => {
                        return Tried::Failed(Error::Protocol(format!(
                            "an acquisition of {:?} re-entered a hold it did not name",
                            self.lock.place.id().name
                        )))
                    }
                };
                self.end_turn();
                Tried::Taken(Acquired {
                    hold,
                    id: acquisition,
                    token,
                    holds,
                    sent_at: confirmed_at.map_or(sent_at, |at| at.max(sent_at)),
                    reserved,
                    origin,
                })
            }
            Err(error) => match self.wait.retry_at(&error) {
                Some(at) => {
                    log::debug!(
                        "lock {:?}: {error}; trying again",
                        self.lock.place.id().name
                    );
                    cancel::sleep_until(self.lock.cancel, at);
                    Tried::Again
                }
                None => Tried::Failed(error),
            },
        }
    }

    /// The tokens an attempt asks the store to reserve: for `baton`'s hold, found holding the
    /// lock; or past a new hold's own where other threads of this client wait behind this one.
    fn reserve<'b>(&self, reenters: bool, baton: Option<&'b Baton>) -> Option<ReserveFor<'b>> {
        let core = self.lock.core;
        let watching = self.waiting.is_some();
        let renewed = self.lock.lease.renewed();
        match baton {
            _ if reenters => None,
            // Only for a hold this contender could take: the same lease, renewed.
            Some(baton) if baton.fits(renewed, self.lease) => Some(ReserveFor {
                holder: Some(baton.hold()),
                count: TOKENS_RESERVED,
                watching,
            }),
            Some(_) => None,
            None if renewed && core.reserves_with_new_hold(&**self.lock.place) => {
                Some(ReserveFor {
                    holder: None,
                    count: TOKENS_RESERVED - 1,
                    watching,
                })
            }
            None => None,
        }
    }

    /// The store said busy, the holder having about `ttl` left: give up, or watch and look
    /// once more, or sleep until woken.
    fn busy(&mut self, ttl: Option<Duration>) -> Next {
        self.contended = true;
        let deadline = match self.wait {
            Wait::No => return Next::End(Ok(None)),
            Wait::Until(deadline) => deadline,
        };
        let now = Instant::now();
        if deadline.is_some_and(|deadline| now >= deadline) {
            let name = &self.lock.place.id().name;
            return Next::End(self.wait.gave_up(name, self.started));
        }
        let pause = now + self.lock.core.backend().pause(ttl);
        let until = deadline.map_or(pause, |deadline| deadline.min(pause));
        let Some(turn) = &mut self.turn else {
            // A re-entry refused: its hold may be gone, or (RedLock) too few masters answered.
            // Queueing could wait behind a thread that waits for this very hold: it looks again
            // after a pause instead.
            cancel::sleep_until(self.lock.cancel, until);
            return Next::On;
        };
        let Some((watch, offer)) = &self.waiting else {
            // Watch, then look again: a release between the attempt and the watch would
            // otherwise go unseen until the next re-check.
            let core = self.lock.core;
            let confirm_by = core.call_deadline();
            let confirm_by = deadline.map_or(confirm_by, |deadline| deadline.min(confirm_by));
            let watch = core.waiters().watch(self.lock.place.wake_key(), confirm_by);
            let hold: Arc<str> = Arc::from(core.ids().next().as_str());
            let taker = Taker {
                owner: self.lock.owner.clone(),
                lease: self.lease,
                renewed: self.lock.lease.renewed(),
                max_hold: self.lock.max_hold,
            };
            let offer = Offer::new(taker, hold);
            turn.offer(&offer);
            self.waiting = Some((watch, offer));
            return Next::On;
        };
        offer.open(self.lock.core.watchdog().now());
        self.woken = watch.wait_or_cancel(until, self.lock.cancel);
        Next::On
    }

    fn cancelled(&self) -> Error {
        Error::Cancelled {
            name: self.lock.place.id().name.clone(),
        }
    }
}

impl Drop for Contender<'_> {
    fn drop(&mut self) {
        self.end_turn();
    }
}
