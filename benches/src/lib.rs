//! Shared pieces of the benchmarks: the peers behind one trait, a heap-and-condvar baseline,
//! workload helpers, and SVG charts of the figures.
#![allow(missing_docs, clippy::unwrap_used)]

pub mod baseline;
pub mod callers;
pub mod child;
pub mod cold_calls;
pub mod cpu;
pub mod figures;
pub mod handoff;
pub mod lock_peers;
pub mod names;
pub mod peers;
pub mod pg_crash;
pub mod pg_durability;
pub mod pg_floors;
pub mod pg_sale;
pub mod pg_server;
pub mod plot;
pub mod processes;
pub mod redisson;
pub mod script_pairs;
pub mod threads;
pub mod wake_floors;
pub mod workload;

/// The Rust examples of the workspace's README, compiled (and run where they need no server) as
/// doc tests, so that the documentation cannot drift from the API. It lives here, outside the
/// published crates, which do not carry it; the guides are `redis_lease::guide`'s pages, their
/// examples that crate's doc tests.
#[cfg(doctest)]
mod documentation {
    #[doc = include_str!("../../README.md")]
    struct Readme;
}
