//! One test per behaviour of Netty's `HashedWheelTimerTest`, named after it, on the manual clock
//! wherever timing matters.

mod support;

use hashwheel::{ManualClock, ScheduleError, Timer};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{manual_timer, TICK};

fn counter() -> (Arc<AtomicUsize>, impl Fn() -> Box<dyn FnOnce() + Send>) {
    let count = Arc::new(AtomicUsize::new(0));
    let make = {
        let count = count.clone();
        move || -> Box<dyn FnOnce() + Send> {
            let count = count.clone();
            Box::new(move || {
                count.fetch_add(1, Ordering::SeqCst);
            })
        }
    };
    (count, make)
}

#[test]
fn schedule_timeout_should_not_run_before_delay() {
    let (clock, timer) = manual_timer();
    let (count, task) = counter();
    let timeout = timer
        .schedule(Duration::from_secs(10), task())
        .expect("running");
    clock.advance(Duration::from_millis(9_999));
    assert_eq!(count.load(Ordering::SeqCst), 0);
    assert!(!timeout.is_expired());
    assert!(timeout.is_pending());
}

#[test]
fn schedule_timeout_should_run_after_delay() {
    let (clock, timer) = manual_timer();
    let (count, task) = counter();
    let timeout = timer
        .schedule(Duration::from_millis(2), task())
        .expect("running");
    clock.advance(Duration::from_millis(2));
    assert_eq!(
        count.load(Ordering::SeqCst),
        0,
        "2 ms rounds up to the 10 ms tick"
    );
    clock.advance(TICK);
    assert_eq!(count.load(Ordering::SeqCst), 1);
    assert!(timeout.is_expired());
    assert!(!timeout.is_cancelled());
}

#[test]
fn stop_timer_returns_unprocessed_timeouts() {
    let (clock, timer) = manual_timer();
    let (count, task) = counter();
    for _ in 0..3 {
        timer
            .schedule(Duration::from_secs(1), task())
            .expect("running");
    }
    let fired = timer
        .schedule(Duration::from_millis(10), task())
        .expect("running");
    clock.advance(TICK);
    assert!(fired.is_expired());
    let unrun = timer.stop();
    assert_eq!(unrun.len(), 3);
    assert!(timer.await_termination(Duration::from_secs(10)));
    assert!(timer.stop().is_empty(), "a second stop has nothing left");
    for task in unrun {
        task.run();
    }
    assert_eq!(count.load(Ordering::SeqCst), 4);
}

#[test]
fn stop_timer_from_inside_a_task_does_not_deadlock() {
    let (clock, timer) = manual_timer();
    let (sender, receiver) = mpsc::channel();
    let inner = timer.clone();
    timer
        .schedule(Duration::from_secs(5), || {})
        .expect("running");
    timer
        .schedule(TICK, move || {
            let unrun = inner.stop();
            assert!(!inner.await_termination(Duration::from_secs(1)));
            sender.send(unrun.len()).expect("receiver alive");
        })
        .expect("running");
    clock.advance(TICK);
    assert_eq!(receiver.recv_timeout(Duration::from_secs(10)), Ok(1));
    assert!(timer.await_termination(Duration::from_secs(10)));
}

#[test]
fn timer_should_reject_new_timeouts_after_stop() {
    let (_clock, timer) = manual_timer();
    let (count, task) = counter();
    timer.stop();
    match timer.schedule(Duration::from_millis(1), task()) {
        Err(ScheduleError::Stopped(task)) => task(),
        other => panic!("expected Stopped with the task back, got {other:?}"),
    }
    assert_eq!(
        count.load(Ordering::SeqCst),
        1,
        "the very task was handed back"
    );
    assert!(matches!(
        timer.schedule_fixed_rate(TICK, TICK, || {}),
        Err(ScheduleError::Stopped(_))
    ));
}

#[test]
fn timer_overflow_wheel_length() {
    let clock = ManualClock::new();
    let timer = Timer::builder()
        .tick(TICK)
        .ticks_per_wheel(32)
        .clock(clock.clone())
        .build()
        .expect("valid settings");
    let (count, task) = counter();
    // Each delay is longer than one rotation of 32 ticks (320 ms): 1 to 5 rotations, plus 30 ms.
    let rotation = TICK * 32;
    let deadline = |rotations: u32| rotation * rotations + Duration::from_millis(30);
    for rotations in 1..=5 {
        timer
            .schedule(deadline(rotations), task())
            .expect("running");
    }
    let mut elapsed = Duration::ZERO;
    for rotations in 1..=5u32 {
        let just_before = deadline(rotations) - Duration::from_millis(1);
        clock.advance(just_before - elapsed);
        assert_eq!(count.load(Ordering::SeqCst), rotations as usize - 1);
        clock.advance(Duration::from_millis(1));
        elapsed = deadline(rotations);
        assert_eq!(count.load(Ordering::SeqCst), rotations as usize);
    }
    assert_eq!(timer.pending(), 0);
}

