//! One interface over every timer the benchmarks compare: this workspace's `hashwheel`, and its peers.

use crate::baseline::HeapTimer;
use hierarchical_hash_wheel_timer::thread_timer::{TimerRef, TimerWithThread};
use hierarchical_hash_wheel_timer::{
    ClosureTimer, OneShotClosureState, PeriodicClosureState, Timer as _,
};
use std::time::{Duration, Instant};

/// A timer under test. Tasks are closures that capture nothing, so no peer pays for boxing them.
pub trait Peer {
    /// What `schedule` returns, to cancel with.
    type Handle;
    /// The name printed in reports.
    const NAME: &'static str;
    /// A fresh timer (with its thread, if it has one).
    fn start() -> Self;
    /// Schedules `task` after `delay`.
    fn schedule<F: FnMut() + Send + 'static>(&mut self, delay: Duration, task: F) -> Self::Handle;
    /// Cancels a scheduled task.
    fn cancel(&mut self, handle: Self::Handle);
    /// Waits until `done()` holds or `limit` passes, running the timer if it has no thread of its
    /// own. `on_expiry` is what a peer without task execution calls for each expired entry.
    fn wait_until(&mut self, done: &dyn Fn() -> bool, on_expiry: fn(), limit: Duration) -> bool {
        let _ = on_expiry;
        let deadline = Instant::now() + limit;
        while !done() {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        true
    }
}

/// This workspace's timer, with a 1 ms tick.
pub struct Wheel(pub hashwheel::Timer);

impl Wheel {
    /// The same timer with its worker at nice value `nice` (see `TimerBuilder::worker_nice`).
    pub fn with_worker_nice(nice: i32) -> Self {
        Wheel(
            hashwheel::Timer::builder()
                .worker_nice(nice)
                .build()
                .expect("valid settings"),
        )
    }
}

impl Peer for Wheel {
    type Handle = hashwheel::Timeout;
    const NAME: &'static str = "wheel";
    fn start() -> Self {
        Wheel(hashwheel::Timer::new().expect("default settings"))
    }
    fn schedule<F: FnMut() + Send + 'static>(&mut self, delay: Duration, task: F) -> Self::Handle {
        self.0.schedule(delay, task).expect("no limit set")
    }
    fn cancel(&mut self, handle: Self::Handle) {
        handle.cancel();
    }
}

type HhwtRef = TimerRef<u64, OneShotClosureState<u64>, PeriodicClosureState<u64>>;

/// `hierarchical_hash_wheel_timer`'s threaded timer (1 ms resolution, commands over a channel).
pub struct Hierarchical {
    core: Option<TimerWithThread<u64, OneShotClosureState<u64>, PeriodicClosureState<u64>>>,
    timer: HhwtRef,
    next_id: u64,
}

impl Drop for Hierarchical {
    fn drop(&mut self) {
        // Its thread panics if the timer is dropped without an explicit shutdown.
        if let Some(core) = self.core.take() {
            let _ = core.shutdown();
        }
    }
}

impl Peer for Hierarchical {
    type Handle = u64;
    const NAME: &'static str = "hierarchical_hash_wheel_timer";
    fn start() -> Self {
        let core = TimerWithThread::new().expect("timer thread");
        let timer = core.timer_ref();
        Hierarchical {
            core: Some(core),
            timer,
            next_id: 0,
        }
    }
    fn schedule<F: FnMut() + Send + 'static>(&mut self, delay: Duration, mut task: F) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.timer.schedule_action_once(id, delay, move |_| task());
        id
    }
    fn cancel(&mut self, handle: u64) {
        self.timer.cancel(&handle);
    }
}

/// `tokio-util`'s `DelayQueue` (no thread: it is polled inside a current-thread runtime).
pub struct DelayQueue {
    runtime: tokio::runtime::Runtime,
    queue: tokio_util::time::DelayQueue<()>,
}

impl Peer for DelayQueue {
    type Handle = tokio_util::time::delay_queue::Key;
    const NAME: &'static str = "tokio_util::DelayQueue";
    fn start() -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        DelayQueue {
            runtime,
            queue: tokio_util::time::DelayQueue::new(),
        }
    }
    fn schedule<F: FnMut() + Send + 'static>(&mut self, delay: Duration, _task: F) -> Self::Handle {
        let _context = self.runtime.enter();
        self.queue.insert((), delay)
    }
    fn cancel(&mut self, handle: Self::Handle) {
        let _context = self.runtime.enter();
        self.queue.remove(&handle);
    }
    fn wait_until(&mut self, done: &dyn Fn() -> bool, on_expiry: fn(), limit: Duration) -> bool {
        let queue = &mut self.queue;
        self.runtime.block_on(async {
            let polled = tokio::time::timeout(limit, async {
                while !done() {
                    let next = std::future::poll_fn(|cx| queue.poll_expired(cx)).await;
                    match next {
                        Some(_) => on_expiry(),
                        None => return false,
                    }
                }
                true
            });
            polled.await.unwrap_or(false)
        })
    }
}

/// The `timer` crate (a heap on a thread, wall-clock deadlines; dropping the guard cancels).
pub struct TimerCrate(timer::Timer);

impl Peer for TimerCrate {
    type Handle = timer::Guard;
    const NAME: &'static str = "timer";
    fn start() -> Self {
        TimerCrate(timer::Timer::new())
    }
    fn schedule<F: FnMut() + Send + 'static>(&mut self, delay: Duration, task: F) -> timer::Guard {
        let delay = chrono::Duration::from_std(delay).expect("delay in range");
        self.0.schedule_with_delay(delay, task)
    }
    fn cancel(&mut self, handle: timer::Guard) {
        drop(handle);
    }
}

/// The BinaryHeap + Condvar baseline.
pub struct Heap(pub HeapTimer);

impl Peer for Heap {
    type Handle = u64;
    const NAME: &'static str = "BinaryHeap+Condvar";
    fn start() -> Self {
        Heap(HeapTimer::new())
    }
    fn schedule<F: FnMut() + Send + 'static>(&mut self, delay: Duration, task: F) -> u64 {
        self.0.schedule(delay, task)
    }
    fn cancel(&mut self, handle: u64) {
        self.0.cancel(handle);
    }
}
