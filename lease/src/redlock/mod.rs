//! RedLock over independent Redis masters: [`Masters`] (the client) and [`RedLock`] (one name).
//!
//! An attempt sends the acquire script to every master at once, from the calling thread, with a
//! per-node timeout far below the lease; it wins if a quorum (by default N/2+1) granted it and the
//! lease, less the time the attempt took and the drift allowance, is still positive. A lost
//! attempt is undone on every master that may have granted it, and retried after a random delay
//! within the wait budget. Locks taken with the default lease are renewed on every master by the
//! watchdog; a hold is lost when renewals can no longer reach a quorum before its deadline.

mod bell;
mod fanout;
mod guard;
mod lock;
mod renewer;

pub use guard::RedLockGuard;
pub use lock::RedLock;

use crate::error::{Error, Result};
use crate::keys::LockKeys;
use crate::local_queue::LocalQueues;
use crate::owner;
use crate::watchdog::{self, Watchdog, WatchdogMetrics};
use bell::Bell;
use fanout::Master;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wheel::Timer;

/// A set of independent Redis masters to take RedLocks on. Cheap to clone.
///
/// ```no_run
/// use std::time::Duration;
/// use lease::Masters;
///
/// let masters = Masters::builder(["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"])
///     .node_timeout(Duration::from_millis(50))
///     .build()?;
/// let lock = masters.redlock("payments/settlement")?;
/// if let Some(guard) = lock.try_lock_for(Duration::from_secs(5))? {
///     // ... work while !guard.is_lost() ...
///     guard.unlock()?;
/// }
/// # Ok::<(), lease::Error>(())
/// ```
#[derive(Clone)]
pub struct Masters {
    inner: Arc<Inner>,
}

struct Inner {
    masters: Arc<Vec<Master>>,
    quorum: usize,
    node_timeout: Option<Duration>,
    default_lease: Duration,
    prefix: String,
    id: String,
    retry_delay: Duration,
    queues: LocalQueues,
    bell: Bell,
    watchdog: Watchdog,
    unsettled: crate::unsettled::UnsettledReleases,
    release_seq: AtomicU64,
    random: Mutex<u64>,
}

impl Inner {
    fn node_timeout(&self, lease: Duration) -> Duration {
        self.node_timeout
            .unwrap_or(lease / 20)
            .max(Duration::from_millis(1))
    }

    fn next_release_id(&self) -> String {
        let seq = self.release_seq.fetch_add(1, Ordering::Relaxed);
        format!("{}:{seq}", self.id)
    }

    /// A pause from 1 ms to `retry_delay`, so that contenders fall out of step.
    fn random_delay(&self) -> Duration {
        let mut state = self.random.lock();
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        let span = self.retry_delay.as_micros().max(1000) as u64;
        Duration::from_micros(1000 + *state % span.saturating_sub(999).max(1))
    }
}

impl Masters {
    /// Settings for a set of masters, each given by its URL. A master that is down is allowed:
    /// it counts as a failed vote until it answers.
    pub fn builder<I, S>(urls: I) -> MastersBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        MastersBuilder {
            urls: urls.into_iter().map(Into::into).collect(),
            default_lease: Duration::from_secs(30),
            node_timeout: None,
            quorum: None,
            prefix: String::new(),
            retry_delay: Duration::from_millis(20),
            max_local_waiters: 1024,
            renewal_batch: watchdog::DEFAULT_BATCH,
            timer: None,
        }
    }

    /// A RedLock by name, on every master.
    pub fn redlock(&self, name: &str) -> Result<RedLock> {
        Ok(RedLock {
            masters: self.clone(),
            keys: Arc::new(LockKeys::new(&self.inner.prefix, name)?),
        })
    }

    /// How many masters there are.
    pub fn len(&self) -> usize {
        self.inner.masters.len()
    }

    /// Always false: a set of masters has at least one.
    pub fn is_empty(&self) -> bool {
        self.inner.masters.is_empty()
    }

    /// How many masters must grant a lock.
    pub fn quorum(&self) -> usize {
        self.inner.quorum
    }

    /// The random id that starts every owner id this client makes.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// A snapshot of the watchdog's counters.
    pub fn watchdog_metrics(&self) -> WatchdogMetrics {
        self.inner.watchdog.metrics()
    }
}

impl std::fmt::Debug for Masters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let urls: Vec<&str> = self.inner.masters.iter().map(|m| m.url.as_str()).collect();
        f.debug_struct("Masters")
            .field("urls", &urls)
            .field("quorum", &self.inner.quorum)
            .finish_non_exhaustive()
    }
}

