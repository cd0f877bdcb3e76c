//! Timestamps every process on the host shares: `CLOCK_MONOTONIC`, in nanoseconds. `Instant` reads
//! the same clock on Linux, so an `Instant` converts by its distance from a reading of both.

use nix::time::{clock_gettime, ClockId};
use std::time::Instant;

/// Nanoseconds of `CLOCK_MONOTONIC` now.
pub fn now_ns() -> u64 {
    clock_gettime(ClockId::CLOCK_MONOTONIC)
        .map(|time| time.tv_sec() as u64 * 1_000_000_000 + time.tv_nsec() as u64)
        .unwrap_or(0)
}

/// Converts `Instant`s to `CLOCK_MONOTONIC` nanoseconds.
#[derive(Clone, Copy)]
pub struct Stamp {
    instant: Instant,
    ns: u64,
}

impl Stamp {
    pub fn new() -> Self {
        Stamp {
            instant: Instant::now(),
            ns: now_ns(),
        }
    }

    pub fn of(&self, instant: Instant) -> u64 {
        match instant.checked_duration_since(self.instant) {
            Some(after) => self.ns + after.as_nanos() as u64,
            None => self
                .ns
                .saturating_sub(self.instant.duration_since(instant).as_nanos() as u64),
        }
    }
}

impl Default for Stamp {
    fn default() -> Self {
        Stamp::new()
    }
}
