//! The rustls client configuration a client's TLS settings make: the system's root
//! certificates and any CA given, and a client certificate if one is given.

use super::chain_only::ChainOnly;
use super::{ConfigError, Pem, ServerCheck, TlsFiles};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};
use std::sync::Arc;

type Result<T> = std::result::Result<T, ConfigError>;

/// The certificates in `pem`.
fn certificates(pem: &Pem, what: &str) -> Result<Vec<CertificateDer<'static>>> {
    let certs: std::result::Result<Vec<_>, _> = match pem {
        Pem::File(path) => CertificateDer::pem_file_iter(path)
            .map_err(|error| invalid(what, pem, error))?
            .collect(),
        Pem::Text(text) => CertificateDer::pem_slice_iter(text).collect(),
    };
    certs.map_err(|error| invalid(what, pem, error))
}

/// The private key in `pem`.
fn key(pem: &Pem) -> Result<PrivateKeyDer<'static>> {
    match pem {
        Pem::File(path) => PrivateKeyDer::from_pem_file(path),
        Pem::Text(text) => PrivateKeyDer::from_pem_slice(text),
    }
    .map_err(|error| invalid("client key", pem, error))
}

fn invalid(what: &str, pem: &Pem, error: impl std::fmt::Display) -> ConfigError {
    ConfigError(format!("{what} {pem:?}: {error}"))
}

/// The client configuration for `files`, read now, so that a missing or malformed file fails
/// when a client is built rather than at its first call. Certificates are always verified: their
/// chain to a trusted root, and that they name the host.
///
/// # Errors
///
/// A [`ConfigError`] naming the file (or the PEM text, by its length) and what is wrong with it.
pub fn client_config(files: &TlsFiles) -> Result<Arc<ClientConfig>> {
    client_config_checking(files, ServerCheck::ChainAndName)
}

/// The client configuration for `files`, as [`client_config`] makes it, with the server's
/// certificate checked as `check` says.
///
/// # Errors
///
/// A [`ConfigError`] naming the file (or the PEM text, by its length) and what is wrong with it.
pub fn client_config_checking(files: &TlsFiles, check: ServerCheck) -> Result<Arc<ClientConfig>> {
    let mut roots = RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for cert in native.certs {
        // A system certificate rustls cannot use is one fewer root, not a failure.
        let _ = roots.add(cert);
    }
    if let Some(pem) = &files.ca_file {
        let certs = certificates(pem, "CA file")?;
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
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|error| ConfigError(format!("TLS: {error}")))?;
    let builder = match check {
        ServerCheck::ChainAndName => builder.with_root_certificates(roots),
        ServerCheck::ChainOnly => {
            let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .map_err(|error| ConfigError(format!("TLS: {error}")))?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(ChainOnly(verifier)))
        }
    };
    let config = match &files.client_cert {
        None => builder.with_no_client_auth(),
        Some((cert, key_pem)) => {
            let chain = certificates(cert, "client certificate")?;
            if chain.is_empty() {
                return Err(invalid("client certificate", cert, "no certificate in it"));
            }
            builder
                .with_client_auth_cert(chain, key(key_pem)?)
                .map_err(|error| invalid("client certificate", cert, error))?
        }
    };
    Ok(Arc::new(config))
}
