//! [`TimerBuilder`]: a timer's settings, checked, and the worker thread started with them.

use super::limit::PendingLimit;
use super::shard::Shard;
use super::shared::Shared;
use super::{pool, priority, worker, Owner, Timer, MAX_PENDING, MAX_SHARDS, MIN_TICK};
use crate::clock::{Clock, ManualClock};
use crate::error::BuildError;
use crate::tick::Ticks;
use crate::wheel::MAX_SLOTS;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// Settings for a [`Timer`], from [`Timer::builder`].
#[derive(Debug, Clone)]
pub struct TimerBuilder {
    tick: Duration,
    ticks_per_wheel: usize,
    max_pending: Option<usize>,
    shards: Option<usize>,
    thread_name: String,
    clock: Clock,
    worker_nice: Option<i32>,
}

impl Default for TimerBuilder {
    fn default() -> Self {
        TimerBuilder {
            tick: Duration::from_millis(1),
            ticks_per_wheel: 512,
            max_pending: None,
            shards: None,
            thread_name: "wheel-timer".to_owned(),
            clock: Clock::Monotonic,
            worker_nice: None,
        }
    }
}

impl TimerBuilder {
    /// The tick: deadlines round up to a multiple of it. At least [`MIN_TICK`]; default 1 ms.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn tick(mut self, tick: Duration) -> Self {
        self.tick = tick;
        self
    }

    /// Buckets in the innermost ring, rounded up to a power of two; from 1 to [`MAX_SLOTS`],
    /// default 512. Deadlines further than one rotation go to outer rings; this is a speed and
    /// memory trade, never a limit on delays.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn ticks_per_wheel(mut self, ticks: usize) -> Self {
        self.ticks_per_wheel = ticks;
        self
    }

    /// The most tasks that may wait at once, in all shards together; more are refused with
    /// [`ScheduleError::TooManyPending`](crate::ScheduleError::TooManyPending). The bound is never passed: it counts every task in the
    /// timer, a recurring task through its runs as well as between them. A task leaving the
    /// timer gives its place back just after it has left, so a schedule at that very moment
    /// may be refused with a place about to be free. Upper bound: [`MAX_PENDING`].
    ///
    /// Keeping it exact costs one compare-and-swap on a count that every scheduling thread shares
    /// (and a subtraction when a task leaves), so threads scheduling at once contend on it. By
    /// default there is no such count: each shard alone holds at most [`MAX_PENDING`] tasks.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn max_pending(mut self, max: usize) -> Self {
        self.max_pending = Some(max);
        self
    }

    /// How many wheels the timer keeps, each under its own lock, for threads that schedule at
    /// once; rounded up to a power of two, from 1 to [`MAX_SHARDS`]. Default: four per core the
    /// machine has (`std::thread::available_parallelism`), at most 64.
    ///
    /// A thread schedules on one shard (chosen by the order in which threads first scheduled), so
    /// up to this many threads schedule without sharing a lock. Each shard costs about 9 KiB
    /// when empty, and the worker looks at every shard each time it wakes.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = Some(shards);
        self
    }

    /// The worker thread's name; default `wheel-timer`.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn thread_name(mut self, name: impl Into<String>) -> Self {
        self.thread_name = name.into();
        self
    }

    /// The worker thread's nice value, from -20 (runs first) to 19 (last), on Linux; default: the
    /// value it inherits. A worker below its callers' value gets the CPU first when they keep
    /// every core busy, so a burst of expiries is not delayed by them. A negative value needs
    /// `CAP_SYS_NICE`; without it, or on other systems, the worker logs a warning and keeps the
    /// inherited value.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn worker_nice(mut self, nice: i32) -> Self {
        self.worker_nice = Some(nice);
        self
    }

    /// Reads time from a [`ManualClock`] instead of the monotonic clock.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn clock(mut self, clock: ManualClock) -> Self {
        self.clock = Clock::Manual(clock);
        self
    }

    /// Checks the settings and starts the worker thread.
    ///
    /// # Errors
    ///
    /// A [`BuildError`] naming the setting out of range, or [`BuildError::Spawn`] if the worker
    /// thread cannot be started.
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
            Some(max) => Some(max.min(MAX_PENDING)),
            None => None,
        };
        let shards = match self.shards {
            Some(given) if given == 0 || given > MAX_SHARDS => {
                return Err(BuildError::Shards { given })
            }
            Some(given) => given.next_power_of_two(),
            None => default_shards(),
        };
        let slots = self.ticks_per_wheel.next_power_of_two();
        let ticks = match self.clock {
            Clock::Monotonic => {
                // The epoch is set before the origin is read, so it is never after it.
                let epoch = crate::fast_now::warm_up();
                Ticks::new(self.clock.now(), self.tick).counted_from(epoch)
            }
            Clock::Manual(_) => Ticks::new(self.clock.now(), self.tick),
        };
        let limit = max_pending.map(|max| Arc::new(PendingLimit::new(max)));
        let mut taken: Vec<&'static Shard> = Vec::with_capacity(shards);
        for _ in 0..shards {
            match pool::take(slots, ticks, limit.clone()) {
                Ok(shard) => taken.push(shard),
                Err(_) => {
                    pool::give_back(&taken);
                    return Err(BuildError::TicksPerWheel {
                        given: self.ticks_per_wheel,
                    });
                }
            }
        }
        let shared = Arc::new(Shared::new(taken, limit, ticks, self.clock.clone()));
        if let Clock::Manual(manual) = &self.clock {
            let follower: Arc<dyn crate::clock::Follower> = shared.clone();
            manual.follow(Arc::downgrade(&follower));
        }
        let worker_shared = Arc::clone(&shared);
        let nice = self.worker_nice;
        crate::sync::Builder::new()
            .name(self.thread_name)
            .spawn(move || {
                if let Some(nice) = nice {
                    priority::set_worker_nice(nice);
                }
                worker::run(worker_shared)
            })
            .map_err(BuildError::Spawn)?;
        Ok(Timer {
            _owner: Arc::new(Owner {
                shared: Arc::clone(&shared),
            }),
            shared,
        })
    }
}

/// Four shards per core, as a power of two from 1 to 64.
fn default_shards() -> usize {
    let cores = thread::available_parallelism().map_or(1, |cores| cores.get());
    (cores * 4).next_power_of_two().min(64)
}
