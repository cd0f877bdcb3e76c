//! The connections every call of a client takes one of: kept idle between calls (up to the pool
//! size), opened by the call's deadline when none is idle, and dropped when a call leaves one
//! unusable (a failure or an overrun closes it: a late reply is never read as the next call's).

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

    /// Runs `op` on a connection, all of it by `deadline`.
    pub(crate) fn call<T>(
        &self,
        deadline: Instant,
        op: impl FnOnce(&mut Connection) -> Result<T>,
    ) -> Result<T> {
        let mut conn = self.get(deadline)?;
        let outcome = op(&mut conn);
        self.put(conn);
        outcome
    }

    /// An idle connection, or a new one opened by `deadline` (and the connect timeout).
    fn get(&self, deadline: Instant) -> Result<Connection> {
        if let Some(conn) = self.idle.lock().pop() {
            return Ok(conn);
        }
        let by = deadline.min(Instant::now() + self.connect_timeout);
        Connection::connect(&self.config, by)
    }

    fn put(&self, conn: Connection) {
        if conn.is_usable() {
            let mut idle = self.idle.lock();
            if idle.len() < self.max_idle {
                idle.push(conn);
            }
        }
    }
}
