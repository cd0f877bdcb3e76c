//! [`Client`]: what every lock of one client shares (its backend, waiters, local queues and
//! watchdog), and the primitives; its constructors, one per deployment, are in `stores.rs`, its
//! settings [`ClientBuilder`]'s (`builder.rs`).

mod builder;
mod latch;
mod stores;

pub use builder::ClientBuilder;

use crate::backend::{Kind, LockId};
use crate::error::Result;
use crate::limiter::RateLimiter;
use crate::lock::core::Core;
use crate::lock::Lock;
use crate::rate::RateLimit;
use crate::rwlock::ReadWriteLock;
use crate::semaphore::Semaphore;
use crate::watchdog::WatchdogMetrics;
use std::sync::Arc;
use std::time::Duration;

/// A handle for taking locks on one deployment: one Redis server ([`Client::builder`]), a Redis
/// Cluster ([`Client::cluster`]), a Sentinel-managed primary ([`Client::sentinel`]), several
/// independent masters (RedLock, [`Client::redlock`]), a ZooKeeper ensemble or PostgreSQL (their
/// features). Every lock method works the same on each. Cheap to clone; clones share connections, threads
/// and local queues.
///
/// A client runs a timer and a renewal thread (the watchdog's) whatever the number of locks, and
/// a pub/sub subscriber per server it waits on (one on one server, one per master of a cluster,
/// none on RedLock).
///
/// ```no_run
/// use std::time::Duration;
/// use redis_lease::Client;
///
/// let client = Client::builder("redis://127.0.0.1:6379")
///     .default_lease(Duration::from_secs(10))
///     .build()?;
/// let lock = client.lock("reports/nightly")?;
/// if let Some(guard) = lock.try_lock_for(Duration::from_secs(2))? {
///     println!("fencing token {:?}", guard.fencing_token());
///     guard.unlock()?;
/// }
/// # Ok::<(), redis_lease::Error>(())
/// ```
#[derive(Clone)]
pub struct Client {
    core: Arc<Core>,
}

impl Client {
    pub(crate) fn new(core: Core) -> Client {
        Client {
            core: Arc::new(core),
        }
    }

    /// A lock by name: 1 to 1024 bytes, without `{` or `}`; on ZooKeeper, also a relative node
    /// path (segments separated by single `/`, none `.` or `..`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a name that is empty, longer than 1024 bytes, or has `{` or
    /// `}`, or that ZooKeeper cannot take as a node name.
    pub fn lock(&self, name: &str) -> Result<Lock> {
        self.primitive(name, Kind::Lock)
    }

    /// A lock that grants in the order its waiters asked, across processes and threads: each
    /// waiting call takes a place in a line kept in Redis (on ZooKeeper every lock is fair), and
    /// a free lock goes only to the first in line whose place lasts. A waiter keeps its place by
    /// asking again at least every second, as every waiting call does; the place of one that
    /// vanished (its process killed or paused) lapses after 5 s, so it holds the line up for at
    /// most that long. Fair among fair-lock callers: a plain [`Client::lock`] of the same name
    /// is the same lock, and does not queue. Not offered on RedLock.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # let client = redis_lease::Client::open("redis://127.0.0.1:6379")?;
    /// // Hosts take their turn at the shared printer in the order they asked.
    /// let printer = client.fair_lock("printer")?;
    /// if let Some(turn) = printer.try_lock_for(Duration::from_secs(30))? {
    ///     // ... print ...
    ///     turn.unlock()?;
    /// }
    /// # Ok::<(), redis_lease::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Client::lock`], and [`Error::InvalidArgument`](crate::Error::InvalidArgument) on RedLock.
    pub fn fair_lock(&self, name: &str) -> Result<Lock> {
        self.primitive(name, Kind::Fair)
    }

    /// A semaphore of `permits` (1 to 10,000): at most that many permits held at once, each
    /// acquisition a lease of its own (see [`Semaphore`]). Not offered on RedLock.
    ///
    /// # Errors
    ///
    /// As [`Client::lock`], and [`Error::InvalidArgument`](crate::Error::InvalidArgument) for permits out of range, or on
    /// RedLock.
    pub fn semaphore(&self, name: &str, permits: u32) -> Result<Semaphore> {
        crate::semaphore::check_permits(permits)?;
        let lock = self.primitive(name, Kind::Semaphore { permits, take: 1 })?;
        Ok(Semaphore::new(lock, permits))
    }

    /// A read-write lock: many readers or one writer (see [`ReadWriteLock`]). Not offered on
    /// RedLock.
    ///
    /// # Errors
    ///
    /// As [`Client::lock`], and [`Error::InvalidArgument`](crate::Error::InvalidArgument) on RedLock.
    pub fn read_write_lock(&self, name: &str) -> Result<ReadWriteLock> {
        let read = self.primitive(name, Kind::Read)?;
        Ok(ReadWriteLock::new(read.clone(), read.of_kind(Kind::Write)))
    }

    /// A leader election by name (names as for [`Client::lock`]; the election is not the lock
    /// of the same name). On RedLock, refused: a term is a fencing token, which needs one
    /// counter.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a name [`Client::lock`]
    /// refuses, or on RedLock.
    pub fn election(&self, name: &str) -> Result<crate::Election> {
        self.primitive(name, Kind::Leader).map(crate::Election::new)
    }

