//! The timer at work on real time: thousands of timeouts scheduled, a third of them cancelled, a
//! recurring task, then an idle spell. Prints lateness from the tasks' own clocks and the worker's
//! wakeups from its counters and from `/proc`.
//!
//! Run: `cargo run --release -p hashwheel --example timer_demo` (or `scripts/demo`).
#![allow(clippy::print_stdout)]

use hashwheel::Timer;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const TIMEOUTS: usize = 10_000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let timer = Timer::builder()
        .tick(Duration::from_millis(1))
        .thread_name("wheel-demo")
        .build()?;
    let start = Instant::now();
    let at = move |instant: Instant| format!("{:>7.1} ms", (instant - start).as_secs_f64() * 1e3);
    println!(
        "{}  timer started: 1 ms tick, 512 buckets per ring",
        at(Instant::now())
    );

    // A recurring heartbeat every 250 ms, fixed rate.
    let beats = Arc::new(AtomicU64::new(0));
    let heartbeat = {
        let beats = beats.clone();
        timer.schedule_fixed_rate(
            Duration::from_millis(250),
            Duration::from_millis(250),
            move || {
                let n = beats.fetch_add(1, Ordering::Relaxed) + 1;
                println!("{}  heartbeat {n}", at(Instant::now()));
            },
        )?
    };

    // Ten thousand timeouts, 10 ms to 1 s away; each records how late it ran.
    let lateness: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let early = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::with_capacity(TIMEOUTS);
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let scheduling = Instant::now();
    for _ in 0..TIMEOUTS {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let delay = Duration::from_micros(10_000 + seed % 990_000);
        let deadline = Instant::now() + delay;
        let (lateness, early) = (lateness.clone(), early.clone());
        handles.push(timer.schedule(delay, move || {
            let now = Instant::now();
            if now < deadline {
                early.fetch_add(1, Ordering::Relaxed);
            }
            lateness
                .lock()
                .map(|mut all| all.push(now.saturating_duration_since(deadline)))
                .ok();
        })?);
    }
    let took = scheduling.elapsed();
    println!(
        "{}  scheduled {TIMEOUTS} timeouts (10 ms .. 1 s) in {:.2} ms ({:.0} ns each, closure allocation included)",
        at(Instant::now()),
        took.as_secs_f64() * 1e3,
        took.as_nanos() as f64 / TIMEOUTS as f64
    );
    let cancelled = handles.iter().step_by(3).filter(|t| t.cancel()).count();
    println!(
        "{}  cancelled {cancelled} of them; {} pending",
        at(Instant::now()),
        timer.pending()
    );

    while handles.iter().any(|t| t.is_pending()) {
        thread::sleep(Duration::from_millis(100));
    }
    heartbeat.cancel();
    let mut late = lateness.lock().map(|all| all.clone()).unwrap_or_default();
    late.sort();
    let pick = |q: f64| late[((late.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    println!(
        "{}  all fired: {} ran, {} early; lateness p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        at(Instant::now()),
        late.len(),
        early.load(Ordering::Relaxed),
        pick(0.5),
        pick(0.99),
        pick(1.0)
    );

    // Idle: nothing due at all, then one timeout an hour away. The worker may still wake once
    // for the cancelled heartbeat's next tick, so let that pass first.
    thread::sleep(Duration::from_millis(300));
    let idle_for = |what: &str| {
        let wakeups = timer.metrics().wakeups;
        let switches = switches_of("wheel-demo");
        thread::sleep(Duration::from_secs(1));
        let switched = switches_of("wheel-demo")
            .zip(switches)
            .map_or("unknown".to_owned(), |(after, before)| {
                (after - before).to_string()
            });
        println!(
            "{}  1 s {what}: {} worker wakeups, {switched} context switches",
            at(Instant::now()),
            timer.metrics().wakeups - wakeups,
        );
    };
    idle_for("with nothing scheduled");
    let far = timer.schedule(Duration::from_secs(3600), || {})?;
    thread::sleep(Duration::from_millis(50));
    idle_for("with one timeout an hour away");
    far.cancel();

    let metrics = timer.metrics();
    println!(
        "{}  counters: scheduled {}, fired {}, cancelled {}, panicked {}, wakeups {}, max lateness {:.3} ms",
        at(Instant::now()),
        metrics.scheduled,
        metrics.fired,
        metrics.cancelled,
        metrics.panicked,
        metrics.wakeups,
        metrics.max_lateness.as_secs_f64() * 1e3
    );
    let unrun = timer.stop();
    println!(
        "{}  stopped; {} tasks handed back",
        at(Instant::now()),
        unrun.len()
    );
    Ok(())
}

/// Voluntary plus involuntary context switches of this process's thread named `name`.
fn switches_of(name: &str) -> Option<u64> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).ok()?;
        if comm.trim_end() != name {
            continue;
        }
        let status = std::fs::read_to_string(task.path().join("status")).ok()?;
        let total = status
            .lines()
            .filter(|line| line.contains("ctxt_switches"))
            .filter_map(|line| line.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum();
        return Some(total);
    }
    None
}
