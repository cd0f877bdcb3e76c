//! The worker thread's scheduling priority, when a builder's `worker_nice` asks for one.
//!
//! On Linux, `setpriority(PRIO_PROCESS, tid)` sets the nice value of one thread. A worker whose
//! nice value is below its callers' gets the CPU first when they compete for it, so a burst of
//! expiries starts and ends on time while other threads of the process keep every core busy.
//! Lowering a nice value needs `CAP_SYS_NICE` (or an `RLIMIT_NICE` that allows it); without it,
//! the worker logs a warning and keeps the value it inherited.

/// Gives the calling thread (the worker) the nice value `nice`, from -20 (first) to 19 (last).
#[cfg(target_os = "linux")]
pub(crate) fn set_worker_nice(nice: i32) {
    let worker = rustix::thread::gettid();
    if let Err(error) = rustix::process::setpriority_process(Some(worker), nice) {
        log::warn!("the timer worker keeps its nice value: setting {nice} failed: {error}");
    }
}

/// Only Linux sets one thread's nice value: elsewhere the setting is ignored, with a warning.
#[cfg(not(target_os = "linux"))]
pub(crate) fn set_worker_nice(nice: i32) {
    log::warn!("the timer worker keeps its nice value: setting {nice} is supported on Linux only");
}
