//! Where a timer reads the time: the monotonic clock, or a [`ManualClock`] that only moves when told.
//!
//! With a manual clock the worker never wakes by itself. [`ManualClock::advance`] moves the time,
//! wakes every timer built on the clock and waits until each has run what fell due, so a test sees
//! the effects of the tasks as soon as `advance` returns, without sleeping.

use parking_lot::Mutex;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// How long [`ManualClock::advance`] waits for one timer to catch up before giving up with a warning.
const CATCH_UP_LIMIT: Duration = Duration::from_secs(30);

/// The time source of a timer.
#[derive(Clone, Debug, Default)]
pub(crate) enum Clock {
    /// `Instant::now()`; the worker sleeps on real time.
    #[default]
    Monotonic,
    /// Virtual time; the worker sleeps until the clock is advanced.
    Manual(ManualClock),
}

impl Clock {
    pub(crate) fn now(&self) -> Instant {
        match self {
            Clock::Monotonic => Instant::now(),
            Clock::Manual(manual) => manual.now(),
        }
    }

    /// The time to compute a deadline from: never before [`Clock::now`]. On the monotonic clock,
    /// a cheaper reading that may be up to 60 µs later (see `fast_now.rs`); a manual clock's own
    /// time.
    pub(crate) fn deadline_now(&self) -> Instant {
        match self {
            Clock::Monotonic => {
                let since = Duration::from_nanos(crate::fast_now::now_upper_bound());
                let epoch = crate::fast_now::epoch();
                epoch.checked_add(since).unwrap_or_else(Instant::now)
            }
            Clock::Manual(manual) => manual.now(),
        }
    }
}

/// Something that must react when a manual clock moves: a timer's worker.
pub(crate) trait Follower: Send + Sync {
    /// Wakes the worker and waits (at most `limit`) until it has run everything due at `now`.
    /// Returns `false` if it did not catch up in time.
    fn catch_up(&self, now: Instant, limit: Duration) -> bool;
}

/// A clock that stands still until [`ManualClock::advance`] moves it. Cheap to clone: clones share
/// the same time.
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
/// use hashwheel::{ManualClock, Timer};
///
/// let clock = ManualClock::new();
/// let timer = Timer::builder().clock(clock.clone()).build().expect("valid settings");
/// let fired = Arc::new(AtomicBool::new(false));
/// let flag = fired.clone();
/// timer
///     .schedule(Duration::from_secs(60), move || flag.store(true, Ordering::SeqCst))
///     .expect("timer running");
///
/// clock.advance(Duration::from_secs(59));
/// assert!(!fired.load(Ordering::SeqCst));
/// clock.advance(Duration::from_secs(1));
/// assert!(fired.load(Ordering::SeqCst), "advance returns once due tasks have run");
/// ```
#[derive(Clone)]
pub struct ManualClock {
    inner: Arc<ManualInner>,
}

struct ManualInner {
    now: Mutex<Instant>,
    followers: Mutex<Vec<Weak<dyn Follower>>>,
}

impl ManualClock {
    /// A clock reading the current instant, which then stands still.
    pub fn new() -> Self {
        ManualClock {
            inner: Arc::new(ManualInner {
                now: Mutex::new(Instant::now()),
                followers: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The clock's time.
    pub fn now(&self) -> Instant {
        *self.inner.now.lock()
    }

    /// Moves the clock forward by `by`, then waits until every timer on this clock has run the
    /// tasks that fell due (tasks that are still running when their timer's own thread calls
    /// `advance` are not waited for). Saturates rather than overflow `Instant`.
    pub fn advance(&self, by: Duration) {
        let now = {
            let mut now = self.inner.now.lock();
            *now = saturating_add(*now, by);
            *now
        };
        let followers: Vec<Arc<dyn Follower>> = {
            let mut followers = self.inner.followers.lock();
            followers.retain(|follower| follower.strong_count() > 0);
            followers.iter().filter_map(Weak::upgrade).collect()
        };
        for follower in followers {
            if !follower.catch_up(now, CATCH_UP_LIMIT) {
                log::warn!(
                    "a timer did not catch up with its manual clock within {CATCH_UP_LIMIT:?}"
                );
            }
        }
    }

    pub(crate) fn follow(&self, follower: Weak<dyn Follower>) {
        self.inner.followers.lock().push(follower);
    }
}

/// `from + by`, or the latest instant there is if that is past the range of `Instant`.
fn saturating_add(from: Instant, by: Duration) -> Instant {
    let (mut at, mut left, mut step) = (from, by, by);
    while !step.is_zero() {
        match at.checked_add(step) {
            Some(later) => {
                at = later;
                left -= step;
                step = left;
            }
            None => step /= 2,
        }
    }
    at
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManualClock")
            .field("now", &self.now())
            .finish()
    }
}
