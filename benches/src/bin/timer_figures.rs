//! Prints the timer figures that are not criterion timings: expiry bursts, lateness, wakeups and
//! worker CPU, for `hashwheel` and its peers in one run. Memory per pending timeout is measured
//! by `timer_memory`, so that its counting allocator stays out of these timings.
//!
//! Run: `cargo run --release -p benches --bin timer_figures [quick] [SECTION...]`, sections being
//! `loop` (one thread's schedule and cancel in a tight loop), `cold` (the same with a million
//! handles kept and cancelled long after, their entries out of the caches), `burst`, `deadline`,
//! `lateness`, `idle`, `threads` (many threads scheduling into one timer; `wheel-threads` runs its
//! `hashwheel` rows alone), `busy` (the deadline and lateness figures while two threads schedule
//! and cancel at full speed) and `one-shard` (threads sharing one shard's lock); all by default.
//! Each figure is the median of three runs unless marked otherwise. `quick` shrinks every
//! workload, for a smoke test.
//!
//! A full run also draws charts into `docs/plots/`: `timer_threads_schedule.svg` and
//! `timer_threads_cancel.svg` (the `threads` section) and `timer_lateness.svg` (`lateness`).
#![allow(clippy::print_stdout)]

use benches::callers::{
    bursts, keep_busy, BurstFigures, SharedHeap, SharedHierarchical, SharedPeer, SharedWheel,
};
use benches::figures::{median, quantile, Request};
use benches::peers::{DelayQueue, Heap, Hierarchical, Peer, TimerCrate, Wheel};
use benches::plot;
use benches::threads::{named_thread, ThreadSample};
use benches::workload::{
    burst_done, burst_reset, burst_task, burst_times, delays, expiry_burst, noop,
};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// One part of the report.
type Section = fn(&Scale);

struct Scale {
    pending: usize,
    burst: usize,
    one_deadline: usize,
    lateness: usize,
    idle: Duration,
    far_cpu: Duration,
    /// Operations per burst of the `threads` section.
    operations: usize,
    /// Bursts of each kind per thread count; the best is quoted.
    repeats: usize,
    /// Whether to draw charts into `docs/plots/` (full runs only).
    plots: bool,
    /// How long each run of the `one-shard` section lasts.
    contended: Duration,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let request = Request::from_args(&args);
    let quick = request.quick;
    let wanted = |section: &str| request.wants(section);
    let scale = if quick {
        Scale {
            pending: 20_000,
            burst: 20_000,
            one_deadline: 20_000,
            lateness: 500,
            idle: Duration::from_millis(300),
            far_cpu: Duration::from_millis(500),
            operations: 40_000,
            repeats: 2,
            plots: false,
            contended: Duration::from_millis(200),
        }
    } else {
        Scale {
            pending: 1_000_000,
            burst: 1_000_000,
            one_deadline: 200_000,
            lateness: 10_000,
            idle: Duration::from_secs(3),
            far_cpu: Duration::from_secs(10),
            operations: 1_000_000,
            repeats: 5,
            plots: true,
            contended: Duration::from_secs(3),
        }
    };
    println!("# timer figures ({})", if quick { "quick" } else { "full" });
    println!();
    if wanted("wheel-threads") && !wanted("threads") {
        wheel_threads(&scale);
    }
    let all: [(&str, Section); 9] = [
        ("loop", tight_loop),
        ("cold", cold_handles),
        ("burst", expiry_bursts),
        ("deadline", one_deadline),
        ("lateness", lateness),
        ("idle", idle),
        ("threads", threads),
        ("busy", busy),
        ("one-shard", one_shard),
    ];
    for (name, section) in all {
        if wanted(name) {
            section(&scale);
        }
    }
}

