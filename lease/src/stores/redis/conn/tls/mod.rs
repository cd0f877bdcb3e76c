//! TLS for `rediss://` servers. What a builder is told (CA and client certificates, from files or
//! memory) is kept whatever the build; the sessions themselves are rustls's, with the `ring`
//! provider, in builds with the `tls` feature (the default). Without it, a `rediss://` server is
//! refused when the client is built, with a message that names the feature: a build that needs
//! no C compiler for `ring`.

#[cfg(not(feature = "tls"))]
mod absent;
#[cfg(feature = "tls")]
mod config;
#[cfg(feature = "tls")]
mod session;

#[cfg(not(feature = "tls"))]
pub(crate) use absent::{config, handshake, Config, TlsStream, NEEDS_TLS};
#[cfg(feature = "tls")]
pub(crate) use config::{config, Config};
#[cfg(feature = "tls")]
pub(crate) use session::{handshake, TlsStream};

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

/// What a builder was told about TLS.
#[derive(Clone, Debug, Default)]
pub(crate) struct TlsFiles {
    /// PEM CA certificates to trust beside the system's.
    pub(crate) ca_file: Option<Pem>,
    /// A PEM certificate chain and its private key, to present to the server.
    pub(crate) client_cert: Option<(Pem, Pem)>,
}
