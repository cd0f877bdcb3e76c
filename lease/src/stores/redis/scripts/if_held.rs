//! A write of the caller's own made only while a hold holds (`if_held.lua`): the script is the
//! check with the caller's body in it, so it is made, hashed and loaded per body, and sent with
//! a load first wherever the server answers that it does not have it. The only Rust code that
//! knows its arguments and its reply.

use super::acks::{Acks, Shortfall};
use super::call::millis;
use super::reply::unexpected;
use crate::error::{Error, Result};
use crate::stores::redis::conn::Link;
use redis::{Script, Value};

/// The check, with the line the write's body replaces.
static TEMPLATE: &str = include_str!("if_held.lua");

/// The line of [`TEMPLATE`] that the write's body replaces.
const MARK: &str = "-- @write@";

/// A write to make while `owner`'s hold `hold` holds, its hold key `hold_key`.
pub(crate) struct HeldWrite {
    code: String,
    command: redis::Cmd,
}

impl HeldWrite {
    pub(crate) fn new(
        hold_key: &str,
        (owner, hold): (&str, &str),
        body: &str,
        keys: &[String],
        args: &[String],
    ) -> HeldWrite {
        // The body on lines of its own, so that a last line that is a comment ends with it.
        let code = TEMPLATE.replacen(MARK, &format!("\n{body}\n"), 1);
        let script = Script::new(&code);
        let mut command = redis::cmd("EVALSHA");
        command
            .arg(script.get_hash())
            .arg(keys.len() + 1)
            .arg(hold_key)
            .arg(keys)
            .arg(owner)
            .arg(hold)
            .arg(args);
        HeldWrite { code, command }
    }

    /// Runs the write on `con`, followed by `WAIT` for `acks` if there are any: its reply
    /// (`None` if the hold no longer held), and the replicas' shortfall. `key` is the lock's,
    /// as errors name it.
    pub(crate) fn run(
        &self,
        con: &mut dyn Link,
        key: &str,
        acks: Option<Acks>,
    ) -> Result<(Option<Value>, Option<Shortfall>)> {
        let replied = self.exchange(con, key, acks);
        replied.map_err(|error| error.at(con.server()))
    }

    /// [`HeldWrite::run`]'s exchange, made again once, the script loaded, if the server
    /// answered NOSCRIPT.
    fn exchange(
        &self,
        con: &mut dyn Link,
        key: &str,
        acks: Option<Acks>,
    ) -> Result<(Option<Value>, Option<Shortfall>)> {
        let mut commands = vec![self.command.clone()];
        if let Some(acks) = acks {
            commands.push(
                redis::cmd("WAIT")
                    .arg(acks.replicas)
                    .arg(millis(acks.timeout))
                    .clone(),
            );
        }
        let sorted = |error| Error::from_redis(error, key);
        let mut replies = con.exchange(&commands).map_err(sorted)?;
        if matches!(replies.first(), Some(Value::ServerError(error)) if error.code() == "NOSCRIPT")
        {
            let load = redis::cmd("SCRIPT").arg("LOAD").arg(&self.code).clone();
            let loaded = con.exchange(&[load]).map_err(sorted)?;
            if let Some(Value::ServerError(error)) = loaded.into_iter().next() {
                return Err(sorted(error.into()));
            }
            replies = con.exchange(&commands).map_err(sorted)?;
        }
        let mut replies = replies.into_iter();
        let reply = replies.next().unwrap_or(Value::Nil).extract_error();
        let acked = replies.next().unwrap_or(Value::Nil).extract_error();
        let reply = reply.map_err(sorted)?;
        let shortfall = match acks {
            None => None,
            Some(acks) => match acked.map_err(sorted)? {
                Value::Int(acked) => acks.shortfall(u64::try_from(acked).unwrap_or(0)),
                other => return Err(unexpected("WAIT", &other)),
            },
        };
        Ok((written(reply)?, shortfall))
    }
}

/// What the script's reply says: the write's reply, or `None` if the hold no longer held.
fn written(reply: Value) -> Result<Option<Value>> {
    let Value::Array(items) = reply else {
        return Err(unexpected("if_held", &reply));
    };
    let mut items = items.into_iter();
    match (items.next(), items.next()) {
        (Some(Value::Int(0)), None) => Ok(None),
        (Some(Value::Int(1)), reply) => Ok(Some(reply.unwrap_or(Value::Nil))),
        (first, _) => Err(unexpected("if_held", &first.unwrap_or(Value::Nil))),
    }
}
