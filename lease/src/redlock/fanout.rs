//! One script call to every master at once, from one thread: the call is written to every master's
//! connection first, then every reply is read, all within one deadline. A master that is down or
//! silent costs the caller no more than the deadline.

use crate::error::Result;
use crate::pool::{Pool, Pooled};
use crate::scripts::Packed;
use redis::{Connection, RedisError, Value};
use std::time::{Duration, Instant};

/// One independent Redis master.
pub(crate) struct Master {
    pub(crate) url: String,
    pub(crate) pool: Pool,
}

impl Master {
    pub(crate) fn new(url: &str, timeout: Duration) -> Result<Master> {
        let client = crate::pool::open_client(url)?;
        Ok(Master {
            url: url.to_owned(),
            pool: Pool::new(client, 8, timeout, timeout),
        })
    }
}

/// What one master answered.
#[derive(Debug)]
pub(crate) enum Answer {
    /// The script's reply.
    Ints(Vec<i64>),
    /// An error: the connection failed, or the server refused the call.
    Failed(RedisError),
    /// No answer by the deadline.
    Silent,
}

/// Sends `call` to every master, then reads every reply until `deadline`. A silent master's
/// connection is closed, after `on_silent` is written to it: Redis runs a connection's commands
/// in order, so a call that lands late is followed by that one (a release after an acquire).
pub(crate) fn exchange(
    masters: &[&Master],
    call: &Packed,
    deadline: Instant,
    on_silent: Option<&Packed>,
) -> Vec<Answer> {
    let bytes = call.command.get_packed_command();
    let mut answers: Vec<Answer> = Vec::with_capacity(masters.len());
    let mut connections: Vec<Option<Pooled<'_>>> = Vec::with_capacity(masters.len());
    for master in masters {
        let left = deadline.saturating_duration_since(Instant::now());
        let sent = master.pool.get_within(left).and_then(|mut con| {
            match con.send_packed_command(&bytes) {
                Ok(()) => Ok(con),
                Err(error) => {
                    con.discard();
                    Err(crate::Error::Unavailable(error))
                }
            }
        });
        match sent {
            Ok(con) => {
                answers.push(Answer::Silent);
                connections.push(Some(con));
            }
            Err(error) => {
                answers.push(Answer::Failed(unavailable(error)));
                connections.push(None);
            }
        }
    }
    for (answer, slot) in answers.iter_mut().zip(connections.iter_mut()) {
        let Some(con) = slot.as_mut() else {
            continue;
        };
        *answer = receive(con, call, &bytes, deadline);
        if !matches!(answer, Answer::Ints(_)) {
            if let (Answer::Silent, Some(then)) = (&answer, on_silent) {
                let _ = con.send_packed_command(&then.command.get_packed_command());
            }
            if let Some(con) = slot.take() {
                con.discard();
            }
        }
    }
    answers
}

fn unavailable(error: crate::Error) -> RedisError {
    match error {
        crate::Error::Unavailable(error) => error,
        other => RedisError::from((redis::ErrorKind::Io, "no connection", other.to_string())),
    }
}

/// Reads the reply to `call`, loading its script and sending it again once if the server answers
/// NOSCRIPT (after a restart or `SCRIPT FLUSH`).
fn receive(con: &mut Connection, call: &Packed, bytes: &[u8], deadline: Instant) -> Answer {
    let mut reloaded = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || con.set_read_timeout(Some(left)).is_err() {
            return Answer::Silent;
        }
        let reply = con.recv_response().and_then(Value::extract_error);
        match reply {
            Ok(value) => {
                return match redis::from_redis_value::<Vec<i64>>(value) {
                    Ok(ints) => Answer::Ints(ints),
                    Err(error) => Answer::Failed(error.into()),
                }
            }
            Err(error) if error.code() == Some("NOSCRIPT") && !reloaded => {
                reloaded = true;
                let again = call
                    .script
                    .load(con)
                    .and_then(|_| con.send_packed_command(bytes));
                if let Err(error) = again {
                    return Answer::Failed(error);
                }
            }
            Err(error) if error.is_timeout() => return Answer::Silent,
            Err(error) => return Answer::Failed(error),
        }
    }
}
