//! One connection that many threads' calls share, pipelined: each call's commands are queued in
//! one piece, whichever caller finds nobody writing writes everything queued in one system call,
//! and whichever caller finds nobody reading reads the replies and hands each to its call, in
//! the order the calls were written. No thread of its own: the callers take turns at both ends.
//! So the server reads and answers many calls per system call and per turn of its event loop,
//! where a connection per caller costs it a read, a write and a turn for each.
//!
//! Every call keeps its own deadline. A caller that is not reading waits for its replies until
//! its deadline; one that is reading reads only until its deadline, then leaves the reading to
//! the next caller. A caller whose deadline passes gets a timeout at once; its call keeps its
//! place, so that its replies, when they come, are read and dropped, never handed to another
//! call. A connection on which a call went unanswered, or which reached a replica, is retired:
//! no new call is written to it (except what is written behind a call that went unanswered,
//! see [`crate::stores::redis::conn::Link::send_behind`]), the calls in flight finish or time out, and it is
//! closed when the last of them lets go. One that fails fails every call in flight at once.
//!
//! A call's commands are written together, so nobody's commands come between them: a `MULTI`
//! ... `EXEC` stays whole. Commands that change what a connection does with the commands after
//! them (`ASKING`, `WAIT`, `SUBSCRIBE`) are never sent on a shared connection.

mod queue;

use crate::stores::redis::conn::{io_error, Halves};
use crate::stores::redis::fencing::Epoch;
use deadline_net::Timed;
use parking_lot::{Mutex, MutexGuard};
use queue::{Failure, Queue, Slot};
use redis::{RedisResult, Value};
use std::io::{self, Write};
use std::sync::Arc;
use std::time::Instant;

/// A connection many threads' calls share.
pub(crate) struct Pipe {
    state: Mutex<PipeState>,
    /// The reading end and its parser: used by the one caller that is reading.
    input: Mutex<Input>,
    /// The writing end: used by the one caller that is writing.
    output: Mutex<Timed>,
    /// A third handle to the socket, to close it while the others are in use.
    closer: Timed,
    db: i64,
    epoch: Epoch,
    generation: u64,
    /// The server it reaches (see [`crate::stores::redis::conn::Link::server`]).
    server: Arc<str>,
}

struct Input {
    stream: Timed,
    parser: redis::Parser,
}

#[derive(Default)]
struct PipeState {
    queue: Queue,
    /// Commands queued and not yet written, and the latest deadline of the calls they are of.
    outbox: Vec<u8>,
    outbox_deadline: Option<Instant>,
    writing: bool,
    reading: bool,
    /// No new call may be written.
    retired: bool,
    /// The connection failed or was closed: no call can be made.
    broken: Option<Failure>,
    /// The scripts loaded behind calls (see [`Pipe::send_behind`]), by the hash of their load.
    loaded_behind: Vec<u64>,
}

/// How long a write may block past the deadlines of the calls it carries. A write blocks only
/// when the socket's buffer is full (a server that stopped reading), so this is seldom spent;
/// it lets what is written behind an unanswered call, whose caller's deadline has passed, get
/// into the buffer on a busy machine.
const WRITE_GRACE: std::time::Duration = std::time::Duration::from_millis(20);

/// How a `SCRIPT LOAD` starts, packed.
const SCRIPT_LOAD: &[u8] = b"*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n";

fn hash(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut hasher);
    hasher.finish()
}

/// Queues `bytes` for calls whose deadline is `deadline`.
fn queue_bytes(state: &mut PipeState, bytes: &[u8], deadline: Instant) {
    state.outbox.extend_from_slice(bytes);
    state.outbox_deadline = state.outbox_deadline.max(Some(deadline));
}

fn timed_out() -> redis::RedisError {
    io_error(
        io::ErrorKind::TimedOut,
        "no answer before the call's deadline",
    )
}

fn retired() -> redis::RedisError {
    io_error(
        io::ErrorKind::NotConnected,
        "connection retired: a call on it went unanswered or reached a replica",
    )
}

impl Pipe {
    /// A shared connection made of `halves`.
    pub(crate) fn new(halves: Halves) -> Pipe {
        Pipe {
            state: Mutex::new(PipeState::default()),
            input: Mutex::new(Input {
                stream: halves.reader,
                parser: halves.parser,
            }),
            output: Mutex::new(halves.writer),
            closer: halves.closer,
            db: halves.db,
            epoch: halves.epoch,
            generation: halves.generation,
            server: halves.server,
        }
    }

