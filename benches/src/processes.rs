//! Two processes contending for one name, each with threads sharing one client: the parent runs
//! its threads, and this same binary, run again with `child-contender`, runs the other side's.

use crate::child::{self, ChildProcess};
use redis_lease::Client;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// The name both processes contend for.
const NAME: &str = "contended:processes";

/// Runs `threads` threads of one client on [`NAME`] until `stop` is set; returns the sections.
fn contend(url: &str, threads: usize, stop: &Arc<AtomicBool>, go: impl FnOnce()) -> u64 {
    let client = Client::open(url).expect("valid settings");
    let lock = client.lock(NAME).expect("valid name");
    let sections = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (lock, sections, stop) = (lock.clone(), sections.clone(), stop.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let guard = lock.lock().expect("acquired");
                    sections.fetch_add(1, Ordering::Relaxed);
                    guard.unlock().expect("released");
                }
            })
        })
        .collect();
    go();
    for worker in workers {
        worker.join().expect("no panic");
    }
    sections.load(Ordering::Relaxed)
}

/// The child's side: says "ready", contends from "go" to "stop" (lines on stdin), then prints the
/// number of sections its threads ran.
pub fn serve_contender(url: &str, threads: usize) {
    let stop = Arc::new(AtomicBool::new(true));
    child::ready();
    let mut lines = std::io::stdin().lock().lines();
    assert_eq!(lines.next().and_then(Result::ok).as_deref(), Some("go"));
    stop.store(false, Ordering::Relaxed);
    let flag = stop.clone();
    let sections = contend(url, threads, &stop, move || {
        let _ = lines.next();
        flag.store(true, Ordering::Relaxed);
    });
    writeln!(std::io::stdout(), "{sections}").expect("parent alive");
}

/// Runs `threads` threads here and `threads` in a child process (this binary with
/// `child-contender`), all on one name, for `run`. Returns (this process's sections, the child's).
pub fn two_processes(url: &str, threads: usize, run: Duration) -> (u64, u64) {
    let mut other = ChildProcess::start("child-contender", &[url, &threads.to_string()]);
    let stop = Arc::new(AtomicBool::new(false));
    let here = contend(url, threads, &stop, || {
        other.say("go");
        thread::sleep(run);
        stop.store(true, Ordering::Relaxed);
        other.say("stop");
    });
    let there = other.line().parse().expect("a count");
    other.finish();
    (here, there)
}
