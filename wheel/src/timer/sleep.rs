//! Where the worker sleeps, and how a scheduler knows whether to wake it.
//!
//! # Ground rules
//!
//! * `wake_at` is the tick the sleeping worker will wake at by itself. It is [`AWAKE`] while the
//!   worker runs (it will look at every shard before it sleeps again, so nobody needs to wake
//!   it), and [`PLANNING`] while it looks at the shards to choose its next tick.
//! * A scheduler stores its task first and lowers its shard's due hint if the task is due
//!   earlier (under the shard's lock), then reads `wake_at`, and wakes the worker only if its tick
//!   is earlier. The worker sets [`PLANNING`] before it reads the first shard's due hint, and
//!   publishes the tick it chose after reading the last. Hints and `wake_at` are written and read
//!   sequentially consistent, so of a scheduler's hint store and the worker's `PLANNING` store,
//!   whichever comes second is followed by a read that sees the first: either the worker saw the
//!   new hint, or the scheduler reads `PLANNING` or the chosen tick, and wakes the worker if its
//!   tick is earlier. A scheduler that left the hint alone found it at or before its own tick:
//!   whoever set that hint made the same check, so the worker wakes by then and looks again. No
//!   wakeup is lost, and an idle timer is woken by nobody.
//! * A wakeup is a notification under `state`'s lock. The worker holds that lock from before it
//!   sets [`PLANNING`] until its condition-variable wait releases it, so a notification sent
//!   while it plans waits for it to be asleep, and wakes it.
//! * Everything in [`SleepState`] changes only under its lock.

use crate::sync::{AtomicU64, Condvar, Mutex};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// `wake_at` while the worker is awake.
pub(crate) const AWAKE: u64 = 0;
/// `wake_at` while the worker chooses the tick to sleep until: every scheduler wakes it.
pub(crate) const PLANNING: u64 = u64::MAX;

pub(crate) struct Sleep {
    /// Read by every schedule; on its own cache lines, written only as the worker falls asleep
    /// and wakes up.
    pub(crate) wake_at: WakeAt,
    pub(crate) state: Mutex<SleepState>,
    /// The worker sleeps here.
    pub(crate) wake: Condvar,
    /// Callers waiting for the worker's progress (a manual clock catching up, a termination)
    /// sleep here.
    pub(crate) progress: Condvar,
}

/// The tick the sleeping worker wakes at, alone on its cache lines.
#[repr(align(128))]
pub(crate) struct WakeAt(pub(crate) AtomicU64);

pub(crate) struct SleepState {
    /// Set by a stop; the worker exits when it sees it.
    pub(crate) stopped: bool,
    /// Set by the worker as it exits.
    pub(crate) exited: bool,
    /// Set when a manual clock moved: the worker must read the time again before it sleeps.
    pub(crate) kick: bool,
    /// How many times the worker has run everything due and gone to sleep.
    pub(crate) passes: u64,
    /// The time up to which the worker has run everything due.
    pub(crate) caught_up_to: Instant,
}

impl Sleep {
    pub(crate) fn new(now: Instant) -> Self {
        Sleep {
            wake_at: WakeAt(AtomicU64::new(AWAKE)),
            state: Mutex::new(SleepState {
                stopped: false,
                exited: false,
                kick: false,
                passes: 0,
                caught_up_to: now,
            }),
            wake: Condvar::new(),
            progress: Condvar::new(),
        }
    }

    /// Wakes the worker if it sleeps past `tick`. Called after a task due at `tick` was stored
    /// and its shard unlocked.
    #[inline]
    pub(crate) fn wake_before(&self, tick: u64) {
        if tick < self.wake_at.0.load(Ordering::SeqCst) {
            let _state = self.state.lock();
            self.wake.notify_one();
        }
    }

    /// Marks the worker as choosing its next tick. Called with `state` locked.
    pub(crate) fn planning(&self) {
        self.wake_at.0.store(PLANNING, Ordering::SeqCst);
    }

    /// Publishes the tick the worker sleeps until ([`NEVER`](crate::tick::NEVER) for none).
    /// Called with `state` locked, after the last shard was unlocked.
    pub(crate) fn sleeping_until(&self, tick: u64) {
        self.wake_at.0.store(tick, Ordering::SeqCst);
    }

    /// Marks the worker awake.
    pub(crate) fn awake(&self) {
        self.wake_at.0.store(AWAKE, Ordering::SeqCst);
    }
}
