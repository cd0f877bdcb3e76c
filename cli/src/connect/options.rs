//! The connection options every command takes, as clap defines them: each from its flag, else
//! its `LEASE_*` variable, else its default; and their check once parsing is done.

use super::global_source;
use clap::builder::FalseyValueParser;
use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory};
use std::path::PathBuf;
use std::time::Duration;

/// The shortest lease the tool takes. Renewed every third of it, with the command stopped
/// before its deadline less a grace of up to a third of it, a shorter lease leaves a renewal
/// too little time to land on a loaded host, and the command is stopped while the lock is
/// free. Measured with `lease run --lease X job -- sleep 2` against an idle local server, the
/// host's other core busy: 150 ms was stopped once in 8 runs, 200 ms never in 20; this is
/// that with margin.
pub const LEASE_FLOOR: Duration = Duration::from_millis(300);

/// The connection options every command takes, under a heading of their own in `--help`, apart
/// from the command's own.
#[derive(Args)]
#[command(next_help_heading = "Connection options (every command)")]
pub struct Connection {
    /// The server: redis://[user[:password]@]host[:port][/db], rediss://... (TLS) or
    /// redis+unix:///path; several, comma-separated or repeated, with --cluster, --redlock or
    /// --sentinel. Or a PostgreSQL database, which then holds the locks:
    /// postgres://[user[:password]@]host[:port]/db (or postgresql://; ?sslmode=require for TLS)
    /// [default: $REDIS_URL, else redis://127.0.0.1:6379]
    #[arg(
        long,
        global = true,
        env = "LEASE_REDIS_URL",
        hide_env_values = true,
        value_delimiter = ',',
        value_name = "URL"
    )]
    pub(super) url: Vec<String>,
    /// The URLs are seed nodes of a Redis Cluster
    #[arg(
        long,
        global = true,
        env = "LEASE_CLUSTER",
        hide_env_values = true,
        value_parser = FalseyValueParser::new()
    )]
    pub(super) cluster: bool,
    /// The URLs are independent masters, each lock taken on a quorum of them (RedLock; no
    /// fencing tokens)
    #[arg(
        long,
        global = true,
        env = "LEASE_REDLOCK",
        hide_env_values = true,
        value_parser = FalseyValueParser::new()
    )]
    pub(super) redlock: bool,
    /// The URLs are Sentinels of the primary they monitor under this name; the lock follows
    /// the primary across failovers
    #[arg(
        long,
        global = true,
        value_name = "MASTER",
        env = "LEASE_SENTINEL",
        hide_env_values = true
    )]
    pub(super) sentinel: Option<String>,
    /// Take the locks on this ZooKeeper ensemble instead of Redis: host:port items,
    /// comma-separated, with an optional chroot after the last (zk1:2181,zk2:2181/app)
    #[arg(
        long,
        global = true,
        value_name = "HOSTS",
        env = "LEASE_ZOOKEEPER",
        hide_env_values = true
    )]
    pub(super) zookeeper: Option<String>,
    /// On PostgreSQL: the schema that holds the locks' tables and functions, made at the first
    /// use if the user may create it [default: lease]
    #[arg(
        long,
        global = true,
        value_name = "SCHEMA",
        env = "LEASE_PG_SCHEMA",
        hide_env_values = true
    )]
    pub(super) pg_schema: Option<String>,
    /// On PostgreSQL behind a pooler in transaction mode (PgBouncer): the database's own
    /// postgres:// URL, for the one connection that listens for releases (LISTEN), which such
    /// a pooler cannot carry
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "LEASE_PG_LISTEN_URL",
        hide_env_values = true
    )]
    pub(super) pg_listen_url: Option<String>,
    /// Count an acquisition, renewal or release only once this many replicas have it (WAIT),
    /// within half the command timeout; an acquisition they do not acknowledge is undone
    #[arg(
        long,
        global = true,
        value_name = "N",
        env = "LEASE_REPLICA_ACKS",
        hide_env_values = true
    )]
    pub(super) replica_acks: Option<usize>,
    /// A PEM file of CA certificates to trust for rediss:// servers, and for PostgreSQL's TLS
    /// (then required), beside the system's
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "LEASE_TLS_CA_FILE",
        hide_env_values = true
    )]
    pub(super) tls_ca_file: Option<PathBuf>,
    /// A PEM file of the client certificate (and its chain) to present to TLS servers that
    /// ask for one; with --tls-key
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "LEASE_TLS_CERT",
        hide_env_values = true,
        requires = "tls_key"
    )]
    pub(super) tls_cert: Option<PathBuf>,
    /// The PEM file of the client certificate's private key; with --tls-cert
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "LEASE_TLS_KEY",
        hide_env_values = true,
        requires = "tls_cert"
    )]
    pub(super) tls_key: Option<PathBuf>,
    /// Read the password from the first line of this file, to keep it out of the URL (and out
    /// of `ps`); without it, the password is taken from $LEASE_REDIS_PASSWORD if set
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "LEASE_PASSWORD_FILE",
        hide_env_values = true
    )]
    pub(super) password_file: Option<PathBuf>,
    /// A prefix for every key, to share a server between applications
    #[arg(
        long,
        global = true,
        default_value = "",
        env = "LEASE_PREFIX",
        hide_env_values = true
    )]
    pub(super) prefix: String,
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
    pub(super) lease: Setting,
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
    pub(super) connect_timeout: Setting,
    /// How long one call to the server may take in all, connecting included; on --redlock, the
    /// time each call gives the masters to answer
    #[arg(
        long,
        global = true,
        default_value = "2s",
        value_name = "DURATION",
        value_parser = Setting::parse,
        env = "LEASE_COMMAND_TIMEOUT",
        hide_env_values = true
    )]
    pub(super) command_timeout: Setting,
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
    pub(super) fn get(&self) -> Duration {
        self.value.clone().unwrap_or_default()
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
}
