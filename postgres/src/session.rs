//! [`Session`]: an open connection's state, and the one rule of its life: a call that fails
//! (its deadline passed, the connection broke, the peer spoke something else, the server ended
//! the session) closes it, so that no late reply is ever read as the answer to a later call.
//! Messages the server sends on its own (notifications, notices, parameter changes) are taken
//! here whenever they come, during any call.

use crate::notify::{log_notice, Notification};
use crate::wire::Wire;
use crate::{DbError, Error, Result, TransactionStatus};
use bytes::BytesMut;
use postgres_protocol::message::backend::{ErrorResponseBody, Message};
use postgres_protocol::message::frontend;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// How long a connection being dropped may take to tell the server it goes.
const TERMINATE_WITHIN: Duration = Duration::from_millis(100);

/// What the server said about the session at startup, and since.
pub(crate) struct Session {
    /// The connection, until a failure closes it.
    wire: Option<Wire>,
    /// The server's parameters (`server_version`, `client_encoding`, ...).
    pub(crate) parameters: HashMap<String, String>,
    /// The backend's process id and secret key, for cancel requests.
    pub(crate) key: Option<(i32, i32)>,
    /// The transaction status of the last `ReadyForQuery`.
    pub(crate) status: TransactionStatus,
    /// Notifications received and not yet taken.
    pub(crate) notifications: VecDeque<Notification>,
}

impl Session {
    /// A session over `wire`, before its startup.
    pub(crate) fn new(wire: Wire) -> Session {
        Session {
            wire: Some(wire),
            parameters: HashMap::new(),
            key: None,
            status: TransactionStatus::Idle,
            notifications: VecDeque::new(),
        }
    }

    /// Whether the connection is open.
    pub(crate) fn is_open(&self) -> bool {
        self.wire.is_some()
    }

    /// The connection, or [`Error::Closed`].
    fn wire(&mut self) -> Result<&mut Wire> {
        self.wire.as_mut().ok_or(Error::Closed)
    }

    /// Starts a call that ends by `deadline`.
    pub(crate) fn begin(&mut self, deadline: Instant) -> Result<()> {
        self.wire()?.set_deadline(deadline);
        Ok(())
    }

    /// Closes the connection and returns `error`.
    pub(crate) fn fail<T>(&mut self, error: Error) -> Result<T> {
        self.close();
        Err(error)
    }

    /// Closes the connection at once: its socket is shut, whatever the server sends later.
    pub(crate) fn close(&mut self) {
        if let Some(wire) = self.wire.take() {
            wire.shutdown();
        }
    }

    /// Tells the server the session ends (within a moment), and closes the connection.
    pub(crate) fn terminate(&mut self) {
        if let Some(wire) = self.wire.as_mut() {
            let mut bytes = BytesMut::new();
            frontend::terminate(&mut bytes);
            wire.set_deadline(Instant::now() + TERMINATE_WITHIN);
            let _ = wire.send(&bytes);
        }
        self.close();
    }

    /// Sends `bytes`; a failure closes the connection.
    pub(crate) fn send(&mut self, bytes: &[u8]) -> Result<()> {
        let sent = self.wire()?.send(bytes);
        sent.or_else(|error| self.fail(error))
    }

    /// The next message of the call, past those the server sends on its own, which are kept
    /// (notifications), logged (notices) or noted (parameters). A failure closes the connection.
    pub(crate) fn next(&mut self) -> Result<Message> {
        loop {
            let received = self.wire()?.receive();
            match received {
                Ok(message) => {
                    if let Some(message) = self.take_unasked(message)? {
                        return Ok(message);
                    }
                }
                Err(error) => return self.fail(error),
            }
        }
    }

    /// Takes a message the server sent on its own and returns `None`, or returns any other.
    pub(crate) fn take_unasked(&mut self, message: Message) -> Result<Option<Message>> {
        match message {
            Message::NotificationResponse(body) => {
                let notification = Notification::from_body(&body);
                match notification {
                    Ok(notification) => self.notifications.push_back(notification),
                    Err(error) => return self.fail(error),
                }
            }
            Message::NoticeResponse(body) => match DbError::parse(body.fields()) {
                Ok(notice) => log_notice(&notice),
                Err(why) => return self.fail(Error::Protocol(why)),
            },
            Message::ParameterStatus(body) => match (body.name(), body.value()) {
                (Ok(name), Ok(value)) => {
                    self.parameters.insert(name.to_owned(), value.to_owned());
                }
                _ => return self.fail(Error::Protocol("a parameter that is not UTF-8".into())),
            },
            other => return Ok(Some(other)),
        }
        Ok(None)
    }

    /// The server's error in `body`; an error that ends the session (`FATAL`, `PANIC`) closes the
    /// connection, as the server does.
    pub(crate) fn db_error(&mut self, body: &ErrorResponseBody) -> Result<DbError> {
        match DbError::parse(body.fields()) {
            Ok(error) if error.is_fatal() => {
                self.close();
                Ok(error)
            }
            Ok(error) => Ok(error),
            Err(why) => self.fail(Error::Protocol(why)),
        }
    }

    /// Notes the transaction status of a `ReadyForQuery`.
    pub(crate) fn ready(&mut self, status: u8) -> Result<()> {
        match TransactionStatus::from_byte(status) {
            Some(status) => {
                self.status = status;
                Ok(())
            }
            None => self.fail(Error::Protocol(format!(
                "a transaction status {:?}",
                char::from(status)
            ))),
        }
    }

    /// Waits for the next message until `deadline`: `None` if none came whole by then (what came
    /// of one stays buffered, and the connection usable). A failure closes the connection.
    pub(crate) fn poll(&mut self, deadline: Instant) -> Result<Option<Message>> {
        self.begin(deadline)?;
        let received = self.wire()?.receive();
        match received {
            Ok(message) => Ok(Some(message)),
            Err(Error::Timeout { .. }) => Ok(None),
            Err(error) => self.fail(error),
        }
    }
}
