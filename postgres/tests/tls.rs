//! TLS by the SSLRequest handshake: required by the server and verified against the testkit's
//! CA, refused for a CA that did not sign the server's certificate, client certificates.

mod common;

use common::soon;
use postgres_blocking::{Config, Connection, Error, Pem, SslMode};
use std::sync::Arc;
use testkit::{PgOptions, PgServer, PgTls, TlsCertificates};

fn tls_server(client_certificates: bool) -> PgServer {
    PgServer::start_with(PgOptions {
        tls: Some(PgTls {
            certificates: None,
            required: true,
            client_certificates,
        }),
        settings: Vec::new(),
    })
}

/// Whether the session runs over TLS, as the server sees it.
fn over_tls(conn: &mut Connection) -> bool {
    conn.query_one(
        "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
        &[],
        soon(),
    )
    .expect("a row")
    .get::<bool>(0)
    .expect("a bool")
}

#[test]
fn tls_is_required_and_the_server_verified_against_the_ca() {
    let pg = tls_server(false);
    let files = pg.tls_certificates().expect("a TLS server");
    let config = Config::from_url(&pg.scram_url())
        .expect("valid")
        .ssl_mode(SslMode::VerifyFull)
        .ca_file(Pem::File(files.ca_cert()));
    let mut conn = Connection::connect(&config, soon()).expect("TLS with the CA");
    assert!(over_tls(&mut conn));
    let md5 = Config::from_url(&pg.md5_url())
        .expect("valid")
        .ssl_mode(SslMode::Require)
        .ca_file(Pem::File(files.ca_cert()));
    assert!(over_tls(
        &mut Connection::connect(&md5, soon()).expect("MD5 over TLS")
    ));
    // A cleartext password is allowed over TLS.
    let cleartext =
        Config::from_url(&pg.url_for(PgServer::CLEARTEXT_USER, PgServer::CLEARTEXT_PASSWORD))
            .expect("valid")
            .ca_file(Pem::File(files.ca_cert()));
    assert!(over_tls(
        &mut Connection::connect(&cleartext, soon()).expect("cleartext over TLS")
    ));

    // The server refuses a plain connection by its hostssl rules.
    let plain = config
        .clone()
        .ssl_mode(SslMode::Disable)
        .tls_files(Default::default());
    let refused = Connection::connect(&plain, soon()).expect_err("no TLS");
    assert_eq!(refused.code(), Some("28000"), "{refused:?}");
}

#[test]
fn a_certificate_that_the_ca_given_did_not_sign_is_refused() {
    let pg = tls_server(false);
    let stranger = TlsCertificates::generate();
    for mode in [SslMode::VerifyFull, SslMode::Require, SslMode::Prefer] {
        let config = Config::from_url(&pg.scram_url())
            .expect("valid")
            .ssl_mode(mode)
            .ca_file(Pem::File(stranger.ca_cert()));
        let error = Connection::connect(&config, soon()).expect_err("an unknown issuer");
        assert!(matches!(error, Error::Tls(_)), "{mode:?}: {error:?}");
        assert!(!error.is_retryable());
    }
}

#[test]
fn a_server_without_tls_is_refused_where_tls_is_required() {
    let pg = PgServer::start();
    let config = Config::from_url(&pg.scram_url())
        .expect("valid")
        .ssl_mode(SslMode::Require);
    let error = Connection::connect(&config, soon()).expect_err("no TLS offered");
    assert!(matches!(error, Error::Tls(_)), "{error:?}");
    let mut preferred = Connection::connect(&config.ssl_mode(SslMode::Prefer), soon())
        .expect("prefer falls back to a plain connection");
    assert!(!over_tls(&mut preferred));
}

#[test]
fn a_server_that_asks_for_a_client_certificate_gets_the_one_given() {
    let certificates = Arc::new(TlsCertificates::generate());
    let pg = PgServer::start_with(PgOptions {
        tls: Some(PgTls {
            certificates: Some(Arc::clone(&certificates)),
            required: true,
            client_certificates: true,
        }),
        settings: Vec::new(),
    });
    let base = Config::from_url(&pg.scram_url())
        .expect("valid")
        .ssl_mode(SslMode::VerifyFull)
        .ca_file(Pem::File(certificates.ca_cert()));
    let error = Connection::connect(&base, soon()).expect_err("no client certificate");
    assert!(error.is_auth() || error.is_tls(), "{error:?}");
    let with_cert = base.client_cert(
        Pem::File(certificates.client_cert()),
        Pem::File(certificates.client_key()),
    );
    let mut conn = Connection::connect(&with_cert, soon()).expect("a client certificate");
    assert!(over_tls(&mut conn));
    let token = conn.cancel_token().expect("a key");
    token.cancel(soon()).expect("a cancel request over TLS too");
}

#[test]
fn over_tls_a_wait_ends_by_its_deadline_and_a_frozen_server_cannot_hold_a_call() {
    use std::time::{Duration, Instant};
    let pg = tls_server(false);
    let files = pg.tls_certificates().expect("a TLS server");
    let config = Config::from_url(&pg.scram_url())
        .expect("valid")
        .ssl_mode(SslMode::VerifyFull)
        .ca_file(Pem::File(files.ca_cert()));
    let mut listener = Connection::connect(&config, soon()).expect("TLS");
    listener
        .batch_execute("LISTEN holds", soon())
        .expect("listening");
    for _ in 0..3 {
        let nothing = listener
            .wait_notification(Instant::now() + Duration::from_millis(150))
            .expect("not a failure");
        assert!(nothing.is_none() && listener.is_usable());
    }
    let mut notifier = Connection::connect(&config, soon()).expect("TLS");
    notifier
        .execute("SELECT pg_notify('holds', 'over TLS')", &[], soon())
        .expect("notified");
    let note = listener
        .wait_notification(soon())
        .expect("a wait")
        .expect("a notification");
    assert_eq!(note.payload(), "over TLS");

    pg.pause();
    let started = Instant::now();
    let error = listener
        .query("SELECT 1", &[], started + Duration::from_millis(500))
        .expect_err("frozen");
    assert!(error.is_timeout() && !listener.is_usable(), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
    pg.resume();
}

#[test]
fn verify_full_checks_the_host_name_and_the_other_modes_the_chain() {
    let pg = tls_server(false);
    let files = pg.tls_certificates().expect("a TLS server");
    // The server also listens on an address its certificate does not name.
    let unnamed = Config::from_url(&pg.scram_url())
        .expect("valid")
        .host(PgServer::UNNAMED_ADDRESS)
        .ca_file(Pem::File(files.ca_cert()));
    let error = Connection::connect(&unnamed.clone().ssl_mode(SslMode::VerifyFull), soon())
        .expect_err("a certificate for another name");
    assert!(
        matches!(&error, Error::Tls(why) if why.contains("name")),
        "{error:?}"
    );
    for mode in [SslMode::VerifyCa, SslMode::Require, SslMode::Prefer] {
        let mut conn = Connection::connect(&unnamed.clone().ssl_mode(mode), soon())
            .unwrap_or_else(|error| panic!("{mode:?}: {error}"));
        assert!(over_tls(&mut conn), "{mode:?}");
    }
    let url = format!(
        "{}?sslmode=verify-ca&sslrootcert={}",
        pg.scram_url()
            .replace("127.0.0.1", PgServer::UNNAMED_ADDRESS),
        files.ca_cert().display()
    );
    let mut conn = Connection::connect(&url.parse().expect("valid"), soon()).expect("verify-ca");
    assert!(over_tls(&mut conn));
}
