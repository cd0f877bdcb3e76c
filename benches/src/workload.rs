//! Workloads shared by the criterion benchmarks and the figures binary.

use crate::peers::Peer;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Delays spread over 1 to 60 seconds, from a fixed-seed generator.
pub fn delays(count: usize, seed: u64) -> Vec<Duration> {
    let mut state = seed | 1;
    (0..count)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            Duration::from_millis(1_000 + state % 59_000)
        })
        .collect()
}

/// A task that does nothing.
pub fn noop() {}

/// Which burst is running; a task's thread-local count restarts when it changes.
static BURST_RUN: AtomicUsize = AtomicUsize::new(0);
static BURST_TARGET: AtomicUsize = AtomicUsize::new(0);
static BURST_DONE: AtomicBool = AtomicBool::new(false);
static BURST_FIRST: parking_lot::Mutex<Option<Instant>> = parking_lot::Mutex::new(None);
static BURST_LAST: parking_lot::Mutex<Option<Instant>> = parking_lot::Mutex::new(None);

thread_local! {
    /// (burst run, tasks of it run on this thread). Every timer runs its tasks on one thread, so
    /// counting needs no atomic read-modify-write: the task stays close to a no-op.
    static BURST_SEEN: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
}

/// The task of an expiry burst: counts, and notes when the first and the last started.
pub fn burst_task() {
    let run = BURST_RUN.load(Ordering::Relaxed);
    let seen = BURST_SEEN.with(|seen| {
        let (seen_run, count) = seen.get();
        let count = if seen_run == run { count + 1 } else { 1 };
        seen.set((run, count));
        count
    });
    if seen == 1 {
        *BURST_FIRST.lock() = Some(Instant::now());
    }
    if seen == BURST_TARGET.load(Ordering::Relaxed) {
        *BURST_LAST.lock() = Some(Instant::now());
        BURST_DONE.store(true, Ordering::Release);
    }
}

/// Readies the burst counters for `count` tasks.
pub fn burst_reset(count: usize) {
    BURST_RUN.fetch_add(1, Ordering::SeqCst);
    BURST_TARGET.store(count, Ordering::SeqCst);
    BURST_DONE.store(false, Ordering::SeqCst);
    *BURST_FIRST.lock() = None;
    *BURST_LAST.lock() = None;
}

/// Whether the last of the burst's tasks has run.
pub fn burst_done() -> bool {
    BURST_DONE.load(Ordering::Acquire)
}

/// When the first and the last burst task started.
pub fn burst_times() -> Option<(Instant, Instant)> {
    Some(((*BURST_FIRST.lock())?, (*BURST_LAST.lock())?))
}

/// Schedules `count` tasks on one deadline `delay` away and returns the time from the deadline to
/// the start of the last task, or `None` if they did not all run within a minute.
pub fn expiry_burst<P: Peer>(peer: &mut P, count: usize, delay: Duration) -> Option<Duration> {
    burst_reset(count);
    let deadline = Instant::now() + delay;
    let mut handles = Vec::with_capacity(count);
    for _ in 0..count {
        let left = deadline.saturating_duration_since(Instant::now());
        handles.push(peer.schedule(left, burst_task));
    }
    let done = burst_done;
    if !peer.wait_until(&done, burst_task, Duration::from_secs(60)) {
        return None;
    }
    drop(handles);
    let (_, last) = burst_times()?;
    Some(last.saturating_duration_since(deadline))
}
