//! [`RateLimiter`]: grants counted by the store's clock, shared by every client of a name, at
//! most its limit in any window; a primitive beside the lock (no hold, no lease, no guard), on
//! the places whose store offers [`Limits`].

mod wait;

use crate::backend::{not_offered, Kind, Limits, Place, Taken};
use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::local_queue::Refused;
use crate::lock::core::Core;
use crate::policy::{after, Wait};
use crate::rate::{declared_other, store_time, Granted, LimiterState, RateLimit};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A rate limiter: at most its limit of grants in any window of the store's clock, across every
/// client of its name, whatever their own clocks say. Made by [`Client::rate_limiter`](crate::Client::rate_limiter)
/// (a sliding window, exact) or [`Client::cell_rate_limiter`](crate::Client::cell_rate_limiter) (a cell rate, one number in the
/// store whatever the rate); see [`RateLimit`] for what each guarantees. Cheap to clone.
///
/// ```no_run
/// use std::time::Duration;
/// # fn main() -> redis_lease::Result<()> {
/// # let client = redis_lease::Client::open("redis://127.0.0.1/")?;
/// // At most 100 calls to the partner's API in any minute, from every host together.
/// let partner = client.rate_limiter("partner-api", 100, Duration::from_secs(60))?;
/// if let Some(grant) = partner.try_acquire_for(1, Duration::from_secs(5))? {
///     // ... call the API: the grant is spent, whatever the call does ...
///     let _ = grant.granted_at();
/// }
/// # Ok(())
/// # }
/// ```
///
/// **Grants are judged by the store.** Every call reads the store's clock, counts the grants
/// that stand, and records its own in one atomic step (one script on Redis, one function in
/// PostgreSQL's transaction): no two clients can both take the last grant, and no client's
/// clock enters the count. A sliding window keeps each grant for one window and grants a call
/// only if its grants and those of the last window together are at most the limit.
///
/// **A blocked acquisition waits for its moment.** A call that finds too few grants is told by
/// the store when enough will have left the window (or the cell rate's arrival time passed),
/// and sleeps on the client's timer until exactly then, to take again; nothing polls. The
/// threads of one client that wait take turns, first come first served (up to
/// [`ClientBuilder::max_local_waiters`](crate::ClientBuilder::max_local_waiters)), so that one of
/// them at a time asks the store; across clients, the waiters woken at one moment race for what
/// freed. A wait with a deadline ([`RateLimiter::try_acquire_for`],
/// [`RateLimiter::try_acquire_until`]) returns `Ok(None)` at once when that moment falls after
/// its deadline. [`RateLimiter::try_acquire`] asks the store at once, whoever waits.
///
/// **There is no release.** A grant is spent when it is made, whether or not its work happens:
/// giving it back would let the work done count less than the grants made. Redisson's
/// `RRateLimiter::release` shows how that goes (its #7342 and #7329: released permits lost, or
/// more available than the rate). A call that fails may have spent its grants (the store may
/// have recorded them before its answer was lost): a limit is never exceeded, and may be
/// under-used.
///
/// **The limit is stored with the limiter.** The first call when none is stored stores its
/// handle's; while the limiter's grants still count (and for one window after a
/// [`RateLimiter::reconfigure`]), a call declaring another is refused with
/// [`Error::InvalidArgument`] naming both, nothing taken: a host configured with another limit
/// is told, rather than counted against a limit the others do not know of. To change it, say
/// so with [`RateLimiter::reconfigure`]. A limiter whose grants no longer count keeps nothing
/// in the store.
#[derive(Clone)]
pub struct RateLimiter {
    core: Arc<Core>,
    place: Arc<dyn Place>,
    limit: RateLimit,
    cancel: Option<Cancel>,
}

impl RateLimiter {
    /// The limiter of `place`, declaring `limit` (checked).
    pub(crate) fn new(core: Arc<Core>, place: Arc<dyn Place>, limit: RateLimit) -> RateLimiter {
        RateLimiter {
            core,
            place,
            limit,
            cancel: None,
        }
    }

