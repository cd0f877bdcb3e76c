//! The one error type of the crate. Its variants tell apart what a caller handles differently:
//! waiting that ran out of time, Redis that cannot be reached (retry later), Redis that refuses
//! (retrying will not help until someone changes a setting), a lease that is not the caller's,
//! data in Redis that is not what a lock keeps, and bad input.

use std::time::Duration;

/// What went wrong with a lock operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The lock stayed held by another owner until the wait deadline.
    #[error("timed out waiting for lock {name:?} after {waited:?}")]
    Timeout {
        /// The lock's name.
        name: String,
        /// How long the call waited.
        waited: Duration,
    },
    /// The call was applied on the primary, but fewer of its replicas acknowledged it in time
    /// than the client requires ([`ClientBuilder::replica_acks`](crate::ClientBuilder::replica_acks)),
    /// so a failover could lose it. An acquisition is undone before this is returned and is never
    /// handed out; a release is sent again before the same owner takes the lock again.
    #[error("lock {name:?}: {acked} of {wanted} replicas acknowledged in time")]
    NotReplicated {
        /// The lock's name.
        name: String,
        /// How many replicas acknowledged.
        acked: u64,
        /// How many the client requires.
        wanted: u64,
    },
    /// Redis could not be reached, did not answer by the call's deadline, or answered that it
    /// cannot serve now (loading its data, busy with a script, a failover in progress). The
    /// operation may or may not have taken effect. Retrying later may succeed.
    #[error("redis{} unavailable: {source}", at(server))]
    Unavailable {
        /// The server the call went to (see [`Error::server`]).
        server: Option<String>,
        /// What went wrong, as the `redis` crate tells it.
        #[source]
        source: redis::RedisError,
    },
    /// Redis refused the call for a reason that retrying will not fix until a setting changes: a
    /// wrong password or an ACL rule (`WRONGPASS`, `NOAUTH`, `NOPERM`), a database index the
    /// server does not have, a redirect to another node (a cluster node given as a single
    /// server), a full server (`OOM` under `maxmemory`), a command it does not know.
    #[error("redis{} refused the call: {source}", at(server))]
    Refused {
        /// The server that refused (see [`Error::server`]).
        server: Option<String>,
        /// The refusal, as the `redis` crate tells it (its [`code`](redis::RedisError::code):
        /// `NOPERM`, `OOM`, ...; `TLS` for a TLS handshake refused by either side).
        #[source]
        source: redis::RedisError,
    },
    /// The lease is not held by this hold (it expired, was released, or was force-unlocked).
    #[error("lock {name:?} is not held by {owner}")]
    NotOwner {
        /// The lock's name.
        name: String,
        /// The caller's owner identity.
        owner: String,
    },
    /// A key of the lock holds another type of value than the lock keeps there.
    #[error("key {key:?} holds a value of another type than a lock keeps there")]
    WrongType {
        /// The full Redis key.
        key: String,
    },
    /// A key of the lock holds a value the lock cannot use: a fencing counter that is not a
    /// whole number from 0, or one that reached the largest token (2^63 - 1). Nothing was
    /// written.
    #[error("key {key:?} holds a value a lock cannot use: {detail}")]
    BadValue {
        /// The full Redis key.
        key: String,
        /// What is wrong with it.
        detail: String,
    },
    /// The wait was ended by its [`Cancel`](crate::Cancel) token. Nothing is held.
    #[error("the wait for {name:?} was cancelled")]
    Cancelled {
        /// The lock's name.
        name: String,
    },
    /// More threads of this client wait for this lock than `max_local_waiters` allows.
    #[error("{waiting} threads already wait for lock {name:?} in this client")]
    QueueFull {
        /// The lock's name.
        name: String,
        /// How many wait.
        waiting: usize,
    },
    /// An argument is out of range: empty name, a lease too short or too long, a bad URL, ...
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A thread the client needs could not be started.
    #[error("could not start a thread: {0}")]
    Spawn(#[source] std::io::Error),
    /// The lock was acquired but its watchdog could not take it on (its timer was stopped or is
    /// full), so the hold was given back.
    #[error("the watchdog could not watch lock {name:?}: {reason}")]
    Watchdog {
        /// The lock's name.
        name: String,
        /// Why.
        reason: crate::LostReason,
    },
    /// No server of the ZooKeeper ensemble answered by the call's deadline, the connection was
    /// lost, or the client's session expired. The operation may or may not have taken effect.
    /// Retrying later may succeed (on a new session, if the old one expired).
    #[error("zookeeper unavailable: {0}")]
    ZooKeeperUnavailable(String),
    /// ZooKeeper refused the call (no permission for the node, an authentication failure).
    #[error("zookeeper refused the call: {0}")]
    ZooKeeperRefused(String),
    /// Redis answered something this crate does not expect (a bug, or a foreign script).
    #[error("unexpected reply from redis: {0}")]
    Protocol(String),
}

