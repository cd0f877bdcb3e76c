//! [`LeaseGuard`]: one hold of a lock. Dropping it releases the hold.

use crate::error::{Error, Result};
use crate::lock::Lock;
use std::time::Duration;

/// One hold of a lock, released when dropped (or by [`LeaseGuard::unlock`], which reports the
/// outcome). It may be sent to and released from another thread: it releases as the owner that
/// acquired it.
#[must_use = "the lock is released as soon as the guard is dropped"]
#[derive(Debug)]
pub struct LeaseGuard {
    lock: Lock,
    owner: String,
    token: u64,
    holds: u64,
    lease: Duration,
    released: bool,
}

impl LeaseGuard {
    pub(crate) fn new(lock: Lock, owner: String, token: u64, holds: u64, lease: Duration) -> Self {
        LeaseGuard {
            lock,
            owner,
            token,
            holds,
            lease,
            released: false,
        }
    }

    /// The fencing token of this hold: it rises strictly with every fresh acquisition of the lock
    /// name, and a re-entry gets the token of the hold it re-enters. Pass it to the resource the
    /// lock protects, which rejects any write with a token lower than one it has seen.
    pub fn fencing_token(&self) -> u64 {
        self.token
    }

    /// The owner id this hold belongs to.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// How deep the owner held the lock right after this acquisition (1: a fresh acquisition).
    pub fn holds_at_acquire(&self) -> u64 {
        self.holds
    }

    /// The lease the lock was taken with.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// The lock this guard holds.
    pub fn lock(&self) -> &Lock {
        &self.lock
    }

    /// Releases this hold and reports the outcome: [`Error::NotOwner`] if the lease had expired or
    /// been taken away, [`Error::Unavailable`] if Redis could not be reached (the hold then lapses
    /// with its lease).
    pub fn unlock(mut self) -> Result<()> {
        self.released = true;
        self.lock.release(&self.owner, self.lease)
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        match self.lock.release(&self.owner, self.lease) {
            Ok(()) => {}
            Err(Error::NotOwner { name, owner }) => {
                log::warn!("lock {name:?} was no longer held by {owner} when its guard was dropped")
            }
            Err(error) => log::warn!(
                "releasing lock {:?} on drop failed: {error}; it lapses with its lease",
                self.lock.name()
            ),
        }
    }
}
