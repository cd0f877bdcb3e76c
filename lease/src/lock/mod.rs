//! [`Lock`]: one named lock of a client, on whatever deployment the client talks to: the
//! acquisition calls with their waiting policies, and the queries.

mod acquire;
mod baton;
mod contender;
pub(crate) mod core;
mod guard;
mod handoff;
mod held_write;
mod registry;
mod release;
mod request;
mod settle;

pub use guard::LeaseGuard;

use self::acquire::acquire;
use self::core::Core;
use self::request::Request;
use crate::backend::{not_offered, Elects, Kind, Place, Resizes, ServerIdentity};
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::policy::{after, LeaseKind, Wait};
use crate::state::LockState;
use std::borrow::Cow;
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
/// Settings chain, each giving the same lock set up so: [`Lock::owned_by`],
/// [`Lock::max_hold`], [`Lock::with_lease`], [`Lock::cancel_on`]. Then the four calls of
/// `lock_api`'s mutexes take it: [`Lock::lock`] (wait as long as it takes), [`Lock::try_lock`]
/// (one attempt), [`Lock::try_lock_for`] and [`Lock::try_lock_until`] (wait up to a deadline).
///
/// Taken without a lease of its own, a lock gets the client's default lease and the watchdog
/// renews it every lease/3 for as long as it is held. Taken [`with_lease`](Lock::with_lease), it
/// is never renewed. Either way the guard tells its holder when the hold can no longer be
/// trusted: see [`LeaseGuard::is_lost`].
///
/// ```no_run
/// use std::time::Duration;
/// # fn main() -> redis_lease::Result<()> {
/// # let client = redis_lease::Client::open("redis://127.0.0.1/")?;
/// let cancel = redis_lease::Cancel::new();
/// let report = client
///     .lock("reports")?
///     .with_lease(Duration::from_secs(60))
///     .cancel_on(&cancel);
/// if let Some(guard) = report.try_lock_for(Duration::from_secs(5))? {
///     // ... at most 60 s of work, never renewed ...
///     guard.unlock()?;
/// }
/// # Ok(())
/// # }
/// ```
///
/// Every call that talks to the store ends within the client's command timeout (per attempt,
/// for the calls that wait for the lock), whatever the server does.
#[derive(Clone)]
pub struct Lock {
    core: Arc<Core>,
    place: Arc<dyn Place>,
    owner: OwnerPolicy,
    max_hold: Option<Duration>,
    lease: LeaseKind,
    cancel: Option<Cancel>,
}

