//! Distributed locks over Redis in the manner of Redisson, for synchronous programs: atomic Lua
//! scripts, reentrant and owner-checked holds, fencing tokens, waiting by pub/sub rather than
//! polling, a local queue so that only one thread per client contends in Redis for a lock, and a
//! watchdog that renews leases and tells the holder when a hold can no longer be trusted.
//!
//! ```no_run
//! use redis_lease::Client;
//!
//! let client = Client::open("redis://127.0.0.1:6379")?;
//! let lock = client.lock("billing/invoice-run")?;
//! // The default lease (30 s), renewed every 10 s for as long as the guard lives.
//! let guard = lock.lock()?;
//! for batch in 0..100 {
//!     if guard.is_lost() {
//!         break; // another owner may hold it now: stop writing
//!     }
//!     // ... write the batch, passing guard.fencing_token() with it ...
//! }
//! guard.unlock()?;
//! # Ok::<(), redis_lease::Error>(())
//! ```
//!
//! # Taking a lock
//!
//! A [`Lock`]'s settings chain, each returning the lock set up so ([`Lock::owned_by`],
//! [`Lock::max_hold`], [`Lock::with_lease`], [`Lock::cancel_on`]); then the four calls of
//! `lock_api`'s mutexes take it: [`Lock::lock`], [`Lock::try_lock`], [`Lock::try_lock_for`],
//! [`Lock::try_lock_until`]. The other primitives are kinds of the one lock, with the same
//! settings and calls: a [`Semaphore`] whose permits are leases, a [`ReadWriteLock`] whose two
//! sides are locks, a fair lock ([`Client::fair_lock`]), and [`MultiLock`] over several.
//!
//! # Leader election
//!
//! [`Client::election`] elects one leader at a time among every client that campaigns under a
//! name: [`Election::campaign`] (in the same four wait forms) returns a [`Leadership`] whose
//! [`term`](Leadership::term) is a fencing token above every term before it, told of its loss as
//! a guard is, [`proclaim`](Leadership::proclaim)ing a value within its term and
//! [`resign`](Leadership::resign)ing in a way that is safe to call again; followers read
//! [`Election::leader`] or follow [`Election::observe`], whose reports never go back to an older
//! term. On one server, Sentinel, Cluster and ZooKeeper; RedLock refuses it.
//!
//! # Latches, and writes only while held
//!
//! [`Client::latch`] is a count-down latch shared by every client of a name
//! ([`Latch::set_count`], [`Latch::count_down`], [`Latch::wait_for`]), woken by the store, which
//! lapses when left behind. [`LeaseGuard::if_held`] makes a write of the caller's own ([`Write`]:
//! a Lua script, ZooKeeper operations, an SQL statement) in the lock's store only while the
//! guard's hold still holds, in one atomic step of the store; it guards the lock's own store, not
//! a resource elsewhere (see [`guarantees`]). Neither is offered on RedLock.
//!
//! # Rate limiters
//!
//! [`Client::rate_limiter`] makes at most `limit` grants in any window of length `window` of the
//! store's clock, shared by every client of a name (a sliding window, exact);
//! [`Client::cell_rate_limiter`] keeps one number per limiter (a generic cell rate: a rate and a
//! burst). [`RateLimiter::try_acquire`], [`RateLimiter::acquire`] (asleep on the client's timer
//! until the moment the store names, never polling) and their bounded forms; a grant is spent,
//! never released. On one server, Sentinel, Cluster and PostgreSQL; RedLock and ZooKeeper refuse
//! them when they are made.
//!
//! # From async code
//!
//! The crate is synchronous: a call that talks to the store blocks its thread until its
//! deadline at most, and dropping a guard releases it over the network on the dropping thread.
//! From a tokio service, take and release locks with `tokio::task::spawn_blocking`, and learn of
//! a loss without a parked thread with [`LeaseGuard::on_lost`], a closure called once on the
//! watchdog's thread that can feed a oneshot channel to `select!` on beside the work. A
//! readiness probe is [`Client::ping`].
//!
//! # Platforms and servers
//!
//! Unix only (Linux, macOS, the BSDs; tested on Linux only); a build for another target stops
//! with a message saying so.
//! Redis 7.0 or later: the scripts ask the user's ACL rules with `redis.acl_check_cmd` and a
//! cluster's waiters use sharded pub/sub (`SPUBLISH`), both Redis 7. The test suite runs against
//! Debian's Redis 7.0.15 and ZooKeeper 3.8.
//!
//! # What a lease guarantees
//!
//! While a guard is not lost, no other owner holds the lock, provided Redis keeps the key and its
//! clock runs at about the client's rate. A process that pauses longer than its remaining lease (a
//! stop, swap, a long garbage collection in a neighbour) may wake believing it still holds a lock
//! that another owner has taken since. The fencing token is the remedy: the resource rejects a
//! write whose token is lower than one it has already accepted. [`guarantees`] spells out the
//! assumptions and the failure cases, deployment by deployment.
//!
//! # Deadlines and errors
//!
//! Every call that talks to the store ends within the client's command timeout, whatever the
//! server does (silent, frozen, or dripping its reply a byte at a time): the crate keeps its own socket
//! and bounds whole calls, not single reads. Errors tell apart unavailability (retry later),
//! refusals (a wrong password, an ACL rule, a full server: retrying will not help), keys a lock
//! cannot use, a hold that is no longer the caller's, and bad input; see [`Error`], and
//! [`Error::is_retryable`] for the errors a later call may get past.
//!
//! # Several masters, several locks
//!
//! [`Client::redlock`] takes each lock on a quorum of independent Redis masters (no fencing
//! token: no single counter exists across them), with the same [`Lock`] and [`LeaseGuard`];
//! [`MultiLock`] takes several locks all or nothing, in a stable order.
//!
//! # ZooKeeper
//!
//! With the `zookeeper` feature, `Client::zookeeper` takes the same locks on a ZooKeeper
//! ensemble: ephemeral sequential nodes (Curator's and kazoo's recipe), the client's session as
//! every hold's lease, the holder node's creation zxid as its fencing token. Consensus keeps the
//! holds through a leader's failure; see [`guarantees`].
//!
//! # Features
//!
//! * `tls` (default): `rediss://` servers over rustls with the `ring` provider, which needs a C
//!   compiler to build; without it, a `rediss://` URL is refused with a message naming the
//!   feature.
//! * `zookeeper`: `Client::zookeeper`, every primitive on a ZooKeeper ensemble.
//! * `postgres`: `Client::postgres`, every primitive on PostgreSQL (directly, or through
//!   PgBouncer in transaction mode).
//! * `metrics`: the client's events through the `metrics` facade, and
//!   `Client::record_metrics`.
//!
//! The crate's examples (`primitives`, `leader`, `flash_sale`) are listed in
//! [the guide](guide::library#examples).
//!
//! # PostgreSQL
//!
//! With the `postgres` feature, `Client::postgres` takes the same locks on PostgreSQL: a hold is
//! a row whose expiry the database's clock sets and judges, a name's fencing counter is
//! committed synchronously and only rises, and waiters are woken by `NOTIFY`. Every call is one
//! function of the store's schema in one round trip, with no session state, so PgBouncer in
//! transaction mode carries it; see the guide's "PostgreSQL".
//!
//! # Threads
//!
//! A client runs three threads whatever the number of locks: the watchdog's timer (unless one is
//! given with [`ClientBuilder::timer`]), its renewal thread, and a pub/sub subscriber (on one
//! server). Through Sentinels, one more per Sentinel listens for failovers, and each new
//! connection asks the Sentinels on short-lived threads of its own, one per Sentinel. On
//! ZooKeeper, the session's thread reads replies and watch events, and a reaper deletes nodes
//! the client no longer wants (instead of a subscriber).
//!
//! # Logging
//!
//! Through the `log` crate: `warn` when a hold is lost (with the lock's name and the reason), when
//! a renewal call fails, when a release on drop fails or the pub/sub connection is lost, and once
//! per server that may evict keys (any `maxmemory-policy` but `noeviction`); `info` when a hold
//! reaches its `max_hold`; `debug` on each acquisition and release. Nothing is printed, and no
//! record carries a password or an owner id.

