//! [`Timer`]: a [`Wheel`](crate::Wheel) on its own worker thread, and its builder.

mod handle;
mod shared;
mod worker;

pub use handle::{Periodic, Timeout};

use crate::clock::{Clock, ManualClock};
use crate::error::{BuildError, ScheduleError};
use crate::metrics::Metrics;
use crate::task::{Cadence, Job, Once, PeriodicJob, PeriodicState, UnrunTask};
use crate::tick::Ticks;
use crate::wheel::{Key, Wheel, MAX_LEN, MAX_SLOTS};
use shared::{Jobs, Shared};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// The shortest tick a timer accepts.
pub const MIN_TICK: Duration = Duration::from_millis(1);

/// The largest `max_pending` (and the default): the wheel's capacity less room for the recurring
/// tasks of one batch in flight, so that putting those back can never find the wheel full.
pub const MAX_PENDING: usize = MAX_LEN - worker::BATCH;

/// Why a new task cannot be stored now, as the error that hands it back; counts a rejection.
fn refusal<F>(shared: &Shared, state: &mut shared::State) -> Option<fn(F) -> ScheduleError<F>> {
    if state.stopped {
        return Some(ScheduleError::Stopped);
    }
    if state.wheel.len() >= shared.max_pending {
        state.metrics.rejected += 1;
        return Some(ScheduleError::TooManyPending);
    }
    None
}

