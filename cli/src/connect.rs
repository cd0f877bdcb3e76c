//! How the tool reaches its store: the servers the connection options name (the server also
//! from `$REDIS_URL`; a `postgres://` URL is a PostgreSQL database, `--zookeeper` an ensemble);
//! the client built from them; and the servers named, without their passwords, in the messages
//! that concern them. The options themselves, as clap defines them, are in
//! `connect/options.rs`; what a PostgreSQL URL goes with, in `connect/postgres.rs`.

mod options;
mod postgres;

pub use options::Connection;

use crate::exit::{self, Failure};
use clap::parser::ValueSource;
use clap::ArgMatches;
use redis_lease::Client;

/// The server when no flag or variable gives one.
pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// Environment variables that carry the tool's secrets: never passed to the command.
pub const SECRETS: [&str; 4] = [
    "LEASE_REDIS_URL",
    "LEASE_REDIS_PASSWORD",
    "REDIS_URL",
    "LEASE_PG_LISTEN_URL",
];

/// Where the server's URL came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum UrlSource {
    Flag,
    LeaseVariable,
    RedisVariable,
    Default,
}

impl std::fmt::Display for UrlSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            UrlSource::Flag => "--url",
            UrlSource::LeaseVariable => "$LEASE_REDIS_URL",
            UrlSource::RedisVariable => "$REDIS_URL",
            UrlSource::Default => "the default",
        })
    }
}

/// How the servers are used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Topology {
    Server,
    Cluster,
    RedLock,
    Sentinel,
    ZooKeeper,
    Postgres,
}

/// The servers to connect to, settled from the options and the environment.
pub struct Servers {
    urls: Vec<String>,
    topology: Topology,
}

impl Servers {
    /// The URLs, without their passwords, comma-separated: for messages.
    pub fn shown(&self) -> String {
        let shown: Vec<String> = self
            .urls
            .iter()
            .map(|url| redis_lease::redact_url(url))
            .collect();
        shown.join(", ")
    }

    /// The servers as a message names them: the URLs given, and the one the failure came from
    /// if it is not among them (a cluster's node, the primary Sentinels named).
    fn at(&self, server: Option<&str>) -> String {
        let shown = self.shown();
        match server {
            Some(server) if !shown.contains(server) => format!("{server} (through {shown})"),
            _ => shown,
        }
    }

    /// `failure` naming the servers, if it is about them (unreachable, or refusing).
    pub fn named_in(&self, mut failure: Failure) -> Failure {
        match &failure.cause {
            Some(error @ redis_lease::Error::Unavailable { cause, .. }) => {
                let (store, at) = (cause.store(), self.at(error.server()));
                failure.message = format!("{store} unavailable at {at}: {cause}");
            }
            Some(error @ redis_lease::Error::Refused { cause, .. }) => {
                let (store, at) = (cause.store(), self.at(error.server()));
                failure.message = format!("{store} at {at} refused the call: {cause}");
            }
            _ => {}
        }
        failure
    }
}