#![forbid(unsafe_code)]
// On docs.rs (nightly, `--cfg docsrs`), the items of a feature say which.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(clippy::missing_errors_doc)]

// The crate runs on Unix (Linux, macOS, the BSDs): its connections use Unix sockets (and the
// `lease` tool built on it, the `lease-cli` crate, Unix processes and signals).
#[cfg(not(unix))]
compile_error!("redis-lease runs on Unix only (Linux, macOS, the BSDs): it uses Unix sockets");

mod backend;
mod cancel;
mod cause;
mod client;
pub mod election;
mod error;
mod events;
mod guard;
mod latch;
mod limiter;
mod local_queue;
mod lock;
mod lost;
mod multilock;
mod owner;
mod policy;
mod rate;
mod redact;
mod rwlock;
mod semaphore;
mod state;
mod stores;
mod sync;
mod waiters;
mod watchdog;
mod write;

#[doc = include_str!("guarantees.md")]
pub mod guarantees {}

/// The guides, as pages of this documentation: the library in depth (deployments, keys and
/// scripts, ACL rules, owners, waiting, the local queue, errors, connections, the watchdog,
/// RedLock and MultiLock, the other primitives, leader election, count-down latches, writes only
/// while held, rate limiters, metrics), calling it from async
/// code, the manual of the `lease` tool (the `lease-cli` crate), and what the crate costs beside
/// its peers. What a lease guarantees is [`guarantees`].
pub mod guide {
    #[doc = include_str!("../guide/library.md")]
    pub mod library {}

    #[doc = include_str!("../guide/asynchronous.md")]
    pub mod asynchronous {}

