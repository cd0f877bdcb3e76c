//! [`Link`]: what an operation needs of the connection it is lent, whether the connection is its
//! own for the operation ([`super::Conn`]) or shared with other threads' calls
//! (`crate::stores::redis::pipe::Shared`).

use crate::stores::redis::fencing::Epoch;
use redis::{ConnectionLike, RedisResult, Value};
use std::time::Instant;

/// A connection lent for one operation.
pub(crate) trait Link: ConnectionLike {
    /// The epoch of the fencing tokens handed out through it.
    fn epoch(&self) -> Epoch;

    /// Sets the deadline of the calls that follow.
    fn set_deadline(&mut self, deadline: Instant);

    /// Whether calls may still be made on it: none failed, overran or reached a replica.
    fn is_usable(&self) -> bool;

    /// Sends `commands` in one write and returns one reply for each, in order; a refusal is a
    /// `Value::ServerError` among them, not an error of the exchange.
    fn exchange(&mut self, commands: &[redis::Cmd]) -> RedisResult<Vec<Value>>;

    /// Writes `bytes` (packed commands) behind a call that got no answer, without waiting for
    /// their replies: Redis runs a connection's commands in order, so if that call runs at all,
    /// these run after it. Errors are of no use here and are ignored. No call is made on it
    /// afterwards.
    fn send_behind(&mut self, bytes: &[u8]);

    /// The server it reaches, as its errors name it (see `Error::server`).
    fn server(&self) -> &str;
}

/// The replies of a pipeline sent with `offset` replies to skip first (`MULTI` and each
/// `QUEUED`): the rest, or the first refusal among the skipped ones, which means the
/// transaction did not run.
pub(crate) fn transaction_replies(replies: Vec<Value>, offset: usize) -> RedisResult<Vec<Value>> {
    let mut rest = replies.into_iter();
    for skipped in rest.by_ref().take(offset) {
        skipped.extract_error()?;
    }
    Ok(rest.collect())
}

/// The commands `bytes` holds, each as its packed bytes, as the `redis` crate packs them (each an
/// array of bulk strings); `None` if they are not in that form.
pub(crate) fn split_commands(mut bytes: &[u8]) -> Option<Vec<&[u8]>> {
    let mut commands = Vec::new();
    while !bytes.is_empty() {
        let whole = bytes;
        let (args, mut rest) = header(bytes, b'*')?;
        for _ in 0..args {
            let (len, after) = header(rest, b'$')?;
            rest = after.get(len..)?.strip_prefix(b"\r\n")?;
        }
        commands.push(&whole[..whole.len() - rest.len()]);
        bytes = rest;
    }
    Some(commands)
}

/// The length after `mark` at the start of `bytes` (`*3\r\n`, `$5\r\n`), and the rest.
fn header(bytes: &[u8], mark: u8) -> Option<(usize, &[u8])> {
    let bytes = bytes.strip_prefix(&[mark])?;
    let end = bytes.iter().position(|&byte| byte == b'\r')?;
    let len = std::str::from_utf8(&bytes[..end]).ok()?.parse().ok()?;
    Some((len, bytes[end..].strip_prefix(b"\r\n")?))
}

#[cfg(test)]
mod tests {
    use super::split_commands;

    fn count_commands(bytes: &[u8]) -> Option<usize> {
        split_commands(bytes).map(|commands| commands.len())
    }

    #[test]
    fn packed_commands_are_split_and_anything_else_is_not() {
        let mut bytes = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg("return '\r\n*2\r\n'")
            .get_packed_command();
        assert_eq!(count_commands(&bytes), Some(1));
        bytes.extend(redis::cmd("EVALSHA").arg("ab").arg(0).get_packed_command());
        assert_eq!(count_commands(&bytes), Some(2));
        let commands = split_commands(&bytes).expect("packed");
        assert!(commands[0].starts_with(b"*3\r\n$6\r\nSCRIPT"));
        assert!(commands[1].starts_with(b"*3\r\n$7\r\nEVALSHA"));
        assert_eq!(commands.concat(), bytes);
        assert_eq!(count_commands(b""), Some(0));
        assert_eq!(count_commands(&bytes[..bytes.len() - 1]), None);
        assert_eq!(count_commands(b"PING\r\n"), None);
        assert_eq!(count_commands(b"*1\r\n$9\r\nab\r\n"), None);
    }
}