/// Stores a new task under the lock that checked `len < max_pending <= MAX_PENDING`, so the
/// wheel has room: only a broken invariant could make this fail.
fn store_checked(shared: &Shared, state: &mut shared::State, tick: u64, job: Box<dyn Job>) -> Key {
    match shared.store(state, tick, job) {
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
/// ```
/// use std::sync::mpsc;
/// use std::time::Duration;
/// use wheel::Timer;
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

struct Owner {
    shared: Arc<Shared>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        let unrun = {
            let mut state = self.shared.state.lock();
            self.shared.stop_locked(&mut state)
        };
        if !unrun.is_empty() {
            log::debug!(
                "last timer handle dropped: {} tasks dropped unrun",
                unrun.len()
            );
        }
    }
}

impl Timer {
    /// A timer with the default settings: 1 ms tick, 512 ticks per wheel, no pending limit.
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
    pub fn schedule<F>(&self, delay: Duration, task: F) -> Result<Timeout, ScheduleError<F>>
    where
        F: FnOnce() + Send + 'static,
    {
        let shared = self.shared();
        let tick = shared.ticks.delay_tick(shared.clock.now(), delay);
        self.schedule_tick(tick, task)
    }

    /// Runs `task` once, on the worker thread, at `deadline` (at once if it has passed).
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
        let mut state = shared.state.lock();
        if let Some(refuse) = refusal(shared, &mut state) {
            return Err(refuse(task));
        }
        state.metrics.scheduled += 1;
        let key = store_checked(shared, &mut state, tick, Box::new(Once(task)));
        drop(state);
        Ok(Timeout::new(Arc::clone(shared), key))
    }

    /// Runs `task` at `first` from now, then every `period` after that first deadline:
    /// deadlines are `start + first + n * period`, computed afresh each time, so they never drift.
    /// Periods missed because the worker was busy are skipped, not run in a burst.
    ///
    /// A run that panics ends the task.
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
        let now = shared.clock.now();
        let tick = shared.ticks.delay_tick(now, first);
        let mut state = shared.state.lock();
        if let Some(refuse) = refusal(shared, &mut state) {
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
        state.metrics.scheduled += 1;
        let key = store_checked(shared, &mut state, tick, Box::new(job));
        periodic
            .key
            .store(key.to_raw(), std::sync::atomic::Ordering::Release);
        drop(state);
        Ok(Periodic::new(Arc::clone(shared), periodic))
    }

    /// Stops the timer and hands back every task that had not started, in deadline order. Tasks
    /// the worker had already taken run to completion; `stop` does not wait for them (see
    /// [`Timer::await_termination`]). Later `schedule*` calls fail with
    /// [`ScheduleError::Stopped`]. Safe to call from inside a task.
    pub fn stop(&self) -> Vec<UnrunTask> {
        let shared = self.shared();
        let unrun: Jobs = {
            let mut state = shared.state.lock();
            shared.stop_locked(&mut state)
        };
        unrun
            .into_iter()
            .map(|(_, tick, job)| UnrunTask::new(job, shared.ticks.instant_of(tick)))
            .collect()
    }

    /// Whether the timer has been stopped.
    pub fn is_stopped(&self) -> bool {
        self.shared().state.lock().stopped
    }

    /// Waits up to `limit` for the worker thread to exit after a stop. Returns whether it has.
    /// From inside a task (on the worker itself) it returns `false` at once.
    pub fn await_termination(&self, limit: Duration) -> bool {
        self.shared().await_exit(limit)
    }

    /// Tasks waiting for their deadline.
    pub fn pending(&self) -> usize {
        self.shared().state.lock().wheel.len()
    }

    /// A snapshot of the timer's counters.
    pub fn metrics(&self) -> Metrics {
        let state = self.shared().state.lock();
        Metrics {
            pending: state.wheel.len(),
            ..state.metrics
        }
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
    /// [`ManualClock`]. Deadlines given to [`Timer::schedule_at`] are read against it.
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

/// Settings for a [`Timer`], from [`Timer::builder`].
#[derive(Debug, Clone)]
pub struct TimerBuilder {
    tick: Duration,
    ticks_per_wheel: usize,
    max_pending: Option<usize>,
    thread_name: String,
    clock: Clock,
}

impl Default for TimerBuilder {
    fn default() -> Self {
        TimerBuilder {
            tick: Duration::from_millis(1),
            ticks_per_wheel: 512,
            max_pending: None,
            thread_name: "wheel-timer".to_owned(),
            clock: Clock::Monotonic,
        }
    }
}

impl TimerBuilder {
    /// The tick: deadlines round up to a multiple of it. At least [`MIN_TICK`]; default 1 ms.
    pub fn tick(mut self, tick: Duration) -> Self {
        self.tick = tick;
        self
    }

    /// Buckets in the innermost ring, rounded up to a power of two; from 1 to [`MAX_SLOTS`],
    /// default 512. Deadlines further than one rotation go to outer rings; this is a speed and
    /// memory trade, never a limit on delays.
    pub fn ticks_per_wheel(mut self, ticks: usize) -> Self {
        self.ticks_per_wheel = ticks;
        self
    }

    /// The most tasks that may wait at once; more are refused with
    /// [`ScheduleError::TooManyPending`]. Default and upper bound: [`MAX_PENDING`].
    pub fn max_pending(mut self, max: usize) -> Self {
        self.max_pending = Some(max);
        self
    }

    /// The worker thread's name; default `wheel-timer`.
    pub fn thread_name(mut self, name: impl Into<String>) -> Self {
        self.thread_name = name.into();
        self
    }

    /// Reads time from a [`ManualClock`] instead of the monotonic clock.
    pub fn clock(mut self, clock: ManualClock) -> Self {
        self.clock = Clock::Manual(clock);
        self
    }

    /// Checks the settings and starts the worker thread.
    pub fn build(self) -> Result<Timer, BuildError> {
        if self.tick < MIN_TICK {
            return Err(BuildError::TickTooShort { given: self.tick });
        }
        if self.ticks_per_wheel == 0 || self.ticks_per_wheel > MAX_SLOTS {
            return Err(BuildError::TicksPerWheel {
                given: self.ticks_per_wheel,
            });
        }
        let max_pending = match self.max_pending {
            Some(0) => return Err(BuildError::ZeroMaxPending),
            Some(max) => max.min(MAX_PENDING),
            None => MAX_PENDING,
        };
        let slots = self.ticks_per_wheel.next_power_of_two();
        let wheel: Wheel<Box<dyn Job>> =
            Wheel::new(slots).map_err(|_| BuildError::TicksPerWheel {
                given: self.ticks_per_wheel,
            })?;
        let ticks = Ticks::new(self.clock.now(), self.tick);
        let shared = Arc::new(Shared::new(wheel, ticks, self.clock.clone(), max_pending));
        if let Clock::Manual(manual) = &self.clock {
            let follower: Arc<dyn crate::clock::Follower> = shared.clone();
            manual.follow(Arc::downgrade(&follower));
        }
        let worker_shared = Arc::clone(&shared);
        thread::Builder::new()
            .name(self.thread_name)
            .spawn(move || worker::run(worker_shared))?;
        Ok(Timer {
            _owner: Arc::new(Owner {
                shared: Arc::clone(&shared),
            }),
            shared,
        })
    }
}
