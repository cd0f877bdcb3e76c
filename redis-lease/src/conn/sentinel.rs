//! The primary of a Sentinel-managed deployment, found by asking its Sentinels.
//!
//! A primary is named by a majority of the Sentinels or not at all: each Sentinel is asked
//! `SENTINEL MASTER <name>`, and of the answers, the one with the highest configuration epoch
//! wins (a Sentinel that has not heard of the last failover yet still names the old primary,
//! under an older epoch). The epoch comes with the address: it is the epoch the tokens of that
//! primary are drawn in (see `scripts::Epoch`). Fewer answers than a majority, or a primary the
//! winning Sentinel counts as down or failing over, and no primary is named: the caller gets
//! [`Error::Unavailable`] rather than a server that may no longer be the primary.

use super::{io_error, Conn, Endpoint};
use crate::error::{Error, Result};
use crate::scripts::Epoch;
use redis::Value;
use std::io;
use std::time::Instant;

/// The Sentinels of one primary.
pub(crate) struct Sentinels {
    /// Each Sentinel, logged in to with database 0 (a Sentinel has no other).
    sentinels: Vec<Endpoint>,
    /// The name the Sentinels monitor the primary under.
    master: String,
    /// The login, transport and database of the data servers: those of the first Sentinel's URL.
    login: Endpoint,
    shown: String,
}

/// The primary, as the Sentinels name it.
pub(crate) struct Primary {
    pub(crate) endpoint: Endpoint,
    /// The configuration epoch in which it became the primary.
    pub(crate) epoch: u64,
}

/// One Sentinel's view of the primary.
struct View {
    host: String,
    port: u16,
    epoch: u64,
    flags: String,
}

impl Sentinels {
    /// The Sentinels at `sentinels` (at least one), monitoring `master`.
    pub(crate) fn new(sentinels: Vec<Endpoint>, master: &str) -> Result<Sentinels> {
        let login = sentinels.first().cloned().ok_or_else(|| {
            Error::InvalidArgument(
                "a Sentinel client needs the URL of at least one Sentinel".into(),
            )
        })?;
        if master.is_empty() || master.contains(char::is_whitespace) {
            return Err(Error::InvalidArgument(format!(
                "{master:?} is not a master name: a non-empty name without spaces is expected"
            )));
        }
        let shown = format!(
            "sentinel {master} at {}",
            sentinels
                .iter()
                .map(Endpoint::shown)
                .collect::<Vec<_>>()
                .join(",")
        );
        let sentinels = sentinels
            .into_iter()
            .map(|mut sentinel| {
                sentinel.db = 0;
                sentinel
            })
            .collect();
        Ok(Sentinels {
            sentinels,
            master: master.to_owned(),
            login,
            shown,
        })
    }

    /// Each Sentinel.
    pub(crate) fn endpoints(&self) -> &[Endpoint] {
        &self.sentinels
    }

    /// The name the Sentinels monitor the primary under.
    pub(crate) fn master(&self) -> &str {
        &self.master
    }

    /// How the deployment is shown: the master name and the Sentinels' URLs, passwords hidden.
    pub(crate) fn shown(&self) -> &str {
        &self.shown
    }

    /// The primary a majority of the Sentinels name, by `deadline`. Each Sentinel gets an equal
    /// share of the time left, so that one that does not answer cannot use up the others'.
    pub(crate) fn locate(&self, deadline: Instant) -> Result<Primary> {
        let mut views = Vec::new();
        let mut last_error = None;
        let mut refusals = 0;
        for (index, sentinel) in self.sentinels.iter().enumerate() {
            let left = deadline.saturating_duration_since(Instant::now());
            let share = left / u32::try_from(self.sentinels.len() - index).unwrap_or(1);
            match self.ask(sentinel, Instant::now() + share) {
                Ok(view) => views.push(view),
                Err(error) => {
                    log::debug!("sentinel {}: {error}", sentinel.shown());
                    refusals += usize::from(matches!(error, Error::Refused(_)));
                    last_error = Some(error);
                }
            }
        }
        let majority = self.sentinels.len() / 2 + 1;
        if refusals == self.sentinels.len() {
            // Every one refused (a wrong password, an unknown master name): no use retrying.
            if let Some(error) = last_error {
                return Err(error);
            }
        }
        if views.len() < majority {
            let why = last_error.map_or_else(String::new, |error| format!(" (last: {error})"));
            return Err(unavailable(format!(
                "{} of {} Sentinels of {:?} answered, fewer than a majority{why}",
                views.len(),
                self.sentinels.len(),
                self.master
            )));
        }
        let Some(view) = views.into_iter().max_by_key(|view| view.epoch) else {
            return Err(unavailable("no Sentinel answered".into()));
        };
        if ["s_down", "o_down", "failover_in_progress"]
            .iter()
            .any(|flag| view.flags.split(',').any(|set| set == *flag))
        {
            return Err(unavailable(format!(
                "the primary of {:?} at {}:{} is {}",
                self.master, view.host, view.port, view.flags
            )));
        }
        Ok(Primary {
            endpoint: self.login.at(&view.host, view.port),
            epoch: view.epoch,
        })
    }

