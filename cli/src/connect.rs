//! How the tool reaches Redis: the connection options, each from its flag, else its `LEASE_*`
//! variable, else its default (the server also from `$REDIS_URL`); the client built from them;
//! and the servers named, without their passwords, in the messages that concern them.

use crate::exit::{self, Failure};
use clap::builder::FalseyValueParser;
use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory};
use redis_lease::Client;
use std::path::PathBuf;
use std::time::Duration;

/// The server when no flag or variable gives one.
pub const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// The shortest lease the tool takes. Renewed every third of it, with the command stopped
/// before its deadline less a grace of up to a third of it, a shorter lease leaves a renewal
/// too little time to land on a loaded host, and the command is stopped while the lock is
/// free. Measured with `lease run --lease X job -- sleep 2` against an idle local server, the
/// host's other core busy: 150 ms was stopped once in 8 runs, 200 ms never in 20; this is
/// that with margin.
pub const LEASE_FLOOR: Duration = Duration::from_millis(300);

/// Environment variables that carry the tool's secrets: never passed to the command.
pub const SECRETS: [&str; 3] = ["LEASE_REDIS_URL", "LEASE_REDIS_PASSWORD", "REDIS_URL"];

/// The connection options every command takes.
#[derive(Args)]
pub struct Connection {
    /// The Redis server: redis://[user[:password]@]host[:port][/db], rediss://... (TLS) or
    /// redis+unix:///path; several, comma-separated or repeated, with --cluster, --redlock or
    /// --sentinel
    /// [default: $REDIS_URL, else redis://127.0.0.1:6379]
    #[arg(
        long,
        global = true,
        env = "LEASE_REDIS_URL",
        hide_env_values = true,
        value_delimiter = ',',
        value_name = "URL"
    )]
    url: Vec<String>,
    /// The URLs are seed nodes of a Redis Cluster
    #[arg(
        long,
        global = true,
        env = "LEASE_CLUSTER",
        hide_env_values = true,
        value_parser = FalseyValueParser::new()
    )]
    cluster: bool,
    /// The URLs are independent masters, each lock taken on a quorum of them (RedLock; no
    /// fencing tokens)
    #[arg(
        long,
        global = true,
        env = "LEASE_REDLOCK",
        hide_env_values = true,
        value_parser = FalseyValueParser::new()
    )]
    redlock: bool,
    /// The URLs are Sentinels of the primary they monitor under this name; the lock follows
    /// the primary across failovers
    #[arg(
        long,
        global = true,
        value_name = "MASTER",
        env = "LEASE_SENTINEL",
        hide_env_values = true
    )]
    sentinel: Option<String>,
    /// Take the locks on this ZooKeeper ensemble instead of Redis: host:port items,
    /// comma-separated, with an optional chroot after the last (zk1:2181,zk2:2181/app)
    #[arg(
        long,
        global = true,
        value_name = "HOSTS",
        env = "LEASE_ZOOKEEPER",
        hide_env_values = true
    )]
    zookeeper: Option<String>,
    /// Count an acquisition, renewal or release only once this many replicas have it (WAIT),
    /// within half the command timeout; an acquisition they do not acknowledge is undone
    #[arg(
        long,
        global = true,
        value_name = "N",
        env = "LEASE_REPLICA_ACKS",
        hide_env_values = true
    )]
    replica_acks: Option<usize>,
    /// A PEM file of CA certificates to trust for rediss:// servers, beside the system's
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "LEASE_TLS_CA_FILE",
        hide_env_values = true
    )]
    tls_ca_file: Option<PathBuf>,
    /// A PEM file of the client certificate (and its chain) to present to rediss:// servers
    /// that ask for one; with --tls-key
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "LEASE_TLS_CERT",
        hide_env_values = true,
        requires = "tls_key"
    )]
    tls_cert: Option<PathBuf>,
    /// The PEM file of the client certificate's private key; with --tls-cert
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "LEASE_TLS_KEY",
        hide_env_values = true,
        requires = "tls_cert"
    )]
    tls_key: Option<PathBuf>,
    /// Read the password from the first line of this file, to keep it out of the URL (and out
    /// of `ps`); without it, the password is taken from $LEASE_REDIS_PASSWORD if set
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "LEASE_PASSWORD_FILE",
        hide_env_values = true
    )]
    password_file: Option<PathBuf>,
    /// A prefix for every key, to share a server between applications
    #[arg(
        long,
        global = true,
        default_value = "",
        env = "LEASE_PREFIX",
        hide_env_values = true
    )]
    prefix: String,
    /// The lease, renewed every third of it while held: 500ms, 30s, 5m (from 300ms)
    #[arg(
        long,
        global = true,
        default_value = "30s",
        value_name = "DURATION",
        value_parser = Setting::parse,
        env = "LEASE_LEASE",
        hide_env_values = true
    )]
    lease: Setting,
    /// How long opening a connection may take
    #[arg(
        long,
        global = true,
        default_value = "2s",
        value_name = "DURATION",
        value_parser = Setting::parse,
        env = "LEASE_CONNECT_TIMEOUT",
        hide_env_values = true
    )]
    connect_timeout: Setting,
    /// How long one call to Redis may take in all, connecting included; on --redlock, the time
    /// each call gives the masters to answer
    #[arg(
        long,
        global = true,
        default_value = "2s",
        value_name = "DURATION",
        value_parser = Setting::parse,
        env = "LEASE_COMMAND_TIMEOUT",
        hide_env_values = true
    )]
    command_timeout: Setting,
}

