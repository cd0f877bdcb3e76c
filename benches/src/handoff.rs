//! Hand-off across processes: a holder releases, and a waiter in another process (this same
//! binary, run again with `child-waiter` and arguments of the caller's choosing) takes the lock.
//! Both stamp with the system clock, which the processes of one host share.

use redis_lease::Lock;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
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
    let mut out = std::io::stdout();
    writeln!(out, "ready").expect("parent alive");
    out.flush().expect("parent alive");
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
    let mut child = Command::new(std::env::current_exe().expect("this binary"))
        .arg("child-waiter")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the waiter process");
    let mut to_child = child.stdin.take().expect("piped");
    let mut from_child = BufReader::new(child.stdout.take().expect("piped")).lines();
    let mut next_line = || {
        from_child
            .next()
            .expect("a line from the waiter")
            .expect("readable")
    };
    assert_eq!(next_line(), "ready", "the waiter connected");
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let guard = lock.lock().expect("acquired");
        writeln!(to_child, "go").expect("child alive");
        to_child.flush().expect("child alive");
        thread::sleep(hold);
        let released = wall_micros();
        guard.unlock().expect("released");
        let acquired: u128 = next_line().trim().parse().expect("a timestamp");
        samples.push(acquired.saturating_sub(released) as f64 / 1e3);
    }
    drop(to_child);
    let _ = child.wait();
    samples
}
