//! What the `interleavings` checks of this crate and of `redis-lease` share, public (and hidden)
//! in the `RUSTFLAGS="--cfg shuttle"` build only: how a check is explored, the timer it runs on,
//! and how it waits for that timer's worker.

use crate::{ManualClock, Timer};
use std::time::Duration;

/// The tick of [`timer`].
pub const TICK: Duration = Duration::from_millis(1);

/// How far away a deadline must be for a check never to reach it: a timed wait on the checked
/// condition variable ([`crate::checked::Condvar::wait_until`]) with a deadline at least this far
/// never times out.
pub const UNREACHED: Duration = Duration::from_secs(24 * 3600);

/// Runs `check` under `schedules` random schedules, then as many of PCT's (depth 3).
pub fn explore<F>(check: F, schedules: usize)
where
    F: Fn() + Clone + Send + Sync + 'static,
{
    shuttle::check_random(check.clone(), schedules);
    shuttle::check_pct(check, schedules, 3);
}

/// A timer of one shard and a [`TICK`] on `clock`.
pub fn timer(clock: &ManualClock) -> Timer {
    Timer::builder()
        .clock(clock.clone())
        .tick(TICK)
        .shards(1)
        .build()
        .expect("valid settings")
}

/// Waits, letting the other threads run, until the worker of a stopped `timer` has exited.
pub fn await_exit(timer: &Timer) {
    while !timer.await_termination(Duration::from_secs(1)) {
        shuttle::thread::yield_now();
    }
}
