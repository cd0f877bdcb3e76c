//! [`Timer`]: shards of [`Wheel`]s advanced by one worker thread, and its builder.

mod builder;
mod handle;
#[cfg(all(shuttle, test))]
mod interleavings;
mod limit;
mod pool;
mod priority;
mod shard;
mod shared;
mod sleep;
mod worker;

pub use builder::TimerBuilder;
pub use handle::{Periodic, Timeout};

use crate::clock::Clock;
use crate::error::{BuildError, ScheduleError};
use crate::metrics::Metrics;
use crate::task::{Cadence, Job, Once, PeriodicJob, PeriodicState, UnrunTask};
use crate::wheel::{Key, MAX_LEN};
use shard::ShardState;
use shared::{Jobs, Shared};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The shortest tick a timer accepts.
pub const MIN_TICK: Duration = Duration::from_millis(1);

/// The largest `max_pending`, and the most tasks one shard holds: a wheel's capacity less room
/// for the recurring tasks of one batch in flight, so that putting those back can never find the
/// wheel full.
pub const MAX_PENDING: usize = MAX_LEN - worker::BATCH;

/// The most shards a timer may have.
pub const MAX_SHARDS: usize = 256;

/// Why a new task cannot be stored in this shard now, as the error that hands it back; counts a
/// rejection. Takes the task's place in the pending limit when it is stored.
fn refusal<F>(state: &mut ShardState) -> Option<fn(F) -> ScheduleError<F>> {
    if state.stopped {
        return Some(ScheduleError::Stopped);
    }
    let full = state.wheel.len() >= MAX_PENDING
        || state.limit.as_ref().is_some_and(|limit| !limit.try_take());
    if full {
        state.rejected += 1;
        return Some(ScheduleError::TooManyPending);
    }
    None
}

/// Stores a new task under the lock that checked `len < MAX_PENDING`, so the wheel has room:
/// only a broken invariant could make this fail.
fn store_checked(state: &mut ShardState, tick: u64, job: Box<dyn Job>) -> Key {
    match state.wheel.insert(tick, job) {
        Ok(key) => key,
        Err(_) => unreachable!("room was checked under the same lock"),
    }
}

/// A hashed wheel timer running tasks on its own thread.
///
/// `Timer` is a cheap handle: clone it freely, one worker thread serves every clone. The worker
/// ends when [`Timer::stop`] is called or the last clone is dropped (pending tasks are then dropped
/// unrun).
///
/// Threads scheduling at once do not wait for each other: the timer keeps several wheels
/// ([`TimerBuilder::shards`]), each under its own lock, and each thread schedules on its own
/// (threads that started one after another get different ones). One worker advances them all, a
/// tick at a time, earliest first.
///
/// ```
/// use std::sync::mpsc;
/// use std::time::Duration;
/// use hashwheel::Timer;
///
/// let timer = Timer::new().expect("default settings are valid");
/// let (done, fired) = mpsc::channel();
/// timer
///     .schedule(Duration::from_millis(5), move || done.send("fired").expect("receiver alive"))
///     .expect("timer running");
/// let forgotten = timer
///     .schedule(Duration::from_secs(3600), || unreachable!("cancelled"))
///     .expect("timer running");
/// assert!(forgotten.cancel());
/// assert_eq!(fired.recv_timeout(Duration::from_secs(5)), Ok("fired"));
/// ```
#[derive(Clone)]
pub struct Timer {
    shared: Arc<Shared>,
    /// Shared by every clone of this handle (not by `Timeout`s); the last one to go stops the
    /// worker.
    _owner: Arc<Owner>,
}

pub(super) struct Owner {
    shared: Arc<Shared>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        let unrun = self.shared.stop();
        if !unrun.is_empty() {
            log::debug!(
                "last timer handle dropped: {} tasks dropped unrun",
                unrun.len()
            );
        }
    }
}

impl Timer {
    /// A timer with the default settings: 1 ms tick, 512 ticks per wheel, no pending limit, four
    /// shards per core.
    ///
    /// # Errors
    ///
    /// [`BuildError::Spawn`] if the worker thread cannot be started.
    pub fn new() -> Result<Timer, BuildError> {
        Timer::builder().build()
    }

    /// Settings for a new timer.
    pub fn builder() -> TimerBuilder {
        TimerBuilder::default()
    }

    fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Runs `task` once, on the worker thread, `delay` from now: never before, and usually within
    /// one tick after. A delay too large to represent never fires.
    ///
    /// # Errors
    ///
    /// [`ScheduleError::Stopped`] once the timer is stopped, [`ScheduleError::TooManyPending`] at
    /// `max_pending`; each hands `task` back.
    pub fn schedule<F>(&self, delay: Duration, task: F) -> Result<Timeout, ScheduleError<F>>
    where
        F: FnOnce() + Send + 'static,
    {
        let shared = self.shared();
        let tick = match &shared.clock {
            Clock::Monotonic => shared
                .ticks
                .delay_tick_since_epoch(crate::fast_now::now_upper_bound(), delay),
            Clock::Manual(manual) => shared.ticks.delay_tick(manual.now(), delay),
        };
        self.schedule_tick(tick, task)
    }

    /// Runs `task` once, on the worker thread, at `deadline` (at once if it has passed).
    ///
    /// # Errors
    ///
    /// As [`Timer::schedule`].
    pub fn schedule_at<F>(&self, deadline: Instant, task: F) -> Result<Timeout, ScheduleError<F>>
    where
        F: FnOnce() + Send + 'static,
    {
        let tick = self.shared().ticks.deadline_tick(deadline);
        self.schedule_tick(tick, task)
    }