impl Lock {
    pub(crate) fn new(core: Arc<Core>, place: Arc<dyn Place>) -> Self {
        Lock {
            core,
            place,
            owner: OwnerPolicy::Thread,
            max_hold: None,
            lease: LeaseKind::Renewed,
            cancel: None,
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
    #[must_use = "this returns a new handle with the setting; the one it is called on is unchanged"]
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
    #[must_use = "this returns a new handle with the setting; the one it is called on is unchanged"]
    pub fn owned_by(&self, owner: impl Into<String>) -> Lock {
        Lock {
            owner: OwnerPolicy::Fixed(owner.into().into()),
            ..self.clone()
        }
    }

    /// The same lock, taken with this lease (10 ms to a year), which is never renewed: the hold
    /// lapses `lease` after its acquisition was sent unless released first, and its guard says
    /// so ([`LostReason::Expired`]). A lease out of range is refused by every acquisition of the
    /// lock, with [`Error::InvalidArgument`].
    ///
    /// [`LostReason::Expired`]: crate::LostReason::Expired
    #[must_use = "this returns a new handle with the setting; the one it is called on is unchanged"]
    pub fn with_lease(&self, lease: Duration) -> Lock {
        Lock {
            lease: LeaseKind::Fixed(lease),
            ..self.clone()
        }
    }

    /// The same lock, its waits ended from another thread by `cancel`: a waiting acquisition
    /// returns [`Error::Cancelled`] soon after [`Cancel::cancel`], within one command timeout (a
    /// wait whose attempt took the lock in the meantime returns the guard).
    #[must_use = "this returns a new handle with the setting; the one it is called on is unchanged"]
    pub fn cancel_on(&self, cancel: &Cancel) -> Lock {
        Lock {
            cancel: Some(cancel.clone()),
            ..self.clone()
        }
    }

    /// The settings given to the chain, checked: every acquisition fails with the first they
    /// break.
    fn check_settings(&self) -> Result<()> {
        if let OwnerPolicy::Fixed(owner) = &self.owner {
            crate::owner::check_owner(owner)?;
        }
        if self.max_hold.is_some_and(|max_hold| max_hold.is_zero()) {
            return Err(Error::InvalidArgument("max_hold must be above zero".into()));
        }
        self.lease.lease(self.core.default_lease())?;
        Ok(())
    }

    /// This call's acquisition: the lock, for the owner the calling thread acts as.
    fn request(&self) -> Result<Request<'_>> {
        self.check_settings()?;
        Ok(Request {
            core: &self.core,
            place: &self.place,
            owner: self.owner().into_owned(),
            lease: self.lease,
            max_hold: self.max_hold,
            cancel: self.cancel.as_ref(),
        })
    }

    /// The same lock, for acquisitions of `kind` (a semaphore's, taking other permits).
    pub(crate) fn of_kind(&self, kind: Kind) -> Lock {
        Lock {
            place: self.place.of_kind(kind),
            ..self.clone()
        }
    }

    /// The lock's place in its store, for a primitive built on the lock (an election's
    /// proclamations and reads).
    pub(crate) fn place(&self) -> &dyn Place {
        &*self.place
    }

    /// The semaphore calls of the lock's place: offered wherever the semaphore could be made.
    pub(crate) fn resizes(&self) -> Result<&dyn Resizes> {
        self.place.resizes().ok_or_else(|| self.not_offered())
    }

    /// The election calls of the lock's place: offered wherever the election could be made.
    pub(crate) fn elects(&self) -> Result<&dyn Elects> {
        self.place.elects().ok_or_else(|| self.not_offered())
    }

    fn not_offered(&self) -> Error {
        not_offered(self.place.id().kind, self.core.backend().address())
    }

    /// The client's parts every lock shares.
    pub(crate) fn core(&self) -> &Core {
        &self.core
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

    /// The owner id the calling thread acts as: the one given to [`Lock::owned_by`], or the
    /// client's id and the calling thread's (made for the call).
    pub fn owner(&self) -> Cow<'_, str> {
        match &self.owner {
            OwnerPolicy::Thread => Cow::Owned(self.core.thread_owner()),
            OwnerPolicy::Fixed(owner) => Cow::Borrowed(owner),
        }
    }

    /// Takes the lock, waiting as long as it takes (or until cancelled, with
    /// [`Lock::cancel_on`]).
    ///
    /// # Errors
    ///
    /// [`Error::Unavailable`] or [`Error::Refused`] if an attempt fails, [`Error::QueueFull`],
    /// [`Error::WrongType`] and [`Error::BadValue`] for keys a lock cannot use,
    /// [`Error::Cancelled`], and [`Error::InvalidArgument`] for a setting of the chain it
    /// refuses.
    pub fn lock(&self) -> Result<LeaseGuard> {
        acquire(&self.request()?, Wait::Until(None))?
            .ok_or_else(|| Error::Protocol("a waiting acquisition returned nothing".into()))
    }

    /// One attempt: `Ok(None)` if another owner holds it (or another thread of this client is
    /// already contending for it).
    ///
    /// # Errors
    ///
    /// As [`Lock::lock`].
    pub fn try_lock(&self) -> Result<Option<LeaseGuard>> {
        acquire(&self.request()?, Wait::No)
    }

    /// Waits up to `wait` for the lock; `Ok(None)` if it stayed held. Returns within `wait`
    /// plus one command timeout.
    ///
    /// # Errors
    ///
    /// As [`Lock::lock`], except that an attempt that fails for a reason that may pass
    /// ([`Error::Unavailable`], [`Error::NotReplicated`]: a failover, say) is made again every
    /// 100 ms until the deadline, which then ends the wait with that error.
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<LeaseGuard>> {
        self.try_lock_until(after(wait))
    }

    /// Waits until `deadline` for the lock; `Ok(None)` if it stayed held. A deadline already
    /// past makes one attempt.
    ///
    /// # Errors
    ///
    /// As [`Lock::try_lock_for`].
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<LeaseGuard>> {
        match acquire(&self.request()?, Wait::Until(Some(deadline))) {
            Err(Error::Timeout { .. }) => Ok(None),
            other => other,
        }
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
        if let OwnerPolicy::Fixed(owner) = &self.owner {
            crate::owner::check_owner(owner)?;
        }
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

    /// What the store holds for the lock now: its holders with their hold counts, its remaining
    /// lease, and the fencing tokens. Read in one pipeline, within the command timeout, also from a
    /// full server; keys a lock cannot use are described in [`LockState::problems`] rather than
    /// failing the call. For operators and tools.
    ///
    /// A hold that threads of one client hand on among themselves without the store stays,
    /// in the store, the hold of the thread that took it from the store, with that thread's owner id and
    /// token; `last_token` counts the tokens reserved for the hand-offs. Read through the client
    /// that holds it, the holder and `hold_token` shown are the current holder's.
    ///
    /// # Errors
    ///
    /// [`Error::Unavailable`] if the store does not answer within the command timeout,
    /// [`Error::Refused`] if it refuses the call.
    pub fn inspect(&self) -> Result<LockState> {
        let mut state = self.place.inspect(self.core.call_deadline())?;
        if let Some(baton) = self.core.baton(self.place.id()) {
            baton.show_holder(&mut state);
        }
        Ok(state)
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
