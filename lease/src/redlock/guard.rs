//! [`RedLockGuard`]: one hold of a RedLock. Dropping it releases the hold on every master.

use super::RedLock;
use crate::error::{Error, Result};
use crate::lost::Lost;
use crate::watchdog::Watched;
use crossbeam_channel::Receiver;
use std::time::{Duration, Instant};

/// One hold of a [`RedLock`], released on every master when dropped (or by
/// [`RedLockGuard::unlock`], which reports the outcome). `Send`: it releases as the owner that
/// acquired it. It has no fencing token: see `docs/guarantees.md`.
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct RedLockGuard {
    lock: RedLock,
    owner: String,
    lease: Duration,
    released: bool,
    watched: Watched,
}

impl RedLockGuard {
    pub(super) fn new(lock: RedLock, owner: String, lease: Duration, watched: Watched) -> Self {
        RedLockGuard {
            lock,
            owner,
            lease,
            released: false,
            watched,
        }
    }

    /// The owner id this hold belongs to.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The lease the lock was taken with.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// The lock this guard holds.
    pub fn lock(&self) -> &RedLock {
        &self.lock
    }

    /// Until when the hold is known valid: the send time of the winning attempt (or of the last
    /// renewal a quorum confirmed), plus the lease, less the drift allowance.
    pub fn valid_until(&self) -> Instant {
        self.watched.valid_until()
    }

    /// Whether the hold can no longer be trusted (see
    /// [`LeaseGuard::is_lost`](crate::LeaseGuard::is_lost)).
    pub fn is_lost(&self) -> bool {
        self.lock.watchdog().is_lost(&self.watched.status)
    }

    /// How the hold was lost, once the watchdog has found it lost.
    pub fn lost(&self) -> Option<Lost> {
        self.watched.lost()
    }

    /// A receiver that gets one [`Lost`] when the hold is lost (at once if it is already).
    pub fn lost_signal(&self) -> Receiver<Lost> {
        self.watched.lost_signal()
    }

    /// Releases this hold on every master: [`Error::NotOwner`] if no master still had it,
    /// [`Error::Unavailable`] if none answered within the node timeout.
    pub fn unlock(mut self) -> Result<()> {
        self.released = true;
        self.lock.watchdog().unwatch(self.watched.entry, true);
        self.lock.release(&self.owner, self.lease)
    }
}

impl Drop for RedLockGuard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        self.lock.watchdog().unwatch(self.watched.entry, true);
        match self.lock.release(&self.owner, self.lease) {
            Ok(()) => {}
            Err(Error::NotOwner { name, owner }) => {
                log::warn!(
                    "redlock {name:?} was no longer held by {owner} when its guard was dropped"
                )
            }
            Err(error) => log::warn!(
                "releasing redlock {:?} on drop failed: {error}; it lapses with its lease",
                self.lock.name()
            ),
        }
    }
}

impl std::fmt::Debug for RedLockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedLockGuard")
            .field("lock", &self.lock.name())
            .field("owner", &self.owner)
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}