/// `hashwheel`'s schedule, cancel and the pair in a tight loop with 1M pending: best of 40 rounds of
/// 100,000 operations each, before the prefilled timeouts start falling due.
fn tight_loop(scale: &Scale) {
    let rounds = 40;
    let per_round = (scale.pending / 10).max(1_000);
    println!(
        "## wheel in a tight loop ({} pending, best of {rounds} rounds of {per_round})",
        scale.pending
    );
    let mut timer = Wheel::start();
    let prefilled: Vec<_> = delays(scale.pending, 7)
        .into_iter()
        .map(|delay| timer.schedule(delay, noop))
        .collect();
    let delays = delays(1 << 16, 11);
    let mut handles = Vec::with_capacity(per_round);
    let per_op = |start: Instant| start.elapsed().as_nanos() as f64 / per_round as f64;
    let (mut schedule, mut cancel, mut pair) = (f64::MAX, f64::MAX, f64::MAX);
    for _ in 0..rounds {
        let start = Instant::now();
        for i in 0..per_round {
            handles.push(timer.schedule(delays[i % delays.len()], noop));
        }
        schedule = schedule.min(per_op(start));
        let start = Instant::now();
        for handle in handles.drain(..) {
            timer.cancel(handle);
        }
        cancel = cancel.min(per_op(start));
        let start = Instant::now();
        for i in 0..per_round {
            let handle = timer.schedule(delays[i % delays.len()], noop);
            timer.cancel(handle);
        }
        pair = pair.min(per_op(start));
    }
    println!("schedule {schedule:.1} ns, cancel {cancel:.1} ns, schedule + cancel {pair:.1} ns");
    drop(prefilled);
    drop(timer);
    bare_wheel(scale, rounds, per_round);
    floor_costs();
    println!();
}

/// `hashwheel`'s schedule and cancel as a server's request timeouts meet them: 1M pending (delays
/// 1-60 s), a 100 ms tick and 512 buckets; one thread schedules 1M more (delays 1-60 s), keeping
/// each handle in a `Vec`, then cancels all of them in the order they were scheduled, long after
/// their entries left the caches. Best of 5 rounds, wall time / 1M. `benches/java/netty_cold.sh`
/// runs the same rounds on Netty's `HashedWheelTimer`.
fn cold_handles(scale: &Scale) {
    let rounds = 5;
    let count = scale.pending;
    println!(
        "## wheel with cold handles ({count} pending, 100 ms tick, 512 buckets, best of {rounds} \
         rounds of {count} schedules, then as many cancels in schedule order)"
    );
    let timer = hashwheel::Timer::builder()
        .tick(Duration::from_millis(100))
        .ticks_per_wheel(512)
        .build()
        .expect("valid settings");
    let prefilled: Vec<_> = delays(count, 7)
        .into_iter()
        .map(|delay| timer.schedule(delay, noop).expect("no limit set"))
        .collect();
    // Milliseconds, as the Netty program keeps them: half a megabyte, in the caches.
    let delays: Vec<u64> = delays(1 << 16, 11)
        .into_iter()
        .map(|delay| delay.as_millis() as u64)
        .collect();
    let mask = delays.len() - 1;
    let mut handles = Vec::with_capacity(count);
    let per_op = |start: Instant| start.elapsed().as_nanos() as f64 / count as f64;
    let (mut schedule, mut cancel) = (f64::MAX, f64::MAX);
    for _ in 0..rounds {
        let start = Instant::now();
        for i in 0..count {
            let delay = Duration::from_millis(delays[i & mask]);
            handles.push(timer.schedule(delay, noop).expect("no limit set"));
        }
        schedule = schedule.min(per_op(start));
        let start = Instant::now();
        for handle in handles.drain(..) {
            handle.cancel();
        }
        cancel = cancel.min(per_op(start));
    }
    println!("schedule {schedule:.1} ns, cancel {cancel:.1} ns");
    drop(prefilled);
    println!();
}

/// The same rounds on a bare `hashwheel::Wheel` of boxed closures (no lock, no clock, no
/// handle), with the same 1M pending at a 1 ms tick: what the wheel's own work costs.
fn bare_wheel(scale: &Scale, rounds: usize, per_round: usize) {
    type Task = Box<dyn FnOnce() + Send>;
    let mut wheel: hashwheel::Wheel<Task> = hashwheel::Wheel::new(512).expect("valid");
    let tick = |delay: Duration| delay.as_millis() as u64;
    for delay in delays(scale.pending, 7) {
        let task: Task = Box::new(noop);
        if wheel.insert(tick(delay), task).is_err() {
            unreachable!("a wheel holds 4G entries");
        }
    }
    let delays = delays(1 << 16, 11);
    let mut keys = Vec::with_capacity(per_round);
    let per_op = |start: Instant| start.elapsed().as_nanos() as f64 / per_round as f64;
    let (mut insert, mut cancel) = (f64::MAX, f64::MAX);
    for _ in 0..rounds {
        let start = Instant::now();
        for i in 0..per_round {
            let task: Task = Box::new(noop);
            match wheel.insert(tick(delays[i % delays.len()]), task) {
                Ok(key) => keys.push(key),
                Err(_) => unreachable!("a wheel holds 4G entries"),
            }
        }
        insert = insert.min(per_op(start));
        let start = Instant::now();
        for key in keys.drain(..) {
            drop(std::hint::black_box(wheel.cancel(key)));
        }
        cancel = cancel.min(per_op(start));
    }
    println!("bare Wheel (no lock, clock or handle): insert {insert:.1} ns, cancel {cancel:.1} ns");
}