/// A duration option as given, checked once parsing is done ([`Connection::check`]): clap
/// checks a global option's variable even where the option is given on the command line, and
/// a flag must override a bad value in the environment.
#[derive(Clone, Debug)]
pub struct Setting {
    text: String,
    value: Result<Duration, String>,
}

impl Setting {
    fn parse(text: &str) -> Result<Setting, std::convert::Infallible> {
        Ok(Setting {
            text: text.to_owned(),
            value: crate::duration(text),
        })
    }

    /// The duration; zero if it was not one, which [`Connection::check`] refuses first.
    fn get(&self) -> Duration {
        self.value.clone().unwrap_or_default()
    }
}

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
    /// Refuses a duration option that is not one, as clap refuses a bad value, naming the
    /// variable it came from if it did.
    pub fn check(&self, matches: &ArgMatches) -> Result<(), clap::Error> {
        let settings = [
            ("lease", &self.lease, "LEASE_LEASE"),
            (
                "connect_timeout",
                &self.connect_timeout,
                "LEASE_CONNECT_TIMEOUT",
            ),
            (
                "command_timeout",
                &self.command_timeout,
                "LEASE_COMMAND_TIMEOUT",
            ),
        ];
        for (id, setting, variable) in settings {
            if let Err(error) = &setting.value {
                let from = match global_source(matches, id) {
                    Some(ValueSource::EnvVariable) => format!(" (from ${variable})"),
                    _ => String::new(),
                };
                let option = id.replace('_', "-");
                return Err(crate::Cli::command().error(
                    ErrorKind::InvalidValue,
                    format!(
                        "invalid value '{}' for '--{option} <DURATION>'{from}: {error}",
                        setting.text
                    ),
                ));
            }
        }
        if self.lease.get() < LEASE_FLOOR {
            let from = match global_source(matches, "lease") {
                Some(ValueSource::EnvVariable) => " (from $LEASE_LEASE)",
                _ => "",
            };
            return Err(crate::Cli::command().error(
                ErrorKind::InvalidValue,
                format!(
                    "invalid value '{}' for '--lease <DURATION>'{from}: the shortest lease the \
                     tool can keep is {}; a shorter one gives a renewal too little time to land \
                     before the command must be stopped",
                    self.lease.text,
                    humantime::format_duration(LEASE_FLOOR)
                ),
            ));
        }
        Ok(())
    }

    /// The servers, from `--url`, else `$LEASE_REDIS_URL`, else `$REDIS_URL`, else the default;
    /// a cluster or RedLock masters by `--cluster` or `--redlock`, else by their variables.
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
        let servers = Servers {
            urls,
            topology: self.topology(matches)?,
        };
        let what = match servers.topology {
            Topology::Server => "server",
            Topology::Cluster => "cluster seeds",
            Topology::RedLock => "RedLock masters",
            Topology::Sentinel => "Sentinels",
            Topology::ZooKeeper => "ZooKeeper ensemble",
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
            (Topology::Server, [url]) => Client::builder(url.as_str()),
            (Topology::Server, _) => {
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
