//! Caller-side cost of schedule, cancel and the pair, with one million timeouts pending, for
//! `hashwheel` and its peers in the same run; and the bare `Wheel` data structure.
//!
//! Run: `cargo bench -p benches --bench timers`. Burst expiry, lateness, wakeups, CPU and memory
//! are printed by `cargo run --release -p benches --bin timer_figures`.
#![allow(missing_docs)]

use benches::peers::{DelayQueue, Heap, Hierarchical, Peer, TimerCrate, Wheel};
use benches::workload::{delays, noop};
use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion};
use std::time::{Duration, Instant};

const PENDING: usize = 1_000_000;

struct Loaded<P: Peer> {
    peer: P,
    _pending: Vec<P::Handle>,
    delays: Vec<Duration>,
    /// Reused across iterations, so page faults of a fresh vector are not timed.
    handles: Vec<P::Handle>,
}

fn loaded<P: Peer>() -> Loaded<P> {
    let mut peer = P::start();
    let pending = delays(PENDING, 7)
        .into_iter()
        .map(|delay| peer.schedule(delay, noop))
        .collect();
    Loaded {
        peer,
        _pending: pending,
        delays: delays(1 << 16, 11),
        handles: Vec::new(),
    }
}

/// Operations run in chunks of this many, undone (untimed) between chunks, so that the number
/// pending stays near [`PENDING`] however many iterations criterion asks for.
const CHUNK: usize = 10_000;

/// Runs `iters` operations in chunks of [`CHUNK`]: `chunk` does the operations numbered by its
/// range and returns the part of its time that counts.
fn in_chunks(iters: u64, mut chunk: impl FnMut(std::ops::Range<usize>) -> Duration) -> Duration {
    let iters = iters as usize;
    let mut elapsed = Duration::ZERO;
    let mut done = 0;
    while done < iters {
        let size = CHUNK.min(iters - done);
        elapsed += chunk(done..done + size);
        done += size;
    }
    elapsed
}

fn schedule<P: Peer>(group: &mut BenchmarkGroup<'_, WallTime>) {
    let mut timer = loaded::<P>();
    group.bench_function(P::NAME, |b| {
        b.iter_custom(|iters| {
            let Loaded {
                peer,
                delays,
                handles,
                ..
            } = &mut timer;
            in_chunks(iters, |range| {
                let start = Instant::now();
                for i in range {
                    handles.push(peer.schedule(delays[i % delays.len()], noop));
                }
                let elapsed = start.elapsed();
                handles.drain(..).for_each(|handle| peer.cancel(handle));
                elapsed
            })
        })
    });
}

fn cancel<P: Peer>(group: &mut BenchmarkGroup<'_, WallTime>) {
    let mut timer = loaded::<P>();
    group.bench_function(P::NAME, |b| {
        b.iter_custom(|iters| {
            let Loaded {
                peer,
                delays,
                handles,
                ..
            } = &mut timer;
            in_chunks(iters, |range| {
                for i in range {
                    handles.push(peer.schedule(delays[i % delays.len()], noop));
                }
                let start = Instant::now();
                handles.drain(..).for_each(|handle| peer.cancel(handle));
                start.elapsed()
            })
        })
    });
}

fn schedule_then_cancel<P: Peer>(group: &mut BenchmarkGroup<'_, WallTime>) {
    let mut timer = loaded::<P>();
    group.bench_function(P::NAME, |b| {
        b.iter_custom(|iters| {
            let delays = &timer.delays;
            let start = Instant::now();
            for i in 0..iters as usize {
                let handle = timer.peer.schedule(delays[i % delays.len()], noop);
                timer.peer.cancel(handle);
            }
            start.elapsed()
        })
    });
}

fn all_peers(c: &mut Criterion, name: &str, bench: [fn(&mut BenchmarkGroup<'_, WallTime>); 5]) {
    let mut group = c.benchmark_group(name);
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for run in bench {
        run(&mut group);
    }
    group.finish();
}

fn timers(c: &mut Criterion) {
    all_peers(
        c,
        "schedule (1M pending)",
        [
            schedule::<Wheel>,
            schedule::<Hierarchical>,
            schedule::<DelayQueue>,
            schedule::<TimerCrate>,
            schedule::<Heap>,
        ],
    );
    all_peers(
        c,
        "cancel (1M pending)",
        [
            cancel::<Wheel>,
            cancel::<Hierarchical>,
            cancel::<DelayQueue>,
            cancel::<TimerCrate>,
            cancel::<Heap>,
        ],
    );
    all_peers(
        c,
        "schedule+cancel (1M pending)",
        [
            schedule_then_cancel::<Wheel>,
            schedule_then_cancel::<Hierarchical>,
            schedule_then_cancel::<DelayQueue>,
            schedule_then_cancel::<TimerCrate>,
            schedule_then_cancel::<Heap>,
        ],
    );
}

/// The data structure alone: insert and cancel with a million entries stored, and the cost of
/// each expired entry when a million fall due on one tick.
fn bare_wheel(c: &mut Criterion) {
    let mut group = c.benchmark_group("Wheel (data structure)");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let ticks: Vec<u64> = delays(1 << 16, 3)
        .iter()
        .map(|delay| delay.as_millis() as u64)
        .collect();
    let mut wheel: hashwheel::Wheel<u64> = hashwheel::Wheel::new(512).expect("valid");
    for (i, delay) in delays(PENDING, 5).iter().enumerate() {
        wheel
            .insert(delay.as_millis() as u64, i as u64)
            .expect("room");
    }
    group.bench_function("insert+cancel", |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            let key = wheel.insert(ticks[i % ticks.len()], 0).expect("room");
            wheel.cancel(key)
        })
    });
    group.bench_function("advance, per expired entry (1M on one tick)", |b| {
        b.iter_custom(|iters| {
            let mut burst: hashwheel::Wheel<u64> = hashwheel::Wheel::new(512).expect("valid");
            let mut total = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let count = left.min(PENDING as u64);
                left -= count;
                let base = burst.now();
                for i in 0..count {
                    burst.insert(base + 5_000, i).expect("room");
                }
                let start = Instant::now();
                let expired = burst.advance(base + 5_000).count();
                total += start.elapsed();
                assert_eq!(expired as u64, count);
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, timers, bare_wheel);
criterion_main!(benches);
