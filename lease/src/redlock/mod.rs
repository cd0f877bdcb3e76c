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
mod renewer;

pub use guard::RedLockGuard;

use crate::error::{Error, Result};
use crate::keys::LockKeys;
use crate::local_queue::{LocalQueues, Refused};
use crate::owner;
use crate::policy::{after, LeaseKind, Wait};
use crate::scripts::{self, Acquire, Release};
use crate::watchdog::{self, Hold, Watchdog, WatchdogMetrics};
use bell::Bell;
use fanout::{Answer, Master};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
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
        if self.renewal_batch == 0 {
            return Err(Error::InvalidArgument(
                "the renewal batch must be at least 1".into(),
            ));
        }
        if self.prefix.contains(['{', '}']) {
            return Err(Error::InvalidArgument(
                "the key prefix must not contain braces".into(),
            ));
        }
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
        let timer = match self.timer {
            Some(timer) => timer,
            None => Timer::builder()
                .thread_name(format!("redlock-timer-{short_id}"))
                .build()
                .map_err(|error| match error {
                    wheel::BuildError::Spawn(error) => Error::Spawn(error),
                    other => Error::InvalidArgument(format!("watchdog timer: {other}")),
                })?,
        };
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
                release_seq: AtomicU64::new(0),
                random: Mutex::new(seed),
            }),
        })
    }
}

/// One RedLock name over a set of [`Masters`]. Cheap to clone. Reentrant per thread on every
/// master, as [`Lock`](crate::Lock) is. No fencing token: no single counter exists across
/// independent masters.
#[derive(Clone)]
pub struct RedLock {
    masters: Masters,
    keys: Arc<LockKeys>,
}

