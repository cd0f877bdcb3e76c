//! The timer under every interleaving `shuttle` tries (`RUSTFLAGS="--cfg shuttle" cargo test -p
//! hashwheel --lib interleavings`, as `scripts/test` runs it): the worker, a clock that moves,
//! and the threads that schedule, cancel and stop, each switching at every lock and atomic.

use crate::checks::{await_exit, explore, timer, TICK};
use crate::ManualClock;
use shuttle::sync::mpsc;
use shuttle::thread;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Counts its own drop: a task holding one is dropped when the task is.
struct Dropped(Arc<AtomicUsize>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// What a task counts: its runs, and its drops through the [`Dropped`] it holds.
#[derive(Clone, Default)]
struct Tally {
    runs: Arc<AtomicUsize>,
    drops: Arc<AtomicUsize>,
}

impl Tally {
    /// What the task holds, to be counted dropped when it is.
    fn dropped(&self) -> Dropped {
        Dropped(Arc::clone(&self.drops))
    }

    /// Called by the task as it runs.
    fn ran(&self) {
        self.runs.fetch_add(1, Ordering::SeqCst);
    }

    fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }

    fn assert_dropped_once(&self) {
        assert_eq!(
            self.drops.load(Ordering::SeqCst),
            1,
            "the task was not dropped once"
        );
    }
}

/// A one-shot task falls due while its handle cancels it and the timer stops: exactly one of
/// the three takes it (it runs, or `cancel` returns `true`, or `stop` hands it back), and it is
/// dropped exactly once.
fn cancel_expiry_and_stop_take_the_task_once() {
    let clock = ManualClock::new();
    let timer = timer(&clock);
    let tally = Tally::default();
    let (counted, dropped) = (tally.clone(), tally.dropped());
    let timeout = timer
        .schedule(TICK, move || {
            let _dropped = dropped;
            counted.ran();
        })
        .expect("running");
    let timeout = Arc::new(timeout);
    let canceller = thread::spawn({
        let timeout = Arc::clone(&timeout);
        move || timeout.cancel()
    });
    let mover = thread::spawn({
        let clock = clock.clone();
        move || clock.advance(TICK)
    });
    let stopper = thread::spawn({
        let timer = timer.clone();
        move || timer.stop().len()
    });
    let cancelled = canceller.join().expect("no panic");
    mover.join().expect("no panic");
    let unrun = stopper.join().expect("no panic");
    await_exit(&timer);
    let runs = tally.runs();
    assert_eq!(
        runs + usize::from(cancelled) + unrun,
        1,
        "ran {runs}, cancelled {cancelled}, handed back {unrun}"
    );
    assert_eq!(timeout.is_cancelled(), cancelled);
    tally.assert_dropped_once();
}

/// A cancel leaves its task's place in the wheel for the next schedule to reuse. Here the next
/// schedule may reuse it while the worker expires the tick both tasks are due at and the
/// cancelled handle cancels again: the first task is taken once (it runs, or one cancel returns
/// `true`, or the stop hands it back), the second runs or is handed back, whatever slot it got,
/// and the stale handle never takes it. The tasks the stop hands back are run here, so that each
/// task counts one run or one cancel.
fn a_reused_place_is_out_of_the_stale_handles_reach() {
    let clock = ManualClock::new();
    let timer = timer(&clock);
    let (first, second) = (Tally::default(), Tally::default());
    let task = |tally: &Tally| {
        let (counted, dropped) = (tally.clone(), tally.dropped());
        move || {
            let _dropped = dropped;
            counted.ran();
        }
    };
    let stale = Arc::new(timer.schedule(TICK, task(&first)).expect("running"));
    let cancellers: Vec<_> = (0..2)
        .map(|_| {
            let stale = Arc::clone(&stale);
            thread::spawn(move || stale.cancel())
        })
        .collect();
    let scheduler = thread::spawn({
        let (timer, task) = (timer.clone(), task(&second));
        move || timer.schedule(TICK, task).expect("running")
    });
    let mover = thread::spawn({
        let clock = clock.clone();
        move || clock.advance(TICK)
    });
    let cancelled = cancellers
        .into_iter()
        .map(|canceller| canceller.join().expect("no panic"))
        .filter(|&took| took)
        .count();
    let fresh = scheduler.join().expect("no panic");
    mover.join().expect("no panic");
    clock.advance(TICK);
    let unrun = timer.stop();
    await_exit(&timer);
    assert!(!stale.cancel(), "a cancelled or run task is out of reach");
    assert!(!fresh.is_cancelled());
    for task in unrun {
        task.run();
    }
    assert_eq!(
        first.runs() + cancelled,
        1,
        "ran {}, cancelled {cancelled}",
        first.runs()
    );
    assert_eq!(second.runs(), 1, "the second task ran once");
    first.assert_dropped_once();
    second.assert_dropped_once();
}

/// A recurring task runs while its handle cancels it and the clock moves on: no run starts
/// after `cancel` returned (one in progress may end), and the task is dropped exactly once,
/// by the cancel or by the worker that finds it cancelled when putting it back.
fn a_cancelled_recurring_task_never_starts_again() {
    let clock = ManualClock::new();
    let timer = timer(&clock);
    let tally = Tally::default();
    let (counted, dropped) = (tally.clone(), tally.dropped());
    let periodic = timer
        .schedule_fixed_rate(TICK, TICK, move || {
            let _kept = &dropped;
            counted.ran();
        })
        .expect("running");
    let mover = thread::spawn({
        let clock = clock.clone();
        move || {
            for _ in 0..3 {
                clock.advance(TICK);
            }
        }
    });
    let cancelled = periodic.cancel();
    let runs_then = tally.runs();
    mover.join().expect("no panic");
    clock.advance(TICK);
    clock.advance(TICK);
    assert!(cancelled, "the first cancel stops it");
    assert!(!periodic.cancel(), "a second cancel finds it stopped");
    timer.stop();
    await_exit(&timer);
    let runs_now = tally.runs();
    assert!(
        runs_now <= runs_then + 1,
        "{runs_now} runs, {runs_then} when cancel returned"
    );
    tally.assert_dropped_once();
}

/// A task due at once is scheduled while the worker may be choosing how long to sleep: the
/// worker is woken and runs it (a lost wake-up would leave the receiver waiting for ever, which
/// the checker reports as a deadlock).
fn a_task_due_at_once_wakes_the_worker() {
    let clock = ManualClock::new();
    let timer = timer(&clock);
    let (done, fired) = mpsc::channel();
    let scheduler = thread::spawn({
        let timer = timer.clone();
        move || {
            timer
                .schedule(Duration::ZERO, move || {
                    done.send(()).expect("receiver waits")
                })
                .expect("running");
        }
    });
    fired.recv().expect("the task ran");
    scheduler.join().expect("no panic");
    timer.stop();
    await_exit(&timer);
}

#[test]
fn cancel_expiry_and_stop_take_the_task_once_under_any_interleaving() {
    explore(cancel_expiry_and_stop_take_the_task_once, 3_000);
}

#[test]
fn a_reused_place_is_out_of_the_stale_handles_reach_under_any_interleaving() {
    explore(a_reused_place_is_out_of_the_stale_handles_reach, 2_000);
}

#[test]
fn a_cancelled_recurring_task_never_starts_again_under_any_interleaving() {
    explore(a_cancelled_recurring_task_never_starts_again, 2_000);
}

#[test]
fn a_task_due_at_once_wakes_the_worker_under_any_interleaving() {
    explore(a_task_due_at_once_wakes_the_worker, 3_000);
}
