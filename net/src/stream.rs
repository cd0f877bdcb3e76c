//! [`Stream`]: what a connection reads and writes, a [`Timed`] socket or a TLS session over one.

use crate::tls::TlsStream;
use crate::Timed;
use std::io::{self, Read, Write};
use std::time::Instant;

/// What a connection reads and writes: the timed socket, or TLS over it.
pub enum Stream {
    /// The socket itself.
    Plain(Timed),
    /// A TLS session over it.
    Tls(Box<TlsStream>),
}

impl Stream {
    /// The socket under the stream.
    pub fn timed(&self) -> &Timed {
        match self {
            Stream::Plain(timed) => timed,
            Stream::Tls(tls) => tls.timed(),
        }
    }

    /// Why the server or the client refused the TLS session, if one of them did (the server
    /// tells of a certificate it does not accept only after the handshake, at the first read).
    pub fn refusal(&self) -> Option<&str> {
        match self {
            Stream::Plain(_) => None,
            Stream::Tls(tls) => tls.refusal(),
        }
    }

    /// Sets the deadline of whatever is read or written from now on.
    pub fn set_deadline(&mut self, deadline: Instant) {
        match self {
            Stream::Plain(timed) => timed.set_deadline(deadline),
            Stream::Tls(tls) => tls.set_deadline(deadline),
        }
    }

    /// The peer's address as text: `host:port`, or a Unix socket's path.
    pub fn peer(&self) -> Option<String> {
        self.timed().peer()
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(timed) => timed.read(buf),
            Stream::Tls(tls) => tls.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(timed) => timed.write(buf),
            Stream::Tls(tls) => tls.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(timed) => timed.flush(),
            Stream::Tls(tls) => tls.flush(),
        }
    }
}
