//! The PostgreSQL store's timelines against a real server: a holder cut off past its lease, the
//! server frozen and restarted, an attempt whose answer is lost, the listening connection
//! killed, a fair waiter that vanishes; and the schema's first use by a role that may not make it
//! or over tables of another shape.

mod common;

use common::postgres::{client_with, server};
use common::primitives::fair_lock_passes_over_vanished_waiters;
use redis_lease::{Client, Error, LostReason};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};
use testkit::{wait_until, PgServer, Proxy, Shutdown};

/// A proxy in front of `server`.
fn proxy(server: &PgServer) -> Proxy {
    Proxy::start(([127, 0, 0, 1], server.port()).into())
}

/// The URL of `server` through `proxy`.
fn through(proxy: &Proxy) -> String {
    format!(
        "postgres://{}:{}@{}/postgres",
        PgServer::SCRAM_USER,
        PgServer::SCRAM_PASSWORD,
        proxy.addr()
    )
}

#[test]
fn a_holder_cut_off_is_told_before_its_lease_lapses_and_only_then_does_another_hold() {
    let server = server();
    let proxy = proxy(&server);
    let lease = Duration::from_millis(900);
    let holder = client_with(&through(&proxy), lease);
    let rival = client_with(&server.scram_url(), lease);
    let guard = holder.lock("cut").expect("valid").lock().expect("free");
    let first = guard.fencing_token().expect("a token");
    let told = guard.lost_signal();
    let rival_lock = rival.lock("cut").expect("valid");
    assert!(rival_lock.try_lock().expect("reachable").is_none());
    proxy.freeze();
    let frozen_at = Instant::now();
    let lost = told.recv_timeout(lease * 3).expect("told of the loss");
    let told_at = Instant::now();
    assert_eq!(lost.reason, LostReason::Unconfirmed);
    let taken = rival_lock
        .try_lock_for(lease * 4)
        .expect("reachable")
        .expect("free once the lease lapsed by the server's clock");
    let taken_at = Instant::now();
    assert!(
        told_at <= taken_at,
        "told {:?} after the cut, the rival held {:?} after it",
        told_at - frozen_at,
        taken_at - frozen_at
    );
    assert!(taken.fencing_token().expect("a token") > first);
    // The late release of the cut-off holder finds another hold: it changes nothing.
    proxy.heal();
    assert!(matches!(guard.unlock(), Err(Error::NotOwner { .. })));
    assert!(rival_lock.is_locked().expect("reachable"));
    taken.unlock().expect("held");
}

#[test]
fn every_call_ends_by_its_deadline_while_the_server_is_frozen_and_holders_are_told() {
    let server = server();
    let lease = Duration::from_millis(900);
    let client = client_with(&server.scram_url(), lease);
    let lock = client.lock("frozen").expect("valid");
    let guard = lock.lock().expect("free");
    let told = guard.lost_signal();
    server.pause();
    let started = Instant::now();
    let other = client.lock("other").expect("valid");
    assert!(matches!(other.try_lock(), Err(Error::Unavailable { .. })));
    assert!(matches!(lock.inspect(), Err(Error::Unavailable { .. })));
    assert!(matches!(client.ping(), Err(Error::Unavailable { .. })));
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    told.recv_timeout(lease * 3).expect("the holder is told");
    server.resume();
    drop(guard);
    wait_until("the server serves again", Duration::from_secs(10), || {
        client.ping().is_ok()
    });
}

#[test]
fn an_attempt_the_server_runs_after_it_timed_out_is_undone() {
    let server = server();
    let lease = Duration::from_secs(30);
    let late = client_with(&server.scram_url(), lease);
    let rival = client_with(&server.scram_url(), lease);
    let lock = late.lock("late").expect("valid");
    // A first call makes the schema and opens a connection.
    lock.try_lock()
        .expect("reachable")
        .expect("free")
        .unlock()
        .expect("held");
    server.pause();
    assert!(matches!(lock.try_lock(), Err(Error::Unavailable { .. })));
    server.resume();
    // The attempt may now run; its undoing follows within about a second: the lock is free long
    // before the attempt's 30 s lease could lapse.
    let taken = rival
        .lock("late")
        .expect("valid")
        .try_lock_for(Duration::from_secs(8))
        .expect("reachable")
        .expect("free: the late attempt was undone");
    taken.unlock().expect("held");
}

