//! The scripts' replies, read exactly: anything else is a protocol error.

use crate::error::{Error, Result};
use redis::Value;
use std::time::Duration;

pub(super) fn unexpected(what: &str, reply: &Value) -> Error {
    Error::Protocol(format!("{what} replied {reply:?}"))
}

fn int(value: &Value) -> Option<i64> {
    match value {
        Value::Int(n) => Some(*n),
        _ => None,
    }
}

/// A fencing token, sent as a decimal string so that no double stands between it and Redis.
pub(super) fn token(value: &Value) -> Option<u64> {
    match value {
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok()?.parse().ok(),
        Value::Int(n) => u64::try_from(*n).ok(),
        _ => None,
    }
}

fn items(reply: &Value) -> &[Value] {
    match reply {
        Value::Array(items) => items,
        _ => &[],
    }
}

/// What an acquisition attempt came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Acquire {
    /// Held now: a new hold (`holds` 1) or a re-entry (`holds` > 1), with its fencing token;
    /// for a new hold with tokens reserved past its own, the last of them and how many
    /// connections watch the lock's channel.
    Acquired {
        holds: u64,
        token: u64,
        reserved: Option<(u64, u64)>,
    },
    /// Held by another hold for about this long (`None`: no expiry set).
    Busy { ttl: Option<Duration> },
    /// Held by the hold the caller named for a reservation, for about `ttl`, and the tokens
    /// `first..=last` reserved for it; `subscribers` connections watch the lock's channel.
    Reserved {
        ttl: Option<Duration>,
        first: u64,
        last: u64,
        subscribers: u64,
    },
}

pub(crate) fn parse_acquire(reply: &Value) -> Result<Acquire> {
    let fields = items(reply);
    match fields.iter().map(int).collect::<Vec<_>>().as_slice() {
        [Some(1), Some(holds), _] if *holds >= 1 => match token(&fields[2]) {
            Some(token) => Ok(Acquire::Acquired {
                holds: *holds as u64,
                token,
                reserved: None,
            }),
            None => Err(unexpected("acquire", reply)),
        },
        [Some(1), Some(1), _, _, Some(subscribers)] if *subscribers >= 0 => {
            match (token(&fields[2]), token(&fields[3])) {
                (Some(token), Some(last)) if token < last => Ok(Acquire::Acquired {
                    holds: 1,
                    token,
                    reserved: Some((last, *subscribers as u64)),
                }),
                _ => Err(unexpected("acquire", reply)),
            }
        }
        [Some(0), Some(ttl)] => Ok(Acquire::Busy {
            ttl: u64::try_from(*ttl).ok().map(Duration::from_millis),
        }),
        [Some(0), Some(ttl), _, _, Some(subscribers)] => {
            match (token(&fields[2]), token(&fields[3])) {
                (Some(first), Some(last)) if first <= last && *subscribers >= 0 => {
                    Ok(Acquire::Reserved {
                        ttl: u64::try_from(*ttl).ok().map(Duration::from_millis),
                        first,
                        last,
                        subscribers: *subscribers as u64,
                    })
                }
                _ => Err(unexpected("acquire", reply)),
            }
        }
        _ => Err(unexpected("acquire", reply)),
    }
}

/// The release script's reply: what a release came to on one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReleaseReply {
    /// Applied; this many acquisitions of the hold are left (0: the lock was freed and
    /// announced).
    Applied { holds_left: u64 },
    /// Applied to the last acquisition, and the lock granted to the waiting owner with this
    /// token (and the tokens after it up to `last` reserved for it); `subscribers` connections
    /// were watching the lock's channel.
    Granted {
        token: u64,
        subscribers: u64,
        last: Option<u64>,
    },
    /// This very release had been applied before (the call is a retry).
    AlreadyApplied,
    /// The hold does not hold the lock.
    NotOwner,
}