/// Settings for [`Masters`], from [`Masters::builder`].
#[derive(Clone)]
pub struct MastersBuilder {
    urls: Vec<String>,
    default_lease: Duration,
    node_timeout: Option<Duration>,
    quorum: Option<usize>,
    prefix: String,
    retry_delay: Duration,
    max_local_waiters: usize,
    renewal_batch: usize,
    timer: Option<Timer>,
}

impl std::fmt::Debug for MastersBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MastersBuilder")
            .field("urls", &self.urls)
            .field("quorum", &self.quorum)
            .finish_non_exhaustive()
    }
}

impl MastersBuilder {
    /// The lease of a lock taken without one (renewed while held); default 30 s.
    pub fn default_lease(mut self, lease: Duration) -> Self {
        self.default_lease = lease;
        self
    }

    /// How long one master may take to answer, and to connect; default 5% of the lease.
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = Some(timeout);
        self
    }

    /// How many masters must grant a lock: from N/2+1 (the default) to N.
    pub fn quorum(mut self, quorum: usize) -> Self {
        self.quorum = Some(quorum);
        self
    }

    /// A prefix for every key, as [`ClientBuilder::key_prefix`](crate::ClientBuilder::key_prefix).
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// The longest random pause between two attempts of a waiting call; default 20 ms.
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        self.retry_delay = delay;
        self
    }

    /// As [`ClientBuilder::max_local_waiters`](crate::ClientBuilder::max_local_waiters).
    pub fn max_local_waiters(mut self, max: usize) -> Self {
        self.max_local_waiters = max;
        self
    }

    /// As [`ClientBuilder::renewal_batch`](crate::ClientBuilder::renewal_batch).
    pub fn renewal_batch(mut self, batch: usize) -> Self {
        self.renewal_batch = batch;
        self
    }

    /// As [`ClientBuilder::timer`](crate::ClientBuilder::timer).
    pub fn timer(mut self, timer: Timer) -> Self {
        self.timer = Some(timer);
        self
    }

    /// Checks the settings and starts the watchdog. Connects to nothing yet.
    pub fn build(self) -> Result<Masters> {
        let count = self.urls.len();
        if count == 0 {
            return Err(Error::InvalidArgument(
                "a RedLock needs at least one master".into(),
            ));
        }
        let quorum = self.quorum.unwrap_or(count / 2 + 1);
        if quorum <= count / 2 || quorum > count {
            return Err(Error::InvalidArgument(format!(
                "a quorum of {quorum} over {count} masters cannot work: it must be from {} to {count}",
                count / 2 + 1
            )));
        }
        if self.default_lease.is_zero() || self.node_timeout.is_some_and(|t| t.is_zero()) {
            return Err(Error::InvalidArgument(
                "the default lease and the node timeout must be above zero".into(),
            ));
        }
        watchdog::check_batch(self.renewal_batch)?;
        crate::keys::check_prefix(&self.prefix)?;
        let timeout = self.node_timeout.unwrap_or(self.default_lease / 20);
        let mut masters: Vec<Master> = Vec::with_capacity(count);
        let mut seen = Vec::with_capacity(count);
        for url in &self.urls {
            let address = redis::IntoConnectionInfo::into_connection_info(url.as_str())
                .map(|info| (info.addr().to_string(), info.redis_settings().db()))
                .map_err(|error| Error::InvalidArgument(format!("redis url {url:?}: {error}")))?;
            if seen.contains(&address) {
                return Err(Error::InvalidArgument(format!(
                    "master {url:?} is given twice: RedLock needs independent masters"
                )));
            }
            seen.push(address);
            masters.push(Master::new(url, timeout)?);
        }
        let masters = Arc::new(masters);
        let id = owner::random_id()?;
        let short_id = &id[..8];
        let timer = watchdog::timer_or_new(self.timer, format!("redlock-timer-{short_id}"))?;
        let renewer = renewer::QuorumRenewer {
            masters: Arc::clone(&masters),
            quorum,
            node_timeout: timeout,
        };
        let watchdog = Watchdog::start(
            timer,
            Box::new(renewer),
            self.renewal_batch,
            timeout * 2,
            format!("redlock-renew-{short_id}"),
        )?;
        let seed = u64::from_str_radix(&id[..16], 16).unwrap_or(0x9e37_79b9_7f4a_7c15) | 1;
        Ok(Masters {
            inner: Arc::new(Inner {
                masters,
                quorum,
                node_timeout: self.node_timeout,
                default_lease: self.default_lease,
                prefix: self.prefix,
                id,
                retry_delay: self.retry_delay,
                queues: LocalQueues::new(self.max_local_waiters),
                bell: Bell::default(),
                watchdog,
                unsettled: Default::default(),
                release_seq: AtomicU64::new(0),
                random: Mutex::new(seed),
            }),
        })
    }
}
