//! A session's shared state and its thread. Callers write their own request frames, under the
//! write lock and by their own deadlines, and wait for their replies in a slot of their own (a
//! one-place channel); the session's thread reads every frame, hands each reply to the call
//! waiting on its xid (replies come in the order the calls were written), delivers watch
//! events, pings when nothing was written for a third of the session timeout, and takes the
//! connection for dead when nothing was read for two thirds of it.
//!
//! When a connection is lost, every call in flight fails with `ConnectionLoss`; calls made
//! while there is no connection wait for the next one until their deadline, then fail with
//! `ConnectionLoss` (never sent). The thread tries the servers in turn with the session's id,
//! password and last zxid seen, authenticates again and re-arms the watches. A server that says
//! the session is gone, or no server reached for a whole session timeout after the loss, ends
//! the session for good (`Expired`): the thread never opens a new session.

use super::conn::{self, Credentials, Frames, Handshake, ReadError};
use super::jute::Reader;
use super::path::Chroot;
use super::proto::{self, code, event, xid, Reply, Request};
use super::watches::{Watch, Watches};
use super::{Event, ZkConfig, ZkError};
use crate::conn::Timed;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

/// The first pause after every server of the list failed once; it doubles each round.
const FIRST_BACKOFF: Duration = Duration::from_millis(10);

/// The longest pause between two rounds of the server list.
const LONGEST_BACKOFF: Duration = Duration::from_secs(1);

/// How long a `closeSession` sent on a connection opened after its owner closed the session may
/// take to be written.
const LATE_CLOSE: Duration = Duration::from_millis(200);

/// The callback that receives a session's events.
pub(crate) type Events = Arc<dyn Fn(Event) + Send + Sync>;

/// Where a session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// A connection is open: calls are written at once.
    Connected,
    /// The connection was lost and the thread looks for another: calls wait.
    Disconnected,
    /// The session is gone, for good.
    Expired,
    /// Its owner closed it.
    Closed,
}

/// One call awaiting its reply.
struct Pending {
    /// The call's number: its reply carries it.
    xid: i32,
    /// The request's type, to decode its reply.
    opcode: i32,
    /// The watch its reply arms, if any.
    watch: Option<Watch>,
    /// Where its caller waits (or waited: a reply to a caller gone is dropped here).
    reply: Sender<Result<Reply, ZkError>>,
}

/// A request to make and the watch its reply arms, if any.
pub(crate) struct Call {
    /// The request, paths as the server sees them.
    pub(crate) request: Request,
    /// The watch to note when the reply says it is armed.
    pub(crate) watch: Option<Watch>,
}

impl Call {
    /// A call that arms no watch.
    pub(crate) fn new(request: Request) -> Call {
        Call {
            request,
            watch: None,
        }
    }
}

/// A session's state, under one lock.
struct State {
    /// Where the session stands.
    phase: Phase,
    /// Its owner is closing it: no new call but the `closeSession`.
    closing: bool,
    /// The number of the connection open now, or of the last one.
    generation: u64,
    /// A handle on the socket of the connection open now, to close it.
    closer: Option<Timed>,
    /// The calls written and not yet answered, in the order written.
    pending: VecDeque<Pending>,
    /// The number of the next call.
    next_xid: i32,
    /// The largest zxid seen in a reply header.
    last_zxid: i64,
    /// The session's id, to take it up again on another connection.
    session_id: i64,
    /// The session's password, likewise.
    passwd: Vec<u8>,
    /// The negotiated session timeout.
    timeout: Duration,
    /// The `host:port` of the connection open now, or of the last one.
    server: Option<String>,
    /// The watches armed, to re-arm on another connection.
    watches: Watches,
    /// When a frame was last written.
    last_sent: Instant,
    /// The session's thread.
    thread: Option<ThreadId>,
}

impl State {
    /// Numbers a call: from 1, never one of the reserved negative xids.
    fn next_xid(&mut self) -> i32 {
        let xid = self.next_xid;
        self.next_xid = if xid == i32::MAX { 1 } else { xid + 1 };
        xid
    }
}

/// The writing end of the connection open now.
struct Out {
    /// The handle to write with; none before the first connection.
    writer: Option<Timed>,
    /// The number of the connection it writes to.
    generation: u64,
}

