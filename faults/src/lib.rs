//! Fault injection for `lease`: client processes that append what they did to a history, a
//! fenced resource that refuses stale tokens, faults injected into servers and clients, and a
//! checker over the merged histories and the lock server's own log. `faults` (the binary) runs the scenarios; `fault_client`
//! is the process each client runs.
// An internal tool (never published): event fields and small helpers speak for themselves.
#![allow(clippy::print_stdout, missing_docs)]

pub mod checker;
pub mod clock;
pub mod failover;
pub mod history;
pub mod profiles;
pub mod proxy;
pub mod resource;
pub mod scenario;
pub mod touches;

/// The lock the clients take, `jobs`, as a Redis key.
pub(crate) const LOCK_KEY: &str = "{jobs}";
