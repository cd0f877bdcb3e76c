//! What an acquisition asks for, shared by the single-server lock and RedLock: which lease, and
//! how long it may wait.

use crate::error::{Error, Result};
use std::time::{Duration, Instant};

/// Which lease an acquisition asks for.
#[derive(Clone, Copy, Debug)]
pub(crate) enum LeaseKind {
    /// The client's default lease, renewed by the watchdog.
    Renewed,
    /// This lease, never renewed.
    Fixed(Duration),
}

impl LeaseKind {
    /// The lease to ask for; a zero lease is refused.
    pub(crate) fn lease(self, default: Duration) -> Result<Duration> {
        match self {
            LeaseKind::Renewed => Ok(default),
            LeaseKind::Fixed(lease) if lease.is_zero() => {
                Err(Error::InvalidArgument("a lease must be above zero".into()))
            }
            LeaseKind::Fixed(lease) => Ok(lease),
        }
    }

    pub(crate) fn renewed(self) -> bool {
        matches!(self, LeaseKind::Renewed)
    }
}

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
