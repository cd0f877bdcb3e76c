//! What a timer's handles and its worker share: the shards, the worker's sleep, the clock.
//!
//! # Ground rules: the life of a task
//!
//! A task is *pending* from the moment a `schedule*` call stores it in a shard's wheel. It leaves
//! that state exactly once, by one of three transitions, each made by whoever takes it out of the
//! wheel under the shard's lock:
//!
//! * pending -> *cancelled*, by its handle ([`Wheel::cancel`](crate::Wheel::cancel)); the handle
//!   then sets its own cancelled bit and drops the task before `cancel` returns;
//! * pending -> *expired*, by the worker ([`Wheel::advance`](crate::Wheel::advance)), which runs
//!   it after unlocking;
//! * pending -> *unrun*, by a stop ([`Wheel::drain`](crate::Wheel::drain)), which records its key
//!   in the shard's `drained` set and hands it back to the caller of
//!   [`Timer::stop`](crate::Timer::stop).
//!
//! The other two find its key dead and do nothing: `cancel` returns `false`, the worker never
//! sees it, the stop does not return it. Nobody else changes a stored task. A recurring task that
//! ran goes back to pending in the same shard (the worker stores it again), unless its handle
//! cancelled it meanwhile or the shard was stopped.

use super::limit::PendingLimit;
use super::pool;
use super::shard::{caller_number, Shard, Stored};
use super::sleep::Sleep;
use crate::clock::{Clock, Follower};
use crate::metrics::Metrics;
use crate::sync::{self, AtomicBool, ThreadId};
use crate::tick::Ticks;
use crate::wheel::Key;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Tasks a stop took out, with their keys and deadline ticks.
pub(crate) type Jobs = Vec<(Key, u64, Stored)>;

pub(crate) struct Shared {
    /// Taken from the pool at build, given back when the last handle to this value goes.
    pub(crate) shards: Box<[&'static Shard]>,
    /// The bound on pending tasks, when one was set (every shard holds it too).
    pub(crate) limit: Option<Arc<PendingLimit>>,
    pub(crate) sleep: Sleep,
    /// Set once, by the first stop. Each shard also records it under its own lock.
    pub(crate) stopped: AtomicBool,
    pub(crate) ticks: Ticks,
    pub(crate) clock: Clock,
    pub(crate) worker: OnceLock<ThreadId>,
    /// The worker's own counters: only the worker writes them.
    pub(crate) counters: WorkerCounters,
}

/// Counters only the worker thread writes.
#[derive(Default)]
pub(crate) struct WorkerCounters {
    pub(crate) fired: AtomicU64,
    pub(crate) panicked: AtomicU64,
    pub(crate) wakeups: AtomicU64,
    pub(crate) max_lateness_nanos: AtomicU64,
}

impl WorkerCounters {
    /// Adds to a counter that only the worker writes: a load and a store, no read-modify-write.
    pub(crate) fn add(counter: &AtomicU64, by: u64) {
        counter.store(counter.load(Ordering::Relaxed) + by, Ordering::Relaxed);
    }
}

impl Shared {
    pub(crate) fn new(
        shards: Vec<&'static Shard>,
        limit: Option<Arc<PendingLimit>>,
        ticks: Ticks,
        clock: Clock,
    ) -> Self {
        let now = clock.now();
        Shared {
            shards: shards.into_boxed_slice(),
            limit,
            sleep: Sleep::new(now),
            stopped: AtomicBool::new(false),
            ticks,
            clock,
            worker: OnceLock::new(),
            counters: WorkerCounters::default(),
        }
    }

    /// The shard the calling thread schedules on.
    #[inline]
    pub(crate) fn home_shard(&self) -> &'static Shard {
        // The shard count is a power of two.
        self.shards[caller_number() & (self.shards.len() - 1)]
    }

    /// Gives back `count` places to the pending limit, if there is one.
    pub(crate) fn release(&self, count: usize) {
        if let Some(limit) = &self.limit {
            limit.release(count);
        }
    }

    pub(crate) fn on_worker(&self) -> bool {
        self.worker.get() == Some(&sync::current().id())
    }

    /// Marks the timer stopped, takes every pending task out of every shard and wakes the
    /// worker so that it exits. Returns the tasks in deadline order; the caller drops or returns
    /// them. Only the first call finds any.
    pub(crate) fn stop(&self) -> Jobs {
        {
            let mut sleep = self.sleep.state.lock();
            if sleep.stopped {
                return Vec::new();
            }
            sleep.stopped = true;
            self.stopped.store(true, Ordering::SeqCst);
            self.sleep.wake.notify_one();
            self.sleep.progress.notify_all();
        }
        let mut unrun: Jobs = Vec::new();
        for shard in self.shards.iter() {
            let mut state = shard.state.lock();
            state.stopped = true;
            let drained = state.wheel.drain();
            state.drained.extend(drained.iter().map(|&(key, _, _)| key));
            state.release(drained.len());
            drop(state);
            unrun.extend(drained);
        }
        unrun.sort_by_key(|&(_, tick, _)| tick);
        unrun
    }

    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// Tasks stored in every shard now.
    pub(crate) fn pending(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.state.lock().wheel.len())
            .sum()
    }

    /// The counters of every shard and of the worker, added up.
    pub(crate) fn metrics(&self) -> Metrics {
        let mut metrics = Metrics {
            fired: self.counters.fired.load(Ordering::Relaxed),
            panicked: self.counters.panicked.load(Ordering::Relaxed),
            wakeups: self.counters.wakeups.load(Ordering::Relaxed),
            max_lateness: Duration::from_nanos(
                self.counters.max_lateness_nanos.load(Ordering::Relaxed),
            ),
            ..Metrics::default()
        };
        for shard in self.shards.iter() {
            let state = shard.state.lock();
            metrics.scheduled += state.scheduled;
            metrics.cancelled += state.cancelled;
            metrics.rejected += state.rejected;
            metrics.pending += state.wheel.len();
        }
        metrics
    }

    pub(crate) fn await_exit(&self, limit: Duration) -> bool {
        if self.on_worker() {
            return false;
        }
        let deadline = Instant::now().checked_add(limit);
        let mut state = self.sleep.state.lock();
        while !state.exited {
            match deadline {
                Some(deadline) => {
                    if self
                        .sleep
                        .progress
                        .wait_until(&mut state, deadline)
                        .timed_out()
                    {
                        return state.exited;
                    }
                }
                None => self.sleep.progress.wait(&mut state),
            }
        }
        true
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        pool::give_back(&self.shards);
    }
}

impl Follower for Shared {
    fn catch_up(&self, now: Instant, limit: Duration) -> bool {
        let mut state = self.sleep.state.lock();
        state.kick = true;
        self.sleep.wake.notify_one();
        if self.on_worker() {
            return true;
        }
        let deadline = Instant::now() + limit;
        let start = state.passes;
        while (state.passes == start || state.caught_up_to < now) && !state.exited {
            if self
                .sleep
                .progress
                .wait_until(&mut state, deadline)
                .timed_out()
            {
                return false;
            }
        }
        true
    }
}
