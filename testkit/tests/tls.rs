//! A TLS server started by testkit: certificates made at test time, TLS only on its port, and
//! client certificates asked for as told.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use testkit::{redis_cli, ClientAuth, RedisServer, TlsCertificates, TlsOptions};

fn path(path: &std::path::Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

#[test]
fn tls_server_answers_ping_over_tls_and_refuses_plain_tcp() {
    let server = RedisServer::start_tls(TlsOptions::default());
    assert_eq!(
        server.url(),
        format!("rediss://127.0.0.1:{}", server.port())
    );
    assert_eq!(server.cli(&["PING"]).expect("PING over TLS"), "PONG\n");

    let plain = redis::Client::open(format!("redis://127.0.0.1:{}", server.port()))
        .expect("a plain URL")
        .get_connection_with_timeout(Duration::from_secs(2))
        .and_then(|mut con| {
            con.set_read_timeout(Some(Duration::from_secs(2)))?;
            redis::cmd("PING").query::<String>(&mut con)
        });
    assert!(plain.is_err(), "a plain PING on the TLS port: {plain:?}");

    // Test code's own connection goes through the unix socket.
    let () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query(&mut server.connection())
        .expect("SET through the unix socket");
    assert_eq!(server.cli(&["GET", "k"]).expect("GET over TLS"), "v\n");
}

#[test]
fn a_client_without_a_certificate_is_refused_unless_client_auth_is_optional() {
    let certificates = Arc::new(TlsCertificates::generate());
    let required = RedisServer::start_tls(TlsOptions {
        certificates: Some(Arc::clone(&certificates)),
        ..TlsOptions::default()
    });
    let optional = RedisServer::start_tls(TlsOptions {
        client_auth: ClientAuth::Optional,
        certificates: Some(Arc::clone(&certificates)),
        ..TlsOptions::default()
    });
    let ping_without_certificate = |server: &RedisServer| {
        let port = server.port().to_string();
        let ca = path(&certificates.ca_cert()).to_owned();
        let args = ["--tls", "--cacert", &ca, "-p", &port, "PING"];
        redis_cli(&args, Duration::from_secs(5)).unwrap_or_else(|error| error)
    };
    assert!(
        !ping_without_certificate(&required).contains("PONG"),
        "a server requiring client certificates answered a client without one"
    );
    assert_eq!(ping_without_certificate(&optional), "PONG\n");
}

#[test]
fn server_certificate_names_localhost_and_127_0_0_1_and_chains_to_the_ca() {
    let certificates = TlsCertificates::generate();
    let verify = |extra: &[&str], cert: &std::path::Path| {
        Command::new("openssl")
            .args(["verify", "-CAfile", path(&certificates.ca_cert())])
            .args(extra)
            .arg(cert)
            .output()
            .expect("run openssl verify")
    };
    for check in [
        ["-verify_hostname", "localhost"],
        ["-verify_ip", "127.0.0.1"],
    ] {
        let verified = verify(&check, &certificates.server_cert());
        assert!(
            verified.status.success(),
            "openssl verify {check:?}: {}",
            String::from_utf8_lossy(&verified.stdout)
        );
    }
    let other_host = verify(
        &["-verify_hostname", "example.com"],
        &certificates.server_cert(),
    );
    assert!(
        !other_host.status.success(),
        "the certificate names only localhost"
    );
    let client = verify(&["-purpose", "sslclient"], &certificates.client_cert());
    assert!(
        client.status.success(),
        "the client certificate chains to the CA"
    );
}
