//! The state a timer's handles and its worker share, behind one lock.
//!
//! # Ground rules
//!
//! * Everything in [`State`] changes only with the lock held, and the lock is held only for wheel
//!   operations and counters: no user code (a task, or a task's destructor) ever runs under it.
//!   Values taken out of the wheel are dropped or run after the guard is released.
//! * A task's life is one transition out of "pending" (stored in the wheel): to *cancelled* by its
//!   handle ([`Wheel::cancel`] under the lock), to *expired* by the worker ([`Wheel::advance`]
//!   under the lock), or to *unrun* by a stop ([`Wheel::drain`] under the lock, its key recorded
//!   in `drained`). Whoever removes it from the wheel owns it; the others find its key dead.
//! * `wake_at` is the tick the sleeping worker will wake at, and 0 while it is awake. A scheduler
//!   that stores an earlier tick wakes it; otherwise no one does, so an idle worker costs nothing.

use crate::clock::{Clock, Follower};
use crate::metrics::Metrics;
use crate::task::Job;
use crate::tick::{Ticks, NEVER};
use crate::wheel::{Key, Wheel, WheelFull};
use parking_lot::{Condvar, Mutex};
use std::collections::HashSet;
use std::sync::OnceLock;
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

pub(crate) type Jobs = Vec<(Key, u64, Box<dyn Job>)>;

pub(crate) struct Shared {
    pub(crate) state: Mutex<State>,
    /// The worker sleeps here.
    pub(crate) wake: Condvar,
    /// Callers waiting for the worker's progress (a manual clock catching up, a termination) sleep
    /// here.
    pub(crate) progress: Condvar,
    pub(crate) ticks: Ticks,
    pub(crate) clock: Clock,
    pub(crate) max_pending: usize,
    pub(crate) worker: OnceLock<ThreadId>,
}

pub(crate) struct State {
    pub(crate) wheel: Wheel<Box<dyn Job>>,
    pub(crate) stopped: bool,
    pub(crate) exited: bool,
    pub(crate) wake_at: u64,
    /// Set when a manual clock moved: the worker must read the time again before it sleeps.
    pub(crate) kick: bool,
    /// How many times the worker has run everything due and gone to sleep.
    pub(crate) passes: u64,
    /// The time up to which the worker has run everything due.
    pub(crate) caught_up_to: Instant,
    /// Keys of the tasks a stop took out of the wheel: they are neither cancelled nor expired.
    pub(crate) drained: HashSet<Key>,
    pub(crate) metrics: Metrics,
}

impl Shared {
    pub(crate) fn new(
        wheel: Wheel<Box<dyn Job>>,
        ticks: Ticks,
        clock: Clock,
        max_pending: usize,
    ) -> Self {
        let now = clock.now();
        Shared {
            state: Mutex::new(State {
                wheel,
                stopped: false,
                exited: false,
                wake_at: 0,
                kick: false,
                passes: 0,
                caught_up_to: now,
                drained: HashSet::new(),
                metrics: Metrics::default(),
            }),
            wake: Condvar::new(),
            progress: Condvar::new(),
            ticks,
            clock,
            max_pending,
            worker: OnceLock::new(),
        }
    }

    pub(crate) fn on_worker(&self) -> bool {
        self.worker.get() == Some(&thread::current().id())
    }

    /// Stores a job due at `tick`, and wakes the worker if it sleeps past it. Fails only when the
    /// wheel holds [`MAX_LEN`](crate::MAX_LEN) entries, which `max_pending` (capped at
    /// [`MAX_PENDING`](super::MAX_PENDING)) and the size of a batch in flight rule out.
    pub(crate) fn store(
        &self,
        state: &mut State,
        tick: u64,
        job: Box<dyn Job>,
    ) -> Result<Key, WheelFull<Box<dyn Job>>> {
        let key = state.wheel.insert(tick, job)?;
        if tick < state.wake_at {
            self.wake.notify_one();
        }
        Ok(key)
    }

    /// Marks the timer stopped and takes every pending task out. The caller drops or returns them
    /// after releasing the lock.
    pub(crate) fn stop_locked(&self, state: &mut State) -> Jobs {
        if state.stopped {
            return Vec::new();
        }
        state.stopped = true;
        let unrun = state.wheel.drain();
        state.drained.extend(unrun.iter().map(|&(key, _, _)| key));
        self.wake.notify_one();
        self.progress.notify_all();
        unrun
    }

    pub(crate) fn await_exit(&self, limit: Duration) -> bool {
        if self.on_worker() {
            return false;
        }
        let deadline = Instant::now().checked_add(limit);
        let mut state = self.state.lock();
        while !state.exited {
            match deadline {
                Some(deadline) => {
                    if self.progress.wait_until(&mut state, deadline).timed_out() {
                        return state.exited;
                    }
                }
                None => self.progress.wait(&mut state),
            }
        }
        true
    }
}

impl Follower for Shared {
    fn catch_up(&self, now: Instant, limit: Duration) -> bool {
        let mut state = self.state.lock();
        state.kick = true;
        self.wake.notify_one();
        if self.on_worker() {
            return true;
        }
        let deadline = Instant::now() + limit;
        let start = state.passes;
        while (state.passes == start || state.caught_up_to < now) && !state.exited {
            if self.progress.wait_until(&mut state, deadline).timed_out() {
                return false;
            }
        }
        true
    }
}

impl State {
    /// The tick the worker should next wake at, or [`NEVER`].
    pub(crate) fn next_wake(&self) -> u64 {
        self.wheel.next_due().unwrap_or(NEVER)
    }
}