    /// The server it reaches, as its errors name it.
    pub(crate) fn server(&self) -> &str {
        &self.server
    }

    /// The epoch of the fencing tokens handed out on this connection.
    pub(crate) fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// The generation of the pool that opened it.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    pub(crate) fn db(&self) -> i64 {
        self.db
    }

    /// Whether new calls may be written to it.
    pub(crate) fn is_usable(&self) -> bool {
        let state = self.state.lock();
        !state.retired && state.broken.is_none()
    }

    /// No new call may be written to it from now on.
    pub(crate) fn retire(&self) {
        self.state.lock().retired = true;
    }

    /// Writes `bytes` (`expected` packed commands, at least one) and returns their replies, in
    /// order, by `deadline`; a refusal is a `Value::ServerError` among them.
    pub(crate) fn call(
        &self,
        bytes: &[u8],
        expected: usize,
        deadline: Instant,
    ) -> RedisResult<Vec<Value>> {
        if Instant::now() >= deadline {
            return Err(timed_out());
        }
        let slot = Slot::new();
        let mut state = self.state.lock();
        if let Some(failure) = &state.broken {
            return Err(failure.error());
        }
        if state.retired {
            return Err(retired());
        }
        let id = state.queue.push(expected, Some(slot.clone()));
        queue_bytes(&mut state, bytes, deadline);
        self.flush(&mut state);
        drop(state);
        self.await_outcome(id, &slot, deadline)
    }

    /// Writes `bytes` (packed commands) behind the calls written so far, retired or not, and
    /// drops their replies when they come; the connection is retired. A `SCRIPT LOAD` of a
    /// script already loaded behind another call on this connection is left out: the server
    /// runs it before these, and many callers giving up at once (a frozen server) would
    /// otherwise fill the socket's buffer with copies of one script.
    pub(crate) fn send_behind(&self, bytes: &[u8], deadline: Instant) {
        let mut state = self.state.lock();
        state.retired = true;
        if state.broken.is_some() {
            return;
        }
        let Some(commands) = crate::stores::redis::conn::split_commands(bytes) else {
            // Replies that could not be told apart would put every later one out of step:
            // this is never written, and nothing is written after it.
            return self.fail(state, io::ErrorKind::InvalidInput, "unreadable commands");
        };
        let mut written = Vec::new();
        let mut count = 0;
        for command in commands {
            if command.starts_with(SCRIPT_LOAD) {
                let script = hash(command);
                if state.loaded_behind.contains(&script) {
                    continue;
                }
                state.loaded_behind.push(script);
            }
            written.extend_from_slice(command);
            count += 1;
        }
        if count == 0 {
            return;
        }
        state.queue.push(count, None);
        queue_bytes(&mut state, &written, deadline);
        self.flush(&mut state);
    }

    /// Writes what is queued, and what is queued meanwhile, unless someone is writing already
    /// (who then writes it): the commands of the callers that queue theirs during a write go
    /// out together in the next one.
    fn flush(&self, state: &mut MutexGuard<'_, PipeState>) {
        if state.writing {
            return;
        }
        state.writing = true;
        let mut bytes = Vec::new();
        while !state.outbox.is_empty() && state.broken.is_none() {
            std::mem::swap(&mut bytes, &mut state.outbox);
            let deadline = state.outbox_deadline.take().unwrap_or_else(Instant::now);
            // Each write ends by the latest deadline of the calls it carries, or WRITE_GRACE
            // from now: a writer whose own deadline has passed still delivers the others'
            // commands, and what is written behind a call that went unanswered. A write cut
            // short fails the connection (a command cut in two would be read as another).
            let written = MutexGuard::unlocked(state, || {
                let mut output = self.output.lock();
                output.set_deadline(deadline.max(Instant::now() + WRITE_GRACE));
                output.write_all(&bytes)
            });
            bytes.clear();
            if let Err(error) = written {
                let woken = self.break_down(state, Failure::new(error.kind(), error.to_string()));
                MutexGuard::unlocked(state, || woken.iter().for_each(|slot| slot.wake()));
            }
        }
        state.writing = false;
    }

    /// Waits for call `id`'s outcome in `slot` by `deadline`, reading the replies (its own and
    /// others') whenever nobody else is reading.
    fn await_outcome(&self, id: u64, slot: &Slot, deadline: Instant) -> RedisResult<Vec<Value>> {
        loop {
            if let Some(outcome) = slot.take() {
                return outcome.map_err(|failure| failure.error());
            }
            let now = Instant::now();
            let mut state = self.state.lock();
            // Looked at again under the lock: the reader may have answered it meanwhile, and a
            // caller whose call is answered must not read (nothing may be in flight to wake it).
            if let Some(outcome) = slot.take() {
                return outcome.map_err(|failure| failure.error());
            }
            if now < deadline && !state.reading {
                state.reading = true;
                drop(state);
                let (values, error) = self.read(deadline);
                let mut state = self.state.lock();
                state.reading = false;
                let mut woken = self.deliver(&mut state, values);
                if let Some(error) = error.filter(|error| !error.is_timeout()) {
                    let kind = match error.kind() {
                        redis::ErrorKind::Io => io::ErrorKind::ConnectionAborted,
                        _ => io::ErrorKind::InvalidData,
                    };
                    let failure = Failure::new(kind, error.to_string());
                    woken.extend(self.break_down(&mut state, failure));
                }
                let done = woken.iter().any(|woken| std::ptr::eq(&**woken, slot));
                if done || Instant::now() >= deadline {
                    // Someone else reads for the calls still waiting.
                    woken.extend(state.queue.next_reader(id));
                }
                drop(state);
                for other in woken.iter().filter(|woken| !std::ptr::eq(&***woken, slot)) {
                    other.wake();
                }
                continue;
            }
            if now >= deadline {
                // Given up: its replies are dropped when they come, and no new call is written
                // behind a server that may have stopped answering.
                state.queue.abandon(id);
                state.retired = true;
                let next = (!state.reading)
                    .then(|| state.queue.next_reader(id))
                    .flatten();
                drop(state);
                // It may have been the one to read next.
                if let Some(next) = next {
                    next.wake();
                }
                return Err(timed_out());
            }
            drop(state);
            std::thread::park_timeout(deadline - now);
        }
    }
    /// Reads one reply by `deadline`, then every further one already received; returns the
    /// replies read and the error that ended the reading, if it was not the end of what was
    /// received.
    fn read(&self, deadline: Instant) -> (Vec<Value>, Option<redis::RedisError>) {
        let mut input = self.input.lock();
        let Input { stream, parser } = &mut *input;
        stream.set_deadline(deadline);
        let mut values = Vec::new();
        match parser.parse_value(&mut *stream) {
            Ok(value) => values.push(value),
            Err(error) => return (values, Some(error)),
        }
        // A deadline already past reads nothing more from the socket: only what the parser
        // holds. A reply cut short stays in the parser for the next reader.
        stream.set_deadline(Instant::now());
        loop {
            match parser.parse_value(&mut *stream) {
                Ok(value) => values.push(value),
                Err(error) if error.is_timeout() => return (values, None),
                Err(error) => return (values, Some(error)),
            }
        }
    }

    /// Hands `values` to their calls; returns the slots of the calls they completed.
    fn deliver(&self, state: &mut MutexGuard<'_, PipeState>, values: Vec<Value>) -> Vec<Arc<Slot>> {
        let mut done = Vec::new();
        for value in values {
            if crate::stores::redis::conn::is_from_a_replica(&value) {
                state.retired = true;
            }
            match state.queue.deliver(value) {
                Ok(slot) => done.extend(slot),
                Err(_) => {
                    let failure = Failure::new(
                        io::ErrorKind::InvalidData,
                        "the server sent a reply nobody asked for",
                    );
                    done.extend(self.break_down(state, failure));
                    break;
                }
            }
        }
        done
    }

    /// Fails the connection: every call in flight and to come fails with `failure`, and the
    /// socket is closed. Returns the slots of the calls failed, whose callers are to be woken.
    fn break_down(&self, state: &mut PipeState, failure: Failure) -> Vec<Arc<Slot>> {
        let failed = state.queue.fail_all(&failure);
        state.broken = Some(failure);
        state.retired = true;
        state.outbox.clear();
        self.closer.shutdown();
        failed
    }

    /// [`Pipe::break_down`] with `kind` and `text`, waking the callers.
    fn fail(&self, mut state: MutexGuard<'_, PipeState>, kind: io::ErrorKind, text: &str) {
        let woken = self.break_down(&mut state, Failure::new(kind, text));
        drop(state);
        woken.iter().for_each(|slot| slot.wake());
    }
}

#[cfg(test)]
mod tests;
