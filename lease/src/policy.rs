//! What an acquisition asks for, shared by the single-server lock and RedLock: which lease, and
//! how long it may wait; and the bounds every lease and timeout is checked against.

use crate::error::{Error, Result};
use std::time::{Duration, Instant};

/// The shortest lease: below it, the drift allowance (1% + 2 ms) and a timer tick leave next to
/// nothing of the lease to hold the lock by.
pub const MIN_LEASE: Duration = Duration::from_millis(10);
/// The longest lease: a year, far inside what the stores and the monotonic clock can represent.
pub const MAX_LEASE: Duration = Duration::from_secs(365 * 24 * 3600);
/// The longest connect or command timeout.
pub(crate) const MAX_TIMEOUT: Duration = Duration::from_secs(3600);

/// Checks a lease and rounds it down to whole milliseconds, as the stores keep it.
pub(crate) fn check_lease(what: &str, lease: Duration) -> Result<Duration> {
    let lease = Duration::from_millis(u64::try_from(lease.as_millis()).unwrap_or(u64::MAX));
    if !(MIN_LEASE..=MAX_LEASE).contains(&lease) {
        return Err(Error::InvalidArgument(format!(
            "{what} must be from {MIN_LEASE:?} to {} days, not {lease:?}",
            MAX_LEASE.as_secs() / 86_400
        )));
    }
    Ok(lease)
}

/// Checks a timeout a builder was given: above zero and at most [`MAX_TIMEOUT`].
pub(crate) fn check_timeout(what: &str, timeout: Duration) -> Result<()> {
    if timeout.is_zero() || timeout > MAX_TIMEOUT {
        return Err(Error::InvalidArgument(format!(
            "the {what} must be above zero and at most an hour, not {timeout:?}"
        )));
    }
    Ok(())
}

/// Which lease an acquisition asks for.
#[derive(Clone, Copy, Debug)]
pub(crate) enum LeaseKind {
    /// The client's default lease, renewed by the watchdog.
    Renewed,
    /// This lease, never renewed.
    Fixed(Duration),
}

impl LeaseKind {
    /// The lease to ask for (the default was checked when the client was built).
    pub(crate) fn lease(self, default: Duration) -> Result<Duration> {
        match self {
            LeaseKind::Renewed => Ok(default),
            LeaseKind::Fixed(lease) => check_lease("a lease", lease),
        }
    }

    pub(crate) fn renewed(self) -> bool {
        matches!(self, LeaseKind::Renewed)
    }
}

/// The pause before an attempt that failed for a passing reason is made again.
pub(crate) const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// How long an acquisition may wait.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wait {
    /// One attempt.
    No,
    /// Until the deadline (`None`: forever).
    Until(Option<Instant>),
}

impl Wait {
    /// The last instant to try at (`None`: no limit), for a call that started at `started`.
    pub(crate) fn deadline(self, started: Instant) -> Option<Instant> {
        match self {
            Wait::No => Some(started),
            Wait::Until(deadline) => deadline,
        }
    }

    /// When to try again after an attempt that failed with `error`: while a wait with a deadline
    /// lasts, an error that may pass (the store unavailable, a failover in progress, replicas that did
    /// not acknowledge) is tried again after [`RETRY_PAUSE`]; anything else, or a wait without a
    /// deadline or past it, ends the call with the error.
    pub(crate) fn retry_at(self, error: &Error) -> Option<Instant> {
        let Wait::Until(Some(deadline)) = self else {
            return None;
        };
        let passing = error.is_unavailable() || matches!(error, Error::NotReplicated { .. });
        let at = Instant::now() + RETRY_PAUSE;
        (passing && at < deadline).then_some(at)
    }

    /// What a call that could not acquire answers: `Ok(None)` for one attempt, a timeout for a
    /// wait.
    pub(crate) fn gave_up<T>(self, name: &str, started: Instant) -> Result<Option<T>> {
        match self {
            Wait::No => Ok(None),
            Wait::Until(_) => Err(Error::Timeout {
                name: name.to_owned(),
                waited: started.elapsed(),
            }),
        }
    }
}

/// The instant `wait` from now, or a century away if that cannot be represented.
pub(crate) fn after(wait: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(wait)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 3600))
}
