//! The timer's own behaviours beyond Netty's: panic isolation, recurring tasks, cancellation that
//! frees at once, bad settings, and an idle worker that never wakes.

mod support;

use hashwheel::{BuildError, ManualClock, ScheduleError, Timer, MAX_SLOTS};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};
use support::{manual_timer, TICK};

#[test]
fn a_panicking_task_is_counted_and_the_worker_lives_on() {
    let (clock, timer) = manual_timer();
    let ran = Arc::new(AtomicUsize::new(0));
    timer
        .schedule(TICK, || panic!("task failure (expected by this test)"))
        .expect("running");
    let after = ran.clone();
    timer
        .schedule(TICK * 2, move || {
            after.fetch_add(1, Ordering::SeqCst);
        })
        .expect("running");
    clock.advance(TICK * 2);
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    let metrics = timer.metrics();
    assert_eq!(metrics.panicked, 1);
    assert_eq!(metrics.fired, 2);
}

#[test]
fn fixed_rate_runs_ten_thousand_periods_without_drift() {
    let (clock, timer) = manual_timer();
    let origin = clock.now();
    let period = Duration::from_millis(15); // not a multiple of the 10 ms tick
    let runs: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let record = {
        let clock = clock.clone();
        let runs = runs.clone();
        move || runs.lock().push(clock.now())
    };
    let periodic = timer
        .schedule_fixed_rate(period, period, record)
        .expect("running");
    let step = Duration::from_millis(5);
    for _ in 0..(10_000 * 3) {
        clock.advance(step);
    }
    let runs = runs.lock();
    assert_eq!(runs.len(), 10_000);
    assert_eq!(periodic.runs(), 10_000);
    for (index, &ran_at) in runs.iter().enumerate() {
        let n = index as u32 + 1;
        let tick_boundary = TICK * (period * n).as_millis().div_ceil(10) as u32;
        assert_eq!(
            ran_at - origin,
            tick_boundary,
            "run {n}: on its own tick, no drift"
        );
    }
}

#[test]
fn fixed_delay_counts_from_the_end_of_each_run() {
    let (clock, timer) = manual_timer();
    let origin = clock.now();
    let runs: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let record = {
        let clock = clock.clone();
        let runs = runs.clone();
        move || {
            runs.lock().push(clock.now() - origin);
        }
    };
    timer
        .schedule_fixed_delay(TICK, TICK * 3, record)
        .expect("running");
    for _ in 0..10 {
        clock.advance(TICK);
    }
    assert_eq!(*runs.lock(), vec![TICK, TICK * 4, TICK * 7, TICK * 10]);
}

