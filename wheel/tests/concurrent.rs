//! Several threads scheduling, cancelling and stopping one timer at once, on the manual clock:
//! every task accepted ends one way, exactly once. It runs on the worker, or its `cancel`
//! returns `true` (and the task is dropped before `cancel` returns), or a `stop` hands it back.

use hashwheel::{ManualClock, ScheduleError, Timer, UnrunTask};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

const TICK: Duration = Duration::from_millis(10);
const WORKER: &str = "concurrent-worker";

/// How each task ended, counted per task.
struct Ledger {
    /// Ran on the worker.
    fired: Vec<AtomicUsize>,
    /// Ran on a test thread after a stop handed it back.
    handed_back: Vec<AtomicUsize>,
    /// Its `cancel` returned `true`.
    cancelled: Vec<AtomicUsize>,
    /// Its closure was dropped (run or not).
    dropped: Vec<AtomicUsize>,
    /// `schedule` accepted it.
    accepted: Vec<AtomicBool>,
}

impl Ledger {
    fn new(tasks: usize) -> Self {
        let counts = || (0..tasks).map(|_| AtomicUsize::new(0)).collect();
        Ledger {
            fired: counts(),
            handed_back: counts(),
            cancelled: counts(),
            dropped: counts(),
            accepted: (0..tasks).map(|_| AtomicBool::new(false)).collect(),
        }
    }
}

/// Counts its task's drop.
struct DropMark {
    ledger: Arc<Ledger>,
    id: usize,
}

impl Drop for DropMark {
    fn drop(&mut self) {
        self.ledger.dropped[self.id].fetch_add(1, Ordering::SeqCst);
    }
}

fn task(ledger: &Arc<Ledger>, id: usize) -> impl FnOnce() + Send + 'static {
    let mark = DropMark {
        ledger: Arc::clone(ledger),
        id,
    };
    move || {
        let on_worker = thread::current().name() == Some(WORKER);
        let counts = if on_worker {
            &mark.ledger.fired
        } else {
            &mark.ledger.handed_back
        };
        counts[mark.id].fetch_add(1, Ordering::SeqCst);
    }
}

/// Counts a scheduler thread out when it ends, even by a panic, so that nobody waits for it.
struct Leaving(Arc<AtomicUsize>);

impl Drop for Leaving {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A small seeded generator, so that a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// One round: `schedulers` threads each schedule `per_thread` tasks due within 4 ticks and
/// cancel a random earlier one now and then; a thread moves the clock a tick at a time; once
/// half the tasks were offered, two threads stop the timer at once while the others go on.
fn round(seed: u64, schedulers: usize, per_thread: usize) {
    let clock = ManualClock::new();
    let timer = Timer::builder()
        .tick(TICK)
        .shards(4)
        .thread_name(WORKER)
        .clock(clock.clone())
        .build()
        .expect("valid settings");
    let tasks = schedulers * per_thread;
    let ledger = Arc::new(Ledger::new(tasks));
    let offered = Arc::new(AtomicUsize::new(0));
    let schedulers_left = Arc::new(AtomicUsize::new(schedulers));
    let done = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(schedulers + 4));

