//! A small pool of blocking connections, so that threads do not queue on one connection. It keeps
//! at most `max_idle` idle connections and opens more when all are in use.

use crate::error::{Error, Result};
use parking_lot::Mutex;
use redis::{Connection, ConnectionLike};
use std::ops::{Deref, DerefMut};
use std::time::Duration;

pub(crate) struct Pool {
    client: redis::Client,
    idle: Mutex<Vec<Connection>>,
    max_idle: usize,
    connect_timeout: Duration,
    command_timeout: Duration,
}

/// A client for the server at `url`. Connections it opens send nothing before the first command
/// (no `CLIENT SETINFO`), so that opening one to a frozen server does not wait for it.
pub(crate) fn open_client(url: &str) -> Result<redis::Client> {
    let invalid =
        |error: redis::RedisError| Error::InvalidArgument(format!("redis url {url:?}: {error}"));
    let info = redis::IntoConnectionInfo::into_connection_info(url).map_err(invalid)?;
    let settings = info.redis_settings().clone().set_skip_set_lib_name();
    redis::Client::open(info.set_redis_settings(settings)).map_err(invalid)
}

impl Pool {
    pub(crate) fn new(
        client: redis::Client,
        max_idle: usize,
        connect_timeout: Duration,
        command_timeout: Duration,
    ) -> Self {
        Pool {
            client,
            idle: Mutex::new(Vec::new()),
            max_idle,
            connect_timeout,
            command_timeout,
        }
    }

    /// A connection with read and write timeouts set to the command timeout.
    pub(crate) fn connect(&self) -> Result<Connection> {
        self.connect_within(self.connect_timeout)
    }

    /// [`Pool::connect`], taking at most `limit` (and at most the connect timeout) to connect.
    pub(crate) fn connect_within(&self, limit: Duration) -> Result<Connection> {
        let limit = limit
            .min(self.connect_timeout)
            .max(Duration::from_millis(1));
        let con = self
            .client
            .get_connection_with_timeout(limit)
            .map_err(Error::Unavailable)?;
        con.set_read_timeout(Some(self.command_timeout))
            .and_then(|()| con.set_write_timeout(Some(self.command_timeout)))
            .map_err(Error::Unavailable)?;
        Ok(con)
    }

    pub(crate) fn get(&self) -> Result<Pooled<'_>> {
        self.get_within(self.connect_timeout)
    }

    /// An idle connection, or a new one opened within `limit`.
    pub(crate) fn get_within(&self, limit: Duration) -> Result<Pooled<'_>> {
        let idle = self.idle.lock().pop();
        let con = match idle {
            Some(con) => con,
            None => self.connect_within(limit)?,
        };
        Ok(Pooled {
            pool: self,
            con: Some(con),
        })
    }

    pub(crate) fn redis_client(&self) -> &redis::Client {
        &self.client
    }

    pub(crate) fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }
}

/// A connection on loan; back to the pool on drop unless [`Pooled::discard`]ed.
pub(crate) struct Pooled<'a> {
    pool: &'a Pool,
    con: Option<Connection>,
}

impl Pooled<'_> {
    /// Closes the connection instead of returning it: after an I/O error its state is unknown.
    pub(crate) fn discard(mut self) {
        self.con = None;
    }
}

impl Deref for Pooled<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.con.as_ref().expect("present until drop")
    }
}

impl DerefMut for Pooled<'_> {
    fn deref_mut(&mut self) -> &mut Connection {
        self.con.as_mut().expect("present until drop")
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        if let Some(con) = self.con.take() {
            let mut idle = self.pool.idle.lock();
            if con.is_open() && idle.len() < self.pool.max_idle {
                idle.push(con);
            }
        }
    }
}

/// Runs `op` on a pooled connection; a connection that failed with an I/O error is discarded.
pub(crate) fn with_connection<T>(
    pool: &Pool,
    op: impl FnOnce(&mut Connection) -> Result<T>,
) -> Result<T> {
    let mut con = pool.get()?;
    let result = op(&mut con);
    if matches!(result, Err(Error::Unavailable(_))) {
        con.discard();
    }
    result
}
