//! [`Cause`]: what a store's server said or did that failed a call, as its client tells it. The
//! crate's [`Error`](crate::Error) names no store; its cause does, and keeps the store's own
//! error for its message and its code.

use std::fmt;

/// What failed a call, as the store's client tells it: for Redis, the `redis` crate's error
/// (with its code: `NOPERM`, `OOM`, `LOADING`, ...; `TLS` for a TLS handshake refused by either
/// side); for ZooKeeper, a description that names the server where it knows one.
#[derive(Debug)]
pub struct Cause {
    store: &'static str,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Redis(redis::RedisError),
    #[cfg_attr(
        not(any(feature = "zookeeper", feature = "postgres")),
        allow(dead_code)
    )]
    Text(String),
    /// A description, with the server's own error code (boxed: errors stay small).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    Coded(Box<(String, String)>),
}

impl Cause {
    /// The cause of a Redis call's failure.
    pub(crate) fn redis(error: redis::RedisError) -> Cause {
        Cause {
            store: "redis",
            kind: Kind::Redis(error),
        }
    }

    /// A cause told in words, with the server's error `code`, by the client of `store`.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn coded(store: &'static str, code: &str, text: impl Into<String>) -> Cause {
        Cause {
            store,
            kind: Kind::Coded(Box::new((code.to_owned(), text.into()))),
        }
    }

    /// A cause told in words, by the client of `store`.
    #[cfg_attr(
        not(any(feature = "zookeeper", feature = "postgres")),
        allow(dead_code)
    )]
    pub(crate) fn text(store: &'static str, text: impl Into<String>) -> Cause {
        Cause {
            store,
            kind: Kind::Text(text.into()),
        }
    }

    /// The store whose server failed the call, as messages name it (`redis`, `zookeeper`,
    /// `postgres`).
    pub fn store(&self) -> &'static str {
        self.store
    }

    /// The server's error code, where it gave one: Redis's `NOPERM`, `WRONGPASS`, `OOM`,
    /// `LOADING`, ...; `TLS` for a TLS handshake refused by either side; PostgreSQL's SQLSTATE
    /// (`28P01`, `42501`, ...). `None` for a failure with no code (a connection refused or
    /// cut, a timeout).
    pub fn code(&self) -> Option<&str> {
        match &self.kind {
            Kind::Redis(error) => error.code(),
            Kind::Coded(coded) => Some(&coded.0),
            Kind::Text(_) => None,
        }
    }

    /// The `redis` crate's error, for a cause of Redis's (see the crate's re-export
    /// [`redis_lease::redis`](crate::redis)).
    pub fn as_redis(&self) -> Option<&redis::RedisError> {
        match &self.kind {
            Kind::Redis(error) => Some(error),
            Kind::Text(_) | Kind::Coded(_) => None,
        }
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Redis(error) => error.fmt(f),
            Kind::Text(text) => f.write_str(text),
            Kind::Coded(coded) => f.write_str(&coded.1),
        }
    }
}

/// A cause shows the store's error whole (an I/O error's text included), so it has no source of
/// its own: a chain of sources says each thing once.
impl std::error::Error for Cause {}