    let scheduling: Vec<_> = (0..schedulers)
        .map(|thread_index| {
            let (timer, ledger, offered, start) = (
                timer.clone(),
                ledger.clone(),
                offered.clone(),
                start.clone(),
            );
            let left = Leaving(schedulers_left.clone());
            thread::spawn(move || {
                let _left = left;
                let mut rng =
                    Rng(seed ^ (thread_index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                let mut handles = Vec::new();
                start.wait();
                for n in 0..per_thread {
                    let id = thread_index * per_thread + n;
                    let delay = TICK * rng.below(4) as u32 + Duration::from_millis(rng.below(10));
                    match timer.schedule(delay, task(&ledger, id)) {
                        Ok(handle) => {
                            ledger.accepted[id].store(true, Ordering::SeqCst);
                            handles.push((id, handle));
                        }
                        Err(ScheduleError::Stopped(refused)) => drop(refused),
                        Err(other) => panic!("unexpected refusal {other:?}"),
                    }
                    offered.fetch_add(1, Ordering::SeqCst);
                    if n % 16 == 0 {
                        // Let the clock thread in, so that tasks fall due while others come.
                        thread::yield_now();
                    }
                    if rng.below(3) == 0 && !handles.is_empty() {
                        let pick = rng.below(handles.len() as u64) as usize;
                        let (id, handle) = handles.swap_remove(pick);
                        if handle.cancel() {
                            ledger.cancelled[id].fetch_add(1, Ordering::SeqCst);
                            assert_eq!(
                                ledger.dropped[id].load(Ordering::SeqCst),
                                1,
                                "task {id} dropped inside cancel"
                            );
                            assert!(handle.is_cancelled() && !handle.is_expired());
                        }
                    }
                }
            })
        })
        .collect();

    let ticking = {
        let (clock, done, start) = (clock.clone(), done.clone(), start.clone());
        thread::spawn(move || {
            start.wait();
            while !done.load(Ordering::SeqCst) {
                clock.advance(TICK);
            }
        })
    };

    let stopping: Vec<_> = (0..2)
        .map(|_| {
            let (timer, offered, start, left) = (
                timer.clone(),
                offered.clone(),
                start.clone(),
                schedulers_left.clone(),
            );
            thread::spawn(move || -> Vec<UnrunTask> {
                start.wait();
                while offered.load(Ordering::SeqCst) < tasks / 2 && left.load(Ordering::SeqCst) > 0
                {
                    thread::yield_now();
                }
                timer.stop()
            })
        })
        .collect();

    start.wait();
    for thread in scheduling {
        thread.join().expect("scheduler");
    }
    let unrun: Vec<UnrunTask> = stopping
        .into_iter()
        .flat_map(|thread| thread.join().expect("stopper"))
        .collect();
    assert!(timer.await_termination(Duration::from_secs(30)));
    done.store(true, Ordering::SeqCst);
    ticking.join().expect("clock thread");
    for task in unrun {
        task.run();
    }

    let mut ended = [0usize; 3];
    for id in 0..tasks {
        let fired = ledger.fired[id].load(Ordering::SeqCst);
        let handed_back = ledger.handed_back[id].load(Ordering::SeqCst);
        let cancelled = ledger.cancelled[id].load(Ordering::SeqCst);
        if ledger.accepted[id].load(Ordering::SeqCst) {
            assert_eq!(
                fired + handed_back + cancelled,
                1,
                "seed {seed}, task {id}: fired {fired}, handed back {handed_back}, \
                 cancelled {cancelled}"
            );
        } else {
            assert_eq!(fired + handed_back + cancelled, 0, "refused task {id}");
        }
        assert_eq!(ledger.dropped[id].load(Ordering::SeqCst), 1, "task {id}");
        ended[0] += fired;
        ended[1] += handed_back;
        ended[2] += cancelled;
    }
    let metrics = timer.metrics();
    let accepted = (0..tasks)
        .filter(|&id| ledger.accepted[id].load(Ordering::SeqCst))
        .count() as u64;
    assert_eq!(metrics.scheduled, accepted);
    assert_eq!(metrics.fired, ended[0] as u64);
    assert_eq!(metrics.cancelled, ended[2] as u64);
    assert_eq!(metrics.pending, 0);
}

#[test]
fn every_task_runs_is_cancelled_or_is_handed_back_exactly_once() {
    for seed in 1..=12 {
        round(seed, 4, 1_500);
    }
}

#[test]
fn max_pending_is_exact_with_threads_scheduling_at_once() {
    let clock = ManualClock::new();
    let timer = Timer::builder()
        .clock(clock)
        .shards(8)
        .max_pending(1_000)
        .build()
        .expect("valid settings");
    let start = Arc::new(Barrier::new(4));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (timer, start) = (timer.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                let mut kept = Vec::new();
                for round in 0..2_000 {
                    match timer.schedule(Duration::from_secs(60), || {}) {
                        // Give a place back now and then, so that places change hands.
                        Ok(handle) if round % 4 == 0 => assert!(handle.cancel()),
                        Ok(handle) => kept.push(handle),
                        Err(ScheduleError::TooManyPending(_)) => {}
                        Err(other) => panic!("unexpected refusal {other:?}"),
                    }
                }
                kept
            })
        })
        .collect();
    let kept: Vec<_> = threads
        .into_iter()
        .flat_map(|thread| thread.join().expect("scheduler"))
        .collect();
    assert_eq!(kept.len(), 1_000, "every place taken, none twice");
    assert_eq!(timer.pending(), 1_000);
    assert!(matches!(
        timer.schedule(Duration::from_secs(60), || {}),
        Err(ScheduleError::TooManyPending(_))
    ));
    assert!(kept[0].cancel());
    assert!(timer.schedule(Duration::from_secs(60), || {}).is_ok());
}

#[test]
fn the_shard_count_is_a_power_of_two_from_one_to_the_maximum() {
    let timer = Timer::builder()
        .shards(4)
        .clock(ManualClock::new())
        .build()
        .expect("valid settings");
    assert_eq!(timer.shards(), 4);
    let rounded = Timer::builder().shards(3).build().expect("valid settings");
    assert_eq!(rounded.shards(), 4, "rounded up to a power of two");
    assert!(matches!(
        Timer::builder().shards(0).build(),
        Err(hashwheel::BuildError::Shards { given: 0 })
    ));
    assert!(Timer::builder()
        .shards(hashwheel::MAX_SHARDS + 1)
        .build()
        .is_err());
}
