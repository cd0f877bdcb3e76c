//! A session's calls. Callers write their own request frames, under the write lock and by their
//! own deadlines, and wait for their replies in a slot of their own (a one-place channel); the
//! session's thread (`thread.rs`) reads every frame and hands each reply to the call waiting on
//! its xid (replies come in the order the calls were written). A caller whose deadline passes
//! gets `Timeout`; its reply, when it comes, is dropped.
//!
//! When a connection is lost, every call in flight fails with `ConnectionLoss` (`Protocol` if
//! the server sent what is not ZooKeeper, which drops the connection too); calls made while
//! there is no connection wait for the next one until their deadline, then fail with
//! `ConnectionLoss` (never sent). The session's opening, its reconnections and its end are in
//! `session.rs`.

use super::proto::{code, Reply};
use super::session::{Call, Pending, Phase, SessionShared};
use super::Error;
use crossbeam_channel::{Receiver, RecvTimeoutError};
use deadline_net::Timed;
use std::io::{self, Write};
use std::time::Instant;

/// Writes `bytes` until all are written or a write fails; returns how many were written, and
/// the failure.
fn write_out(writer: &mut Timed, bytes: &[u8]) -> (usize, Option<io::Error>) {
    let mut written = 0;
    while written < bytes.len() {
        match writer.write(&bytes[written..]) {
            Ok(0) => return (written, Some(io::ErrorKind::WriteZero.into())),
            Ok(n) => written += n,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return (written, Some(error)),
        }
    }
    (written, None)
}

impl SessionShared {
    /// Makes one call and waits for its reply by `deadline`.
    pub(crate) fn call(&self, call: Call, deadline: Instant) -> Result<Reply, Error> {
        self.call_many(vec![call], deadline)
            .pop()
            .unwrap_or(Err(Error::ConnectionLoss))
    }

    /// Writes `calls` together, then waits for their replies, all by `deadline`: one result
    /// per call, in order.
    pub(crate) fn call_many(
        &self,
        calls: Vec<Call>,
        deadline: Instant,
    ) -> Vec<Result<Reply, Error>> {
        let count = calls.len();
        match self.send(calls, deadline, false) {
            Ok(replies) => replies
                .into_iter()
                .map(|reply| match reply.recv_deadline(deadline) {
                    Ok(result) => result,
                    Err(RecvTimeoutError::Timeout) => Err(Error::Timeout),
                    Err(RecvTimeoutError::Disconnected) => Err(Error::ConnectionLoss),
                })
                .collect(),
            Err(error) => vec![Err(error); count],
        }
    }

    /// Waits for a connection, then writes `calls` in one piece by `deadline`; returns where
    /// each reply will come. `closing` lets the `closeSession` of [`SessionShared::close`] through.
    pub(super) fn send(
        &self,
        calls: Vec<Call>,
        deadline: Instant,
        closing: bool,
    ) -> Result<Vec<Receiver<Result<Reply, Error>>>, Error> {
        let mut frames = Vec::with_capacity(calls.len());
        for call in &calls {
            // Numbered later: the xid is the frame's first field, after its length.
            frames.push(
                call.request
                    .frame(0)
                    .ok_or(Error::Api(code::MARSHALLING_ERROR))?,
            );
        }
        loop {
            self.await_connection(deadline, closing)?;
            let Some(mut out) = self.out.try_lock_until(deadline) else {
                return Err(Error::Timeout);
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
                return Err(Error::Closed);
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout);
            }
            let mut bytes = Vec::with_capacity(frames.iter().map(Vec::len).sum());
            let mut replies = Vec::with_capacity(calls.len());
            let mut xids = Vec::with_capacity(calls.len());
            for (call, mut frame) in calls.into_iter().zip(frames) {
                let xid = state.next_xid();
                xids.push(xid);
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
            let (written, failed) = match out.writer.as_mut() {
                Some(writer) => {
                    writer.set_deadline(deadline);
                    write_out(writer, &bytes)
                }
                None => (0, Some(io::Error::from(io::ErrorKind::NotConnected))),
            };
            if let Some(error) = failed {
                let timed_out = error.kind() == io::ErrorKind::TimedOut;
                if written == 0 && timed_out {
                    // The deadline passed before a byte went out: the calls are taken back,
                    // and the connection stays as it was.
                    self.state
                        .lock()
                        .pending
                        .retain(|call| !xids.contains(&call.xid));
                    return Err(Error::Timeout);
                }
                drop(out);
                // A frame cut short must never be followed by another: the connection goes.
                log::warn!("zookeeper: writing to {server}: {error}; the connection is dropped");
                self.break_connection(generation, Error::ConnectionLoss);
                return Err(if timed_out {
                    Error::Timeout
                } else {
                    Error::ConnectionLoss
                });
            }
            return Ok(replies);
        }
    }

    /// Waits until the session is connected, by `deadline`.
    fn await_connection(&self, deadline: Instant, closing: bool) -> Result<(), Error> {
        let mut state = self.state.lock();
        loop {
            if state.closing && !closing {
                return Err(Error::Closed);
            }
            match state.phase {
                Phase::Connected => return Ok(()),
                Phase::Expired => return Err(Error::SessionExpired),
                Phase::Closed => return Err(Error::Closed),
                Phase::Disconnected => {
                    if Instant::now() >= deadline {
                        return Err(Error::ConnectionLoss);
                    }
                    self.changed.wait_until(&mut state, deadline);
                }
            }
        }
    }

    /// Takes connection `generation` for lost, if it is still the one open: its calls in flight
    /// fail with `failure` and its socket is closed.
    pub(super) fn break_connection(&self, generation: u64, failure: Error) {
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
}
