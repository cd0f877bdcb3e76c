//! One shard of a timer: a [`Wheel`] under its own lock, and which shard a calling thread uses.
//!
//! A timer keeps several shards so that threads scheduling at once do not queue behind one lock.
//! Each thread is given a number the first time it schedules on any timer, and uses the shard of
//! that number (modulo the shard count) on every timer: threads that start one after another use
//! different shards. A task stays in the shard it was scheduled on until it leaves the timer;
//! its handle holds that shard, so a cancel takes only that shard's lock, whichever thread calls
//! it.
//!
//! # Ground rules
//!
//! * Everything in [`ShardState`] changes only with the shard's lock held, and the lock is held
//!   only for wheel operations and counters: no user code (a task, or a task's destructor) ever
//!   runs under it. Values taken out of the wheel are dropped or run after the guard is released.
//! * Nobody holds two shard locks at once. The worker may hold the worker's sleep lock while it
//!   takes a shard lock (see `sleep.rs`), never the other way round.
//! * `due_hint` is never later than the earliest tick at which the shard's wheel has work: a
//!   scheduler lowers it (under the lock, before it reads the worker's `wake_at`) when it stores
//!   an earlier tick, and the worker sets it to the wheel's next due tick (under the lock) after
//!   taking what was due. Cancels leave it as it is; the worker then finds nothing at that tick
//!   and sets it again. The worker reads it without the lock, so it locks only shards that have
//!   work, and never keeps a busy scheduler's shard waiting for nothing.
//! * `stopped` is set, and the wheel drained, under the lock, so a task is either stored before
//!   the drain (and handed back by it) or refused with
//!   [`ScheduleError::Stopped`](crate::ScheduleError::Stopped).

use super::limit::PendingLimit;
use crate::sync::{AtomicU64, ShardMutex as Mutex};
use crate::task::Job;
use crate::tick::{Ticks, NEVER};
use crate::wheel::{InvalidSlots, Key, Wheel};
use std::cell::Cell;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A task as a shard stores it.
pub(crate) type Stored = Box<dyn Job>;

/// One wheel and its lock. Aligned to two cache lines, so that two shards never share one.
/// Shards are never freed: a dropped timer's shards wait in a pool for the next timer (see
/// `pool.rs`), so that handles refer to them without a reference count.
#[repr(align(128))]
pub(crate) struct Shard {
    pub(crate) state: Mutex<ShardState>,
    /// A tick at or before the earliest at which the wheel has work; [`NEVER`] when it has none.
    pub(crate) due_hint: AtomicU64,
}

pub(crate) struct ShardState {
    pub(crate) wheel: Wheel<Stored>,
    /// The ticks of the timer using the shard, to turn a stored tick back into an instant.
    pub(crate) ticks: Ticks,
    /// That timer's bound on pending tasks, when one was set.
    pub(crate) limit: Option<Arc<PendingLimit>>,
    /// Set by a stop: nothing more is stored.
    pub(crate) stopped: bool,
    /// Keys of the tasks a stop took out of the wheel: they are neither cancelled nor expired.
    pub(crate) drained: HashSet<Key>,
    /// Tasks accepted by a `schedule*` call on this shard.
    pub(crate) scheduled: u64,
    /// Tasks cancelled through their handle.
    pub(crate) cancelled: u64,
    /// `schedule*` calls refused for lack of room.
    pub(crate) rejected: u64,
}

impl ShardState {
    /// Gives back `count` places to the pending limit, if there is one.
    pub(crate) fn release(&self, count: usize) {
        if let Some(limit) = &self.limit {
            limit.release(count);
        }
    }
}

impl Shard {
    pub(crate) fn new(
        wheel: Wheel<Stored>,
        ticks: Ticks,
        limit: Option<Arc<PendingLimit>>,
    ) -> Self {
        Shard {
            state: Mutex::new(ShardState {
                wheel,
                ticks,
                limit,
                stopped: false,
                drained: HashSet::new(),
                scheduled: 0,
                cancelled: 0,
                rejected: 0,
            }),
            due_hint: AtomicU64::new(NEVER),
        }
    }

    /// Makes a shard that a dropped timer used ready for a new one: an empty wheel of `slots`
    /// buckets whose keys never match the old wheel's, and counters at zero.
    pub(crate) fn restart(
        &self,
        slots: usize,
        ticks: Ticks,
        limit: Option<Arc<PendingLimit>>,
    ) -> Result<(), InvalidSlots> {
        let mut state = self.state.lock();
        let old = std::mem::replace(&mut state.wheel, Wheel::new(1)?);
        state.wheel = Wheel::succeed(old, slots)?;
        state.ticks = ticks;
        state.limit = limit;
        state.stopped = false;
        state.drained = HashSet::new();
        state.scheduled = 0;
        state.cancelled = 0;
        state.rejected = 0;
        self.due_hint.store(NEVER, Ordering::SeqCst);
        Ok(())
    }

    /// Frees what a dropped timer left in the shard (its wheel's memory; the wheel is empty
    /// after the stop that every drop makes), keeping what its handles still ask about. Tasks
    /// still stored are dropped after the lock is released.
    pub(crate) fn retire(&self) {
        let Ok(placeholder) = Wheel::new(1) else {
            return;
        };
        let old = {
            let mut state = self.state.lock();
            state.stopped = true;
            state.limit = None;
            std::mem::replace(&mut state.wheel, placeholder)
        };
        let left = old.len();
        let Ok(small) = Wheel::succeed(old, 1) else {
            return;
        };
        self.state.lock().wheel = small;
        if left > 0 {
            log::debug!("a dropped timer's shard still held {left} tasks; dropped them");
        }
    }

    /// Lowers the due hint to `tick` if it is later. Called with the lock held, after storing a
    /// task due at `tick`, and before reading the worker's `wake_at`.
    #[inline]
    pub(crate) fn stored_due_at(&self, tick: u64) {
        if tick < self.due_hint.load(Ordering::Relaxed) {
            self.due_hint.store(tick, Ordering::SeqCst);
        }
    }

    /// The due hint, as the worker reads it without the lock.
    pub(crate) fn due_hint(&self) -> u64 {
        self.due_hint.load(Ordering::SeqCst)
    }

    /// Takes out the task under `key`, if it is still stored, counting a cancellation and
    /// giving its place back to the pending limit.
    #[inline]
    pub(crate) fn cancel(&self, key: Key) -> Option<Stored> {
        let mut state = self.state.lock();
        let task = state.wheel.cancel(key)?;
        state.cancelled += 1;
        state.release(1);
        drop(state);
        Some(task)
    }
}

/// The next number handed to a thread that schedules for the first time.
static NEXT_CALLER: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's number, `usize::MAX` until it first schedules.
    static CALLER: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// The calling thread's number: given once, the first time it asks, in the order threads ask.
#[inline]
pub(crate) fn caller_number() -> usize {
    CALLER.with(|caller| {
        let number = caller.get();
        if number != usize::MAX {
            return number;
        }
        let number = NEXT_CALLER.fetch_add(1, Ordering::Relaxed) & (usize::MAX >> 1);
        caller.set(number);
        number
    })
}
