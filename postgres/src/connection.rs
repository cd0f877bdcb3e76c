//! [`Connection`]: one session with the server, and its calls. Each call takes a deadline and
//! ends by it whatever the server does; a call that fails or overruns closes the connection
//! (see [`Connection::is_usable`]), except for the server's own error on a statement, after
//! which the session goes on.

use crate::exchange::read_group;
use crate::pipeline::{encode, Outcome, Pipeline};
use crate::session::Session;
use crate::{
    connect, startup, CancelToken, Config, DbError, Error, Notification, Result, Row,
    TransactionStatus,
};
use bytes::BytesMut;
use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;
use std::fmt;
use std::time::Instant;

/// A session with a PostgreSQL server (or a pooler in front of one).
///
/// ```no_run
/// use postgres_blocking::{Config, Connection};
/// use std::time::{Duration, Instant};
///
/// let config: Config = "postgres://app:secret@localhost/app".parse()?;
/// let soon = || Instant::now() + Duration::from_secs(2);
/// let mut conn = Connection::connect(&config, soon())?;
/// let row = conn.query_one("SELECT $1::int8 + 1 AS next, NULL::text AS nothing", &[Some("41")], soon())?;
/// assert_eq!(row.get::<i64>("next")?, 42);
/// assert_eq!(row.get::<Option<&str>>(1)?, None);
/// # Ok::<(), postgres_blocking::Error>(())
/// ```
pub struct Connection {
    session: Session,
    config: Config,
}

impl Connection {
    /// Connects, starts the session and authenticates, all by `deadline`.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for a setting this client cannot honour (or no user), [`Error::Io`]
    /// and [`Error::Timeout`] for a server that cannot be reached or does not answer in time,
    /// [`Error::Tls`], [`Error::Auth`], [`Error::Protocol`] for a peer that is not PostgreSQL,
    /// and [`Error::Db`] for the server's refusal of the session (no such database, too many
    /// connections, a server shutting down).
    pub fn connect(config: &Config, deadline: Instant) -> Result<Connection> {
        if config.get_user().is_none() {
            return Err(Error::Config(
                "no user: give one in the URL or with Config::user".into(),
            ));
        }
        let opened = connect::open(config, deadline)?;
        let mut session = Session::new(opened.wire);
        session.begin(deadline)?;
        startup::start(&mut session, config, opened.private)?;
        log::debug!("connected to {}", config.redacted_url());
        Ok(Connection {
            session,
            config: config.clone(),
        })
    }

    /// Runs one statement with its parameters (`$1`, `$2`, ... as text; `None` is NULL) and
    /// returns its rows, all by `deadline`.
    ///
    /// # Errors
    ///
    /// [`Error::Db`] for the server's error (the connection stays usable), and the failures of
    /// the connection ([`Error::Timeout`], [`Error::Io`], [`Error::Closed`], ...), which close it.
    pub fn query(
        &mut self,
        sql: &str,
        params: &[Option<&str>],
        deadline: Instant,
    ) -> Result<Vec<Row>> {
        self.statement(sql, params, deadline)
            .map(Outcome::into_rows)
    }

    /// Runs one statement that returns exactly one row, and returns it.
    ///
    /// # Errors
    ///
    /// Those of [`Connection::query`], and [`Error::RowCount`] for no row or several.
    pub fn query_one(
        &mut self,
        sql: &str,
        params: &[Option<&str>],
        deadline: Instant,
    ) -> Result<Row> {
        let mut rows = self.query(sql, params, deadline)?;
        match rows.len() {
            1 => Ok(rows.remove(0)),
            got => Err(Error::RowCount {
                expected: "one row",
                got,
            }),
        }
    }

    /// Runs one statement that returns at most one row, and returns it if there is one.
    ///
    /// # Errors
    ///
    /// Those of [`Connection::query`], and [`Error::RowCount`] for several rows.
    pub fn query_opt(
        &mut self,
        sql: &str,
        params: &[Option<&str>],
        deadline: Instant,
    ) -> Result<Option<Row>> {
        let mut rows = self.query(sql, params, deadline)?;
        match rows.len() {
            0 | 1 => Ok(rows.pop()),
            got => Err(Error::RowCount {
                expected: "at most one row",
                got,
            }),
        }
    }

    /// Runs one statement and returns how many rows it affected (inserted, updated, deleted or
    /// returned).
    ///
    /// # Errors
    ///
    /// Those of [`Connection::query`].
    pub fn execute(
        &mut self,
        sql: &str,
        params: &[Option<&str>],
        deadline: Instant,
    ) -> Result<u64> {
        self.statement(sql, params, deadline)
            .map(|outcome| outcome.rows_affected())
    }

