//! The worker thread: sleep until the next due tick, take what is due out of the wheel, run it
//! with the lock released, put recurring tasks back, and sleep again.
//!
//! It sleeps on a condition variable with the deadline of the wheel's next due tick, or with no
//! deadline at all when nothing is stored (or when the clock is manual), so an idle timer never
//! wakes. A scheduler wakes it only when it stores a tick earlier than the one it sleeps until.

use super::shared::{Shared, State};
use crate::clock::Clock;
use crate::task::{Job, Ran};
use crate::tick::NEVER;
use crate::wheel::WheelFull;
use parking_lot::MutexGuard;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

/// Most tasks taken out of the wheel under one lock hold, so that schedulers are never kept
/// waiting behind a huge burst.
pub(crate) const BATCH: usize = 1024;

type Batch = Vec<(u64, Box<dyn Job>)>;
type Again = Vec<(Box<dyn Job>, Instant)>;

#[derive(Default)]
struct Outcome {
    ran: u64,
    panicked: u64,
}

pub(crate) fn run(shared: Arc<Shared>) {
    let _ = shared.worker.set(std::thread::current().id());
    log::debug!("timer worker started, tick {:?}", shared.ticks.tick());
    let mut batch: Batch = Vec::with_capacity(BATCH);
    let mut again: Again = Vec::new();
    let mut garbage: Vec<Box<dyn Job>> = Vec::new();
    let mut state = shared.state.lock();
    loop {
        put_back(&shared, &mut state, &mut again, &mut garbage);
        if state.stopped {
            break;
        }
        let now = shared.clock.now();
        let now_tick = shared.ticks.elapsed_tick(now);
        batch.extend(state.wheel.advance(now_tick).take(BATCH));
        if let Some(&(first_due, _)) = batch.first() {
            if let Some(boundary) = shared.ticks.instant_of(first_due) {
                let lateness = now.saturating_duration_since(boundary);
                state.metrics.max_lateness = state.metrics.max_lateness.max(lateness);
            }
            let outcome = MutexGuard::unlocked(&mut state, || {
                garbage.clear();
                run_batch(&shared.clock, &mut batch, &mut again)
            });
            state.metrics.fired += outcome.ran;
            state.metrics.panicked += outcome.panicked;
            continue;
        }
        if !garbage.is_empty() {
            MutexGuard::unlocked(&mut state, || garbage.clear());
            continue;
        }
        if state.kick {
            state.kick = false;
            continue;
        }
        state.caught_up_to = now;
        state.passes += 1;
        shared.progress.notify_all();
        sleep(&shared, &mut state);
    }
    let unrun = shared.stop_locked(&mut state);
    state.exited = true;
    shared.progress.notify_all();
    drop(state);
    log::debug!("timer worker stopped, {} tasks dropped unrun", unrun.len());
    drop(unrun);
    drop(garbage);
}

/// Sleeps until the next due tick, or until a scheduler or a manual clock wakes it.
fn sleep(shared: &Shared, state: &mut MutexGuard<'_, State>) {
    let next = state.next_wake();
    state.wake_at = next;
    let deadline = match shared.clock {
        Clock::Manual(_) => None,
        Clock::Monotonic if next == NEVER => None,
        Clock::Monotonic => shared.ticks.instant_of(next),
    };
    log::trace!("timer worker sleeping until tick {next}");
    match deadline {
        Some(deadline) => {
            shared.wake.wait_until(state, deadline);
        }
        None => shared.wake.wait(state),
    }
    state.wake_at = 0;
    state.metrics.wakeups += 1;
}

/// Stores recurring tasks for their next run, unless they were cancelled or the timer stopped.
fn put_back(
    shared: &Shared,
    state: &mut State,
    again: &mut Again,
    garbage: &mut Vec<Box<dyn Job>>,
) {
    for (job, due) in again.drain(..) {
        if state.stopped || job.is_cancelled() {
            garbage.push(job);
            continue;
        }
        let tick = shared.ticks.deadline_tick(due);
        match shared.store(state, tick, job) {
            Ok(key) => {
                if let Some(job) = state.wheel.get(key) {
                    job.stored_as(key);
                }
            }
            Err(WheelFull(job)) => {
                log::warn!("a recurring task was dropped: the timer's wheel is full");
                garbage.push(job);
            }
        }
    }
}

fn run_batch(clock: &Clock, batch: &mut Batch, again: &mut Again) -> Outcome {
    let mut outcome = Outcome::default();
    for (_, job) in batch.drain(..) {
        match panic::catch_unwind(AssertUnwindSafe(|| job.run(clock))) {
            Ok(Ran::Done) => outcome.ran += 1,
            Ok(Ran::Again(job, due)) => {
                outcome.ran += 1;
                again.push((job, due));
            }
            Ok(Ran::Skipped) => {}
            Err(payload) => {
                outcome.ran += 1;
                outcome.panicked += 1;
                let message = payload
                    .downcast_ref::<&str>()
                    .copied()
                    .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                    .unwrap_or("a non-string payload");
                log::warn!("a timer task panicked: {message}");
            }
        }
    }
    outcome
}
