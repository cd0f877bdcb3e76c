//! Which Redis deployment a client talks to, and the one place where the Redis store is built
//! from it: the settings no Redis deployment honours refused, then the deployment's own build.

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::stores::redis::place::RedisStore;
use crate::stores::redis::route::Route;
use crate::stores::redis::settings::RedisSettings;
use crate::stores::redis::{cluster, quorum, sentinel, server};

/// A Redis deployment, by the URLs the builder was given.
#[derive(Clone, Debug)]
pub(crate) enum Topology {
    Server(String),
    Cluster(Vec<String>),
    RedLock(Vec<String>),
    Sentinel { master: String, urls: Vec<String> },
}

/// What no Redis deployment honours, and why.
const FOREIGN: &[(&str, &str)] = &[
    (
        "zookeeper_auth",
        "it authenticates a ZooKeeper session (on Redis, give a password or a URL's user)",
    ),
    ("postgres_schema", "it is PostgreSQL's"),
    ("postgres_listen_url", "it is PostgreSQL's"),
];

impl Topology {
    /// The URLs the builder was given.
    pub(crate) fn urls(&self) -> &[String] {
        match self {
            Topology::Server(url) => std::slice::from_ref(url),
            Topology::Cluster(urls) | Topology::RedLock(urls) | Topology::Sentinel { urls, .. } => {
                urls
            }
        }
    }

    /// The backend of this deployment, built from `settings`, which it checks.
    pub(crate) fn build(&self, settings: &RedisSettings) -> Result<Box<dyn Backend>> {
        for (setting, why) in FOREIGN {
            settings.refuse(&[setting], "Redis", why)?;
        }
        let endpoints = settings.endpoints(self.urls())?;
        if settings.given.contains("pipelining") && settings.pipelining {
            let unshared = match self {
                Topology::RedLock(_) => Some("RedLock's calls each have a connection of their own"),
                _ if endpoints.iter().any(|endpoint| endpoint.is_tls()) => {
                    Some("calls over TLS each have a connection of their own")
                }
                _ => None,
            };
            if let Some(why) = unshared {
                return Err(Error::InvalidArgument(format!(
                    "pipelining cannot be honoured: {why}"
                )));
            }
        }
        let route = match self {
            Topology::Server(_) => Route::Server(server::build(settings, endpoints)?),
            Topology::Cluster(_) => Route::Cluster(cluster::build(settings, endpoints)?),
            Topology::Sentinel { master, .. } => {
                Route::Server(sentinel::build(settings, master, endpoints)?)
            }
            Topology::RedLock(_) => return quorum::build(settings, endpoints),
        };
        Ok(RedisStore::backend(route, &settings.prefix))
    }
}

/// The URL of the server an application's `redis::ConnectionInfo` reaches (its user in it), and
/// its password, kept apart from the URL.
pub(crate) fn connection_info_url(
    info: &redis::ConnectionInfo,
) -> Result<(String, Option<String>)> {
    let settings = info.redis_settings();
    let user = settings
        .username()
        .map_or_else(String::new, |user| format!("{}@", percent_encode(user)));
    let db = settings.db();
    let url = match info.addr() {
        redis::ConnectionAddr::Tcp(host, port) => {
            format!("redis://{user}{}:{port}/{db}", url_host(host))
        }
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
            format!("rediss://{user}{}:{port}/{db}", url_host(host))
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
    Ok((url, settings.password().map(str::to_owned)))
}

/// `host` as a URL writes it: an IPv6 address in brackets.
fn url_host(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
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
