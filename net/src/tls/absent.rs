//! A build without the `tls` feature: no TLS session can exist, and a configuration is refused.

use super::{ConfigError, HandshakeError, ServerCheck, TlsFiles};
use crate::Timed;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// What this build lacks.
const NO_TLS: &str = "this build of deadline-net has no `tls` feature";

/// No configuration exists in a build without TLS.
#[derive(Debug)]
pub enum ClientConfig {}

/// No session exists in a build without TLS.
#[derive(Debug)]
pub enum TlsStream {}

/// Refuses: this build has no TLS.
///
/// # Errors
///
/// Always.
pub fn client_config(_files: &TlsFiles) -> Result<Arc<ClientConfig>, ConfigError> {
    Err(ConfigError(NO_TLS.into()))
}

/// Refuses: this build has no TLS.
///
/// # Errors
///
/// Always.
pub fn client_config_checking(
    _files: &TlsFiles,
    _check: ServerCheck,
) -> Result<Arc<ClientConfig>, ConfigError> {
    Err(ConfigError(NO_TLS.into()))
}

/// Refuses: this build has no TLS.
///
/// # Errors
///
/// Always.
pub fn handshake(
    _config: Arc<ClientConfig>,
    _host: &str,
    _timed: Timed,
    _plain_probe: Option<&dyn Fn(SocketAddr, Instant) -> bool>,
) -> Result<TlsStream, HandshakeError> {
    Err(HandshakeError::Refused(NO_TLS.into()))
}

impl TlsStream {
    /// The socket under the session.
    pub fn timed(&self) -> &Timed {
        match *self {}
    }

    /// Sets the deadline of whatever the session reads or writes now.
    pub fn set_deadline(&mut self, _deadline: Instant) {
        match *self {}
    }

    /// Why the session was refused, if it was.
    pub fn refusal(&self) -> Option<&str> {
        match *self {}
    }
}

impl io::Read for TlsStream {
    fn read(&mut self, _buf: &mut [u8]) -> io::Result<usize> {
        match *self {}
    }
}

impl io::Write for TlsStream {
    fn write(&mut self, _buf: &[u8]) -> io::Result<usize> {
        match *self {}
    }

    fn flush(&mut self) -> io::Result<()> {
        match *self {}
    }
}