    /// The limiter's name.
    pub fn name(&self) -> &str {
        &self.place.id().name
    }

    /// The limit this handle declares.
    pub fn limit(&self) -> RateLimit {
        self.limit
    }

    /// The same limiter, declaring `limit` (see "The limit is stored with the limiter").
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a limit out of range (see [`RateLimit`]).
    pub fn with_limit(&self, limit: RateLimit) -> Result<RateLimiter> {
        Ok(RateLimiter {
            limit: limit.checked()?,
            ..self.clone()
        })
    }

    /// The same limiter, its waits ended from another thread by `cancel`: a waiting call
    /// returns [`Error::Cancelled`] soon after [`Cancel::cancel`] (a call under way with the
    /// store first returns, within the command timeout).
    #[must_use = "this returns a new handle with the setting; the one it is called on is unchanged"]
    pub fn cancel_on(&self, cancel: &Cancel) -> RateLimiter {
        RateLimiter {
            cancel: Some(cancel.clone()),
            ..self.clone()
        }
    }

    /// One attempt at `n` grants: `Ok(None)` if the limiter cannot grant them now.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for `n` of 0 or above the limit (a cell rate's burst), or
    /// when the limiter stores another limit than this handle's;
    /// [`Error::Unavailable`] and [`Error::Refused`] from the store (the grants may have been
    /// spent); [`Error::NotReplicated`] where the client asks for replica acknowledgements and
    /// too few came (the grants are spent); [`Error::WrongType`] if a key of the name holds
    /// something else.
    pub fn try_acquire(&self, n: u64) -> Result<Option<Granted>> {
        self.take_within(n, Wait::No)
    }