#[test]
fn execution_on_time() {
    let timer = Timer::builder()
        .tick(Duration::from_millis(5))
        .build()
        .expect("valid settings");
    let (sender, receiver) = mpsc::channel();
    let delay = Duration::from_millis(50);
    for _ in 0..20 {
        let sender = sender.clone();
        let scheduled = Instant::now();
        timer
            .schedule(delay, move || {
                sender.send(scheduled.elapsed()).expect("receiver alive")
            })
            .expect("running");
    }
    for _ in 0..20 {
        let waited = receiver
            .recv_timeout(Duration::from_secs(10))
            .expect("fired");
        assert!(waited >= delay, "fired early: {waited:?}");
        assert!(
            waited < delay + Duration::from_secs(2),
            "far too late: {waited:?}"
        );
    }
}

#[test]
fn rejected_when_too_many_timeouts_are_added_back_to_back() {
    let clock = ManualClock::new();
    let timer = Timer::builder()
        .clock(clock.clone())
        .max_pending(2)
        .build()
        .expect("valid settings");
    let (count, task) = counter();
    timer.schedule(Duration::from_secs(1), || {}).expect("room");
    timer.schedule(Duration::from_secs(1), || {}).expect("room");
    match timer.schedule(Duration::from_secs(1), task()) {
        Err(ScheduleError::TooManyPending(task)) => task(),
        other => panic!("expected TooManyPending, got {other:?}"),
    }
    assert_eq!(
        count.load(Ordering::SeqCst),
        1,
        "the very task was handed back"
    );
    assert_eq!(timer.pending(), 2);
    assert_eq!(timer.metrics().rejected, 1);
}

#[test]
fn new_timeout_accepted_again_when_an_existing_timeout_is_cancelled() {
    let clock = ManualClock::new();
    let timer = Timer::builder()
        .clock(clock.clone())
        .max_pending(2)
        .build()
        .expect("valid settings");
    let first = timer.schedule(Duration::from_secs(1), || {}).expect("room");
    timer.schedule(Duration::from_secs(1), || {}).expect("room");
    assert!(timer.schedule(Duration::from_secs(1), || {}).is_err());
    assert!(first.cancel());
    assert!(timer.schedule(Duration::from_secs(1), || {}).is_ok());
}

#[test]
fn new_timeout_accepted_again_when_an_existing_timeout_is_executed() {
    let clock = ManualClock::new();
    let timer = Timer::builder()
        .tick(TICK)
        .clock(clock.clone())
        .max_pending(2)
        .build()
        .expect("valid settings");
    timer.schedule(TICK, || {}).expect("room");
    timer.schedule(Duration::from_secs(1), || {}).expect("room");
    assert!(timer.schedule(Duration::from_secs(1), || {}).is_err());
    clock.advance(TICK);
    assert!(timer.schedule(Duration::from_secs(1), || {}).is_ok());
}

#[test]
fn report_pending_timeouts() {
    let (clock, timer) = manual_timer();
    let t1 = timer
        .schedule(Duration::from_secs(100), || {})
        .expect("room");
    let _t2 = timer
        .schedule(Duration::from_secs(100), || {})
        .expect("room");
    let _t3 = timer.schedule(TICK, || {}).expect("room");
    assert_eq!(timer.pending(), 3);
    assert!(t1.cancel());
    assert_eq!(
        timer.pending(),
        2,
        "cancel frees the place at once, not a tick later"
    );
    clock.advance(TICK);
    assert_eq!(timer.pending(), 1);
}

#[test]
fn overflow_delay_never_fires_and_can_be_cancelled() {
    let (clock, timer) = manual_timer();
    let (count, task) = counter();
    let never = timer.schedule(Duration::MAX, task()).expect("room");
    let almost = timer
        .schedule(Duration::from_secs(u64::MAX / 4), task())
        .expect("room");
    clock.advance(Duration::from_secs(10 * 365 * 24 * 3600));
    assert_eq!(count.load(Ordering::SeqCst), 0);
    assert!(never.is_pending() && almost.is_pending());
    assert_eq!(never.deadline(), None);
    assert!(never.cancel());
    assert!(almost.cancel());
    assert_eq!(timer.pending(), 0);
}

#[test]
fn stop_timer_cancels_pending_tasks() {
    let (clock, timer) = manual_timer();
    let (count, task) = counter();
    let timeout = timer
        .schedule(Duration::from_secs(1), task())
        .expect("room");
    let unrun = timer.stop();
    assert_eq!(unrun.len(), 1);
    drop(unrun);
    clock.advance(Duration::from_secs(2));
    assert_eq!(count.load(Ordering::SeqCst), 0);
    assert!(!timeout.is_expired(), "handed back by stop, never run");
    assert!(!timeout.is_cancelled());
    assert!(!timeout.cancel(), "nothing left to cancel");
}
