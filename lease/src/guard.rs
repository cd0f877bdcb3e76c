//! [`LeaseGuard`]: one hold of a lock. Dropping it releases the hold.

use crate::error::{Error, Result};
use crate::lock::Lock;
use crate::lost::Lost;
use crate::watchdog::Watched;
use crossbeam_channel::Receiver;
use std::time::{Duration, Instant};

/// One hold of a lock, released when dropped (or by [`LeaseGuard::unlock`], which reports the
/// outcome). It may be sent to and released from another thread: it releases as the owner that
/// acquired it.
///
/// The guard also tells its holder when the hold can no longer be trusted: the lease ran out, a
/// renewal was refused, or no renewal was confirmed before the local deadline. Check
/// [`LeaseGuard::is_lost`] between steps, or wait on [`LeaseGuard::lost_signal`] beside the work:
///
/// ```no_run
/// use crossbeam_channel::{select, Receiver};
/// # fn work_done() -> Receiver<()> { crossbeam_channel::never() }
/// # let client = lease::Client::open("redis://127.0.0.1:6379")?;
/// let guard = client.lock("reports/nightly")?.lock()?;
/// select! {
///     recv(work_done()) -> _ => guard.unlock()?,
///     recv(guard.lost_signal()) -> lost => {
///         // Stop writing: another owner may hold the lock by now.
///         eprintln!("lost: {:?}", lost.map(|lost| lost.reason));
///     }
/// }
/// # Ok::<(), lease::Error>(())
/// ```
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct LeaseGuard {
    lock: Lock,
    owner: String,
    token: u64,
    holds: u64,
    lease: Duration,
    released: bool,
    watched: Watched,
}

impl LeaseGuard {
    pub(crate) fn new(
        lock: Lock,
        owner: String,
        token: u64,
        holds: u64,
        lease: Duration,
        watched: Watched,
    ) -> Self {
        LeaseGuard {
            lock,
            owner,
            token,
            holds,
            lease,
            released: false,
            watched,
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

    /// Whether the hold can no longer be trusted: lost for a reason the watchdog found, or past
    /// [`LeaseGuard::valid_until`]. Once lost, a hold never becomes valid again.
    pub fn is_lost(&self) -> bool {
        self.lock
            .client()
            .inner
            .watchdog
            .is_lost(&self.watched.status)
    }

    /// How the hold was lost, once the watchdog has found it lost.
    pub fn lost(&self) -> Option<Lost> {
        self.watched.lost()
    }

    /// Until when the hold is known valid: the send time of the acquisition or of the last
    /// confirmed renewal, plus the lease, less a drift allowance (1% of the lease plus 2 ms),
    /// rounded down to the watchdog timer's tick.
    /// Read on the watchdog's clock (`Instant::now()` unless the client was given a timer on a
    /// manual clock).
    pub fn valid_until(&self) -> Instant {
        self.watched.valid_until()
    }

    /// A receiver that gets one [`Lost`] when the hold is lost (at once if it is already), for
    /// `recv` or `select!`. The watchdog sends it no later than one timer tick after the local
    /// deadline, even if Redis hangs. Each call makes a new receiver; all of them are told.
    pub fn lost_signal(&self) -> Receiver<Lost> {
        self.watched.lost_signal()
    }

    pub(crate) fn watched(&self) -> &Watched {
        &self.watched
    }

    fn stop_watching(&self, before_release: bool) {
        self.lock
            .client()
            .inner
            .watchdog
            .unwatch(self.watched.entry, before_release);
    }

    /// Stops renewing and watching this hold without releasing it: it lapses with its lease, and
    /// this returns at once, without a command sent. For a holder that lost its lease, or cannot
    /// reach Redis, and must not wait on a release. Should the same owner acquire the lock again
    /// while the abandoned hold still stands (a renewal that Redis ran but whose reply never came
    /// keeps it alive), the acquisition releases it first rather than re-enter it.
    pub fn abandon(mut self) {
        self.released = true;
        self.stop_watching(false);
        self.lock.abandoned(&self.owner, self.lease);
    }

    /// Releases this hold and reports the outcome: [`Error::NotOwner`] if the lease had expired or
    /// been taken away, [`Error::Unavailable`] if Redis could not be reached (the hold then lapses
    /// with its lease).
    pub fn unlock(mut self) -> Result<()> {
        self.released = true;
        self.stop_watching(true);
        self.lock.release(&self.owner, self.lease)
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        self.stop_watching(true);
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

impl std::fmt::Debug for LeaseGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseGuard")
            .field("lock", &self.lock.name())
            .field("owner", &self.owner)
            .field("token", &self.token)
            .field("lease", &self.lease)
            .field("lost", &self.watched.lost().map(|lost| lost.reason))
            .finish_non_exhaustive()
    }
}
