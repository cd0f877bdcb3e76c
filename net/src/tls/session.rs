//! TLS sessions over a timed socket: the handshake by the call's deadline (which, with a probe,
//! tells a port that speaks the plain protocol from one that does not answer), and the failures
//! that are refusals. Certificates are always verified.

use super::HandshakeError;
use crate::Timed;
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a handshake with a probe waits for the server's first bytes before it asks the probe
/// whether the port speaks the plain protocol (which never answers a handshake).
const ASK_PLAIN_AFTER: Duration = Duration::from_millis(250);

/// Runs the TLS handshake with the server `host` (its name or IP address, which its certificate
/// must carry) over `timed`, by its deadline. With `plain_probe`, a server that sends nothing
/// for a moment is asked, on a second connection to the same address, whether it speaks the
/// plain protocol: `probe(address, deadline)` says so, and the handshake then fails with
/// [`HandshakeError::Plain`] rather than waiting for its deadline.
///
/// # Errors
///
/// [`HandshakeError::Refused`] for a failure of the handshake itself (a certificate that does
/// not verify, no protocol in common, a port that does not speak TLS, a host that is not a
/// server name), [`HandshakeError::Plain`] as above, [`HandshakeError::Io`] for a connection
/// that failed or a deadline that passed.
pub fn handshake(
    config: Arc<ClientConfig>,
    host: &str,
    mut timed: Timed,
    plain_probe: Option<&dyn Fn(SocketAddr, Instant) -> bool>,
) -> Result<TlsStream, HandshakeError> {
    let name = server_name(host)?;
    let mut session = rustls::ClientConnection::new(config, name)
        .map_err(|error| HandshakeError::Refused(error.to_string()))?;
    let deadline = timed.deadline();
    // Until the server's first bytes, or the time to ask whether the port is a plain one.
    let mut ask_at = plain_probe
        .map(|_| Instant::now() + ASK_PLAIN_AFTER)
        .filter(|at| *at < deadline);
    if let Some(at) = ask_at {
        timed.set_deadline(at);
    }
    while session.is_handshaking() {
        let Err(error) = session.complete_io(&mut timed) else {
            continue;
        };
        if let Some(why) = refusal(&error) {
            return Err(HandshakeError::Refused(format!(
                "handshake with {host}: {why}"
            )));
        }
        if let (Some(_), io::ErrorKind::TimedOut) = (ask_at.take(), error.kind()) {
            timed.set_deadline(deadline);
            if timed.received() == 0 {
                let plain = match (plain_probe, timed.tcp_peer()) {
                    (Some(probe), Some(peer)) => probe(peer, deadline),
                    _ => false,
                };
                if plain {
                    return Err(HandshakeError::Plain);
                }
            }
            continue;
        }
        return Err(match error.kind() {
            io::ErrorKind::InvalidData => {
                HandshakeError::Refused(format!("handshake with {host}: {error}"))
            }
            _ => HandshakeError::Io(error),
        });
    }
    timed.set_deadline(deadline);
    Ok(TlsStream {
        session: rustls::StreamOwned::new(session, timed),
        refusal: None,
    })
}

/// TLS over a timed socket, and the refusal that ended it, if one did.
pub struct TlsStream {
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
    pub fn timed(&self) -> &Timed {
        &self.session.sock
    }

    /// Sets the deadline of whatever the session reads or writes now.
    pub fn set_deadline(&mut self, deadline: Instant) {
        self.session.sock.set_deadline(deadline);
    }

    /// Why the server or the client refused the session, if one of them did (the server tells
    /// of a certificate it does not accept only after the handshake, at the first read).
    pub fn refusal(&self) -> Option<&str> {
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
fn server_name(host: &str) -> Result<ServerName<'static>, HandshakeError> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_owned())
        .map_err(|error| HandshakeError::Refused(format!("TLS server name {host:?}: {error}")))
}

/// Why a TLS session failed, if it is a refusal that no retry mends: the server turned the
/// client away (no certificate, or one of a CA it does not trust, no protocol in common), the
/// client could not verify the server, or the peer does not speak TLS. `None` for every other
/// failure (a connection cut, a timeout, a record damaged on the way), which may pass.
pub fn refusal(error: &std::io::Error) -> Option<String> {
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
