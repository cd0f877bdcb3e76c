//! [`LeaseGuard`]: one acquisition of a lock. Dropping it releases that acquisition, and only
//! it: a guard names its hold and acquisition, so a guard whose lease was lost can never release
//! a later hold of the same owner.

use super::release::Holding;
use crate::error::{Error, Result};
use crate::lost::Lost;
use crate::watchdog::Watched;
use crate::write::{Write, Written};
use std::time::{Duration, Instant};

/// One acquisition, as its guard keeps it: the handle it releases through, what the acquisition came to, and its
/// link to the watchdog.
pub(crate) struct Acquisition {
    pub(crate) holding: Holding,
    pub(crate) token: Option<u64>,
    pub(crate) holds: u64,
    pub(crate) lease: Duration,
    pub(crate) watched: Watched,
}

/// One acquisition of a lock, released when dropped (or by [`LeaseGuard::unlock`], which reports
/// the outcome). It may be sent to and released from another thread: it releases the acquisition
/// it made, as the owner that made it.
///
/// The guard also tells its holder when the hold can no longer be trusted: the lease ran out, a
/// renewal was refused, or no renewal was confirmed before the local deadline. Check
/// [`LeaseGuard::is_lost`] between steps, or wait on [`LeaseGuard::lost_signal`] beside the work:
///
/// ```no_run
/// use redis_lease::crossbeam_channel::{never, select, Receiver};
/// # fn work_done() -> Receiver<()> { never() }
/// # let client = redis_lease::Client::open("redis://127.0.0.1:6379")?;
/// let guard = client.lock("reports/nightly")?.lock()?;
/// select! {
///     recv(work_done()) -> _ => guard.unlock()?,
///     recv(guard.lost_signal()) -> lost => {
///         // Stop writing: another owner may hold the lock by now.
///         eprintln!("lost: {:?}", lost.map(|lost| lost.reason));
///     }
/// }
/// # Ok::<(), redis_lease::Error>(())
/// ```
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct LeaseGuard {
    acquisition: Acquisition,
    released: bool,
}

impl LeaseGuard {
    pub(crate) fn new(acquisition: Acquisition) -> Self {
        LeaseGuard {
            acquisition,
            released: false,
        }
    }

    /// The fencing token of this hold: it rises strictly with every new holder of the lock name
    /// (not always by one), and a re-entry gets the token of the hold it re-enters. Pass it to the resource the lock
    /// protects, which rejects any write with a token lower than one it has seen. `None` on a
    /// deployment without tokens (RedLock: no single counter exists across independent masters).
    pub fn fencing_token(&self) -> Option<u64> {
        self.acquisition.token
    }

    /// The owner id this hold belongs to. It is a credential: whoever knows it can act as the
    /// owner.
    pub fn owner(&self) -> &str {
        self.acquisition.holding.owner()
    }

    /// How deep the owner held the lock right after this acquisition (1: a new hold).
    pub fn holds_at_acquire(&self) -> u64 {
        self.acquisition.holds
    }

    /// The lease the lock was taken with.
    pub fn lease(&self) -> Duration {
        self.acquisition.lease
    }

    /// The name of the lock this guard holds.
    pub fn name(&self) -> &str {
        self.acquisition.holding.name()
    }

    /// Whether the hold can no longer be trusted: lost for a reason the watchdog found, or past
    /// [`LeaseGuard::valid_until`]. Once lost, a hold never becomes valid again.
    pub fn is_lost(&self) -> bool {
        self.acquisition.holding.is_lost(&self.acquisition.watched)
    }

    /// How the hold was lost, once the watchdog has found it lost.
    pub fn lost(&self) -> Option<Lost> {
        self.acquisition.watched.lost()
    }

    /// Until when the hold is known valid: the send time of the acquisition or of the last
    /// confirmed renewal, plus the lease, less a drift allowance (1% of the lease plus 2 ms),
    /// rounded down to the watchdog timer's tick. Read on the watchdog's clock
    /// (`Instant::now()` unless the client was given a timer on a manual clock).
    pub fn valid_until(&self) -> Instant {
        self.acquisition.watched.valid_until()
    }

    /// A receiver that gets one [`Lost`] when the hold is lost (at once if it is already), for
    /// `recv` or `select!`. The watchdog sends it no later than one timer tick after the local
    /// deadline, even if the store hangs. Each call makes a new receiver; all of them are told. Each
    /// is kept (a few dozen bytes) until the hold is lost or released, dropped or not: take one
    /// receiver before a `select!` loop rather than calling this in every round.
    pub fn lost_signal(&self) -> crate::LostSignal {
        self.acquisition.watched.lost_signal()
    }

