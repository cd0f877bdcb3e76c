//! A small pool of connections to one server, so that threads do not queue on one connection. It
//! keeps at most `max_idle` idle connections and opens more when all are in use, up to a cap if
//! it has one (then a call waits for a connection to come back, until its deadline). Every call made
//! through it ends by one deadline, connecting included. A connection that fails takes the idle
//! ones with it: they are most likely to the same server that just went away (restarted, or no
//! longer the primary), and each would fail a call of its own.
//!
//! Where new connections go is the pool's [`Target`]: a server at a fixed address ([`Fixed`]), or
//! what a deployment looks up (the primary its Sentinels name). A deployment may also have every
//! new connection checked before its first use ([`Admission`]), and each connection set up for
//! one operation ([`Setup`]); the pool knows neither what the checks are nor what the setup does.
//!
//! The first connection also asks the server how it evicts keys: a lock is safe only on a server
//! that never evicts (`maxmemory-policy noeviction`), and the pool says so once, at warn, if it
//! finds another policy. A server that refuses to tell (`CONFIG` is often renamed or denied) is
//! not complained about.

mod lend;

pub(crate) use lend::{Lent, Pooled, Setup, Via};

use crate::backend::ServerIdentity;
use crate::error::{Error, Result};
use crate::stores::redis::conn::{Conn, Endpoint, Split};
use crate::stores::redis::fencing::Epoch;
use crate::stores::redis::pipe::Pipe;
use crate::stores::redis::scripts::Acks;
use lend::Shared;
use parking_lot::{Condvar, Mutex, RwLock};
use redis::Value;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The identity of the server `conn` reaches: its run id (`INFO server`) where it tells, and the
/// address its socket was connected to. Two endpoints that report the same identity reach one
/// server.
pub(crate) fn identity_of(conn: &mut Conn) -> Result<ServerIdentity> {
    let reply = conn
        .exchange(&[redis::cmd("INFO").arg("server").clone()])
        .map_err(|error| Error::unavailable_or_refused(error).at(conn.server()))?;
    let run_id = match reply.first() {
        Some(Value::BulkString(info)) => String::from_utf8_lossy(info)
            .lines()
            .find_map(|line| line.strip_prefix("run_id:"))
            .map(|id| id.trim().to_owned()),
        _ => None,
    };
    Ok(ServerIdentity {
        run_id,
        peer: conn.peer(),
    })
}

/// Told every new connection before its first use; refusing it refuses the connection.
pub(crate) type Admission = Arc<dyn Fn(&mut Conn) -> Result<()> + Send + Sync>;

/// Where a pool's connections go.
pub(crate) trait Target: Send + Sync + 'static {
    /// The server or deployment, as shown to people: passwords hidden.
    fn shown(&self) -> &str;

    /// A new connection, open by `deadline`, with the epoch of its tokens set.
    fn open(&self, deadline: Instant) -> Result<Opened>;
}

/// A connection a [`Target`] opened.
pub(crate) struct Opened {
    pub(crate) conn: Conn,
    /// It reaches a newer server than the pool's other connections may (a newer primary): none
    /// of those may serve another call.
    pub(crate) supersedes: bool,
}

/// One server at a fixed address, whose tokens are drawn in `epoch`.
pub(crate) struct Fixed {
    endpoint: Endpoint,
    epoch: Epoch,
}

impl Fixed {
    pub(crate) fn new(endpoint: Endpoint, epoch: Epoch) -> Fixed {
        Fixed { endpoint, epoch }
    }
}

impl Target for Fixed {
    fn shown(&self) -> &str {
        self.endpoint.shown()
    }

    fn open(&self, deadline: Instant) -> Result<Opened> {
        let mut conn = Conn::connect(&self.endpoint, deadline)?;
        conn.set_epoch(self.epoch);
        Ok(Opened {
            conn,
            supersedes: false,
        })
    }
}

pub(crate) struct Pool {
    target: Box<dyn Target>,
    /// The replica acknowledgements every write through the pool waits for.
    acks: Option<Acks>,
    idle: Mutex<Vec<Conn>>,
    max_idle: usize,
    connect_timeout: Duration,
    command_timeout: Duration,
    /// Whether the eviction policy was looked at (by the first connection).
    policy_checked: AtomicBool,
    admission: Option<Admission>,
    /// Raised when every connection must go ([`Pool::forget_connections`]); a connection opened
    /// under a lower value is closed instead of used again.
    generation: AtomicU64,
    /// Whether operations that need no connection of their own share one ([`Pipe`]): not with
    /// replica acknowledgements (`WAIT` holds up every command behind it), nor over TLS.
    sharing: AtomicBool,
    /// The connection they share now.
    shared: RwLock<Option<Arc<Pipe>>>,
    /// Held by the thread opening the next shared connection.
    opening: Mutex<()>,
    /// The most connections lent to calls at once, if there is a cap; and how many are lent,
    /// with the condition a call at the cap waits on.
    cap: Option<usize>,
    lent: Mutex<usize>,
    returned: Condvar,
}