#[test]
fn fixed_rate_skips_periods_the_worker_missed() {
    let (clock, timer) = manual_timer();
    let count = Arc::new(AtomicUsize::new(0));
    let counter = count.clone();
    timer
        .schedule_fixed_rate(TICK, TICK, move || {
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .expect("running");
    clock.advance(TICK * 100);
    assert_eq!(
        count.load(Ordering::SeqCst),
        1,
        "one run, not a burst of 100"
    );
    clock.advance(TICK);
    assert_eq!(count.load(Ordering::SeqCst), 2);
}

#[test]
fn cancelling_a_recurring_task_during_its_run_makes_that_run_the_last() {
    let (clock, timer) = manual_timer();
    let (started_tx, started) = mpsc::channel();
    let (go, go_rx) = mpsc::channel::<()>();
    let go_rx = Mutex::new(go_rx);
    let periodic = timer
        .schedule_fixed_rate(TICK, TICK, move || {
            started_tx.send(()).expect("test alive");
            go_rx
                .lock()
                .recv_timeout(Duration::from_secs(10))
                .expect("released by the test");
        })
        .expect("running");
    let advancing = {
        let clock = clock.clone();
        thread::spawn(move || clock.advance(TICK))
    };
    started
        .recv_timeout(Duration::from_secs(10))
        .expect("first run started");
    assert!(periodic.cancel(), "cancel wins while a run is in flight");
    assert!(!periodic.cancel(), "only once");
    go.send(()).expect("task alive");
    advancing.join().expect("advance returned");
    clock.advance(TICK * 10);
    assert_eq!(periodic.runs(), 1);
    assert!(periodic.is_cancelled());
    assert_eq!(timer.pending(), 0);
}

#[test]
fn cancel_drops_the_task_before_it_returns() {
    let (_clock, timer) = manual_timer();
    let payload = Arc::new([0u8; 1024]);
    let held = payload.clone();
    let timeout = timer
        .schedule(Duration::from_secs(60), move || drop(held))
        .expect("running");
    assert_eq!(Arc::strong_count(&payload), 2);
    assert!(timeout.cancel());
    assert_eq!(Arc::strong_count(&payload), 1, "freed by cancel itself");
    assert!(timeout.is_cancelled());
    assert!(!timeout.is_expired());
    assert!(!timeout.cancel(), "a second cancel loses");
    assert_eq!(timer.metrics().cancelled, 1);
}

/// A cancel leaves its task's place for the next schedule on the shard: the tasks scheduled
/// after a thousand cancels take those places, and no cancelled handle reaches them.
#[test]
fn tasks_that_reuse_cancelled_places_are_out_of_the_old_handles_reach() {
    let (clock, timer) = manual_timer();
    let ran = Arc::new(AtomicUsize::new(0));
    let task = || {
        let ran = Arc::clone(&ran);
        move || {
            ran.fetch_add(1, Ordering::SeqCst);
        }
    };
    let old: Vec<_> = (1..=1_000u32)
        .map(|n| {
            timer
                .schedule(TICK * (n % 50 + 1), task())
                .expect("running")
        })
        .collect();
    assert!(old.iter().all(|timeout| timeout.cancel()));
    assert_eq!(timer.pending(), 0);
    let new: Vec<_> = (1..=1_000u32)
        .map(|n| {
            timer
                .schedule(TICK * (n % 70 + 1), task())
                .expect("running")
        })
        .collect();
    assert!(old
        .iter()
        .all(|timeout| !timeout.cancel() && timeout.is_cancelled()));
    assert_eq!(timer.pending(), 1_000);
    assert!(new.iter().all(|timeout| timeout.is_pending()));
    clock.advance(TICK * 70);
    assert_eq!(
        ran.load(Ordering::SeqCst),
        1_000,
        "every new task ran, no old one"
    );
    assert!(new.iter().all(|timeout| timeout.is_expired()));
    let metrics = timer.metrics();
    assert_eq!((metrics.cancelled, metrics.fired), (1_000, 1_000));
}

#[test]
fn cancel_loses_against_expiry() {
    let (clock, timer) = manual_timer();
    let timeout = timer.schedule(TICK, || {}).expect("running");
    clock.advance(TICK);
    assert!(!timeout.cancel());
    assert!(timeout.is_expired());
    assert!(!timeout.is_cancelled());
}

#[test]
fn dropping_the_last_handle_stops_the_worker_and_drops_pending_tasks() {
    let (clock, timer) = manual_timer();
    let payload = Arc::new(());
    let held = payload.clone();
    let timeout = timer.schedule(TICK, move || drop(held)).expect("running");
    let clone = timer.clone();
    drop(timer);
    assert_eq!(
        Arc::strong_count(&payload),
        2,
        "a clone keeps the timer alive"
    );
    drop(clone);
    assert_eq!(
        Arc::strong_count(&payload),
        1,
        "pending tasks dropped unrun"
    );
    clock.advance(TICK);
    assert!(!timeout.is_expired());
}

#[test]
fn tasks_may_schedule_more_tasks() {
    let (clock, timer) = manual_timer();
    let (sender, receiver) = mpsc::channel();
    let inner = timer.clone();
    timer
        .schedule(TICK, move || {
            inner
                .schedule(TICK, move || sender.send("second").expect("test alive"))
                .expect("running");
        })
        .expect("running");
    clock.advance(TICK);
    assert!(receiver.try_recv().is_err());
    clock.advance(TICK);
    assert_eq!(receiver.try_recv(), Ok("second"));
}

#[test]
fn the_timer_reads_time_on_its_own_clock() {
    let (clock, timer) = manual_timer();
    assert_eq!(timer.now(), clock.now());
    clock.advance(Duration::from_secs(5));
    assert_eq!(timer.now(), clock.now());
    let origin = clock.now();
    assert_eq!(timer.tick_floor(origin + TICK * 3), origin + TICK * 3);
    assert_eq!(
        timer.tick_floor(origin + TICK * 3 + TICK / 2),
        origin + TICK * 3
    );
    if let Some(before_first_tick) = origin.checked_sub(Duration::from_secs(10)) {
        assert_eq!(timer.tick_floor(before_first_tick), before_first_tick);
    }
    let real = hashwheel::Timer::new().expect("default settings");
    let before = std::time::Instant::now();
    let read = real.now();
    assert!(read >= before && read <= std::time::Instant::now());
}

#[test]
fn a_manual_clock_moved_past_the_end_of_time_stops_at_it() {
    let (clock, timer) = manual_timer();
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&ran);
    timer
        .schedule(Duration::from_secs(1), move || {
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .expect("running");
    let before = clock.now();
    clock.advance(Duration::MAX);
    assert!(clock.now() > before + Duration::from_secs(1 << 32));
    assert_eq!(
        ran.load(Ordering::SeqCst),
        1,
        "the task's deadline has passed"
    );
    let end = clock.now();
    clock.advance(Duration::MAX);
    clock.advance(Duration::from_nanos(1));
    assert_eq!(clock.now(), end, "there is no later instant");
}

#[test]
fn max_pending_counts_a_recurring_task_through_its_runs() {
    let clock = ManualClock::new();
    let timer = Timer::builder()
        .clock(clock.clone())
        .max_pending(1)
        .build()
        .expect("valid settings");
    let refused = Arc::new(AtomicUsize::new(0));
    let periodic = {
        let (timer, refused) = (timer.clone(), Arc::clone(&refused));
        timer
            .clone()
            .schedule_fixed_rate(TICK, TICK * 10, move || {
                // The recurring task holds the one place while it runs.
                match timer.schedule(Duration::from_secs(3600), || {}) {
                    Err(ScheduleError::TooManyPending(_)) => {
                        refused.fetch_add(1, Ordering::SeqCst);
                    }
                    Ok(_) => {}
                    Err(other) => panic!("{other}"),
                }
            })
            .expect("room for one")
    };
    clock.advance(TICK);
    clock.advance(TICK * 10);
    assert_eq!(periodic.runs(), 2);
    assert_eq!(
        refused.load(Ordering::SeqCst),
        2,
        "the bound of one was passed"
    );
    assert_eq!(timer.pending(), 1);
    assert!(matches!(
        timer.schedule(Duration::from_secs(1), || {}),
        Err(ScheduleError::TooManyPending(_))
    ));
    assert!(periodic.cancel());
    timer
        .schedule(Duration::from_secs(1), || {})
        .expect("the recurring task gave its place back");
}

#[test]
fn a_deadline_in_the_past_runs_at_once() {
    let (clock, timer) = manual_timer();
    let (sender, receiver) = mpsc::channel();
    let past = clock.now();
    clock.advance(Duration::from_secs(1));
    timer
        .schedule_at(past, move || sender.send(()).expect("test alive"))
        .expect("running");
    clock.advance(Duration::ZERO);
    assert_eq!(receiver.try_recv(), Ok(()));
}

#[test]
fn bad_settings_are_typed_errors() {
    let short = Timer::builder().tick(Duration::from_micros(999)).build();
    assert!(matches!(short, Err(BuildError::TickTooShort { .. })));
    let zero_tick = Timer::builder().tick(Duration::ZERO).build();
    assert!(matches!(zero_tick, Err(BuildError::TickTooShort { .. })));
    let empty = Timer::builder().ticks_per_wheel(0).build();
    assert!(matches!(empty, Err(BuildError::TicksPerWheel { given: 0 })));
    let huge = Timer::builder().ticks_per_wheel(MAX_SLOTS + 1).build();
    assert!(matches!(huge, Err(BuildError::TicksPerWheel { .. })));
    let none = Timer::builder().max_pending(0).build();
    assert!(matches!(none, Err(BuildError::ZeroMaxPending)));
    let rounded = Timer::builder().ticks_per_wheel(100).build();
    assert!(rounded.is_ok(), "rounded up to 128");
    let message = Timer::builder()
        .tick(Duration::ZERO)
        .build()
        .err()
        .map(|error| error.to_string());
    assert_eq!(
        message.as_deref(),
        Some("the tick must be at least 1ms, not 0ns")
    );
}

#[test]
fn a_zero_period_is_refused_with_the_task_back() {
    let (_clock, timer) = manual_timer();
    let count = Arc::new(AtomicUsize::new(0));
    let counter = count.clone();
    let refused = timer.schedule_fixed_rate(TICK, Duration::ZERO, move || {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    match refused {
        Err(ScheduleError::ZeroPeriod(mut task)) => task(),
        other => panic!("expected ZeroPeriod, got {other:?}"),
    }
    assert_eq!(count.load(Ordering::SeqCst), 1);
}

#[test]
fn metrics_count_what_happened() {
    let (clock, timer) = manual_timer();
    let keep = timer.schedule(TICK, || {}).expect("running");
    let cancel = timer.schedule(TICK, || {}).expect("running");
    timer
        .schedule(Duration::from_secs(5), || {})
        .expect("running");
    assert!(cancel.cancel());
    clock.advance(TICK);
    let metrics = timer.metrics();
    assert!(keep.is_expired());
    assert_eq!(
        (
            metrics.scheduled,
            metrics.fired,
            metrics.cancelled,
            metrics.pending
        ),
        (3, 1, 1, 1)
    );
}

#[test]
fn one_manual_clock_drives_several_timers() {
    let clock = ManualClock::new();
    let count = Arc::new(AtomicUsize::new(0));
    let timers: Vec<Timer> = (0..3)
        .map(|_| {
            Timer::builder()
                .clock(clock.clone())
                .build()
                .expect("valid settings")
        })
        .collect();
    for timer in &timers {
        let counter = count.clone();
        timer
            .schedule(Duration::from_millis(7), move || {
                counter.fetch_add(1, Ordering::SeqCst);
            })
            .expect("running");
    }
    clock.advance(Duration::from_millis(7));
    assert_eq!(count.load(Ordering::SeqCst), 3);
}

/// End to end on the real clock: an idle worker, or one whose only task is far away, does not
/// wake up at all. Storing the first task in an empty timer whose worker already sleeps with no
/// deadline wakes it once, to set one; that wakeup is counted before the idle time starts.
/// (Bounds are generous; the check is for zero, not for a rate.)
#[test]
fn an_idle_worker_never_wakes() {
    let timer = Timer::new().expect("default settings");
    thread::sleep(Duration::from_millis(300));
    assert_eq!(timer.metrics().wakeups, 0, "nothing scheduled");
    let far = timer
        .schedule(Duration::from_secs(600), || {})
        .expect("running");
    thread::sleep(Duration::from_millis(50));
    let settled = timer.metrics().wakeups;
    assert!(settled <= 1);
    thread::sleep(Duration::from_millis(300));
    assert_eq!(timer.metrics().wakeups, settled);
    assert!(far.cancel());
    thread::sleep(Duration::from_millis(100));
    assert_eq!(timer.metrics().wakeups, settled);
    timer.stop();
    assert!(timer.await_termination(Duration::from_secs(10)));
}

#[test]
fn a_timeout_handle_is_two_words() {
    assert_eq!(
        std::mem::size_of::<hashwheel::Timeout>(),
        2 * std::mem::size_of::<usize>()
    );
}

#[test]
fn handles_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Timer>();
    send_sync::<hashwheel::Timeout>();
    send_sync::<hashwheel::Periodic>();
    send_sync::<ManualClock>();
}

/// A dropped timer's shards serve the timers built after it; a handle of the dropped timer
/// never reaches a task of a later one, whatever slot it lands in.
#[test]
fn a_handle_of_a_dropped_timer_never_cancels_a_later_timers_task() {
    let clock = ManualClock::new();
    let build = || {
        Timer::builder()
            .clock(clock.clone())
            .shards(1)
            .build()
            .expect("valid settings")
    };
    let old = build();
    let stale: Vec<_> = (0..64)
        .map(|_| {
            old.schedule(Duration::from_secs(1), || {})
                .expect("running")
        })
        .collect();
    drop(old);
    let count = Arc::new(AtomicUsize::new(0));
    let timers: Vec<Timer> = (0..8).map(|_| build()).collect();
    for timer in &timers {
        for _ in 0..64 {
            let counter = count.clone();
            timer
                .schedule(Duration::from_secs(1), move || {
                    counter.fetch_add(1, Ordering::SeqCst);
                })
                .expect("running");
        }
    }
    for handle in &stale {
        assert!(!handle.cancel());
        assert!(!handle.is_pending());
        assert_eq!(handle.deadline(), None);
    }
    clock.advance(Duration::from_secs(1));
    assert_eq!(count.load(Ordering::SeqCst), 8 * 64);
    assert!(timers.iter().all(|timer| timer.metrics().cancelled == 0));
}

/// A worker nice value the kernel may refuse (a negative one without the privilege) or accept
/// (a positive one) changes nothing in what the timer does.
#[test]
fn a_worker_nice_value_leaves_the_timer_working() {
    for nice in [19, -5] {
        let clock = ManualClock::new();
        let timer = Timer::builder()
            .clock(clock.clone())
            .worker_nice(nice)
            .build()
            .expect("valid settings");
        let count = Arc::new(AtomicUsize::new(0));
        let counter = count.clone();
        timer
            .schedule(Duration::from_millis(3), move || {
                counter.fetch_add(1, Ordering::SeqCst);
            })
            .expect("running");
        clock.advance(Duration::from_millis(3));
        assert_eq!(count.load(Ordering::SeqCst), 1);
    }
}
