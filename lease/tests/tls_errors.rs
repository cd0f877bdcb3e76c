//! TLS failures are sorted as what they are: a handshake the server or the client refuses (no
//! client certificate, a certificate of a CA the other side does not trust) and a `rediss://`
//! URL of a port that does not speak TLS are refusals, which no retry mends; only silence is
//! unavailability.

mod common;

use common::RedisServer;
use redis_lease::{Client, Error};
use std::sync::Arc;
use std::time::{Duration, Instant};
use testkit::{ClientAuth, TlsCertificates, TlsOptions};

/// What one attempt on lock "x" gives, and how long it took.
fn attempt(client: &Client) -> (Result<(), Error>, Duration) {
    let start = Instant::now();
    let result = client.lock("x").expect("valid").try_lock().map(drop);
    (result, start.elapsed())
}

fn assert_refused_by_tls(result: &Result<(), Error>, says: &str) {
    match result {
        Err(Error::Refused { cause, .. }) if cause.code() == Some("TLS") => {
            assert!(cause.to_string().contains(says), "{cause}");
        }
        other => panic!("not a TLS refusal: {other:?}"),
    }
}

fn tls_server(client_auth: ClientAuth) -> (RedisServer, Arc<TlsCertificates>) {
    let server = RedisServer::start_tls(TlsOptions {
        client_auth,
        ..TlsOptions::default()
    });
    let certificates = server.tls_certificates().expect("a TLS server").clone();
    (server, certificates)
}

#[test]
fn a_missing_client_certificate_is_a_refusal() {
    let (server, certificates) = tls_server(ClientAuth::Required);
    let client = Client::builder(server.url())
        .tls_ca_file(certificates.ca_cert())
        .command_timeout(Duration::from_secs(2))
        .build()
        .expect("valid");
    let (result, took) = attempt(&client);
    assert_refused_by_tls(&result, "requires a client certificate");
    assert!(took < Duration::from_secs(1), "{took:?}");
}

#[test]
fn a_client_certificate_of_a_ca_the_server_does_not_trust_is_a_refusal() {
    let (server, certificates) = tls_server(ClientAuth::Required);
    let strangers = TlsCertificates::generate();
    let client = Client::builder(server.url())
        .tls_ca_file(certificates.ca_cert())
        .tls_client_cert(strangers.client_cert(), strangers.client_key())
        .build()
        .expect("valid");
    let (result, took) = attempt(&client);
    assert_refused_by_tls(&result, "does not accept the client certificate");
    assert!(took < Duration::from_secs(1), "{took:?}");
}

#[test]
fn a_server_certificate_of_a_ca_the_client_does_not_trust_is_a_refusal() {
    let (server, _) = tls_server(ClientAuth::Off);
    let strangers = TlsCertificates::generate();
    let client = Client::builder(server.url())
        .tls_ca_file(strangers.ca_cert())
        .build()
        .expect("valid");
    let (result, took) = attempt(&client);
    assert_refused_by_tls(&result, "certificate");
    assert!(took < Duration::from_secs(1), "{took:?}");
}

#[test]
fn a_rediss_url_of_a_plain_port_is_a_refusal_that_says_so() {
    let server = RedisServer::start();
    let url = server.url().replacen("redis://", "rediss://", 1);
    let client = Client::builder(url.as_str())
        .command_timeout(Duration::from_secs(3))
        .connect_timeout(Duration::from_secs(3))
        .build()
        .expect("valid");
    for _ in 0..5 {
        let (result, took) = attempt(&client);
        assert_refused_by_tls(&result, "does not speak TLS");
        assert!(took < Duration::from_secs(2), "{took:?}");
    }
}

#[test]
fn a_tls_server_that_lets_the_client_in_is_not_refused() {
    let (server, certificates) = tls_server(ClientAuth::Optional);
    let client = Client::builder(server.url())
        .tls_ca_file(certificates.ca_cert())
        .build()
        .expect("valid");
    let (result, _) = attempt(&client);
    assert!(result.is_ok(), "{result:?}");
}