impl Pool {
    /// A pool of connections to the server at `endpoint`, which has no token epochs.
    pub(crate) fn new(
        endpoint: Endpoint,
        max_idle: usize,
        connect_timeout: Duration,
        command_timeout: Duration,
    ) -> Self {
        let target = Fixed::new(endpoint, Epoch::None);
        Pool::to(Box::new(target), max_idle, connect_timeout, command_timeout)
    }

    /// A pool of connections to `target`.
    pub(crate) fn to(
        target: Box<dyn Target>,
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
            admission: None,
            generation: AtomicU64::new(0),
            sharing: AtomicBool::new(false),
            shared: RwLock::new(None),
            opening: Mutex::new(()),
            cap: None,
            lent: Mutex::new(0),
            returned: Condvar::new(),
        }
    }

    /// Lends at most `cap` connections to calls at once (none: no cap).
    pub(crate) fn with_cap(mut self, cap: Option<usize>) -> Self {
        self.cap = cap;
        self
    }

    /// Counts one more connection lent, waiting until `deadline` for one to come back if the
    /// pool is at its cap.
    fn lend_one(&self, deadline: Instant) -> Result<()> {
        let mut lent = self.lent.lock();
        if let Some(cap) = self.cap {
            while *lent >= cap {
                if self.returned.wait_until(&mut lent, deadline).timed_out() && *lent >= cap {
                    return Err(Error::unavailable(crate::stores::redis::conn::io_error(
                        std::io::ErrorKind::TimedOut,
                        format!(
                            "all {cap} connections of the pool to {} are in use \
                             (ClientBuilder::max_connections), none came back before the call's \
                             deadline",
                            self.shown()
                        ),
                    )));
                }
            }
        }
        *lent += 1;
        Ok(())
    }

    /// Counts one connection lent less, and wakes a call waiting for one.
    fn returned_one(&self) {
        let mut lent = self.lent.lock();
        *lent = lent.saturating_sub(1);
        self.returned.notify_one();
    }

    /// Has the operations that need no connection of their own share one (unless writes wait
    /// for replica acknowledgements).
    pub(crate) fn with_sharing(self, share: bool) -> Self {
        self.sharing
            .store(share && self.acks.is_none(), Ordering::Relaxed);
        self
    }

    /// Has every new connection told to `admit` first.
    pub(crate) fn with_admission(mut self, admit: Admission) -> Self {
        self.admission = Some(admit);
        self
    }

    /// Has every acquisition, release and renewal through the pool wait for `acks`.
    pub(crate) fn with_acks(mut self, acks: Option<Acks>) -> Self {
        self.acks = acks;
        if acks.is_some() {
            self.sharing.store(false, Ordering::Relaxed);
        }
        self
    }

    /// The replica acknowledgements writes wait for.
    pub(crate) fn acks(&self) -> Option<Acks> {
        self.acks
    }

    /// The server or deployment, as shown to people: passwords hidden.
    pub(crate) fn shown(&self) -> &str {
        self.target.shown()
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
        let Opened {
            mut conn,
            supersedes,
        } = self.target.open(connect_by)?;
        if supersedes {
            // This one reaches the newer server: it is of the new generation.
            self.forget_connections();
            generation = self.generation.load(Ordering::Acquire);
        }
        if !self.policy_checked.swap(true, Ordering::Relaxed) {
            self.check_eviction_policy(&mut conn)?;
        }
        if let Some(admit) = &self.admission {
            admit(&mut conn).map_err(|error| error.at(conn.server()))?;
        }
        conn.set_deadline(deadline);
        conn.generation = generation;
        Ok(conn)
    }

    /// Closes the idle connections, and every connection in use as soon as it is given back or
    /// looked at ([`Pool::is_current`]): the server they reach is no longer the one to use (a
    /// newer primary was announced or reached).
    pub(crate) fn forget_connections(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.idle.lock().clear();
        if let Some(pipe) = self.shared.write().take() {
            pipe.retire();
        }
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
            .map_err(|error| Error::unavailable_or_refused(error).at(conn.server()))?;
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
    pub(crate) fn identify(&self, deadline: Instant) -> Result<ServerIdentity> {
        let mut conn = self.get(deadline)?;
        identity_of(&mut conn)
    }

    /// An idle connection, or a new one; its calls end by `deadline`. At the pool's cap, waits
    /// for a connection to come back until `deadline`.
    pub(crate) fn get(&self, deadline: Instant) -> Result<Pooled<'_>> {
        self.lend_one(deadline)?;
        let idle = self.idle.lock().pop().filter(|conn| self.is_current(conn));
        let conn = match idle {
            Some(mut conn) => {
                conn.set_deadline(deadline);
                conn
            }
            None => match self.open(deadline) {
                Ok(conn) => conn,
                Err(error) => {
                    self.returned_one();
                    return Err(error);
                }
            },
        };
        Ok(Pooled::new(self, conn))
    }

    /// A connection for one operation whose calls end by `deadline`: a handle on the shared
    /// one if the pool shares one, else one of its own.
    pub(crate) fn lend(&self, deadline: Instant) -> Result<Lent<'_>> {
        if !self.sharing.load(Ordering::Relaxed) {
            return Ok(Lent::Own(self.get(deadline)?));
        }
        let pipe = match self.current_pipe() {
            Some(pipe) => pipe,
            None => {
                // One thread opens the next shared connection while the others wait for it
                // (each until its deadline), rather than each opening one.
                let Some(_opening) = self.opening.try_lock_until(deadline) else {
                    return Err(Error::unavailable(crate::stores::redis::conn::io_error(
                        std::io::ErrorKind::TimedOut,
                        "no connection before the call's deadline",
                    )));
                };
                match self.current_pipe() {
                    Some(pipe) => pipe,
                    None => match self.open(deadline)?.split() {
                        Split::Halves(halves) => {
                            let pipe = Arc::new(Pipe::new(halves));
                            *self.shared.write() = Some(pipe.clone());
                            pipe
                        }
                        Split::Whole(conn) => {
                            if conn.is_tls() {
                                // One TLS session cannot be read and written at once.
                                self.sharing.store(false, Ordering::Relaxed);
                            }
                            // Lent as one of the pool's own: counted as one.
                            *self.lent.lock() += 1;
                            return Ok(Lent::Own(Pooled::new(self, conn)));
                        }
                    },
                }
            }
        };
        Ok(Lent::Shared(Shared {
            pool: self,
            pipe,
            deadline,
        }))
    }

    /// The shared connection, if there is one new calls may use.
    fn current_pipe(&self) -> Option<Arc<Pipe>> {
        let current = self.shared.read().as_ref().cloned();
        current.filter(|pipe| self.is_current_pipe(pipe))
    }

    fn is_current_pipe(&self, pipe: &Pipe) -> bool {
        pipe.is_usable() && pipe.generation() == self.generation.load(Ordering::Acquire)
    }

    /// Stops sharing `pipe` (retired or failed): the next operation opens another.
    fn discard(&self, pipe: &Arc<Pipe>) {
        let mut shared = self.shared.write();
        if shared
            .as_ref()
            .is_some_and(|current| Arc::ptr_eq(current, pipe))
        {
            *shared = None;
        }
    }

    /// Takes back a connection lent for an operation: kept idle if it is usable, current and
    /// wanted; a failed one takes the idle ones with it.
    fn give_back(&self, conn: Conn) {
        {
            let mut idle = self.idle.lock();
            if !conn.is_usable() {
                idle.clear();
            } else if self.is_current(&conn) && idle.len() < self.max_idle {
                idle.push(conn);
            }
        }
        self.returned_one();
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;

    #[test]
    fn at_its_cap_a_call_waits_for_a_connection_to_come_back_until_its_deadline() {
        let server = testkit::RedisServer::start();
        let endpoint = Endpoint::parse(&server.url()).expect("valid");
        let timeout = Duration::from_secs(2);
        let pool = Pool::new(endpoint, 8, timeout, timeout).with_cap(Some(2));
        let soon = || Instant::now() + Duration::from_millis(200);
        let first = pool.get(soon()).expect("reachable");
        let second = pool.get(soon()).expect("reachable");
        let started = Instant::now();
        let third = pool.get(soon()).map(drop);
        assert!(
            matches!(&third, Err(Error::Unavailable { cause, .. })
                if cause.to_string().contains("all 2 connections")),
            "{third:?}"
        );
        assert!(
            started.elapsed() >= Duration::from_millis(150),
            "waited for one"
        );
        thread::scope(|scope| {
            let waiting = scope.spawn(|| pool.get(Instant::now() + timeout).map(drop));
            thread::sleep(Duration::from_millis(100));
            drop(first);
            waiting
                .join()
                .expect("no panic")
                .expect("the one given back");
        });
        drop(second);
        // Both back: two calls at once again, each on a connection of its own.
        let (a, b) = (pool.get(soon()), pool.get(soon()));
        assert!(a.is_ok() && b.is_ok());
    }
}
