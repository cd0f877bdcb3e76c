//! One script call to every master at once, from one thread: the call is written to every master's
//! connection first, then every reply is read, all within one deadline. A master that is down or
//! silent costs the caller no more than the deadline.

use crate::error::Result;
use crate::pool::{Pool, Pooled};
use crate::scripts::Packed;
use parking_lot::Mutex;
use redis::{Connection, RedisError, Value};
use std::time::{Duration, Instant};

/// How long a master that did not answer is left out before it is tried again: meanwhile it
/// counts as a failed vote at once, and no connection is opened to it (a frozen server would let
/// them pile up in its accept queue until connecting to it blocks too).
const RECHECK_SILENT: Duration = Duration::from_secs(1);

/// How long a reply is waited for once the deadline has passed: replies are read one master
/// after another, so a reply that arrived while an earlier master was waited for is still read.
const GRACE: Duration = Duration::from_micros(200);

/// One independent Redis master.
pub(crate) struct Master {
    pub(crate) url: String,
    pub(crate) pool: Pool,
    /// Since when it has been silent (timed out), if it has not answered since: it is read last,
    /// and left out for [`RECHECK_SILENT`] after each silence.
    silent_since: Mutex<Option<Instant>>,
}

impl Master {
    fn suspect(&self) -> bool {
        self.silent_since.lock().is_some()
    }

    fn left_out(&self) -> bool {
        self.silent_since
            .lock()
            .is_some_and(|since| since.elapsed() < RECHECK_SILENT)
    }

    /// Records how it answered. Only silence leaves a master out: one that refuses connections
    /// costs nothing to try.
    fn answered(&self, answer: &Answer) {
        let mut since = self.silent_since.lock();
        match answer {
            Answer::Ints(_) => *since = None,
            Answer::Silent => *since = Some(Instant::now()),
            Answer::Failed(_) => {}
        }
    }
}

impl Master {
    pub(crate) fn new(url: &str, timeout: Duration) -> Result<Master> {
        let client = crate::pool::open_client(url)?;
        Ok(Master {
            url: url.to_owned(),
            pool: Pool::new(client, 8, timeout, timeout),
            silent_since: Mutex::new(None),
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

/// Sends `call` to every master, then reads the replies until `deadline`, or until `decided`
/// says the answers so far settle the outcome and only masters that did not answer last time
/// are left. Those are read last, so one that hangs delays nothing once it is known to. A master not read by then counts as
/// silent: its connection is closed, after `on_silent` is written to it. Redis runs a
/// connection's commands in order, so a call that lands late is followed by that one (a release
/// after an acquire).
///
/// A blocking connection whose read timed out cannot be read again (the client would skip the
/// late reply), so each connection is read at most once.
pub(crate) fn exchange(
    masters: &[&Master],
    call: &Packed,
    deadline: Instant,
    on_silent: Option<&Packed>,
    decided: &dyn Fn(&[Answer]) -> bool,
) -> Vec<Answer> {
    let bytes = call.command.get_packed_command();
    let mut answers: Vec<Answer> = Vec::with_capacity(masters.len());
    let mut connections: Vec<Option<Pooled<'_>>> = Vec::with_capacity(masters.len());
    for master in masters {
        if master.left_out() {
            answers.push(Answer::Failed(RedisError::from((
                redis::ErrorKind::Io,
                "left out: it did not answer lately",
            ))));
            connections.push(None);
            continue;
        }
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
    let mut order: Vec<(bool, usize)> = (0..masters.len())
        .map(|index| (masters[index].suspect(), index))
        .collect();
    order.sort();
    for (suspect, index) in order {
        // Masters that answer are always read; only suspects may be left unread.
        if suspect && decided(&answers) {
            break;
        }
        let Some(con) = connections[index].as_mut() else {
            continue;
        };
        answers[index] = receive(con, call, &bytes, deadline);
        masters[index].answered(&answers[index]);
        match &answers[index] {
            Answer::Ints(_) => connections[index] = None,
            Answer::Failed(_) => {
                if let Some(con) = connections[index].take() {
                    con.discard();
                }
            }
            Answer::Silent => {}
        }
    }
    for con in connections.into_iter().flatten() {
        // Silent: what it may still run is followed by `on_silent`, and it is closed.
        let mut con = con;
        if let Some(then) = on_silent {
            let _ = con.send_packed_command(&then.command.get_packed_command());
        }
        con.discard();
    }
    answers
}

/// For [`exchange`]: read every reply.
pub(crate) fn all_replies(_: &[Answer]) -> bool {
    false
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
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(GRACE);
        if con.set_read_timeout(Some(left)).is_err() {
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