    /// Makes `write` in the lock's own store only if this hold still holds the lock there (the
    /// same owner, the same hold: not released, lapsed, force-unlocked or taken over), in one
    /// atomic step of the store with that check, within the command timeout; what it returned.
    /// A hold that no longer holds writes nothing and is refused with [`Error::NotOwner`], as
    /// is one the watchdog already counts lost (without a call). etcd's `IsOwner()` made into
    /// one call: the check cannot go stale before the write, as a check followed by a write
    /// can.
    ///
    /// Each store runs its own kind of [`Write`]: a Lua script on Redis (one server, Sentinel,
    /// Cluster: its keys in the lock's hash tag), operations in a ZooKeeper transaction, a
    /// statement in the PostgreSQL transaction of the check. It guards writes to the lock's
    /// store only: a resource elsewhere is kept safe by its own check of the fencing token
    /// (see [`guarantees`](crate::guarantees)).
    ///
    /// ```no_run
    /// use redis_lease::{redis::Value, Write, Written};
    /// # let client = redis_lease::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.lock("sale")?.lock()?;
    /// // Sells one item, only while this hold holds the lock "sale".
    /// let sold = guard.if_held(&Write::Lua {
    ///     script: "if tonumber(redis.call('get', KEYS[1]) or '0') < 1 then return 0 end     ///              redis.call('decr', KEYS[1])     ///              redis.call('rpush', KEYS[2], ARGV[1])     ///              return 1"
    ///         .into(),
    ///     keys: vec!["{sale}:stock".into(), "{sale}:orders".into()],
    ///     args: vec!["order-17".into()],
    /// })?;
    /// assert!(matches!(sold, Written::Lua(Value::Int(0 | 1))));
    /// guard.unlock()?;
    /// # Ok::<(), redis_lease::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::NotOwner`] if the hold no longer holds (nothing was written);
    /// [`Error::InvalidArgument`] for a write of another store's kind, a Cluster's key outside
    /// the lock's hash tag, and on RedLock, which cannot check a hold and write in one step;
    /// [`Error::Unavailable`] if the store did not answer in time (the write may have been
    /// made); [`Error::NotReplicated`] if it was made but fewer replicas acknowledged it than
    /// the client requires; [`Error::Refused`] for the write's own failure (a Lua error, a
    /// ZooKeeper operation that failed, an SQL error: with ZooKeeper and PostgreSQL nothing
    /// was written).
    pub fn if_held(&self, write: &Write) -> Result<Written> {
        super::held_write::if_held(&self.acquisition.holding, &self.acquisition.watched, write)
    }

    /// Releases this acquisition as [`LeaseGuard::unlock`] does, keeping the guard; after
    /// that, does nothing (see [`LeaseGuard::release_again`]).
    pub(crate) fn release_once(&mut self) -> Result<()> {
        if self.released {
            return Ok(());
        }
        self.released = true;
        self.acquisition.holding.release(&self.acquisition.watched)
    }

    /// Abandons this acquisition as [`LeaseGuard::abandon`] does, keeping the guard; after
    /// that, or after a release, does nothing.
    pub(crate) fn abandon_once(&mut self) {
        if !self.released {
            self.released = true;
            self.acquisition.holding.abandon(&self.acquisition.watched);
        }
    }

    /// Sends the release of a guard released before again (its outcome was unknown), for the
    /// one hold of an owner of its own.
    pub(crate) fn release_again(&self) -> Result<()> {
        self.acquisition.holding.release_again()
    }

    /// The owner id the store knows the hold by, and the hold's id.
    pub(crate) fn hold(&self) -> (&str, &str) {
        self.acquisition.holding.store_hold()
    }

    /// Calls `told` once when the hold is lost, on the watchdog's thread that finds it lost (at
    /// once, on this thread, if it is lost already): how a caller that must not park a thread on
    /// [`LeaseGuard::lost_signal`] is told, an async task say, by feeding a oneshot channel.
    /// `told` must return at once: the watchdog's other holds wait while it runs. It is dropped
    /// uncalled if the hold ends without being lost (released, or abandoned).
    ///
    /// ```no_run
    /// # let client = redis_lease::Client::open("redis://127.0.0.1:6379")?;
    /// let guard = client.lock("reports/nightly")?.lock()?;
    /// let (tell, told) = std::sync::mpsc::channel();
    /// guard.on_lost(move |lost| {
    ///     let _ = tell.send(lost.reason);
    /// });
    /// # drop(told);
    /// # Ok::<(), redis_lease::Error>(())
    /// ```
    pub fn on_lost(&self, told: impl FnOnce(Lost) + Send + 'static) {
        self.acquisition
            .watched
            .on_lost(Box::new(move |lost| told(lost.clone())));
    }

    pub(crate) fn watched(&self) -> &Watched {
        &self.acquisition.watched
    }

    /// Stops renewing and watching this hold without releasing it: it lapses with its lease, and
    /// this returns at once, without a command sent. For a holder that lost its lease, or cannot
    /// reach the store, and must not wait on a release. Should the same owner acquire the lock again
    /// while the abandoned hold still stands, the acquisition releases it first.
    pub fn abandon(mut self) {
        self.released = true;
        self.acquisition.holding.abandon(&self.acquisition.watched);
    }

    /// Releases this acquisition and reports the outcome, within the command timeout:
    /// [`Error::NotOwner`] if the lease had expired or been taken away, [`Error::Unavailable`]
    /// if the store did not answer in time (the hold then lapses with its lease, and the release is
    /// sent again before this owner's next acquisition of the lock).
    ///
    /// # Errors
    ///
    /// As above; [`Error::Refused`] if the store refused the call.
    pub fn unlock(mut self) -> Result<()> {
        self.released = true;
        self.acquisition.holding.release(&self.acquisition.watched)
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        match self.acquisition.holding.release(&self.acquisition.watched) {
            Ok(()) => {}
            Err(Error::NotOwner { name, .. }) => {
                log::warn!("lock {name:?} was no longer held when its guard was dropped")
            }
            Err(error) => log::warn!(
                "releasing lock {:?} on drop failed: {error}; it lapses with its lease",
                self.acquisition.holding.name()
            ),
        }
    }
}

impl std::fmt::Debug for LeaseGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseGuard")
            .field("lock", &self.acquisition.holding.name())
            .field("token", &self.acquisition.token)
            .field("lease", &self.acquisition.lease)
            .field(
                "lost",
                &self.acquisition.watched.lost().map(|lost| lost.reason),
            )
            .finish_non_exhaustive()
    }
}
