//! TLS for test servers: a CA, a server certificate and a client certificate made at test time
//! (with rcgen), written as PEM files, and the settings a server and `redis-cli` take them with.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

/// A CA, a server certificate (CN `localhost`; SANs `localhost` and IP `127.0.0.1`) and a client
/// certificate, both signed by the CA, as PEM files in a temporary directory deleted on drop.
/// Keys are ECDSA P-256, in PKCS#8.
pub struct TlsCertificates {
    dir: tempfile::TempDir,
}

impl TlsCertificates {
    /// Makes a fresh CA and the certificates it signs.
    pub fn generate() -> TlsCertificates {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let write = |name: &str, pem: String| {
            fs::write(dir.path().join(name), pem).expect("write a PEM file");
        };

        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        ca.distinguished_name = name("testkit CA");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = KeyPair::generate().expect("a CA key");
        write("ca.crt", ca.self_signed(&ca_key).expect("a CA").pem());
        write("ca.key", ca_key.serialize_pem());
        let issuer = Issuer::new(ca, ca_key);

        let leaf = |common_name: &str, alt_names: &[&str], usage: ExtendedKeyUsagePurpose| {
            let alt_names: Vec<String> = alt_names.iter().map(|&n| n.to_owned()).collect();
            let mut params = CertificateParams::new(alt_names).expect("certificate parameters");
            params.distinguished_name = name(common_name);
            params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
            params.extended_key_usages = vec![usage];
            params.use_authority_key_identifier_extension = true;
            let key = KeyPair::generate().expect("a key");
            let cert = params
                .signed_by(&key, &issuer)
                .expect("a signed certificate");
            (cert.pem(), key.serialize_pem())
        };
        let (server_cert, server_key) = leaf(
            "localhost",
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        write("server.crt", server_cert);
        write("server.key", server_key);
        let (client_cert, client_key) =
            leaf("testkit client", &[], ExtendedKeyUsagePurpose::ClientAuth);
        write("client.crt", client_cert);
        write("client.key", client_key);
        TlsCertificates { dir }
    }

    /// The directory holding the PEM files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The CA certificate, which clients trust (`ca.crt`).
    pub fn ca_cert(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// The CA's private key (`ca.key`), to sign more certificates with.
    pub fn ca_key(&self) -> PathBuf {
        self.dir.path().join("ca.key")
    }

    /// The server certificate (`server.crt`).
    pub fn server_cert(&self) -> PathBuf {
        self.dir.path().join("server.crt")
    }

    /// The server's private key (`server.key`).
    pub fn server_key(&self) -> PathBuf {
        self.dir.path().join("server.key")
    }

    /// The client certificate (`client.crt`), which servers requiring one accept.
    pub fn client_cert(&self) -> PathBuf {
        self.dir.path().join("client.crt")
    }

    /// The client's private key (`client.key`).
    pub fn client_key(&self) -> PathBuf {
        self.dir.path().join("client.key")
    }
}

fn name(common_name: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    name
}

/// Whether a TLS server asks clients for a certificate (`tls-auth-clients`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ClientAuth {
    /// A client must present a certificate signed by the CA (`yes`, Redis's default).
    #[default]
    Required,
    /// A client may present one; if it does, it must be signed by the CA (`optional`).
    Optional,
    /// No client certificate is asked for (`no`).
    Off,
}

/// How [`RedisServer::start_tls`](crate::RedisServer::start_tls) starts a server.
#[derive(Clone, Default)]
pub struct TlsOptions {
    /// Whether clients must present a certificate.
    pub client_auth: ClientAuth,
    /// The certificates to use; fresh ones when `None`. Servers given the same certificates
    /// trust the same CA.
    pub certificates: Option<Arc<TlsCertificates>>,
    /// More settings, as `--name value` pairs (see [`RedisServer::start_with`](crate::RedisServer::start_with)).
    pub extra: Vec<String>,
}

/// What a TLS server was started with.
#[derive(Clone)]
pub(crate) struct TlsSettings {
    pub(crate) certificates: Arc<TlsCertificates>,
    pub(crate) client_auth: ClientAuth,
}

impl TlsSettings {
    /// Clients must present a certificate that `certificates`' CA signed.
    pub(crate) fn requiring_client_certificates(certificates: Arc<TlsCertificates>) -> Self {
        TlsSettings {
            certificates,
            client_auth: ClientAuth::Required,
        }
    }

    /// The server's TLS settings on its command line, for TLS on `port`.
    pub(crate) fn server_args(&self, port: u16) -> Vec<String> {
        let certificates = &self.certificates;
        let auth = match self.client_auth {
            ClientAuth::Required => "yes",
            ClientAuth::Optional => "optional",
            ClientAuth::Off => "no",
        };
        [
            "--tls-port".to_owned(),
            port.to_string(),
            "--tls-cert-file".to_owned(),
            path(&certificates.server_cert()),
            "--tls-key-file".to_owned(),
            path(&certificates.server_key()),
            "--tls-ca-cert-file".to_owned(),
            path(&certificates.ca_cert()),
            "--tls-auth-clients".to_owned(),
            auth.to_owned(),
            // What the server presents when it connects out (a replica to its primary, a
            // Sentinel to the servers): the server certificate is for serving only.
            "--tls-client-cert-file".to_owned(),
            path(&certificates.client_cert()),
            "--tls-client-key-file".to_owned(),
            path(&certificates.client_key()),
        ]
        .into()
    }

    /// `redis-cli` arguments to reach the server over TLS, with the client certificate.
    pub(crate) fn cli_args(&self) -> Vec<String> {
        let certificates = &self.certificates;
        [
            "--tls".to_owned(),
            "--cacert".to_owned(),
            path(&certificates.ca_cert()),
            "--cert".to_owned(),
            path(&certificates.client_cert()),
            "--key".to_owned(),
            path(&certificates.client_key()),
        ]
        .into()
    }

    /// Whether the server answers a PING over TLS (a refusal such as NOAUTH is an answer too).
    pub(crate) fn ping(&self, port: u16) -> Result<(), String> {
        let mut args = self.cli_args();
        args.extend(["-h", "127.0.0.1", "-p", &port.to_string(), "PING"].map(String::from));
        let reply = crate::cli::run(&args, Duration::from_secs(2))?;
        if reply.contains("PONG") || reply.contains("NOAUTH") {
            Ok(())
        } else {
            Err(format!("PING over TLS answered {reply:?}"))
        }
    }
}

fn path(path: &Path) -> String {
    path.to_str().expect("a UTF-8 path").to_owned()
}
