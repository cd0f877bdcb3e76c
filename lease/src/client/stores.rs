//! Where a client's locks live: one constructor per deployment, each returning the
//! [`ClientBuilder`] of its settings.

use super::builder::{ClientBuilder, Topology};
use super::Client;
use crate::error::Result;
use crate::stores::redis::topology::{connection_info_url, Topology as Redis};

impl Client {
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
}
