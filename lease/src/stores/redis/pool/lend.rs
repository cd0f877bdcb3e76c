//! How an operation is lent a connection: one of the pool's own for the operation ([`Pooled`]),
//! or a handle on the connection the pool's calls share ([`Shared`]); either is a [`Lent`], which
//! the operation uses as a [`Link`].

use super::Pool;
use crate::error::Result;
use crate::stores::redis::conn::{Conn, Link};
use crate::stores::redis::fencing::Epoch;
use crate::stores::redis::pipe::Pipe;
use redis::{ConnectionLike, RedisResult, Value};
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Something done to a connection lent for one operation, and undone when it is given back.
/// An operation that needs it gets a connection of its own.
#[derive(Clone, Copy)]
pub(crate) struct Setup {
    pub(crate) apply: fn(&mut Conn),
    pub(crate) undo: fn(&mut Conn),
}

/// How an operation reaches a server: through its pool, each connection set up for it first if
/// it needs that.
#[derive(Clone, Copy)]
pub(crate) struct Via<'a> {
    pub(crate) pool: &'a Pool,
    setup: Option<Setup>,
}

impl<'a> Via<'a> {
    pub(crate) fn direct(pool: &'a Pool) -> Via<'a> {
        Via { pool, setup: None }
    }

    /// Through `pool`, each connection set up by `setup` if there is one.
    pub(crate) fn set_up(pool: &'a Pool, setup: Option<Setup>) -> Via<'a> {
        Via { pool, setup }
    }

    /// A connection whose calls end by `deadline`: the shared one if the pool shares one and
    /// the operation needs no setup.
    pub(crate) fn get(self, deadline: Instant) -> Result<Lent<'a>> {
        let Some(setup) = self.setup else {
            return self.pool.lend(deadline);
        };
        let mut conn = self.pool.get(deadline)?;
        (setup.apply)(&mut conn);
        conn.undo = Some(setup.undo);
        Ok(Lent::Own(conn))
    }

    /// Runs `op` on a connection, all of it by `deadline`.
    pub(crate) fn call<T>(
        self,
        deadline: Instant,
        op: impl FnOnce(&mut dyn Link) -> Result<T>,
    ) -> Result<T> {
        let mut conn = self.get(deadline)?;
        op(&mut *conn)
    }
}

/// A connection lent for one operation.
pub(crate) enum Lent<'a> {
    Own(Pooled<'a>),
    Shared(Shared<'a>),
}

impl<'a> Deref for Lent<'a> {
    type Target = dyn Link + 'a;
    fn deref(&self) -> &(dyn Link + 'a) {
        match self {
            Lent::Own(pooled) => &**pooled,
            Lent::Shared(shared) => shared,
        }
    }
}

impl<'a> DerefMut for Lent<'a> {
    fn deref_mut(&mut self) -> &mut (dyn Link + 'a) {
        match self {
            Lent::Own(pooled) => &mut **pooled,
            Lent::Shared(shared) => shared,
        }
    }
}

/// A connection on loan; back to the pool on drop if it is still usable, its setup undone.
pub(crate) struct Pooled<'a> {
    pool: &'a Pool,
    conn: Option<Conn>,
    undo: Option<fn(&mut Conn)>,
}

impl<'a> Pooled<'a> {
    /// `conn`, lent by `pool`, given back to it on drop.
    pub(super) fn new(pool: &'a Pool, conn: Conn) -> Pooled<'a> {
        Pooled {
            pool,
            conn: Some(conn),
            undo: None,
        }
    }
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
            if let Some(undo) = self.undo.take() {
                undo(&mut conn);
            }
            self.pool.give_back(conn);
        }
    }
}

/// How long a write behind an unanswered call may take: it goes into the socket's buffer at
/// once unless the server has stopped reading.
const BEHIND: Duration = Duration::from_millis(1);

/// A handle on the pool's shared connection for one operation, whose calls end by its deadline.
/// Every call of the operation goes to the same connection, so that what it writes behind an
/// unanswered call runs after that call.
pub(crate) struct Shared<'a> {
    pub(super) pool: &'a Pool,
    pub(super) pipe: Arc<Pipe>,
    pub(super) deadline: Instant,
}

impl Shared<'_> {
    fn call(&self, bytes: &[u8], expected: usize) -> RedisResult<Vec<Value>> {
        self.pipe.call(bytes, expected, self.deadline)
    }
}

impl Drop for Shared<'_> {
    fn drop(&mut self) {
        if !self.pipe.is_usable() {
            self.pool.discard(&self.pipe);
        }
    }
}

impl Link for Shared<'_> {
    fn epoch(&self) -> Epoch {
        self.pipe.epoch()
    }

    fn set_deadline(&mut self, deadline: Instant) {
        self.deadline = deadline;
    }

    fn is_usable(&self) -> bool {
        self.pipe.is_usable()
    }

    fn exchange(&mut self, commands: &[redis::Cmd]) -> RedisResult<Vec<Value>> {
        if commands.is_empty() {
            return Ok(Vec::new());
        }
        let mut bytes = Vec::new();
        for command in commands {
            command.write_packed_command(&mut bytes);
        }
        self.call(&bytes, commands.len())
    }

    fn send_behind(&mut self, bytes: &[u8]) {
        let deadline = self.deadline.max(Instant::now() + BEHIND);
        self.pipe.send_behind(bytes, deadline);
    }

    fn server(&self) -> &str {
        self.pipe.server()
    }
}

impl ConnectionLike for Shared<'_> {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        let replies = self.call(cmd, 1)?;
        Ok(replies.into_iter().next().unwrap_or(Value::Nil))
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let replies = self.call(cmd, offset + count)?;
        crate::stores::redis::conn::transaction_replies(replies, offset)
    }

    fn get_db(&self) -> i64 {
        self.pipe.db()
    }

    fn check_connection(&mut self) -> bool {
        redis::cmd("PING").query::<String>(self).is_ok()
    }

    fn is_open(&self) -> bool {
        self.pipe.is_usable()
    }
}
