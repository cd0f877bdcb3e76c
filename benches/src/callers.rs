//! Many threads scheduling into one shared timer: the timers that can be shared behind one
//! interface, and the burst that times them.
//!
//! A burst is one million operations split evenly over `threads` caller threads that start
//! together; its figure is the wall time from the first thread's start to the last thread's end,
//! divided by one million. Each thread keeps its own handles, so the cancel burst cancels, on each
//! thread, what that thread scheduled.

use crate::baseline::HeapTimer;
use hierarchical_hash_wheel_timer::thread_timer::{TimerRef, TimerWithThread};
use hierarchical_hash_wheel_timer::{
    ClosureTimer, OneShotClosureState, PeriodicClosureState, Timer as _,
};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

/// The settings the table asks for, where a timer has them: a 100 ms tick and 512 buckets.
pub const TICK: Duration = Duration::from_millis(100);
/// Buckets in the innermost ring.
pub const BUCKETS: usize = 512;

/// A timer that many threads use at once, each through its own caller handle.
pub trait SharedPeer: Send + Sync + Sized + 'static {
    /// What one thread schedules and cancels through.
    type Caller: Send;
    /// What `schedule` returns, to cancel with.
    type Handle: Send;
    /// The name printed in reports.
    const NAME: &'static str;
    /// The settings used, printed in reports.
    const SETTINGS: &'static str;
    /// A fresh timer (with its thread).
    fn start() -> Self;
    /// A handle for caller thread number `index`.
    fn caller(&self, index: usize) -> Self::Caller;
    /// Schedules a no-op task after `delay`.
    fn schedule(caller: &mut Self::Caller, delay: Duration) -> Self::Handle;
    /// Cancels a scheduled task.
    fn cancel(caller: &mut Self::Caller, handle: Self::Handle);
}

fn noop() {}

/// `hashwheel`'s timer, 100 ms tick, 512 buckets; every thread holds a clone of the `Timer`.
pub struct SharedWheel(hashwheel::Timer);

impl SharedPeer for SharedWheel {
    type Caller = hashwheel::Timer;
    type Handle = hashwheel::Timeout;
    const NAME: &'static str = "wheel";
    const SETTINGS: &'static str = "tick 100 ms, 512 buckets";
    fn start() -> Self {
        let timer = hashwheel::Timer::builder()
            .tick(TICK)
            .ticks_per_wheel(BUCKETS)
            .build()
            .expect("valid settings");
        SharedWheel(timer)
    }
    fn caller(&self, _index: usize) -> hashwheel::Timer {
        self.0.clone()
    }
    fn schedule(caller: &mut hashwheel::Timer, delay: Duration) -> hashwheel::Timeout {
        caller.schedule(delay, noop).expect("no limit set")
    }
    fn cancel(_caller: &mut hashwheel::Timer, handle: hashwheel::Timeout) {
        handle.cancel();
    }
}

/// The BinaryHeap + Condvar baseline, shared through an `Arc` (no tick: exact deadlines).
pub struct SharedHeap(Arc<HeapTimer>);

impl SharedPeer for SharedHeap {
    type Caller = Arc<HeapTimer>;
    type Handle = u64;
    const NAME: &'static str = "BinaryHeap+Condvar";
    const SETTINGS: &'static str = "no tick (a heap of exact deadlines)";
    fn start() -> Self {
        SharedHeap(Arc::new(HeapTimer::new()))
    }
    fn caller(&self, _index: usize) -> Arc<HeapTimer> {
        Arc::clone(&self.0)
    }
    fn schedule(caller: &mut Arc<HeapTimer>, delay: Duration) -> u64 {
        caller.schedule(delay, noop)
    }
    fn cancel(caller: &mut Arc<HeapTimer>, handle: u64) {
        caller.cancel(handle);
    }
}

type HhwtRef = TimerRef<u64, OneShotClosureState<u64>, PeriodicClosureState<u64>>;
type HhwtCore = TimerWithThread<u64, OneShotClosureState<u64>, PeriodicClosureState<u64>>;

/// `hierarchical_hash_wheel_timer`'s threaded timer; every thread holds a clone of its
/// `TimerRef` and numbers its own timeouts.
pub struct SharedHierarchical {
    core: parking_lot::Mutex<Option<HhwtCore>>,
    timer: HhwtRef,
}

/// A thread's `TimerRef` and the next id it hands out.
pub struct HierarchicalCaller {
    timer: HhwtRef,
    next_id: u64,
}

impl Drop for SharedHierarchical {
    fn drop(&mut self) {
        // Its thread panics if the timer is dropped without an explicit shutdown.
        if let Some(core) = self.core.lock().take() {
            let _ = core.shutdown();
        }
    }
}

