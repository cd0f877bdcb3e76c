//! An acquisition whose answer never came (the server frozen while it was on its way, the call
//! given up by its deadline) runs when the server wakes, and takes the lock for nobody. It must
//! not keep it: the owner's next call on the lock undoes it first, and an owner that makes none
//! undoes it with its next round of renewals, well before the lease it asked for would lapse.

mod common;

use common::postgres::{client_with, server};
use redis_lease::{Client, Error};
use std::time::{Duration, Instant};
use testkit::PgServer;

fn client(server: &PgServer, lease: Duration) -> Client {
    client_with(&server.scram_url(), lease)
}

/// A client that keeps one idle connection: the undoing of an attempt that got no answer, sent
/// on a new connection, cannot reach a frozen server before the attempt runs.
fn owner(server: &PgServer, lease: Duration) -> Client {
    Client::postgres(server.scram_url())
        .default_lease(lease)
        .pool_size(1)
        .connect_timeout(Duration::from_secs(1))
        .command_timeout(Duration::from_secs(1))
        .build()
        .expect("valid settings")
}

/// The holds of `{jobs}` in the store's table.
fn holds(server: &PgServer) -> usize {
    server
        .psql("SELECT count(*) FROM lease.holds WHERE key = '{jobs}'")
        .expect("an answer")
        .trim()
        .parse()
        .expect("a count")
}

/// Asks `owner` for `{jobs}` while the server is frozen, and waits until the attempt, given up
/// by its caller, has run after all.
fn an_attempt_that_lands_unanswered(server: &PgServer, owner: &Client, rival: &Client) {
    // The schema is made (by the rival, whose calls may take longer), and the owner has a
    // connection open.
    let made = rival.lock("made").expect("valid");
    made.try_lock()
        .expect("an answer")
        .expect("free")
        .unlock()
        .expect("released");
    let warm = owner.lock("warm").expect("valid");
    warm.try_lock()
        .expect("an answer")
        .expect("free")
        .unlock()
        .expect("released");
    server.pause();
    let asked = Instant::now();
    let attempt = owner.lock("jobs").expect("valid").try_lock();
    let waited = asked.elapsed();
    server.resume();
    assert!(
        matches!(attempt, Err(Error::Unavailable { .. })),
        "{attempt:?}"
    );
    assert!(waited < Duration::from_secs(3), "{waited:?}");
    testkit::wait_until(
        "the attempt to run when the server woke",
        Duration::from_secs(10),
        || holds(server) == 1,
    );
}

#[test]
fn an_acquisition_that_ran_after_its_caller_gave_up_is_undone_before_the_owners_next_call() {
    let server = server();
    // A lease of a minute: a hold left behind would keep the lock for that long.
    let owner = owner(&server, Duration::from_secs(60));
    let rival = client(&server, Duration::from_secs(60));
    an_attempt_that_lands_unanswered(&server, &owner, &rival);
    let rivals_lock = rival.lock("jobs").expect("valid");
    assert!(
        rivals_lock.try_lock().expect("an answer").is_none(),
        "the attempt held the lock when it ran"
    );

    // The owner's next attempt undoes the one that ran unanswered first: it takes the lock
    // afresh, not by re-entering a hold it never knew of.
    let guard = owner
        .lock("jobs")
        .expect("valid")
        .try_lock()
        .expect("an answer")
        .expect("held again");
    assert_eq!(guard.holds_at_acquire(), 1);
    guard.unlock().expect("released");
    assert_eq!(holds(&server), 0, "a hold left behind");
    let taken = rivals_lock.try_lock().expect("an answer").expect("free");
    taken.unlock().expect("released");
}

#[test]
fn an_acquisition_that_ran_after_its_caller_gave_up_is_undone_by_the_next_renewals() {
    let server = server();
    let lease = Duration::from_secs(6);
    let owner = owner(&server, lease);
    let rival = client(&server, lease);
    // Renewed every third of a lease: each round also undoes what is left to undo.
    let kept = owner
        .lock("keeper")
        .expect("valid")
        .try_lock()
        .expect("an answer")
        .expect("free");
    an_attempt_that_lands_unanswered(&server, &owner, &rival);
    let landed = Instant::now();

    // The owner makes no other call on the lock; the rival takes it once the renewals have
    // undone the attempt, before the attempt's lease could have lapsed.
    let taken = rival
        .lock("jobs")
        .expect("valid")
        .try_lock_for(lease * 2 / 3)
        .expect("an answer")
        .expect("undone before its lease lapsed");
    assert!(landed.elapsed() < lease, "{:?}", landed.elapsed());
    taken.unlock().expect("released");
    assert!(!kept.is_lost(), "{:?}", kept.lost());
    kept.unlock().expect("released");
}
