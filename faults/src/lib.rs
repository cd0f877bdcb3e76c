//! Fault injection for `lease`: client processes that append what they did to a history, a
//! fenced resource that refuses stale tokens, faults injected into servers and clients, and a
//! checker over the merged histories and the lock server's own log. `faults` (the binary) runs the scenarios; `fault_client`
//! is the process each client runs.
//!
//! Where to look: a fault (what it needs, how it is injected and healed, how its effect shows)
//! in `fault/`, the failovers it calls in `failover.rs`; a deployment in `mode.rs` (the
//! PostgreSQL server and its pooler in `postgres.rs`); the client processes in `clients.rs`; the
//! primitive the clients take (a lock, a semaphore, a read-write lock) in `primitive.rs`; which
//! scenarios a profile runs in `profiles/`; how a scenario runs in `scenario.rs`; what counts
//! as a failure in `checker.rs`, `touches.rs`, `ends.rs` and `verdict.rs`; the clients'
//! connection to the resource they write to in `resource/`.
// An internal tool (never published): event fields and small helpers speak for themselves.
#![allow(clippy::print_stdout, missing_docs)]

pub mod checker;
pub mod clients;
pub mod clock;
pub mod ends;
pub mod failover;
pub mod fault;
pub mod history;
pub mod mode;
pub mod postgres;
pub mod primitive;
pub mod profiles;
pub mod proxy;
pub mod resource;
pub mod scenario;
pub mod touches;
pub mod verdict;

/// The lock the clients take, `jobs`, as a Redis key.
pub(crate) const LOCK_KEY: &str = "{jobs}";
