//! Connecting: each authentication method, over TCP and the Unix socket, the refusals, and peers
//! that are not PostgreSQL, each failing by its deadline.

mod common;

use common::{connect, soon};
use postgres_blocking::{Config, Connection, Error, TransactionStatus};
use std::time::{Duration, Instant};
use testkit::{Garbage, PgServer, RedisServer, Silent};

fn user_of(conn: &mut Connection) -> String {
    let row = conn
        .query_one("SELECT current_user", &[], soon())
        .expect("a row");
    row.get::<String>(0).expect("a name")
}

#[test]
fn scram_md5_and_the_unix_socket_each_start_a_session() {
    let pg = PgServer::start();
    let mut scram = connect(&pg.scram_url());
    assert_eq!(user_of(&mut scram), PgServer::SCRAM_USER);
    assert_eq!(scram.transaction_status(), TransactionStatus::Idle);
    assert!(scram.backend_pid().is_some() && scram.cancel_token().is_some());
    assert_eq!(
        scram.parameter("server_version").map(|v| &v[..2]),
        Some("15")
    );
    let mut md5 = connect(&pg.md5_url());
    assert_eq!(user_of(&mut md5), PgServer::MD5_USER);
    let mut unix = connect(&pg.unix_url_for(PgServer::SCRAM_USER, PgServer::SCRAM_PASSWORD));
    assert_eq!(user_of(&mut unix), PgServer::SCRAM_USER);
    let mut superuser = connect(&format!(
        "{}?sslmode=disable&application_name=probe",
        pg.url()
    ));
    let name = superuser
        .query_one("SELECT current_setting('application_name')", &[], soon())
        .expect("a row");
    assert_eq!(name.get::<&str>(0).expect("text"), "probe");
}

#[test]
fn a_wrong_password_is_an_authentication_error_that_never_shows_it() {
    let pg = PgServer::start();
    for (user, method) in [(PgServer::SCRAM_USER, "scram"), (PgServer::MD5_USER, "md5")] {
        let url = pg.url_for(user, "Wrong-Pass-9");
        let error = Connection::connect(&url.parse().expect("valid"), soon())
            .expect_err("a wrong password");
        assert!(error.is_auth(), "{method}: {error:?}");
        assert_eq!(error.code(), Some("28P01"), "{method}: {error:?}");
        for shown in [error.to_string(), format!("{error:?}")] {
            assert!(common::hides(&shown, "Wrong-Pass-9"), "{shown}");
        }
    }
    let config = Config::from_url(&pg.scram_url()).expect("valid");
    let shown = format!("{config} {config:?}");
    assert!(common::hides(&shown, PgServer::SCRAM_PASSWORD), "{shown}");
}

#[test]
fn a_cleartext_password_goes_only_over_a_unix_socket_or_when_allowed() {
    let pg = PgServer::start();
    let tcp = pg.url_for(PgServer::CLEARTEXT_USER, PgServer::CLEARTEXT_PASSWORD);
    let config = Config::from_url(&tcp).expect("valid");
    let refused = Connection::connect(&config, soon()).expect_err("cleartext over TCP");
    assert!(refused.is_auth() && refused.code().is_none(), "{refused:?}");
    assert!(refused.to_string().contains("cleartext"), "{refused}");
    let mut allowed = Connection::connect(&config.allow_cleartext_password(true), soon())
        .expect("allowed explicitly");
    assert_eq!(user_of(&mut allowed), PgServer::CLEARTEXT_USER);
    let unix = pg.unix_url_for(PgServer::CLEARTEXT_USER, PgServer::CLEARTEXT_PASSWORD);
    assert_eq!(user_of(&mut connect(&unix)), PgServer::CLEARTEXT_USER);
}

#[test]
fn the_servers_refusal_of_a_session_keeps_its_sqlstate() {
    let pg = PgServer::start();
    let config = Config::from_url(&pg.url())
        .expect("valid")
        .dbname("no_such_db");
    let error = Connection::connect(&config, soon()).expect_err("no such database");
    assert_eq!(error.code(), Some("3D000"), "{error:?}");
    assert!(error.db_error().is_some_and(|db| db.is_fatal()));
    let nobody = Config::from_url(&pg.url()).expect("valid").user("nobody");
    let error = Connection::connect(&nobody, soon()).expect_err("no password");
    assert!(error.is_auth() && error.code().is_none(), "{error:?}");
    let error = Connection::connect(&nobody.password("x"), soon()).expect_err("no such role");
    assert_eq!(error.code(), Some("28P01"), "{error:?}");
    let no_user = Config::new().port(pg.port()).host("127.0.0.1");
    let error = Connection::connect(&no_user, soon()).expect_err("no user");
    assert!(matches!(error, Error::Config(_)), "{error:?}");
}

#[test]
fn a_peer_that_never_answers_fails_by_the_deadline() {
    let silent = Silent::start();
    let url = format!(
        "postgres://u:p@127.0.0.1:{}/db?sslmode=disable",
        silent.port()
    );
    for url in [url.clone(), url.replace("disable", "prefer")] {
        let started = Instant::now();
        let deadline = started + Duration::from_millis(500);
        let error =
            Connection::connect(&url.parse().expect("valid"), deadline).expect_err("no answer");
        assert!(error.is_timeout(), "{url}: {error:?}");
        let took = started.elapsed();
        assert!(took < Duration::from_secs(3), "{url}: {took:?}");
    }
}

#[test]
fn a_peer_that_speaks_another_protocol_is_a_protocol_error_at_once() {
    for reply in [
        &b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"[..],
        &b"-ERR unknown command\r\n"[..],
        // A PostgreSQL-like message of a type the protocol does not have.
        &b"Q\0\0\0\x04"[..],
    ] {
        let peer = Garbage::start(reply);
        for mode in ["disable", "prefer"] {
            let url = format!("postgres://u:p@127.0.0.1:{}/db?sslmode={mode}", peer.port());
            let started = Instant::now();
            let error = Connection::connect(
                &url.parse().expect("valid"),
                started + Duration::from_secs(5),
            )
            .expect_err("not PostgreSQL");
            assert!(
                matches!(error, Error::Protocol(_)),
                "{mode} {reply:?}: {error:?}"
            );
            assert!(error.is_connection_lost() && !error.is_retryable());
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "{mode}: at once"
            );
        }
    }
}

#[test]
fn a_peer_that_reads_but_never_answers_a_startup_fails_by_the_deadline() {
    // Redis waits for a line's end that a startup message never sends.
    let redis = RedisServer::start();
    let url = format!(
        "postgres://u:p@127.0.0.1:{}/db?sslmode=disable",
        redis.port()
    );
    let started = Instant::now();
    let error = Connection::connect(
        &url.parse().expect("valid"),
        started + Duration::from_millis(500),
    )
    .expect_err("Redis is not PostgreSQL");
    assert!(
        error.is_timeout() || matches!(error, Error::Protocol(_)),
        "{error:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
}
