//! A small pool of connections to one server, so that threads do not queue on one connection. It
//! keeps at most `max_idle` idle connections and opens more when all are in use. Every call made
//! through it ends by one deadline, connecting included. A connection that fails takes the idle
//! ones with it: they are most likely to the same server that just went away (restarted, or no
//! longer the primary), and each would fail a call of its own.
//!
//! The server is at a fixed address, or is the primary a majority of Sentinels name, which each
//! new connection asks for (`Sentinels::connect`, with the epoch of the connection's tokens).
//!
//! The first connection also asks the server how it evicts keys: a lock is safe only on a server
//! that never evicts (`maxmemory-policy noeviction`), and the pool says so once, at warn, if it
//! finds another policy. A server that refuses to tell (`CONFIG` is often renamed or denied) is
//! not complained about.

use crate::conn::{Conn, Endpoint, Sentinels};
use crate::error::{Error, Result};
use crate::fencing::Epoch;
use crate::scripts::Acks;
use parking_lot::Mutex;
use redis::Value;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a server says it is: its run id (`INFO server`) where it tells, and the address its
/// socket was connected to. Two endpoints that report the same identity reach one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    pub(crate) run_id: Option<String>,
    pub(crate) peer: Option<String>,
}

impl Identity {
    /// Whether both identities are of one server.
    pub(crate) fn same_server(&self, other: &Identity) -> bool {
        let same = |a: &Option<String>, b: &Option<String>| a.is_some() && a == b;
        same(&self.run_id, &other.run_id) || same(&self.peer, &other.peer)
    }
}

/// Told the identity of every new connection's server; refusing it refuses the connection.
pub(crate) type IdentityCheck = Arc<dyn Fn(&Identity) -> Result<()> + Send + Sync>;

/// Where a pool's connections go.
enum Target {
    /// One server, whose tokens are drawn in `epoch`.
    Fixed { endpoint: Endpoint, epoch: Epoch },
    /// The primary the Sentinels name, whose tokens are drawn in the epoch it was promoted in.
    Sentinel(Sentinels),
}

pub(crate) struct Pool {
    target: Target,
    /// The replica acknowledgements every write through the pool waits for.
    acks: Option<Acks>,
    idle: Mutex<Vec<Conn>>,
    max_idle: usize,
    connect_timeout: Duration,
    command_timeout: Duration,
    /// Whether the eviction policy was looked at (by the first connection).
    policy_checked: AtomicBool,
    identity_check: Option<IdentityCheck>,
    /// Raised when every connection must go ([`Pool::forget_connections`]); a connection opened
    /// under a lower value is closed instead of used again.
    generation: AtomicU64,
    /// One more than the highest Sentinel configuration epoch of a primary a connection was
    /// opened to; 0 before the first.
    primary_epoch: AtomicU64,
}

impl Pool {
    pub(crate) fn new(
        endpoint: Endpoint,
        max_idle: usize,
        connect_timeout: Duration,
        command_timeout: Duration,
    ) -> Self {
        let target = Target::Fixed {
            endpoint,
            epoch: Epoch::None,
        };
        Pool::to(target, max_idle, connect_timeout, command_timeout)
    }

    /// A pool of connections to the primary `sentinels` name.
    pub(crate) fn sentinel(
        sentinels: Sentinels,
        max_idle: usize,
        connect_timeout: Duration,
        command_timeout: Duration,
    ) -> Self {
        let target = Target::Sentinel(sentinels);
        Pool::to(target, max_idle, connect_timeout, command_timeout)
    }

    fn to(
        target: Target,
        max_idle: usize,
        connect_timeout: Duration,
        command_timeout: Duration,
    ) -> Self {
        Pool {
            target,
            acks: None,
            idle: Mutex::new(Vec::new()),
            max_idle,
            connect_timeout,
            command_timeout,
            policy_checked: AtomicBool::new(false),
            identity_check: None,
            generation: AtomicU64::new(0),
            primary_epoch: AtomicU64::new(0),
        }
    }

    /// Has every new connection report its server's identity to `check` first.
    pub(crate) fn with_identity_check(mut self, check: IdentityCheck) -> Self {
        self.identity_check = Some(check);
        self
    }

