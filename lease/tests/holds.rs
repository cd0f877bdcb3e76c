//! A release, a renewal and a retried release touch only the hold they belong to: a guard whose
//! lease was lost can never free (or extend) a later hold of the same owner, on one server or on
//! RedLock.

mod common;

use common::{client, client_with_lease, wait_until, RedisServer};
use redis::Commands;
use redis_lease::{Client, Error, LostReason};
use std::thread;
use std::time::Duration;

/// The usual retry line: a new hold is taken before the old, expired guard is dropped.
fn a_lost_guards_drop_leaves_the_new_hold(mine: &Client, theirs: &Client) {
    let lock = mine.lock("job").expect("valid").owned_by("worker-1");
    let mut guard = lock
        .with_lease(Duration::from_millis(300))
        .try_lock()
        .expect("reachable")
        .expect("free");
    thread::sleep(Duration::from_millis(400));
    assert!(guard.is_lost());
    guard = lock
        .with_lease(Duration::from_secs(5))
        .try_lock()
        .expect("reachable")
        .expect("free again: the first lease ran out");
    assert_eq!(guard.holds_at_acquire(), 1, "a new hold, not a re-entry");
    // The old guard was dropped by the assignment: its release named the old hold.
    let other = theirs
        .lock("job")
        .expect("valid")
        .with_lease(Duration::from_secs(5))
        .try_lock()
        .expect("reachable");
    assert!(
        other.is_none(),
        "another client took the lock while the new guard (token {:?}) is valid",
        guard.fencing_token()
    );
    assert!(!guard.is_lost());
    assert_eq!(lock.hold_count().expect("reachable"), 1);
    guard.unlock().expect("the new hold is still held");
}

#[test]
fn a_lost_guards_drop_never_releases_a_newer_hold_of_the_same_owner() {
    let server = RedisServer::start();
    a_lost_guards_drop_leaves_the_new_hold(&client(&server), &client(&server));
}

#[test]
fn a_lost_guards_drop_never_releases_a_newer_hold_on_redlock() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let redlock = || {
        Client::redlock(servers.iter().map(RedisServer::url))
            .command_timeout(Duration::from_millis(200))
            .build()
            .expect("valid settings")
    };
    a_lost_guards_drop_leaves_the_new_hold(&redlock(), &redlock());
}

/// A renewed hold taken away (force-unlocked), then taken again by the same owner: the old
/// guard, told it lost, is dropped while the new hold is held and renewed.
#[test]
fn a_renewed_hold_taken_away_and_taken_again_is_not_released_by_the_old_guard() {
    let server = RedisServer::start();
    let lease = Duration::from_millis(300);
    let mine = client_with_lease(&server, lease);
    let lock = mine.lock("renewed").expect("valid").owned_by("job-7");
    let old = lock.lock().expect("free");
    assert!(
        lock.force_unlock().expect("reachable"),
        "an operator clears it"
    );
    wait_until("the old guard hears it lost", || old.lost().is_some());
    assert_eq!(old.lost().map(|lost| lost.reason), Some(LostReason::Taken));
    let new = lock.lock().expect("free again");
    assert_eq!(new.holds_at_acquire(), 1, "the lost hold is not re-entered");
    drop(old);
    thread::sleep(lease * 3);
    assert!(!new.is_lost(), "{:?}", new.lost());
    let theirs = client(&server).lock("renewed").expect("valid");
    assert!(
        theirs.try_lock().expect("reachable").is_none(),
        "still held"
    );
    assert_eq!(
        new.fencing_token(),
        lock.inspect().expect("reachable").hold_token
    );
    new.unlock().expect("held");
}

/// An abandoned hold is released before its owner's next acquisition; that release names the
/// abandoned hold and cannot touch the owner's newer hold, which another thread took meanwhile.
#[test]
fn a_settled_release_touches_only_its_own_hold() {
    let server = RedisServer::start();
    let mine = client(&server);
    let lock = mine.lock("settle").expect("valid").owned_by("job-9");
    let first = lock
        .with_lease(Duration::from_millis(200))
        .try_lock()
        .expect("reachable")
        .expect("free");
    first.abandon();
    thread::sleep(Duration::from_millis(300));
    let second = lock
        .with_lease(Duration::from_secs(5))
        .try_lock()
        .expect("reachable")
        .expect("the abandoned hold ran out");
    // A re-entry of the second hold, by the same owner: the abandoned hold's release (settled
    // before it) must leave the second hold as it is.
    let third = lock
        .with_lease(Duration::from_secs(5))
        .try_lock()
        .expect("reachable")
        .expect("re-entered");
    assert_eq!(third.holds_at_acquire(), 2);
    assert_eq!(third.fencing_token(), second.fencing_token());
    third.unlock().expect("held");
    assert_eq!(lock.hold_count().expect("reachable"), 1);
    second.unlock().expect("held");
    assert!(!lock.is_locked().expect("reachable"));
}