    #[doc = include_str!("../guide/tool.md")]
    pub mod tool {}

    #[doc = include_str!("../guide/benchmarks.md")]
    pub mod benchmarks {}
}

pub use cancel::Cancel;
pub use client::{Client, ClientBuilder};
/// The channel crate of [`LostSignal`], re-exported so that `select!` over a lost signal and
/// other channels needs no dependency of the caller's own, at the version this crate uses.
pub use crossbeam_channel;
pub use election::{Election, Leader, Leadership, Observer};
pub use error::{Cause, Error, Result};
pub use guard::Guard;
/// The timer crate the watchdog runs on, for [`ClientBuilder::timer`].
pub use hashwheel;
pub use latch::{Latch, LatchState, DEFAULT_LATCH_EXPIRY};
pub use limiter::RateLimiter;
pub use lock::{LeaseGuard, Lock};
pub use lost::{Lost, LostReason, LostSignal};
pub use multilock::{MultiGuard, MultiLock};
pub use policy::{MAX_LEASE, MIN_LEASE};
pub use rate::{Granted, LimiterState, RateLimit, MAX_BURST, MAX_WINDOW_LIMIT};
/// `url` with the password of its user information replaced by `***` (`redis://u:***@h:1/0`), as
/// the crate shows URLs in its messages; text that is not a URL is shown up to its last `@` as
/// `***`. For programs that print the URLs they were given.
pub use redact::redact as redact_url;
/// The Redis client crate, re-exported: [`Error::Unavailable`] and [`Error::Refused`] carry its
/// `RedisError` (its `code()` and `detail()` say what the server answered), and the crate's
/// version is the one those errors come from; [`Client::from_connection_info`] takes its
/// `ConnectionInfo`. Re-exported rather than wrapped, so that an application that already talks
/// to Redis through it passes its values in as they are. What a caller decides on needs no
/// `redis` type: [`Error::code`], [`Error::server`] and [`Error::is_retryable`]. Its version is part
/// of this crate's API, so moving to `redis` 2.0 will be a breaking release of this crate.
pub use redis;
pub use rwlock::ReadWriteLock;
pub use semaphore::{Semaphore, MAX_PERMITS};
pub use state::LockState;
pub use watchdog::WatchdogMetrics;
pub use write::{Write, Written};
/// The ZooKeeper client crate (feature `zookeeper`), re-exported: a [`Write::Zk`] is made of its
/// `Op`s and answers with its `OpResult`s, at the version this crate uses.
#[cfg(feature = "zookeeper")]
#[cfg_attr(docsrs, doc(cfg(feature = "zookeeper")))]
pub use zookeeper_blocking;

/// The Rust examples of the crate's README, compiled (and run where they need no server) as doc
/// tests, so that it cannot drift from the API. The workspace's README, which the published
/// crate does not carry, is tested by the `benches` crate beside it; the guides are pages of
/// this documentation ([`guide`]), their examples its doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct CrateReadme;

/// A setting that chains returns a new handle and leaves the one it is called on unchanged, so
/// one called alone is a mistake the compiler reports: each of these fails to build.
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// fn set_up(lock: &redis_lease::Lock) {
///     lock.owned_by("job");
/// }
/// ```
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// fn set_up(lock: &redis_lease::Lock) {
///     lock.max_hold(std::time::Duration::from_secs(1));
/// }
/// ```
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// fn set_up(lock: &redis_lease::Lock) {
///     lock.with_lease(std::time::Duration::from_secs(1));
/// }
/// ```
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// fn set_up(lock: &redis_lease::Lock) {
///     lock.cancel_on(&redis_lease::Cancel::new());
/// }
/// ```
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// fn set_up(semaphore: &redis_lease::Semaphore) {
///     semaphore.owned_by("job");
/// }
/// ```
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// fn set_up(semaphore: &redis_lease::Semaphore) {
///     semaphore.max_hold(std::time::Duration::from_secs(1));
/// }
/// ```
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// fn set_up(semaphore: &redis_lease::Semaphore) {
///     semaphore.with_lease(std::time::Duration::from_secs(1));
/// }
/// ```
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// fn set_up(semaphore: &redis_lease::Semaphore) {
///     semaphore.cancel_on(&redis_lease::Cancel::new());
/// }
/// ```
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// fn set_up(rw: &redis_lease::ReadWriteLock) {
///     rw.owned_by("job");
/// }
/// ```
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// fn set_up(election: &redis_lease::Election) {
///     election.cancel_on(&redis_lease::Cancel::new());
/// }
/// ```
///
/// The same settings, kept, build:
///
/// ```
/// #![deny(unused_must_use)]
/// fn set_up(lock: &redis_lease::Lock, semaphore: &redis_lease::Semaphore) {
///     let _job = lock.owned_by("job").max_hold(std::time::Duration::from_secs(1));
///     let _taken = semaphore.with_lease(std::time::Duration::from_secs(1));
/// }
/// ```
#[cfg(doctest)]
struct SettingsChain;
