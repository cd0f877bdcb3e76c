//! Bounded waits: a condition polled until it holds or a deadline passes, never an open-ended sleep.

use std::thread;
use std::time::{Duration, Instant};

/// How often a condition is polled.
const POLL: Duration = Duration::from_millis(50);

/// Polls `done` every millisecond until it holds; past `within`, panics saying the test timed
/// out waiting until `what`. For a test's own conditions (work on another thread to show).
pub fn wait_until(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        thread::sleep(Duration::from_millis(1));
    }
}

/// Polls `probe` until it returns `Ok`, and returns that value. Past `timeout`, panics with
/// `what`, the last `Err` the probe returned and what `explain` returns then (such as the end of
/// the servers' logs), so that a failing test says what it saw.
pub(crate) fn wait_for<T>(
    what: &str,
    timeout: Duration,
    mut probe: impl FnMut() -> Result<T, String>,
    explain: impl FnOnce() -> String,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        match probe() {
            Ok(value) => return value,
            Err(last) if Instant::now() >= deadline => {
                panic!(
                    "{what}: not within {timeout:?}; last seen: {last}{}",
                    explain()
                )
            }
            Err(_) => thread::sleep(POLL),
        }
    }
}
