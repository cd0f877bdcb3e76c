//! The one error type of the crate. Its variants tell apart what a caller handles differently:
//! waiting that ran out of time, Redis that cannot be reached, a lease that is not the caller's,
//! and bad input.

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
    /// Redis could not be reached or did not answer in time. The operation may or may not have
    /// taken effect.
    #[error("redis unavailable: {0}")]
    Unavailable(#[source] redis::RedisError),
    /// The lease is not held by this owner (it expired, was released, or was force-unlocked).
    #[error("lock {name:?} is not held by {owner}")]
    NotOwner {
        /// The lock's name.
        name: String,
        /// The caller's owner identity.
        owner: String,
    },
    /// The key at the lock's name holds another type of value.
    #[error("key {key:?} holds a value of another type than a lock")]
    WrongType {
        /// The full Redis key.
        key: String,
    },
    /// More threads of this client wait for this lock than `max_local_waiters` allows.
    #[error("{waiting} threads already wait for lock {name:?} in this client")]
    QueueFull {
        /// The lock's name.
        name: String,
        /// How many wait.
        waiting: usize,
    },
    /// An argument is out of range: empty name, zero lease, a bad URL, ...
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
    /// Redis answered something this crate does not expect (a bug, or a foreign script).
    #[error("unexpected reply from redis: {0}")]
    Protocol(String),
}

impl Error {
    /// Maps a Redis error to `WrongType` when that is what it says, `Unavailable` otherwise.
    pub(crate) fn from_redis(error: redis::RedisError, key: &str) -> Error {
        if error.code() == Some("WRONGTYPE") {
            Error::WrongType {
                key: key.to_owned(),
            }
        } else {
            Error::Unavailable(error)
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
