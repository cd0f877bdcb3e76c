//! What every lock of a PostgreSQL client shares ([`Shared`]): its connections, its statements,
//! the schema's check at the first call, and the undoing of attempts whose answer was lost.

use super::errors::from_pg;
use super::pool::Pool;
use super::schema::{self, Statements, Unusable};
use crate::error::{Cause, Error, Result};
use parking_lot::Mutex;
use postgres_blocking::{Config, Connection};
use std::time::{Duration, Instant};

/// The most attempts of unknown outcome kept to undo; past it the oldest lapses with its lease.
const MAX_UNDOS: usize = 1024;

/// An attempt whose answer was lost, to undo.
pub(crate) struct Undo {
    pub(crate) key: String,
    pub(crate) owner: String,
    pub(crate) id: String,
    pub(crate) election: bool,
}

/// What every lock of one client shares.
pub(crate) struct Shared {
    pub(crate) pool: Pool,
    pub(crate) sql: Statements,
    /// The URL, password hidden.
    pub(crate) shown: String,
    pub(crate) prefix: String,
    pub(crate) call_timeout: Duration,
    /// Whether the schema was found usable (checked by the first call that gets an answer).
    ready: Mutex<bool>,
    undos: Mutex<Vec<Undo>>,
}

impl Shared {
    pub(crate) fn new(
        config: Config,
        sql: Statements,
        shown: String,
        prefix: String,
        pool_size: usize,
        timeouts: (Duration, Duration),
    ) -> Shared {
        let (connect_timeout, call_timeout) = timeouts;
        Shared {
            pool: Pool::new(config, pool_size, connect_timeout),
            sql,
            shown,
            prefix,
            call_timeout,
            ready: Mutex::new(false),
            undos: Mutex::new(Vec::new()),
        }
    }

    /// The crate's error for `error` of a call about `key`.
    pub(crate) fn error(&self, error: postgres_blocking::Error, key: &str) -> Error {
        from_pg(error, key, &self.shown)
    }

    /// Runs `op` about `key` on a connection by `deadline`, the schema checked first if no call
    /// has checked it yet.
    pub(crate) fn call<T>(
        &self,
        key: &str,
        deadline: Instant,
        op: impl FnMut(&mut Connection) -> postgres_blocking::Result<T>,
    ) -> Result<T> {
        self.ensure_schema(deadline)?;
        self.pool
            .call(deadline, op)
            .map_err(|error| self.error(error, key))
    }

    /// Checks (and if missing installs) the schema, once per client.
    pub(crate) fn ensure_schema(&self, deadline: Instant) -> Result<()> {
        let mut ready = self.ready.lock();
        if *ready {
            return Ok(());
        }
        let schema = &self.sql.schema;
        let checked = self.pool.call(deadline, |conn| {
            Ok(schema::ensure(conn, &self.sql, deadline))
        });
        match checked.map_err(|error| self.error(error, schema))? {
            Ok(()) => {
                *ready = true;
                Ok(())
            }
            Err(Unusable::Shape(why)) => Err(Error::InvalidArgument(format!(
                "postgres schema {schema} cannot be used: {why}"
            ))),
            Err(Unusable::Failed(error)) if error.code() == Some("42501") => Err(Error::Refused {
                server: Some(self.shown.clone()),
                cause: Cause::coded(
                    "postgres",
                    "42501",
                    format!(
                        "this role may not make the store's schema {schema} ({error}): run \
                         the store's SQL (see the guide, \"PostgreSQL\") as a role that may, \
                         and grant this one USAGE on the schema and EXECUTE on its functions"
                    ),
                ),
            }),
            Err(Unusable::Failed(error)) => Err(self.error(error, schema)),
        }
    }

    /// Runs `undo` by `deadline`.
    pub(crate) fn undo(&self, undo: &Undo, deadline: Instant) -> Result<()> {
        let election = if undo.election { "true" } else { "false" };
        self.call(&undo.key, deadline, |conn| {
            conn.execute(
                &self.sql.undo,
                &[
                    Some(&undo.key),
                    Some(&undo.owner),
                    Some(&undo.id),
                    Some(election),
                ],
                deadline,
            )
        })
        .map(drop)
    }

    /// Keeps `undo` for a later try.
    pub(crate) fn keep_undo(&self, undo: Undo) {
        let mut undos = self.undos.lock();
        if undos.len() >= MAX_UNDOS {
            undos.remove(0);
        }
        undos.push(undo);
    }

    /// Tries the undos kept (of `key` only, if given) by `deadline`, keeping those that fail.
    pub(crate) fn settle_undos(&self, key: Option<&str>, deadline: Instant) {
        let taken: Vec<Undo> = {
            let mut undos = self.undos.lock();
            if undos.is_empty() {
                return;
            }
            let (taken, kept) = std::mem::take(&mut *undos)
                .into_iter()
                .partition(|undo| key.is_none_or(|key| undo.key == key));
            *undos = kept;
            taken
        };
        for undo in taken {
            if let Err(error) = self.undo(&undo, deadline) {
                log::debug!("undoing an unanswered attempt: {error}; tried again later");
                self.keep_undo(undo);
            }
        }
    }
}
