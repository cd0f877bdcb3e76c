//! Distributed locks over Redis in the manner of Redisson, for synchronous programs: atomic Lua
//! scripts, reentrant and owner-checked holds, fencing tokens, waiting by pub/sub rather than
//! polling, and a local queue so that only one thread per client contends in Redis for a lock.
//!
//! ```no_run
//! use std::time::Duration;
//! use lease::Client;
//!
//! let client = Client::open("redis://127.0.0.1:6379")?;
//! let lock = client.lock("billing/invoice-run")?;
//! let guard = lock.lock_with_lease(Duration::from_secs(60))?;
//! // ... work, passing guard.fencing_token() to every write it makes ...
//! guard.unlock()?;
//! # Ok::<(), lease::Error>(())
//! ```
//!
//! # What a lease guarantees
//!
//! A hold lasts for its lease. A process that pauses longer than its lease (a stop, swap, a long
//! garbage collection in a neighbour) may wake believing it still holds a lock that another owner
//! has taken since. The fencing token is the remedy: the resource rejects a write whose token is
//! lower than one it has already accepted.
//!
//! # Logging
//!
//! Through the `log` crate: `warn` when a release on drop fails or the pub/sub connection is lost;
//! `debug` on each acquisition and release. Nothing is printed.

#![forbid(unsafe_code)]

mod client;
mod error;
mod guard;
mod keys;
mod local_queue;
mod lock;
mod lost;
mod owner;
mod pool;
mod pubsub;
mod scripts;
mod watchdog;

pub use client::{Client, ClientBuilder};
pub use error::{Error, Result};
pub use guard::LeaseGuard;
pub use lock::Lock;
pub use lost::{Lost, LostReason};
pub use watchdog::WatchdogMetrics;
/// The timer crate the watchdog runs on, for [`ClientBuilder::timer`].
pub use wheel;
