//! [`Config`]: where the server is, who connects, and how (TLS, authentication), from a URL or
//! by setters. The password is kept out of every rendering: `Debug`, `Display` (a URL with the
//! password replaced by `***`), errors and logs.

mod url;

use crate::{Error, Result};
use deadline_net::tls::{ClientConfig, Pem, ServerCheck, TlsFiles};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// The port PostgreSQL listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 5432;

/// Where the server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Host {
    /// A host name or an IP address (IPv6 without brackets), for TCP.
    Tcp(String),
    /// A directory holding the server's Unix socket, `.s.PGSQL.<port>`.
    Unix(PathBuf),
}

/// Whether and how TLS is used (libpq's `sslmode`). This client never runs TLS without verifying
/// the server's certificate: its chain to a trusted root (the system's, or the CA given) is
/// always checked, as libpq checks it when it has a root certificate; `VerifyFull` checks also
/// that it names the host. `allow` (a plain connection tried first) is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SslMode {
    /// No TLS.
    Disable,
    /// TLS if the server offers it, else a plain connection; no TLS over a Unix socket, nor in a
    /// build without the `tls` feature. libpq's default.
    #[default]
    Prefer,
    /// TLS, or no connection.
    Require,
    /// TLS, or no connection; as `Require` here, since the chain is always checked.
    VerifyCa,
    /// TLS with a certificate that names the host, or no connection.
    VerifyFull,
}

impl SslMode {
    /// The mode's name in a URL.
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// Whether a connection without TLS is refused.
    pub(crate) fn requires_tls(self) -> bool {
        matches!(
            self,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull
        )
    }
}

/// A password, never shown.
#[derive(Clone)]
struct Password(String);

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// The TLS client configuration made from a config's files, once, shared by its clones.
type TlsCache = Arc<OnceLock<std::result::Result<Arc<ClientConfig>, String>>>;

/// How to connect: a server, a user and database, TLS and authentication settings.
///
/// ```
/// use postgres_blocking::{Config, SslMode};
///
/// let config: Config = "postgres://app:s3cret@db.example:6432/locks?sslmode=require".parse()?;
/// assert_eq!(config.get_port(), 6432);
/// assert_eq!(config.get_ssl_mode(), SslMode::Require);
/// // The password never shows.
/// assert_eq!(config.to_string(), "postgres://app:***@db.example:6432/locks?sslmode=require");
/// assert!(!format!("{config:?}").contains("s3cret"));
///
/// let by_setters = Config::new().socket_dir("/run/postgresql").user("app").dbname("locks");
/// # let _ = by_setters;
/// # Ok::<(), postgres_blocking::Error>(())
/// ```
#[derive(Clone)]
pub struct Config {
    host: Host,
    port: u16,
    user: Option<String>,
    password: Option<Password>,
    dbname: Option<String>,
    application_name: Option<String>,
    ssl_mode: SslMode,
    tls: TlsFiles,
    allow_cleartext_password: bool,
    tls_config: TlsCache,
}

impl Default for Config {
    fn default() -> Self {
        Config::new()
    }
}

impl Config {
    /// `localhost`, port 5432, `sslmode=prefer`, no user yet.
    pub fn new() -> Config {
        Config {
            host: Host::Tcp("localhost".into()),
            port: DEFAULT_PORT,
            user: None,
            password: None,
            dbname: None,
            application_name: None,
            ssl_mode: SslMode::default(),
            tls: TlsFiles::default(),
            allow_cleartext_password: false,
            tls_config: TlsCache::default(),
        }
    }

    /// A configuration from a URL: `postgres://` or `postgresql://`, then
    /// `[user[:password]@][host][:port][/dbname][?name=value&...]`, each part percent-encoded.
    /// The host may be an IPv6 address in brackets, or a percent-encoded path (`%2Frun%2Fpostgresql`)
    /// of the directory of a Unix socket. Parameters: `host` (a name, or a directory when it
    /// starts with `/`), `port`, `user`, `password`, `dbname`, `application_name`, `sslmode`
    /// (`disable`, `prefer`, `require`, `verify-ca`, `verify-full`), `sslrootcert` (a CA file, trusted beside
    /// the system's roots), `sslcert` and `sslkey` (a client certificate).
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for a malformed URL, an unknown parameter or one this client cannot
    /// honour (several hosts, `sslmode=allow`, `sslcert` without `sslkey`, TLS in a build without the `tls` feature or
    /// over a Unix socket). The message never contains the password.
    pub fn from_url(url: &str) -> Result<Config> {
        let config = url::parse(url)?;
        config.check()?;
        Ok(config)
    }

