//! The one error type of the crate. Its variants tell apart what a caller handles differently:
//! waiting that ran out of time, a store that cannot be reached (retry later), a store that
//! refuses (retrying will not help until someone changes a setting), a lease that is not the
//! caller's, data in the store that is not what a lock keeps, and bad input. No variant names a
//! store: what the server said is a [`Cause`], which knows.
//!
//! Each error's message is whole: it says its cause in its own words, and
//! [`source`](std::error::Error::source) returns nothing, so that a report that walks the chain of
//! sources (`anyhow`'s `{:#}`, `eyre`'s) says each thing once. The cause itself stays at hand in
//! the variant's field ([`Cause::as_redis`] for the `redis` crate's error).

pub use crate::cause::Cause;
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
    /// The store could not be reached, did not answer by the call's deadline, or answered that
    /// it cannot serve now (Redis loading its data, busy with a script, a failover in progress;
    /// a ZooKeeper connection lost, its session expired). The operation may or may not have
    /// taken effect. Retrying later may succeed (on ZooKeeper, on a new session if the old one
    /// expired).
    #[error("{}{} unavailable: {cause}", cause.store(), at(server))]
    Unavailable {
        /// The server the call went to (see [`Error::server`]).
        server: Option<String>,
        /// What went wrong, as the store's client tells it.
        cause: Cause,
    },
    /// The store refused the call for a reason that retrying will not fix until a setting
    /// changes: on Redis a wrong password or an ACL rule (`WRONGPASS`, `NOAUTH`, `NOPERM`), a
    /// database index the server does not have, a redirect to another node (a cluster node given
    /// as a single server), a full server (`OOM` under `maxmemory`), a command it does not know;
    /// on ZooKeeper, no permission for the node or an authentication refused.
    #[error("{}{} refused the call: {cause}", cause.store(), at(server))]
    Refused {
        /// The server that refused (see [`Error::server`]).
        server: Option<String>,
        /// The refusal, as the store's client tells it ([`Cause::code`]: `NOPERM`, `OOM`, ...;
        /// `TLS` for a TLS handshake refused by either side).
        cause: Cause,
    },
    /// The lease is not held by this hold (it expired, was released, or was force-unlocked).
    /// The owner id is not part of the error, since it is a credential: the guard that failed
    /// has it ([`LeaseGuard::owner`](crate::LeaseGuard::owner)).
    #[error("lock {name:?} is no longer held by this hold (its lease expired, or it was released or force-unlocked)")]
    NotOwner {
        /// The lock's name.
        name: String,
    },
    /// A key of the primitive (a lock, a semaphore, a latch, a rate limiter, ...) holds another
    /// type of value than that primitive keeps there (Redis).
    #[error(
        "key {key:?} holds a value of another type than the primitive of its name keeps there"
    )]
    WrongType {
        /// The full key.
        key: String,
    },
    /// A key of the lock holds a value the lock cannot use: a fencing counter that is not a
    /// whole number from 0, or one that reached the largest token (2^63 - 1). Nothing was
    /// written (Redis).
    #[error("key {key:?} holds a value a lock cannot use: {detail}")]
    BadValue {
        /// The full key.
        key: String,
        /// What is wrong with it.
        detail: String,
    },
    /// A latch's waiter found it gone before it reached zero: it lapsed (see
    /// [`Latch::expire_after`](crate::Latch::expire_after)) with its counters gone, or was
    /// deleted from the store. It will never reach zero for that waiter.
    #[error("latch {name:?} lapsed or was deleted before it reached zero")]
    Gone {
        /// The latch's name.
        name: String,
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
    Spawn(std::io::Error),
    /// The lock was acquired but its watchdog could not take it on (its timer was stopped or is
    /// full), so the hold was given back.
    #[error("the watchdog could not watch lock {name:?}: {reason}")]
    Watchdog {
        /// The lock's name.
        name: String,
        /// Why.
        reason: crate::LostReason,
    },
    /// The store answered something this crate does not expect (a bug, a foreign script, a peer
    /// that does not speak the store's protocol).
    #[error("unexpected reply: {0}")]
    Protocol(String),
}

/// How a message names the server an error came from, if it is known.
fn at(server: &Option<String>) -> String {
    server
        .as_ref()
        .map_or_else(String::new, |server| format!(" at {server}"))
}

