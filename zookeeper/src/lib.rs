//! A small synchronous ZooKeeper client whose every call ends by its caller's deadline: one
//! session over one TCP connection at a time, a thread per session that reads replies and watch
//! events and reconnects within the session timeout, and the operations coordination recipes
//! need (create, with ephemeral and sequential modes, or with a TTL; delete; exists, getData and
//! getChildren, with watches; setData; transactions of several writes and checks, applied all or
//! none; a batch of exists; `sync` as a ping).
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::{Duration, Instant};
//! use zookeeper_blocking::{Config, CreateMode, Event, Session};
//!
//! let config = Config::new(vec!["127.0.0.1:2181".into()]);
//! let soon = || Instant::now() + Duration::from_secs(2);
//! let events = Arc::new(|event: Event| log::info!("{event:?}"));
//! let session = Session::connect(config, soon(), events)?;
//! session.ensure_path("/jobs", soon())?;
//! let (mine, _) = session.create("/jobs/n-", b"host-a", CreateMode::EphemeralSequential, soon())?;
//! let (children, _) = session.get_children("/jobs", true, soon())?;
//! println!("{mine} among {children:?}");
//! # Ok::<(), zookeeper_blocking::Error>(())
//! ```
//!
//! Why another client: the synchronous `zookeeper` crate's calls take no timeout, and
//! `zookeeper-client` is async. Here a call that gets no reply by its deadline returns
//! [`Error::Timeout`] (it may still be applied), one whose connection broke returns
//! [`Error::ConnectionLoss`], and an expired session is reported as [`Error::SessionExpired`]
//! rather than replaced by a new one behind its owner's back: a session's ephemeral nodes are
//! its owner's leases.
//!
//! The API is [`Session`] (its calls' documentation tells what a call gets while the
//! connection is lost); its plain types and errors are in `types.rs`, the wire encoding in
//! `jute.rs`, the requests, replies and codes in `proto.rs`, transactions in `multi.rs`, nodes with a TTL in `ttl.rs`, path rules and the chroot in
//! `path.rs`, one connection and its handshake in `conn.rs`, the armed watches in `watches.rs`,
//! the session's state, opening and closing in `session.rs`, its calls in `calls.rs`, and the
//! session's thread, which reads and reconnects, in `thread.rs`. Sockets and deadlines are
//! `deadline-net`'s.
//!
//! Nodes are created with the open ACL (`world:anyone`, all permissions); the digest
//! credentials, if given, are sent after every handshake (`addauth digest`) and never logged.
//! Unix only.

#![forbid(unsafe_code)]

mod calls;
mod codes;
mod conn;
mod jute;
mod multi;
mod path;
mod proto;
mod session;
mod thread;
mod transaction;
mod ttl;
mod types;
mod watches;

#[cfg(test)]
mod call_tests;
#[cfg(test)]
mod fault_tests;
#[cfg(test)]
mod multi_tests;

pub use conn::host_and_port;
pub use multi::{Op, OpResult};
use proto::{Reply, Request};
use session::{Call, SessionShared};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};
pub use types::{Config, CreateMode, Error, Event, Stat};
use watches::Watch;

/// A ZooKeeper session. Clones share it; the last one dropped closes it (within a second).
#[derive(Clone)]
pub struct Session {
    /// Shared by the clones.
    handle: Arc<Handle>,
}

/// What clones of a session share; closes the session when dropped. The session's thread holds
/// the state it shares with this, not this: the thread does not keep the session open.
struct Handle {
    /// What the session's thread shares.
    shared: Arc<SessionShared>,
}

/// How long dropping the last handle of a session may wait for its `closeSession` reply.
const CLOSE_ON_DROP: Duration = Duration::from_secs(1);

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.close(Instant::now() + CLOSE_ON_DROP);
    }
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("session_id", &format_args!("0x{:x}", self.session_id()))
            .field("server", &self.server())
            .field("expired", &self.is_expired())
            .finish()
    }
}

/// A reply of another shape than its request's (which decoding by opcode rules out).
fn unexpected(reply: Reply) -> Error {
    Error::Protocol(format!("a reply of an unexpected shape: {reply:?}"))
}

impl Session {
    /// Opens a new session: tries the hosts until one accepts, all by `deadline`. `events` is
    /// called on the session's thread for every watch notification and state change; it must
    /// not block, nor call the session (its replies are read by that thread), nor hold a clone
    /// of it (the session would never be dropped).
    ///
    /// # Errors
    ///
    /// `Unavailable` when no server completed the handshake by `deadline`, `Protocol` when every
    /// server tried spoke something else, `BadPath` for a bad chroot.
    pub fn connect(
        config: Config,
        deadline: Instant,
        events: Arc<dyn Fn(Event) + Send + Sync>,
    ) -> Result<Session, Error> {
        let shared = SessionShared::connect(config, deadline, events)?;
        Ok(Session {
            handle: Arc::new(Handle { shared }),
        })
    }

