//! A session's shared state, its opening and its closing; its calls are in `calls.rs`, whose
//! documentation tells what a call gets while the connection is lost.
//!
//! When a connection is lost, the session's thread (`thread.rs`) tries the servers in turn with
//! the session's id, password and last zxid seen, authenticates again and re-arms the watches. A
//! server that says the session is gone, or no server reached for a whole session timeout after
//! the loss, ends the session for good (`Expired`): the thread never opens a new session.

use super::conn::{self, Credentials, Handshake, Reading};
use super::path::Chroot;
use super::proto::{Reply, Request};
use super::watches::{Watch, Watches};
use super::{Config, Error, Event};
use crossbeam_channel::{Receiver, Sender};
use deadline_net::Timed;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

/// The first pause after every server of the list failed once; it doubles each round.
pub(super) const FIRST_BACKOFF: Duration = Duration::from_millis(10);

/// The longest pause between two rounds of the server list.
pub(super) const LONGEST_BACKOFF: Duration = Duration::from_secs(1);

/// The callback that receives a session's events.
pub(crate) type Events = Arc<dyn Fn(Event) + Send + Sync>;

/// Where a session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
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
pub(super) struct Pending {
    /// The call's number: its reply carries it.
    pub(super) xid: i32,
    /// The request's type, to decode its reply.
    pub(super) opcode: i32,
    /// The watch its reply arms, if any.
    pub(super) watch: Option<Watch>,
    /// Where its caller waits (or waited: a reply to a caller gone is dropped here).
    pub(super) reply: Sender<Result<Reply, Error>>,
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
pub(super) struct SessionState {
    /// Where the session stands.
    pub(super) phase: Phase,
    /// Its owner is closing it: no new call but the `closeSession`.
    pub(super) closing: bool,
    /// The number of the connection open now, or of the last one.
    pub(super) generation: u64,
    /// A handle on the socket of the connection open now, to close it.
    pub(super) closer: Option<Timed>,
    /// The calls written and not yet answered, in the order written.
    pub(super) pending: VecDeque<Pending>,
    /// The number of the next call.
    pub(super) next_xid: i32,
    /// The largest zxid seen in a reply header.
    pub(super) last_zxid: i64,
    /// The session's id, to take it up again on another connection.
    pub(super) session_id: i64,
    /// The session's password, likewise.
    pub(super) passwd: Vec<u8>,
    /// The negotiated session timeout.
    pub(super) timeout: Duration,
    /// The `host:port` of the connection open now, or of the last one.
    pub(super) server: Option<String>,
    /// The watches armed, to re-arm on another connection.
    pub(super) watches: Watches,
    /// When a frame was last written.
    pub(super) last_sent: Instant,
    /// The session's thread.
    pub(super) thread: Option<ThreadId>,
}

impl SessionState {
    /// Numbers a call: from 1, never one of the reserved negative xids.
    pub(super) fn next_xid(&mut self) -> i32 {
        let xid = self.next_xid;
        self.next_xid = if xid == i32::MAX { 1 } else { xid + 1 };
        xid
    }
}

/// The writing end of the connection open now.
pub(super) struct Out {
    /// The handle to write with; none before the first connection.
    pub(super) writer: Option<Timed>,
    /// The number of the connection it writes to.
    pub(super) generation: u64,
}

/// What a session's handles and its thread share.
pub(crate) struct SessionShared {
    /// The servers, in the order tried.
    pub(super) hosts: Vec<String>,
    /// The node all paths are relative to.
    pub(crate) chroot: Chroot,
    /// `user:password` for the digest authentication; never logged.
    pub(super) digest: Option<String>,
    /// The session timeout asked for, in milliseconds.
    pub(super) requested_ms: i32,
    /// How long one server is given to connect and answer the handshake.
    pub(super) connect_timeout: Duration,
    /// The session's state.
    pub(super) state: Mutex<SessionState>,
    /// Notified whenever the phase changes.
    pub(super) changed: Condvar,
    /// Lock order: `out`, then `state`.
    pub(super) out: Mutex<Out>,
    /// The owner's event callback.
    pub(super) events: Events,
    /// Wakes the thread from a pause between reconnection attempts.
    pub(super) wake: (Sender<()>, Receiver<()>),
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
fn connect_failure(failures: Vec<(String, Error)>) -> Error {
    if failures.is_empty() {
        return Error::Unavailable("no server tried before the deadline".into());
    }
    if let Some(Error::Protocol(why)) = failures.first().map(|(_, error)| error) {
        if failures
            .iter()
            .all(|(_, error)| matches!(error, Error::Protocol(_)))
        {
            return Error::Protocol(why.clone());
        }
    }
    let whys: Vec<String> = failures
        .into_iter()
        .map(|(_, error)| match error {
            Error::Unavailable(why) | Error::Protocol(why) => why,
            other => other.to_string(),
        })
        .collect();
    Error::Unavailable(whys.join("; "))
}

/// `duration` after `now`, or a year after if that is beyond what an `Instant` holds.
pub(super) fn later(now: Instant, duration: Duration) -> Instant {
    now.checked_add(duration)
        .unwrap_or(now + Duration::from_secs(365 * 24 * 3600))
}

/// `duration` in whole milliseconds, at least 1, for the handshake.
fn millis(duration: Duration) -> i32 {
    i32::try_from(duration.as_millis())
        .unwrap_or(i32::MAX)
        .max(1)
}

impl SessionShared {
    /// Opens a new session on one of the servers by `deadline` and starts its thread.
    pub(crate) fn connect(
        config: Config,
        deadline: Instant,
        events: Events,
    ) -> Result<Arc<SessionShared>, Error> {
        let chroot = Chroot::new(config.chroot.as_deref())?;
        if config.hosts.is_empty() {
            return Err(Error::Unavailable("no ZooKeeper server given".into()));
        }
        let hosts = shuffled(config.hosts);
        let requested_ms = millis(config.session_timeout);
        let credentials = Credentials::new_session(requested_ms);
        let mut failures: Vec<(String, Error)> = Vec::new();
        let mut backoff = FIRST_BACKOFF;
        let mut index = 0;
        let conn = loop {
            let now = Instant::now();
            if now >= deadline {
                return Err(connect_failure(failures));
            }
            let server = &hosts[index];
            let attempt = deadline.min(later(now, config.connect_timeout));
            match conn::open(server, &credentials, config.digest.as_deref(), &[], attempt) {
                Ok(Handshake::Open(conn)) => break *conn,
                Ok(Handshake::Expired) => {
                    let error = Error::Unavailable(format!("{server}: refused a new session"));
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
        let state = SessionState {
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
        let shared = Arc::new(SessionShared {
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
                Err(Error::Unavailable(format!(
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
    #[cfg_attr(not(test), allow(dead_code))]
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

    /// Ends the session for good as expired, unless its owner closed it first; returns whether
    /// it did.
    pub(super) fn expire(&self) -> bool {
        self.end(Phase::Expired, Error::SessionExpired)
    }

    /// Ends the session as closed by its owner (unless it expired first).
    pub(super) fn finish_close(&self) {
        self.end(Phase::Closed, Error::Closed);
        let _ = self.wake.0.try_send(());
    }

    /// Ends the session in `phase` (unless it has ended already): every call in flight fails
    /// with `failure`, the socket is closed. Returns whether it ended it.
    fn end(&self, phase: Phase, failure: Error) -> bool {
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
                            reply.recv_deadline(deadline).map_err(|_| Error::Timeout)
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
    pub(super) fn emit(&self, event: Event) {
        let events = &self.events;
        let called = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| events(event)));
        if called.is_err() {
            log::error!("zookeeper: the session's event callback panicked");
        }
    }
}