/// The reading end of a connection, for the session's thread.
struct Reading {
    /// The `host:port` it goes to.
    server: String,
    /// The handle to read with.
    reader: Timed,
    /// What was read of the next frame.
    frames: Frames,
    /// The connection's number.
    generation: u64,
}

/// How serving a connection ended.
enum End {
    /// Lost: the failure its calls in flight get, and why, for the log.
    Lost(ZkError, String),
    /// The session expired (a reply said so).
    Expired,
    /// Its owner closed the session.
    Closed,
}

/// How a reconnection ended.
enum Reconnect {
    /// The session is taken up again on this connection.
    Open(Reading),
    /// A server said the session is gone, or none was reached for a session timeout.
    Expired,
    /// Its owner closed the session meanwhile.
    Closed,
}

/// What a session's handles and its thread share.
pub(crate) struct Shared {
    /// The servers, in the order tried.
    hosts: Vec<String>,
    /// The node all paths are relative to.
    pub(crate) chroot: Chroot,
    /// `user:password` for the digest authentication; never logged.
    digest: Option<String>,
    /// The session timeout asked for, in milliseconds.
    requested_ms: i32,
    /// How long one server is given to connect and answer the handshake.
    connect_timeout: Duration,
    /// The session's state.
    state: Mutex<State>,
    /// Notified whenever the phase changes.
    changed: Condvar,
    /// Lock order: `out`, then `state`.
    out: Mutex<Out>,
    /// The owner's event callback.
    events: Events,
    /// Wakes the thread from a pause between reconnection attempts.
    wake: (Sender<()>, Receiver<()>),
}

/// The hosts in a random order (the order given if the system has no randomness).
fn shuffled(mut hosts: Vec<String>) -> Vec<String> {
    for i in (1..hosts.len()).rev() {
        let mut bytes = [0u8; 8];
        if getrandom::fill(&mut bytes).is_err() {
            break;
        }
        let j = (u64::from_le_bytes(bytes) % (i as u64 + 1)) as usize;
        hosts.swap(i, j);
    }
    hosts
}

/// What a failed `connect` returns after `failures` (the last of each server): a protocol
/// error if every server spoke something else than ZooKeeper, otherwise unavailability.
fn connect_failure(failures: Vec<(String, ZkError)>) -> ZkError {
    if failures.is_empty() {
        return ZkError::Unavailable("no server tried before the deadline".into());
    }
    if let Some(ZkError::Protocol(why)) = failures.first().map(|(_, error)| error) {
        if failures
            .iter()
            .all(|(_, error)| matches!(error, ZkError::Protocol(_)))
        {
            return ZkError::Protocol(why.clone());
        }
    }
    let whys: Vec<String> = failures
        .into_iter()
        .map(|(_, error)| match error {
            ZkError::Unavailable(why) | ZkError::Protocol(why) => why,
            other => other.to_string(),
        })
        .collect();
    ZkError::Unavailable(whys.join("; "))
}

/// `duration` in whole milliseconds, at least 1, for the handshake.
fn millis(duration: Duration) -> i32 {
    i32::try_from(duration.as_millis())
        .unwrap_or(i32::MAX)
        .max(1)
}

