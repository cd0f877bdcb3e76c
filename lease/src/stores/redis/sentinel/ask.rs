//! One Sentinel asked about the primary (`SENTINEL MASTER`) and its reply read, and a server
//! asked whether it is a primary (`ROLE`).

use crate::error::{Error, Result};
use crate::stores::redis::conn::{Conn, Endpoint};
use redis::Value;
use std::time::Instant;

/// One Sentinel's view of the primary.
pub(super) struct View {
    pub(super) host: String,
    pub(super) port: u16,
    pub(super) epoch: u64,
    pub(super) flags: String,
}

/// `sentinel`'s view of the primary monitored as `master`, by `deadline`.
pub(super) fn ask(sentinel: &Endpoint, master: &str, deadline: Instant) -> Result<View> {
    let mut conn = Conn::connect(sentinel, deadline)?;
    conn.set_deadline(deadline);
    let reply = reply_to(
        &mut conn,
        redis::cmd("SENTINEL").arg("MASTER").arg(master).clone(),
    )?;
    view(&reply).ok_or_else(|| {
        Error::Protocol(format!(
            "sentinel {} answered SENTINEL MASTER {master} with {reply:?}",
            sentinel.shown(),
        ))
    })
}

/// The address, epoch and flags of a `SENTINEL MASTER` reply (a flat list of names and values,
/// or a map).
fn view(reply: &Value) -> Option<View> {
    let pairs: Vec<(&Value, &Value)> = match reply {
        Value::Array(items) => items
            .chunks_exact(2)
            .map(|pair| (&pair[0], &pair[1]))
            .collect(),
        Value::Map(pairs) => pairs.iter().map(|(k, v)| (k, v)).collect(),
        _ => return None,
    };
    let field = |name: &str| {
        pairs.iter().find_map(|(key, value)| match (key, value) {
            (Value::BulkString(key), Value::BulkString(value))
                if key.as_slice() == name.as_bytes() =>
            {
                std::str::from_utf8(value).ok()
            }
            _ => None,
        })
    };
    Some(View {
        host: field("ip")?.to_owned(),
        port: field("port")?.parse().ok()?,
        epoch: field("config-epoch")?.parse().ok()?,
        flags: field("flags")?.to_owned(),
    })
}

/// The reply of the server on `conn` to `command`; a refusal, or no answer, is the crate's
/// error, naming the server.
fn reply_to(conn: &mut Conn, command: redis::Cmd) -> Result<Value> {
    conn.exchange(&[command])
        .map(|mut replies| replies.pop().unwrap_or(Value::Nil))
        .and_then(Value::extract_error)
        .map_err(|error| Error::unavailable_or_refused(error).at(conn.server()))
}

/// Whether the server on `conn` says it is a primary (`ROLE`).
pub(super) fn is_primary(conn: &mut Conn) -> Result<bool> {
    let reply = reply_to(conn, redis::cmd("ROLE"))?;
    Ok(match &reply {
        Value::Array(items) => {
            matches!(items.first(), Some(Value::BulkString(role)) if role.as_slice() == b"master")
        }
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    #[test]
    fn a_sentinel_master_reply_is_read_and_anything_short_of_it_is_not() {
        let reply = Value::Array(
            [
                "name",
                "m",
                "ip",
                "10.0.0.7",
                "port",
                "6380",
                "flags",
                "master",
                "config-epoch",
                "12",
            ]
            .map(bulk)
            .to_vec(),
        );
        let seen = view(&reply).expect("a full reply");
        assert_eq!(
            (
                seen.host.as_str(),
                seen.port,
                seen.epoch,
                seen.flags.as_str()
            ),
            ("10.0.0.7", 6380, 12, "master")
        );
        let short = Value::Array(["ip", "10.0.0.7", "port", "6380"].map(bulk).to_vec());
        assert!(view(&short).is_none());
        let bad_port = Value::Array(
            [
                "ip",
                "h",
                "port",
                "x",
                "flags",
                "master",
                "config-epoch",
                "1",
            ]
            .map(bulk)
            .to_vec(),
        );
        assert!(view(&bad_port).is_none());
    }
}
