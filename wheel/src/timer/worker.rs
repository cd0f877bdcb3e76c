//! The worker thread: sleep until the next due tick, take what is due out of the shards, run it
//! with every lock released, put recurring tasks back, and sleep again.
//!
//! It takes due tasks one tick at a time, the earliest due tick of all shards first, so tasks
//! run in deadline order across shards. It holds one shard's lock at a time, for at most
//! [`BATCH`] tasks, so a burst of expiries never keeps a scheduler waiting for long, and the
//! schedulers of the other shards not at all.
//!
//! It sleeps on a condition variable with the deadline of the next due tick, or with no deadline
//! at all when nothing is stored (or when the clock is manual), so an idle timer never wakes. A
//! scheduler wakes it only when it stores a tick earlier than the one it sleeps until (see
//! `sleep.rs`).

use super::shard::Stored;
use super::shared::{Shared, WorkerCounters};
use crate::clock::Clock;
use crate::task::Ran;
use crate::tick::NEVER;
use crate::wheel::WheelFull;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// Most tasks taken out of a shard under one lock hold, so that schedulers are never kept
/// waiting behind a huge burst.
pub(crate) const BATCH: usize = 1024;

/// Tasks taken out to run, with the index of their shard.
type Batch = Vec<(usize, Stored)>;
/// Recurring tasks to store again: shard index, task, next deadline.
type Again = Vec<(usize, Stored, Instant)>;

#[derive(Default)]
struct Outcome {
    ran: u64,
    panicked: u64,
}

pub(crate) fn run(shared: Arc<Shared>) {
    let _ = shared.worker.set(crate::sync::current().id());
    log::debug!(
        "timer worker started, tick {:?}, {} shards",
        shared.ticks.tick(),
        shared.shards.len()
    );
    let mut batch: Batch = Vec::with_capacity(BATCH);
    let mut again: Again = Vec::new();
    let mut garbage: Vec<Stored> = Vec::new();
    loop {
        put_back(&shared, &mut again, &mut garbage);
        garbage.clear();
        if shared.is_stopped() {
            break;
        }
        let now = shared.clock.now();
        let now_tick = shared.ticks.elapsed_tick(now);
        if let Some(due) = earliest_due(&shared).filter(|&due| due <= now_tick) {
            take_due(&shared, due, &mut batch);
            if batch.is_empty() {
                // Outer buckets moved inward: look again.
                continue;
            }
            if let Some(boundary) = shared.ticks.instant_of(due) {
                let lateness = now.saturating_duration_since(boundary).as_nanos();
                let lateness = u64::try_from(lateness).unwrap_or(u64::MAX);
                let max = &shared.counters.max_lateness_nanos;
                if lateness > max.load(Ordering::Relaxed) {
                    max.store(lateness, Ordering::Relaxed);
                }
            }
            let outcome = run_batch(&shared, &mut batch, &mut again);
            WorkerCounters::add(&shared.counters.fired, outcome.ran);
            WorkerCounters::add(&shared.counters.panicked, outcome.panicked);
            continue;
        }
        sleep(&shared, now, now_tick);
    }
    {
        let mut state = shared.sleep.state.lock();
        state.exited = true;
        shared.sleep.progress.notify_all();
    }
    log::debug!("timer worker stopped");
}

/// The earliest tick at which some shard may have work, if any: the least of the shards' due
/// hints, read without their locks.
fn earliest_due(shared: &Shared) -> Option<u64> {
    shared
        .shards
        .iter()
        .map(|shard| shard.due_hint())
        .min()
        .filter(|&due| due != NEVER)
}

/// Takes the tasks due at `due` (or earlier) out of the shards whose hint says they may have
/// some, at most [`BATCH`], one shard's lock at a time, and sets those shards' hints anew.
fn take_due(shared: &Shared, due: u64, batch: &mut Batch) {
    for (index, shard) in shared.shards.iter().enumerate() {
        let room = BATCH - batch.len();
        if room == 0 {
            return;
        }
        if shard.due_hint() > due {
            continue;
        }
        let before = batch.len();
        {
            let mut state = shard.state.lock();
            batch.extend(
                state
                    .wheel
                    .advance(due)
                    .take(room)
                    .map(|(_, job)| (index, job)),
            );
            let next = state.wheel.next_due().unwrap_or(NEVER);
            shard.due_hint.store(next, Ordering::SeqCst);
        }
        // A recurring task keeps its place while it runs: it gives it back when it ends.
        if shared.limit.is_some() {
            let leaving = batch[before..]
                .iter()
                .filter(|(_, job)| !job.recurs())
                .count();
            shared.release(leaving);
        }
    }
}

/// Sleeps until the next due tick, or until a scheduler, a stop or a manual clock wakes it.
/// Returns at once if a manual clock moved or a task fell due while it looked.
fn sleep(shared: &Shared, now: Instant, now_tick: u64) {
    let sleep = &shared.sleep;
    let mut state = sleep.state.lock();
    if state.kick {
        state.kick = false;
        return;
    }
    if state.stopped {
        return;
    }
    sleep.planning();
    let next = earliest_due(shared).unwrap_or(NEVER);
    if next <= now_tick {
        sleep.awake();
        return;
    }
    state.caught_up_to = now;
    state.passes += 1;
    sleep.progress.notify_all();
    sleep.sleeping_until(next);
    let deadline = match shared.clock {
        Clock::Manual(_) => None,
        Clock::Monotonic => shared.ticks.instant_of(next),
    };
    log::trace!("timer worker sleeping until tick {next}");
    match deadline {
        Some(deadline) => {
            sleep.wake.wait_until(&mut state, deadline);
        }
        None => sleep.wake.wait(&mut state),
    }
    sleep.awake();
    drop(state);
    WorkerCounters::add(&shared.counters.wakeups, 1);
}

/// Stores recurring tasks for their next run in their own shard, unless they were cancelled or
/// the shard stopped.
fn put_back(shared: &Shared, again: &mut Again, garbage: &mut Vec<Stored>) {
    for (index, job, due) in again.drain(..) {
        let shard = shared.shards[index];
        let mut state = shard.state.lock();
        if state.stopped || job.is_cancelled() {
            drop(state);
            shared.release(1);
            garbage.push(job);
            continue;
        }
        let tick = shared.ticks.deadline_tick(due);
        match state.wheel.insert(tick, job) {
            Ok(key) => {
                if let Some(job) = state.wheel.get(key) {
                    job.stored_as(key);
                }
                shard.stored_due_at(tick);
            }
            Err(WheelFull(job)) => {
                drop(state);
                shared.release(1);
                log::warn!("a recurring task was dropped: the timer's wheel is full");
                garbage.push(job);
            }
        }
    }
}

/// Runs the batch; recurring tasks to run again go to `again`.
fn run_batch(shared: &Shared, batch: &mut Batch, again: &mut Again) -> Outcome {
    let mut outcome = Outcome::default();
    for (index, job) in batch.drain(..) {
        let recurs = shared.limit.is_some() && job.recurs();
        let ran = panic::catch_unwind(AssertUnwindSafe(|| job.run(&shared.clock)));
        // A recurring task that will not run again gives back the place it kept while it ran
        // (one to run again keeps it, and `put_back` gives it back if it cannot store it). Only
        // a timer with a bound keeps places.
        if recurs && !matches!(ran, Ok(Ran::Again(..))) {
            shared.release(1);
        }
        match ran {
            Ok(Ran::Done) => outcome.ran += 1,
            Ok(Ran::Again(job, due)) => {
                outcome.ran += 1;
                again.push((index, job, due));
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
