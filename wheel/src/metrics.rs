//! Counters a timer keeps about its own work.

use std::time::Duration;

/// A snapshot of a timer's counters, from [`Timer::metrics`](crate::Timer::metrics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Metrics {
    /// Tasks accepted by a `schedule*` call (a recurring task counts once).
    pub scheduled: u64,
    /// Task runs started by the worker (each run of a recurring task counts).
    pub fired: u64,
    /// Tasks cancelled through their handle before they ran.
    pub cancelled: u64,
    /// `schedule*` calls refused because the timer held `max_pending` tasks.
    pub rejected: u64,
    /// Task runs that panicked.
    pub panicked: u64,
    /// The largest delay between a tick boundary that had tasks due and the worker starting to run
    /// them. Tasks queued behind others in one burst start later by the time those others take.
    pub max_lateness: Duration,
    /// How many times the worker woke up (by its deadline, or to see an earlier one).
    pub wakeups: u64,
    /// Tasks waiting in the wheel now.
    pub pending: usize,
}
