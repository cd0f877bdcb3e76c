//! A wait for a moment computed in advance, on the client's timer: the waiting thread sleeps
//! until the timer's task for that moment wakes it, or its cancel token does. Nothing looks
//! again in between, and the moment never moves.
//!
//! The timer runs a task within one tick after its deadline (its ticks round deadlines up), so
//! the task is set one tick before the moment, and the thread it wakes sleeps what is left of
//! the tick by itself, to the moment: a wait ends at its moment, not up to a tick after it. A
//! task the timer cannot take (stopped, or full) or drops unrun wakes the thread early in the
//! same way. Either way it never sleeps past the moment by more than [`SLACK`], whatever the
//! timer does.

use crate::cancel::Cancel;
use hashwheel::Timer;
use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest a wait may last past its moment, should the timer not wake it.
const SLACK: Duration = Duration::from_secs(1);

/// What a wait's sleeper is woken by.
#[derive(Default)]
struct Bell {
    rung: Mutex<bool>,
    woken: Condvar,
}

impl Bell {
    fn ring(&self) {
        *self.rung.lock() = true;
        self.woken.notify_all();
    }
}

/// Rings its bell when dropped: when the timer runs the task that holds it, or drops it unrun.
struct Ringer(Arc<Bell>);

impl Drop for Ringer {
    fn drop(&mut self) {
        self.0.ring();
    }
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Woken {
    /// At its moment (or past it).
    Due,
    /// By its cancel token, before its moment.
    Cancelled,
}

/// Sleeps until `at`, woken by a task scheduled for it on `timer`, or until `cancel` (if any)
/// is cancelled.
pub(crate) fn until(timer: &Timer, at: Instant, cancel: Option<&Cancel>) -> Woken {
    let bell = Arc::new(Bell::default());
    let _registration = cancel.map(|cancel| {
        let bell = Arc::clone(&bell);
        cancel.on_cancel(Arc::new(move || bell.ring()))
    });
    let ringer = Ringer(Arc::clone(&bell));
    // The timer fires within a tick after its deadline: set a tick early, it wakes the thread
    // within the tick before the moment, and the thread sleeps the rest alone.
    let delay = at
        .saturating_duration_since(Instant::now())
        .saturating_sub(timer.tick());
    // A task the timer refuses is handed back inside the error and dropped here: it rings.
    let timeout = timer.schedule(delay, move || drop(ringer)).ok();
    let cancelled = || cancel.is_some_and(Cancel::is_cancelled);
    let mut rung = bell.rung.lock();
    // Once rung before the moment, the timer will not ring again: sleep to the moment alone.
    let mut alone = false;
    let woken = loop {
        if cancelled() {
            break Woken::Cancelled;
        }
        let now = Instant::now();
        if now >= at && (*rung || alone || now >= at + SLACK) {
            break Woken::Due;
        }
        if *rung {
            *rung = false;
            alone = true;
        }
        let wake_by = if alone { at } else { at + SLACK };
        bell.woken.wait_until(&mut rung, wake_by);
    };
    drop(rung);
    if let Some(timeout) = timeout {
        timeout.cancel();
    }
    woken
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timer() -> Timer {
        Timer::builder()
            .thread_name("limiter-wait-test")
            .build()
            .expect("valid settings")
    }

    #[test]
    fn a_wait_ends_at_its_moment_not_before() {
        let timer = timer();
        let at = Instant::now() + Duration::from_millis(30);
        assert_eq!(until(&timer, at, None), Woken::Due);
        let now = Instant::now();
        assert!(now >= at, "woken {:?} early", at - now);
        assert!(now < at + SLACK, "woken by the timer, not the bound");
        // The task was taken off the wheel to run, not cancelled (the timer counts it as fired
        // once it has returned, which may be after this thread woke).
        let metrics = timer.metrics();
        assert!(
            metrics.scheduled == 1 && metrics.pending == 0 && metrics.cancelled == 0,
            "{metrics:?}"
        );
    }

    #[test]
    fn a_cancelled_wait_ends_at_once_and_takes_its_task_back() {
        let timer = timer();
        let cancel = Cancel::new();
        let stopper = cancel.clone();
        let started = Instant::now();
        let canceller = std::thread::spawn(move || stopper.cancel());
        let woken = until(&timer, started + Duration::from_secs(60), Some(&cancel));
        canceller.join().expect("the canceller ends");
        assert_eq!(woken, Woken::Cancelled);
        assert!(started.elapsed() < Duration::from_secs(30));
        assert_eq!(timer.pending(), 0, "the wait's task was cancelled");
    }

    #[test]
    fn a_stopped_timer_still_ends_the_wait_at_its_moment() {
        let timer = timer();
        timer.stop();
        let at = Instant::now() + Duration::from_millis(20);
        assert_eq!(until(&timer, at, None), Woken::Due);
        let now = Instant::now();
        assert!(
            now >= at && now < at + SLACK,
            "{:?}",
            now.duration_since(at)
        );
    }
}
