//! Opening a connection to the server by a deadline: the socket (TCP, or the Unix socket in a
//! directory), then, on TCP, TLS as the `sslmode` says: an `SSLRequest`, the server's one-byte
//! answer, and the handshake over `deadline-net`. The connection of a query and that of a cancel
//! request are opened here alike.

use crate::config::{Config, Host, SslMode};
use crate::wire::{classify, Wire};
use crate::{Error, Result};
use bytes::BytesMut;
use deadline_net::tls::HandshakeError;
use deadline_net::{Socket, Stream, Timed};
use postgres_protocol::message::frontend;
use std::io::{self, Read};
use std::time::Instant;

/// An open connection, before the startup message.
pub(crate) struct Opened {
    /// Its messages.
    pub(crate) wire: Wire,
    /// Whether a password may go over it in cleartext: it is a Unix socket, or TLS.
    pub(crate) private: bool,
}

/// Opens a connection to the server of `config`, with TLS if its `sslmode` asks, by `deadline`.
pub(crate) fn open(config: &Config, deadline: Instant) -> Result<Opened> {
    config.check()?;
    let server = config.server();
    let host = match config.get_host() {
        Host::Unix(dir) => {
            let path = config.socket_path(dir);
            let socket = deadline_net::connect_unix(&path, deadline)
                .map_err(|error| connect_failure(error, &server))?;
            let stream = Stream::Plain(Timed::new(Socket::Unix(socket), deadline));
            return Ok(Opened {
                wire: Wire::new(stream, server),
                private: true,
            });
        }
        Host::Tcp(host) => host,
    };
    let socket = deadline_net::connect_tcp(host, config.get_port(), deadline)
        .map_err(|error| connect_failure(error, &server))?;
    let timed = Timed::new(Socket::Tcp(socket), deadline);
    let mode = config.get_ssl_mode();
    if mode == SslMode::Disable || (mode == SslMode::Prefer && !cfg!(feature = "tls")) {
        return Ok(Opened {
            wire: Wire::new(Stream::Plain(timed), server),
            private: false,
        });
    }
    let mut wire = Wire::new(Stream::Plain(timed), server.clone());
    let mut request = BytesMut::new();
    frontend::ssl_request(&mut request);
    wire.send(&request)?;
    // One byte, read alone: whatever follows it belongs to the TLS handshake.
    let mut answer = [0u8; 1];
    if let Err(error) = wire.stream_mut().read_exact(&mut answer) {
        return Err(wire.failure(error, "asking for TLS at"));
    }
    match answer[0] {
        b'S' => {}
        b'N' if mode.requires_tls() => {
            return Err(Error::Tls(format!(
                "{server} does not offer TLS, and sslmode={} requires it",
                mode.as_str()
            )));
        }
        b'N' => {
            return Ok(Opened {
                wire,
                private: false,
            })
        }
        other => {
            return Err(Error::Protocol(format!(
                "{server} answered a TLS request with {:?}",
                char::from(other)
            )))
        }
    }
    let tls = config.tls_client_config()?;
    let Stream::Plain(timed) = wire.into_stream() else {
        return Err(Error::Protocol("TLS asked for twice".into()));
    };
    let session =
        deadline_net::tls::handshake(tls, host, timed, None).map_err(|error| match error {
            HandshakeError::Refused(why) => {
                let must = match mode {
                    SslMode::VerifyFull => "chain to a trusted root and name the host",
                    _ => "chain to a trusted root",
                };
                Error::Tls(format!(
                    "{why} (sslmode={}: the server's certificate must {must}; the roots are \
                     the system's and the CA given)",
                    mode.as_str()
                ))
            }
            HandshakeError::Plain => Error::Tls(format!("{server} does not speak TLS")),
            HandshakeError::Io(error) => classify(error, &format!("TLS handshake with {server}")),
        })?;
    Ok(Opened {
        wire: Wire::new(Stream::Tls(Box::new(session)), server),
        private: true,
    })
}

/// A connection that could not be made, as an error.
fn connect_failure(error: io::Error, server: &str) -> Error {
    classify(error, &format!("connecting to {server}"))
}
