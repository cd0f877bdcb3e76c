//! Workloads shared by the criterion benchmarks and the figures binary.

use crate::peers::Peer;
use std::sync::atomic::{AtomicUsize, Ordering};
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

static BURST_COUNT: AtomicUsize = AtomicUsize::new(0);
static BURST_TARGET: AtomicUsize = AtomicUsize::new(0);
static BURST_FIRST: parking_lot::Mutex<Option<Instant>> = parking_lot::Mutex::new(None);
static BURST_LAST: parking_lot::Mutex<Option<Instant>> = parking_lot::Mutex::new(None);

/// The task of an expiry burst: counts, and notes when the first and the last ran.
pub fn burst_task() {
    let before = BURST_COUNT.fetch_add(1, Ordering::Relaxed);
    if before == 0 {
        *BURST_FIRST.lock() = Some(Instant::now());
    }
    if before + 1 == BURST_TARGET.load(Ordering::Relaxed) {
        *BURST_LAST.lock() = Some(Instant::now());
    }
}

/// Readies the burst counters for `count` tasks.
pub fn burst_reset(count: usize) {
    BURST_COUNT.store(0, Ordering::SeqCst);
    BURST_TARGET.store(count, Ordering::SeqCst);
    *BURST_FIRST.lock() = None;
    *BURST_LAST.lock() = None;
}

/// Whether `count` burst tasks have run.
pub fn burst_done(count: usize) -> bool {
    BURST_COUNT.load(Ordering::Relaxed) >= count
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
    let done = || burst_done(count);
    if !peer.wait_until(&done, burst_task, Duration::from_secs(60)) {
        return None;
    }
    drop(handles);
    let (_, last) = burst_times()?;
    Some(last.saturating_duration_since(deadline))
}
