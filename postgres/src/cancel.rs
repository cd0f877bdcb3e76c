//! [`CancelToken`]: asks the server to stop what a connection is running, from any thread, over
//! a connection of its own (opened as the session's was, TLS included).

use crate::{connect, Config, Error, Result};
use bytes::BytesMut;
use postgres_protocol::message::frontend;
use std::fmt;
use std::io;
use std::time::Instant;

/// What cancels the statement a connection runs: the server's process id and secret key for
/// the session (from its `BackendKeyData`), and how to reach the server.
#[derive(Clone)]
pub struct CancelToken {
    config: Config,
    process_id: i32,
    secret_key: i32,
}

impl CancelToken {
    pub(crate) fn new(config: Config, process_id: i32, secret_key: i32) -> CancelToken {
        CancelToken {
            config,
            process_id,
            secret_key,
        }
    }

    /// The server process of the session (or, through a pooler, the id the pooler gave).
    pub fn process_id(&self) -> i32 {
        self.process_id
    }

    /// Sends a cancel request on a new connection, and waits by `deadline` until the server has
    /// taken it (it then closes that connection). Whether a statement was running, and stops,
    /// the session tells: a cancelled statement fails with SQLSTATE `57014`.
    ///
    /// # Errors
    ///
    /// The errors of opening a connection ([`Error::Io`], [`Error::Timeout`], [`Error::Tls`]),
    /// and [`Error::Protocol`] for a peer that answers the request.
    pub fn cancel(&self, deadline: Instant) -> Result<()> {
        let mut wire = connect::open(&self.config, deadline)?.wire;
        wire.set_deadline(deadline);
        let mut request = BytesMut::new();
        frontend::cancel_request(self.process_id, self.secret_key, &mut request);
        wire.send(&request)?;
        let taken = match wire.receive() {
            Err(Error::Io { source, .. })
                if matches!(
                    source.kind(),
                    io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset
                ) =>
            {
                Ok(())
            }
            Err(error) => Err(error),
            Ok(_) => Err(Error::Protocol(
                "the server answered a cancel request".into(),
            )),
        };
        wire.shutdown();
        log::debug!(
            "cancel request for process {} at {}: {taken:?}",
            self.process_id,
            self.config.server()
        );
        taken
    }
}

impl fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelToken")
            .field("server", &self.config.server())
            .field("process_id", &self.process_id)
            .finish_non_exhaustive()
    }
}
