//! Hand-off across processes: a holder releases, and a waiter in another process (this same
//! binary, run again with `child-waiter` and arguments of the caller's choosing) takes the lock.
//! Both stamp with the system clock, which the processes of one host share.

use crate::child::{self, ChildProcess};
use redis_lease::Lock;
use std::io::{BufRead, Write};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The system clock in microseconds.
pub fn wall_micros() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|since| since.as_micros())
        .unwrap_or(0)
}

/// The waiter's side: says "ready"; then on each "go", waits for `lock`, stamps the acquisition,
/// releases, and reports the stamp.
pub fn serve_waiter(lock: &Lock) {
    child::ready();
    let mut out = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        if line.is_err() {
            break;
        }
        let guard = lock.lock().expect("acquired");
        let acquired = wall_micros();
        guard.unlock().expect("released");
        writeln!(out, "{acquired}").expect("parent alive");
        out.flush().expect("parent alive");
    }
}

/// The holder's side: starts this binary with `child-waiter` and `args` (whose waiter must take
/// the lock that `lock` is), then `rounds` times takes `lock`, tells the waiter to wait, holds
/// for `hold`, releases, and reads when the waiter took it. The samples in ms, in round order.
pub fn across_processes(args: &[&str], lock: &Lock, rounds: usize, hold: Duration) -> Vec<f64> {
    let mut waiter = ChildProcess::start("child-waiter", args);
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let guard = lock.lock().expect("acquired");
        waiter.say("go");
        thread::sleep(hold);
        let released = wall_micros();
        guard.unlock().expect("released");
        let acquired: u128 = waiter.line().trim().parse().expect("a timestamp");
        samples.push(acquired.saturating_sub(released) as f64 / 1e3);
    }
    waiter.finish();
    samples
}