/// How a message names the server an error came from, if it is known.
fn at(server: &Option<String>) -> String {
    server
        .as_ref()
        .map_or_else(String::new, |server| format!(" at {server}"))
}

/// Server error codes that say "not now": the same call may succeed later.
const TRANSIENT: &[&str] = &[
    "LOADING",
    "BUSY",
    "TRYAGAIN",
    "CLUSTERDOWN",
    "MASTERDOWN",
    "READONLY",
    "NOREPLICAS",
    "UNBLOCKED",
    // The connection's fencing epoch is behind the server's counter: read it again.
    "EPOCH",
];

impl Error {
    /// Sorts a Redis error: a key of the wrong type, a value this crate's scripts refused
    /// (named in the script's error), unavailability, or a refusal.
    pub(crate) fn from_redis(error: redis::RedisError, key: &str) -> Error {
        match error.code() {
            Some("WRONGTYPE") => Error::WrongType {
                key: scripted_key(&error).unwrap_or(key).to_owned(),
            },
            Some("BADVALUE") => {
                let detail = error.detail().unwrap_or_default();
                let (named, why) = detail.split_once(' ').unwrap_or((detail, ""));
                Error::BadValue {
                    key: named.to_owned(),
                    detail: why.to_owned(),
                }
            }
            _ => Error::unavailable_or_refused(error),
        }
    }

    /// `Unavailable` for I/O failures, timeouts and transient server states; `Refused` for every
    /// other refusal.
    pub(crate) fn unavailable_or_refused(error: redis::RedisError) -> Error {
        let transient = match error.code() {
            Some(code) => TRANSIENT.contains(&code),
            None => error.is_io_error() || error.is_timeout() || error.is_connection_dropped(),
        };
        if transient {
            Error::unavailable(error)
        } else {
            Error::refused(error)
        }
    }

    /// [`Error::Unavailable`], its server not named yet (see [`Error::at`]).
    pub(crate) fn unavailable(source: redis::RedisError) -> Error {
        Error::Unavailable {
            server: None,
            source,
        }
    }

    /// [`Error::Refused`], its server not named yet (see [`Error::at`]).
    pub(crate) fn refused(source: redis::RedisError) -> Error {
        Error::Refused {
            server: None,
            source,
        }
    }

    /// The same error, naming `server` as the one it came from if it is an error of a server that
    /// names none yet.
    pub(crate) fn at(mut self, named: &str) -> Error {
        if let Error::Unavailable { server, .. } | Error::Refused { server, .. } = &mut self {
            server.get_or_insert_with(|| named.to_owned());
        }
        self
    }

    /// The Redis server the error came from, for [`Error::Unavailable`] and [`Error::Refused`]:
    /// its address as the client reaches it (`host:port`, or a Unix socket's path; never a
    /// password), the node of a cluster or the primary a Sentinel named, not the seed or the
    /// Sentinel the client was given. `None` when the call failed before it reached a server (no
    /// primary known, no node for a slot, no connection free before the deadline), and for
    /// every other error. ZooKeeper's errors name their servers in their text.
    pub fn server(&self) -> Option<&str> {
        match self {
            Error::Unavailable { server, .. } | Error::Refused { server, .. } => server.as_deref(),
            _ => None,
        }
    }

    /// The code of the server's error, for [`Error::Unavailable`] and [`Error::Refused`]:
    /// `NOPERM`, `WRONGPASS`, `OOM`, `LOADING`, ...; `TLS` for a TLS handshake refused by either
    /// side. `None` for a failure with no code (a connection refused or cut, a timeout) and for
    /// every other error.
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Unavailable { source, .. } | Error::Refused { source, .. } => source.code(),
            _ => None,
        }
    }

    /// Whether the same call may succeed if made again later, nothing else changed: the server
    /// did not answer or cannot serve now ([`Error::Unavailable`],
    /// [`Error::ZooKeeperUnavailable`]), too few replicas acknowledged ([`Error::NotReplicated`]),
    /// the lock stayed held ([`Error::Timeout`]), or too many threads wait for it
    /// ([`Error::QueueFull`]). Everything else needs a change first: a setting, an argument, the
    /// keys, or the caller's own decision ([`Error::Cancelled`]).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Unavailable { .. }
                | Error::ZooKeeperUnavailable(_)
                | Error::NotReplicated { .. }
                | Error::Timeout { .. }
                | Error::QueueFull { .. }
        )
    }

    /// Whether the operation failed for want of an answer, so that it may have taken effect.
    pub(crate) fn is_unavailable(&self) -> bool {
        matches!(
            self,
            Error::Unavailable { .. } | Error::ZooKeeperUnavailable(_)
        )
    }
}