    /// Draws the tokens of a fixed server in `epoch` (a cluster node's own).
    pub(crate) fn with_epoch(mut self, epoch: Epoch) -> Self {
        if let Target::Fixed { epoch: fixed, .. } = &mut self.target {
            *fixed = epoch;
        }
        self
    }

    /// Has every acquisition, release and renewal through the pool wait for `acks`.
    pub(crate) fn with_acks(mut self, acks: Option<Acks>) -> Self {
        self.acks = acks;
        self
    }

    /// The replica acknowledgements writes wait for.
    pub(crate) fn acks(&self) -> Option<Acks> {
        self.acks
    }

    /// The server or deployment, as shown to people: passwords hidden.
    pub(crate) fn shown(&self) -> &str {
        match &self.target {
            Target::Fixed { endpoint, .. } => endpoint.shown(),
            Target::Sentinel(sentinels) => sentinels.shown(),
        }
    }

    pub(crate) fn command_timeout(&self) -> Duration {
        self.command_timeout
    }

    /// The deadline of a call that starts now.
    pub(crate) fn call_deadline(&self) -> Instant {
        crate::policy::after(self.command_timeout)
    }

    /// A new connection, open by `deadline` and by the connect timeout, whichever is first; its
    /// calls end by `deadline` until it is given another.
    pub(crate) fn open(&self, deadline: Instant) -> Result<Conn> {
        // Read first: a failover announced while connecting makes this connection stale.
        let mut generation = self.generation.load(Ordering::Acquire);
        let connect_by = deadline.min(crate::policy::after(self.connect_timeout));
        let mut conn = match &self.target {
            Target::Fixed { endpoint, epoch } => {
                let mut conn =
                    Conn::open(endpoint, connect_by).map_err(Error::unavailable_or_refused)?;
                conn.set_epoch(*epoch);
                conn
            }
            Target::Sentinel(sentinels) => {
                let conn = sentinels.connect(connect_by)?;
                if let Epoch::Known(epoch) = conn.epoch() {
                    let term = epoch.saturating_add(1);
                    let seen = self.primary_epoch.fetch_max(term, Ordering::AcqRel);
                    if seen > term {
                        // A primary of an older term than one already reached: the Sentinels
                        // that named it have not caught up yet.
                        return Err(Error::Unavailable(crate::conn::io_error(
                            std::io::ErrorKind::Other,
                            format!(
                                "the Sentinels named a primary of epoch {epoch}, older than \
                                 epoch {} already seen",
                                seen - 1
                            ),
                        )));
                    }
                    if seen != 0 && seen < term {
                        // The Sentinels name a newer primary than the pool's other connections
                        // reach, announced or not: none of those may serve another call. This
                        // one reaches the newer primary: it is of the new generation.
                        self.forget_connections();
                        generation = self.generation.load(Ordering::Acquire);
                    }
                }
                conn
            }
        };
        if !self.policy_checked.swap(true, Ordering::Relaxed) {
            self.check_eviction_policy(&mut conn)?;
        }
        if let Some(check) = &self.identity_check {
            let identity = self.identity(&mut conn)?;
            check(&identity)?;
        }
        conn.set_deadline(deadline);
        conn.generation = generation;
        Ok(conn)
    }

    /// The Sentinels the pool asks for the primary, if it does.
    pub(crate) fn sentinels(&self) -> Option<&Sentinels> {
        match &self.target {
            Target::Sentinel(sentinels) => Some(sentinels),
            Target::Fixed { .. } => None,
        }
    }

    /// Takes in that `sentinel` announced a failover: every connection is dropped at once, and
    /// from the moment the Sentinel says which primary it named, no connection is opened to an
    /// older one.
    pub(crate) fn failover_announced(&self, sentinel: &Endpoint) {
        if let Some(sentinels) = self.sentinels() {
            self.forget_connections();
            sentinels.announced(sentinel, self.call_deadline());
        }
    }

    /// Closes the idle connections, and every connection in use as soon as it is given back or
    /// looked at ([`Pool::is_current`]): the server they reach is no longer the one to use (the
    /// Sentinels announced a new primary).
    pub(crate) fn forget_connections(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.idle.lock().clear();
    }

    /// Whether `conn`, opened by this pool, may still be used.
    pub(crate) fn is_current(&self, conn: &Conn) -> bool {
        conn.is_usable() && conn.generation == self.generation.load(Ordering::Acquire)
    }

