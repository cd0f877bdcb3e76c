//! Where a server is and how to log in to it, parsed from a URL by the `redis` crate, and shown
//! only with its password hidden (see `redact`).

use crate::error::{Error, Result};
use crate::redact::{redact, redact_in};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// The transport a server is reached over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Addr {
    Tcp {
        host: String,
        port: u16,
    },
    /// TCP with TLS, the certificate verified for `host`.
    Tls {
        host: String,
        port: u16,
    },
    Unix(PathBuf),
}

/// One server: its address and its login.
#[derive(Clone)]
pub(crate) struct Endpoint {
    pub(crate) addr: Addr,
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
    pub(crate) db: i64,
    /// The TLS configuration, for an `Addr::Tls` endpoint once its client is built.
    pub(crate) tls: Option<Arc<super::TlsConfig>>,
    /// The URL as given, password hidden.
    shown: String,
}

impl Endpoint {
    /// Parses `redis://[user:password@]host[:port][/db]`, `rediss://...` (TLS) or
    /// `redis+unix:///path[?db=N]` (also `unix:///path`). Errors never repeat the password.
    pub(crate) fn parse(url: &str) -> Result<Endpoint> {
        let shown = redact(url);
        let invalid = |why: String| Error::InvalidArgument(format!("redis url {shown:?}: {why}"));
        #[cfg(not(feature = "tls"))]
        {
            let scheme = url.split(':').next().unwrap_or_default();
            if ["rediss", "valkeys"].contains(&scheme.to_ascii_lowercase().as_str()) {
                return Err(invalid(super::tls::NEEDS_TLS.into()));
            }
        }
        let info = redis::IntoConnectionInfo::into_connection_info(url)
            .map_err(|error| invalid(redact_in(&error.to_string(), url)))?;
        let addr = match info.addr() {
            redis::ConnectionAddr::Tcp(host, port) => {
                if host.is_empty() {
                    return Err(invalid("no host".into()));
                }
                Addr::Tcp {
                    host: host.clone(),
                    port: *port,
                }
            }
            redis::ConnectionAddr::TcpTls {
                host,
                port,
                insecure,
                ..
            } => {
                if *insecure {
                    return Err(invalid(
                        "certificates are always verified: give the server's CA with \
                         ClientBuilder::tls_ca_file instead of #insecure"
                            .into(),
                    ));
                }
                Addr::Tls {
                    host: host.clone(),
                    port: *port,
                }
            }
            redis::ConnectionAddr::Unix(path) => Addr::Unix(path.clone()),
            other => return Err(invalid(format!("unsupported address {other}"))),
        };
        let settings = info.redis_settings();
        Ok(Endpoint {
            addr,
            username: settings.username().map(str::to_owned),
            password: settings.password().map(str::to_owned),
            db: settings.db(),
            tls: None,
            shown,
        })
    }

    /// The same endpoint, logging in with `password` (the URL's, if any, is not used).
    pub(crate) fn with_password(mut self, password: &str) -> Endpoint {
        self.password = Some(password.to_owned());
        self
    }

    /// The server at `host:port` with this endpoint's login and transport: a cluster node found
    /// through a seed.
    pub(crate) fn at(&self, host: &str, port: u16) -> Endpoint {
        let addr = match self.addr {
            Addr::Tls { .. } => Addr::Tls {
                host: host.to_owned(),
                port,
            },
            _ => Addr::Tcp {
                host: host.to_owned(),
                port,
            },
        };
        let scheme = if matches!(addr, Addr::Tls { .. }) {
            "rediss"
        } else {
            "redis"
        };
        let user = match (&self.username, &self.password) {
            (Some(user), Some(_)) => format!("{user}:***@"),
            (None, Some(_)) => ":***@".to_owned(),
            (Some(user), None) => format!("{user}@"),
            (None, None) => String::new(),
        };
        Endpoint {
            shown: format!("{scheme}://{user}{addr}"),
            addr,
            ..self.clone()
        }
    }

    /// The same endpoint, over TLS configured by `config` if it is a TLS endpoint.
    pub(crate) fn with_tls(mut self, config: &Arc<super::TlsConfig>) -> Endpoint {
        if matches!(self.addr, Addr::Tls { .. }) {
            self.tls = Some(Arc::clone(config));
        }
        self
    }

    /// Whether it is reached over TLS.
    pub(crate) fn is_tls(&self) -> bool {
        matches!(self.addr, Addr::Tls { .. })
    }