/// What every schedule pays before touching the wheel: reading the monotonic clock, reading the
/// time-stamp counter through `quanta`, an uncontended lock and unlock, and an `Arc` clone and
/// drop. Best of 10 rounds of 10^7 each.
fn floor_costs() {
    let rounds = 10;
    let count = 10_000_000u32;
    let best = |mut op: Box<dyn FnMut()>| {
        (0..rounds)
            .map(|_| {
                let start = Instant::now();
                for _ in 0..count {
                    op();
                }
                start.elapsed().as_nanos() as f64 / f64::from(count)
            })
            .fold(f64::MAX, f64::min)
    };
    let clock = best(Box::new(|| {
        std::hint::black_box(Instant::now());
    }));
    let counter = best(Box::new(|| {
        std::hint::black_box(quanta::Instant::now());
    }));
    let mutex = Mutex::new(0u64);
    let lock = best(Box::new(move || *std::hint::black_box(&mutex).lock() += 1));
    let shared = Arc::new(0u8);
    let arc = best(Box::new(move || drop(std::hint::black_box(shared.clone()))));
    println!(
        "floor: Instant::now {clock:.1} ns, quanta::Instant::now {counter:.1} ns, lock + unlock \
         {lock:.1} ns, Arc clone + drop {arc:.1} ns"
    );
}

/// Time per task when all fall due together: from the deadline to the last task's start.
fn expiry_bursts(scale: &Scale) {
    println!(
        "## expiry burst ({} no-op tasks on one deadline)",
        scale.burst
    );
    println!("time from the deadline to the start of the last task, per task; median of 3");
    println!("| timer | ns per task |");
    println!("|---|---|");
    burst_of::<Wheel>(scale);
    burst_of::<Hierarchical>(scale);
    burst_of::<DelayQueue>(scale);
    burst_of::<TimerCrate>(scale);
    burst_of::<Heap>(scale);
    println!();
}

fn burst_of<P: Peer>(scale: &Scale) {
    let runs: Vec<f64> = (0..3)
        .filter_map(|_| {
            let mut peer = P::start();
            let took = expiry_burst(&mut peer, scale.burst, Duration::from_millis(300))?;
            Some(took.as_nanos() as f64 / scale.burst as f64)
        })
        .collect();
    if runs.len() < 3 {
        println!("| {} | did not finish within a minute |", P::NAME);
    } else {
        println!("| {} | {:.1} |", P::NAME, median(runs));
    }
}

/// How long after one shared deadline the last of many no-op tasks has started (wheel only).
fn one_deadline(scale: &Scale) {
    println!(
        "## {} no-op tasks on one deadline (wheel, 1 ms tick)",
        scale.one_deadline
    );
    println!("time from the deadline to the start of the first and the last task; median of 3");
    let runs: Vec<(f64, f64)> = (0..3)
        .map(|_| starts_after_deadline(&mut Wheel::start(), scale.one_deadline))
        .collect();
    let (firsts, lasts): (Vec<f64>, Vec<f64>) = runs.into_iter().unzip();
    println!(
        "last task started {:.2} ms after the deadline (the first {:.2})",
        median(lasts),
        median(firsts)
    );
    println!();
}

/// Schedules `count` no-op tasks on one deadline 500 ms away and returns, in ms, how long after
/// the deadline the first and the last one started.
fn starts_after_deadline(timer: &mut Wheel, count: usize) -> (f64, f64) {
    let deadline = Instant::now() + Duration::from_millis(500);
    burst_reset(count);
    let left = |now: Instant| deadline.saturating_duration_since(now);
    let handles: Vec<_> = (0..count)
        .map(|_| timer.schedule(left(Instant::now()), burst_task))
        .collect();
    drop(handles);
    let done = burst_done;
    assert!(timer.wait_until(&done, burst_task, Duration::from_secs(30)));
    let (first, last) = burst_times().expect("every task ran");
    let after = |start: Instant| start.saturating_duration_since(deadline).as_secs_f64() * 1e3;
    (after(first), after(last))
}

