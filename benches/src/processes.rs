//! Two processes contending for one name, each with threads sharing one client: the parent runs
//! its threads, and this same binary, run again with `child-contender`, runs the other side's.

use redis_lease::Client;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
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
    let mut out = std::io::stdout();
    writeln!(out, "ready").expect("parent alive");
    out.flush().expect("parent alive");
    let mut lines = std::io::stdin().lock().lines();
    assert_eq!(lines.next().and_then(Result::ok).as_deref(), Some("go"));
    stop.store(false, Ordering::Relaxed);
    let flag = stop.clone();
    let sections = contend(url, threads, &stop, move || {
        let _ = lines.next();
        flag.store(true, Ordering::Relaxed);
    });
    writeln!(out, "{sections}").expect("parent alive");
}

/// Runs `threads` threads here and `threads` in a child process (this binary with
/// `child-contender`), all on one name, for `run`. Returns (this process's sections, the child's).
pub fn two_processes(url: &str, threads: usize, run: Duration) -> (u64, u64) {
    let mut child = Command::new(std::env::current_exe().expect("this binary"))
        .args(["child-contender", url, &threads.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the other process");
    let mut to_child = child.stdin.take().expect("piped");
    let mut from_child = BufReader::new(child.stdout.take().expect("piped")).lines();
    let mut next_line = || {
        from_child
            .next()
            .expect("a line from the child")
            .expect("readable")
    };
    assert_eq!(next_line(), "ready", "the child started");
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let here = contend(url, threads, &stop, move || {
        writeln!(to_child, "go").expect("child alive");
        thread::sleep(run);
        flag.store(true, Ordering::Relaxed);
        writeln!(to_child, "stop").expect("child alive");
    });
    let there = next_line().parse().expect("a count");
    child.wait().expect("the child exits");
    (here, there)
}