    /// Warns once if the server may evict keys: an evicted lock key is a lock granted twice, an
    /// evicted fencing counter makes tokens go back.
    fn check_eviction_policy(&self, conn: &mut Conn) -> Result<()> {
        let ask = redis::cmd("CONFIG")
            .arg("GET")
            .arg("maxmemory-policy")
            .clone();
        let reply = conn
            .exchange(&[ask])
            .map_err(Error::unavailable_or_refused)?;
        if let Some(Value::Array(pair)) = reply.first() {
            if let [_, Value::BulkString(policy)] = pair.as_slice() {
                if policy.as_slice() != b"noeviction" {
                    log::warn!(
                        "redis at {} evicts keys (maxmemory-policy {}): locks are safe only with \
                         noeviction, since an evicted lock can be taken twice",
                        self.shown(),
                        String::from_utf8_lossy(policy)
                    );
                }
            }
        }
        Ok(())
    }

    /// The identity of the server a connection reaches now, asked by `deadline`.
    pub(crate) fn identify(&self, deadline: Instant) -> Result<Identity> {
        let mut conn = self.get(deadline)?;
        self.identity(&mut conn)
    }

    fn identity(&self, conn: &mut Conn) -> Result<Identity> {
        let reply = conn
            .exchange(&[redis::cmd("INFO").arg("server").clone()])
            .map_err(Error::unavailable_or_refused)?;
        let run_id = match reply.first() {
            Some(Value::BulkString(info)) => String::from_utf8_lossy(info)
                .lines()
                .find_map(|line| line.strip_prefix("run_id:"))
                .map(|id| id.trim().to_owned()),
            _ => None,
        };
        Ok(Identity {
            run_id,
            peer: conn.peer(),
        })
    }

    /// An idle connection, or a new one; its calls end by `deadline`.
    pub(crate) fn get(&self, deadline: Instant) -> Result<Pooled<'_>> {
        let idle = self.idle.lock().pop().filter(|conn| self.is_current(conn));
        let conn = match idle {
            Some(mut conn) => {
                conn.set_deadline(deadline);
                conn
            }
            None => self.open(deadline)?,
        };
        Ok(Pooled {
            pool: self,
            conn: Some(conn),
        })
    }

    /// Runs `op` on a pooled connection, all of it by `deadline`.
    pub(crate) fn call<T>(
        &self,
        deadline: Instant,
        op: impl FnOnce(&mut Conn) -> Result<T>,
    ) -> Result<T> {
        let mut conn = self.get(deadline)?;
        op(&mut conn)
    }
}

/// How an operation reaches a server: through its pool, and after `ASKING` when a cluster
/// redirected it there for one command (`ASK`).
#[derive(Clone, Copy)]
pub(crate) struct Via<'a> {
    pub(crate) pool: &'a Pool,
    pub(crate) asking: bool,
}

impl<'a> Via<'a> {
    pub(crate) fn direct(pool: &'a Pool) -> Via<'a> {
        Via {
            pool,
            asking: false,
        }
    }

    /// A connection whose calls end by `deadline`.
    pub(crate) fn get(self, deadline: Instant) -> Result<Pooled<'a>> {
        let mut conn = self.pool.get(deadline)?;
        if self.asking {
            conn.ask_each();
        }
        Ok(conn)
    }

    /// Runs `op` on a connection, all of it by `deadline`.
    pub(crate) fn call<T>(
        self,
        deadline: Instant,
        op: impl FnOnce(&mut Conn) -> Result<T>,
    ) -> Result<T> {
        let mut conn = self.get(deadline)?;
        op(&mut conn)
    }
}

/// A connection on loan; back to the pool on drop if it is still usable.
pub(crate) struct Pooled<'a> {
    pool: &'a Pool,
    conn: Option<Conn>,
}

impl Deref for Pooled<'_> {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        self.conn.as_ref().expect("present until drop")
    }
}

impl DerefMut for Pooled<'_> {
    fn deref_mut(&mut self) -> &mut Conn {
        self.conn.as_mut().expect("present until drop")
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        if let Some(mut conn) = self.conn.take() {
            conn.stop_asking();
            let mut idle = self.pool.idle.lock();
            if !conn.is_usable() {
                idle.clear();
            } else if self.pool.is_current(&conn) && idle.len() < self.pool.max_idle {
                idle.push(conn);
            }
        }
    }
}
