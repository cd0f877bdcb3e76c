//! The watchdog's scheduling, driven by a manual clock: renewals and deadlines happen only when a
//! test advances the clock, so nothing here sleeps to see whether something was scheduled. Redis
//! is real; its own TTLs run on real time, and the 30 s leases never lapse there during a test.

mod common;

use common::{manual_client, wait_until, RedisServer};
use redis::Commands;
use redis_lease::{Error, LostReason};
use std::time::Duration;

const LEASE: Duration = Duration::from_secs(30);
/// The drift allowance of a 30 s lease: 1% plus 2 ms.
const DRIFT: Duration = Duration::from_millis(302);
const THIRD: Duration = Duration::from_secs(10);

#[test]
fn renews_every_third_of_the_lease_and_moves_the_deadline() {
    let server = RedisServer::start();
    let (client, clock, _timer) = manual_client(&server, LEASE);
    let start = clock.now();
    let guard = client
        .lock("report")
        .expect("valid name")
        .lock()
        .expect("free");
    assert_eq!(guard.valid_until(), start + LEASE - DRIFT);

    clock.advance(THIRD - Duration::from_millis(1));
    clock.advance(Duration::from_millis(1));
    wait_until("the renewal is confirmed", || {
        client.watchdog_metrics().renewed == 1
    });
    let metrics = client.watchdog_metrics();
    assert_eq!(
        (metrics.renewal_calls, metrics.renewals_sent),
        (1, 1),
        "one renewal, at a third of the lease and not before"
    );
    assert_eq!(guard.valid_until(), start + THIRD + LEASE - DRIFT);
    let ttl: i64 = server.connection().pttl("{report}").expect("PTTL");
    assert!(ttl > 29_000, "redis holds the renewed lease: {ttl} ms left");

    clock.advance(THIRD);
    wait_until("the second renewal", || {
        client.watchdog_metrics().renewed == 2
    });
    assert_eq!(guard.valid_until(), start + THIRD * 2 + LEASE - DRIFT);
    assert!(!guard.is_lost());
    guard.unlock().expect("held");
}

/// A renewal answered late (the server frozen meanwhile, the clock moving on) counts the hold's
/// new deadline from when it was sent, not from when its answer came: the server may have
/// extended the lease at any moment in between.
#[test]
fn a_renewal_answered_late_counts_its_deadline_from_when_it_was_sent() {
    let server = RedisServer::start();
    let (client, clock, _timer) = manual_client(&server, LEASE);
    let start = clock.now();
    let guard = client
        .lock("late-answer")
        .expect("valid name")
        .lock()
        .expect("free");
    server.pause();
    clock.advance(THIRD);
    wait_until("the renewal is on its way", || {
        client.watchdog_metrics().in_flight == 1
    });
    clock.advance(Duration::from_secs(5));
    server.resume();
    wait_until("the renewal is confirmed", || {
        client.watchdog_metrics().renewed == 1
    });
    assert_eq!(guard.valid_until(), start + THIRD + LEASE - DRIFT);
    guard.unlock().expect("held");
}

#[test]
fn a_renewal_never_cuts_short_a_longer_lease_taken_by_a_reentry() {
    let server = RedisServer::start();
    let (client, clock, _timer) = manual_client(&server, LEASE);
    let lock = client.lock("longer").expect("valid name");
    let renewed = lock.lock().expect("free");
    let longer = Duration::from_secs(600);
    let fixed = lock.with_lease(longer).lock().expect("re-entry");
    assert_eq!(fixed.holds_at_acquire(), 2);
    let ttl = |server: &RedisServer| -> i64 { server.connection().pttl("{longer}").expect("PTTL") };
    assert!(
        ttl(&server) > 590_000,
        "the re-entry's lease: {} ms",
        ttl(&server)
    );

    clock.advance(THIRD);
    wait_until("the renewal is confirmed", || {
        client.watchdog_metrics().renewed == 1
    });
    // The fixed guard counts on 600 s; a renewal to 30 s would let the key lapse under it once
    // the renewed guard is gone.
    assert!(
        ttl(&server) > 590_000,
        "the renewal cut the re-entry's lease to {} ms",
        ttl(&server)
    );
    drop(renewed);
    assert!(!fixed.is_lost());
    assert!(ttl(&server) > 590_000);
    fixed.unlock().expect("held");
}

