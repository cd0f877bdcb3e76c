//! Redis's errors as the crate's: which refusals may pass (`LOADING`, `BUSY`, a failover's
//! `READONLY`, ...), which name a key a lock cannot use, and the rest.

use crate::error::{Cause, Error};

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
            Some("PERMITS") => {
                let detail = error.detail().unwrap_or_default();
                // `<declared> <asked> <why>`: the why is the message.
                let why = detail.splitn(3, ' ').nth(2).unwrap_or(detail);
                Error::InvalidArgument(why.to_owned())
            }
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
            cause: Cause::redis(source),
        }
    }

    /// [`Error::Refused`], its server not named yet (see [`Error::at`]).
    pub(crate) fn refused(source: redis::RedisError) -> Error {
        Error::Refused {
            server: None,
            cause: Cause::redis(source),
        }
    }
}

/// The key a script named in its `WRONGTYPE` error (`WRONGTYPE <key> ...`), if it named one.
fn scripted_key(error: &redis::RedisError) -> Option<&str> {
    let detail = error.detail()?;
    let key = detail.strip_prefix("key ")?;
    key.split(" holds").next()
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