    /// One statement by the extended protocol, and its `Sync`.
    fn statement(
        &mut self,
        sql: &str,
        params: &[Option<&str>],
        deadline: Instant,
    ) -> Result<Outcome> {
        let mut messages = encode(sql, params)?;
        frontend::sync(&mut messages);
        let mut groups = self.exchange(&messages, 1, deadline)?;
        let answer = self.only(groups.pop().unwrap_or_default())?;
        answer.map_err(|error| Error::Db(Box::new(error)))
    }

    /// Runs the statements of `pipeline` in one round trip, each on its own (a `Sync` after
    /// each): outside a transaction block each is a transaction of its own, and one that fails
    /// leaves the others standing. Returns each statement's outcome, or its server error, in
    /// order.
    ///
    /// # Errors
    ///
    /// The failures of the connection, which close it (the statements may or may not have run).
    pub fn pipeline(
        &mut self,
        pipeline: &Pipeline,
        deadline: Instant,
    ) -> Result<Vec<Result<Outcome>>> {
        if pipeline.is_empty() {
            return Ok(Vec::new());
        }
        let groups = self.exchange(&pipeline.messages(true), pipeline.len(), deadline)?;
        let mut outcomes = Vec::with_capacity(groups.len());
        for group in groups {
            let answer = self.only(group)?;
            outcomes.push(answer.map_err(|error| Error::Db(Box::new(error))));
        }
        Ok(outcomes)
    }

    /// Runs the statements of `pipeline` in one round trip as one transaction (one `Sync` after
    /// them all): all of them, or, if one fails, none. Outside a transaction block the server
    /// runs them in an implicit transaction and rolls it back at the failure; a transaction the
    /// statements open themselves (`BEGIN` first) and that fails is rolled back in the same call.
    /// Inside a transaction block the caller opened, they are part of it.
    ///
    /// # Errors
    ///
    /// [`Error::Db`] for the statement that failed ([`DbError::statement`] says which), and the
    /// failures of the connection, which close it.
    pub fn pipeline_atomic(
        &mut self,
        pipeline: &Pipeline,
        deadline: Instant,
    ) -> Result<Vec<Outcome>> {
        if pipeline.is_empty() {
            return Ok(Vec::new());
        }
        let before = self.session.status;
        let mut groups = self.exchange(&pipeline.messages(false), 1, deadline)?;
        let answers = groups.pop().unwrap_or_default();
        let mut outcomes = Vec::with_capacity(answers.len());
        for (index, answer) in answers.into_iter().enumerate() {
            match answer {
                Ok(outcome) => outcomes.push(outcome),
                Err(error) => {
                    if before == TransactionStatus::Idle
                        && self.session.status == TransactionStatus::Failed
                    {
                        self.batch_execute("ROLLBACK", deadline)?;
                    }
                    return Err(Error::Db(Box::new(error.in_statement(index))));
                }
            }
        }
        if outcomes.len() != pipeline.len() {
            return self.session.fail(Error::Protocol(format!(
                "{} answers to {} statements",
                outcomes.len(),
                pipeline.len()
            )));
        }
        Ok(outcomes)
    }

    /// Runs `sql`, one statement or several separated by `;`, by the simple query protocol:
    /// no parameters, no rows kept (`LISTEN`, `SET`, DDL). Several statements run in one
    /// implicit transaction unless they hold transaction commands.
    ///
    /// # Errors
    ///
    /// [`Error::Db`] for the first statement that failed, and the failures of the connection.
    pub fn batch_execute(&mut self, sql: &str, deadline: Instant) -> Result<()> {
        let mut message = BytesMut::new();
        if frontend::query(sql, &mut message).is_err() {
            return Err(Error::Unsupported("a statement holding a NUL byte".into()));
        }
        let mut groups = self.exchange(&message, 1, deadline)?;
        match groups
            .pop()
            .unwrap_or_default()
            .into_iter()
            .find_map(Result::err)
        {
            Some(error) => Err(Error::Db(Box::new(error))),
            None => Ok(()),
        }
    }

