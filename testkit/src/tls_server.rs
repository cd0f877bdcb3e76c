//! A `redis-server` that speaks TLS only, and `redis-cli` run against any server as testkit
//! connects to it.
//!
//! The server's port takes TLS connections only (`--port 0`: no plain TCP port); its unix socket
//! stays plain, for test code's own commands ([`RedisServer::connection`]). A `redis-server`
//! built without TLS exits at start, and the test fails saying so.

use crate::redis_server::{Launch, Mode};
use crate::tls::{TlsCertificates, TlsOptions, TlsSettings};
use crate::RedisServer;
use std::sync::Arc;
use std::time::Duration;

impl RedisServer {
    /// A server whose port speaks TLS only (`--tls-port P --port 0`), with the CA, server
    /// certificate and client authentication that `options` give. [`RedisServer::url`] is then
    /// `rediss://127.0.0.1:P`; the PEM files are in [`RedisServer::tls_certificates`].
    pub fn start_tls(options: TlsOptions) -> RedisServer {
        let certificates = options
            .certificates
            .unwrap_or_else(|| Arc::new(TlsCertificates::generate()));
        RedisServer::launch(Launch {
            mode: Mode::Tls(TlsSettings {
                certificates,
                client_auth: options.client_auth,
            }),
            cluster_bus: false,
            extra: options.extra,
        })
    }

    /// The certificates of a TLS server; `None` for a plain one.
    pub fn tls_certificates(&self) -> Option<&Arc<TlsCertificates>> {
        match self.mode() {
            Mode::Tls(settings)
            | Mode::Sentinel {
                tls: Some(settings),
                ..
            } => Some(&settings.certificates),
            Mode::Plain | Mode::Sentinel { tls: None, .. } => None,
        }
    }
}

impl RedisServer {
    /// Runs `redis-cli` against this server with `args` (a command and its arguments, or options
    /// such as `--cluster check`), connected as testkit connects: over TLS with the client
    /// certificate on a TLS server, with the server's `--requirepass` if it has one. Killed
    /// after 10 s.
    pub fn cli(&self, args: &[&str]) -> Result<String, String> {
        let mut all = self
            .mode()
            .tls()
            .map(TlsSettings::cli_args)
            .unwrap_or_default();
        all.extend(["-h".to_owned(), "127.0.0.1".to_owned()]);
        all.extend(["-p".to_owned(), self.port().to_string()]);
        if let Some(password) = self.requirepass() {
            all.extend(["-a", password, "--no-auth-warning"].map(String::from));
        }
        all.extend(args.iter().map(|&arg| arg.to_owned()));
        crate::cli::run(&all, Duration::from_secs(10))
    }
}
