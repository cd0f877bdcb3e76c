//! The CPU time this process has used, every thread's (the clients' watchdogs and subscribers
//! too), for figures given per operation.

/// Seconds of CPU this process has used so far.
pub fn process_seconds() -> f64 {
    let time = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    time.tv_sec as f64 + time.tv_nsec as f64 / 1e9
}