    /// A connection to the primary, opened by `deadline`, with the epoch of its tokens: the
    /// primary is looked up, its server asked whether it is the primary, and the Sentinels asked
    /// again, which must name the same server. Any later reconfiguration of that server by the
    /// Sentinels closes the connection, so the epoch holds for as long as it is open.
    pub(crate) fn connect(&self, deadline: Instant) -> Result<Conn> {
        let primary = self.locate(deadline)?;
        let mut conn =
            Conn::open(&primary.endpoint, deadline).map_err(Error::unavailable_or_refused)?;
        conn.set_deadline(deadline);
        if !is_primary(&mut conn)? {
            return Err(unavailable(format!(
                "{} is not the primary (any more)",
                primary.endpoint.shown()
            )));
        }
        let confirmed = self.locate(deadline)?;
        if confirmed.endpoint.addr != primary.endpoint.addr {
            return Err(unavailable(format!(
                "the primary moved from {} to {} while connecting",
                primary.endpoint.shown(),
                confirmed.endpoint.shown()
            )));
        }
        if confirmed.epoch > Epoch::MAX {
            return Err(Error::Refused(redis::make_extension_error(
                "EPOCH".into(),
                Some(format!(
                    "the Sentinels' configuration epoch {} is past the largest a token can carry",
                    confirmed.epoch
                )),
            )));
        }
        conn.set_epoch(Epoch::Known(confirmed.epoch));
        Ok(conn)
    }

    fn ask(&self, sentinel: &Endpoint, deadline: Instant) -> Result<View> {
        let mut conn = Conn::open(sentinel, deadline).map_err(Error::unavailable_or_refused)?;
        let ask = redis::cmd("SENTINEL")
            .arg("MASTER")
            .arg(&self.master)
            .clone();
        let reply = conn
            .exchange(&[ask])
            .map_err(Error::unavailable_or_refused)?
            .pop()
            .unwrap_or(Value::Nil);
        let reply = reply
            .extract_error()
            .map_err(Error::unavailable_or_refused)?;
        view(&reply).ok_or_else(|| {
            Error::Protocol(format!(
                "sentinel {} answered SENTINEL MASTER {} with {reply:?}",
                sentinel.shown(),
                self.master
            ))
        })
    }
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

fn unavailable(text: String) -> Error {
    Error::Unavailable(io_error(io::ErrorKind::NotConnected, text))
}

/// Whether the server on `conn` says it is a primary (`ROLE`).
fn is_primary(conn: &mut Conn) -> Result<bool> {
    let reply = conn
        .exchange(&[redis::cmd("ROLE")])
        .map_err(Error::unavailable_or_refused)?
        .pop()
        .unwrap_or(Value::Nil)
        .extract_error()
        .map_err(Error::unavailable_or_refused)?;
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

    #[test]
    fn a_master_name_must_be_a_word() {
        let sentinel = Endpoint::parse("redis://127.0.0.1:26379").expect("valid");
        for name in ["", "two words"] {
            assert!(matches!(
                Sentinels::new(vec![sentinel.clone()], name),
                Err(Error::InvalidArgument(_))
            ));
        }
        assert!(matches!(
            Sentinels::new(Vec::new(), "m"),
            Err(Error::InvalidArgument(_))
        ));
    }
}
