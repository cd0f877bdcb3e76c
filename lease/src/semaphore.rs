//! [`Semaphore`]: permits that expire, each held as a lease by its owner.

use crate::backend::Kind;
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::lock::{LeaseGuard, Lock};
use crate::state::LockState;
use std::time::{Duration, Instant};

/// The most permits a semaphore may have: every acquisition reads each hold, so the server's
/// time per acquisition grows with them.
pub const MAX_PERMITS: u32 = 10_000;

/// Checks a number of permits.
pub(crate) fn check_permits(permits: u32) -> Result<()> {
    if permits == 0 || permits > MAX_PERMITS {
        return Err(Error::InvalidArgument(format!(
            "a semaphore has from 1 to {MAX_PERMITS} permits, not {permits}"
        )));
    }
    Ok(())
}

/// A semaphore whose permits expire: at most [`Semaphore::permits`] held at once across every
/// client, each acquisition (of one permit, or of several with [`Semaphore::taking`]) a hold of
/// its own with a lease, renewed by the watchdog while its [`LeaseGuard`] lives, with
/// [`LeaseGuard::is_lost`], [`LeaseGuard::lost_signal`], [`LeaseGuard::valid_until`] and a
/// fencing token, as a lock's. A holder that dies gives its permits back when its lease lapses:
/// none leaks. Cheap to clone.
///
/// Its settings chain as a lock's ([`Semaphore::owned_by`], [`Semaphore::max_hold`],
/// [`Semaphore::with_lease`], [`Semaphore::cancel_on`]), and the same four calls take a permit:
/// [`Semaphore::acquire`], [`Semaphore::try_acquire`], [`Semaphore::try_acquire_for`],
/// [`Semaphore::try_acquire_until`].
///
/// ```no_run
/// use std::time::Duration;
/// # fn main() -> redis_lease::Result<()> {
/// # let client = redis_lease::Client::open("redis://127.0.0.1/")?;
/// let exports = client.semaphore("exports", 3)?;
/// if let Some(permit) = exports.try_acquire_for(Duration::from_secs(10))? {
///     // ... one of at most three exports at once ...
///     permit.unlock()?;
/// }
/// let big = exports.taking(2)?.lock()?; // two permits in one hold
/// big.unlock()?;
/// # Ok(())
/// # }
/// ```
///
/// Not reentrant: each acquisition takes permits of its own, whichever thread asks. The threads
/// of one client wait in turn for the semaphore in the store, as for a lock, and a release wakes
/// the waiters of every client.
///
/// **The number of permits is stored with the semaphore.** Each handle declares a number, and
/// the first acquisition (when nobody holds a permit) stores it; while anyone holds a permit,
/// an acquisition declaring another number is refused with [`Error::InvalidArgument`] naming
/// both, rather than counted against a number the holders do not know of (a rolling deploy
/// from 3 permits to 5 is told, not silently let to 5 holders while old hosts believe 3). To
/// change the number while permits are held, say so: [`Semaphore::resize`] stores this handle's
/// number, which every acquisition then declares; lowered, the holds in excess keep their
/// permits until they end, and nobody new gets in until fewer than the new number are held;
/// raised, waiters are let in up to it at their next look (within a second). The number stored
/// is [`LockState::permits`].
#[derive(Clone)]
pub struct Semaphore {
    lock: Lock,
    permits: u32,
}

impl Semaphore {
    pub(crate) fn new(lock: Lock, permits: u32) -> Semaphore {
        Semaphore { lock, permits }
    }

    /// The semaphore's name.
    pub fn name(&self) -> &str {
        self.lock.name()
    }

    /// The permits this handle declares.
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// The same semaphore, declaring `permits` (see "The number of permits is stored with the
    /// semaphore").
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for permits out of range (1 to [`MAX_PERMITS`]).
    pub fn with_permits(&self, permits: u32) -> Result<Semaphore> {
        check_permits(permits)?;
        Ok(Semaphore {
            lock: self.lock.of_kind(Kind::Semaphore { permits, take: 1 }),
            permits,
        })
    }

    /// The same semaphore, its permits held on behalf of `owner` (see [`Lock::owned_by`]; an
    /// owner id it refuses fails every acquisition with [`Error::InvalidArgument`]).
    #[must_use = "this returns a new handle with the setting; the one it is called on is unchanged"]
    pub fn owned_by(&self, owner: impl Into<String>) -> Semaphore {
        self.with_lock(self.lock.owned_by(owner))
    }

    /// The same semaphore, each hold renewed for at most `max_hold` (see [`Lock::max_hold`]; a
    /// zero `max_hold` fails every acquisition with [`Error::InvalidArgument`]).
    #[must_use = "this returns a new handle with the setting; the one it is called on is unchanged"]
    pub fn max_hold(&self, max_hold: Duration) -> Semaphore {
        self.with_lock(self.lock.max_hold(max_hold))
    }