impl Connection {
    /// The servers, from `--url`, else `$LEASE_REDIS_URL`, else `$REDIS_URL`, else the default;
    /// a cluster or RedLock masters by `--cluster` or `--redlock`, else by their variables; a
    /// PostgreSQL database by a `postgres://` URL.
    pub fn servers(&self, matches: &ArgMatches) -> Result<Servers, Failure> {
        if let Some(hosts) = &self.zookeeper {
            let on_command_line =
                |id: &str| global_source(matches, id) == Some(ValueSource::CommandLine);
            if ["url", "cluster", "redlock", "sentinel"]
                .into_iter()
                .any(on_command_line)
            {
                return Err(Failure::usage(
                    "--zookeeper excludes --url, --cluster, --redlock and --sentinel",
                ));
            }
            self.refuse_postgres_options(matches, "ZooKeeper")?;
            log::debug!("zookeeper ensemble {hosts}");
            return Ok(Servers {
                urls: vec![hosts.clone()],
                topology: Topology::ZooKeeper,
            });
        }
        let from_redis_url = || {
            std::env::var("REDIS_URL")
                .ok()
                .filter(|url| !url.trim().is_empty())
        };
        let (urls, source) = if !self.url.is_empty() {
            let source = match global_source(matches, "url") {
                Some(ValueSource::EnvVariable) => UrlSource::LeaseVariable,
                _ => UrlSource::Flag,
            };
            (self.url.clone(), source)
        } else if let Some(url) = from_redis_url() {
            let urls = url.split(',').map(|url| url.trim().to_owned()).collect();
            (urls, UrlSource::RedisVariable)
        } else {
            (vec![DEFAULT_URL.to_owned()], UrlSource::Default)
        };
        // A password holding a `,` cuts its URL in two where the list is split: the piece after
        // it has no scheme. No piece is shown, since each may hold part of the password.
        if !urls.iter().all(|url| has_scheme(url)) {
            return Err(Failure::usage(format!(
                "a URL (from {source}) has no scheme such as redis://: write a server as \
                 redis://host:port (rediss:// for TLS, unix:///path for a socket); a password \
                 holding ',' must be percent-encoded (%2C) or given with --password-file"
            )));
        }
        let topology = if urls.iter().any(|url| postgres::is_postgres(url)) {
            self.check_postgres(matches, &urls)?;
            Topology::Postgres
        } else {
            self.refuse_postgres_options(matches, "Redis")?;
            self.topology(matches)?
        };
        let servers = Servers { urls, topology };
        let what = match servers.topology {
            Topology::Server => "server",
            Topology::Cluster => "cluster seeds",
            Topology::RedLock => "RedLock masters",
            Topology::Sentinel => "Sentinels",
            Topology::ZooKeeper => "ZooKeeper ensemble",
            Topology::Postgres => "PostgreSQL database",
        };
        log::debug!("{what} {} (from {source})", servers.shown());
        Ok(servers)
    }

    /// `--cluster`, `--redlock` or `--sentinel`; a flag over the other's variable.
    fn topology(&self, matches: &ArgMatches) -> Result<Topology, Failure> {
        let on_command_line =
            |id: &str| global_source(matches, id) == Some(ValueSource::CommandLine);
        if self.sentinel.is_some() {
            return if self.cluster || self.redlock {
                Err(Failure::usage(
                    "--sentinel excludes --cluster and --redlock (also as LEASE_SENTINEL, \
                     LEASE_CLUSTER and LEASE_REDLOCK)",
                ))
            } else {
                Ok(Topology::Sentinel)
            };
        }
        match (self.cluster, self.redlock) {
            (false, false) => Ok(Topology::Server),
            (true, false) => Ok(Topology::Cluster),
            (false, true) => Ok(Topology::RedLock),
            (true, true) => match (on_command_line("cluster"), on_command_line("redlock")) {
                (true, false) => Ok(Topology::Cluster),
                (false, true) => Ok(Topology::RedLock),
                _ => Err(Failure::usage(
                    "--cluster and --redlock exclude each other (also as LEASE_CLUSTER and \
                     LEASE_REDLOCK)",
                )),
            },
        }
    }

    /// `failure` to acquire `name` on RedLock masters as unavailability if too few masters
    /// answer to make a quorum: the lock may be free, and trying later may succeed. The
    /// library tells an attempt that too few masters answered from one another owner won, on
    /// their answers alike; each master is asked on its own here, all at once, within the
    /// command timeout.
    pub fn unless_masters_unavailable(
        &self,
        servers: &Servers,
        name: &str,
        failure: Failure,
    ) -> Failure {
        if servers.topology != Topology::RedLock || failure.code != exit::NOT_ACQUIRED {
            return failure;
        }
        let answers: Vec<Result<(), String>> = std::thread::scope(|scope| {
            let asked: Vec<_> = servers
                .urls
                .iter()
                .map(|url| scope.spawn(move || self.ask_master(url, name)))
                .collect();
            asked
                .into_iter()
                .map(|asked| {
                    asked
                        .join()
                        .unwrap_or_else(|_| Err("the question failed".to_owned()))
                })
                .collect()
        });
        let quorum = servers.urls.len() / 2 + 1;
        let answered = answers.iter().filter(|answer| answer.is_ok()).count();
        if answered >= quorum {
            return failure;
        }
        let silent: Vec<String> = servers
            .urls
            .iter()
            .zip(&answers)
            .filter_map(|(url, answer)| {
                let error = answer.as_ref().err()?;
                Some(format!("{}: {error}", redis_lease::redact_url(url)))
            })
            .collect();
        Failure::new(
            exit::UNAVAILABLE,
            format!(
                "{name:?} was not acquired: {answered} of {} RedLock masters answered, fewer than \
                 a quorum of {quorum} ({})",
                servers.urls.len(),
                silent.join("; ")
            ),
        )
    }