    /// The session's state and connection.
    fn shared(&self) -> &SessionShared {
        &self.handle.shared
    }

    /// The session's id, as the server gave it (and shows it in its logs).
    pub fn session_id(&self) -> i64 {
        self.shared().session_id()
    }

    /// The negotiated session timeout.
    pub fn timeout(&self) -> Duration {
        self.shared().timeout()
    }

    /// Whether the session expired or was closed.
    pub fn is_expired(&self) -> bool {
        self.shared().is_expired()
    }

    /// Whether the session has a connection now (and is not being closed).
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn is_connected(&self) -> bool {
        self.shared().is_connected()
    }

    /// The `host:port` connected now.
    pub fn server(&self) -> Option<String> {
        self.shared().server()
    }

    /// Creates a node (create2) and returns its actual path (with its sequential suffix, the
    /// chroot stripped) and stat. A sequential path may end with `/`.
    ///
    /// # Errors
    ///
    /// `NodeExists`, `NoNode` (no parent), `NoAuth`, or a session or connection error.
    pub fn create(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
        deadline: Instant,
    ) -> Result<(String, Stat), Error> {
        path::check(path, mode.is_sequential())?;
        let request = Request::Create {
            path: self.shared().chroot.prefix(path),
            data: data.to_vec(),
            flags: mode.flags(),
        };
        match self.shared().call(Call::new(request), deadline)? {
            Reply::Created(created, stat) => Ok((self.shared().chroot.strip(&created), stat)),
            other => Err(unexpected(other)),
        }
    }

    /// Deletes a node, at `version` if given.
    ///
    /// # Errors
    ///
    /// `NoNode`, `BadVersion`, `NotEmpty`, `NoAuth`, or a session or connection error.
    pub fn delete(&self, path: &str, version: Option<i32>, deadline: Instant) -> Result<(), Error> {
        path::check(path, false)?;
        let request = Request::Delete {
            path: self.shared().chroot.prefix(path),
            version: version.unwrap_or(-1),
        };
        self.shared().call(Call::new(request), deadline).map(|_| ())
    }

    /// The node's stat, or none if it does not exist. With `watch`, a watch is set either way:
    /// its deletion or change fires it, or its creation if it does not exist.
    ///
    /// # Errors
    ///
    /// A session or connection error.
    pub fn exists(
        &self,
        path: &str,
        watch: bool,
        deadline: Instant,
    ) -> Result<Option<Stat>, Error> {
        path::check(path, false)?;
        let call = Call {
            request: Request::Exists {
                path: self.shared().chroot.prefix(path),
                watch,
            },
            watch: watch.then(|| Watch::Exists(path.to_owned())),
        };
        stat_or_none(self.shared().call(call, deadline))
    }

    /// The node's data and stat. With `watch`, a watch is set if the node exists.
    ///
    /// # Errors
    ///
    /// `NoNode`, `NoAuth`, or a session or connection error.
    pub fn get_data(
        &self,
        path: &str,
        watch: bool,
        deadline: Instant,
    ) -> Result<(Vec<u8>, Stat), Error> {
        path::check(path, false)?;
        let call = Call {
            request: Request::GetData {
                path: self.shared().chroot.prefix(path),
                watch,
            },
            watch: watch.then(|| Watch::Data(path.to_owned())),
        };
        match self.shared().call(call, deadline)? {
            Reply::Data(data, stat) => Ok((data, stat)),
            other => Err(unexpected(other)),
        }
    }

    /// Replaces the node's data, at `version` if given, and returns its new stat.
    ///
    /// # Errors
    ///
    /// `NoNode`, `BadVersion`, `NoAuth`, or a session or connection error.
    pub fn set_data(
        &self,
        path: &str,
        data: &[u8],
        version: Option<i32>,
        deadline: Instant,
    ) -> Result<Stat, Error> {
        path::check(path, false)?;
        let request = Request::SetData {
            path: self.shared().chroot.prefix(path),
            data: data.to_vec(),
            version: version.unwrap_or(-1),
        };
        match self.shared().call(Call::new(request), deadline)? {
            Reply::Stat(stat) => Ok(stat),
            other => Err(unexpected(other)),
        }
    }

