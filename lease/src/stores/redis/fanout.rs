//! One script call to every master at once, from one thread: the call is written to every
//! master's connection first, then every reply is read, all by one deadline. A master that is down
//! or silent costs the caller no more than the deadline.

use crate::error::Error;
use crate::stores::redis::pool::{Pool, Pooled};
use crate::stores::redis::scripts::{self, Call};
use parking_lot::Mutex;
use redis::Value;
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
    pub(crate) pool: Pool,
    /// Since when it has been silent (timed out), if it has not answered since: it is read last,
    /// and left out for [`RECHECK_SILENT`] after each silence.
    silent_since: Mutex<Option<Instant>>,
}

impl Master {
    pub(crate) fn new(pool: Pool) -> Master {
        Master {
            pool,
            silent_since: Mutex::new(None),
        }
    }

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
            Answer::Reply(_) => *since = None,
            Answer::Silent => *since = Some(Instant::now()),
            Answer::Failed(_) => {}
        }
    }
}

/// What one master answered.
#[derive(Debug)]
pub(crate) enum Answer {
    /// The script's reply.
    Reply(Value),
    /// An error: the connection failed, or the server refused the call.
    Failed(Error),
    /// No answer by the deadline.
    Silent,
}

/// Sends `call` to every master, then reads the replies until `deadline`, or until `decided`
/// says the answers so far settle the outcome and only masters that did not answer last time are
/// left. Those are read last, so one that hangs delays nothing once it is known to. A master not
/// read by then counts as silent: its connection is closed, after `on_silent` is written to it.
/// Redis runs a connection's commands in order, so a call that lands late is followed by those
/// (releases after an acquisition).
///
/// A connection whose read timed out is not read again (a late reply would be taken for the
/// answer to the next call), so each connection is read at most once.
pub(crate) fn exchange(
    masters: &[&Master],
    call: &Call,
    deadline: Instant,
    on_silent: &[&Call],
    decided: &dyn Fn(&[Answer]) -> bool,
) -> Vec<Answer> {
    let bytes = call.bytes();
    let mut answers: Vec<Answer> = Vec::with_capacity(masters.len());
    let mut connections: Vec<Option<Pooled<'_>>> = Vec::with_capacity(masters.len());
    for master in masters {
        if master.left_out() {
            answers.push(Answer::Failed(Error::unavailable(
                crate::stores::redis::conn::io_error(
                    std::io::ErrorKind::TimedOut,
                    "left out: it did not answer lately",
                ),
            )));
            connections.push(None);
            continue;
        }
        let sent = master
            .pool
            .get(deadline)
            .and_then(|mut con| match con.send(&bytes) {
                Ok(()) => Ok(con),
                Err(error) => Err(Error::unavailable(error).at(con.server())),
            });
        match sent {
            Ok(con) => {
                answers.push(Answer::Silent);
                connections.push(Some(con));
            }
            Err(error) => {
                answers.push(Answer::Failed(error));
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
        if !matches!(answers[index], Answer::Silent) {
            connections[index] = None;
        }
    }
    for con in connections.into_iter().flatten() {
        // Silent: what it may still run is followed by `on_silent`, and it is closed.
        let mut con = con;
        let behind: Vec<u8> = on_silent
            .iter()
            .flat_map(|then| then.bytes_behind())
            .collect();
        con.send_behind(&behind);
    }
    answers
}

/// For [`exchange`]: read every reply.
pub(crate) fn all_replies(_: &[Answer]) -> bool {
    false
}

/// Reads the reply to `call`, loading its script and sending it again once if the server answers
/// NOSCRIPT (after a restart or `SCRIPT FLUSH`).
fn receive(con: &mut Pooled<'_>, call: &Call, bytes: &[u8], deadline: Instant) -> Answer {
    con.set_deadline(deadline.max(Instant::now() + GRACE));
    let mut reloaded = false;
    loop {
        let reply = con.receive().and_then(Value::extract_error);
        match reply {
            Ok(value) => return Answer::Reply(value),
            Err(error) if scripts::is_noscript(&error) && !reloaded => {
                reloaded = true;
                if let Err(error) = call.load(&mut **con).and_then(|()| con.send(bytes)) {
                    return Answer::Failed(Error::unavailable_or_refused(error).at(con.server()));
                }
            }
            Err(error) if error.is_timeout() => return Answer::Silent,
            Err(error) => return Answer::Failed(Error::from_redis(error, "").at(con.server())),
        }
    }
}

/// The most telling error among failed answers: a refusal before unavailability.
pub(crate) fn worst(answers: Vec<Answer>) -> Option<Error> {
    let mut worst: Option<Error> = None;
    for answer in answers {
        if let Answer::Failed(error) = answer {
            if worst.as_ref().is_none_or(Error::is_unavailable) {
                worst = Some(error);
            }
        }
    }
    worst
}
