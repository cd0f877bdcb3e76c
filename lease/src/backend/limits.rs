//! [`Taken`]: what a rate limiter's store answers a call for grants.

use crate::rate::RateLimit;
use std::time::Duration;

/// What a call for grants came to, by the store's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Taken {
    /// Granted and recorded at `at` (microseconds since the Unix epoch on the store's clock),
    /// `available` grants left then.
    Granted { at: u64, available: u64 },
    /// Not granted, nothing recorded: they could be had in `wait` at the earliest, if nothing
    /// else takes them first; `available` grants could be had now.
    Wait { wait: Duration, available: u64 },
    /// The limiter stores another limit than the one the call declared: nothing was written.
    Declared { stored: RateLimit },
}
