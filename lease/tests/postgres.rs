//! The lock on a real PostgreSQL (Debian's 15, started by the testkit), directly and through
//! PgBouncer in transaction mode: every public method, every primitive, the election, and the
//! schema's first use.

mod common;

use common::election::an_election_works;
use common::methods::{every_public_method, Offers};
use common::postgres::{client_with, server};
use common::primitives::*;
use redis_lease::{Client, Error};
use std::time::Duration;
use testkit::{PgBouncer, PgServer};

fn client(url: &str) -> Client {
    client_with(url, Duration::from_millis(600))
}

/// A client of `bouncer`, listening on `server` directly (a pooler in transaction mode cannot
/// carry `LISTEN`).
fn pooled(bouncer: &PgBouncer, server: &PgServer, lease: Duration) -> Client {
    Client::postgres(bouncer.scram_url())
        .postgres_listen_url(server.scram_url())
        .default_lease(lease)
        .connect_timeout(Duration::from_secs(2))
        .command_timeout(Duration::from_secs(2))
        .build()
        .expect("valid settings")
}

fn offers() -> Offers {
    Offers::redis(true)
}

#[test]
fn every_public_method_works_on_postgres() {
    let server = server();
    every_public_method(&client(&server.scram_url()), offers());
}

#[test]
fn every_public_method_works_through_pgbouncer_in_transaction_mode() {
    let server = server();
    let bouncer = PgBouncer::start(&server);
    every_public_method(
        &pooled(&bouncer, &server, Duration::from_millis(600)),
        offers(),
    );
}

#[test]
fn primitives_work_on_postgres() {
    let server = server();
    let url = server.scram_url();
    every_primitive(&|lease| client_with(&url, lease));
}

#[test]
fn primitives_work_through_pgbouncer_in_transaction_mode() {
    let server = server();
    let bouncer = PgBouncer::start(&server);
    let clients = |lease| pooled(&bouncer, &server, lease);
    semaphore_bounds_its_holders(&clients, "s-bounds");
    read_write_lock_does_not_starve_writers(&clients, "rw-starve");
    fair_lock_grants_in_order(&clients, "fair-order");
    primitives_refuse_each_others_keys(&clients, "mixed");
}

#[test]
fn an_election_works_on_postgres() {
    let server = server();
    let url = server.scram_url();
    an_election_works(&client(&url), &client(&url), "leaders/scheduler");
}

#[test]
fn an_election_works_through_pgbouncer_in_transaction_mode() {
    let server = server();
    let bouncer = PgBouncer::start(&server);
    let lease = Duration::from_millis(600);
    an_election_works(
        &pooled(&bouncer, &server, lease),
        &pooled(&bouncer, &server, lease),
        "leaders/scheduler",
    );
}

#[test]
fn settings_postgres_cannot_honour_are_refused_and_the_password_never_shown() {
    let server = server();
    for refused in [
        Client::postgres(server.scram_url()).pipelining(true),
        Client::postgres(server.scram_url()).max_connections(4),
        Client::postgres(server.scram_url()).quorum(2),
        Client::postgres(server.scram_url()).postgres_schema("Not-Plain"),
    ] {
        assert!(
            matches!(refused.build(), Err(Error::InvalidArgument(_))),
            "refused"
        );
    }
    let wrong = Client::postgres(server.url_for(PgServer::SCRAM_USER, "wrong-Secret-9"))
        .command_timeout(Duration::from_secs(2))
        .build()
        .expect("valid settings");
    let error = wrong
        .lock("x")
        .expect("valid")
        .try_lock()
        .expect_err("refused");
    assert!(matches!(error, Error::Refused { .. }), "{error:?}");
    assert_eq!(error.code(), Some("28P01"));
    let shown = format!("{error} {error:?} {:?}", wrong);
    assert!(!shown.contains("wrong-Secret-9"), "{shown}");
}