    /// `n` grants, waiting as long as it takes (or until cancelled, with
    /// [`RateLimiter::cancel_on`]).
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::try_acquire`]; [`Error::Cancelled`]; [`Error::QueueFull`] when
    /// `max_local_waiters` threads of this client wait for the limiter already.
    pub fn acquire(&self, n: u64) -> Result<Granted> {
        match self.take_within(n, Wait::Until(None))? {
            Some(granted) => Ok(granted),
            None => Err(Error::Protocol(
                "a rate limiter's wait without a deadline gave up".into(),
            )),
        }
    }

    /// `n` grants, waiting up to `wait` for them; `Ok(None)` if they cannot be had by then,
    /// told at once when the store says so.
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::acquire`]. A store that cannot be reached is tried again while the
    /// wait lasts.
    pub fn try_acquire_for(&self, n: u64, wait: Duration) -> Result<Option<Granted>> {
        self.take_within(n, Wait::Until(Some(after(wait))))
    }

    /// `n` grants, waiting until `deadline` for them; `Ok(None)` if they cannot be had by
    /// then, told at once when the store says so.
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::try_acquire_for`].
    pub fn try_acquire_until(&self, n: u64, deadline: Instant) -> Result<Option<Granted>> {
        self.take_within(n, Wait::Until(Some(deadline)))
    }

    /// The grants a call could take now, by the stored limit (by this handle's if none is
    /// stored). Others may take them first.
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::inspect`].
    pub fn available(&self) -> Result<u64> {
        Ok(self.inspect()?.available)
    }

    /// What the store holds for the limiter now: its stored limit, the grants that count, those
    /// available and when the next one will be, read by the store's clock in one call that
    /// writes nothing.
    ///
    /// # Errors
    ///
    /// [`Error::Unavailable`] and [`Error::Refused`] from the store; [`Error::WrongType`] if a
    /// key of the name holds something else.
    pub fn inspect(&self) -> Result<LimiterState> {
        let deadline = self.core.call_deadline();
        self.limits()?.meter(&self.limit, deadline)
    }

    /// Stores this handle's limit as the limiter's, whatever was stored, and returns the limit
    /// stored before, if one was: from now on every call must declare it while grants count.
    /// The grants made so far count under the new limit: lowered, nothing is granted until
    /// fewer than it count; a window lengthened counts only the grants the store still keeps
    /// (those of the old window). A limiter with nothing stored keeps the limit for one window
    /// (one period). Within the command timeout.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> redis_lease::Result<()> {
    /// # let client = redis_lease::Client::open("redis://127.0.0.1/")?;
    /// // Hosts still declaring 100 per minute are refused from now on.
    /// let partner = client.rate_limiter("partner-api", 150, Duration::from_secs(60))?;
    /// let before = partner.reconfigure()?;
    /// # let _ = before;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`RateLimiter::inspect`]; [`Error::InvalidArgument`] if the stored limit is of the
    /// other mode (a window, a cell rate) and its grants still count.
    pub fn reconfigure(&self) -> Result<Option<RateLimit>> {
        let deadline = self.core.call_deadline();
        self.limits()?.reconfigure(&self.limit, deadline)
    }

    /// The limiter calls of the place: offered wherever the limiter could be made.
    fn limits(&self) -> Result<&dyn Limits> {
        self.place
            .limits()
            .ok_or_else(|| not_offered(Kind::Limiter, self.core.backend().address()))
    }

    /// Takes `n` grants, waiting as `wait` says: at each refusal, until the moment the store
    /// names, on the client's timer. A call that waits takes its turn among the client's
    /// threads waiting for the limiter first, so that one of them at a time asks the store.
    fn take_within(&self, n: u64, wait: Wait) -> Result<Option<Granted>> {
        self.limit.check_ask(n)?;
        let limits = self.limits()?;
        let deadline = wait.deadline(Instant::now());
        let turn = match wait {
            Wait::No => None,
            Wait::Until(deadline) => {
                let id = self.place.id();
                match self.core.contend(id, "", deadline, self.cancel.as_ref()) {
                    Ok(turn) => Some(turn),
                    Err((refused, _)) => {
                        return match refused {
                            Refused::TimedOut => Ok(None),
                            Refused::Cancelled => Err(self.cancelled()),
                            Refused::Full { waiting } => Err(Error::QueueFull {
                                name: self.name().to_owned(),
                                waiting,
                            }),
                        };
                    }
                }
            }
        };
        let taken = self.take_in_turn(limits, n, wait, deadline);
        if let Some(turn) = turn {
            // A limiter's place keeps no hold for the next thread.
            turn.finish();
        }
        taken
    }

    /// [`RateLimiter::take_within`] in the calling thread's turn.
    fn take_in_turn(
        &self,
        limits: &dyn Limits,
        n: u64,
        wait: Wait,
        deadline: Option<Instant>,
    ) -> Result<Option<Granted>> {
        loop {
            self.check_cancelled()?;
            let sent = Instant::now();
            let taken = limits.take(&self.limit, n, self.core.call_deadline());
            let next = match taken {
                Ok(Taken::Granted { at, available }) => {
                    log::trace!("rate limiter {:?}: {n} granted", self.name());
                    return Ok(Some(Granted::new(n, store_time(at), available)));
                }
                Ok(Taken::Declared { stored }) => {
                    return Err(declared_other(self.name(), &stored, &self.limit));
                }
                // The store judged after `sent`: its moment is no earlier than this one.
                Ok(Taken::Wait { wait: free_in, .. }) => {
                    let at = sent.checked_add(free_in).unwrap_or_else(|| after(free_in));
                    if deadline.is_some_and(|deadline| at > deadline) {
                        return Ok(None);
                    }
                    at
                }
                Err(error) => match wait.retry_at(&error) {
                    Some(at) => {
                        log::debug!("rate limiter {:?}: {error}; trying again", self.name());
                        at
                    }
                    None => return Err(error),
                },
            };
            let timer = self.core.watchdog().timer();
            if wait::until(timer, next, self.cancel.as_ref()) == wait::Woken::Cancelled {
                return Err(self.cancelled());
            }
        }
    }

    fn check_cancelled(&self) -> Result<()> {
        match &self.cancel {
            Some(cancel) if cancel.is_cancelled() => Err(self.cancelled()),
            _ => Ok(()),
        }
    }

    fn cancelled(&self) -> Error {
        Error::Cancelled {
            name: self.name().to_owned(),
        }
    }
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter")
            .field("name", &self.name())
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}