/// Lateness of timeouts with delays spread over 10-500 ms at a 1 ms tick.
fn lateness(scale: &Scale) {
    println!(
        "## lateness ({} timeouts, delays 10-500 ms, 1 ms tick where the timer has one)",
        scale.lateness
    );
    println!("run start minus requested deadline; one run each");
    println!("| timer | early | p50 ms | p99 ms | max ms |");
    println!("|---|---|---|---|---|");
    let series = vec![
        lateness_of::<Wheel>(scale),
        lateness_of::<Hierarchical>(scale),
        lateness_of::<TimerCrate>(scale),
        lateness_of::<Heap>(scale),
    ];
    println!("(DelayQueue has no thread of its own; its lateness is the tokio runtime's.)");
    println!();
    if scale.plots {
        let title = format!(
            "Lateness of {} timeouts, delays 10-500 ms, 1 ms tick",
            plot::count(scale.lateness)
        );
        write_plot(plot::percentiles(
            &plot::path("timer_lateness"),
            &title,
            "ms after the deadline (below 0: early)",
            LATENESS_LEVELS,
            false,
            &series,
        ));
    }
}

/// The percentiles of lateness that the chart shows.
const LATENESS_LEVELS: &[f64] = &[0.0, 0.1, 0.5, 0.9, 0.99, 1.0];

fn lateness_of<P: Peer>(scale: &Scale) -> plot::Series<'static> {
    let (row, lates) = lateness_on(&mut P::start(), scale.lateness);
    println!("| {} | {row} |", P::NAME);
    (P::NAME, plot::quantiles(&lates, LATENESS_LEVELS))
}

/// Reports a chart that could not be written; the figures are printed whether or not it was.
fn write_plot(written: std::io::Result<()>) {
    if let Err(error) = written {
        println!("(chart not written: {error})");
    }
}

/// Schedules `count` timeouts with delays spread over 10-500 ms and returns the row of their
/// lateness, `early | p50 ms | p99 ms | max ms`, with every task's lateness in ms, sorted.
fn lateness_on<P: Peer>(peer: &mut P, count: usize) -> (String, Vec<f64>) {
    let samples: Arc<Mutex<Vec<f64>>> = Arc::default();
    let mut handles = Vec::with_capacity(count);
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    for _ in 0..count {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let delay = Duration::from_micros(10_000 + rng % 490_000);
        let deadline = Instant::now() + delay;
        let samples = samples.clone();
        handles.push(peer.schedule(delay, move || {
            let now = Instant::now();
            let late = if now >= deadline {
                now.duration_since(deadline).as_secs_f64() * 1e3
            } else {
                -(deadline.duration_since(now).as_secs_f64() * 1e3)
            };
            samples.lock().push(late);
        }));
    }
    let done = || samples.lock().len() >= count;
    peer.wait_until(&done, noop, Duration::from_secs(30));
    let mut lates = samples.lock().clone();
    lates.sort_by(f64::total_cmp);
    drop(handles);
    if lates.is_empty() {
        return ("no task ran | | |".to_owned(), lates);
    }
    let early = lates.iter().filter(|&&late| late < 0.0).count();
    let row = format!(
        "{} | {:.3} | {:.3} | {:.3}",
        early,
        quantile(&lates, 0.5),
        quantile(&lates, 0.99),
        lates[lates.len() - 1]
    );
    (row, lates)
}

/// Wakeups and CPU of each timer's thread while nothing is due.
fn idle(scale: &Scale) {
    println!("## idle worker");
    println!(
        "context switches per second of the timer thread with nothing scheduled ({:?}), and with",
        scale.idle
    );
    println!(
        "{} timeouts 10 minutes away: switches per second and CPU share of one core ({:?})",
        scale.pending, scale.far_cpu
    );
    println!("| timer | thread | idle wakeups/s | far: wakeups/s | far: CPU % |");
    println!("|---|---|---|---|---|");
    idle_of::<Wheel>(scale, "wheel-timer");
    idle_of::<Hierarchical>(scale, "timer-thread");
    idle_of::<TimerCrate>(scale, "Timer thread");
    idle_of::<Heap>(scale, "heap-timer");
    println!();
}

