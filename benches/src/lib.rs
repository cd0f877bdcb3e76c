//! Shared pieces of the benchmarks: the peers behind one trait, a heap-and-condvar baseline,
//! workload helpers, and SVG charts of the figures.
#![allow(missing_docs, clippy::unwrap_used)]

pub mod baseline;
pub mod callers;
pub mod figures;
pub mod handoff;
pub mod lock_peers;
pub mod names;
pub mod peers;
pub mod plot;
pub mod threads;
pub mod workload;
