//! PostgreSQL's errors as the crate's: the store's own refusals (another primitive's name, a
//! semaphore's other permits, tokens run out), what may pass (a connection lost, a deadline
//! passed, a server starting or shutting down), and the refusals that need a change first
//! (rights, authentication, TLS).

use crate::error::{Cause, Error};
use postgres_blocking::Error as PgError;

/// The store's functions' own SQLSTATEs (see `schema.sql`).
pub(crate) const ANOTHER_PRIMITIVE: &str = "LS001";
pub(crate) const OTHER_PERMITS: &str = "LS002";
pub(crate) const NO_TOKEN_LEFT: &str = "LS003";
/// A write while held found the hold gone (`held`).
pub(crate) const NOT_HELD: &str = "LS004";

/// Sorts `error` of a call about the name `key` (as messages show it) made to `server`.
pub(crate) fn from_pg(error: PgError, key: &str, server: &str) -> Error {
    match error.code() {
        Some(ANOTHER_PRIMITIVE) => {
            return Error::WrongType {
                key: key.to_owned(),
            }
        }
        Some(NO_TOKEN_LEFT) => {
            return Error::BadValue {
                key: key.to_owned(),
                detail: "its fencing counter has reached the largest token (2^63 - 1)".into(),
            }
        }
        _ => {}
    }
    let server = Some(server.to_owned());
    let cause = match error.code() {
        Some(code) => Cause::coded("postgres", code, error.to_string()),
        None => Cause::text("postgres", error.to_string()),
    };
    match error {
        PgError::Config(why) => Error::InvalidArgument(format!("postgres: {why}")),
        PgError::Protocol(why) => {
            Error::Protocol(format!("postgres at {}: {why}", server_of(&server)))
        }
        // A server's refusal, fatal or not, passes only if it says so (a server starting or
        // shutting down, out of connections, a serialization failure): a database or a role
        // that does not exist, rights or an authentication refused, are the caller's to change.
        PgError::Db(_) if !error.is_retryable() => Error::Refused { server, cause },
        _ if error.is_retryable() || error.is_connection_lost() => {
            Error::Unavailable { server, cause }
        }
        _ => Error::Refused { server, cause },
    }
}

fn server_of(server: &Option<String>) -> &str {
    server.as_deref().unwrap_or("?")
}

/// The refusal of a semaphore's acquisition declaring `asked` permits, its holders having
/// declared `declared` (the error's detail), as Redis's says it.
pub(crate) fn other_permits(error: &PgError, key: &str, asked: u32) -> Option<Error> {
    if error.code() != Some(OTHER_PERMITS) {
        return None;
    }
    let declared = error
        .db_error()
        .and_then(|db| db.detail())
        .unwrap_or("other");
    Some(Error::InvalidArgument(format!(
        "the holders of {key} declared {declared} permits, and this acquisition {asked}: resize \
         the semaphore to change its number"
    )))
}
