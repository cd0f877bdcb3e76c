//! [`Lock`]: one named lock of a client, on whatever deployment the client talks to: the
//! acquisition calls with their waiting policies, and the queries.

mod acquire;
pub(crate) mod core;
mod guard;
mod handoff;
mod registry;
mod release;

pub use guard::LeaseGuard;

use self::acquire::{acquire, Request};
use self::core::Core;
use crate::backend::{Kind, Place, ServerIdentity};
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::policy::{after, LeaseKind, Wait};
use crate::state::LockState;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Whose lock it is: the calling thread's, or a fixed owner id.
#[derive(Debug, Clone)]
enum OwnerPolicy {
    Thread,
    Fixed(Arc<str>),
}

/// A named lock. Cheap to clone. Reentrant per owner: by default each thread is its own owner;
/// [`Lock::owned_by`] makes every caller act as one fixed owner instead.
///
/// Taken without a lease ([`Lock::lock`], [`Lock::try_lock`], ...), a lock gets the client's
/// default lease and the watchdog renews it every lease/3 for as long as it is held. Taken with
/// an explicit lease (the `_with_lease` methods), it is never renewed. Either way the guard tells
/// its holder when the hold can no longer be trusted: see [`LeaseGuard::is_lost`].
///
/// Every call that talks to Redis ends within the client's command timeout (per attempt, for
/// the calls that wait for the lock), whatever the server does.
#[derive(Clone)]
pub struct Lock {
    core: Arc<Core>,
    place: Arc<dyn Place>,
    owner: OwnerPolicy,
    max_hold: Option<Duration>,
}

impl Lock {
    pub(crate) fn new(core: Arc<Core>, place: Arc<dyn Place>) -> Self {
        Lock {
            core,
            place,
            owner: OwnerPolicy::Thread,
            max_hold: None,
        }
    }

    /// The same lock, renewed for at most `max_hold` in total per hold: then renewal stops, the
    /// lease runs out (within one lease) and the holder is told, with [`LostReason::MaxHold`].
    /// A bound on a job that hangs while holding. A re-entry with a `max_hold` bounds the hold
    /// it joins as well, from the re-entry on: renewal stops at whichever end comes first.
    ///
    /// A zero `max_hold` is refused, not here, so that the settings chain, but by every
    /// acquisition of the lock it returns, with [`Error::InvalidArgument`]: such a lock is never
    /// taken.
    ///
    /// [`LostReason::MaxHold`]: crate::LostReason::MaxHold
    pub fn max_hold(&self, max_hold: Duration) -> Lock {
        Lock {
            max_hold: Some(max_hold),
            ..self.clone()
        }
    }

