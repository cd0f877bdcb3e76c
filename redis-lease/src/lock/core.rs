//! [`Core`]: what every lock of one client shares (its backend, waiters, local queues, watchdog
//! and ids) and what it knows of each lock, behind private fields. The per-lock bookkeeping (held
//! here, live holds, releases of unknown outcome) lives in one [`Registry`] and changes only
//! through the named transitions here: [`Core::acquired`], [`Core::guard_gone`],
//! [`Core::released`], [`Core::abandoned`], [`Core::force_freed`], [`Core::take_unsettled`].

use super::registry::{Registry, Unsettled};
use crate::backend::Backend;
use crate::keys::LockKeys;
use crate::local_queue::LocalQueues;
use crate::owner::{self, Ids};
use crate::pubsub::Waiters;
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
    pub(crate) prefix: String,
}

/// The parts every lock of a client shares.
pub(crate) struct Core {
    backend: Box<dyn Backend>,
    waiters: Waiters,
    queues: LocalQueues,
    watchdog: Watchdog,
    registry: Registry,
    ids: Ids,
    default_lease: Duration,
    prefix: String,
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
            prefix: parts.prefix,
        }
    }

    pub(crate) fn backend(&self) -> &dyn Backend {
        &*self.backend
    }

    pub(crate) fn waiters(&self) -> &Waiters {
        &self.waiters
    }

    pub(crate) fn queues(&self) -> &LocalQueues {
        &self.queues
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

    /// The prefix of every key and channel.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
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
    pub(crate) fn reentrant(&self, keys: &LockKeys, owner: &str) -> Option<Arc<str>> {
        self.registry.reentrant(&keys.name, owner)
    }

    /// A guard of `hold` now exists.
    pub(crate) fn acquired(&self, keys: &LockKeys, owner: &str, hold: &Arc<str>) {
        self.queues.set_held_here(&keys.name, true);
        self.registry.acquired(&keys.name, owner, hold);
    }

    /// A guard of `hold` is gone, its release about to be sent.
    pub(crate) fn guard_gone(&self, keys: &LockKeys, owner: &str, hold: &str) {
        self.registry.guard_gone(&keys.name, owner, hold);
    }

    /// A release of `owner` came back: the lock is held here still or not, and a release of
    /// unknown outcome is kept to send again.
    pub(crate) fn released(
        &self,
        keys: &LockKeys,
        owner: &str,
        held_here: bool,
        unknown: Option<Unsettled>,
    ) {
        self.registry
            .released(&keys.name, owner, held_here, unknown);
        self.queues.set_held_here(&keys.name, held_here);
    }

    /// A guard was abandoned: its hold lapses unless its release, sent before the owner's next
    /// acquisition, frees it first.
    pub(crate) fn abandoned(&self, keys: &LockKeys, owner: &str, release: Unsettled) {
        self.registry.abandoned(&keys.name, owner, release);
        self.queues.set_held_here(&keys.name, false);
    }

    /// The lock was deleted whoever held it: this client's waiters look again at once.
    pub(crate) fn force_freed(&self, keys: &LockKeys) {
        self.registry.force_freed(&keys.name);
        self.queues.set_held_here(&keys.name, false);
        self.waiters.notify(&keys.channel);
    }

    /// Takes `owner`'s releases of the lock of unknown outcome, to send them again.
    pub(crate) fn take_unsettled(&self, keys: &LockKeys, owner: &str) -> Vec<Unsettled> {
        self.registry.take_unsettled(&keys.name, owner)
    }
}
