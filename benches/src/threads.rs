//! Reads a thread's context switches and CPU time from `/proc/self/task`.

use std::fs;
use std::time::Duration;

/// The thread id of this process's thread with the given name (`comm`), if there is one.
pub fn named_thread(name: &str) -> Option<u64> {
    let tasks = fs::read_dir("/proc/self/task").ok()?;
    tasks.flatten().find_map(|task| {
        let comm = fs::read_to_string(task.path().join("comm")).ok()?;
        let tid = task.file_name().to_str()?.parse().ok()?;
        (comm.trim_end() == name).then_some(tid)
    })
}

/// Counters of one thread at one moment.
#[derive(Debug, Clone, Copy)]
pub struct ThreadSample {
    switches: u64,
    cpu_nanos: u64,
}

/// Rates between two samples.
#[derive(Debug, Clone, Copy)]
pub struct ThreadRates {
    pub switches_per_second: f64,
    pub cpu_percent: f64,
}

impl ThreadSample {
    /// Voluntary plus involuntary context switches, and time on CPU (from `schedstat`).
    pub fn take(tid: u64) -> Self {
        let base = format!("/proc/self/task/{tid}");
        let status = fs::read_to_string(format!("{base}/status")).unwrap_or_default();
        let switches = status
            .lines()
            .filter(|line| line.contains("ctxt_switches"))
            .filter_map(|line| line.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum();
        let schedstat = fs::read_to_string(format!("{base}/schedstat")).unwrap_or_default();
        let cpu_nanos = schedstat
            .split_whitespace()
            .next()
            .and_then(|field| field.parse().ok())
            .unwrap_or(0);
        ThreadSample {
            switches,
            cpu_nanos,
        }
    }

    /// The rates from `earlier` to this sample, over `elapsed`.
    pub fn since(&self, earlier: &ThreadSample, elapsed: Duration) -> ThreadRates {
        let seconds = elapsed.as_secs_f64();
        ThreadRates {
            switches_per_second: (self.switches - earlier.switches) as f64 / seconds,
            cpu_percent: (self.cpu_nanos - earlier.cpu_nanos) as f64 / 1e9 / seconds * 100.0,
        }
    }
}
