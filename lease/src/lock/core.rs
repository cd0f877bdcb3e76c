//! [`Core`]: what every lock of one client shares (its backend, waiters, local queues, watchdog
//! and ids) and what it knows of each lock, behind private fields. The per-lock bookkeeping (held
//! here, live holds, releases of unknown outcome, contenders and the hand-off's lane) lives in
//! one [`Registry`] and changes only through the named transitions here: [`Core::contend`],
//! [`Core::acquired`], [`Core::guard_gone`], [`Core::released`], [`Core::abandoned`],
//! [`Core::force_freed`], [`Core::take_unsettled`], and the hand-off's [`Core::claim`],
//! [`Core::granted`] and [`Core::passed`].

use super::baton::{Baton, Kept};
use super::handoff::{Claiming, Offer};
use super::registry::{Live, Registry, Unsettled};
use crate::backend::{Backend, LockId, Place, Rivals, Scope};
use crate::events::Events;
use crate::local_queue::{LocalQueues, Refused, Turn};
use crate::owner::{self, Ids};
use crate::waiters::Waiters;
use crate::watchdog::Watchdog;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a client is made of, as its builder puts it together.
pub(crate) struct Parts {
    pub(crate) backend: Box<dyn Backend>,
    pub(crate) waiters: Waiters,
    pub(crate) watchdog: Watchdog,
    pub(crate) max_local_waiters: usize,
    pub(crate) id: String,
    pub(crate) default_lease: Duration,
    pub(crate) events: Events,
    /// The name the user gave the client, if any.
    pub(crate) name: Option<String>,
}

/// The parts every lock of a client shares.
pub(crate) struct Core {
    backend: Box<dyn Backend>,
    waiters: Waiters,
    queues: LocalQueues<Scope>,
    watchdog: Watchdog,
    registry: Registry,
    ids: Ids,
    default_lease: Duration,
    events: Events,
    name: Option<String>,
}

impl Core {
    pub(crate) fn new(parts: Parts) -> Core {
        Core {
            backend: parts.backend,
            waiters: parts.waiters,
            queues: LocalQueues::new(parts.max_local_waiters),
            watchdog: parts.watchdog,
            registry: Registry::default(),
            ids: Ids::new(parts.id),
            default_lease: parts.default_lease,
            events: parts.events,
            name: parts.name,
        }
    }

    /// Where the client's events go (metrics, with the feature).
    pub(crate) fn events(&self) -> &Events {
        &self.events
    }

    /// The client's name in its metrics: the one it was given, else its id.
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    pub(crate) fn name(&self) -> &str {
        self.name.as_deref().unwrap_or(self.ids.client())
    }

    pub(crate) fn backend(&self) -> &dyn Backend {
        &*self.backend
    }

    pub(crate) fn waiters(&self) -> &Waiters {
        &self.waiters
    }

    pub(crate) fn watchdog(&self) -> &Watchdog {
        &self.watchdog
    }

    pub(crate) fn ids(&self) -> &Ids {
        &self.ids
    }

    /// The lease of a lock taken without one.
    pub(crate) fn default_lease(&self) -> Duration {
        self.default_lease
    }

    /// The owner id of the calling thread.
    pub(crate) fn thread_owner(&self) -> String {
        format!("{}:{}", self.ids.client(), owner::thread_id())
    }

    /// The deadline of one call to the backend that starts now.
    pub(crate) fn call_deadline(&self) -> Instant {
        crate::policy::after(self.backend.call_timeout())
    }

    /// The hold `owner` holds on the lock through a live guard, which an acquisition re-enters.
    pub(crate) fn reentrant(&self, id: &LockId, owner: &str) -> Option<Live> {
        self.reentrant_in(&id.scope, owner)
    }

    /// [`Core::reentrant`] for the primitive the client's bookkeeping knows as `scope` (the
    /// read side of the write lock being taken, say).
    pub(crate) fn reentrant_in(&self, scope: &Scope, owner: &str) -> Option<Live> {
        self.registry.reentrant(scope, owner)
    }

