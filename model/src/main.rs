//! Checks the lock protocol's model by hand: `cargo run --release -p lease-model [-- large]`.
#![allow(clippy::print_stdout)]

use lease_model::{Bounds, LeaseModel};
use stateright::{Checker, Model};
use std::time::Instant;

fn main() {
    let large = std::env::args().any(|arg| arg == "large");
    let bounds = if large { Bounds::LARGE } else { Bounds::SMALL };
    let started = Instant::now();
    let checker = LeaseModel::new(bounds)
        .checker()
        .threads(std::thread::available_parallelism().map_or(1, usize::from))
        .spawn_bfs()
        .join();
    println!(
        "{bounds:?}: {} states ({} unique) in {:.1} s",
        checker.state_count(),
        checker.unique_state_count(),
        started.elapsed().as_secs_f64()
    );
    checker.assert_properties();
    println!("every property holds");
}
