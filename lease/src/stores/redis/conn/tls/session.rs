//! TLS sessions over a timed socket: the handshake by the call's deadline (which tells a port that
//! speaks plain Redis from one that does not answer), and the failures that are refusals.
//! Certificates are always verified: a URL asking for `#insecure` is refused (give the server's CA
//! instead).

use crate::error::{Error, Result};
use crate::stores::redis::conn::{Endpoint, Timed};
use redis::{RedisError, RedisResult};
use rustls::pki_types::ServerName;
use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

/// How long a TLS handshake waits for the server's first bytes before it asks the port, on a
/// second connection, whether it speaks plain Redis (which never answers a handshake).
const ASK_PLAIN_AFTER: Duration = Duration::from_millis(250);

/// Runs the TLS handshake over `timed` (by its deadline). A failure of the handshake itself (a
/// certificate that does not verify, no protocol in common, a port that does not speak TLS) is
/// a refusal, with the code `TLS`; a server that does not answer is an I/O timeout.
pub(crate) fn handshake(
    endpoint: &Endpoint,
    host: &str,
    mut timed: Timed,
) -> RedisResult<TlsStream> {
    let refused = |text: String| redis::make_extension_error("TLS".into(), Some(text));
    let config = endpoint
        .tls
        .clone()
        .ok_or_else(|| refused("no TLS configuration for a rediss:// server".into()))?;
    let name = server_name(host).map_err(|error| refused(error.to_string()))?;
    let mut session =
        rustls::ClientConnection::new(config, name).map_err(|error| refused(error.to_string()))?;
    let deadline = timed.deadline();
    // Until the server's first bytes, or the time to ask whether the port is a plain one.
    let mut ask_at = Some(Instant::now() + ASK_PLAIN_AFTER).filter(|at| *at < deadline);
    if let Some(at) = ask_at {
        timed.set_deadline(at);
    }
    while session.is_handshaking() {
        let Err(error) = session.complete_io(&mut timed) else {
            continue;
        };
        if let Some(why) = refusal(&error) {
            return Err(refused(format!("handshake with {host}: {why}")));
        }
        if let (Some(_), io::ErrorKind::TimedOut) = (ask_at.take(), error.kind()) {
            timed.set_deadline(deadline);
            if timed.received() == 0 {
                let plain = timed
                    .tcp_peer()
                    .is_some_and(|peer| speaks_plain_redis(peer, deadline));
                if plain {
                    return Err(refused(format!(
                        "handshake with {host}: the port does not speak TLS (it answers plain \
                         Redis): use redis:// or the server's TLS port"
                    )));
                }
            }
            continue;
        }
        return Err(match error.kind() {
            io::ErrorKind::InvalidData => refused(format!("handshake with {host}: {error}")),
            _ => RedisError::from(error),
        });
    }
    timed.set_deadline(deadline);
    Ok(TlsStream {
        session: rustls::StreamOwned::new(session, timed),
        refusal: None,
    })
}

/// TLS over a timed socket, and the refusal that ended it, if one did.
pub(crate) struct TlsStream {
    session: rustls::StreamOwned<rustls::ClientConnection, Timed>,
    refusal: Option<String>,
}

impl TlsStream {
    /// Notes a failure of the session that is a refusal (see [`refusal`]).
    fn noted<T>(&mut self, result: io::Result<T>) -> io::Result<T> {
        if let Err(error) = &result {
            if let Some(why) = refusal(error) {
                self.refusal = Some(why);
            }
        }
        result
    }

    /// The socket under the session.
    pub(crate) fn timed(&self) -> &Timed {
        &self.session.sock
    }

    /// Sets the deadline of whatever the session reads or writes now.
    pub(crate) fn set_deadline(&mut self, deadline: Instant) {
        self.session.sock.set_deadline(deadline);
    }

    /// Why the server or the client refused the session, if one of them did (the server tells
    /// of a certificate it does not accept only after the handshake, at the first read).
    pub(crate) fn refusal(&self) -> Option<&str> {
        self.refusal.as_deref()
    }
}

