//! [`Client`]: what every lock of one client shares (its backend, waiters, local queues and
//! watchdog), and [`ClientBuilder`], the one set of settings for every deployment.

use crate::backend::{Kind, LockId, Settings};
use crate::error::{Error, Result};
use crate::events::Events;
use crate::lock::core::{Core, Parts};
use crate::lock::Lock;
use crate::owner;
use crate::policy::{check_lease, check_timeout};
use crate::rwlock::ReadWriteLock;
use crate::semaphore::Semaphore;
use crate::stores::redis::conn::redact;
use crate::stores::redis::conn::Pem;
use crate::stores::redis::scripts::Acks;
use crate::stores::redis::{cluster, quorum, sentinel, server};
use crate::watchdog::{self, Watchdog, WatchdogMetrics};
use hashwheel::Timer;
use std::sync::Arc;
use std::time::Duration;

/// A handle for taking locks on one Redis deployment: one server ([`Client::builder`]), a Redis
/// Cluster ([`Client::cluster`]), or several independent masters (RedLock, [`Client::redlock`]).
/// Every lock method works the same on each. Cheap to clone; clones share connections, threads
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
    /// A client with the default settings for the server at `url`.
    ///
    /// # Errors
    ///
    /// As [`ClientBuilder::build`]: [`Error::InvalidArgument`] for a URL that does not parse,
    /// [`Error::Spawn`] if a thread cannot be started.
    pub fn open(url: &str) -> Result<Client> {
        Client::builder(url).build()
    }

    /// Settings for a client of one server: `redis://[user:password@]host[:port][/db]`, or
    /// `redis+unix:///path/to/socket[?db=N]`.
    pub fn builder(url: impl Into<String>) -> ClientBuilder {
        ClientBuilder::new(Topology::Server(url.into()))
    }

    /// Settings for a client of the one server an application's `redis` crate already connects
    /// to: its address (`redis://`, `rediss://` or a Unix socket), user, password and database.
    /// The password goes to [`ClientBuilder::password`], never into a URL. TLS certificates set
    /// in the `ConnectionInfo` cannot be read back out of it: give them with
    /// [`ClientBuilder::tls_ca_file`] and [`ClientBuilder::tls_client_cert`].
    ///
    /// ```no_run
    /// use redis_lease::{redis::IntoConnectionInfo, Client};
    ///
    /// let info = "redis://app@127.0.0.1:6379/2".into_connection_info()?;
    /// let client = Client::from_connection_info(&info)?.build()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for TLS without hostname verification (`insecure`), which the
    /// crate does not offer, and for TLS certificates given in the `ConnectionInfo`.
    pub fn from_connection_info(info: &redis::ConnectionInfo) -> Result<ClientBuilder> {
        let settings = info.redis_settings();
        let user = settings
            .username()
            .map_or_else(String::new, |user| format!("{}@", percent_encode(user)));
        let db = settings.db();
        let url = match info.addr() {
            redis::ConnectionAddr::Tcp(host, port) => format!("redis://{user}{host}:{port}/{db}"),
            redis::ConnectionAddr::TcpTls {
                host,
                port,
                insecure,
                tls_params,
            } => {
                if *insecure || tls_params.is_some() {
                    return Err(Error::InvalidArgument(
                        "a ConnectionInfo with insecure TLS or its own certificates: give the \
                         certificates with tls_ca_file and tls_client_cert instead"
                            .into(),
                    ));
                }
                format!("rediss://{user}{host}:{port}/{db}")
            }
            redis::ConnectionAddr::Unix(path) => {
                format!("redis+unix://{}?db={db}", path.display())
            }
            other => {
                return Err(Error::InvalidArgument(format!(
                    "a ConnectionInfo for {other}, which this crate cannot reach"
                )))
            }
        };
        let builder = Client::builder(url);
        Ok(match settings.password() {
            Some(password) => builder.password(password),
            None => builder,
        })
    }

    /// Settings for a client of a Redis Cluster, given the URL of one or more of its nodes (the
    /// seeds): the client learns the other nodes and which master serves which slot from them,
    /// and follows the cluster as slots move and replicas are promoted. Each lock lives in the
    /// slot of its name, with its fencing counter.
    ///
    /// ```no_run
    /// use redis_lease::Client;
    ///
    /// let client = Client::cluster(["redis://10.0.0.1:7000", "redis://10.0.0.2:7000"]).build()?;
    /// let guard = client.lock("reports/nightly")?.lock()?;
    /// guard.unlock()?;
    /// # Ok::<(), redis_lease::Error>(())
    /// ```
    pub fn cluster<I, S>(seeds: I) -> ClientBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ClientBuilder::new(Topology::Cluster(
            seeds.into_iter().map(Into::into).collect(),
        ))
    }

    /// Settings for a client of a primary that Redis Sentinel manages: `master` is the name the
    /// Sentinels monitor it under, `sentinels` the URLs of some or all of them
    /// (`redis://host:26379`). The client asks them for the primary each time it connects, and
    /// takes a primary only if a majority of the given Sentinels answer; it follows failovers
    /// for lock calls, renewals and the waiters' pub/sub connection. The URLs' login (user and
    /// password, or [`ClientBuilder::password`]) and transport (`rediss://`) are used for the
    /// Sentinels and the data servers alike, and their database for the data servers.
    ///
    /// Fencing tokens carry the Sentinels' configuration epoch of the primary in their high
    /// bits, so that they rise across every failover, also one whose primary never replicated
    /// the last tokens it handed out.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use redis_lease::Client;
    ///
    /// let sentinels = ["redis://10.0.0.1:26379", "redis://10.0.0.2:26379", "redis://10.0.0.3:26379"];
    /// let client = Client::sentinel("mymaster", sentinels)
    ///     .replica_acks(1, Duration::from_millis(200))
    ///     .build()?;
    /// let guard = client.lock("billing/invoices")?.lock()?;
    /// guard.unlock()?;
    /// # Ok::<(), redis_lease::Error>(())
    /// ```
    pub fn sentinel<I, S>(master: &str, sentinels: I) -> ClientBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ClientBuilder::new(Topology::Sentinel {
            master: master.to_owned(),
            urls: sentinels.into_iter().map(Into::into).collect(),
        })
    }

    /// Settings for a client that takes each lock on a quorum of independent masters (RedLock),
    /// each given by its URL. A master that is down when the client is built is allowed: it
    /// counts as a failed vote until it answers. Its locks have no fencing tokens.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use redis_lease::Client;
    ///
    /// let masters = ["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"];
    /// let client = Client::redlock(masters)
    ///     .command_timeout(Duration::from_millis(50))
    ///     .build()?;
    /// let guard = client.lock("payments/settlement")?.lock()?;
    /// // ... work while !guard.is_lost() ...
    /// guard.unlock()?;
    /// # Ok::<(), redis_lease::Error>(())
    /// ```
    pub fn redlock<I, S>(urls: I) -> ClientBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ClientBuilder::new(Topology::RedLock(
            urls.into_iter().map(Into::into).collect(),
        ))
    }

    /// Settings for a client that takes its locks on a ZooKeeper ensemble (feature
    /// `zookeeper`), given as `host:port` items, or as one connect string
    /// (`"zk1:2181,zk2:2181,zk3:2181/chroot"`). Each hold is an ephemeral sequential node; the
    /// client's session is every hold's lease, so the default lease is the session timeout the
    /// client asks for (the ensemble may grant less; a lease longer than the session's timeout
    /// is refused). Fencing tokens are the holder nodes' creation zxids.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use redis_lease::Client;
    ///
    /// let client = Client::zookeeper(["10.0.0.1:2181", "10.0.0.2:2181", "10.0.0.3:2181"])
    ///     .default_lease(Duration::from_secs(10))
    ///     .build()?;
    /// let guard = client.lock("billing/invoices")?.lock()?;
    /// let token = guard.fencing_token();
    /// guard.unlock()?;
    /// # let _ = token;
    /// # Ok::<(), redis_lease::Error>(())
    /// ```
    #[cfg(feature = "zookeeper")]
    pub fn zookeeper<I, S>(hosts: I) -> ClientBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut zk = crate::stores::zookeeper::ZooKeeperSettings::default();
        for item in hosts {
            let item: String = item.into();
            let hosts = match item.split_once('/') {
                Some((hosts, chroot)) => {
                    zk.chroot = Some(format!("/{chroot}"));
                    hosts.to_owned()
                }
                None => item,
            };
            zk.hosts.extend(
                hosts
                    .split(',')
                    .map(str::trim)
                    .filter(|host| !host.is_empty())
                    .map(str::to_owned),
            );
        }
        ClientBuilder::new(Topology::ZooKeeper(zk))
    }

    /// A lock by name: 1 to 1024 bytes, without `{` or `}`; on ZooKeeper, also a relative node
    /// path (segments separated by single `/`, none `.` or `..`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a name that is empty, longer than 1024 bytes, or has `{` or
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
    /// # Errors
    ///
    /// As [`Client::lock`], and [`Error::InvalidArgument`] on RedLock.
    pub fn fair_lock(&self, name: &str) -> Result<Lock> {
        self.primitive(name, Kind::Fair)
    }

    /// A semaphore of `permits` (1 to 10,000): at most that many permits held at once, each
    /// acquisition a lease of its own (see [`Semaphore`]). Not offered on RedLock.
    ///
    /// # Errors
    ///
    /// As [`Client::lock`], and [`Error::InvalidArgument`] for permits out of range, or on
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
    /// As [`Client::lock`], and [`Error::InvalidArgument`] on RedLock.
    pub fn read_write_lock(&self, name: &str) -> Result<ReadWriteLock> {
        let read = self.primitive(name, Kind::Read)?;
        Ok(ReadWriteLock::new(read.clone(), read.of_kind(Kind::Write)))
    }

    /// The primitive `kind` named `name`, if it can live on this deployment.
    fn primitive(&self, name: &str, kind: Kind) -> Result<Lock> {
        let place = self.core.backend().place(&LockId::new(name, kind)?)?;
        Ok(Lock::new(Arc::clone(&self.core), place))
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

/// Which deployment a client talks to.
#[derive(Clone)]
enum Topology {
    Server(String),
    Cluster(Vec<String>),
    RedLock(Vec<String>),
    Sentinel {
        master: String,
        urls: Vec<String>,
    },
    #[cfg(feature = "zookeeper")]
    ZooKeeper(crate::stores::zookeeper::ZooKeeperSettings),
}

impl Topology {
    /// The URLs the builder was given.
    fn urls(&self) -> &[String] {
        match self {
            Topology::Server(url) => std::slice::from_ref(url),
            Topology::Cluster(urls) | Topology::RedLock(urls) | Topology::Sentinel { urls, .. } => {
                urls
            }
            #[cfg(feature = "zookeeper")]
            Topology::ZooKeeper(zk) => &zk.hosts,
        }
    }
}

/// Settings for a [`Client`], from [`Client::builder`] or [`Client::redlock`]. Every setting is
/// checked by [`ClientBuilder::build`]; a bad one is an [`Error::InvalidArgument`] there, never a
/// failure later.
#[derive(Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct ClientBuilder {
    topology: Topology,
    /// What the deployment is built from.
    backend: Settings,
    default_lease: Duration,
    prefix: String,
    max_local_waiters: usize,
    renewal_batch: usize,
    timer: Option<Timer>,
    name: Option<String>,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let urls: Vec<String> = self.topology.urls().iter().map(|url| redact(url)).collect();
        f.debug_struct("ClientBuilder")
            .field("urls", &urls)
            .field("default_lease", &self.default_lease)
            .field("command_timeout", &self.backend.command_timeout)
            .field("prefix", &self.prefix)
            .field("quorum", &self.backend.quorum)
            .field("password", &self.backend.password.as_ref().map(|_| "***"))
            .field("tls", &self.backend.tls)
            .finish_non_exhaustive()
    }
}

