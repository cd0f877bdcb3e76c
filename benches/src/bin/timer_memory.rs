//! Prints the memory each timer takes per pending timeout, for `hashwheel` and its peers in one
//! run: bytes requested from the allocator while scheduling, less bytes freed.
//!
//! Run: `cargo run --release -p benches --bin timer_memory [quick]`. `quick` schedules 20,000
//! timeouts instead of 1M, for a smoke test. The counting allocator lives in this binary alone,
//! so that every allocation of the timing figures goes straight to the system allocator.
#![allow(clippy::print_stdout)]

use benches::figures::{median, Request};
use benches::peers::{DelayQueue, Heap, Hierarchical, Peer, TimerCrate, Wheel};
use benches::workload::{delays, noop};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::thread;
use std::time::Duration;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let pending = if Request::from_args(&args).quick {
        20_000
    } else {
        1_000_000
    };
    println!("# timer memory");
    println!();
    memory(pending);
}

/// Heap bytes requested per pending timeout, the caller's handle included.
fn memory(pending: usize) {
    println!(
        "## memory per pending timeout ({} pending, delays 1-60 s)",
        pending
    );
    println!("bytes requested from the allocator, handle storage included; median of 3");
    println!("| timer | bytes per pending timeout | handle size |");
    println!("|---|---|---|");
    memory_of::<Wheel>(pending);
    memory_of::<Hierarchical>(pending);
    memory_of::<DelayQueue>(pending);
    memory_of::<TimerCrate>(pending);
    memory_of::<Heap>(pending);
    println!();
}

fn memory_of<P: Peer>(pending: usize) {
    let delays = delays(pending, 1);
    let runs = (0..3)
        .map(|_| {
            let mut peer = P::start();
            // Let a threaded peer's worker settle before and after.
            thread::sleep(Duration::from_millis(50));
            let region = Region::new(GLOBAL);
            let mut handles = Vec::with_capacity(pending);
            for &delay in &delays {
                handles.push(peer.schedule(delay, noop));
            }
            thread::sleep(Duration::from_millis(300));
            let change = region.change();
            // stats_alloc already counts a reallocation's growth in bytes_allocated.
            let net = change.bytes_allocated as f64 - change.bytes_deallocated as f64;
            drop(handles);
            drop(peer);
            net / pending as f64
        })
        .collect();
    println!(
        "| {} | {:.1} | {} |",
        P::NAME,
        median(runs),
        std::mem::size_of::<P::Handle>()
    );
}