impl RedLock {
    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.keys.name
    }

    /// The owner id the calling thread acts as.
    pub fn owner(&self) -> String {
        format!("{}:{}", self.masters.inner.id, owner::thread_id())
    }

    /// Takes the lock with the default lease, renewed while held, waiting as long as it takes.
    pub fn lock(&self) -> Result<RedLockGuard> {
        self.acquire(LeaseKind::Renewed, Wait::Until(None))?
            .ok_or_else(|| Error::Protocol("a waiting acquisition returned nothing".into()))
    }

    /// Takes the lock with the given lease, never renewed, waiting as long as it takes.
    pub fn lock_with_lease(&self, lease: Duration) -> Result<RedLockGuard> {
        self.acquire(LeaseKind::Fixed(lease), Wait::Until(None))?
            .ok_or_else(|| Error::Protocol("a waiting acquisition returned nothing".into()))
    }

    /// One attempt with the default lease (renewed while held): `Ok(None)` if no quorum granted
    /// it. [`Error::Unavailable`] if no master answered at all.
    pub fn try_lock(&self) -> Result<Option<RedLockGuard>> {
        self.acquire(LeaseKind::Renewed, Wait::No)
    }

    /// [`RedLock::try_lock`] with the given lease, never renewed.
    pub fn try_lock_with_lease(&self, lease: Duration) -> Result<Option<RedLockGuard>> {
        self.acquire(LeaseKind::Fixed(lease), Wait::No)
    }

    /// Attempts until `wait` has passed (default lease, renewed while held).
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<RedLockGuard>> {
        self.try_until(after(wait), LeaseKind::Renewed)
    }

    /// [`RedLock::try_lock_for`] with the given lease, never renewed.
    pub fn try_lock_for_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<RedLockGuard>> {
        self.try_until(after(wait), LeaseKind::Fixed(lease))
    }

    fn try_until(&self, deadline: Instant, kind: LeaseKind) -> Result<Option<RedLockGuard>> {
        match self.acquire(kind, Wait::Until(Some(deadline))) {
            Err(Error::Timeout { .. }) => Ok(None),
            other => other,
        }
    }

    fn acquire(&self, kind: LeaseKind, wait: Wait) -> Result<Option<RedLockGuard>> {
        let inner = &self.masters.inner;
        let lease = kind.lease(inner.default_lease)?;
        let started = Instant::now();
        let deadline = wait.deadline(started);
        let owner = self.owner();
        let turn = match inner.queues.enter(&self.keys.name, deadline) {
            Ok(turn) => turn,
            Err(Refused::Full { waiting }) => {
                return Err(Error::QueueFull {
                    name: self.keys.name.clone(),
                    waiting,
                })
            }
            Err(Refused::TimedOut) => return wait.gave_up(&self.keys.name, started),
        };
        // Listening before the first attempt: a release by a thread of this client between a
        // failed attempt and the wait wakes the wait at once.
        let mut released_here = inner.bell.listen(&self.keys.name);
        loop {
            if let Some(sent_at) = self.attempt(&owner, lease)? {
                drop(released_here);
                drop(turn);
                return self.guard(owner, lease, kind, sent_at).map(Some);
            }
            if matches!(wait, Wait::No) {
                return Ok(None);
            }
            let now = Instant::now();
            if deadline.is_some_and(|deadline| now >= deadline) {
                return wait.gave_up(&self.keys.name, started);
            }
            let pause = now + inner.random_delay();
            let until = deadline.map_or(pause, |deadline| deadline.min(pause));
            released_here.wait(until);
        }
    }

    /// One attempt on every master. Returns when it was sent if a quorum granted it in time;
    /// otherwise undoes it wherever it may have been granted.
    fn attempt(&self, owner: &str, lease: Duration) -> Result<Option<Instant>> {
        let inner = &self.masters.inner;
        let node_timeout = inner.node_timeout(lease);
        let sent_at = inner.watchdog.now();
        let acquire = scripts::pack_acquire(&self.keys, owner, lease);
        let undo = scripts::pack_release(&self.keys, owner, &inner.next_release_id(), lease);
        let all: Vec<&Master> = inner.masters.iter().collect();
        // Settled once a quorum granted it, or too few masters are left to.
        let quorum = inner.quorum;
        let settled = |answers: &[Answer]| {
            let (mut granted, mut refused) = (0, 0);
            for answer in answers {
                match answer {
                    Answer::Ints(reply) => match scripts::parse_acquire(reply) {
                        Ok(Acquire::Acquired { .. }) => granted += 1,
                        _ => refused += 1,
                    },
                    Answer::Failed(_) => refused += 1,
                    Answer::Silent => {}
                }
            }
            granted >= quorum || answers.len() - refused < quorum
        };
        let answers = fanout::exchange(
            &all,
            &acquire,
            Instant::now() + node_timeout,
            Some(&undo),
            &settled,
        );
        let mut granted: Vec<&Master> = Vec::new();
        let mut answered = 0;
        let mut last_error = None;
        for (master, answer) in inner.masters.iter().zip(answers) {
            match answer {
                Answer::Ints(reply) => {
                    answered += 1;
                    if let Ok(Acquire::Acquired { .. }) = scripts::parse_acquire(&reply) {
                        granted.push(master);
                    }
                }
                Answer::Failed(error) => last_error = Some(error),
                Answer::Silent => {}
            }
        }
        let valid_until = sent_at + lease.saturating_sub(watchdog::drift(lease));
        if granted.len() >= inner.quorum && inner.watchdog.now() < valid_until {
            return Ok(Some(sent_at));
        }
        if !granted.is_empty() {
            fanout::exchange(
                &granted,
                &undo,
                Instant::now() + node_timeout,
                None,
                &fanout::all_replies,
            );
        }
        match (answered, last_error) {
            (0, Some(error)) => Err(Error::Unavailable(error)),
            _ => Ok(None),
        }
    }

    fn guard(
        &self,
        owner: String,
        lease: Duration,
        kind: LeaseKind,
        sent_at: Instant,
    ) -> Result<RedLockGuard> {
        let inner = &self.masters.inner;
        let watched = inner.watchdog.watch(Hold {
            keys: Arc::clone(&self.keys),
            owner: Arc::from(owner.as_str()),
            lease,
            renew: kind.renewed(),
            max_hold: None,
            sent_at,
        });
        match watched {
            Ok(watched) => Ok(RedLockGuard::new(self.clone(), owner, lease, watched)),
            Err(error) => {
                let _ = self.release(&owner, lease);
                Err(error)
            }
        }
    }

    pub(crate) fn watchdog(&self) -> &Watchdog {
        &self.masters.inner.watchdog
    }

    /// Releases one hold of `owner` on every master, waiting at most the node timeout. Succeeds
    /// if any master applied it.
    pub(crate) fn release(&self, owner: &str, lease: Duration) -> Result<()> {
        let inner = &self.masters.inner;
        let call = scripts::pack_release(&self.keys, owner, &inner.next_release_id(), lease);
        let all: Vec<&Master> = inner.masters.iter().collect();
        let deadline = Instant::now() + inner.node_timeout(lease);
        let answers = fanout::exchange(&all, &call, deadline, None, &fanout::all_replies);
        inner.bell.ring(&self.keys.name);
        let (mut applied, mut not_owner, mut last_error) = (0, 0, None);
        for answer in answers {
            match answer {
                Answer::Ints(reply) => match scripts::parse_release(&reply) {
                    Ok(Release::NotOwner) => not_owner += 1,
                    Ok(_) => applied += 1,
                    Err(error) => last_error = Some(error),
                },
                Answer::Failed(error) => last_error = Some(Error::Unavailable(error)),
                Answer::Silent => {}
            }
        }
        if applied > 0 {
            Ok(())
        } else if not_owner > 0 {
            Err(Error::NotOwner {
                name: self.keys.name.clone(),
                owner: owner.to_owned(),
            })
        } else {
            Err(last_error.unwrap_or_else(|| {
                Error::Unavailable(redis::RedisError::from((
                    redis::ErrorKind::Io,
                    "no master answered the release in time",
                )))
            }))
        }
    }
}

impl std::fmt::Debug for RedLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedLock")
            .field("name", &self.keys.name)
            .finish_non_exhaustive()
    }
}