impl SharedPeer for SharedHierarchical {
    type Caller = HierarchicalCaller;
    type Handle = u64;
    const NAME: &'static str = "hierarchical_hash_wheel_timer";
    const SETTINGS: &'static str = "its only settings: 1 ms resolution, four 256-slot wheels";
    fn start() -> Self {
        let core = TimerWithThread::new().expect("timer thread");
        let timer = core.timer_ref();
        SharedHierarchical {
            core: parking_lot::Mutex::new(Some(core)),
            timer,
        }
    }
    fn caller(&self, index: usize) -> HierarchicalCaller {
        HierarchicalCaller {
            timer: self.timer.clone(),
            // Ids are unique across threads: the thread's number in the top bits.
            next_id: (index as u64 + 1) << 40,
        }
    }
    fn schedule(caller: &mut HierarchicalCaller, delay: Duration) -> u64 {
        let id = caller.next_id;
        caller.next_id += 1;
        caller.timer.schedule_action_once(id, delay, |_| noop());
        id
    }
    fn cancel(caller: &mut HierarchicalCaller, handle: u64) {
        caller.timer.cancel(&handle);
    }
}

/// What a burst does on each thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Burst {
    /// Schedule this thread's share; the handles are kept for the next cancel burst.
    Schedule,
    /// Cancel what this thread scheduled in the schedule burst before.
    Cancel,
    /// Schedule and at once cancel, this thread's share of pairs.
    ScheduleCancel,
}

/// Best wall time per operation, in ns, of `repeats` rounds of schedule, cancel and
/// schedule + cancel bursts of `operations` each, over `threads` threads.
#[derive(Clone, Copy, Debug)]
pub struct BurstFigures {
    pub schedule: f64,
    pub cancel: f64,
    pub schedule_cancel: f64,
}

/// One thread's start and end of one burst.
type Span = (Instant, Instant);

/// Runs `repeats` rounds of the three bursts on `timer`, `operations` operations per burst shared
/// by `threads` threads, and returns the best wall time per operation of each kind.
pub fn bursts<P: SharedPeer>(
    timer: &P,
    threads: usize,
    operations: usize,
    repeats: usize,
    delays: &[Duration],
) -> BurstFigures {
    let share = operations / threads;
    let barrier = Barrier::new(threads);
    let spans: Vec<Vec<[Span; 3]>> = thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|index| {
                let mut caller = timer.caller(index);
                let barrier = &barrier;
                scope.spawn(move || {
                    let offset = index * share;
                    let delay = |i: usize| delays[(offset + i) % delays.len()];
                    let mut handles = Vec::with_capacity(share);
                    let mut spans = Vec::with_capacity(repeats);
                    for _ in 0..repeats {
                        barrier.wait();
                        let start = Instant::now();
                        for i in 0..share {
                            handles.push(P::schedule(&mut caller, delay(i)));
                        }
                        let scheduled = (start, Instant::now());
                        barrier.wait();
                        let start = Instant::now();
                        for handle in handles.drain(..) {
                            P::cancel(&mut caller, handle);
                        }
                        let cancelled = (start, Instant::now());
                        barrier.wait();
                        let start = Instant::now();
                        for i in 0..share {
                            let handle = P::schedule(&mut caller, delay(i));
                            P::cancel(&mut caller, handle);
                        }
                        spans.push([scheduled, cancelled, (start, Instant::now())]);
                    }
                    spans
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("burst thread"))
            .collect()
    });
    let done = share * threads;
    let best = |kind: usize| {
        (0..repeats)
            .map(|round| {
                let first = spans.iter().map(|s| s[round][kind].0).min();
                let last = spans.iter().map(|s| s[round][kind].1).max();
                match (first, last) {
                    (Some(first), Some(last)) => {
                        last.duration_since(first).as_nanos() as f64 / done as f64
                    }
                    _ => f64::MAX,
                }
            })
            .fold(f64::MAX, f64::min)
    };
    BurstFigures {
        schedule: best(0),
        cancel: best(1),
        schedule_cancel: best(2),
    }
}

/// Keeps `threads` threads scheduling and cancelling on `timer` at full speed until the returned
/// guard is dropped: each thread schedules a batch of 1,000 timeouts 1-60 s away, then cancels
/// them, over and over. The guard's `stop` returns the operations done.
pub fn keep_busy(timer: &hashwheel::Timer, threads: usize, delays: Arc<Vec<Duration>>) -> Busy {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers = (0..threads)
        .map(|_| {
            let timer = timer.clone();
            let stop = Arc::clone(&stop);
            let delays = Arc::clone(&delays);
            thread::spawn(move || {
                let mut done = 0u64;
                let mut handles = Vec::with_capacity(1_000);
                let mut next = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for _ in 0..1_000 {
                        let delay = delays[next % delays.len()];
                        next += 1;
                        handles.push(timer.schedule(delay, noop).expect("running"));
                    }
                    for handle in handles.drain(..) {
                        handle.cancel();
                    }
                    done += 2_000;
                }
                done
            })
        })
        .collect();
    Busy {
        stop,
        workers,
        started: Instant::now(),
    }
}

/// Threads started by [`keep_busy`].
pub struct Busy {
    stop: Arc<std::sync::atomic::AtomicBool>,
    workers: Vec<thread::JoinHandle<u64>>,
    started: Instant,
}

impl Busy {
    /// Stops the threads and returns how many operations per second they made together.
    pub fn stop(self) -> f64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let elapsed = self.started.elapsed();
        let done: u64 = self
            .workers
            .into_iter()
            .map(|worker| worker.join().expect("busy thread"))
            .sum();
        done as f64 / elapsed.as_secs_f64()
    }
}
