//! The connections every call of a client takes one of: kept idle between calls (up to the pool
//! size), opened by the call's deadline when none is idle, and dropped when a call leaves one
//! unusable (a failure or an overrun closes it: a late reply is never read as the next call's).
//!
//! An idle connection may have been closed by the server meanwhile (a restart, a terminated
//! session, an idle timeout), which shows only when a call uses it. A call that finds its
//! reused connection so closed drops every idle one (they are likely closed too) and is sent
//! once more on a new connection, within its deadline: every call of the store may be sent
//! twice (a release or a renewal is applied once however often it is sent, an acquisition sent
//! again finds what it took).

use parking_lot::Mutex;
use postgres_blocking::{Config, Connection, Result};
use std::time::{Duration, Instant};

pub(crate) struct Pool {
    config: Config,
    idle: Mutex<Vec<Connection>>,
    max_idle: usize,
    connect_timeout: Duration,
}

impl Pool {
    pub(crate) fn new(config: Config, max_idle: usize, connect_timeout: Duration) -> Pool {
        Pool {
            config,
            idle: Mutex::new(Vec::new()),
            max_idle,
            connect_timeout,
        }
    }

    /// Runs `op` on a connection, all of it by `deadline`; once more on a new connection if the
    /// server had closed the idle one it was given.
    pub(crate) fn call<T>(
        &self,
        deadline: Instant,
        mut op: impl FnMut(&mut Connection) -> Result<T>,
    ) -> Result<T> {
        let (mut conn, reused) = self.get(deadline)?;
        let mut outcome = op(&mut conn);
        if reused && closed_by_the_server(&outcome) && Instant::now() < deadline {
            log::debug!("a pooled connection was closed by the server: the call is sent again");
            drop(conn);
            self.idle.lock().clear();
            let (fresh, _) = self.get(deadline)?;
            conn = fresh;
            outcome = op(&mut conn);
        }
        self.put(conn);
        outcome
    }

    /// An idle connection (and `true`), or a new one opened by `deadline` and the connect
    /// timeout.
    fn get(&self, deadline: Instant) -> Result<(Connection, bool)> {
        if let Some(conn) = self.idle.lock().pop() {
            return Ok((conn, true));
        }
        let by = deadline.min(Instant::now() + self.connect_timeout);
        Connection::connect(&self.config, by).map(|conn| (conn, false))
    }

    /// Gives `conn` back to the idle ones if it is usable and there is room.
    fn put(&self, conn: Connection) {
        if conn.is_usable() {
            let mut idle = self.idle.lock();
            if idle.len() < self.max_idle {
                idle.push(conn);
            }
        }
    }
}

/// Whether `outcome` says the server had closed the connection: a session ended by the server
/// (`FATAL`), the connection reset or found closed; not a deadline that passed, which leaves no
/// time to send the call again.
fn closed_by_the_server<T>(outcome: &Result<T>) -> bool {
    match outcome {
        Err(error) => error.is_connection_lost() && !error.is_timeout(),
        Ok(_) => false,
    }
}