fn idle_of<P: Peer>(scale: &Scale, thread_name: &str) {
    let mut peer = P::start();
    thread::sleep(Duration::from_millis(100));
    let Some(tid) = named_thread(thread_name) else {
        println!("| {} | {thread_name}: not found | | | |", P::NAME);
        return;
    };
    let before = ThreadSample::take(tid);
    thread::sleep(scale.idle);
    let idle = ThreadSample::take(tid).since(&before, scale.idle);

    let far = Duration::from_secs(600);
    let handles: Vec<P::Handle> = (0..scale.pending)
        .map(|_| peer.schedule(far, noop))
        .collect();
    thread::sleep(Duration::from_millis(500));
    let before = ThreadSample::take(tid);
    thread::sleep(scale.far_cpu);
    let loaded = ThreadSample::take(tid).since(&before, scale.far_cpu);
    println!(
        "| {} | {thread_name} | {:.1} | {:.1} | {:.3} |",
        P::NAME,
        idle.switches_per_second,
        loaded.switches_per_second,
        loaded.cpu_percent
    );
    drop(handles);
}

/// Many callers, one timer: 1, 2, 4 and 8 threads scheduling, cancelling, and scheduling then
/// cancelling into one shared timer with 1M timeouts pending; wall time of the whole burst per
/// operation, best of `repeats`. Each timer is started afresh for each thread count.
fn threads(scale: &Scale) {
    println!(
        "## many threads, one timer ({} pending, delays 1-60 s, bursts of {} operations)",
        scale.pending, scale.operations
    );
    println!(
        "wall time of the whole burst / operations, best of {}, in ns",
        scale.repeats
    );
    for (name, settings) in [
        (SharedWheel::NAME, SharedWheel::SETTINGS),
        (SharedHeap::NAME, SharedHeap::SETTINGS),
        (SharedHierarchical::NAME, SharedHierarchical::SETTINGS),
    ] {
        println!("{name}: {settings}");
    }
    println!("| threads | timer | schedule | cancel | schedule + cancel |");
    println!("|---|---|---|---|---|");
    let counts = [1, 2, 4, 8];
    let mut figures: [(&str, Vec<BurstFigures>); 3] = [
        (SharedWheel::NAME, Vec::new()),
        (SharedHeap::NAME, Vec::new()),
        (SharedHierarchical::NAME, Vec::new()),
    ];
    for threads in counts {
        figures[0].1.push(threads_of::<SharedWheel>(scale, threads));
        figures[1].1.push(threads_of::<SharedHeap>(scale, threads));
        figures[2]
            .1
            .push(threads_of::<SharedHierarchical>(scale, threads));
    }
    println!();
    if !scale.plots {
        return;
    }
    let operations: [(&str, &str, Figure); 2] = [
        ("schedule", "Schedule", |f| f.schedule),
        ("cancel", "Cancel", |f| f.cancel),
    ];
    for (file, what, figure) in operations {
        let series: Vec<plot::Series<'_>> = figures
            .iter()
            .map(|(name, runs)| {
                let points = runs
                    .iter()
                    .enumerate()
                    .map(|(at, run)| (at as f64, figure(run)))
                    .collect();
                (*name, points)
            })
            .collect();
        let mut chart = plot::Chart::new(
            &format!(
                "{what} into one shared timer, {} pending (best of {})",
                plot::count(scale.pending),
                scale.repeats
            ),
            "caller threads (2 cores)",
            "wall time / operations, ns",
        );
        chart.log_y = true;
        chart.x_names = counts
            .iter()
            .enumerate()
            .map(|(at, count)| (at as f64, count.to_string()))
            .collect();
        write_plot(chart.draw(&plot::path(&format!("timer_threads_{file}")), &series));
    }
}

/// The `hashwheel` rows of the `threads` section alone, without charts.
fn wheel_threads(scale: &Scale) {
    println!(
        "## many threads, one timer: {} alone ({})",
        SharedWheel::NAME,
        SharedWheel::SETTINGS
    );
    println!("| threads | timer | schedule | cancel | schedule + cancel |");
    println!("|---|---|---|---|---|");
    for threads in [1, 2, 4, 8] {
        threads_of::<SharedWheel>(scale, threads);
    }
    println!();
}

/// One of a burst's figures.
type Figure = fn(&BurstFigures) -> f64;

fn threads_of<P: SharedPeer>(scale: &Scale, threads: usize) -> BurstFigures {
    let timer = P::start();
    let mut prefill = timer.caller(usize::MAX >> 24);
    let _pending: Vec<P::Handle> = delays(scale.pending, 7)
        .into_iter()
        .map(|delay| P::schedule(&mut prefill, delay))
        .collect();
    let figures = bursts(
        &timer,
        threads,
        scale.operations,
        scale.repeats,
        &delays(1 << 16, 11),
    );
    println!(
        "| {threads} | {} | {:.1} | {:.1} | {:.1} |",
        P::NAME,
        figures.schedule,
        figures.cancel,
        figures.schedule_cancel
    );
    figures
}

