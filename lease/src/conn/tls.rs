//! TLS for `rediss://` servers: rustls (with the `ring` provider), trusting the system's root
//! certificates and any CA file given, and presenting a client certificate if one is given.
//! Certificates are always verified: a URL asking for `#insecure` is refused (give the server's
//! CA instead).

use crate::error::{Error, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use std::path::PathBuf;
use std::sync::Arc;

/// Where PEM text comes from: a file read when the client is built, or text given in memory
/// (shown by its length only: it may be a private key).
#[derive(Clone)]
pub(crate) enum Pem {
    File(PathBuf),
    Text(Arc<[u8]>),
}

impl std::fmt::Debug for Pem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pem::File(path) => path.fmt(f),
            Pem::Text(text) => write!(f, "<{} bytes of PEM in memory>", text.len()),
        }
    }
}

impl Pem {
    /// The certificates in it.
    fn certificates(&self, what: &str) -> Result<Vec<CertificateDer<'static>>> {
        let certs: std::result::Result<Vec<_>, _> = match self {
            Pem::File(path) => CertificateDer::pem_file_iter(path)
                .map_err(|error| invalid(what, self, error))?
                .collect(),
            Pem::Text(text) => CertificateDer::pem_slice_iter(text).collect(),
        };
        certs.map_err(|error| invalid(what, self, error))
    }

    /// The private key in it.
    fn key(&self) -> Result<PrivateKeyDer<'static>> {
        match self {
            Pem::File(path) => PrivateKeyDer::from_pem_file(path),
            Pem::Text(text) => PrivateKeyDer::from_pem_slice(text),
        }
        .map_err(|error| invalid("client key", self, error))
    }
}

/// What a builder was told about TLS.
#[derive(Clone, Debug, Default)]
pub(crate) struct TlsFiles {
    /// PEM CA certificates to trust beside the system's.
    pub(crate) ca_file: Option<Pem>,
    /// A PEM certificate chain and its private key, to present to the server.
    pub(crate) client_cert: Option<(Pem, Pem)>,
}

fn invalid(what: &str, pem: &Pem, error: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{what} {pem:?}: {error}"))
}

/// The client configuration for `files`, read now (a missing or malformed file is an
/// `InvalidArgument` when the client is built, not a failure of its first call).
pub(crate) fn config(files: &TlsFiles) -> Result<Arc<ClientConfig>> {
    let mut roots = RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for cert in native.certs {
        // A system certificate rustls cannot use is one fewer root, not a failure.
        let _ = roots.add(cert);
    }
    if let Some(pem) = &files.ca_file {
        let certs = pem.certificates("CA file")?;
        if certs.is_empty() {
            return Err(invalid("CA file", pem, "no certificate in it"));
        }
        for cert in certs {
            roots
                .add(cert)
                .map_err(|error| invalid("CA file", pem, error))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| Error::InvalidArgument(format!("TLS: {error}")))?
        .with_root_certificates(roots);
    let config = match &files.client_cert {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = cert.certificates("client certificate")?;
            if chain.is_empty() {
                return Err(invalid("client certificate", cert, "no certificate in it"));
            }
            builder
                .with_client_auth_cert(chain, key.key()?)
                .map_err(|error| invalid("client certificate", cert, error))?
        }
    };
    Ok(Arc::new(config))
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