    /// A guard of `live`'s hold now exists, `owner`'s.
    pub(crate) fn acquired(&self, id: &LockId, owner: &str, live: &Live) {
        self.registry.acquired(&id.scope, owner, live);
    }

    /// Whether this client's threads may hand on a hold of the lock without the store: a plain
    /// lock, on a store that grants and counts tokens.
    pub(crate) fn hands_on(&self, place: &dyn Place) -> bool {
        place.grants().is_some() && self.backend.fenced()
    }

    /// Whether a hold of the lock taken from the store now (by an acquisition or a grant) should
    /// come with tokens reserved for this client's threads to hand it on: they may, and others
    /// wait in the local queue behind the one taking it.
    pub(crate) fn reserves_with_new_hold(&self, place: &dyn Place) -> bool {
        self.hands_on(place) && self.registry.contenders(&place.id().scope) > 1
    }

    /// The hold of this client on the lock that its threads may hand on, if one stands.
    pub(crate) fn baton(&self, id: &LockId) -> Option<Arc<Baton>> {
        self.registry.baton(&id.scope)
    }

    /// Whether `owner`'s guard of `hold` is the hold's last here, with nothing of it unsettled.
    pub(crate) fn sole_guard(&self, id: &LockId, owner: &str, hold: &str) -> bool {
        self.registry.sole_guard(&id.scope, owner, hold)
    }

    /// `owner`'s last guard of `hold` handed it on without the store (the store having seen
    /// `rivals` when it reserved the token).
    pub(crate) fn passed(&self, id: &LockId, owner: &str, hold: &str, rivals: Rivals) {
        self.registry.passed(&id.scope, owner, hold, rivals);
    }

    /// A guard of `hold` is gone, its release about to be sent.
    pub(crate) fn guard_gone(&self, id: &LockId, owner: &str, hold: &str) {
        self.registry.guard_gone(&id.scope, owner, hold);
    }

    /// A release of `owner` came back: the lock is held here still or not, and a release of
    /// unknown outcome is kept to send again.
    pub(crate) fn released(
        &self,
        id: &LockId,
        owner: &str,
        held_here: bool,
        unknown: Option<Unsettled>,
    ) {
        self.registry.released(&id.scope, owner, held_here, unknown);
    }

    /// A guard was abandoned: its hold lapses unless its release, sent before the owner's next
    /// acquisition, frees it first.
    pub(crate) fn abandoned(&self, id: &LockId, owner: &str, release: Unsettled) {
        self.registry.abandoned(&id.scope, owner, release);
    }

    /// The lock was deleted whoever held it: this client's waiters look again at once.
    pub(crate) fn force_freed(&self, place: &dyn Place) {
        self.registry.force_freed(&place.id().scope);
        self.waiters.notify(place.wake_key());
    }

    /// What became of a grant of the lock to `owner` as the hold `hold` could not be learnt:
    /// its withdrawal and the undoing of its claim are sent before the owner's next acquisition
    /// of the lock (each applies only to what exists: the grant unclaimed, or claimed).
    pub(crate) fn grant_unknown(&self, place: &dyn Place, owner: &str, hold: &Arc<str>) {
        let claim = place.grants().map(|grants| grants.claim_id(hold));
        for id in std::iter::once(hold.to_string()).chain(claim) {
            let release = Unsettled {
                owner: Arc::from(owner),
                hold: Arc::clone(hold),
                id,
            };
            self.registry.unanswered(&place.id().scope, owner, release);
        }
    }

    /// Takes `owner`'s releases of the lock of unknown outcome, to send them again.
    pub(crate) fn take_unsettled(&self, id: &LockId, owner: &str) -> Vec<Unsettled> {
        self.registry.take_unsettled(&id.scope, owner)
    }
}

