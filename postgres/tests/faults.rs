//! Every call ends by its deadline whatever the server does: frozen (SIGSTOP), dripping its
//! replies, restarted, or ending the session; a call that fails or overruns leaves the
//! connection closed. And a cancel request stops a running statement.

mod common;

use common::{connect, soon};
use postgres_blocking::{Config, Connection, Error};
use std::thread;
use std::time::{Duration, Instant};
use testkit::{wait_until, Drip, PgServer, Shutdown};

/// How far past its deadline a call may end here: generous, for a loaded machine.
const SLACK: Duration = Duration::from_secs(2);

#[test]
fn against_a_frozen_server_connect_query_and_wait_end_by_their_deadlines() {
    let pg = PgServer::start();
    let mut conn = connect(&pg.scram_url());
    let mut listener = connect(&pg.scram_url());
    listener
        .batch_execute("LISTEN holds", soon())
        .expect("listening");
    pg.pause();

    let started = Instant::now();
    let error = conn
        .query("SELECT 1", &[], started + Duration::from_millis(500))
        .expect_err("a frozen server");
    assert!(error.is_timeout(), "{error:?}");
    assert!(started.elapsed() < Duration::from_millis(500) + SLACK);
    assert!(!conn.is_usable());
    let closed = conn.query("SELECT 1", &[], soon()).expect_err("closed");
    assert!(matches!(closed, Error::Closed), "{closed:?}");

    let started = Instant::now();
    let waited = listener
        .wait_notification(started + Duration::from_millis(500))
        .expect("a wait that ends by its deadline is no failure");
    assert!(waited.is_none());
    assert!(started.elapsed() < Duration::from_millis(500) + SLACK);
    let error = listener
        .ping(Instant::now() + Duration::from_millis(300))
        .expect_err("a frozen server");
    assert!(error.is_timeout() && !listener.is_usable(), "{error:?}");

    let config: Config = pg.scram_url().parse().expect("valid");
    let started = Instant::now();
    let error = Connection::connect(&config, started + Duration::from_millis(500))
        .expect_err("a frozen server");
    assert!(error.is_timeout(), "{error:?}");
    assert!(started.elapsed() < Duration::from_millis(500) + SLACK);

    pg.resume();
    let mut again = connect(&pg.scram_url());
    again.ping(soon()).expect("the server is back");
}

#[test]
fn a_server_that_drips_its_replies_cannot_stretch_a_call() {
    let pg = PgServer::start();
    let drip = Drip::start(pg.port(), Duration::from_millis(20));
    let url = format!(
        "postgres://{}:{}@127.0.0.1:{}/postgres?sslmode=disable",
        PgServer::SCRAM_USER,
        PgServer::SCRAM_PASSWORD,
        drip.port()
    );
    let started = Instant::now();
    let error = Connection::connect(
        &url.parse().expect("valid"),
        started + Duration::from_millis(700),
    )
    .expect_err("too slow");
    assert!(error.is_timeout(), "{error:?}");
    assert!(started.elapsed() < Duration::from_millis(700) + SLACK);
}

#[test]
fn a_restarted_server_fails_the_next_call_as_a_lost_connection() {
    let mut pg = PgServer::start();
    for how in [Shutdown::Fast, Shutdown::Immediate] {
        let mut conn = connect(&pg.scram_url());
        pg.restart(how);
        let error = conn
            .query("SELECT 1", &[], soon())
            .expect_err("the session is gone");
        assert!(
            error.is_connection_lost() && error.is_retryable(),
            "{how:?}: {error:?}"
        );
        assert!(!conn.is_usable(), "{how:?}");
        connect(&pg.scram_url())
            .ping(soon())
            .expect("a new session");
    }
}

#[test]
fn a_session_ended_by_the_server_fails_a_wait_at_once() {
    let pg = PgServer::start();
    let mut listener = connect(&pg.scram_url());
    listener
        .batch_execute("LISTEN holds", soon())
        .expect("listening");
    let pid = listener.backend_pid().expect("a pid");
    let mut admin = connect(&pg.url());
    admin
        .query(
            "SELECT pg_terminate_backend($1::int4)",
            &[Some(&pid.to_string())],
            soon(),
        )
        .expect("terminated");
    let started = Instant::now();
    let error = listener
        .wait_notification(started + Duration::from_secs(10))
        .expect_err("the session ended");
    assert_eq!(error.code(), Some("57P01"), "{error:?}");
    assert!(error.is_connection_lost() && !listener.is_usable());
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_cancel_request_ends_a_running_statement() {
    let pg = PgServer::start();
    let mut conn = connect(&pg.scram_url());
    let token = conn.cancel_token().expect("a key");
    let pid = conn.backend_pid().expect("a pid");
    let sleeper = thread::spawn(move || {
        let started = Instant::now();
        let result = conn.query(
            "SELECT pg_sleep(60)",
            &[],
            started + Duration::from_secs(30),
        );
        (result.map(|_| ()), started.elapsed(), conn)
    });
    let running = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE pid = {pid} AND query LIKE 'SELECT pg_sleep%' \
         AND state = 'active'"
    );
    wait_until("the statement runs", Duration::from_secs(10), || {
        pg.psql(&running).is_ok_and(|count| count.trim() == "1")
    });
    token.cancel(soon()).expect("the request is taken");
    let (result, took, mut conn) = sleeper.join().expect("the sleeper");
    let error = result.expect_err("cancelled");
    assert_eq!(error.code(), Some("57014"), "{error:?}");
    assert!(took < Duration::from_secs(20), "{took:?}");
    assert!(conn.is_usable());
    conn.ping(soon()).expect("the session goes on");
}

#[test]
fn a_silent_network_and_a_cut_one_each_end_a_call_and_close_the_connection() {
    let pg = PgServer::start();
    let proxy = testkit::Proxy::start(([127, 0, 0, 1], pg.port()).into());
    let url = format!(
        "postgres://{}:{}@127.0.0.1:{}/postgres",
        PgServer::SCRAM_USER,
        PgServer::SCRAM_PASSWORD,
        proxy.port()
    );
    let mut conn = connect(&url);
    proxy.freeze();
    let started = Instant::now();
    let error = conn
        .query("SELECT 1", &[], started + Duration::from_millis(500))
        .expect_err("nothing passes");
    assert!(error.is_timeout(), "{error:?}");
    assert!(started.elapsed() < Duration::from_millis(500) + SLACK);
    proxy.heal();
    // The late answer is never read as the answer to a later call.
    assert!(matches!(
        conn.query("SELECT 2", &[], soon()),
        Err(Error::Closed)
    ));

    let mut conn = connect(&url);
    proxy.cut();
    let error = conn.query("SELECT 1", &[], soon()).expect_err("cut");
    assert!(
        matches!(error, Error::Io { .. }) && error.is_connection_lost() && error.is_retryable(),
        "{error:?}"
    );
    proxy.heal();
    connect(&url).ping(soon()).expect("a new connection");
}