    /// Checks in one round trip (a `Sync`, answered by `ReadyForQuery`) that the server answers.
    ///
    /// # Errors
    ///
    /// The failures of the connection, which close it.
    pub fn ping(&mut self, deadline: Instant) -> Result<()> {
        let mut message = BytesMut::new();
        frontend::sync(&mut message);
        let mut groups = self.exchange(&message, 1, deadline)?;
        let answers = groups.pop().unwrap_or_default();
        if answers.is_empty() {
            Ok(())
        } else {
            self.session
                .fail(Error::Protocol("answers to a Sync alone".into()))
        }
    }

    /// Sends `messages` and reads the answers of `groups` groups (each ending with a
    /// `ReadyForQuery`), all by `deadline`.
    fn exchange(
        &mut self,
        messages: &[u8],
        groups: usize,
        deadline: Instant,
    ) -> Result<Vec<Vec<Result<Outcome, DbError>>>> {
        if Instant::now() >= deadline && self.is_usable() {
            // Nothing is sent: the session is as it was.
            return Err(Error::Timeout {
                during: format!(
                    "a call to {} whose deadline had passed",
                    self.config.server()
                ),
            });
        }
        self.session.begin(deadline)?;
        self.session.send(messages)?;
        let mut answers = Vec::with_capacity(groups);
        for _ in 0..groups {
            answers.push(read_group(&mut self.session)?);
        }
        Ok(answers)
    }

    /// The one answer of a group of one statement.
    fn only(
        &mut self,
        mut group: Vec<Result<Outcome, DbError>>,
    ) -> Result<Result<Outcome, DbError>> {
        match (group.pop(), group.is_empty()) {
            (Some(answer), true) => Ok(answer),
            _ => self
                .session
                .fail(Error::Protocol("not one answer to one statement".into())),
        }
    }

    /// The next notification for a channel this session listens on (`LISTEN`): one received
    /// already (during any call) at once, else the first to come by `deadline`. `Ok(None)` when
    /// none came by then: the connection stays usable. Notifications are kept until taken, with
    /// no bound: a connection that listens is one that is waited on.
    ///
    /// # Errors
    ///
    /// The failures of the connection (it broke, the server ended the session), which close it.
    pub fn wait_notification(&mut self, deadline: Instant) -> Result<Option<Notification>> {
        loop {
            if let Some(notification) = self.session.notifications.pop_front() {
                return Ok(Some(notification));
            }
            let Some(message) = self.session.poll(deadline)? else {
                return Ok(None);
            };
            match self.session.take_unasked(message)? {
                None => {}
                Some(Message::ErrorResponse(body)) => {
                    let error = self.session.db_error(&body)?;
                    return self.session.fail(Error::Db(Box::new(error)));
                }
                Some(_) => {
                    return self
                        .session
                        .fail(Error::Protocol("a message while no call was made".into()))
                }
            }
        }
    }

    /// The notifications received and not yet taken, taken now, without waiting.
    pub fn take_notifications(&mut self) -> Vec<Notification> {
        self.session.notifications.drain(..).collect()
    }

    /// Whether the connection may still be used: false once a call failed or overran (or the
    /// server ended the session); every call then fails with [`Error::Closed`].
    pub fn is_usable(&self) -> bool {
        self.session.is_open()
    }

    /// The transaction status the server reported at the end of the last call.
    pub fn transaction_status(&self) -> TransactionStatus {
        self.session.status
    }

    /// A parameter the server reported (`server_version`, `TimeZone`, `application_name`, ...).
    pub fn parameter(&self, name: &str) -> Option<&str> {
        self.session.parameters.get(name).map(String::as_str)
    }

    /// The process id of the server process of this session (or, through a pooler, the id the
    /// pooler gave), if the server told it.
    pub fn backend_pid(&self) -> Option<i32> {
        self.session.key.map(|(pid, _)| pid)
    }

    /// What cancels the statement this connection runs, from another thread; `None` if the
    /// server gave no key for it.
    pub fn cancel_token(&self) -> Option<CancelToken> {
        let (pid, key) = self.session.key?;
        Some(CancelToken::new(self.config.clone(), pid, key))
    }

    /// Ends the session: tells the server (within a moment) and closes the connection. Dropping
    /// the connection does the same.
    pub fn close(mut self) {
        self.session.terminate();
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.session.terminate();
    }
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("server", &self.config.server())
            .field("usable", &self.is_usable())
            .field("transaction_status", &self.session.status)
            .field("backend_pid", &self.backend_pid())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_move_between_threads_and_tokens_are_shared() {
        fn send<T: Send>() {}
        fn shared<T: Send + Sync>() {}
        send::<Connection>();
        shared::<CancelToken>();
        shared::<Config>();
        shared::<Error>();
        shared::<Row>();
    }
}