#[test]
fn a_reentrant_hold_is_renewed_once_and_not_after_its_release() {
    let server = RedisServer::start();
    let (client, clock, _timer) = manual_client(&server, LEASE);
    let lock = client.lock("reentrant").expect("valid name");
    let outer = lock.lock().expect("free");
    let inner = lock.lock().expect("re-entry");
    assert_eq!(inner.holds_at_acquire(), 2);
    assert_eq!(client.watchdog_metrics().watched, 1, "one hold, two guards");

    clock.advance(THIRD);
    wait_until("the renewal", || {
        client.watchdog_metrics().renewal_calls == 1
    });
    assert_eq!(client.watchdog_metrics().renewals_sent, 1);

    drop(inner);
    clock.advance(THIRD);
    wait_until("the renewal", || {
        client.watchdog_metrics().renewal_calls == 2
    });
    assert_eq!(client.watchdog_metrics().renewals_sent, 2);

    drop(outer);
    assert_eq!(client.watchdog_metrics().watched, 0);
    // A marker hold renewed at the next third: had the released hold been renewed as well, the
    // call would carry two leases, or there would be two calls.
    let marker = client
        .lock("marker")
        .expect("valid name")
        .lock()
        .expect("free");
    clock.advance(THIRD);
    wait_until("the marker's renewal", || {
        client.watchdog_metrics().renewal_calls == 3
    });
    assert_eq!(client.watchdog_metrics().renewals_sent, 3);
    drop(marker);
}

#[test]
fn an_explicit_lease_is_never_renewed_and_expires_at_its_deadline() {
    let server = RedisServer::start();
    let (client, clock, _timer) = manual_client(&server, LEASE);
    let lease = Duration::from_secs(3);
    let guard = client
        .lock("explicit")
        .expect("valid name")
        .with_lease(lease)
        .lock()
        .expect("free");
    let lost = guard.lost_signal();
    let deadline = guard.valid_until();
    assert_eq!(deadline, clock.now() + lease - Duration::from_millis(32));

    clock.advance(lease - Duration::from_millis(33));
    assert!(lost.try_recv().is_err() && !guard.is_lost());
    clock.advance(Duration::from_millis(1));
    let told = lost.try_recv().expect("told when the deadline passed");
    assert_eq!(told.reason, LostReason::Expired);
    assert_eq!(told.valid_until, deadline);
    assert_eq!(client.watchdog_metrics().renewal_calls, 0);
    assert!(guard.is_lost());
}

#[test]
fn a_paused_redis_is_lost_at_the_deadline_while_the_renewal_hangs() {
    let server = RedisServer::start();
    let (client, clock, _timer) = manual_client(&server, LEASE);
    let guard = client
        .lock("paused")
        .expect("valid name")
        .lock()
        .expect("free");
    let lost = guard.lost_signal();
    let deadline = guard.valid_until();

    server.pause();
    clock.advance(THIRD);
    wait_until("the renewal call is sent", || {
        client.watchdog_metrics().in_flight == 1
    });
    // The renewal call now waits for a frozen server; the deadline does not wait for it.
    clock.advance(LEASE - DRIFT - THIRD - Duration::from_millis(1));
    assert!(lost.try_recv().is_err(), "not lost before the deadline");
    clock.advance(Duration::from_millis(1));
    let told = lost.try_recv().expect("told at the deadline");
    assert_eq!(told.reason, LostReason::Unconfirmed);
    assert_eq!(told.valid_until, deadline);
    assert_eq!(
        client.watchdog_metrics().renewed,
        0,
        "lost while the renewal call was still waiting"
    );

    server.resume();
    wait_until("the hanging call is settled", || {
        client.watchdog_metrics().renewal_calls >= 1
    });
    assert!(guard.is_lost(), "whatever the late reply said");
    assert_eq!(guard.valid_until(), deadline, "never extended once lost");
}

#[test]
fn a_deleted_key_is_lost_at_the_next_renewal() {
    let server = RedisServer::start();
    let (client, clock, _timer) = manual_client(&server, LEASE);
    let guard = client
        .lock("deleted")
        .expect("valid name")
        .lock()
        .expect("free");
    let lost = guard.lost_signal();
    let _: i64 = server.connection().del("{deleted}").expect("DEL");

    clock.advance(THIRD);
    let told = lost
        .recv_timeout(Duration::from_secs(10))
        .expect("told after the renewal call");
    assert_eq!(told.reason, LostReason::Taken);
    assert!(guard.is_lost());
    let exists: bool = server.connection().exists("{deleted}").expect("EXISTS");
    assert!(!exists, "the renewal made the deleted lock again");
}

