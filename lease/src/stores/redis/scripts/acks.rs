//! Replica acknowledgements: how many replicas must acknowledge a write (`WAIT`), and what a
//! caller is told when fewer did.

use super::call::{millis, Call};
use super::reply::unexpected;
use crate::error::{Error, Result};
use crate::stores::redis::conn::Link;
use redis::Value;
use std::time::Duration;

impl Call {
    /// [`Call::run`], followed on the same connection, in the same write, by `WAIT` for `acks`
    /// when there are any: the reply, and the shortfall if fewer replicas acknowledged the call
    /// than `acks` asks (the call ran on the primary all the same).
    pub(crate) fn run_acked(
        &self,
        con: &mut dyn Link,
        key: &str,
        acks: Option<Acks>,
    ) -> Result<(Value, Option<Shortfall>)> {
        let Some(acks) = acks else {
            return self.run(con, key).map(|reply| (reply, None));
        };
        let replied = acked_exchange(self, con, key, acks);
        replied.map_err(|error| error.at(con.server()))
    }
}

/// [`Call::run_acked`]'s exchange of the call and `WAIT`, made again once, the script loaded, if
/// the server answered NOSCRIPT.
fn acked_exchange(
    call: &Call,
    con: &mut dyn Link,
    key: &str,
    acks: Acks,
) -> Result<(Value, Option<Shortfall>)> {
    let commands = [call.command.clone(), acks.wait()];
    let sorted = |error| Error::from_redis(error, key);
    let mut replies = con.exchange(&commands).map_err(sorted)?;
    if matches!(replies.first(), Some(Value::ServerError(error)) if error.code() == "NOSCRIPT") {
        call.load(con).map_err(sorted)?;
        replies = con.exchange(&commands).map_err(sorted)?;
    }
    let mut replies = replies.into_iter();
    let reply = replies.next().unwrap_or(Value::Nil).extract_error();
    let acked = replies.next().unwrap_or(Value::Nil).extract_error();
    let reply = reply.map_err(sorted)?;
    match acked.map_err(sorted)? {
        Value::Int(acked) => Ok((reply, acks.shortfall(u64::try_from(acked).unwrap_or(0)))),
        other => Err(unexpected("WAIT", &other)),
    }
}

/// Fewer replicas acknowledged a call than required.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shortfall {
    pub(crate) acked: u64,
    pub(crate) wanted: u64,
}

impl Shortfall {
    /// The error a caller gets for it, about the lock (or leases) `name`.
    pub(crate) fn error(self, name: impl Into<String>) -> Error {
        Error::NotReplicated {
            name: name.into(),
            acked: self.acked,
            wanted: self.wanted,
        }
    }
}

/// How many replicas must acknowledge a write, and how long the server waits for them (`WAIT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Acks {
    pub(crate) replicas: u64,
    pub(crate) timeout: Duration,
}

impl Acks {
    /// The most replicas `WAIT` takes: it reads its count as a signed 64-bit number.
    pub(crate) const MAX_REPLICAS: u64 = i64::MAX as u64;

    fn wait(self) -> redis::Cmd {
        redis::cmd("WAIT")
            .arg(self.replicas)
            .arg(millis(self.timeout))
            .clone()
    }

    /// Waits for the replicas to acknowledge what the calls before on `con` wrote (`WAIT`): the
    /// shortfall if too few did, or the error if the server refused or did not answer (`key`
    /// as in [`Call::run`]).
    pub(crate) fn confirm(self, con: &mut dyn Link, key: &str) -> Result<Option<Shortfall>> {
        let confirmed = self.wait_on(con, key);
        confirmed.map_err(|error| error.at(con.server()))
    }

    /// [`Acks::confirm`]'s exchange.
    fn wait_on(self, con: &mut dyn Link, key: &str) -> Result<Option<Shortfall>> {
        let sorted = |error| Error::from_redis(error, key);
        let replies = con.exchange(&[self.wait()]).map_err(sorted)?;
        match replies
            .into_iter()
            .next()
            .unwrap_or(Value::Nil)
            .extract_error()
        {
            Ok(Value::Int(acked)) => Ok(self.shortfall(u64::try_from(acked).unwrap_or(0))),
            Ok(other) => Err(unexpected("WAIT", &other)),
            Err(error) => Err(sorted(error)),
        }
    }

    /// The `WAIT` command as bytes, to follow calls written in one batch.
    pub(crate) fn wait_bytes(self) -> Vec<u8> {
        self.wait().get_packed_command()
    }

    /// The shortfall if `acked` replicas are not enough.
    pub(crate) fn shortfall(self, acked: u64) -> Option<Shortfall> {
        (acked < self.replicas).then_some(Shortfall {
            acked,
            wanted: self.replicas,
        })
    }
}
