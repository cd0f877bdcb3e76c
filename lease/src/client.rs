//! [`Client`]: the connection pool, the pub/sub subscriber and the local queues that every lock of
//! one client shares, and its builder.

use crate::error::{Error, Result};
use crate::keys::LockKeys;
use crate::local_queue::LocalQueues;
use crate::lock::Lock;
use crate::owner;
use crate::pool::Pool;
use crate::pubsub::Subscriber;
use crate::watchdog::{self, Watchdog, WatchdogMetrics};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wheel::Timer;

/// A handle to one Redis server for taking locks. Cheap to clone; clones share connections, the
/// pub/sub thread, the watchdog and the local queues.
///
/// A client runs three threads whatever the number of locks: a timer, a renewal thread (both of
/// the watchdog) and a pub/sub subscriber.
///
/// ```no_run
/// use std::time::Duration;
/// use lease::Client;
///
/// let client = Client::builder("redis://127.0.0.1:6379")
///     .default_lease(Duration::from_secs(10))
///     .build()?;
/// let lock = client.lock("reports/nightly")?;
/// if let Some(guard) = lock.try_lock_for(Duration::from_secs(2))? {
///     println!("fencing token {}", guard.fencing_token());
///     guard.unlock()?;
/// }
/// # Ok::<(), lease::Error>(())
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) pool: Arc<Pool>,
    pub(crate) subscriber: Subscriber,
    pub(crate) queues: LocalQueues,
    pub(crate) watchdog: Watchdog,
    pub(crate) unsettled: crate::unsettled::UnsettledReleases,
    /// This client's random id: the first half of every owner id it makes.
    pub(crate) id: String,
    pub(crate) default_lease: Duration,
    pub(crate) command_timeout: Duration,
    pub(crate) prefix: String,
    /// The server's URL as given: it orders the locks of a [`MultiLock`](crate::MultiLock).
    pub(crate) url: String,
    release_seq: AtomicU64,
}

impl Inner {
    /// A release id no other release of any client will use.
    pub(crate) fn next_release_id(&self) -> String {
        let seq = self.release_seq.fetch_add(1, Ordering::Relaxed);
        format!("{}:{seq}", self.id)
    }

    /// The owner id of the calling thread.
    pub(crate) fn thread_owner(&self) -> String {
        format!("{}:{}", self.id, owner::thread_id())
    }
}

impl Client {
    /// A client with the default settings for the server at `url`.
    pub fn open(url: &str) -> Result<Client> {
        Client::builder(url).build()
    }

    /// Settings for a client of the server at `url` (`redis://[user:password@]host:port[/db]`).
    pub fn builder(url: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            url: url.into(),
            default_lease: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(2),
            command_timeout: Duration::from_secs(2),
            prefix: String::new(),
            pool_size: 8,
            max_local_waiters: 1024,
            renewal_batch: watchdog::DEFAULT_BATCH,
            timer: None,
        }
    }

    /// A lock by name. Names are any non-empty text without `{` or `}`.
    pub fn lock(&self, name: &str) -> Result<Lock> {
        let keys = LockKeys::new(&self.inner.prefix, name)?;
        Ok(Lock::new(self.clone(), keys))
    }

    /// This client's random id, the first part of the owner ids it makes.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The lease of a lock taken without one.
    pub fn default_lease(&self) -> Duration {
        self.inner.default_lease
    }

    /// A snapshot of the watchdog's counters: holds watched, renewal calls, losses.
    pub fn watchdog_metrics(&self) -> WatchdogMetrics {
        self.inner.watchdog.metrics()
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.inner.id)
            .field("prefix", &self.inner.prefix)
            .finish_non_exhaustive()
    }
}

/// Settings for a [`Client`], from [`Client::builder`].
#[derive(Clone)]
pub struct ClientBuilder {
    url: String,
    default_lease: Duration,
    connect_timeout: Duration,
    command_timeout: Duration,
    prefix: String,
    pool_size: usize,
    max_local_waiters: usize,
    renewal_batch: usize,
    timer: Option<Timer>,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("url", &self.url)
            .field("default_lease", &self.default_lease)
            .field("prefix", &self.prefix)
            .field("renewal_batch", &self.renewal_batch)
            .finish_non_exhaustive()
    }
}

impl ClientBuilder {
    /// The lease of a lock taken without one; default 30 s.
    pub fn default_lease(mut self, lease: Duration) -> Self {
        self.default_lease = lease;
        self
    }

    /// How long opening a connection may take; default 2 s.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long one command may take; default 2 s.
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// A prefix for every key and channel, to share a server between applications.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Idle connections kept for reuse; default 8. Busy threads open more when all are in use.
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size;
        self
    }

    /// How many threads of this client may wait for one lock behind the one contending in Redis;
    /// more are refused at once with [`Error::QueueFull`]. Default 1024.
    pub fn max_local_waiters(mut self, max: usize) -> Self {
        self.max_local_waiters = max;
        self
    }

    /// How many leases one renewal call renews at most; default 100. The watchdog renews leases
    /// taken with the default lease every lease/3, and sends the leases due together in calls of
    /// at most this many.
    pub fn renewal_batch(mut self, batch: usize) -> Self {
        self.renewal_batch = batch;
        self
    }

    /// The timer the watchdog schedules renewals and deadlines on, instead of one of its own: to
    /// share one timer thread between clients, or to drive the watchdog with a
    /// [`wheel::ManualClock`] in tests. Its tick bounds how late a holder is told of a loss.
    pub fn timer(mut self, timer: Timer) -> Self {
        self.timer = Some(timer);
        self
    }

    /// Checks the settings and starts the client's threads. Connects to nothing yet: an unreachable
    /// server shows on the first lock operation, within the connect timeout.
    pub fn build(self) -> Result<Client> {
        let positive = [
            ("default lease", self.default_lease),
            ("connect timeout", self.connect_timeout),
            ("command timeout", self.command_timeout),
        ];
        if let Some((what, _)) = positive.iter().find(|(_, value)| value.is_zero()) {
            return Err(Error::InvalidArgument(format!(
                "the {what} must be above zero"
            )));
        }
        watchdog::check_batch(self.renewal_batch)?;
        crate::keys::check_prefix(&self.prefix)?;
        let redis_client = crate::pool::open_client(&self.url)?;
        let pool = Arc::new(Pool::new(
            redis_client,
            self.pool_size,
            self.connect_timeout,
            self.command_timeout,
        ));
        let id = owner::random_id()?;
        let short_id = &id[..8];
        let timer = watchdog::timer_or_new(self.timer, format!("lease-timer-{short_id}"))?;
        let watchdog = Watchdog::start(
            timer,
            Box::new(watchdog::OneServer::new(Arc::clone(&pool))),
            self.renewal_batch,
            self.command_timeout,
            format!("lease-renew-{short_id}"),
        )?;
        let subscriber = Subscriber::start(Arc::clone(&pool), format!("lease-pubsub-{short_id}"))
            .map_err(Error::Spawn)?;
        Ok(Client {
            inner: Arc::new(Inner {
                pool,
                subscriber,
                queues: LocalQueues::new(self.max_local_waiters),
                watchdog,
                unsettled: Default::default(),
                id,
                default_lease: self.default_lease,
                command_timeout: self.command_timeout,
                prefix: self.prefix,
                url: self.url,
                release_seq: AtomicU64::new(0),
            }),
        })
    }
}