    /// The same semaphore, its permits taken with this lease, never renewed (see
    /// [`Lock::with_lease`]).
    #[must_use = "this returns a new handle with the setting; the one it is called on is unchanged"]
    pub fn with_lease(&self, lease: Duration) -> Semaphore {
        self.with_lock(self.lock.with_lease(lease))
    }

    /// The same semaphore, its waits ended from another thread by `cancel` (see
    /// [`Lock::cancel_on`]).
    #[must_use = "this returns a new handle with the setting; the one it is called on is unchanged"]
    pub fn cancel_on(&self, cancel: &Cancel) -> Semaphore {
        self.with_lock(self.lock.cancel_on(cancel))
    }

    fn with_lock(&self, lock: Lock) -> Semaphore {
        Semaphore {
            lock,
            permits: self.permits,
        }
    }

    /// The [`Lock`] whose every acquisition takes `n` permits in one hold (one guard, one
    /// lease), with this semaphore's settings: `semaphore.taking(3)?.try_lock_for(wait)`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] unless `n` is from 1 to [`Semaphore::permits`].
    pub fn taking(&self, n: u32) -> Result<Lock> {
        if n == 0 || n > self.permits {
            return Err(Error::InvalidArgument(format!(
                "an acquisition takes from 1 to the semaphore's {} permits, not {n}",
                self.permits
            )));
        }
        Ok(self.lock.of_kind(Kind::Semaphore {
            permits: self.permits,
            take: n,
        }))
    }

    /// Takes one permit, waiting as long as it takes (or until cancelled, with
    /// [`Semaphore::cancel_on`]).
    ///
    /// # Errors
    ///
    /// As [`Lock::lock`]; [`Error::WrongType`] if the name's key holds something else (a lock,
    /// a read-write lock).
    pub fn acquire(&self) -> Result<LeaseGuard> {
        self.lock.lock()
    }

    /// One attempt at one permit: `Ok(None)` if none is free.
    ///
    /// # Errors
    ///
    /// As [`Semaphore::acquire`].
    pub fn try_acquire(&self) -> Result<Option<LeaseGuard>> {
        self.lock.try_lock()
    }

    /// Waits up to `wait` for one permit; `Ok(None)` if none came free.
    ///
    /// # Errors
    ///
    /// As [`Lock::try_lock_for`].
    pub fn try_acquire_for(&self, wait: Duration) -> Result<Option<LeaseGuard>> {
        self.lock.try_lock_for(wait)
    }

    /// Waits until `deadline` for one permit; `Ok(None)` if none came free.
    ///
    /// # Errors
    ///
    /// As [`Lock::try_lock_until`].
    pub fn try_acquire_until(&self, deadline: Instant) -> Result<Option<LeaseGuard>> {
        self.lock.try_lock_until(deadline)
    }

    /// The permits free now by this handle's number: [`Semaphore::permits`] less those held
    /// (0 if more are held).
    ///
    /// # Errors
    ///
    /// As [`Semaphore::inspect`].
    pub fn available_permits(&self) -> Result<u64> {
        let held = self.inspect()?.permits_in_use.unwrap_or(0);
        Ok(u64::from(self.permits).saturating_sub(held))
    }

    /// What the store holds for the semaphore: its holders (each hold's owner), the permits in use
    /// ([`LockState::permits_in_use`]) and last declared, the longest lease left, the newest
    /// hold's token. Read in two round trips.
    ///
    /// # Errors
    ///
    /// As [`Lock::inspect`].
    pub fn inspect(&self) -> Result<LockState> {
        self.lock.inspect()
    }

    /// Makes `permits` the semaphore's stored number of permits, whoever holds permits now, and
    /// returns the number stored before, if one was: from now on every acquisition must declare
    /// it while anyone holds a permit (a handle declaring another number is refused; take one
    /// that declares it with [`Semaphore::with_permits`]). Holds in excess of a lower number keep
    /// their permits until they end. Within the command timeout.
    ///
    /// ```no_run
    /// # fn main() -> redis_lease::Result<()> {
    /// # let client = redis_lease::Client::open("redis://127.0.0.1/")?;
    /// // Hosts still declaring 3 are refused from now on, until they declare 5 too.
    /// let exports = client.semaphore("exports", 5)?;
    /// let before = exports.resize(5)?;
    /// assert!(before.is_none_or(|before| before <= 5));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Lock::inspect`]; [`Error::InvalidArgument`] for permits out of range (1 to
    /// [`MAX_PERMITS`]); [`Error::WrongType`] if the name is another primitive's.
    pub fn resize(&self, permits: u32) -> Result<Option<u32>> {
        check_permits(permits)?;
        let deadline = self.lock.core().call_deadline();
        self.lock.resizes()?.resize(permits, deadline)
    }

    /// Ends every hold of the semaphore whoever holds it, and wakes its waiters; the holders are
    /// not told. Returns whether anything was held. For operators.
    ///
    /// # Errors
    ///
    /// As [`Lock::inspect`].
    pub fn force_unlock(&self) -> Result<bool> {
        self.lock.force_unlock()
    }
}

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &self.name())
            .field("permits", &self.permits)
            .finish_non_exhaustive()
    }
}