    fn schedule_tick<F>(&self, tick: u64, task: F) -> Result<Timeout, ScheduleError<F>>
    where
        F: FnOnce() + Send + 'static,
    {
        let shared = self.shared();
        let shard = shared.home_shard();
        let mut state = shard.state.lock();
        if let Some(refuse) = refusal(&mut state) {
            return Err(refuse(task));
        }
        state.scheduled += 1;
        let key = store_checked(&mut state, tick, Box::new(Once(task)));
        shard.stored_due_at(tick);
        drop(state);
        shared.sleep.wake_before(tick);
        Ok(Timeout::new(shard, key))
    }

    /// Runs `task` at `first` from now, then every `period` after that first deadline:
    /// deadlines are `start + first + n * period`, computed afresh each time, so they never drift.
    /// Periods missed because the worker was busy are skipped, not run in a burst.
    ///
    /// A run that panics ends the task.
    ///
    /// # Errors
    ///
    /// As [`Timer::schedule`], and [`ScheduleError::ZeroPeriod`] for a zero period.
    pub fn schedule_fixed_rate<F>(
        &self,
        first: Duration,
        period: Duration,
        task: F,
    ) -> Result<Periodic, ScheduleError<F>>
    where
        F: FnMut() + Send + 'static,
    {
        self.schedule_periodic(first, period, Cadence::FixedRate, task)
    }

    /// Runs `task` at `first` from now, then again `delay` after each run ends.
    ///
    /// A run that panics ends the task.
    ///
    /// # Errors
    ///
    /// As [`Timer::schedule`], and [`ScheduleError::ZeroPeriod`] for a zero delay.
    pub fn schedule_fixed_delay<F>(
        &self,
        first: Duration,
        delay: Duration,
        task: F,
    ) -> Result<Periodic, ScheduleError<F>>
    where
        F: FnMut() + Send + 'static,
    {
        self.schedule_periodic(first, delay, Cadence::FixedDelay, task)
    }

    fn schedule_periodic<F>(
        &self,
        first: Duration,
        period: Duration,
        cadence: Cadence,
        task: F,
    ) -> Result<Periodic, ScheduleError<F>>
    where
        F: FnMut() + Send + 'static,
    {
        if period.is_zero() {
            return Err(ScheduleError::ZeroPeriod(task));
        }
        let shared = self.shared();
        let now = shared.clock.deadline_now();
        let tick = shared.ticks.delay_tick(now, first);
        let shard = shared.home_shard();
        let mut state = shard.state.lock();
        if let Some(refuse) = refusal(&mut state) {
            return Err(refuse(task));
        }
        // A first delay past the range of `Instant` has the tick NEVER, so `due` is never used.
        let due = now.checked_add(first).unwrap_or(now);
        let periodic = Arc::new(PeriodicState::default());
        let job = PeriodicJob {
            task,
            state: Arc::clone(&periodic),
            due,
            period,
            cadence,
        };
        state.scheduled += 1;
        let key = store_checked(&mut state, tick, Box::new(job));
        shard.stored_due_at(tick);
        periodic
            .key
            .store(key.to_raw(), std::sync::atomic::Ordering::Release);
        drop(state);
        shared.sleep.wake_before(tick);
        Ok(Periodic::new(shard, periodic))
    }

    /// Stops the timer and hands back every task that had not started, in deadline order. Tasks
    /// the worker had already taken run to completion; `stop` does not wait for them (see
    /// [`Timer::await_termination`]). Later `schedule*` calls fail with
    /// [`ScheduleError::Stopped`]. Safe to call from inside a task.
    pub fn stop(&self) -> Vec<UnrunTask> {
        let shared = self.shared();
        let unrun: Jobs = shared.stop();
        unrun
            .into_iter()
            .map(|(_, tick, job)| UnrunTask::new(job, shared.ticks.instant_of(tick)))
            .collect()
    }

    /// Whether the timer has been stopped.
    pub fn is_stopped(&self) -> bool {
        self.shared().is_stopped()
    }

    /// Waits up to `limit` for the worker thread to exit after a stop. Returns whether it has.
    /// From inside a task (on the worker itself) it returns `false` at once.
    pub fn await_termination(&self, limit: Duration) -> bool {
        self.shared().await_exit(limit)
    }

    /// Tasks waiting for their deadline. Exact while no other thread schedules or cancels;
    /// otherwise a count taken one shard at a time.
    pub fn pending(&self) -> usize {
        self.shared().pending()
    }

    /// A snapshot of the timer's counters, taken one shard at a time.
    pub fn metrics(&self) -> Metrics {
        self.shared().metrics()
    }

    /// How many wheels the timer keeps, each under its own lock.
    pub fn shards(&self) -> usize {
        self.shared().shards.len()
    }

    /// The tick duration.
    pub fn tick(&self) -> Duration {
        self.shared().ticks.tick()
    }

    /// The last tick boundary at or before `instant` (or `instant` itself if it precedes the
    /// timer's first tick). A task scheduled for that boundary is due exactly then, so a caller
    /// that may act a little early, but not late, floors its deadline with this.
    pub fn tick_floor(&self, instant: Instant) -> Instant {
        let ticks = &self.shared().ticks;
        ticks
            .instant_of(ticks.elapsed_tick(instant))
            .filter(|boundary| *boundary <= instant)
            .unwrap_or(instant)
    }

    /// The time on this timer's clock: `Instant::now()`, or the reading of its
    /// [`ManualClock`](crate::ManualClock). Deadlines given to [`Timer::schedule_at`] are read against it.
    pub fn now(&self) -> Instant {
        self.shared().clock.now()
    }
}

impl std::fmt::Debug for Timer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timer")
            .field("tick", &self.tick())
            .field("pending", &self.pending())
            .finish_non_exhaustive()
    }
}
