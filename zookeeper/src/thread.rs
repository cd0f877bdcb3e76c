//! The session's thread: it reads every frame of the connection open now, hands each reply to
//! the call waiting on its xid, delivers watch events, pings when nothing was written for a
//! third of the session timeout and takes the connection for lost when nothing was read for
//! two thirds of it; then connects again, and ends when the session expires or is closed.

use super::conn::{self, Credentials, Handshake, ReadError, Reading};
use super::jute::Reader;
use super::proto::{self, code, event, xid, Request};
use super::session::{later, Phase, SessionShared, FIRST_BACKOFF, LONGEST_BACKOFF};
use super::{Error, Event};
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a `closeSession` sent on a connection opened after its owner closed the session may
/// take to be written.
const LATE_CLOSE: Duration = Duration::from_millis(200);

/// How serving a connection ended.
enum End {
    /// Lost: the failure its calls in flight get, and why, for the log.
    Lost(Error, String),
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

impl SessionShared {
    /// The session's thread: serves each connection, reconnects after each loss, and ends when
    /// the session expires or is closed.
    pub(super) fn run(self: Arc<SessionShared>, first: Reading, mut index: usize) {
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
                return End::Lost(Error::ConnectionLoss, why);
            }
            let mut next_ping = last_sent + ping_every;
            if now >= next_ping {
                self.ping(generation, dead_at);
                next_ping = Instant::now() + ping_every;
            }
            reader.set_deadline(dead_at.min(next_ping));
            let received = reader.received();
            let read = frames.next(&mut reader);
            // Any byte read is news from the server, even a frame still incomplete.
            if reader.received() != received {
                last_heard = Instant::now();
            }
            match read {
                Ok(frame) => {
                    if let Some(end) = self.handle(&frame, &server) {
                        return end;
                    }
                }
                Err(ReadError::Timeout) => {}
                Err(ReadError::Lost(_)) if closing || self.state.lock().closing => {
                    return End::Closed
                }
                Err(ReadError::Lost(why)) => return End::Lost(Error::ConnectionLoss, why),
                Err(ReadError::Protocol(why)) => {
                    return End::Lost(Error::Protocol(format!("{server}: {why}")), why)
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
                self.break_connection(generation, Error::ConnectionLoss);
            }
        }
    }

    /// Handles one frame from `server`; returns how the connection ends if it does.
    fn handle(&self, frame: &[u8], server: &str) -> Option<End> {
        let garbage = |what: &str, why: String| {
            let why = format!("{what}: {why}");
            Some(End::Lost(Error::Protocol(format!("{server}: {why}")), why))
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
                Some(End::Lost(Error::ConnectionLoss, why))
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
                            let error = Error::Protocol(format!("{server}: {why}"));
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
            let attempt = later(now, self.connect_timeout).min(expires_at);
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
