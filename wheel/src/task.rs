//! What a timer stores in its wheel: a boxed job, run once or again and again.

use crate::clock::Clock;
use crate::sync::{AtomicBool, AtomicU64};
use crate::wheel::Key;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What running a job came to.
pub(crate) enum Ran {
    /// It ran and is done.
    Done,
    /// It ran and wants to run again at the given instant.
    Again(Box<dyn Job>, Instant),
    /// It had been cancelled after the worker took it out of the wheel, and did not run.
    Skipped,
}

/// A job the worker runs when its deadline passes.
pub(crate) trait Job: Send + 'static {
    /// Runs the task, unless a recurring task was cancelled in the meantime.
    fn run(self: Box<Self>, clock: &Clock) -> Ran;

    /// Whether the job may be put back after a run: it then keeps its place in the timer's
    /// pending bound while it runs.
    fn recurs(&self) -> bool {
        false
    }

    /// Whether the job was cancelled after the worker took it out of the wheel.
    fn is_cancelled(&self) -> bool {
        false
    }

    /// Tells the job the key it is stored under now. Called with the timer's lock held.
    fn stored_as(&self, _key: Key) {}
}

/// A task that runs once.
pub(crate) struct Once<F>(pub(crate) F);

impl<F: FnOnce() + Send + 'static> Job for Once<F> {
    fn run(self: Box<Self>, _clock: &Clock) -> Ran {
        (self.0)();
        Ran::Done
    }
}

/// How a recurring task picks its next deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cadence {
    /// Deadlines at `first + n * period`; periods missed while the worker was busy are skipped.
    FixedRate,
    /// Each deadline is `period` after the previous run ended.
    FixedDelay,
}

/// The state a recurring task shares with its [`Periodic`](crate::Periodic) handle. `key` and
/// `cancelled` change only under the timer's lock.
#[derive(Debug, Default)]
pub(crate) struct PeriodicState {
    pub(crate) cancelled: AtomicBool,
    pub(crate) finished: AtomicBool,
    pub(crate) key: AtomicU64,
    pub(crate) runs: AtomicU64,
}

pub(crate) struct PeriodicJob<F> {
    pub(crate) task: F,
    pub(crate) state: Arc<PeriodicState>,
    pub(crate) due: Instant,
    pub(crate) period: Duration,
    pub(crate) cadence: Cadence,
}

impl<F: FnMut() + Send + 'static> Job for PeriodicJob<F> {
    fn run(mut self: Box<Self>, clock: &Clock) -> Ran {
        if self.is_cancelled() {
            return Ran::Skipped;
        }
        (self.task)();
        self.state.runs.fetch_add(1, Ordering::Relaxed);
        let next = match self.cadence {
            Cadence::FixedRate => next_fixed_rate(self.due, self.period, clock.now()),
            Cadence::FixedDelay => clock.now().checked_add(self.period),
        };
        match next {
            Some(next) => {
                self.due = next;
                Ran::Again(self, next)
            }
            None => Ran::Done,
        }
    }

    fn recurs(&self) -> bool {
        true
    }

    fn is_cancelled(&self) -> bool {
        self.state.cancelled.load(Ordering::Acquire)
    }

    fn stored_as(&self, key: Key) {
        self.state.key.store(key.to_raw(), Ordering::Release);
    }
}

impl<F> Drop for PeriodicJob<F> {
    fn drop(&mut self) {
        self.state.finished.store(true, Ordering::Release);
    }
}

/// The first `due + k * period` (k >= 1) after `now`, the end of the run: a late run stands for
/// every deadline it passed. Computed from the deadline, so rounding never accumulates.
pub(crate) fn next_fixed_rate(due: Instant, period: Duration, now: Instant) -> Option<Instant> {
    let next = due.checked_add(period)?;
    if next > now {
        return Some(next);
    }
    let behind = now.duration_since(due).as_nanos();
    let period_nanos = period.as_nanos().max(1);
    let periods = behind / period_nanos + 1;
    let offset = periods.checked_mul(period_nanos)?;
    let secs = u64::try_from(offset / 1_000_000_000).ok()?;
    due.checked_add(Duration::new(secs, (offset % 1_000_000_000) as u32))
}

/// A task that a stopped timer did not run, handed back by [`Timer::stop`](crate::Timer::stop).
pub struct UnrunTask {
    job: Box<dyn Job>,
    deadline: Option<Instant>,
}

impl UnrunTask {
    pub(crate) fn new(job: Box<dyn Job>, deadline: Option<Instant>) -> Self {
        UnrunTask { job, deadline }
    }

    /// When the task was due (the tick boundary it was waiting for). `None` if it was scheduled so
    /// far ahead that it would never have run.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// Runs the task once, on the calling thread. A recurring task runs once and is then dropped.
    pub fn run(self) {
        drop(self.job.run(&Clock::Monotonic));
    }
}

impl std::fmt::Debug for UnrunTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnrunTask")
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_rate_skips_missed_periods_without_drift() {
        let start = Instant::now();
        let period = Duration::from_millis(10);
        let at = |ms| start + Duration::from_millis(ms);
        assert_eq!(next_fixed_rate(start, period, at(3)), Some(at(10)));
        assert_eq!(next_fixed_rate(start, period, at(10)), Some(at(20)));
        assert_eq!(next_fixed_rate(start, period, at(11)), Some(at(20)));
        assert_eq!(next_fixed_rate(start, period, at(35)), Some(at(40)));
        assert_eq!(next_fixed_rate(start, Duration::MAX, at(0)), None);
    }
}