impl Error {
    /// The same error, naming `server` as the one it came from if it is an error of a server that
    /// names none yet.
    pub(crate) fn at(mut self, named: &str) -> Error {
        if let Error::Unavailable { server, .. } | Error::Refused { server, .. } = &mut self {
            server.get_or_insert_with(|| named.to_owned());
        }
        self
    }

    /// The server the error came from, for [`Error::Unavailable`] and [`Error::Refused`]: its
    /// address as the client reaches it (`host:port`, or a Unix socket's path; never a
    /// password), the node of a cluster or the primary a Sentinel named, not the seed or the
    /// Sentinel the client was given. `None` when the call failed before it reached a server (no
    /// primary known, no node for a slot, no connection free before the deadline), and for
    /// every other error. ZooKeeper's errors name their servers in their cause's text.
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
            Error::Unavailable { cause, .. } | Error::Refused { cause, .. } => cause.code(),
            _ => None,
        }
    }

    /// Whether the same call may succeed if made again later, nothing else changed: the server
    /// did not answer or cannot serve now ([`Error::Unavailable`]), too few replicas acknowledged
    /// ([`Error::NotReplicated`]),
    /// the lock stayed held ([`Error::Timeout`]), or too many threads wait for it
    /// ([`Error::QueueFull`]). Everything else needs a change first: a setting, an argument, the
    /// keys, or the caller's own decision ([`Error::Cancelled`]).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Unavailable { .. }
                | Error::NotReplicated { .. }
                | Error::Timeout { .. }
                | Error::QueueFull { .. }
        )
    }

    /// Whether the operation failed for want of an answer, so that it may have taken effect.
    pub(crate) fn is_unavailable(&self) -> bool {
        matches!(self, Error::Unavailable { .. })
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_errors_that_may_pass_are_retryable() {
        for error in [
            Error::Unavailable {
                server: None,
                cause: Cause::text("zookeeper", "the connection was lost"),
            },
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
            Error::Refused {
                server: None,
                cause: Cause::text("zookeeper", "not allowed by the node's ACL"),
            },
            Error::InvalidArgument("x".into()),
            Error::Cancelled { name: "a".into() },
            Error::WrongType { key: "k".into() },
            Error::NotOwner { name: "a".into() },
        ] {
            assert!(!error.is_retryable(), "{error}");
        }
    }

    #[test]
    fn errors_name_their_store_and_server_once() {
        let refused = Error::Refused {
            server: None,
            cause: Cause::text("zookeeper", "no"),
        }
        .at("10.0.0.1:2181");
        assert_eq!(refused.server(), Some("10.0.0.1:2181"));
        assert_eq!(refused.code(), None);
        assert_eq!(
            refused.to_string(),
            "zookeeper at 10.0.0.1:2181 refused the call: no"
        );
        assert_eq!(refused.at("10.0.0.2:2181").server(), Some("10.0.0.1:2181"));
        let wrong = Error::WrongType { key: "k".into() }.at("10.0.0.1:6379");
        assert_eq!(wrong.server(), None);
    }

    /// Each message in an error's chain of sources, outermost first.
    fn chain(error: &(dyn std::error::Error + 'static)) -> Vec<String> {
        let mut texts = vec![error.to_string()];
        let mut next = error.source();
        while let Some(source) = next {
            texts.push(source.to_string());
            next = source.source();
        }
        texts
    }

    #[test]
    fn a_report_of_the_chain_says_each_cause_once() {
        let io = || std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused by peer");
        let errors = [
            Error::Unavailable {
                server: Some("10.0.0.1:6379".into()),
                cause: Cause::redis(redis::RedisError::from(io())),
            },
            Error::Refused {
                server: None,
                cause: Cause::redis(redis::RedisError::from((
                    redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError),
                    "NOPERM",
                    "no rights".to_owned(),
                ))),
            },
            Error::Unavailable {
                server: None,
                cause: Cause::text("zookeeper", "the session expired"),
            },
            Error::Spawn(io()),
            Error::Watchdog {
                name: "a".into(),
                reason: crate::LostReason::TimerStopped,
            },
        ];
        for error in &errors {
            let texts = chain(error);
            for (i, text) in texts.iter().enumerate().skip(1) {
                assert!(
                    !texts[..i].iter().any(|outer| outer.contains(text.as_str())),
                    "{texts:?}"
                );
            }
            assert!(
                texts[0].contains("refused by peer")
                    || texts[0].contains("no rights")
                    || texts[0].contains("expired")
                    || texts[0].contains("watchdog"),
                "the message says its cause: {texts:?}"
            );
        }
    }
}
