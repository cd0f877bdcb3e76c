//! [`ClientBuilder`]: the one set of settings for every deployment. Each store is built from
//! the settings it takes, and refuses those it cannot honour (a TLS file or a password on
//! ZooKeeper, ZooKeeper's authentication on Redis): every setting given is checked by
//! [`ClientBuilder::build`].

use super::Client;
use crate::backend::Settings;
use crate::error::{Error, Result};
use crate::events::Events;
use crate::lock::core::{Core, Parts};
use crate::owner;
use crate::policy::{check_lease, check_timeout};
use crate::redact::redact;
use crate::stores::redis::scripts::Acks;
use crate::stores::redis::settings::RedisSettings;
use crate::stores::redis::topology::Topology as Redis;
use crate::watchdog::{self, Watchdog};
use deadline_net::tls::Pem;
use hashwheel::Timer;
use std::time::Duration;

/// Which store a client talks to.
#[derive(Clone)]
pub(super) enum Topology {
    Redis(Redis),
    #[cfg(feature = "zookeeper")]
    ZooKeeper(crate::stores::zookeeper::ZooKeeperSettings),
    #[cfg(feature = "postgres")]
    Postgres(crate::stores::postgres::PostgresSettings),
}

impl Topology {
    /// The URLs or hosts the builder was given.
    fn urls(&self) -> &[String] {
        match self {
            Topology::Redis(redis) => redis.urls(),
            #[cfg(feature = "zookeeper")]
            Topology::ZooKeeper(zk) => &zk.hosts,
            #[cfg(feature = "postgres")]
            Topology::Postgres(pg) => std::slice::from_ref(&pg.url),
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
    /// What every store is built from.
    common: Settings,
    /// What a Redis deployment is built from.
    redis: RedisSettings,
    /// `user:password` for a ZooKeeper session's digest authentication.
    zookeeper_auth: Option<String>,
    /// PostgreSQL's schema and listening address, if given.
    #[cfg(feature = "postgres")]
    postgres_schema: Option<String>,
    #[cfg(feature = "postgres")]
    postgres_listen_url: Option<String>,
    default_lease: Duration,
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
            .field("command_timeout", &self.common.command_timeout)
            .field("prefix", &self.common.prefix)
            .field("quorum", &self.redis.quorum)
            .field("password", &self.common.password.as_ref().map(|_| "***"))
            .field(
                "zookeeper_auth",
                &self.zookeeper_auth.as_ref().map(|_| "***"),
            )
            .field("tls", &self.common.tls)
            .finish_non_exhaustive()
    }
}

impl ClientBuilder {
    pub(super) fn new(topology: Topology) -> ClientBuilder {
        ClientBuilder {
            topology,
            common: Settings::default(),
            redis: RedisSettings::default(),
            zookeeper_auth: None,
            #[cfg(feature = "postgres")]
            postgres_schema: None,
            #[cfg(feature = "postgres")]
            postgres_listen_url: None,
            default_lease: Duration::from_secs(30),
            max_local_waiters: 1024,
            renewal_batch: watchdog::DEFAULT_BATCH,
            timer: None,
            name: None,
        }
    }

    /// The client's name in its metrics (the label `client`; see "Metrics" in
    /// [`crate::guide::library`]): a stable name an operator graphs by, such as the service's.
    /// Default: the client's random id, new with each process. 1 to 128 bytes.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// For `rediss://` servers: a PEM file of CA certificates to trust beside the system's (a
    /// managed service's, or your own CA's). Read when the client is built. Redis only, as
    /// every TLS setting: refused on ZooKeeper.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn tls_ca_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.common.given.insert("tls_ca_file");
        self.common.tls.ca_file = Some(Pem::File(path.into()));
        self
    }