    /// Sets the host: a name or an IP address (IPv6 with or without brackets), or, when it starts
    /// with `/`, the directory of the server's Unix socket.
    #[must_use]
    pub fn host(mut self, host: &str) -> Config {
        self.host = if host.starts_with('/') {
            Host::Unix(PathBuf::from(host))
        } else {
            Host::Tcp(
                host.trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_owned(),
            )
        };
        self
    }

    /// Sets the directory of the server's Unix socket (`.s.PGSQL.<port>` inside it).
    #[must_use]
    pub fn socket_dir(mut self, dir: impl AsRef<Path>) -> Config {
        self.host = Host::Unix(dir.as_ref().to_owned());
        self
    }

    /// Sets the port (which also names the Unix socket).
    #[must_use]
    pub fn port(mut self, port: u16) -> Config {
        self.port = port;
        self
    }

    /// Sets the user to connect as.
    #[must_use]
    pub fn user(mut self, user: &str) -> Config {
        self.user = Some(user.to_owned());
        self
    }

    /// Sets the password, used if the server asks for one.
    #[must_use]
    pub fn password(mut self, password: &str) -> Config {
        self.password = Some(Password(password.to_owned()));
        self
    }

    /// Sets the database (the server's default is the user's name).
    #[must_use]
    pub fn dbname(mut self, dbname: &str) -> Config {
        self.dbname = Some(dbname.to_owned());
        self
    }

    /// Sets the `application_name` the server shows in `pg_stat_activity` and its logs.
    #[must_use]
    pub fn application_name(mut self, name: &str) -> Config {
        self.application_name = Some(name.to_owned());
        self
    }

    /// Sets whether and how TLS is used.
    #[must_use]
    pub fn ssl_mode(mut self, mode: SslMode) -> Config {
        self.ssl_mode = mode;
        self.tls_config = TlsCache::default();
        self
    }

    /// Sets a CA certificate (PEM) to trust beside the system's roots.
    #[must_use]
    pub fn ca_file(mut self, ca: Pem) -> Config {
        self.tls.ca_file = Some(ca);
        self.tls_config = TlsCache::default();
        self
    }

    /// Sets a client certificate chain and its private key (PEM), presented to a server that asks.
    #[must_use]
    pub fn client_cert(mut self, cert: Pem, key: Pem) -> Config {
        self.tls.client_cert = Some((cert, key));
        self.tls_config = TlsCache::default();
        self
    }

    /// Sets the CA and client certificates at once.
    #[must_use]
    pub fn tls_files(mut self, files: TlsFiles) -> Config {
        self.tls = files;
        self.tls_config = TlsCache::default();
        self
    }

    /// Allows a cleartext password over a plain TCP connection (off by default: a server that
    /// asks for one there is refused; over TLS or a Unix socket it is always allowed).
    #[must_use]
    pub fn allow_cleartext_password(mut self, allow: bool) -> Config {
        self.allow_cleartext_password = allow;
        self
    }

    /// Where the server listens.
    pub fn get_host(&self) -> &Host {
        &self.host
    }

    /// The port.
    pub fn get_port(&self) -> u16 {
        self.port
    }

    /// The user, if one was given.
    pub fn get_user(&self) -> Option<&str> {
        self.user.as_deref()
    }

    /// Whether a password was given (it is never handed back).
    pub fn has_password(&self) -> bool {
        self.password.is_some()
    }

    /// The database, if one was given.
    pub fn get_dbname(&self) -> Option<&str> {
        self.dbname.as_deref()
    }

    /// The application name, if one was given.
    pub fn get_application_name(&self) -> Option<&str> {
        self.application_name.as_deref()
    }

    /// The TLS mode.
    pub fn get_ssl_mode(&self) -> SslMode {
        self.ssl_mode
    }

    /// The CA and client certificates given.
    pub fn get_tls_files(&self) -> &TlsFiles {
        &self.tls
    }

    /// Whether a cleartext password may go over a plain TCP connection.
    pub fn get_allow_cleartext_password(&self) -> bool {
        self.allow_cleartext_password
    }

    /// The URL of this configuration with the password replaced by `***`, for messages.
    pub fn redacted_url(&self) -> String {
        url::redacted(self)
    }