    // ---- Rate limiters ----

    /// A rate limiter of `limit` grants in any window of length `window` (1 to 100,000 grants,
    /// 1 ms to a year), measured by the store's clock: a sliding log, exact, shared by every
    /// client of the name (names as for [`Client::lock`]; the limiter is not the lock of the
    /// same name). See [`RateLimiter`]. On one server, through Sentinel, on a Cluster (its keys
    /// in the slot of its name) and on PostgreSQL; refused on RedLock and ZooKeeper.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # fn main() -> redis_lease::Result<()> {
    /// # let client = redis_lease::Client::open("redis://127.0.0.1/")?;
    /// let logins = client.rate_limiter("logins/alice", 5, Duration::from_secs(60))?;
    /// if logins.try_acquire(1)?.is_none() {
    ///     // five attempts in the last minute already: refuse this one
    /// }
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Client::lock`]; [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a
    /// limit or window out of range, or on a store that does not offer rate limiters.
    pub fn rate_limiter(&self, name: &str, limit: u64, window: Duration) -> Result<RateLimiter> {
        self.limiter(name, RateLimit::window(limit, window))
    }

    /// A rate limiter of `rate` grants per `period` on average, `burst` at most at once: a
    /// generic cell rate algorithm, one number in the store whatever the rate, with the weaker
    /// guarantee [`RateLimit::CellRate`] states. See [`RateLimiter`]; stores as
    /// [`Client::rate_limiter`].
    ///
    /// # Errors
    ///
    /// As [`Client::rate_limiter`].
    pub fn cell_rate_limiter(
        &self,
        name: &str,
        rate: u64,
        period: Duration,
        burst: u64,
    ) -> Result<RateLimiter> {
        self.limiter(name, RateLimit::cell_rate(rate, period, burst))
    }

    /// The rate limiter `name` declaring `limit`, refused here if its store does not offer
    /// rate limiters.
    fn limiter(&self, name: &str, limit: RateLimit) -> Result<RateLimiter> {
        let limit = limit.checked()?;
        let backend = self.core.backend();
        let place = backend.place(&LockId::new(name, Kind::Limiter)?)?;
        crate::backend::needs(&*place, backend.address())?;
        Ok(RateLimiter::new(Arc::clone(&self.core), place, limit))
    }

    // ---- The primitives on the lock ----

    /// The primitive `kind` named `name`, refused here if its store does not offer it.
    fn primitive(&self, name: &str, kind: Kind) -> Result<Lock> {
        let backend = self.core.backend();
        let place = backend.place(&LockId::new(name, kind)?)?;
        crate::backend::needs(&*place, backend.address())?;
        Ok(Lock::new(Arc::clone(&self.core), place))
    }

    /// Whether the store serves now, within the command timeout: one round trip to what a lock's
    /// call would reach (one server, or the primary the Sentinels name, says who it is; a
    /// Cluster node answers with its map of the slots; a quorum of RedLock's masters answers; the
    /// ZooKeeper session's server answers). For readiness probes: it takes no lock.
    ///
    /// ```no_run
    /// # let client = redis_lease::Client::open("redis://127.0.0.1:6379")?;
    /// let ready = client.ping().is_ok();
    /// # Ok::<(), redis_lease::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Unavailable`](crate::Error::Unavailable) if it does not answer in time (on
    /// RedLock: fewer masters than the quorum), [`Error::Refused`](crate::Error::Refused) if it
    /// refuses the connection or the call (a password, an ACL rule).
    pub fn ping(&self) -> Result<()> {
        self.core.backend().ping(self.core.call_deadline())
    }

    /// This client's random id, the first part of the owner ids it makes.
    pub fn id(&self) -> &str {
        self.core.ids().client()
    }

    /// The lease of a lock taken without one.
    pub fn default_lease(&self) -> Duration {
        self.core.default_lease()
    }

    /// Whether this client's holds carry fencing tokens (not on RedLock).
    pub fn has_fencing_tokens(&self) -> bool {
        self.core.backend().fenced()
    }

    /// Publishes the watchdog's gauges ([`WatchdogMetrics::record`]) and its timer's counters
    /// (`hashwheel::Metrics::record`) through the `metrics` facade, labelled with the client's
    /// name (`client`, and `timer` = `lease-<name>`; the name is
    /// [`ClientBuilder::name`]'s, else the client's id). The counters of acquisitions,
    /// renewals and losses are published as they happen, without this call. With the `metrics`
    /// feature.
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn record_metrics(&self) {
        let name = self.core.name();
        self.core.watchdog().metrics().record(name);
        self.core
            .watchdog()
            .timer_metrics()
            .record(&format!("lease-{name}"));
    }

    /// A snapshot of the watchdog's counters: holds watched, renewal calls, losses.
    pub fn watchdog_metrics(&self) -> WatchdogMetrics {
        self.core.watchdog().metrics()
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.core.ids().client())
            .field("place", &self.core.backend().address())
            .finish_non_exhaustive()
    }
}
