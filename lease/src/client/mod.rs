//! [`Client`]: what every lock of one client shares (its backend, waiters, local queues and
//! watchdog): one constructor per deployment, and the primitives; its settings are
//! [`ClientBuilder`]'s (`builder.rs`).

mod builder;

pub use builder::ClientBuilder;

use crate::backend::{Kind, LockId};
use crate::error::Result;
use crate::limiter::RateLimiter;
use crate::lock::core::Core;
use crate::lock::Lock;
use crate::rate::RateLimit;
use crate::rwlock::ReadWriteLock;
use crate::semaphore::Semaphore;
use crate::stores::redis::topology::{connection_info_url, Topology as Redis};
use crate::watchdog::WatchdogMetrics;
use builder::Topology;
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
    pub(crate) fn new(core: Core) -> Client {
        Client {
            core: Arc::new(core),
        }
    }

    /// A client with the default settings for the server at `url`.
    ///
    /// # Errors
    ///
    /// As [`ClientBuilder::build`]: [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a URL that does not parse,
    /// [`Error::Spawn`](crate::Error::Spawn) if a thread cannot be started.
    pub fn open(url: &str) -> Result<Client> {
        Client::builder(url).build()
    }

    /// Settings for a client of one server: `redis://[user:password@]host[:port][/db]`, or
    /// `redis+unix:///path/to/socket[?db=N]`.
    pub fn builder(url: impl Into<String>) -> ClientBuilder {
        ClientBuilder::new(Topology::Redis(Redis::Server(url.into())))
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
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for TLS without hostname verification (`insecure`), which the
    /// crate does not offer, and for TLS certificates given in the `ConnectionInfo`.
    pub fn from_connection_info(info: &redis::ConnectionInfo) -> Result<ClientBuilder> {
        let (url, password) = connection_info_url(info)?;
        let builder = Client::builder(url);
        Ok(match password {
            Some(password) => builder.password(password),
            None => builder,
        })
    }

    /// Settings for a client of the server an application's `redis::Client` connects to, as
    /// [`Client::from_connection_info`] with its connection info.
    ///
    /// ```no_run
    /// use redis_lease::Client;
    ///
    /// let app = redis_lease::redis::Client::open("redis://127.0.0.1:6379/2")?;
    /// let client = Client::from_redis_client(&app)?.build()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Client::from_connection_info`].
    pub fn from_redis_client(client: &redis::Client) -> Result<ClientBuilder> {
        Client::from_connection_info(client.get_connection_info())
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
        ClientBuilder::new(Topology::Redis(Redis::Cluster(
            seeds.into_iter().map(Into::into).collect(),
        )))
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
        ClientBuilder::new(Topology::Redis(Redis::Sentinel {
            master: master.to_owned(),
            urls: sentinels.into_iter().map(Into::into).collect(),
        }))
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
        ClientBuilder::new(Topology::Redis(Redis::RedLock(
            urls.into_iter().map(Into::into).collect(),
        )))
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
    #[cfg_attr(docsrs, doc(cfg(feature = "zookeeper")))]
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

    /// Settings for a client that takes its locks on PostgreSQL (feature `postgres`), at
    /// `postgres://[user[:password]@]host[:port]/database[?sslmode=...]` (or
    /// `postgresql://`; `host=/run/postgresql` for a Unix socket's directory). A hold is a row
    /// whose expiry the database's clock sets and judges; fencing tokens rise per name across
    /// restarts of the server; waiters are woken by `NOTIFY`. Every call is one round trip that
    /// keeps no session state, so a transaction-mode pooler (PgBouncer) may stand in front (see
    /// [`ClientBuilder::postgres_listen_url`]). The store's tables and functions are made in
    /// their schema ([`ClientBuilder::postgres_schema`], default `lease`) by the first call
    /// that finds them missing, if the role may (see the guide, "PostgreSQL").
    ///
    /// ```no_run
    /// use redis_lease::Client;
    ///
    /// let client = Client::postgres("postgres://app@db.internal/orders")
    ///     .password(std::env::var("PGPASSWORD").unwrap_or_default())
    ///     .build()?;
    /// let guard = client.lock("billing/invoices")?.lock()?;
    /// let token = guard.fencing_token();
    /// guard.unlock()?;
    /// # let _ = token;
    /// # Ok::<(), redis_lease::Error>(())
    /// ```
    #[cfg(feature = "postgres")]
    #[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
    pub fn postgres(url: impl Into<String>) -> ClientBuilder {
        ClientBuilder::new(Topology::Postgres(
            crate::stores::postgres::PostgresSettings {
                url: url.into(),
                schema: None,
                listen_url: None,
            },
        ))
    }

    /// The SQL that makes the PostgreSQL store's tables and functions in `schema` (the
    /// default is `lease`), for an administrator to run where the clients' role may not make
    /// them; then grant that role `USAGE` on the schema, `SELECT, INSERT, UPDATE, DELETE` on its
    /// tables and `EXECUTE` on its functions. A client makes them itself, at its first call,
    /// where its role may.
    ///
    /// ```
    /// let sql = redis_lease::Client::postgres_schema_sql("lease")?;
    /// assert!(sql.contains("CREATE TABLE IF NOT EXISTS lease.holds"));
    /// # Ok::<(), redis_lease::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a schema name that is not
    /// 1 to 57 lower-case letters, digits and `_`.
    #[cfg(feature = "postgres")]
    #[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
    pub fn postgres_schema_sql(schema: &str) -> Result<String> {
        crate::stores::postgres::schema_sql(schema)
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