impl Shared {
    /// Opens a new session on one of the servers by `deadline` and starts its thread.
    pub(crate) fn connect(
        config: ZkConfig,
        deadline: Instant,
        events: Events,
    ) -> Result<Arc<Shared>, ZkError> {
        let chroot = Chroot::new(config.chroot.as_deref())?;
        if config.hosts.is_empty() {
            return Err(ZkError::Unavailable("no ZooKeeper server given".into()));
        }
        let hosts = shuffled(config.hosts);
        let requested_ms = millis(config.session_timeout);
        let credentials = Credentials::new_session(requested_ms);
        let mut failures: Vec<(String, ZkError)> = Vec::new();
        let mut backoff = FIRST_BACKOFF;
        let mut index = 0;
        let conn = loop {
            let now = Instant::now();
            if now >= deadline {
                return Err(connect_failure(failures));
            }
            let server = &hosts[index];
            let attempt = deadline.min(now + config.connect_timeout);
            match conn::open(server, &credentials, config.digest.as_deref(), &[], attempt) {
                Ok(Handshake::Open(conn)) => break *conn,
                Ok(Handshake::Expired) => {
                    let error = ZkError::Unavailable(format!("{server}: refused a new session"));
                    failures.retain(|(tried, _)| tried != server);
                    failures.push((server.clone(), error));
                }
                Err(error) => {
                    log::debug!("zookeeper: connecting to {server}: {error}");
                    failures.retain(|(tried, _)| tried != server);
                    failures.push((server.clone(), error));
                }
            }
            index = (index + 1) % hosts.len();
            if index == 0 {
                let pause = backoff.min(deadline.saturating_duration_since(Instant::now()));
                std::thread::sleep(pause);
                backoff = (backoff * 2).min(LONGEST_BACKOFF);
            }
        };
        let now = Instant::now();
        let response = &conn.response;
        log::info!(
            "zookeeper session 0x{:x} opened on {} (timeout {} ms)",
            response.session_id,
            conn.server,
            response.timeout_ms
        );
        let state = State {
            phase: Phase::Connected,
            closing: false,
            generation: 1,
            closer: Some(conn.closer),
            pending: VecDeque::new(),
            next_xid: 1,
            last_zxid: 0,
            session_id: response.session_id,
            passwd: response.passwd.clone(),
            timeout: Duration::from_millis(response.timeout_ms.unsigned_abs().into()),
            server: Some(conn.server.clone()),
            watches: Watches::default(),
            last_sent: now,
            thread: None,
        };
        let shared = Arc::new(Shared {
            hosts,
            chroot,
            digest: config.digest,
            requested_ms,
            connect_timeout: config.connect_timeout,
            state: Mutex::new(state),
            changed: Condvar::new(),
            out: Mutex::new(Out {
                writer: Some(conn.writer),
                generation: 1,
            }),
            events,
            wake: crossbeam_channel::bounded(1),
        });
        let reading = Reading {
            server: conn.server,
            reader: conn.reader,
            frames: conn.frames,
            generation: 1,
        };
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("lease-zk-session".into())
                .spawn(move || shared.run(reading, index))
        };
        match thread {
            Ok(thread) => {
                shared.state.lock().thread = Some(thread.thread().id());
                Ok(shared)
            }
            Err(error) => {
                shared.finish_close();
                Err(ZkError::Unavailable(format!(
                    "could not start the session's thread: {error}"
                )))
            }
        }
    }

    /// The session's id.
    pub(crate) fn session_id(&self) -> i64 {
        self.state.lock().session_id
    }

    /// The negotiated session timeout.
    pub(crate) fn timeout(&self) -> Duration {
        self.state.lock().timeout
    }

    /// Whether the session expired or was closed.
    pub(crate) fn is_expired(&self) -> bool {
        matches!(self.state.lock().phase, Phase::Expired | Phase::Closed)
    }

    /// Whether a connection is open and the session not being closed.
    pub(crate) fn is_connected(&self) -> bool {
        let state = self.state.lock();
        state.phase == Phase::Connected && !state.closing
    }

    /// The server connected now.
    pub(crate) fn server(&self) -> Option<String> {
        let state = self.state.lock();
        (state.phase == Phase::Connected)
            .then(|| state.server.clone())
            .flatten()
    }

    /// How many watches are armed now.
    #[cfg(test)]
    pub(crate) fn watch_count(&self) -> usize {
        self.state.lock().watches.len()
    }

    /// Makes one call and waits for its reply by `deadline`.
    pub(crate) fn call(&self, call: Call, deadline: Instant) -> Result<Reply, ZkError> {
        self.call_many(vec![call], deadline)
            .pop()
            .unwrap_or(Err(ZkError::ConnectionLoss))
    }

    /// Writes `calls` together, then waits for their replies, all by `deadline`: one result
    /// per call, in order.
    pub(crate) fn call_many(
        &self,
        calls: Vec<Call>,
        deadline: Instant,
    ) -> Vec<Result<Reply, ZkError>> {
        let count = calls.len();
        match self.send(calls, deadline, false) {
            Ok(replies) => replies
                .into_iter()
                .map(|reply| match reply.recv_deadline(deadline) {
                    Ok(result) => result,
                    Err(RecvTimeoutError::Timeout) => Err(ZkError::Timeout),
                    Err(RecvTimeoutError::Disconnected) => Err(ZkError::ConnectionLoss),
                })
                .collect(),
            Err(error) => vec![Err(error); count],
        }
    }

    /// Waits for a connection, then writes `calls` in one piece by `deadline`; returns where
    /// each reply will come. `closing` lets the `closeSession` of [`Shared::close`] through.
    fn send(
        &self,
        calls: Vec<Call>,
        deadline: Instant,
        closing: bool,
    ) -> Result<Vec<Receiver<Result<Reply, ZkError>>>, ZkError> {
        let mut frames = Vec::with_capacity(calls.len());
        for call in &calls {
            // Numbered later: the xid is the frame's first field, after its length.
            frames.push(
                call.request
                    .frame(0)
                    .ok_or(ZkError::Api(code::MARSHALLING_ERROR))?,
            );
        }
        loop {
            self.await_connection(deadline, closing)?;
            let Some(mut out) = self.out.try_lock_until(deadline) else {
                return Err(ZkError::Timeout);
            };
            let mut state = self.state.lock();
            if state.phase != Phase::Connected
                || out.generation != state.generation
                || out.writer.is_none()
            {
                // Lost meanwhile: wait for the next connection.
                continue;
            }
            if state.closing && !closing {
                return Err(ZkError::Closed);
            }
            if Instant::now() >= deadline {
                return Err(ZkError::Timeout);
            }
            let mut bytes = Vec::with_capacity(frames.iter().map(Vec::len).sum());
            let mut replies = Vec::with_capacity(calls.len());
            for (call, mut frame) in calls.into_iter().zip(frames) {
                let xid = state.next_xid();
                frame[4..8].copy_from_slice(&xid.to_be_bytes());
                bytes.extend_from_slice(&frame);
                let (reply, replied) = crossbeam_channel::bounded(1);
                state.pending.push_back(Pending {
                    xid,
                    opcode: call.request.opcode(),
                    watch: call.watch,
                    reply,
                });
                replies.push(replied);
            }
            state.last_sent = Instant::now();
            let generation = state.generation;
            let server = state.server.clone().unwrap_or_default();
            drop(state);
            let written = match out.writer.as_mut() {
                Some(writer) => {
                    writer.set_deadline(deadline);
                    writer.write_all(&bytes)
                }
                None => Err(io::Error::from(io::ErrorKind::NotConnected)),
            };
            drop(out);
            if let Err(error) = written {
                // A frame cut short must never be followed by another: the connection goes.
                let timed_out = error.kind() == io::ErrorKind::TimedOut;
                log::warn!("zookeeper: writing to {server}: {error}; the connection is dropped");
                self.break_connection(generation, ZkError::ConnectionLoss);
                return Err(if timed_out {
                    ZkError::Timeout
                } else {
                    ZkError::ConnectionLoss
                });
            }
            return Ok(replies);
        }
    }

    /// Waits until the session is connected, by `deadline`.
    fn await_connection(&self, deadline: Instant, closing: bool) -> Result<(), ZkError> {
        let mut state = self.state.lock();
        loop {
            if state.closing && !closing {
                return Err(ZkError::Closed);
            }
            match state.phase {
                Phase::Connected => return Ok(()),
                Phase::Expired => return Err(ZkError::SessionExpired),
                Phase::Closed => return Err(ZkError::Closed),
                Phase::Disconnected => {
                    if Instant::now() >= deadline {
                        return Err(ZkError::ConnectionLoss);
                    }
                    self.changed.wait_until(&mut state, deadline);
                }
            }
        }
    }

    /// Takes connection `generation` for lost, if it is still the one open: its calls in flight
    /// fail with `failure` and its socket is closed.
    fn break_connection(&self, generation: u64, failure: ZkError) {
        let mut state = self.state.lock();
        if state.generation != generation || state.phase != Phase::Connected {
            return;
        }
        state.phase = Phase::Disconnected;
        let pending = std::mem::take(&mut state.pending);
        if let Some(closer) = state.closer.take() {
            closer.shutdown();
        }
        drop(state);
        self.changed.notify_all();
        for call in pending {
            let _ = call.reply.try_send(Err(failure.clone()));
        }
    }

    /// Ends the session for good as expired, unless its owner closed it first; returns whether
    /// it did.
    fn expire(&self) -> bool {
        self.end(Phase::Expired, ZkError::SessionExpired)
    }

    /// Ends the session as closed by its owner (unless it expired first).
    fn finish_close(&self) {
        self.end(Phase::Closed, ZkError::Closed);
        let _ = self.wake.0.try_send(());
    }

    /// Ends the session in `phase` (unless it has ended already): every call in flight fails
    /// with `failure`, the socket is closed. Returns whether it ended it.
    fn end(&self, phase: Phase, failure: ZkError) -> bool {
        let mut state = self.state.lock();
        if matches!(state.phase, Phase::Expired | Phase::Closed) {
            return false;
        }
        state.phase = phase;
        state.server = None;
        let pending = std::mem::take(&mut state.pending);
        if let Some(closer) = state.closer.take() {
            closer.shutdown();
        }
        drop(state);
        self.changed.notify_all();
        for call in pending {
            let _ = call.reply.try_send(Err(failure.clone()));
        }
        true
    }

    /// Ends the session: `closeSession` sent and its reply awaited by `deadline`, then every
    /// call fails with `Closed`.
    pub(crate) fn close(&self, deadline: Instant) {
        let (on_thread, connected, session_id) = {
            let mut state = self.state.lock();
            if state.closing || matches!(state.phase, Phase::Expired | Phase::Closed) {
                return;
            }
            state.closing = true;
            let on_thread = state.thread == Some(std::thread::current().id());
            (on_thread, state.phase == Phase::Connected, state.session_id)
        };
        // The session's own thread (an event callback dropping the last handle) cannot wait
        // for a reply it would have to read itself, nor for a connection it would have to make.
        if !on_thread || connected {
            match self.send(vec![Call::new(Request::CloseSession)], deadline, true) {
                Ok(replies) if !on_thread => {
                    for reply in replies {
                        if let Ok(Err(error)) | Err(error) =
                            reply.recv_deadline(deadline).map_err(|_| ZkError::Timeout)
                        {
                            log::debug!("zookeeper session 0x{session_id:x}: closing: {error}");
                        }
                    }
                }
                Ok(_) => {}
                Err(error) => log::debug!("zookeeper session 0x{session_id:x}: closing: {error}"),
            }
        }
        self.finish_close();
        log::debug!("zookeeper session 0x{session_id:x} closed");
    }

    /// Calls the event callback; a panic in it is logged, and does not end the thread.
    fn emit(&self, event: Event) {
        let events = &self.events;
        let called = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| events(event)));
        if called.is_err() {
            log::error!("zookeeper: the session's event callback panicked");
        }
    }

    /// The session's thread: serves each connection, reconnects after each loss, and ends when
    /// the session expires or is closed.
    fn run(self: Arc<Shared>, first: Reading, mut index: usize) {
        let mut reading = Some(first);
        self.emit(Event::Connected);
        loop {
            if let Some(connection) = reading.take() {
                let generation = connection.generation;
                let server = connection.server.clone();
                match self.serve(connection) {
                    End::Lost(failure, why) => {
                        self.break_connection(generation, failure);
                        let (closing, session_id) = {
                            let state = self.state.lock();
                            (state.closing, state.session_id)
                        };
                        if closing || self.is_expired() {
                            return self.ended(false);
                        }
                        log::warn!(
                            "zookeeper session 0x{session_id:x}: connection to {server} lost: {why}"
                        );
                        self.emit(Event::Disconnected);
                    }
                    End::Expired => return self.ended(true),
                    End::Closed => return self.ended(false),
                }
            }
            let lost_at = Instant::now();
            match self.reconnect(&mut index, lost_at) {
                Reconnect::Open(connection) => {
                    reading = Some(connection);
                    self.emit(Event::Connected);
                }
                Reconnect::Expired => return self.ended(true),
                Reconnect::Closed => return self.ended(false),
            }
        }
    }

    /// The end of the thread: the session expired (`expired`) or was closed. The event says
    /// which came first.
    fn ended(&self, expired: bool) {
        let event = if expired && self.expire() {
            log::warn!(
                "zookeeper session 0x{:x} expired: its ephemeral nodes are gone",
                self.session_id()
            );
            Event::Expired
        } else {
            self.finish_close();
            match self.state.lock().phase {
                Phase::Expired => Event::Expired,
                _ => Event::Closed,
            }
        };
        self.emit(event);
    }

    /// Reads connection `reading` until it is lost or the session ends.
    fn serve(&self, reading: Reading) -> End {
        let Reading {
            server,
            mut reader,
            mut frames,
            generation,
        } = reading;
        let mut last_heard = Instant::now();
        loop {
            let (phase, closing, timeout, last_sent) = {
                let state = self.state.lock();
                (state.phase, state.closing, state.timeout, state.last_sent)
            };
            match phase {
                Phase::Closed => return End::Closed,
                Phase::Expired => return End::Expired,
                Phase::Connected | Phase::Disconnected => {}
            }
            let read_timeout = timeout * 2 / 3;
            let ping_every = timeout / 3;
            let dead_at = last_heard + read_timeout;
            let now = Instant::now();
            if now >= dead_at {
                let why = format!("nothing read for {} ms", read_timeout.as_millis());
                return End::Lost(ZkError::ConnectionLoss, why);
            }
            let mut next_ping = last_sent + ping_every;
            if now >= next_ping {
                self.ping(generation, dead_at);
                next_ping = Instant::now() + ping_every;
            }
            reader.set_deadline(dead_at.min(next_ping));
            match frames.next(&mut reader) {
                Ok(frame) => {
                    last_heard = Instant::now();
                    if let Some(end) = self.handle(&frame, &server) {
                        return end;
                    }
                }
                Err(ReadError::Timeout) => {}
                Err(ReadError::Lost(_)) if closing || self.state.lock().closing => {
                    return End::Closed
                }
                Err(ReadError::Lost(why)) => return End::Lost(ZkError::ConnectionLoss, why),
                Err(ReadError::Protocol(why)) => {
                    return End::Lost(ZkError::Protocol(format!("{server}: {why}")), why)
                }
            }
        }
    }

    /// Writes a ping on connection `generation` by `deadline`, unless a caller is writing (the
    /// server hears from the session then anyway).
    fn ping(&self, generation: u64, deadline: Instant) {
        let Some(mut out) = self.out.try_lock() else {
            return;
        };
        if out.generation != generation {
            return;
        }
        let Some(writer) = out.writer.as_mut() else {
            return;
        };
        writer.set_deadline(deadline);
        let written = writer.write_all(&proto::ping());
        drop(out);
        match written {
            Ok(()) => self.state.lock().last_sent = Instant::now(),
            Err(error) => {
                log::debug!("zookeeper: writing a ping: {error}");
                self.break_connection(generation, ZkError::ConnectionLoss);
            }
        }
    }

    /// Handles one frame from `server`; returns how the connection ends if it does.
    fn handle(&self, frame: &[u8], server: &str) -> Option<End> {
        let garbage = |what: &str, why: String| {
            let why = format!("{what}: {why}");
            Some(End::Lost(
                ZkError::Protocol(format!("{server}: {why}")),
                why,
            ))
        };
        let mut body = Reader::new(frame);
        let header = match proto::reply_header(&mut body) {
            Ok(header) => header,
            Err(error) => return garbage("a reply header", error.0),
        };
        if header.zxid > 0 {
            let mut state = self.state.lock();
            state.last_zxid = state.last_zxid.max(header.zxid);
        }
        match header.xid {
            xid::NOTIFICATION => {
                let notification = match proto::watcher_event(&mut body) {
                    Ok(notification) => notification,
                    Err(error) => return garbage("a watch notification", error.0),
                };
                let path = self.chroot.strip(&notification.path);
                self.state.lock().watches.fired(notification.kind, &path);
                let event = match notification.kind {
                    event::NODE_CREATED => Event::NodeCreated(path),
                    event::NODE_DELETED => Event::NodeDeleted(path),
                    event::NODE_DATA_CHANGED => Event::NodeDataChanged(path),
                    event::NODE_CHILDREN_CHANGED => Event::NodeChildrenChanged(path),
                    other => {
                        log::debug!("zookeeper: a notification of type {other} on {path:?}");
                        return None;
                    }
                };
                self.emit(event);
                None
            }
            xid::PING => None,
            xid::AUTH | xid::SET_WATCHES if header.err != code::OK => {
                let why = format!(
                    "the server refused {} (code {})",
                    if header.xid == xid::AUTH {
                        "the authentication"
                    } else {
                        "to re-arm the watches"
                    },
                    header.err
                );
                Some(End::Lost(ZkError::ConnectionLoss, why))
            }
            xid::AUTH | xid::SET_WATCHES => None,
            number => {
                let call = {
                    let mut state = self.state.lock();
                    match state.pending.front() {
                        Some(first) if first.xid == number => state.pending.pop_front(),
                        _ => None,
                    }
                };
                let Some(call) = call else {
                    return garbage(
                        "a reply",
                        format!("to call {number}, which is not the next one awaiting its reply"),
                    );
                };
                let outcome = if header.err == code::OK {
                    match proto::reply(call.opcode, &mut body) {
                        Ok(reply) => Ok(reply),
                        Err(error) => {
                            let why = format!("a reply's body: {}", error.0);
                            let error = ZkError::Protocol(format!("{server}: {why}"));
                            let _ = call.reply.try_send(Err(error.clone()));
                            return Some(End::Lost(error, why));
                        }
                    }
                } else {
                    Err(proto::error_of(header.err))
                };
                if let Some(watch) = call.watch {
                    self.state.lock().watches.armed(watch, header.err);
                }
                let _ = call.reply.try_send(outcome);
                (header.err == code::SESSION_EXPIRED).then_some(End::Expired)
            }
        }
    }

    /// Connects again after a loss at `lost_at`, trying the servers in turn from the one after
    /// `index`, until one takes the session up again, one says it is gone, no server was
    /// reached for a session timeout, or its owner closes it.
    fn reconnect(&self, index: &mut usize, lost_at: Instant) -> Reconnect {
        let mut backoff = FIRST_BACKOFF;
        let mut tried = 0;
        loop {
            let (credentials, watches, timeout) = {
                let state = self.state.lock();
                if state.phase == Phase::Closed {
                    return Reconnect::Closed;
                }
                let credentials = Credentials {
                    session_id: state.session_id,
                    passwd: state.passwd.clone(),
                    last_zxid: state.last_zxid,
                    timeout_ms: self.requested_ms,
                };
                let watches = state.watches.frames(&self.chroot, state.last_zxid);
                (credentials, watches, state.timeout)
            };
            let expires_at = lost_at + timeout;
            let now = Instant::now();
            if now >= expires_at {
                log::warn!(
                    "zookeeper session 0x{:x}: no server reached for {} ms; the ensemble has \
                     expired it",
                    credentials.session_id,
                    timeout.as_millis()
                );
                return Reconnect::Expired;
            }
            *index = (*index + 1) % self.hosts.len();
            let server = &self.hosts[*index];
            let attempt = (now + self.connect_timeout).min(expires_at);
            let digest = self.digest.as_deref();
            match conn::open(server, &credentials, digest, &watches, attempt) {
                Ok(Handshake::Open(conn)) => {
                    return match self.install(*conn) {
                        Some(reading) => Reconnect::Open(reading),
                        None => Reconnect::Closed,
                    };
                }
                Ok(Handshake::Expired) => {
                    log::debug!("zookeeper: {server} says the session has expired");
                    return Reconnect::Expired;
                }
                Err(error) => log::debug!("zookeeper: reconnecting to {server}: {error}"),
            }
            tried += 1;
            if tried % self.hosts.len() == 0 {
                let pause = backoff.min(expires_at.saturating_duration_since(Instant::now()));
                let _ = self.wake.1.recv_timeout(pause);
                backoff = (backoff * 2).min(LONGEST_BACKOFF).min(timeout / 4);
            }
        }
    }

    /// Makes `conn` the session's connection and returns its reading end; none if the owner
    /// closed the session meanwhile (a `closeSession` is written on it then, best effort).
    fn install(&self, conn: conn::Conn) -> Option<Reading> {
        let conn::Conn {
            server,
            reader,
            frames,
            mut writer,
            closer,
            response,
        } = conn;
        let mut out = self.out.lock();
        let mut state = self.state.lock();
        if state.phase == Phase::Closed {
            drop(state);
            drop(out);
            if let Some(frame) = Request::CloseSession.frame(1) {
                writer.set_deadline(Instant::now() + LATE_CLOSE);
                let _ = writer.write_all(&frame);
            }
            return None;
        }
        state.generation += 1;
        let generation = state.generation;
        out.generation = generation;
        out.writer = Some(writer);
        state.phase = Phase::Connected;
        state.closer = Some(closer);
        state.passwd = response.passwd;
        state.timeout = Duration::from_millis(response.timeout_ms.unsigned_abs().into());
        state.server = Some(server.clone());
        state.last_sent = Instant::now();
        log::info!(
            "zookeeper session 0x{:x}: connected again, to {server}",
            state.session_id
        );
        drop(state);
        drop(out);
        self.changed.notify_all();
        Some(Reading {
            server,
            reader,
            frames,
            generation,
        })
    }
}
