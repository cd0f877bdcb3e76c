//! The bound on pending tasks that a builder's `max_pending` sets: one count shared by every
//! shard, kept exact.
//!
//! Only a timer built with `max_pending` keeps this count: every schedule then takes a place
//! with one compare-and-swap on a cache line that all calling threads share, and every task
//! leaving the timer (run, cancelled, handed back by a stop) gives it back. A recurring task
//! keeps its place from its schedule to its end, through its runs, so that putting it back
//! after a run never needs a place another task may have taken meanwhile. A timer without the
//! setting keeps no shared count at all, and each shard alone bounds its own wheel at
//! [`MAX_PENDING`](crate::MAX_PENDING).

use std::sync::atomic::{AtomicUsize, Ordering};

/// The count of tasks stored against a bound, on its own cache lines.
#[repr(align(128))]
#[derive(Debug)]
pub(crate) struct PendingLimit {
    max: usize,
    pending: AtomicUsize,
}

impl PendingLimit {
    pub(crate) fn new(max: usize) -> Self {
        PendingLimit {
            max,
            pending: AtomicUsize::new(0),
        }
    }

    /// Takes a place for one more task; `false` if all `max` are taken. Never lets the count
    /// pass `max`, and refuses only while it is at `max`.
    pub(crate) fn try_take(&self) -> bool {
        self.pending
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |pending| {
                (pending < self.max).then_some(pending + 1)
            })
            .is_ok()
    }

    /// Gives back the places of `count` tasks that left the timer.
    pub(crate) fn release(&self, count: usize) {
        if count > 0 {
            self.pending.fetch_sub(count, Ordering::AcqRel);
        }
    }
}
