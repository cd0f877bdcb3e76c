//! [`Client`]: the connection pool, the pub/sub subscriber and the local queues that every lock of
//! one client shares, and its builder.

use crate::error::{Error, Result};
use crate::keys::LockKeys;
use crate::local_queue::LocalQueues;
use crate::lock::Lock;
use crate::owner;
use crate::pool::Pool;
use crate::pubsub::Subscriber;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A handle to one Redis server for taking locks. Cheap to clone; clones share connections, the
/// pub/sub thread and the local queues.
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
    /// This client's random id: the first half of every owner id it makes.
    pub(crate) id: String,
    pub(crate) default_lease: Duration,
    pub(crate) command_timeout: Duration,
    pub(crate) prefix: String,
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
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    url: String,
    default_lease: Duration,
    connect_timeout: Duration,
    command_timeout: Duration,
    prefix: String,
    pool_size: usize,
    max_local_waiters: usize,
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

    /// Checks the settings and starts the pub/sub thread. Connects to nothing yet: an unreachable
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
        if self.prefix.contains(['{', '}']) {
            return Err(Error::InvalidArgument(
                "the key prefix must not contain braces".into(),
            ));
        }
        let redis_client = redis::Client::open(self.url.as_str()).map_err(|error| {
            Error::InvalidArgument(format!("redis url {:?}: {error}", self.url))
        })?;
        let pool = Arc::new(Pool::new(
            redis_client,
            self.pool_size,
            self.connect_timeout,
            self.command_timeout,
        ));
        let id = owner::random_id()?;
        let subscriber = Subscriber::start(Arc::clone(&pool), format!("lease-pubsub-{}", &id[..8]))
            .map_err(Error::Spawn)?;
        Ok(Client {
            inner: Arc::new(Inner {
                pool,
                subscriber,
                queues: LocalQueues::new(self.max_local_waiters),
                id,
                default_lease: self.default_lease,
                command_timeout: self.command_timeout,
                prefix: self.prefix,
                release_seq: AtomicU64::new(0),
            }),
        })
    }
}
