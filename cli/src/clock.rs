//! Deadlines that cross process boundaries: `CLOCK_MONOTONIC` nanoseconds, which every process
//! of the host reads alike (an `Instant` is that clock too, but cannot be sent).

use nix::time::{clock_gettime, ClockId};
use std::time::{Duration, Instant};

/// Now, in nanoseconds of the monotonic clock.
pub fn now_ns() -> u64 {
    clock_gettime(ClockId::CLOCK_MONOTONIC).map_or(0, |now| {
        let nanos = i128::from(now.tv_sec()) * 1_000_000_000 + i128::from(now.tv_nsec());
        u64::try_from(nanos).unwrap_or(0)
    })
}

/// `instant` in nanoseconds of the monotonic clock, never later than it: the clock is read
/// before the `Instant` it is matched with, so the two readings can only make it earlier.
pub fn ns_of(instant: Instant) -> u64 {
    let clock = now_ns();
    let now = Instant::now();
    match instant.checked_duration_since(now) {
        Some(ahead) => clock.saturating_add(u64::try_from(ahead.as_nanos()).unwrap_or(u64::MAX)),
        None => clock.saturating_sub(
            u64::try_from(now.duration_since(instant).as_nanos()).unwrap_or(u64::MAX),
        ),
    }
}

/// How long until `deadline_ns` (zero once it has passed).
pub fn until(deadline_ns: u64) -> Duration {
    Duration::from_nanos(deadline_ns.saturating_sub(now_ns()))
}
