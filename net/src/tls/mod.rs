//! TLS over a [`Timed`](crate::Timed) socket. What a client is told (CA and client certificates,
//! from files or memory) is kept whatever the build; the sessions themselves are rustls's, with
//! the `ring` provider, in builds with the `tls` feature. Without it, [`client_config`] refuses,
//! and no [`TlsStream`] can exist.

#[cfg(not(feature = "tls"))]
mod absent;
#[cfg(feature = "tls")]
mod chain_only;
#[cfg(feature = "tls")]
mod config;
#[cfg(feature = "tls")]
mod session;

#[cfg(not(feature = "tls"))]
pub use absent::{client_config, client_config_checking, handshake, ClientConfig, TlsStream};
#[cfg(feature = "tls")]
pub use config::{client_config, client_config_checking};
#[cfg(feature = "tls")]
pub use rustls::ClientConfig;
#[cfg(feature = "tls")]
pub use session::{handshake, refusal, TlsStream};

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// Where PEM text comes from: a file read when the configuration is made, or text given in
/// memory (shown by its length only: it may be a private key).
#[derive(Clone)]
pub enum Pem {
    /// A file, read by [`client_config`].
    File(PathBuf),
    /// The text itself.
    Text(Arc<[u8]>),
}

impl fmt::Debug for Pem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pem::File(path) => path.fmt(f),
            Pem::Text(text) => write!(f, "<{} bytes of PEM in memory>", text.len()),
        }
    }
}

/// What a client was told about TLS: the certificates to read when its configuration is made.
#[derive(Clone, Debug, Default)]
pub struct TlsFiles {
    /// PEM CA certificates to trust beside the system's.
    pub ca_file: Option<Pem>,
    /// A PEM certificate chain and its private key, to present to the server.
    pub client_cert: Option<(Pem, Pem)>,
}

/// How much of the server's certificate a client checks. Its chain to a trusted root (with
/// its validity dates and signatures) is checked either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ServerCheck {
    /// The chain, and that the certificate names the host the client connects to.
    #[default]
    ChainAndName,
    /// The chain only: a certificate of a trusted root that names another host is accepted,
    /// as libpq's `sslmode=verify-ca` accepts it.
    ChainOnly,
}

/// A TLS configuration that cannot be made: a file missing or malformed, a certificate without a
/// key, or a build without the `tls` feature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// How a TLS handshake failed.
#[derive(Debug)]
pub enum HandshakeError {
    /// Either side refused the session, which no retry mends: a certificate that does not
    /// verify, none where one is required, no protocol in common, a peer that does not speak
    /// TLS. The text says why.
    Refused(String),
    /// The server sent nothing, and the probe given to [`handshake`] found that the port speaks
    /// the plain protocol instead: the client should use the server's TLS port, or no TLS.
    Plain,
    /// The connection failed or the deadline passed: a later try may succeed.
    Io(io::Error),
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandshakeError::Refused(why) => f.write_str(why),
            HandshakeError::Plain => f.write_str("the port does not speak TLS"),
            HandshakeError::Io(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for HandshakeError {}