    /// Whether the RedLock master at `url` answers for `name`, as a server of its own.
    fn ask_master(&self, url: &str, name: &str) -> Result<(), String> {
        let client = self
            .configured(Client::builder(url))
            .map_err(|failure| failure.message)?
            .build()
            .map_err(|error| error.to_string())?;
        let lock = client.lock(name).map_err(|error| error.to_string())?;
        lock.inspect().map(drop).map_err(|error| match error {
            redis_lease::Error::Unavailable { cause, .. }
            | redis_lease::Error::Refused { cause, .. } => cause.to_string(),
            other => other.to_string(),
        })
    }

    /// The client for `servers` with these options.
    pub fn client(&self, servers: &Servers) -> Result<Client, Failure> {
        let urls = servers.urls.iter().cloned();
        let builder = match (servers.topology, servers.urls.as_slice()) {
            (Topology::Cluster, _) => Client::cluster(urls),
            (Topology::RedLock, _) => Client::redlock(urls),
            (Topology::Sentinel, _) => {
                Client::sentinel(self.sentinel.as_deref().unwrap_or_default(), urls)
            }
            (Topology::ZooKeeper, _) => Client::zookeeper(urls),
            (Topology::Postgres, [url]) => self.postgres_configured(Client::postgres(url.as_str())),
            (Topology::Server, [url]) => Client::builder(url.as_str()),
            (Topology::Server | Topology::Postgres, _) => {
                return Err(Failure::usage(
                    "several URLs need --cluster (seed nodes) or --redlock (masters)",
                ))
            }
        };
        Ok(self.configured(builder)?.build()?)
    }

    /// `builder` with these options.
    fn configured(
        &self,
        builder: redis_lease::ClientBuilder,
    ) -> Result<redis_lease::ClientBuilder, Failure> {
        let mut builder = builder
            .key_prefix(self.prefix.as_str())
            .default_lease(self.lease.get())
            .connect_timeout(self.connect_timeout.get())
            .command_timeout(self.command_timeout.get());
        if let Some(replicas) = self.replica_acks {
            builder = builder.replica_acks(replicas, self.command_timeout.get() / 2);
        }
        if let Some(ca_file) = &self.tls_ca_file {
            builder = builder.tls_ca_file(ca_file);
        }
        if let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) {
            builder = builder.tls_client_cert(cert, key);
        }
        if let Some(password) = self.password()? {
            builder = builder.password(password);
        }
        Ok(builder)
    }

    /// The password given apart from the URL, if any: from the password file (its first line),
    /// else from `$LEASE_REDIS_PASSWORD`.
    fn password(&self) -> Result<Option<String>, Failure> {
        if let Some(path) = &self.password_file {
            let text = std::fs::read_to_string(path).map_err(|error| {
                Failure::new(
                    exit::USAGE,
                    format!("cannot read the password file {path:?}: {error}"),
                )
            })?;
            return Ok(Some(text.lines().next().unwrap_or_default().to_owned()));
        }
        Ok(std::env::var("LEASE_REDIS_PASSWORD").ok())
    }
}

/// Where a global option's value came from, whether it was given before the command's name or
/// after it.
fn global_source(matches: &ArgMatches, id: &str) -> Option<ValueSource> {
    match matches.subcommand() {
        Some((_, sub)) => sub.value_source(id).or_else(|| matches.value_source(id)),
        None => matches.value_source(id),
    }
}

/// Whether `url` starts with a scheme and a path (`redis://host`, `unix:/path`), as the `redis`
/// crate reads a URL; `host:port` does not.
fn has_scheme(url: &str) -> bool {
    let Some((scheme, rest)) = url.split_once(':') else {
        return false;
    };
    let mut letters = scheme.chars();
    letters
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic())
        && letters.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        && rest.starts_with('/')
}

#[cfg(test)]
mod scheme_tests {
    use super::has_scheme;

    #[test]
    fn a_url_has_a_scheme_and_a_path_and_host_port_has_not() {
        for url in [
            "redis://h:1",
            "rediss://h",
            "redis+unix:///tmp/r.sock?pass=x",
            "unix:/tmp/r.sock?pass=x",
            "valkey://h",
        ] {
            assert!(has_scheme(url), "{url}");
        }
        for url in ["localhost:6379", "h", "", "://h", "1redis://h", "pass@word"] {
            assert!(!has_scheme(url), "{url}");
        }
    }
}
