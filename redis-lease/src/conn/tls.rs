//! TLS for `rediss://` servers: rustls (with the `ring` provider), trusting the system's root
//! certificates and any CA file given, and presenting a client certificate if one is given.
//! Certificates are always verified: a URL asking for `#insecure` is refused (give the server's
//! CA instead).

use crate::error::{Error, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a builder was told about TLS.
#[derive(Clone, Debug, Default)]
pub(crate) struct TlsFiles {
    /// A PEM file of CA certificates to trust beside the system's.
    pub(crate) ca_file: Option<PathBuf>,
    /// A PEM certificate chain and its private key, to present to the server.
    pub(crate) client_cert: Option<(PathBuf, PathBuf)>,
}

fn invalid(what: &str, path: &Path, error: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{what} {}: {error}", path.display()))
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
    if let Some(path) = &files.ca_file {
        let certs =
            CertificateDer::pem_file_iter(path).map_err(|error| invalid("CA file", path, error))?;
        let mut added = 0;
        for cert in certs {
            let cert = cert.map_err(|error| invalid("CA file", path, error))?;
            roots
                .add(cert)
                .map_err(|error| invalid("CA file", path, error))?;
            added += 1;
        }
        if added == 0 {
            return Err(invalid("CA file", path, "no certificate in it"));
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| Error::InvalidArgument(format!("TLS: {error}")))?
        .with_root_certificates(roots);
    let config = match &files.client_cert {
        None => builder.with_no_client_auth(),
        Some((cert_path, key_path)) => {
            let chain = CertificateDer::pem_file_iter(cert_path)
                .and_then(|certs| certs.collect::<std::result::Result<Vec<_>, _>>())
                .map_err(|error| invalid("client certificate", cert_path, error))?;
            let key = PrivateKeyDer::from_pem_file(key_path)
                .map_err(|error| invalid("client key", key_path, error))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|error| invalid("client certificate", cert_path, error))?
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