impl Read for TlsStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let read = self.session.read(buf);
        self.noted(read)
    }
}

impl Write for TlsStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let written = self.session.write(buf);
        self.noted(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        let flushed = self.session.flush();
        self.noted(flushed)
    }
}

/// The name a server's certificate must carry: its host name or IP address.
pub(crate) fn server_name(host: &str) -> Result<ServerName<'static>> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_owned())
        .map_err(|error| Error::InvalidArgument(format!("TLS server name {host:?}: {error}")))
}

/// Why a TLS session failed, if it is a refusal that no retry mends: the server turned the
/// client away (no certificate, or one of a CA it does not trust, no protocol in common), the
/// client could not verify the server, or the peer does not speak TLS. `None` for every other
/// failure (a connection cut, a timeout, a record damaged on the way), which may pass.
pub(crate) fn refusal(error: &std::io::Error) -> Option<String> {
    use rustls::AlertDescription as Alert;
    let tls = error.get_ref()?.downcast_ref::<rustls::Error>()?;
    let refused = match tls {
        rustls::Error::AlertReceived(Alert::CertificateRequired) => {
            return Some(format!("{tls}: the server requires a client certificate"));
        }
        rustls::Error::AlertReceived(
            Alert::UnknownCA | Alert::BadCertificate | Alert::CertificateUnknown,
        ) => {
            return Some(format!(
                "{tls}: the server does not accept the client certificate"
            ));
        }
        rustls::Error::AlertReceived(alert) => matches!(
            alert,
            Alert::HandshakeFailure
                | Alert::BadCertificate
                | Alert::UnsupportedCertificate
                | Alert::CertificateRevoked
                | Alert::CertificateExpired
                | Alert::CertificateUnknown
                | Alert::IllegalParameter
                | Alert::UnknownCA
                | Alert::AccessDenied
                | Alert::ProtocolVersion
                | Alert::InsufficientSecurity
                | Alert::CertificateRequired
                | Alert::UnrecognisedName
                | Alert::UnsupportedExtension
                | Alert::NoApplicationProtocol
        ),
        rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType) => {
            // The first bytes are not a TLS record: a plain server answered the handshake.
            return Some(format!("{tls}: the port does not speak TLS"));
        }
        rustls::Error::InvalidCertificate(_)
        | rustls::Error::NoCertificatesPresented
        | rustls::Error::UnsupportedNameType
        | rustls::Error::PeerIncompatible(_)
        | rustls::Error::InvalidMessage(_)
        | rustls::Error::InappropriateMessage { .. }
        | rustls::Error::InappropriateHandshakeMessage { .. } => true,
        _ => false,
    };
    refused.then(|| tls.to_string())
}

/// Whether the server at `address` answers a plain `PING` in Redis's protocol by `deadline`: it
/// does not speak TLS on that port. A TLS server answers plain text with an alert or not at all.
pub(crate) fn speaks_plain_redis(
    address: std::net::SocketAddr,
    deadline: std::time::Instant,
) -> bool {
    use std::io::{Read, Write};
    let left = || {
        Some(deadline.saturating_duration_since(std::time::Instant::now()))
            .filter(|left| !left.is_zero())
    };
    let Some(timeout) = left() else {
        return false;
    };
    let Ok(mut socket) = std::net::TcpStream::connect_timeout(&address, timeout) else {
        return false;
    };
    let mut first = [0_u8; 1];
    let answered = left().is_some_and(|left| {
        socket.set_read_timeout(Some(left)).is_ok()
            && socket.set_write_timeout(Some(left)).is_ok()
            && socket.write_all(b"PING\r\n").is_ok()
            && matches!(socket.read(&mut first), Ok(1))
    });
    // A RESP reply starts with one of these (`+PONG`, `-NOAUTH ...`); a TLS record with a byte
    // from 20 to 24.
    answered && b"+-:$*_,#!=(%~|>".contains(&first[0])
}