/// The scripts themselves: a release or a renewal naming a hold that no longer holds the lock
/// changes nothing, even when the same owner holds it under a newer hold.
#[test]
fn scripts_naming_an_old_hold_leave_the_owners_new_hold_alone() {
    let server = RedisServer::start();
    let lock = client(&server).lock("named").expect("valid").owned_by("o");
    let guard = lock
        .with_lease(Duration::from_secs(10))
        .try_lock()
        .expect("reachable")
        .expect("free");
    let mut con = server.connection();
    let script = |name: &str| {
        let body = match name {
            "release" => include_str!("../src/stores/redis/scripts/release.lua"),
            "acquire" => include_str!("../src/stores/redis/scripts/acquire.lua"),
            _ => include_str!("../src/stores/redis/scripts/renew.lua"),
        };
        redis::Script::new(
            &[
                include_str!("../src/stores/redis/scripts/access.lua"),
                include_str!("../src/stores/redis/scripts/checks.lua"),
                include_str!("../src/stores/redis/scripts/holds.lua"),
                body,
            ]
            .concat(),
        )
    };
    let released: Vec<i64> = script("release")
        .key("{named}")
        .key("{named}:fence")
        .key("{named}:released")
        .arg("o")
        .arg("an-old-hold")
        .arg("an-old-hold")
        .arg("{named}:freed")
        .arg("")
        .arg("")
        .arg(1)
        .arg("publish")
        .invoke(&mut con)
        .expect("ran");
    assert_eq!(released, vec![-1], "not this hold");
    let released: Vec<i64> =
        redis::Script::new(include_str!("../src/stores/redis/scripts/unlock.lua"))
            .key("{named}")
            .key("{named}:released")
            .arg("o")
            .arg("an-old-hold")
            .arg("an-old-hold")
            .arg("{named}:freed")
            .arg("publish")
            .invoke(&mut con)
            .expect("ran");
    assert_eq!(released, vec![-1], "not this hold, by the common release");
    let renewed: Vec<i64> = script("renew")
        .key("{named}")
        .arg("an-old-hold")
        .arg(999_000)
        .invoke(&mut con)
        .expect("ran");
    assert_eq!(renewed, vec![0]);
    // A re-entry naming the old hold is no re-entry of the new one: the lock is busy.
    let reentered: Vec<i64> = script("acquire")
        .key("{named}")
        .key("{named}:fence")
        .key("{named}:epoch")
        .arg(999_000)
        .arg("o")
        .arg("a-new-acquisition")
        .arg("an-old-hold")
        .arg("")
        .arg("")
        .arg(0)
        .invoke(&mut con)
        .expect("ran");
    assert_eq!(reentered.first(), Some(&0), "busy: {reentered:?}");
    let ttl: i64 = con.pttl("{named}").expect("PTTL");
    assert!(
        ttl <= 10_000,
        "the old hold's renewal extended the new one: {ttl}"
    );
    assert_eq!(lock.hold_count().expect("reachable"), 1);
    guard.unlock().expect("held");
}

#[test]
fn a_release_after_the_lease_ran_out_is_not_owner_and_changes_nothing() {
    let server = RedisServer::start();
    let lock = client(&server).lock("late").expect("valid");
    let guard = lock
        .with_lease(Duration::from_millis(50))
        .try_lock()
        .expect("reachable")
        .expect("free");
    thread::sleep(Duration::from_millis(120));
    let other = client(&server).lock("late").expect("valid");
    let theirs = other.try_lock().expect("reachable").expect("free");
    assert!(matches!(guard.unlock(), Err(Error::NotOwner { .. })));
    assert!(!theirs.is_lost());
    assert!(other.is_locked().expect("reachable"));
    theirs.unlock().expect("held");
}