    /// The URL as given, with its password replaced by `***`.
    pub(crate) fn shown(&self) -> &str {
        &self.shown
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Addr::Tcp { host, port } | Addr::Tls { host, port } => write!(f, "{host}:{port}"),
            Addr::Unix(path) => write!(f, "{}", path.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_hidden_in_every_form() {
        assert_eq!(
            redact("redis://user:s3cret@host:6379/2"),
            "redis://user:***@host:6379/2"
        );
        assert_eq!(redact("redis://:s3cret@host"), "redis://:***@host");
        assert_eq!(redact("redis://user@host"), "redis://user@host");
        assert_eq!(redact("redis://host:6379"), "redis://host:6379");
        assert_eq!(redact("s3cret@host"), "***@host");
        assert_eq!(redact("redis://a:b@c@host/0"), "redis://a:***@host/0");
        // A password may hold `/`, `?`, `#`: everything up to the last `@` is user information.
        assert_eq!(
            redact("redis://:s3/cr?e#t@host:1/0"),
            "redis://:***@host:1/0"
        );
        assert_eq!(redact("redis://u:a/b@c@host"), "redis://u:***@host");
        assert_eq!(redact("redis://h:1/0?x=@"), "redis://h:***@");
        // A URL cut at a comma inside its password: the front has a port that is not a number.
        assert_eq!(redact("redis://:s3"), "redis://***");
        assert_eq!(redact("redis://user:s3"), "redis://***");
        assert_eq!(redact("cret@host"), "***@host");
        assert_eq!(
            redact("s3cret"),
            "***",
            "the middle of a URL cut at two commas"
        );
        assert_eq!(redact("redis://host"), "redis://host");
        assert_eq!(redact("redis://[::1]:6379/0"), "redis://[::1]:6379/0");
        assert_eq!(redact("redis://[::1]"), "redis://[::1]");
        assert_eq!(
            redact("redis+unix:///tmp/r.sock"),
            "redis+unix:///tmp/r.sock"
        );
    }

    #[test]
    fn parse_errors_do_not_repeat_the_password() {
        for url in [
            "redis://:s3cret@host:notaport",
            "redis://:s3cret@host:6379/notadb",
            "rediss://:s3cret@",
            "rediss://:s3cret@host:6380/#insecure",
            "nonsense://:s3cret@host",
            ":s3cret@host",
            "redis://:s3/cret@127.0.0.1",
            "redis://:s3?cret@127.0.0.1:6379",
            "redis://:s3#cret@127.0.0.1",
            "redis://u:s3cr/et@host:notaport",
            "redis://:s3cret",
        ] {
            let error = Endpoint::parse(url).expect_err(url).to_string();
            assert!(!error.contains("s3cret"), "{url}: {error}");
        }
    }

    #[test]
    fn tcp_and_unix_addresses_and_logins_are_read() {
        let tcp = Endpoint::parse("redis://me:pw@127.0.0.1:7000/3").expect("valid");
        assert_eq!(
            tcp.addr,
            Addr::Tcp {
                host: "127.0.0.1".into(),
                port: 7000
            }
        );
        assert_eq!(
            (tcp.username.as_deref(), tcp.password.as_deref(), tcp.db),
            (Some("me"), Some("pw"), 3)
        );
        assert_eq!(format!("{tcp:?}"), "redis://me:***@127.0.0.1:7000/3");
        let unix = Endpoint::parse("redis+unix:///tmp/redis.sock?db=2").expect("valid");
        assert_eq!(unix.addr, Addr::Unix("/tmp/redis.sock".into()));
        assert_eq!(unix.db, 2);
    }

    #[cfg(feature = "tls")]
    #[test]
    fn tls_addresses_are_read() {
        let tls = Endpoint::parse("rediss://u:pw@cache.example.com:6380").expect("valid");
        assert!(tls.is_tls());
        assert_eq!(format!("{tls:?}"), "rediss://u:***@cache.example.com:6380");
    }

    #[cfg(not(feature = "tls"))]
    #[test]
    fn tls_addresses_need_the_tls_feature() {
        for url in ["rediss://u:pw@cache.example.com:6380", "VALKEYS://:pw@h"] {
            match Endpoint::parse(url) {
                Err(Error::InvalidArgument(text)) => {
                    assert!(text.contains("`tls` feature"), "{text}");
                    assert!(!text.contains("pw"), "{text}");
                }
                other => panic!("{url}: {other:?}"),
            }
        }
        assert!(Endpoint::parse("redis://u:pw@cache.example.com:6380").is_ok());
    }

    /// `url` is read by the `redis` crate (so the form is one a user may give), and neither
    /// `redact` nor the endpoint's `Debug` shows `secret`.
    fn hidden(url: &str, secret: &str) -> String {
        let shown = redact(url);
        assert!(!shown.contains(secret), "{url} is shown as {shown}");
        if let Ok(endpoint) = Endpoint::parse(url) {
            let debug = format!("{endpoint:?}");
            assert!(!debug.contains(secret), "{url} is debugged as {debug}");
        }
        shown
    }

    #[test]
    fn a_socket_url_s_pass_parameter_is_hidden() {
        for scheme in ["redis+unix", "unix", "valkey+unix"] {
            let url = format!("{scheme}:///tmp/r.sock?pass=s3cret");
            let endpoint = Endpoint::parse(&url).expect("valid");
            assert_eq!(endpoint.password.as_deref(), Some("s3cret"), "{url}");
            assert_eq!(
                hidden(&url, "s3cret"),
                format!("{scheme}:///tmp/r.sock?pass=***")
            );
        }
        assert_eq!(
            hidden(
                "redis+unix:///tmp/r.sock?db=2&user=me&pass=s3cret&protocol=resp3",
                "s3cret"
            ),
            "redis+unix:///tmp/r.sock?db=2&user=me&pass=***&protocol=resp3"
        );
    }

    #[test]
    fn a_socket_url_without_its_slashes_is_hidden_too() {
        let url = "unix:/tmp/r.sock?pass=s3cret";
        let endpoint = Endpoint::parse(url).expect("valid");
        assert_eq!(endpoint.password.as_deref(), Some("s3cret"));
        assert_eq!(hidden(url, "s3cret"), "unix:/tmp/r.sock?pass=***");
    }

    #[test]
    fn a_socket_url_s_password_parameter_is_hidden() {
        // The `redis` crate reads `pass`, not `password`; one who wrote it still meant a secret.
        assert_eq!(
            hidden("redis+unix:///tmp/r.sock?password=s3cret", "s3cret"),
            "redis+unix:///tmp/r.sock?password=***"
        );
    }

    #[test]
    fn a_socket_url_s_user_information_is_hidden() {
        for url in [
            "redis+unix://:s3cret@localhost/tmp/r.sock",
            "redis+unix://me:s3cret@localhost/tmp/r.sock",
            "redis+unix://me:s3/cret@localhost/tmp/r.sock",
            "redis+unix://:s3?cret@localhost/tmp/r.sock",
            "redis+unix://:s3#cret@localhost/tmp/r.sock",
            "unix://:s3cret@/tmp/r.sock",
        ] {
            hidden(url, "s3");
            hidden(url, "cret");
        }
    }

    #[test]
    fn a_socket_password_holding_what_ends_a_parameter_is_hidden_whole() {
        for url in [
            "redis+unix:///tmp/r.sock?pass=s3&cret&db=1",
            "redis+unix:///tmp/r.sock?pass=s3@cret",
            "redis+unix:///tmp/r.sock?pass=s3#cret",
            "redis+unix:///tmp/r.sock?pass=s3=cret",
            "redis+unix:///tmp/r.sock?pass=s3%26cret",
            "redis+unix:///tmp/r.sock?pass=s3+cret",
            "redis+unix:///tmp/r.sock?p%61ss=s3cret",
            "redis+unix:///tmp/r.sock?db=1&pass=s3cret#frag",
        ] {
            hidden(url, "s3");
            hidden(url, "cret");
        }
    }

    #[test]
    fn socket_schemes_are_known_whatever_their_case_and_blanks() {
        // The URL parser lowercases the scheme and drops tabs, newlines and outer blanks.
        for url in [
            "REDIS+UNIX:///tmp/r.sock?pass=s3cret",
            "Unix:///tmp/r.sock?pass=s3cret",
            " redis+unix:///tmp/r.sock?pass=s3cret",
            "redis+un\tix:///tmp/r.sock?pass=s3cret",
            "redis+unix:///tmp/r.sock?pa\nss=s3cret",
        ] {
            hidden(url, "s3cret");
        }
    }

    #[test]
    fn valkey_schemes_hide_their_passwords() {
        assert_eq!(
            hidden("valkey://:s3cret@host:6379", "s3cret"),
            "valkey://:***@host:6379"
        );
        assert_eq!(
            hidden("valkeys://u:s3cret@host", "s3cret"),
            "valkeys://u:***@host"
        );
    }

    #[test]
    fn a_tcp_url_s_query_never_shows_a_password() {
        // Read by nobody, but a secret all the same.
        assert_eq!(
            hidden("redis://host:6379/0?pass=s3cret", "s3cret"),
            "redis://host:6379/0?pass=***"
        );
        hidden(
            "redis://host:6379/0?password=s3cret&protocol=resp3",
            "s3cret",
        );
        assert_eq!(
            hidden("rediss://host:6380/#insecure", "nothing"),
            "rediss://host:6380/#insecure"
        );
    }
}
