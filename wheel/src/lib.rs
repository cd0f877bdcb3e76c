//! A hashed wheel timer on its own thread, in the manner of Netty's `HashedWheelTimer`, with what
//! Netty lacks: no wakeups while nothing is due, cancellation that frees the task at once,
//! recurring tasks without drift, per-tick work that ignores far-away timeouts, and a manual clock
//! for tests.
//!
//! Two layers:
//!
//! * [`Wheel`]: the timing wheel as plain data over `u64` ticks. No clock, no thread, no lock.
//!   Use it directly to drive timeouts from your own event loop.
//! * [`Timer`]: wheels in shards, each behind its own lock so that threads scheduling at once do
//!   not wait for each other, one worker thread that sleeps until the next due tick and runs tasks
//!   outside every lock, and cheap cloneable handles.
//!
//! ```
//! use std::sync::mpsc;
//! use std::time::Duration;
//! use hashwheel::Timer;
//!
//! let timer = Timer::builder()
//!     .tick(Duration::from_millis(10))
//!     .build()
//!     .expect("valid settings");
//! let (tx, rx) = mpsc::channel();
//! let request_timeout = timer
//!     .schedule(Duration::from_millis(20), move || tx.send("timed out").expect("receiver alive"))
//!     .expect("timer running");
//! assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok("timed out"));
//! assert!(request_timeout.is_expired());
//! ```
//!
//! # Guarantees
//!
//! * Never early: a deadline rounds up to the next tick boundary, and the worker runs a task only
//!   once the monotonic clock has passed that boundary. The "now" a delay counts from is read
//!   from the CPU's time-stamp counter where the kernel keeps time with it (about 11 ns instead
//!   of 30), with a slack that keeps it at or after the monotonic clock: a deadline may be up to
//!   60 µs later than one computed from `Instant::now()`, never earlier.
//! * At most about one tick late while the worker keeps up: it wakes at the boundary itself, not on
//!   a fixed beat. Tasks run one after another on one thread, so a slow task delays the ones behind
//!   it: keep tasks short, or hand long work to another thread.
//! * A panicking task is caught, counted in [`Metrics::panicked`] and logged; the worker lives on.
//!
//! # Logging
//!
//! Through the `log` crate: `warn` when a task panics or a manual clock waits too long for a
//! timer; `debug` when a worker starts and stops; `trace` each time the worker goes to sleep.
//! Nothing is printed.

#![forbid(unsafe_code)]
// On docs.rs (nightly, `--cfg docsrs`), the items of a feature say which.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(clippy::missing_errors_doc)]

mod clock;
mod error;
mod fast_now;
mod metrics;
mod sync;
mod task;
mod tick;
mod timer;
mod wheel;

pub use clock::ManualClock;
pub use error::{BuildError, ScheduleError};
pub use metrics::Metrics;
#[cfg(shuttle)]
#[doc(hidden)]
pub mod checks;
#[cfg(shuttle)]
#[doc(hidden)]
pub use sync::checked;
pub use task::UnrunTask;
pub use timer::{Periodic, Timeout, Timer, TimerBuilder, MAX_PENDING, MAX_SHARDS, MIN_TICK};
pub use wheel::{Advance, InvalidSlots, Key, Wheel, WheelFull, MAX_LEN, MAX_SLOTS};

/// The guides, as pages of this documentation: how the wheel is laid out, why it never wakes
/// when idle, what it guarantees and what breaks it; and what it costs beside its peers.
pub mod guide {
    #[doc = include_str!("../guide/design.md")]
    pub mod design {}

    #[doc = include_str!("../guide/benchmarks.md")]
    pub mod benchmarks {}
}

/// The crate's README example, compiled and run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct Readme;