#[test]
fn holds_and_tokens_survive_a_restart_and_a_waiter_is_woken_after_it() {
    for how in [Shutdown::Fast, Shutdown::Immediate] {
        let mut server = server();
        let lease = Duration::from_secs(5);
        let holder = client_with(&server.scram_url(), lease);
        let waiter = client_with(&server.scram_url(), lease);
        let guard = holder.lock("restart").expect("valid").lock().expect("free");
        let first = guard.fencing_token().expect("a token");
        let (sent, got) = mpsc::channel();
        let lock = waiter.lock("restart").expect("valid");
        thread::spawn(move || {
            let _ = sent.send(
                lock.try_lock_for(Duration::from_secs(20))
                    .map(|guard| guard.map(|guard| guard.fencing_token())),
            );
        });
        thread::sleep(Duration::from_millis(300));
        server.restart(how);
        wait_until("the server serves again", Duration::from_secs(15), || {
            holder.ping().is_ok()
        });
        // The hold is the server's still: the waiter has not taken it.
        assert!(got.try_recv().is_err(), "{how:?}: held twice");
        assert!(!guard.is_lost(), "{how:?}: {:?}", guard.lost());
        guard.unlock().expect("held across the restart");
        let next = got
            .recv_timeout(Duration::from_secs(15))
            .expect("the waiter ends")
            .expect("reachable")
            .expect("woken once the lock is free");
        assert!(next.expect("a token") > first, "{how:?}");
    }
}

#[test]
fn waiters_are_woken_when_the_listening_connection_is_killed() {
    let server = server();
    let lease = Duration::from_secs(5);
    let holder = client_with(&server.scram_url(), lease);
    let waiter = client_with(&server.scram_url(), lease);
    let guard = holder
        .lock("listener")
        .expect("valid")
        .lock()
        .expect("free");
    let (sent, got) = mpsc::channel();
    let lock = waiter.lock("listener").expect("valid");
    thread::spawn(move || {
        let _ = sent.send(
            lock.try_lock_for(Duration::from_secs(20))
                .map(|g| g.is_some()),
        );
    });
    thread::sleep(Duration::from_millis(300));
    server
        .psql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE query LIKE 'LISTEN%' AND pid <> pg_backend_pid()",
        )
        .expect("terminated");
    thread::sleep(Duration::from_millis(500));
    let released = Instant::now();
    guard.unlock().expect("held");
    assert!(got
        .recv_timeout(Duration::from_secs(10))
        .expect("the waiter ends")
        .expect("reachable"));
    assert!(
        released.elapsed() < Duration::from_secs(3),
        "woken {:?} after the release",
        released.elapsed()
    );
}

#[test]
fn a_fair_locks_vanished_waiter_holds_the_line_up_for_a_bounded_time() {
    let server = server();
    let proxy = proxy(&server);
    let url = server.scram_url();
    let frozen = client_with(&through(&proxy), Duration::from_millis(600));
    let clients = |lease| client_with(&url, lease);
    fair_lock_passes_over_vanished_waiters(&clients, &frozen, &|| proxy.freeze(), "fair-frozen");
}