/// The key a script named in its `WRONGTYPE` error (`WRONGTYPE <key> ...`), if it named one.
fn scripted_key(error: &redis::RedisError) -> Option<&str> {
    let detail = error.detail()?;
    let key = detail.strip_prefix("key ")?;
    key.split(" holds").next()
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod retry_tests {
    use super::*;

    #[test]
    fn only_errors_that_may_pass_are_retryable() {
        let io = || redis::RedisError::from(std::io::Error::other("reset"));
        for error in [
            Error::unavailable(io()),
            Error::ZooKeeperUnavailable("lost".into()),
            Error::Timeout {
                name: "a".into(),
                waited: Duration::ZERO,
            },
            Error::QueueFull {
                name: "a".into(),
                waiting: 1,
            },
        ] {
            assert!(error.is_retryable(), "{error}");
        }
        for error in [
            Error::refused(io()),
            Error::InvalidArgument("x".into()),
            Error::Cancelled { name: "a".into() },
            Error::WrongType { key: "k".into() },
            Error::NotOwner {
                name: "a".into(),
                owner: "o".into(),
            },
        ] {
            assert!(!error.is_retryable(), "{error}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(code: &str, detail: &str) -> redis::RedisError {
        redis::make_extension_error(code.to_owned(), Some(detail.to_owned()))
    }

    #[test]
    fn refusals_are_not_unavailability() {
        for code in [
            "WRONGPASS",
            "NOAUTH",
            "NOPERM",
            "MOVED",
            "OOM",
            "ERR",
            "CROSSSLOT",
        ] {
            assert!(
                matches!(
                    Error::from_redis(server(code, "x"), "k"),
                    Error::Refused { .. }
                ),
                "{code}"
            );
        }
        for code in TRANSIENT {
            assert!(
                Error::from_redis(server(code, "x"), "k").is_unavailable(),
                "{code}"
            );
        }
        let io = redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut));
        assert!(Error::from_redis(io, "k").is_unavailable());
    }

    #[test]
    fn errors_name_their_server_once() {
        let refused = Error::from_redis(server("NOPERM", "no"), "k").at("10.0.0.1:6379");
        assert_eq!(refused.server(), Some("10.0.0.1:6379"));
        assert_eq!(refused.code(), Some("NOPERM"));
        assert!(
            refused
                .to_string()
                .starts_with("redis at 10.0.0.1:6379 refused"),
            "{refused}"
        );
        // The first server named is the one it came from.
        assert_eq!(refused.at("10.0.0.2:6379").server(), Some("10.0.0.1:6379"));
        let unnamed = Error::unavailable(redis::RedisError::from(std::io::Error::other("x")));
        assert_eq!((unnamed.server(), unnamed.code()), (None, None));
        assert!(
            unnamed.to_string().starts_with("redis unavailable: "),
            "{unnamed}"
        );
        let wrong = Error::WrongType { key: "k".into() }.at("10.0.0.1:6379");
        assert_eq!(wrong.server(), None);
    }

    #[test]
    fn script_errors_name_their_key() {
        let wrong = Error::from_redis(server("WRONGTYPE", "key app:{a}:fence holds a hash"), "x");
        assert!(
            matches!(&wrong, Error::WrongType { key } if key == "app:{a}:fence"),
            "{wrong:?}"
        );
        let native = Error::from_redis(
            server(
                "WRONGTYPE",
                "Operation against a key holding the wrong kind of value",
            ),
            "app:{a}",
        );
        assert!(matches!(&native, Error::WrongType { key } if key == "app:{a}"));
        let bad = Error::from_redis(server("BADVALUE", "{a}:fence is negative"), "x");
        assert!(
            matches!(&bad, Error::BadValue { key, detail } if key == "{a}:fence" && detail == "is negative"),
            "{bad:?}"
        );
    }
}
