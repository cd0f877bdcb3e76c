//! The timer under every interleaving `shuttle` tries (`RUSTFLAGS="--cfg shuttle" cargo test -p
//! hashwheel --lib interleavings`, as `scripts/test` runs it): the worker, a clock that moves,
//! and the threads that cancel and stop, each switching at every lock and atomic.

use crate::{ManualClock, Timer};
use shuttle::sync::mpsc;
use shuttle::thread;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const TICK: Duration = Duration::from_millis(1);

fn timer(clock: &ManualClock) -> Timer {
    Timer::builder()
        .clock(clock.clone())
        .tick(TICK)
        .shards(1)
        .build()
        .expect("valid settings")
}

/// Counts its own drop: a task holding one is dropped when the task is.
struct Dropped(Arc<AtomicUsize>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Waits, letting the other threads run, until the worker has exited after a stop.
fn await_exit(timer: &Timer) {
    while !timer.await_termination(Duration::from_secs(1)) {
        thread::yield_now();
    }
}

/// A one-shot task falls due while its handle cancels it and the timer stops: exactly one of
/// the three takes it (it runs, or `cancel` returns `true`, or `stop` hands it back), and it is
/// dropped exactly once.
fn cancel_expiry_and_stop_take_the_task_once() {
    let clock = ManualClock::new();
    let timer = timer(&clock);
    let (runs, drops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let dropped = Dropped(Arc::clone(&drops));
    let ran = Arc::clone(&runs);
    let timeout = timer
        .schedule(TICK, move || {
            let _dropped = dropped;
            ran.fetch_add(1, Ordering::SeqCst);
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
    let runs = runs.load(Ordering::SeqCst);
    assert_eq!(
        runs + usize::from(cancelled) + unrun,
        1,
        "ran {runs}, cancelled {cancelled}, handed back {unrun}"
    );
    assert_eq!(timeout.is_cancelled(), cancelled);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        1,
        "the task was not dropped once"
    );
}

/// A recurring task runs while its handle cancels it and the clock moves on: no run starts
/// after `cancel` returned (one in progress may end), and the task is dropped exactly once,
/// by the cancel or by the worker that finds it cancelled when putting it back.
fn a_cancelled_recurring_task_never_starts_again() {
    let clock = ManualClock::new();
    let timer = timer(&clock);
    let (runs, drops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let dropped = Dropped(Arc::clone(&drops));
    let ran = Arc::clone(&runs);
    let periodic = timer
        .schedule_fixed_rate(TICK, TICK, move || {
            let _kept = &dropped;
            ran.fetch_add(1, Ordering::SeqCst);
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
    let runs_then = runs.load(Ordering::SeqCst);
    mover.join().expect("no panic");
    clock.advance(TICK);
    clock.advance(TICK);
    assert!(cancelled, "the first cancel stops it");
    assert!(!periodic.cancel(), "a second cancel finds it stopped");
    timer.stop();
    await_exit(&timer);
    let runs_now = runs.load(Ordering::SeqCst);
    assert!(
        runs_now <= runs_then + 1,
        "{runs_now} runs, {runs_then} when cancel returned"
    );
    assert_eq!(
        drops.load(Ordering::SeqCst),
        1,
        "the task was not dropped once"
    );
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
    shuttle::check_random(cancel_expiry_and_stop_take_the_task_once, 3_000);
    shuttle::check_pct(cancel_expiry_and_stop_take_the_task_once, 3_000, 3);
}

#[test]
fn a_cancelled_recurring_task_never_starts_again_under_any_interleaving() {
    shuttle::check_random(a_cancelled_recurring_task_never_starts_again, 2_000);
    shuttle::check_pct(a_cancelled_recurring_task_never_starts_again, 2_000, 3);
}

#[test]
fn a_task_due_at_once_wakes_the_worker_under_any_interleaving() {
    shuttle::check_random(a_task_due_at_once_wakes_the_worker, 3_000);
    shuttle::check_pct(a_task_due_at_once_wakes_the_worker, 3_000, 3);
}