    /// The names of the node's children (unsorted) and its stat. With `watch`, a watch on its
    /// children is set if the node exists.
    ///
    /// # Errors
    ///
    /// `NoNode`, `NoAuth`, or a session or connection error.
    pub fn get_children(
        &self,
        path: &str,
        watch: bool,
        deadline: Instant,
    ) -> Result<(Vec<String>, Stat), Error> {
        path::check(path, false)?;
        let call = Call {
            request: Request::GetChildren {
                path: self.shared().chroot.prefix(path),
                watch,
            },
            watch: watch.then(|| Watch::Children(path.to_owned())),
        };
        match self.shared().call(call, deadline)? {
            Reply::Children(children, stat) => Ok((children, stat)),
            other => Err(unexpected(other)),
        }
    }

    /// Several `exists` (no watch) pipelined: all written, then all replies read; one result
    /// per path, in order, all by `deadline`. A bad path gets `BadPath` and is not sent.
    pub fn exists_many(
        &self,
        paths: &[String],
        deadline: Instant,
    ) -> Vec<Result<Option<Stat>, Error>> {
        let mut results: Vec<Option<Result<Option<Stat>, Error>>> = Vec::new();
        let mut calls = Vec::new();
        for path in paths {
            match path::check(path, false) {
                Ok(()) => {
                    results.push(None);
                    calls.push(Call::new(Request::Exists {
                        path: self.shared().chroot.prefix(path),
                        watch: false,
                    }));
                }
                Err(error) => results.push(Some(Err(error))),
            }
        }
        let mut replies = if calls.is_empty() {
            Vec::new()
        } else {
            self.shared().call_many(calls, deadline)
        }
        .into_iter();
        results
            .into_iter()
            .map(|result| match result {
                Some(refused) => refused,
                None => stat_or_none(replies.next().unwrap_or(Err(Error::ConnectionLoss))),
            })
            .collect()
    }

    /// Creates `path` and its missing parents as empty persistent nodes (`NodeExists`
    /// ignored). Under a chroot, the chroot's own nodes are created too if missing.
    ///
    /// # Errors
    ///
    /// `NoAuth`, or a session or connection error.
    pub fn ensure_path(&self, path: &str, deadline: Instant) -> Result<(), Error> {
        path::check(path, false)?;
        if self.exists(path, false, deadline)?.is_some() {
            return Ok(());
        }
        // The server's paths, from the node asked for up to the first that exists (a create
        // that answers NoNode lacks its parent), then created back down.
        let full = self.shared().chroot.prefix(path);
        let mut missing = vec![full.as_str()];
        loop {
            let Some(lowest) = missing.last().copied() else {
                return Ok(());
            };
            match self.create_raw(lowest, deadline) {
                Ok(()) | Err(Error::NodeExists) => {
                    missing.pop();
                }
                Err(Error::NoNode) => match lowest.rfind('/') {
                    Some(cut) if cut > 0 => missing.push(&lowest[..cut]),
                    _ => return Err(Error::NoNode),
                },
                Err(error) => return Err(error),
            }
        }
    }

    /// Creates an empty persistent node at `server_path`, the chroot already in it.
    fn create_raw(&self, server_path: &str, deadline: Instant) -> Result<(), Error> {
        let request = Request::Create {
            path: server_path.to_owned(),
            data: Vec::new(),
            flags: CreateMode::Persistent.flags(),
        };
        self.shared().call(Call::new(request), deadline).map(|_| ())
    }

    /// A request whose reply proves the session alive when it was sent (an `exists` of the
    /// root): `Ok` means the server answered.
    ///
    /// # Errors
    ///
    /// A session or connection error.
    pub fn sync_ping(&self, deadline: Instant) -> Result<(), Error> {
        let request = Request::Exists {
            path: self.shared().chroot.prefix("/"),
            watch: false,
        };
        match self.shared().call(Call::new(request), deadline) {
            Ok(_) | Err(Error::NoNode) => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Ends the session (`closeSession`, its reply awaited by `deadline`): its ephemeral nodes
    /// go at once. Later calls fail with `Closed`. Waits for a connection if there is none now;
    /// if none comes by `deadline`, the session is closed here and the ensemble expires it.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn close(&self, deadline: Instant) {
        self.shared().close(deadline);
    }

    /// How many watches are armed now.
    #[cfg(test)]
    pub fn watch_count(&self) -> usize {
        self.shared().watch_count()
    }
}

/// An `exists` reply: a stat, or none for `NoNode`.
fn stat_or_none(reply: Result<Reply, Error>) -> Result<Option<Stat>, Error> {
    match reply {
        Ok(Reply::Stat(stat)) => Ok(Some(stat)),
        Ok(other) => Err(unexpected(other)),
        Err(Error::NoNode) => Ok(None),
        Err(error) => Err(error),
    }
}
