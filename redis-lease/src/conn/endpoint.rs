//! Where a server is and how to log in to it, parsed from a URL by the `redis` crate; and the URL
//! with its password hidden, which is the only form of it this crate ever shows.

use crate::error::{Error, Result};
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
    pub(crate) tls: Option<Arc<rustls::ClientConfig>>,
    /// The URL as given, password hidden.
    shown: String,
}

impl Endpoint {
    /// Parses `redis://[user:password@]host[:port][/db]`, `rediss://...` (TLS) or
    /// `redis+unix:///path[?db=N]` (also `unix:///path`). Errors never repeat the password.
    pub(crate) fn parse(url: &str) -> Result<Endpoint> {
        let shown = redact(url);
        let invalid = |why: String| Error::InvalidArgument(format!("redis url {shown:?}: {why}"));
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
    pub(crate) fn with_tls(mut self, config: &Arc<rustls::ClientConfig>) -> Endpoint {
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

/// `url` with the password of its user information replaced by `***`: `redis://u:***@h:1/0`.
/// Text that is not a URL at all is shown up to its last `@` as `***`, or as `***` without one.
///
/// A password may hold `/`, `?`, `#` or `@` unescaped, so the user information is taken to end at
/// the *last* `@` of the URL, wherever it stands: hiding too much beats showing a password. A URL
/// without `@` whose port is not a number (the front of a URL cut at a `,` inside its password,
/// for one) is shown without its authority: `redis://***`.
pub fn redact(url: &str) -> String {
    let (scheme, rest) = split_scheme(url);
    let Some((userinfo, host_and_tail)) = split_userinfo(rest) else {
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(authority_end);
        if scheme.is_empty() {
            // Not a URL: maybe a piece of one, cut inside its password.
            return "***".to_owned();
        }
        if plausible_authority(authority) {
            return url.to_owned();
        }
        return format!("{scheme}***{tail}");
    };
    let user = match userinfo.split_once(':') {
        Some((user, _)) if !scheme.is_empty() => format!("{user}:***"),
        _ if scheme.is_empty() => "***".to_owned(),
        _ => userinfo.to_owned(),
    };
    format!("{scheme}{user}{host_and_tail}")
}

/// `url` split after its `scheme://`, or `("", url)` without one.
fn split_scheme(url: &str) -> (&str, &str) {
    match url.find("://") {
        Some(at) => url.split_at(at + 3),
        None => ("", url),
    }
}

/// What follows the scheme, split at its last `@` into the user information and the rest (which
/// starts with the `@`).
fn split_userinfo(rest: &str) -> Option<(&str, &str)> {
    rest.rfind('@').map(|at| rest.split_at(at))
}

/// Whether `authority` (with no user information) reads as `host`, `host:port` or `[v6]:port`.
fn plausible_authority(authority: &str) -> bool {
    match authority.rfind(':') {
        Some(colon) if !authority[colon..].contains(']') => {
            let (host, port) = (&authority[..colon], &authority[colon + 1..]);
            !host.is_empty() && !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit())
        }
        _ => true,
    }
}

/// `text` with every occurrence of `url`'s password replaced by `***` (for messages of other
/// libraries that quote the URL).
fn redact_in(text: &str, url: &str) -> String {
    match password_of(url) {
        Some(password) if !password.is_empty() => text.replace(password, "***"),
        _ => text.to_owned(),
    }
}

fn password_of(url: &str) -> Option<&str> {
    let (userinfo, _) = split_userinfo(split_scheme(url).1)?;
    userinfo.split_once(':').map(|(_, password)| password)
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
        let tls = Endpoint::parse("rediss://u:pw@cache.example.com:6380").expect("valid");
        assert!(tls.is_tls());
        assert_eq!(format!("{tls:?}"), "rediss://u:***@cache.example.com:6380");
        let unix = Endpoint::parse("redis+unix:///tmp/redis.sock?db=2").expect("valid");
        assert_eq!(unix.addr, Addr::Unix("/tmp/redis.sock".into()));
        assert_eq!(unix.db, 2);
    }
}