pub(crate) fn parse_release(reply: &Value) -> Result<ReleaseReply> {
    let fields = items(reply);
    match fields.iter().map(int).collect::<Vec<_>>().as_slice() {
        [Some(-2)] => Ok(ReleaseReply::AlreadyApplied),
        [Some(-1)] => Ok(ReleaseReply::NotOwner),
        [Some(0), _, Some(subscribers)] => match token(&fields[1]) {
            Some(token) => Ok(ReleaseReply::Granted {
                token,
                subscribers: u64::try_from(*subscribers).unwrap_or(0),
                last: None,
            }),
            None => Err(unexpected("release", reply)),
        },
        [Some(0), _, Some(subscribers), _] => match (token(&fields[1]), token(&fields[3])) {
            (Some(token), Some(last)) if token < last => Ok(ReleaseReply::Granted {
                token,
                subscribers: u64::try_from(*subscribers).unwrap_or(0),
                last: Some(last),
            }),
            _ => Err(unexpected("release", reply)),
        },
        [Some(left)] if *left >= 0 => Ok(ReleaseReply::Applied {
            holds_left: *left as u64,
        }),
        _ => Err(unexpected("release", reply)),
    }
}

/// One flag per lease, in order: whether it was extended.
pub(crate) fn parse_renew(reply: &Value, leases: usize) -> Result<Vec<bool>> {
    let flags: Option<Vec<bool>> = items(reply)
        .iter()
        .map(|flag| match int(flag) {
            Some(0) => Some(false),
            Some(1) => Some(true),
            _ => None,
        })
        .collect();
    match flags {
        Some(flags) if flags.len() == leases => Ok(flags),
        _ => Err(unexpected(&format!("renewal of {leases} leases"), reply)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    #[test]
    fn replies_are_read_exactly_and_anything_else_is_a_protocol_error() {
        let acquired = Value::Array(vec![Value::Int(1), Value::Int(1), bulk("9007199254740993")]);
        assert_eq!(
            parse_acquire(&acquired).expect("valid"),
            Acquire::Acquired {
                holds: 1,
                token: 9_007_199_254_740_993,
                reserved: None,
            },
            "tokens above 2^53 stay exact"
        );
        let reserving = Value::Array(vec![
            Value::Int(1),
            Value::Int(1),
            bulk("9007199254740993"),
            bulk("9007199254741024"),
            Value::Int(3),
        ]);
        assert_eq!(
            parse_acquire(&reserving).expect("valid"),
            Acquire::Acquired {
                holds: 1,
                token: 9_007_199_254_740_993,
                reserved: Some((9_007_199_254_741_024, 3)),
            }
        );
        let reserved = Value::Array(vec![
            Value::Int(0),
            Value::Int(250),
            bulk("8"),
            bulk("39"),
            Value::Int(2),
        ]);
        assert_eq!(
            parse_acquire(&reserved).expect("valid"),
            Acquire::Reserved {
                ttl: Some(Duration::from_millis(250)),
                first: 8,
                last: 39,
                subscribers: 2,
            }
        );
        let held = Value::Array(vec![Value::Int(0), Value::Int(-1)]);
        assert_eq!(
            parse_acquire(&held).expect("valid"),
            Acquire::Busy { ttl: None }
        );
        let granted = Value::Array(vec![Value::Int(0), bulk("7"), Value::Int(2)]);
        assert_eq!(
            parse_release(&granted).expect("valid"),
            ReleaseReply::Granted {
                token: 7,
                subscribers: 2,
                last: None,
            }
        );
        let granted = Value::Array(vec![Value::Int(0), bulk("7"), Value::Int(2), bulk("38")]);
        assert_eq!(
            parse_release(&granted).expect("valid"),
            ReleaseReply::Granted {
                token: 7,
                subscribers: 2,
                last: Some(38),
            }
        );
        for junk in [
            Value::Nil,
            Value::Array(vec![Value::Int(1), Value::Int(1), bulk("-3")]),
            Value::Array(vec![Value::Int(1), Value::Int(0), bulk("3")]),
            Value::Array(vec![Value::Int(2)]),
            // A reservation that ends before it starts, or with no count of watchers.
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5),
                bulk("9"),
                bulk("8"),
                Value::Int(1),
            ]),
            Value::Array(vec![
                Value::Int(1),
                Value::Int(1),
                bulk("9"),
                bulk("9"),
                Value::Int(1),
            ]),
        ] {
            assert!(parse_acquire(&junk).is_err(), "{junk:?}");
        }
        for junk in [
            Value::Nil,
            Value::Array(vec![Value::Int(-3)]),
            Value::Array(vec![Value::Int(0), bulk("x"), Value::Int(1)]),
        ] {
            assert!(parse_release(&junk).is_err(), "{junk:?}");
        }
        assert!(parse_renew(&Value::Array(vec![Value::Int(2)]), 1).is_err());
        assert!(parse_renew(&Value::Array(vec![Value::Int(1)]), 2).is_err());
    }
}