    /// The password, for the authentication exchange only.
    pub(crate) fn password_bytes(&self) -> Option<&[u8]> {
        self.password.as_ref().map(|password| password.0.as_bytes())
    }

    /// The server as messages name it: `host:port`, or the socket's path.
    pub(crate) fn server(&self) -> String {
        match &self.host {
            Host::Tcp(host) if host.contains(':') => format!("[{host}]:{}", self.port),
            Host::Tcp(host) => format!("{host}:{}", self.port),
            Host::Unix(dir) => self.socket_path(dir).display().to_string(),
        }
    }

    /// The path of the server's Unix socket in `dir`.
    pub(crate) fn socket_path(&self, dir: &Path) -> PathBuf {
        dir.join(format!(".s.PGSQL.{}", self.port))
    }

    /// Refuses what this client cannot honour: TLS in a build without it or over a Unix socket,
    /// certificates given where TLS is never used.
    pub(crate) fn check(&self) -> Result<()> {
        let unix = matches!(self.host, Host::Unix(_));
        let mode = self.ssl_mode.as_str();
        if self.ssl_mode.requires_tls() && !cfg!(feature = "tls") {
            return Err(Error::Config(format!(
                "sslmode={mode} needs TLS, and this build of postgres-blocking has no `tls` feature"
            )));
        }
        if self.ssl_mode.requires_tls() && unix {
            return Err(Error::Config(format!(
                "sslmode={mode}: TLS does not run over a Unix socket"
            )));
        }
        let files_given = self.tls.ca_file.is_some() || self.tls.client_cert.is_some();
        if files_given && (self.ssl_mode == SslMode::Disable || unix) {
            return Err(Error::Config(
                "TLS certificates are given, but TLS is never used (sslmode=disable, or a Unix socket)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The TLS client configuration, made from the certificates once and then shared: the
    /// certificate's name checked for `verify-full` only.
    pub(crate) fn tls_client_config(&self) -> Result<Arc<ClientConfig>> {
        let check = match self.ssl_mode {
            SslMode::VerifyFull => ServerCheck::ChainAndName,
            _ => ServerCheck::ChainOnly,
        };
        self.tls_config
            .get_or_init(|| {
                deadline_net::tls::client_config_checking(&self.tls, check)
                    .map_err(|error| error.to_string())
            })
            .clone()
            .map_err(Error::Config)
    }
}

impl std::str::FromStr for Config {
    type Err = Error;

    fn from_str(url: &str) -> Result<Config> {
        Config::from_url(url)
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted_url())
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("password", &self.password)
            .field("dbname", &self.dbname)
            .field("application_name", &self.application_name)
            .field("ssl_mode", &self.ssl_mode)
            .field("tls", &self.tls)
            .field("allow_cleartext_password", &self.allow_cleartext_password)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_modes_need_the_tls_feature_and_a_tcp_host() {
        let require = Config::new().ssl_mode(SslMode::Require);
        assert_eq!(require.check().is_ok(), cfg!(feature = "tls"));
        let url = Config::from_url("postgres://u@h/db?sslmode=verify-full");
        assert_eq!(url.is_ok(), cfg!(feature = "tls"));
        if let Err(error) = url {
            assert!(error.to_string().contains("no `tls` feature"), "{error}");
        }
        let prefer = Config::from_url("postgres://u@h/db").expect("prefer is the default");
        assert!(prefer.check().is_ok());
        let unix = Config::new()
            .socket_dir("/run/postgresql")
            .ssl_mode(SslMode::VerifyFull);
        assert!(matches!(unix.check(), Err(Error::Config(_))));
        let unused_ca = Config::new()
            .ssl_mode(SslMode::Disable)
            .ca_file(Pem::File("ca.crt".into()));
        assert!(matches!(unused_ca.check(), Err(Error::Config(_))));
    }

    #[test]
    fn setters_make_what_a_url_makes() {
        let set = Config::new()
            .host("db")
            .port(6432)
            .user("app")
            .password("pw")
            .dbname("locks")
            .application_name("svc");
        let parsed = Config::from_url("postgres://app:pw@db:6432/locks?application_name=svc")
            .expect("valid");
        assert_eq!(set.redacted_url(), parsed.redacted_url());
        assert!(set.has_password() && set.password_bytes() == Some(&b"pw"[..]));
        assert_eq!(set.server(), "db:6432");
        assert_eq!(Config::new().host("::1").server(), "[::1]:5432");
        assert_eq!(Config::new().host("[::1]").server(), "[::1]:5432");
    }
}
