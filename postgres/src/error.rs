//! [`Error`]: every way a call can fail, each told apart by a variant and by predicates that say
//! what a caller may do next. No message carries the password: errors name the server by its
//! address and the user by name only.

use crate::DbError;
use std::fmt;
use std::io;

/// The result of every fallible call of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a call failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The server refused a statement (or the connection) with an error of its own: its SQLSTATE
    /// code, severity, message and the other fields it gave. After an error of severity `ERROR`
    /// the connection stays usable; after `FATAL` or `PANIC` the server has closed it.
    Db(Box<DbError>),
    /// Authentication was refused: by the server (`server` keeps its error, SQLSTATE class 28),
    /// or by this client: a method it does not allow (a cleartext password over a plain TCP
    /// connection) or does not know, or a server that could not prove it knows the password.
    Auth {
        /// What was refused, and by whom.
        reason: String,
        /// The server's error, when the server refused.
        server: Option<Box<DbError>>,
    },
    /// The connection could not be made, or failed, was reset or closed while a call used it.
    /// A statement already sent may or may not have run.
    Io {
        /// What the call was doing, and with which server.
        during: String,
        /// The system's error.
        source: io::Error,
    },
    /// The call's deadline passed before it ended. A statement already sent may or may not have
    /// run (and may still be running: a [`CancelToken`](crate::CancelToken) stops it).
    Timeout {
        /// What the call was doing, and with which server.
        during: String,
    },
    /// TLS could not be had: the server does not offer it where the `sslmode` requires it, or
    /// either side refused the session (a certificate that does not verify, none where one is
    /// required). No retry mends it.
    Tls(String),
    /// The peer does not speak PostgreSQL's protocol as this client expects: an unknown or
    /// malformed message, or one that does not belong where it came.
    Protocol(String),
    /// A setting that is invalid, or that this client cannot honour.
    Config(String),
    /// The connection was closed by an earlier failure (or by the server) and cannot be used.
    Closed,
    /// A row's value that could not be given as the type asked for, or a column the row does not
    /// have. The connection is not affected.
    Column {
        /// The column, by name (or by index when the row has no such column).
        column: String,
        /// Why the value could not be given.
        reason: String,
    },
    /// A query that was to return exactly one row, or at most one, returned `got` rows. The
    /// connection is not affected.
    RowCount {
        /// What was expected: `"one row"` or `"at most one row"`.
        expected: &'static str,
        /// How many rows came.
        got: usize,
    },
    /// A statement asked for something this client does not do (`COPY ... FROM STDIN`); the
    /// server was told so, and the connection is still usable.
    Unsupported(String),
}

impl Error {
    /// The server's error, if the server refused (a statement, or authentication).
    pub fn db_error(&self) -> Option<&DbError> {
        match self {
            Error::Db(db) => Some(db),
            Error::Auth {
                server: Some(db), ..
            } => Some(db),
            _ => None,
        }
    }

    /// The SQLSTATE code of the server's error, such as `23505` for a unique violation.
    pub fn code(&self) -> Option<&str> {
        self.db_error().map(DbError::code)
    }

    /// Whether the call's deadline passed ([`Error::Timeout`]).
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout { .. })
    }

    /// Whether authentication was refused ([`Error::Auth`]).
    pub fn is_auth(&self) -> bool {
        matches!(self, Error::Auth { .. })
    }

    /// Whether TLS could not be had ([`Error::Tls`]).
    pub fn is_tls(&self) -> bool {
        matches!(self, Error::Tls(_))
    }

    /// Whether the connection is gone: it failed ([`Error::Io`]), its deadline passed, it was
    /// closed by an earlier failure, the server ended it with a `FATAL` or `PANIC` error, or the
    /// peer spoke another protocol. A new connection is needed.
    pub fn is_connection_lost(&self) -> bool {
        match self {
            Error::Io { .. } | Error::Timeout { .. } | Error::Closed | Error::Protocol(_) => true,
            Error::Db(db) => db.is_fatal(),
            _ => false,
        }
    }

    /// Whether a later try, on a new connection if this one is lost, may succeed: a connection
    /// that failed or a deadline that passed, a server shutting down, starting or out of
    /// connections (SQLSTATE `57P01`-`57P03`, `53300`, class `08`), a serialization failure or a
    /// deadlock (`40001`, `40P01`). A call that failed so may or may not have run: retry only
    /// what may run twice, or what checks that it ran.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Io { .. } | Error::Timeout { .. } | Error::Closed => true,
            Error::Db(db) => {
                let code = db.code();
                matches!(
                    code,
                    "57P01" | "57P02" | "57P03" | "53300" | "40001" | "40P01"
                ) || code.starts_with("08")
            }
            _ => false,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Db(db) => db.fmt(f),
            Error::Auth { reason, .. } => write!(f, "authentication refused: {reason}"),
            Error::Io { during, source } => write!(f, "{during}: {source}"),
            Error::Timeout { during } => write!(f, "{during}: the deadline passed"),
            Error::Tls(why) => write!(f, "TLS: {why}"),
            Error::Protocol(why) => write!(f, "not the PostgreSQL protocol: {why}"),
            Error::Config(why) => write!(f, "invalid configuration: {why}"),
            Error::Closed => f.write_str("the connection was closed by an earlier failure"),
            Error::Column { column, reason } => write!(f, "column {column}: {reason}"),
            Error::RowCount { expected, got } => {
                write!(f, "the query returned {got} rows, not {expected}")
            }
            Error::Unsupported(what) => write!(f, "not supported by this client: {what}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_predicates_sort_the_failures() {
        let timeout = Error::Timeout {
            during: "reading".into(),
        };
        assert!(timeout.is_timeout() && timeout.is_retryable() && timeout.is_connection_lost());
        let config = Error::Config("bad".into());
        assert!(!config.is_retryable() && !config.is_connection_lost());
        let lost = Error::Io {
            during: "writing".into(),
            source: io::Error::from(io::ErrorKind::ConnectionReset),
        };
        assert!(lost.is_retryable() && lost.is_connection_lost());
        assert!(std::error::Error::source(&lost).is_some());
        assert!(Error::Closed.to_string().contains("closed"));
    }
}