/// redis-semaphore #175: a lease that lapsed between two renewals, and that another client took
/// and released meanwhile, is reported lost at the next renewal, which does not take the lock
/// again behind everyone's back.
#[test]
fn a_lease_that_lapsed_between_renewals_is_lost_and_not_taken_again() {
    let server = RedisServer::start();
    let (client, clock, _timer) = manual_client(&server, LEASE);
    let guard = client
        .lock("lapsed")
        .expect("valid name")
        .lock()
        .expect("free");
    let lost = guard.lost_signal();
    let _: bool = server.connection().pexpire("{lapsed}", 1).expect("PEXPIRE");
    wait_until("the lease lapses", || {
        !server
            .connection()
            .exists::<_, bool>("{lapsed}")
            .expect("EXISTS")
    });
    let other = common::client(&server);
    let between = other
        .lock("lapsed")
        .expect("valid name")
        .try_lock()
        .expect("reachable")
        .expect("free once the lease lapsed");
    let between_token = between.fencing_token();
    assert!(between_token > guard.fencing_token());
    between.unlock().expect("released");

    clock.advance(THIRD);
    let told = lost
        .recv_timeout(Duration::from_secs(10))
        .expect("told after the renewal call");
    assert_eq!(told.reason, LostReason::Taken);
    assert!(guard.is_lost());
    let exists: bool = server.connection().exists("{lapsed}").expect("EXISTS");
    assert!(!exists, "the renewal took the lapsed lock again");
    let next = other
        .lock("lapsed")
        .expect("valid name")
        .try_lock()
        .expect("reachable")
        .expect("free: nobody holds it");
    assert!(next.fencing_token() > between_token);
}

#[test]
fn a_lock_taken_over_is_lost_at_the_next_renewal_and_the_new_owner_keeps_it() {
    let server = RedisServer::start();
    let (client, clock, _timer) = manual_client(&server, LEASE);
    let guard = client
        .lock("taken")
        .expect("valid name")
        .lock()
        .expect("free");
    let lost = guard.lost_signal();
    let other = common::client(&server);
    let other_lock = other.lock("taken").expect("valid name");
    assert!(other_lock.force_unlock().expect("reachable"));
    let thief = other_lock
        .with_lease(Duration::from_secs(60))
        .try_lock()
        .expect("reachable")
        .expect("free after the force unlock");

    clock.advance(THIRD);
    let told = lost
        .recv_timeout(Duration::from_secs(10))
        .expect("told after the renewal call");
    assert_eq!(told.reason, LostReason::Taken);
    let ttl: i64 = server.connection().pttl("{taken}").expect("PTTL");
    assert!(
        ttl > 55_000,
        "the renewal left the new owner's lease alone: {ttl} ms"
    );
    assert!(matches!(guard.unlock(), Err(Error::NotOwner { .. })));
    assert_eq!(other_lock.hold_count().expect("reachable"), 1);
    drop(thief);
}

#[test]
fn a_failed_renewal_is_retried_every_tenth_of_the_lease_until_it_succeeds() {
    let server = RedisServer::start();
    let (client, clock, _timer) = manual_client(&server, LEASE);
    let start = clock.now();
    let guard = client
        .lock("retried")
        .expect("valid name")
        .lock()
        .expect("free");

    server.pause();
    clock.advance(THIRD);
    wait_until("the call fails", || {
        client.watchdog_metrics().failed_calls == 1
    });
    clock.advance(Duration::from_millis(2_999));
    clock.advance(Duration::from_millis(1));
    wait_until("the retry fails", || {
        client.watchdog_metrics().failed_calls == 2
    });
    assert_eq!(
        client.watchdog_metrics().renewal_calls,
        2,
        "one retry per tenth of the lease, no storm"
    );

    server.resume();
    clock.advance(Duration::from_secs(3));
    wait_until("the second retry succeeds", || {
        client.watchdog_metrics().renewed == 1
    });
    let retried_at = start + THIRD + Duration::from_secs(6);
    assert_eq!(guard.valid_until(), retried_at + LEASE - DRIFT);
    assert!(!guard.is_lost());
    assert_eq!(client.watchdog_metrics().renewal_calls, 3);
    guard.unlock().expect("held");
}

#[test]
fn max_hold_stops_renewal_and_tells_the_holder_when_the_lease_runs_out() {
    let server = RedisServer::start();
    let (client, clock, _timer) = manual_client(&server, LEASE);
    let lock = client
        .lock("bounded")
        .expect("valid name")
        .max_hold(Duration::from_secs(25));
    let guard = lock.lock().expect("free");
    let lost = guard.lost_signal();
    for renewed in 1..=2 {
        clock.advance(THIRD);
        wait_until("a renewal", || client.watchdog_metrics().renewed == renewed);
    }
    clock.advance(THIRD);
    let deadline = guard.valid_until();
    clock.advance(deadline - clock.now() - Duration::from_millis(1));
    assert!(lost.try_recv().is_err());
    clock.advance(Duration::from_millis(1));
    assert_eq!(
        lost.try_recv().map(|lost| lost.reason),
        Ok(LostReason::MaxHold)
    );
    assert_eq!(
        client.watchdog_metrics().renewals_sent,
        2,
        "no renewal past max_hold"
    );
}

