//! A build without the `tls` feature: no TLS session can exist, and a `rediss://` server is
//! refused when the client is built (see [`crate::stores::redis::conn::Endpoint::parse`]), before any of these is
//! reached.

use super::TlsFiles;
use crate::error::{Error, Result};
use crate::stores::redis::conn::{Endpoint, Timed};
use redis::RedisResult;
use std::io;
use std::sync::Arc;
use std::time::Instant;

/// What a `rediss://` server needs and this build lacks.
pub(crate) const NEEDS_TLS: &str =
    "rediss:// needs TLS, and this build of redis-lease has no `tls` feature (on by default)";

/// No configuration exists: there is nothing to configure.
pub(crate) enum Config {}

/// No session exists.
pub(crate) enum TlsStream {}

/// Refuses: this build has no TLS.
pub(crate) fn config(_files: &TlsFiles) -> Result<Arc<Config>> {
    Err(Error::InvalidArgument(NEEDS_TLS.into()))
}

/// Refuses: this build has no TLS.
pub(crate) fn handshake(
    _endpoint: &Endpoint,
    _host: &str,
    _timed: Timed,
) -> RedisResult<TlsStream> {
    Err(redis::make_extension_error(
        "TLS".into(),
        Some(NEEDS_TLS.into()),
    ))
}

impl TlsStream {
    pub(crate) fn timed(&self) -> &Timed {
        match *self {}
    }

    pub(crate) fn set_deadline(&mut self, _deadline: Instant) {
        match *self {}
    }

    pub(crate) fn refusal(&self) -> Option<&str> {
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