#[test]
fn a_role_that_may_not_make_the_schema_is_told_which_right_it_lacks() {
    let server = PgServer::start();
    let client = client_with(&server.scram_url(), Duration::from_secs(5));
    let error = client
        .lock("x")
        .expect("valid")
        .try_lock()
        .expect_err("no right to make the schema");
    assert!(matches!(error, Error::Refused { .. }), "{error:?}");
    assert_eq!(error.code(), Some("42501"));
    assert!(error.to_string().contains("schema lease"), "{error}");
    // Made by an administrator, with the rights to use it granted, the same role locks.
    let admin = client_with(&server.url(), Duration::from_secs(5));
    admin.ping().expect("the superuser makes the schema");
    server
        .psql(&format!(
            "GRANT USAGE ON SCHEMA lease TO {user}; \
             GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA lease TO {user}; \
             GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA lease TO {user}",
            user = PgServer::SCRAM_USER
        ))
        .expect("granted");
    let client = client_with(&server.scram_url(), Duration::from_secs(5));
    client
        .lock("x")
        .expect("valid")
        .try_lock()
        .expect("reachable")
        .expect("free")
        .unlock()
        .expect("held");
}

#[test]
fn tables_of_another_shape_are_refused_naming_what_is_wrong() {
    let server = server();
    server
        .psql(&format!(
            "CREATE SCHEMA odd AUTHORIZATION {user}; CREATE TABLE odd.holds (key text, hold \
             text, owner text, side text, take integer, token text, expires timestamptz, \
             acquisitions text[], proclaimed text); ALTER TABLE odd.holds OWNER TO {user}",
            user = PgServer::SCRAM_USER
        ))
        .expect("made");
    let client = Client::postgres(server.scram_url())
        .postgres_schema("odd")
        .command_timeout(Duration::from_secs(2))
        .build()
        .expect("valid settings");
    let error = client
        .lock("x")
        .expect("valid")
        .try_lock()
        .expect_err("refused");
    match &error {
        Error::InvalidArgument(why) => {
            assert!(
                why.contains("odd.holds.token") && why.contains("bigint"),
                "{why}"
            )
        }
        other => panic!("{other:?}"),
    }
    // A schema of its own name is made and used.
    let apart = Client::postgres(server.scram_url())
        .postgres_schema("apart_locks")
        .command_timeout(Duration::from_secs(2))
        .build()
        .expect("valid settings");
    assert!(apart
        .lock("x")
        .expect("valid")
        .try_lock()
        .expect("reachable")
        .is_some());
}

#[test]
fn tls_with_the_builders_ca_and_client_certificate_verifies_the_server() {
    let server = PgServer::start_with(testkit::PgOptions {
        tls: Some(testkit::PgTls {
            certificates: None,
            required: true,
            client_certificates: true,
        }),
        settings: Vec::new(),
    });
    server.grant_schemas();
    let certificates = server.tls_certificates().expect("a TLS server");
    let url = server.scram_url();
    let client = Client::postgres(&url)
        .tls_ca_file(certificates.ca_cert())
        .tls_client_cert(certificates.client_cert(), certificates.client_key())
        .command_timeout(Duration::from_secs(2))
        .build()
        .expect("valid settings");
    let guard = client.lock("tls").expect("valid").lock().expect("free");
    assert!(guard.fencing_token().is_some());
    guard.unlock().expect("held");
    // Without the CA, the server's certificate does not verify: refused, not unavailable.
    let stranger = Client::postgres(format!("{url}?sslmode=verify-full"))
        .command_timeout(Duration::from_secs(2))
        .build()
        .expect("valid settings");
    let error = stranger.ping().expect_err("unverified");
    assert!(matches!(error, Error::Refused { .. }), "{error:?}");
}

#[test]
fn a_database_or_a_role_that_does_not_exist_is_refused_not_unavailable() {
    let server = server();
    let no_database = format!(
        "postgres://{}:{}@127.0.0.1:{}/no_such_db",
        PgServer::SCRAM_USER,
        PgServer::SCRAM_PASSWORD,
        server.port()
    );
    for url in [no_database, server.url_for("no_such_role", "x")] {
        let error = client_with(&url, Duration::from_secs(5))
            .ping()
            .expect_err("refused");
        assert!(matches!(error, Error::Refused { .. }), "{error:?}");
        assert!(!error.is_retryable());
    }
}