impl Core {
    /// Waits for the calling thread's turn to contend for the lock in the store, until `deadline`
    /// (`None`: no limit).
    pub(crate) fn contend(
        &self,
        id: &LockId,
        owner: &str,
        deadline: Option<Instant>,
        cancel: Option<&crate::Cancel>,
    ) -> Result<Contention<'_>, (Refused, Option<Kept>)> {
        // A fair lock's waiters queue in the store, each on its own: locally, each owner is
        // alone.
        let queue_key = if id.kind.queues_locally() {
            id.scope.clone()
        } else {
            id.scope.alone(owner)
        };
        self.registry.contending(&queue_key);
        self.events.local_waiters(1);
        match self.queues.enter(&queue_key, deadline, cancel) {
            Ok(turn) => Ok(Contention {
                core: self,
                name: queue_key,
                offer: None,
                finished: false,
                _turn: turn,
            }),
            Err(refused) => {
                let kept = self.registry.contention_over(&queue_key, None);
                self.events.local_waiters(-1);
                Err((refused, kept))
            }
        }
    }

    /// The hold kept here for this client's contender, if one is.
    pub(crate) fn take_kept(&self, id: &LockId) -> Option<Kept> {
        self.registry.take_kept(&id.scope)
    }

    /// `baton`'s hold, kept here, is released through the store.
    pub(crate) fn baton_gone(&self, id: &LockId, baton: &Arc<Baton>) {
        self.registry.baton_gone(&id.scope, baton);
    }

    /// The last guard of `owner`'s hold `hold` left it here for the contender on its way.
    pub(crate) fn keep(&self, id: &LockId, owner: &str, hold: &str, kept: Kept) {
        self.registry.keep(&id.scope, owner, hold, kept);
    }

    /// What a release of the lock at its hold's last does about this client's contender.
    pub(crate) fn claim(&self, id: &LockId) -> Claiming {
        self.registry.claim(&id.scope)
    }

    /// A release granted the lock to this client's contender, the backend reporting `rivals`.
    pub(crate) fn granted(&self, id: &LockId, rivals: Rivals) {
        self.registry.granted(&id.scope, rivals);
    }
}

/// A thread's turn to contend for one lock in the store, and the offer it leaves while it sleeps.
/// Dropped, it withdraws the offer and passes the turn to the next thread.
pub(crate) struct Contention<'a> {
    core: &'a Core,
    name: Scope,
    offer: Option<Arc<Offer>>,
    /// Whether [`Contention::finish`] ended it.
    finished: bool,
    /// Held for its drop, which passes the turn on.
    _turn: Turn<'a, Scope>,
}

impl Contention<'_> {
    /// Leaves `offer` (closed) for releasers of this client.
    pub(crate) fn offer(&mut self, offer: &Arc<Offer>) {
        self.core.registry.offered(&self.name, offer);
        self.offer = Some(Arc::clone(offer));
    }

    /// Until when the contender lets other clients try first, after a run of grants.
    pub(crate) fn yield_until(&self) -> Option<Instant> {
        self.core.registry.yield_until(&self.name)
    }
}

impl Contention<'_> {
    /// Ends the contention: withdraws the offer and passes the turn on. The last thread of this
    /// client to leave the queue gets the hold kept here, if one is, to release.
    pub(crate) fn finish(mut self) -> Option<Kept> {
        self.finished = true;
        self.over()
    }

    fn over(&mut self) -> Option<Kept> {
        // The offer goes before the turn passes on: the next contender leaves its own.
        let kept = self
            .core
            .registry
            .contention_over(&self.name, self.offer.as_ref());
        self.core.events.local_waiters(-1);
        kept
    }
}

impl Drop for Contention<'_> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        if let Some(kept) = self.over() {
            // Not finished (a panic unwinding): the kept hold lapses with its lease.
            self.core.watchdog.unwatch(kept.watched.entry, None);
        }
    }
}