    /// [`ClientBuilder::tls_ca_file`] with the PEM text itself (from a secret store, say), in
    /// place of a file.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn tls_ca_pem(mut self, pem: impl AsRef<[u8]>) -> Self {
        self.common.given.insert("tls_ca_pem");
        self.common.tls.ca_file = Some(Pem::Text(pem.as_ref().into()));
        self
    }

    /// [`ClientBuilder::tls_client_cert`] with the PEM text of the chain and of the key, in
    /// place of files. The key is never shown (the builder's `Debug` gives its length).
    #[must_use = "a setting applies to the builder it returns"]
    pub fn tls_client_cert_pem(mut self, cert: impl AsRef<[u8]>, key: impl AsRef<[u8]>) -> Self {
        self.common.given.insert("tls_client_cert_pem");
        self.common.tls.client_cert = Some((
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
        self.common.given.insert("tls_client_cert");
        self.common.tls.client_cert = Some((Pem::File(cert.into()), Pem::File(key.into())));
        self
    }

    /// The password to log in with, in place of any in the URLs: to keep it out of a URL that
    /// is shown (a command line, a configuration file). It is never shown itself. Redis only:
    /// refused on ZooKeeper, which authenticates with [`ClientBuilder::zookeeper_auth`].
    #[must_use = "a setting applies to the builder it returns"]
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.common.given.insert("password");
        self.common.password = Some(password.into());
        self
    }

    /// On ZooKeeper: the user and password to authenticate the session with (the `digest`
    /// scheme), for nodes whose ACLs ask for them. Never shown. Refused on Redis by
    /// [`ClientBuilder::build`].
    #[cfg(feature = "zookeeper")]
    #[cfg_attr(docsrs, doc(cfg(feature = "zookeeper")))]
    #[must_use = "a setting applies to the builder it returns"]
    pub fn zookeeper_auth(mut self, user: &str, password: &str) -> Self {
        self.common.given.insert("zookeeper_auth");
        self.zookeeper_auth = Some(format!("{user}:{password}"));
        self
    }

    /// On PostgreSQL: the schema the store's tables and functions live in (made at the first
    /// call if it is missing, and the role may), default `lease`: 1 to 57 lower-case letters,
    /// digits and `_`. Refused on Redis and ZooKeeper by [`ClientBuilder::build`].
    #[cfg(feature = "postgres")]
    #[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
    #[must_use = "a setting applies to the builder it returns"]
    pub fn postgres_schema(mut self, schema: impl Into<String>) -> Self {
        self.common.given.insert("postgres_schema");
        self.postgres_schema = Some(schema.into());
        self
    }

    /// On PostgreSQL: the database's own address for the client's listening connection, when
    /// the client's URL is a pooler in transaction mode (PgBouncer), which cannot carry
    /// `LISTEN`. Without it, a client whose notifications do not arrive says so once in its log,
    /// and its waiters look again every second. The builder's password and TLS files apply to
    /// it too. Refused on Redis and ZooKeeper by [`ClientBuilder::build`].
    #[cfg(feature = "postgres")]
    #[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
    #[must_use = "a setting applies to the builder it returns"]
    pub fn postgres_listen_url(mut self, url: impl Into<String>) -> Self {
        self.common.given.insert("postgres_listen_url");
        self.postgres_listen_url = Some(url.into());
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
        self.common.connect_timeout = timeout;
        self
    }

    /// How long one call to Redis may take in all, connecting included, however the server
    /// answers; default 2 s, at most an hour. On RedLock, the time each call gives the masters
    /// to answer: keep it far below the lease.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.common.command_timeout = timeout;
        self
    }

    /// A prefix for every key and channel, to share a server between applications.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.common.prefix = prefix.into();
        self
    }

    /// Idle connections kept for reuse, per server; default 8. Busy threads open more when all
    /// are in use. Redis and PostgreSQL: refused on ZooKeeper, whose session is one connection.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn pool_size(mut self, size: usize) -> Self {
        self.common.given.insert("pool_size");
        self.redis.pool_size = size;
        self
    }

    /// The most connections per server lent to calls at once (besides the one threads share
    /// when pipelining, and the watchdog's and the subscriber's own): a call that finds them all
    /// in use waits for one to come back until its deadline, then fails with
    /// [`Error::Unavailable`](crate::Error::Unavailable) naming the cap. Default: no cap. A cap of
    /// 0 is refused by [`ClientBuilder::build`]; Redis only: refused on ZooKeeper, whose session
    /// is one connection.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn max_connections(mut self, max: usize) -> Self {
        self.common.given.insert("max_connections");
        self.redis.max_connections = Some(max);
        self
    }

    /// Whether threads' calls to a server share one connection, their commands written and
    /// read in batches (pipelined); default on. Each call keeps its own deadline. Off, each
    /// call has a pooled connection to itself: one system call on the server per command, which
    /// costs the server more when many threads call at once. Calls that wait for replica
    /// acknowledgements ([`ClientBuilder::replica_acks`]) or follow a cluster's `ASK` redirect
    /// always have a connection to themselves. Pipelining asked for (`true`) is refused where no
    /// call can share a connection: over TLS, on RedLock, and on ZooKeeper (which refuses the
    /// setting either way: its session is one connection).
    #[must_use = "a setting applies to the builder it returns"]
    pub fn pipelining(mut self, on: bool) -> Self {
        self.common.given.insert("pipelining");
        self.redis.pipelining = on;
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
    /// [`ClientBuilder::build`] fails with [`Error::InvalidArgument`]. Refused on RedLock and
    /// ZooKeeper, which do not fail over to replicas.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn replica_acks(mut self, replicas: usize, timeout: Duration) -> Self {
        self.common.given.insert("replica_acks");
        self.redis.acks = Some(Acks {
            replicas: u64::try_from(replicas).unwrap_or(u64::MAX),
            timeout,
        });
        self
    }

    /// RedLock only: how many masters must grant a lock, from N/2+1 (the default) to N. Refused
    /// on every other deployment.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn quorum(mut self, quorum: usize) -> Self {
        self.common.given.insert("quorum");
        self.redis.quorum = Some(quorum);
        self
    }

    /// RedLock only: the longest random pause between two attempts of a waiting call; default
    /// 20 ms. Refused on every other deployment.
    #[must_use = "a setting applies to the builder it returns"]
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        self.common.given.insert("retry_delay");
        self.redis.retry_delay = Some(delay);
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
        check_timeout("connect timeout", self.common.connect_timeout)?;
        check_timeout("command timeout", self.common.command_timeout)?;
        if self.redis.retry_delay.is_some_and(|delay| delay.is_zero()) {
            return Err(Error::InvalidArgument(
                "the retry delay must be above zero".into(),
            ));
        }
        watchdog::check_batch(self.renewal_batch)?;
        crate::backend::check_prefix(&self.common.prefix)?;
        if self
            .name
            .as_ref()
            .is_some_and(|name| name.is_empty() || name.len() > 128)
        {
            return Err(Error::InvalidArgument(
                "a client's name is 1 to 128 bytes".into(),
            ));
        }
        if self.redis.max_connections == Some(0) {
            return Err(Error::InvalidArgument(
                "max_connections must be at least 1: with none, no call could run".into(),
            ));
        }
        let common = Settings {
            client_id: owner::random_id()?,
            ..self.common
        };
        let backend = match &self.topology {
            Topology::Redis(redis) => redis.build(&RedisSettings {
                common: common.clone(),
                ..self.redis
            })?,
            #[cfg(feature = "zookeeper")]
            Topology::ZooKeeper(zk) => {
                let zk = crate::stores::zookeeper::ZooKeeperSettings {
                    digest: self.zookeeper_auth.clone(),
                    ..zk.clone()
                };
                crate::stores::zookeeper::build(&common, &zk, default_lease)?
            }
            #[cfg(feature = "postgres")]
            Topology::Postgres(pg) => {
                let pg = crate::stores::postgres::PostgresSettings {
                    schema: self.postgres_schema.clone(),
                    listen_url: self.postgres_listen_url.clone(),
                    ..pg.clone()
                };
                crate::stores::postgres::build(&common, &pg, self.redis.pool_size)?
            }
        };
        let events = Events::new(self.name.as_deref().unwrap_or(&common.client_id));
        let timer = watchdog::timer_or_new(self.timer, common.thread_name("timer"))?;
        let watchdog = Watchdog::start(
            timer,
            backend.renewer(),
            self.renewal_batch,
            common.thread_name("renew"),
            events.clone(),
        )?;
        let waiters = backend.waiters(common.thread_name("pubsub"))?;
        Ok(Client::new(Core::new(Parts {
            backend,
            waiters,
            watchdog,
            max_local_waiters: self.max_local_waiters,
            id: common.client_id,
            default_lease,
            events,
            name: self.name,
        })))
    }
}