#[test]
fn a_reentry_with_a_max_hold_stops_the_renewal_of_the_hold_it_joins() {
    let server = RedisServer::start();
    let (client, clock, _timer) = manual_client(&server, LEASE);
    let lock = client.lock("joined").expect("valid name");
    let outer = lock.lock().expect("free");
    clock.advance(THIRD);
    wait_until("a renewal", || client.watchdog_metrics().renewed == 1);
    // Re-entered 10 s in, for at most 15 s more: renewal stops 25 s into the hold.
    let inner = lock
        .max_hold(Duration::from_secs(15))
        .lock()
        .expect("re-entry");
    assert_eq!(inner.holds_at_acquire(), 2);
    let lost = inner.lost_signal();
    clock.advance(THIRD);
    wait_until("a renewal", || client.watchdog_metrics().renewed == 2);
    clock.advance(THIRD);
    clock.advance(inner.valid_until() - clock.now());
    assert_eq!(
        lost.try_recv().map(|lost| lost.reason),
        Ok(LostReason::MaxHold)
    );
    assert_eq!(
        client.watchdog_metrics().renewals_sent,
        2,
        "no renewal past the re-entry's max_hold"
    );
    assert!(outer.is_lost(), "one hold, lost for both guards");
}

#[test]
fn a_stopped_timer_gives_the_hold_back_with_a_typed_error() {
    let server = RedisServer::start();
    let (client, _clock, timer) = manual_client(&server, LEASE);
    let lock = client.lock("unwatched").expect("valid name");
    timer.stop();
    match lock.lock() {
        Err(Error::Watchdog { name, reason }) => {
            assert_eq!(name, "unwatched");
            assert_eq!(reason, LostReason::TimerStopped);
        }
        other => panic!("expected a watchdog error, got {other:?}"),
    }
    assert!(
        !lock.is_locked().expect("reachable"),
        "the hold was given back"
    );
}

#[test]
fn holders_are_told_at_once_when_the_timer_is_stopped_under_them() {
    let server = RedisServer::start();
    let (client, _clock, timer) = manual_client(&server, LEASE);
    let renewed = client
        .lock("renewed")
        .expect("valid name")
        .lock()
        .expect("free");
    let fixed = client
        .lock("fixed")
        .expect("valid name")
        .with_lease(LEASE)
        .lock()
        .expect("free");
    let told = [renewed.lost_signal(), fixed.lost_signal()];
    // Its owner stops the shared timer: no renewal and no deadline will ever run again.
    drop(timer.stop());
    for (guard, told) in [&renewed, &fixed].into_iter().zip(told) {
        let lost = told
            .recv_timeout(Duration::from_secs(5))
            .expect("the holder is told, without waiting for a deadline that will never run");
        assert_eq!(lost.reason, LostReason::TimerStopped);
        assert!(guard.is_lost());
    }
    assert_eq!(client.watchdog_metrics().lost, 2);
}

#[test]
fn an_abandoned_hold_is_neither_renewed_nor_released() {
    let server = RedisServer::start();
    let (client, clock, _timer) = manual_client(&server, LEASE);
    let lock = client.lock("abandoned").expect("valid name");
    lock.lock().expect("free").abandon();
    assert_eq!(client.watchdog_metrics().watched, 0);
    assert!(lock.is_locked().expect("reachable"), "no release was sent");
    // A marker hold renewed at the next third: the abandoned hold must not ride along.
    let marker = client
        .lock("marker")
        .expect("valid name")
        .lock()
        .expect("free");
    clock.advance(THIRD);
    wait_until("the marker's renewal", || {
        client.watchdog_metrics().renewal_calls == 1
    });
    assert_eq!(client.watchdog_metrics().renewals_sent, 1);
    drop(marker);
    // Acquired again by the same owner: the abandoned hold is released first, not re-entered.
    let again = lock.lock().expect("the abandoned hold is ours");
    assert_eq!(again.holds_at_acquire(), 1);
    drop(again);
    assert!(!lock.is_locked().expect("reachable"), "nothing left behind");
}
