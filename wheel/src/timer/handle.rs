//! The handles `schedule*` returns: [`Timeout`] for a one-shot task, [`Periodic`] for a
//! recurring one. Each holds the shard its task is stored in, so everything it does takes that
//! shard's lock alone. Shards are never freed (see `pool.rs`), so a handle holds a plain
//! reference and its task's key: creating and dropping one changes no reference count.

use super::shard::Shard;
use crate::sync::AtomicU64;
use crate::task::PeriodicState;
use crate::wheel::Key;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// Set in a [`Timeout`]'s raw key once its `cancel` has succeeded.
const CANCELLED: u64 = 1 << 63;

/// A one-shot task waiting in a [`Timer`](crate::Timer). Two words: the task's shard of the
/// timer and the task's key.
///
/// Dropping the handle does not cancel the task.
pub struct Timeout {
    shard: &'static Shard,
    /// The task's [`Key`], with [`CANCELLED`] set once cancelled.
    key: AtomicU64,
}

impl Timeout {
    #[inline]
    pub(crate) fn new(shard: &'static Shard, key: Key) -> Self {
        Timeout {
            shard,
            key: AtomicU64::new(key.to_raw()),
        }
    }

    #[inline]
    fn key(&self) -> Key {
        Key::from_raw(self.key.load(Ordering::Acquire))
    }

    /// Cancels the task and drops it at once. Returns `true` only if this call took it out before
    /// the worker did: a `false` means it has run, is running, was cancelled already, or was handed
    /// back by [`Timer::stop`](crate::Timer::stop).
    #[inline]
    pub fn cancel(&self) -> bool {
        let Some(task) = self.shard.cancel(self.key()) else {
            return false;
        };
        // Only the one `cancel` that took the task out writes the key: a plain store will do.
        let raw = self.key.load(Ordering::Relaxed);
        self.key.store(raw | CANCELLED, Ordering::Release);
        drop(task);
        true
    }

    /// Whether [`Timeout::cancel`] succeeded.
    pub fn is_cancelled(&self) -> bool {
        self.key.load(Ordering::Acquire) & CANCELLED != 0
    }

    /// Whether the worker has taken the task to run it (it may still be running). Once the
    /// timer has been dropped and a timer built since has taken its shard, a task that was
    /// handed back unrun counts as expired too.
    pub fn is_expired(&self) -> bool {
        if self.is_cancelled() {
            return false;
        }
        let state = self.shard.state.lock();
        !state.wheel.contains(self.key()) && !state.drained.contains(&self.key())
    }

    /// Whether the task is still waiting for its deadline.
    pub fn is_pending(&self) -> bool {
        self.shard.state.lock().wheel.contains(self.key())
    }

    /// The tick boundary the task waits for, while it is pending.
    pub fn deadline(&self) -> Option<Instant> {
        let state = self.shard.state.lock();
        let tick = state.wheel.deadline(self.key())?;
        state.ticks.instant_of(tick)
    }
}

impl std::fmt::Debug for Timeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timeout")
            .field("key", &self.key())
            .field("cancelled", &self.is_cancelled())
            .finish_non_exhaustive()
    }
}

/// A recurring task in a [`Timer`](crate::Timer). Dropping the handle does not cancel it.
pub struct Periodic {
    shard: &'static Shard,
    state: Arc<PeriodicState>,
}

impl Periodic {
    pub(crate) fn new(shard: &'static Shard, state: Arc<PeriodicState>) -> Self {
        Periodic { shard, state }
    }

    /// Stops the task: it is taken out of the wheel and dropped at once, and if a run is in
    /// progress, that run is its last. Returns `true` if this call stopped it, `false` if it was
    /// already cancelled or gone (stopped timer, panicked run).
    pub fn cancel(&self) -> bool {
        let mut shard = self.shard.state.lock();
        if self.state.cancelled.load(Ordering::Acquire)
            || self.state.finished.load(Ordering::Acquire)
        {
            return false;
        }
        self.state.cancelled.store(true, Ordering::Release);
        shard.cancelled += 1;
        let key = Key::from_raw(self.state.key.load(Ordering::Acquire));
        let task = shard.wheel.cancel(key);
        if task.is_some() {
            shard.release(1);
        }
        drop(shard);
        drop(task);
        true
    }

    /// Whether [`Periodic::cancel`] succeeded.
    pub fn is_cancelled(&self) -> bool {
        self.state.cancelled.load(Ordering::Acquire)
    }

    /// How many runs have completed.
    pub fn runs(&self) -> u64 {
        self.state.runs.load(Ordering::Relaxed)
    }
}

impl std::fmt::Debug for Periodic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Periodic")
            .field("runs", &self.runs())
            .field("cancelled", &self.is_cancelled())
            .finish_non_exhaustive()
    }
}