impl ClientBuilder {
    fn new(topology: Topology) -> ClientBuilder {
        ClientBuilder {
            topology,
            backend: Settings::default(),
            default_lease: Duration::from_secs(30),
            prefix: String::new(),
            max_local_waiters: 1024,
            renewal_batch: watchdog::DEFAULT_BATCH,
            timer: None,
            name: None,
        }
    }

    /// The client's name in its metrics (the label `client`, see docs/lease.md "Metrics"): a
    /// stable name an operator graphs by, such as the service's. Default: the client's random id,
    /// new with each process. 1 to 128 bytes.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// For `rediss://` servers: a PEM file of CA certificates to trust beside the system's (a
    /// managed service's, or your own CA's). Read when the client is built.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn tls_ca_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.backend.tls.ca_file = Some(Pem::File(path.into()));
        self
    }

    /// [`ClientBuilder::tls_ca_file`] with the PEM text itself (from a secret store, say), in
    /// place of a file.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn tls_ca_pem(mut self, pem: impl AsRef<[u8]>) -> Self {
        self.backend.tls.ca_file = Some(Pem::Text(pem.as_ref().into()));
        self
    }

    /// [`ClientBuilder::tls_client_cert`] with the PEM text of the chain and of the key, in
    /// place of files. The key is never shown (the builder's `Debug` gives its length).
    #[must_use = "a setting applies to the builder it returns"]
    pub fn tls_client_cert_pem(mut self, cert: impl AsRef<[u8]>, key: impl AsRef<[u8]>) -> Self {
        self.backend.tls.client_cert = Some((
            Pem::Text(cert.as_ref().into()),
            Pem::Text(key.as_ref().into()),
        ));
        self
    }

    /// For `rediss://` servers that ask for a client certificate: a PEM certificate chain and its
    /// private key. Read when the client is built.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn tls_client_cert(
        mut self,
        cert: impl Into<std::path::PathBuf>,
        key: impl Into<std::path::PathBuf>,
    ) -> Self {
        self.backend.tls.client_cert = Some((Pem::File(cert.into()), Pem::File(key.into())));
        self
    }

    /// The password to log in with, in place of any in the URLs: to keep it out of a URL that
    /// is shown (a command line, a configuration file). It is never shown itself.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.backend.password = Some(password.into());
        self
    }

    /// On ZooKeeper: the user and password to authenticate the session with (the `digest`
    /// scheme), for nodes whose ACLs ask for them. Never shown. Ignored on Redis.
    #[cfg(feature = "zookeeper")]
    #[must_use = "a setting applies to the builder it returns"]
    pub fn zookeeper_auth(mut self, user: &str, password: &str) -> Self {
        if let Topology::ZooKeeper(zk) = &mut self.topology {
            zk.digest = Some(format!("{user}:{password}"));
        }
        self
    }

    /// The lease of a lock taken without one, renewed every third of it while held; from 10 ms
    /// to a year, in whole milliseconds; default 30 s.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn default_lease(mut self, lease: Duration) -> Self {
        self.default_lease = lease;
        self
    }

    /// How long opening a connection may take; default 2 s, at most an hour.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.backend.connect_timeout = timeout;
        self
    }

    /// How long one call to Redis may take in all, connecting included, however the server
    /// answers; default 2 s, at most an hour. On RedLock, the time each call gives the masters
    /// to answer: keep it far below the lease.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.backend.command_timeout = timeout;
        self
    }

    /// A prefix for every key and channel, to share a server between applications.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Idle connections kept for reuse, per server; default 8. Busy threads open more when all
    /// are in use.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn pool_size(mut self, size: usize) -> Self {
        self.backend.pool_size = size;
        self
    }

    /// Whether threads' calls to a server share one connection, their commands written and
    /// read in batches (pipelined); default on. Each call keeps its own deadline. Off, each
    /// call has a pooled connection to itself: one system call on the server per command, which
    /// costs the server more when many threads call at once. Calls that wait for replica
    /// acknowledgements ([`ClientBuilder::replica_acks`]), follow a cluster's `ASK` redirect or
    /// go over TLS always have a connection to themselves, as do RedLock's.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn pipelining(mut self, on: bool) -> Self {
        self.backend.pipelining = on;
        self
    }

    /// How many threads of this client may wait for one lock behind the one contending in Redis;
    /// more are refused at once with [`Error::QueueFull`]. Default 1024.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn max_local_waiters(mut self, max: usize) -> Self {
        self.max_local_waiters = max;
        self
    }

    /// How many leases one renewal call renews at most, from 1 to 10,000; default 100.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn renewal_batch(mut self, batch: usize) -> Self {
        self.renewal_batch = batch;
        self
    }

    /// The timer the watchdog schedules renewals and deadlines on, instead of one of its own: to
    /// share one timer thread between clients, or to drive the watchdog with a
    /// [`hashwheel::ManualClock`] in tests. Its tick bounds how late a holder is told of a loss.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn timer(mut self, timer: Timer) -> Self {
        self.timer = Some(timer);
        self
    }

    /// Requires every acquisition, renewal and release to reach `replicas` replicas of the
    /// primary within `timeout` (`WAIT` behind each script call) before it counts. An
    /// acquisition that is not acknowledged in time is undone and fails with
    /// [`Error::NotReplicated`], never handed out; a renewal that is not counts as not made (the
    /// watchdog tries again before the lease's deadline); a release that is not is reported and
    /// sent again before the same owner takes the lock again. A release never hands the lock
    /// straight to a waiting thread of the client then: the waiter acquires it itself.
    ///
    /// This makes an acknowledged hold survive the failover of a primary to one of those
    /// replicas; it is not consensus: a replica that acknowledged and then lost the write (a
    /// restart without persistence) or a promotion of a replica that did not acknowledge can
    /// still lose a hold. See the guarantees in the crate documentation. `replicas` must be from
    /// 1 to 2^63 - 1 (what `WAIT` takes) and `timeout` below the command timeout, or
    /// [`ClientBuilder::build`] fails with [`Error::InvalidArgument`]. Not for RedLock.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn replica_acks(mut self, replicas: usize, timeout: Duration) -> Self {
        self.backend.acks = Some(Acks {
            replicas: u64::try_from(replicas).unwrap_or(u64::MAX),
            timeout,
        });
        self
    }

    /// RedLock only: how many masters must grant a lock, from N/2+1 (the default) to N.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn quorum(mut self, quorum: usize) -> Self {
        self.backend.quorum = Some(quorum);
        self
    }

    /// RedLock only: the longest random pause between two attempts of a waiting call; default
    /// 20 ms.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        self.backend.retry_delay = Some(delay);
        self
    }

    /// Checks the settings and starts the client's threads. On one server it connects to
    /// nothing yet: an unreachable server shows on the first lock operation. On RedLock it asks
    /// the masters that answer who they are, to refuse two URLs of one server.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a setting out of range, a URL that does not parse (its
    /// password never repeated), TLS files that cannot be read, or two RedLock URLs that reach
    /// one server; [`Error::Spawn`] if a thread cannot be started.
    pub fn build(self) -> Result<Client> {
        let default_lease = check_lease("the default lease", self.default_lease)?;
        check_timeout("connect timeout", self.backend.connect_timeout)?;
        check_timeout("command timeout", self.backend.command_timeout)?;
        if self
            .backend
            .retry_delay
            .is_some_and(|delay| delay.is_zero())
        {
            return Err(Error::InvalidArgument(
                "the retry delay must be above zero".into(),
            ));
        }
        watchdog::check_batch(self.renewal_batch)?;
        crate::backend::check_prefix(&self.prefix)?;
        if self
            .name
            .as_ref()
            .is_some_and(|name| name.is_empty() || name.len() > 128)
        {
            return Err(Error::InvalidArgument(
                "a client's name is 1 to 128 bytes".into(),
            ));
        }
        let settings = Settings {
            client_id: owner::random_id()?,
            prefix: self.prefix.clone(),
            ..self.backend
        };
        let endpoints = || settings.endpoints(self.topology.urls());
        let backend = match &self.topology {
            Topology::Server(_) => server::build(&settings, endpoints()?)?,
            Topology::Cluster(_) => cluster::build(&settings, endpoints()?)?,
            Topology::Sentinel { master, .. } => sentinel::build(&settings, master, endpoints()?)?,
            Topology::RedLock(_) => quorum::build(&settings, endpoints()?)?,
            #[cfg(feature = "zookeeper")]
            Topology::ZooKeeper(zk) => {
                crate::stores::zookeeper::build(&settings, zk, default_lease)?
            }
        };
        let events = Events::new(self.name.as_deref().unwrap_or(&settings.client_id));
        let timer = watchdog::timer_or_new(self.timer, settings.thread_name("timer"))?;
        let watchdog = Watchdog::start(
            timer,
            backend.renewer(),
            self.renewal_batch,
            settings.thread_name("renew"),
            events.clone(),
        )?;
        let waiters = backend.waiters(settings.thread_name("pubsub"))?;
        Ok(Client {
            core: Arc::new(Core::new(Parts {
                backend,
                waiters,
                watchdog,
                max_local_waiters: self.max_local_waiters,
                id: settings.client_id,
                default_lease,
                events,
                name: self.name,
            })),
        })
    }
}

/// `text` with every byte but RFC 3986's unreserved characters as `%XX`: a user name in a URL.
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(byte).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}