    /// The same lock, held on behalf of `owner` whichever thread calls: a lease that is not tied
    /// to a thread (a job id, a host name). The owner id must be unique to the holder, and is a
    /// credential: whoever knows it can re-enter and release its holds.
    ///
    /// An owner id that is empty, longer than 1024 bytes, or starts with `:` is refused, not
    /// here, so that the settings chain, but by every acquisition of the lock it returns (and
    /// [`Lock::hold_count`]), with [`Error::InvalidArgument`]: such a lock is never taken.
    ///
    /// ```no_run
    /// # fn main() -> redis_lease::Result<()> {
    /// # let client = redis_lease::Client::open("redis://127.0.0.1/")?;
    /// let nightly = client
    ///     .lock("reports")?
    ///     .owned_by("nightly-job")
    ///     .max_hold(std::time::Duration::from_secs(3600));
    /// let _guard = nightly.lock()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn owned_by(&self, owner: impl Into<String>) -> Lock {
        Lock {
            owner: OwnerPolicy::Fixed(owner.into().into()),
            ..self.clone()
        }
    }

    /// The settings given to [`Lock::owned_by`] and [`Lock::max_hold`], checked: every
    /// acquisition fails with the first they break.
    fn check_settings(&self) -> Result<()> {
        if let OwnerPolicy::Fixed(owner) = &self.owner {
            crate::owner::check_owner(owner)?;
        }
        if self.max_hold.is_some_and(|max_hold| max_hold.is_zero()) {
            return Err(Error::InvalidArgument("max_hold must be above zero".into()));
        }
        Ok(())
    }

    /// This call's acquisition: the lock, for the owner the calling thread acts as.
    fn request(&self) -> Result<Request<'_>> {
        self.request_or_cancel(None)
    }

    /// [`Lock::request`], ended by `cancel` if it is cancelled.
    fn request_or_cancel<'a>(&'a self, cancel: Option<&'a Cancel>) -> Result<Request<'a>> {
        self.check_settings()?;
        Ok(Request {
            core: &self.core,
            place: &self.place,
            owner: self.owner(),
            max_hold: self.max_hold,
            cancel,
        })
    }

    /// The same lock, for acquisitions of `kind` (a semaphore's, taking other permits).
    pub(crate) fn of_kind(&self, kind: Kind) -> Lock {
        Lock {
            place: self.place.of_kind(kind),
            ..self.clone()
        }
    }

    /// The servers that keep this lock, as they identify themselves, asked within one call
    /// timeout.
    pub(crate) fn servers(&self) -> Result<Vec<ServerIdentity>> {
        self.place.servers(self.core.call_deadline())
    }

    /// Where the lock lives: its store's address and its own there. It orders the locks of a
    /// [`MultiLock`](crate::MultiLock).
    pub(crate) fn address(&self) -> (&str, &str) {
        self.place.address()
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.place.id().name
    }

    /// The owner id the calling thread acts as.
    pub fn owner(&self) -> String {
        match &self.owner {
            OwnerPolicy::Thread => self.core.thread_owner(),
            OwnerPolicy::Fixed(owner) => owner.to_string(),
        }
    }

    /// Takes the lock with the client's default lease, renewed while held, waiting as long as it
    /// takes.
    ///
    /// # Errors
    ///
    /// [`Error::Unavailable`] or [`Error::Refused`] if an attempt fails, [`Error::QueueFull`],
    /// [`Error::WrongType`] and [`Error::BadValue`] for keys a lock cannot use.
    pub fn lock(&self) -> Result<LeaseGuard> {
        self.acquire_waiting(LeaseKind::Renewed)
    }

    /// Takes the lock with the given lease (10 ms to a year), never renewed, waiting as long as
    /// it takes.
    ///
    /// # Errors
    ///
    /// As [`Lock::lock`], and [`Error::InvalidArgument`] for a lease out of range.
    pub fn lock_with_lease(&self, lease: Duration) -> Result<LeaseGuard> {
        self.acquire_waiting(LeaseKind::Fixed(lease))
    }

    fn acquire_waiting(&self, lease: LeaseKind) -> Result<LeaseGuard> {
        acquire(&self.request()?, lease, Wait::Until(None))?
            .ok_or_else(|| Error::Protocol("a waiting acquisition returned nothing".into()))
    }

    /// One attempt with the default lease (renewed while held): `Ok(None)` if another owner
    /// holds it (or another thread of this client is already contending for it).
    ///
    /// # Errors
    ///
    /// As [`Lock::lock`].
    pub fn try_lock(&self) -> Result<Option<LeaseGuard>> {
        acquire(&self.request()?, LeaseKind::Renewed, Wait::No)
    }

    /// [`Lock::try_lock`] with the given lease, never renewed.
    ///
    /// # Errors
    ///
    /// As [`Lock::lock_with_lease`].
    pub fn try_lock_with_lease(&self, lease: Duration) -> Result<Option<LeaseGuard>> {
        acquire(&self.request()?, LeaseKind::Fixed(lease), Wait::No)
    }

    /// Waits up to `wait` for the lock (default lease, renewed while held); `Ok(None)` if it
    /// stayed held. Returns within `wait` plus one command timeout.
    ///
    /// # Errors
    ///
    /// As [`Lock::lock`], except that an attempt that fails for a reason that may pass
    /// ([`Error::Unavailable`], [`Error::NotReplicated`]: a failover, say) is made again every
    /// 100 ms until the deadline, which then ends the wait with that error.
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<LeaseGuard>> {
        self.try_until(after(wait), LeaseKind::Renewed)
    }

    /// Waits until `deadline` for the lock (default lease, renewed while held); `Ok(None)` if it
    /// stayed held. A deadline already past makes one attempt.
    ///
    /// # Errors
    ///
    /// As [`Lock::lock`], except that an attempt that fails for a reason that may pass
    /// ([`Error::Unavailable`], [`Error::NotReplicated`]: a failover, say) is made again every
    /// 100 ms until the deadline, which then ends the wait with that error.
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<LeaseGuard>> {
        self.try_until(deadline, LeaseKind::Renewed)
    }

    /// [`Lock::try_lock_for`] with the given lease, never renewed.
    ///
    /// # Errors
    ///
    /// As [`Lock::lock_with_lease`], with failures that may pass tried again as
    /// [`Lock::try_lock_for`] does.
    pub fn try_lock_for_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<LeaseGuard>> {
        self.try_until(after(wait), LeaseKind::Fixed(lease))
    }

    /// [`Lock::try_lock_until`] with the given lease, never renewed.
    ///
    /// # Errors
    ///
    /// As [`Lock::lock_with_lease`].
    pub fn try_lock_until_with_lease(
        &self,
        deadline: Instant,
        lease: Duration,
    ) -> Result<Option<LeaseGuard>> {
        self.try_until(deadline, LeaseKind::Fixed(lease))
    }

    fn try_until(&self, deadline: Instant, lease: LeaseKind) -> Result<Option<LeaseGuard>> {
        self.try_until_or_cancel(deadline, lease, None)
    }

    fn try_until_or_cancel(
        &self,
        deadline: Instant,
        lease: LeaseKind,
        cancel: Option<&Cancel>,
    ) -> Result<Option<LeaseGuard>> {
        let request = self.request_or_cancel(cancel)?;
        match acquire(&request, lease, Wait::Until(Some(deadline))) {
            Err(Error::Timeout { .. }) => Ok(None),
            other => other,
        }
    }

    /// [`Lock::lock`], ended from another thread by `cancel`: [`Error::Cancelled`] once it is
    /// cancelled (soon after, within one command timeout; a wait whose attempt took the lock
    /// in the meantime returns the guard).
    ///
    /// # Errors
    ///
    /// As [`Lock::lock`], and [`Error::Cancelled`].
    pub fn lock_cancellable(&self, cancel: &Cancel) -> Result<LeaseGuard> {
        acquire(
            &self.request_or_cancel(Some(cancel))?,
            LeaseKind::Renewed,
            Wait::Until(None),
        )?
        .ok_or_else(|| Error::Protocol("a waiting acquisition returned nothing".into()))
    }

    /// [`Lock::try_lock_for`], ended from another thread by `cancel` as
    /// [`Lock::lock_cancellable`] is.
    ///
    /// # Errors
    ///
    /// As [`Lock::try_lock_for`], and [`Error::Cancelled`].
    pub fn try_lock_for_cancellable(
        &self,
        wait: Duration,
        cancel: &Cancel,
    ) -> Result<Option<LeaseGuard>> {
        self.try_until_or_cancel(after(wait), LeaseKind::Renewed, Some(cancel))
    }

    /// [`Lock::try_lock_until`], ended from another thread by `cancel` as
    /// [`Lock::lock_cancellable`] is.
    ///
    /// # Errors
    ///
    /// As [`Lock::try_lock_until`], and [`Error::Cancelled`].
    pub fn try_lock_until_cancellable(
        &self,
        deadline: Instant,
        cancel: &Cancel,
    ) -> Result<Option<LeaseGuard>> {
        self.try_until_or_cancel(deadline, LeaseKind::Renewed, Some(cancel))
    }

    /// Whether anyone holds the lock.
    ///
    /// # Errors
    ///
    /// As [`Lock::inspect`].
    pub fn is_locked(&self) -> Result<bool> {
        Ok(self.inspect()?.is_held())
    }

    /// Whether the calling thread's owner id holds the lock.
    ///
    /// # Errors
    ///
    /// As [`Lock::inspect`].
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        Ok(self.hold_count()? > 0)
    }

    /// How many holds the calling thread's owner id has on the lock (0: none).
    ///
    /// # Errors
    ///
    /// As [`Lock::inspect`].
    pub fn hold_count(&self) -> Result<u64> {
        self.check_settings()?;
        let owner = self.owner();
        Ok(self
            .inspect()?
            .holders
            .iter()
            .find(|(holder, _)| *holder == owner)
            .map_or(0, |(_, holds)| *holds))
    }

    /// How long the current lease has left, or `None` if the lock is free.
    ///
    /// # Errors
    ///
    /// As [`Lock::inspect`].
    pub fn remaining_ttl(&self) -> Result<Option<Duration>> {
        Ok(self.inspect()?.ttl)
    }

    /// What Redis holds for the lock now: its holders with their hold counts, its remaining
    /// lease, and the fencing tokens. Read in one pipeline, within the command timeout, also from a
    /// full server; keys a lock cannot use are described in [`LockState::problems`] rather than
    /// failing the call. For operators and tools.
    ///
    /// # Errors
    ///
    /// [`Error::Unavailable`] if Redis does not answer within the command timeout,
    /// [`Error::Refused`] if it refuses the commands.
    pub fn inspect(&self) -> Result<LockState> {
        self.place.inspect(self.core.call_deadline())
    }

    /// Deletes the lock whoever holds it (whatever its key holds) and wakes its waiters. For
    /// operators clearing a dead holder; the holder is not told. Returns whether the lock was
    /// held. Works on a full server.
    ///
    /// # Errors
    ///
    /// As [`Lock::inspect`].
    pub fn force_unlock(&self) -> Result<bool> {
        let freed = self.place.force_release(self.core.call_deadline())?;
        if freed {
            self.core.force_freed(&*self.place);
        }
        Ok(freed)
    }
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("name", &self.name())
            .field("place", &self.core.backend().address())
            .finish_non_exhaustive()
    }
}