/// The one-deadline and lateness figures of `hashwheel` again, while two other threads keep
/// scheduling and cancelling on the same timer at full speed.
fn busy(scale: &Scale) {
    let callers = 2;
    let delays = Arc::new(delays(1 << 16, 13));
    println!("## wheel while {callers} threads schedule and cancel on it at full speed");
    for (setting, nice) in [("default settings", None), ("worker_nice(-10)", Some(-10))] {
        let runs: Vec<(f64, f64, f64)> = (0..3)
            .map(|_| {
                let mut timer = nice.map_or_else(Wheel::start, Wheel::with_worker_nice);
                let load = keep_busy(&timer.0, callers, Arc::clone(&delays));
                thread::sleep(Duration::from_millis(100));
                let (first, last) = starts_after_deadline(&mut timer, scale.one_deadline);
                (first, last, load.stop())
            })
            .collect();
        let firsts: Vec<f64> = runs.iter().map(|run| run.0).collect();
        let lates: Vec<f64> = runs.iter().map(|run| run.1).collect();
        let rates: Vec<f64> = runs.iter().map(|run| run.2).collect();
        println!(
            "{setting}: {} no-op tasks on one deadline (1 ms tick): last started {:.2} ms after \
             the deadline (median of 3; runs {}; the first {:.2}); callers made {:.1} M \
             operations/s (median)",
            scale.one_deadline,
            median(lates.clone()),
            lates
                .iter()
                .map(|late| format!("{late:.2}"))
                .collect::<Vec<_>>()
                .join(" / "),
            median(firsts),
            median(rates) / 1e6
        );
    }
    println!(
        "lateness ({} timeouts, delays 10-500 ms, 1 ms tick), one run:",
        scale.lateness
    );
    println!("| timer | early | p50 ms | p99 ms | max ms | callers, M operations/s |");
    println!("|---|---|---|---|---|---|");
    let mut timer = Wheel::start();
    let load = keep_busy(&timer.0, callers, Arc::clone(&delays));
    thread::sleep(Duration::from_millis(100));
    let (row, _) = lateness_on(&mut timer, scale.lateness);
    let rate = load.stop();
    println!("| {} | {row} | {:.1} |", Wheel::NAME, rate / 1e6);
    println!();
}

/// Threads that share one shard's lock: a timer of one shard, 1 ms tick; each thread schedules
/// timeouts 0.1 to 20 ms away and cancels three of every four at once, as fast as it can.
fn one_shard(scale: &Scale) {
    println!(
        "## threads sharing one shard (1 ms tick; each cancels 3 of every 4 timeouts at once)"
    );
    println!("schedules per second, all threads together; median of 3 runs");
    println!("| threads | M schedules/s | runs |");
    println!("|---|---|---|");
    for threads in [1, 2, 4, 16] {
        let runs: Vec<f64> = (0..3)
            .map(|_| contended_rate(threads, scale.contended))
            .collect();
        println!(
            "| {threads} | {:.2} | {} |",
            median(runs.clone()) / 1e6,
            runs.iter()
                .map(|rate| format!("{:.2}", rate / 1e6))
                .collect::<Vec<_>>()
                .join(" / ")
        );
    }
    println!();
}

/// Schedules per second made by `threads` threads on a timer of one shard for `length`.
fn contended_rate(threads: usize, length: Duration) -> f64 {
    let timer = hashwheel::Timer::builder()
        .shards(1)
        .tick(Duration::from_millis(1))
        .build()
        .expect("valid settings");
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let workers: Vec<_> = (0..threads as u64)
        .map(|thread| {
            let (timer, stop) = (timer.clone(), Arc::clone(&stop));
            thread::spawn(move || {
                let mut made = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for call in 0..1_000u64 {
                        let micros = (call * 7_919 + thread * 104_729) % 20_000 + 100;
                        let timeout = timer
                            .schedule(Duration::from_micros(micros), noop)
                            .expect("running");
                        if call % 4 != 0 {
                            timeout.cancel();
                        }
                    }
                    made += 1_000;
                }
                made
            })
        })
        .collect();
    thread::sleep(length);
    stop.store(true, Ordering::Relaxed);
    let made: u64 = workers
        .into_iter()
        .map(|worker| worker.join().expect("no panic"))
        .sum();
    made as f64 / start.elapsed().as_secs_f64()
}
