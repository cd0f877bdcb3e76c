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

/// The tables a write while held appends to in the checks: a log of entries in order, and a
/// count of them per name, the SCRAM user's to write.
fn log_tables(server: &PgServer) {
    server
        .psql(&format!(
            "CREATE TABLE test_log (id bigserial PRIMARY KEY, name text NOT NULL, entry text NOT \
             NULL); CREATE TABLE test_counts (name text PRIMARY KEY, count bigint NOT NULL CHECK \
             (count < 1000000)); GRANT ALL ON test_log, test_counts, test_log_id_seq TO {}",
            PgServer::SCRAM_USER
        ))
        .expect("made");
}

/// Appends `entry` to the log of `name` and counts it, in one statement of two writes; returns
/// the count.
fn append_sql(name: &str, entry: &str) -> redis_lease::Write {
    redis_lease::Write::Sql {
        statement: "WITH logged AS (INSERT INTO test_log (name, entry) VALUES ($1, $2)) INSERT \
                    INTO test_counts AS c VALUES ($1, 1) ON CONFLICT (name) DO UPDATE SET count \
                    = c.count + 1 RETURNING count"
            .into(),
        params: vec![Some(name.into()), Some(entry.into())],
    }
}

fn sql_count(written: &redis_lease::Written) -> Option<u64> {
    match written {
        redis_lease::Written::Sql { rows, .. } => rows.first()?.first()?.as_ref()?.parse().ok(),
        _ => None,
    }
}

/// The log of `name` and its count, as `server` holds them.
fn read_log(server: &PgServer, name: &str) -> (Vec<String>, u64) {
    let entries = server
        .psql(&format!(
            "SELECT entry FROM test_log WHERE name = '{name}' ORDER BY id"
        ))
        .expect("read");
    let count = server
        .psql(&format!(
            "SELECT coalesce((SELECT count FROM test_counts WHERE name = '{name}'), 0)"
        ))
        .expect("read");
    (
        entries.lines().map(str::to_owned).collect(),
        count.trim().parse().expect("a count"),
    )
}

#[test]
fn writes_are_made_only_while_the_hold_holds_on_postgres() {
    use common::held_write::*;
    let server = server();
    log_tables(&server);
    let url = server.scram_url();
    let clients = |lease| client_with(&url, lease);
    let read = |name: &str| read_log(&server, name);
    let log = Log {
        append: &append_sql,
        read: &read,
        count_of: sql_count,
    };
    writes_are_made_only_while_the_hold_holds(&clients, &log, "stock");
    writes_while_held_follow_the_holds_in_token_order(&clients, &log, "ordered");

    // The write's own failure writes nothing: the statement and the check are one transaction.
    let guard = client(&url)
        .lock("stock")
        .expect("valid")
        .lock()
        .expect("free");
    let () = server
        .psql("UPDATE test_counts SET count = 999999 WHERE name = 'stock'")
        .map(drop)
        .expect("set");
    let refused = guard.if_held(&append_sql("stock", "over"));
    assert!(
        matches!(&refused, Err(Error::Refused { .. }) if refused.as_ref().err().and_then(Error::code) == Some("23514")),
        "{refused:?}"
    );
    assert_eq!(read_log(&server, "stock").0, ["a1", "b1"], "nothing of it");
    // A write of another store's kind is refused before anything is sent.
    let lua = redis_lease::Write::Lua {
        script: "return 1".into(),
        keys: vec![],
        args: vec![],
    };
    let refused = guard.if_held(&lua);
    assert!(
        matches!(&refused, Err(Error::InvalidArgument(why)) if why.contains("SQL")),
        "{refused:?}"
    );
}

#[test]
fn writes_while_held_work_through_pgbouncer_in_transaction_mode() {
    use common::held_write::*;
    let server = server();
    log_tables(&server);
    let bouncer = PgBouncer::start(&server);
    let clients = |lease| pooled(&bouncer, &server, lease);
    let read = |name: &str| read_log(&server, name);
    let log = Log {
        append: &append_sql,
        read: &read,
        count_of: sql_count,
    };
    writes_are_made_only_while_the_hold_holds(&clients, &log, "stock");
}

#[test]
fn a_hold_lapsed_in_postgres_writes_nothing_though_its_holder_believes_it_holds() {
    let server = server();
    log_tables(&server);
    let url = server.scram_url();
    // The watchdog's clock stands still: the guard never finds its hold lost by itself.
    let clock = redis_lease::hashwheel::ManualClock::new();
    let timer = redis_lease::hashwheel::Timer::builder()
        .clock(clock.clone())
        .build()
        .expect("valid timer settings");
    let stopped = Client::postgres(&url)
        .timer(timer)
        .build()
        .expect("valid settings");
    let lock = stopped.lock("sale").expect("valid");
    let guard = lock
        .with_lease(Duration::from_millis(200))
        .lock()
        .expect("free");
    common::wait_until("the lease lapsed in the store", || {
        !lock.is_locked().expect("reachable")
    });
    assert!(!guard.is_lost(), "its holder believes it holds");
    let outcome = guard.if_held(&append_sql("sale", "late"));
    assert!(
        matches!(outcome, Err(Error::NotOwner { .. })),
        "{outcome:?}"
    );
    assert_eq!(read_log(&server, "sale"), (vec![], 0));
}

/// A client of `url` with generous timeouts, for checks that open many clients at once (each
/// authenticates by SCRAM, which takes a debug build a while on a loaded machine).
fn patient(url: &str) -> Client {
    Client::postgres(url)
        .connect_timeout(Duration::from_secs(10))
        .command_timeout(Duration::from_secs(10))
        .build()
        .expect("valid settings")
}

#[test]
fn a_latch_works_on_postgres() {
    use common::latch::*;
    let server = server();
    let url = server.scram_url();
    let clients = || patient(&url);
    count_downs_from_many_clients_open_the_latch_once(&clients, "batch");
    a_latch_is_set_only_from_zero_and_its_waiters_wait_for_their_round(&clients, "rounds");
    a_latch_left_behind_lapses_and_its_waiter_is_told(&clients, "left", Duration::from_secs(2));
}

#[test]
fn a_latch_works_through_pgbouncer_in_transaction_mode() {
    use common::latch::*;
    let server = server();
    let bouncer = PgBouncer::start(&server);
    let clients = || {
        Client::postgres(bouncer.scram_url())
            .postgres_listen_url(server.scram_url())
            .connect_timeout(Duration::from_secs(10))
            .command_timeout(Duration::from_secs(10))
            .build()
            .expect("valid settings")
    };
    count_downs_from_many_clients_open_the_latch_once(&clients, "batch");
}
