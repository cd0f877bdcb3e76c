//! The count-down latch on Redis: one server, a Cluster, and a Sentinel-managed primary whose
//! failover its waiter rides out; refused on RedLock; and keys that are not a latch's.

mod common;

use common::latch::*;
use redis::Commands;
use redis_lease::{Client, Error};
use std::thread;
use std::time::{Duration, Instant};
use testkit::{RedisCluster, RedisServer, SentinelSet};

fn client(server: &RedisServer) -> Client {
    common::client(server)
}

#[test]
fn count_downs_from_many_clients_open_a_latch_on_one_server() {
    let server = RedisServer::start();
    count_downs_from_many_clients_open_the_latch_once(&|| client(&server), "batch");
}

#[test]
fn a_latch_on_one_server_is_set_only_from_zero() {
    let server = RedisServer::start();
    a_latch_is_set_only_from_zero_and_its_waiters_wait_for_their_round(&|| client(&server), "r");
}

#[test]
fn a_latch_on_one_server_lapses() {
    let server = RedisServer::start();
    a_latch_left_behind_lapses_and_its_waiter_is_told(
        &|| client(&server),
        "left",
        Duration::from_secs(2),
    );
}

#[test]
fn a_latch_is_a_hash_of_its_own_beside_the_lock_of_its_name() {
    let server = RedisServer::start();
    let client = client(&server);
    let guard = client.lock("jobs").expect("valid").lock().expect("free");
    let latch = client.latch("jobs").expect("valid");
    assert!(latch.set_count(2).expect("a key of its own"));
    let mut con = server.connection();
    let fields: Vec<String> = con.hkeys("{jobs}:latch").expect("HKEYS");
    assert_eq!(fields, ["count", "round"]);
    let ttl: i64 = con.pttl("{jobs}:latch").expect("PTTL");
    assert!(ttl > 23 * 3600 * 1000, "a day: {ttl} ms");
    guard.unlock().expect("held");

    // Keys that are not a latch's are refused, never misread.
    let () = con.set("{odd}:latch", "x").expect("SET");
    let odd = client.latch("odd").expect("valid");
    for outcome in [
        odd.count().map(drop),
        odd.set_count(1).map(drop),
        odd.count_down().map(drop),
    ] {
        assert!(
            matches!(outcome, Err(Error::WrongType { .. })),
            "{outcome:?}"
        );
    }
    let () = con.del("{odd}:latch").expect("DEL");
    let () = con
        .hset_multiple("{odd}:latch", &[("count", "many"), ("round", "r")])
        .expect("HSET");
    for outcome in [odd.count().map(drop), odd.count_down().map(drop)] {
        assert!(
            matches!(outcome, Err(Error::BadValue { .. })),
            "{outcome:?}"
        );
    }
    let value: String = con.hget("{odd}:latch", "count").expect("HGET");
    assert_eq!(value, "many", "nothing written");
}

#[test]
fn a_latch_is_refused_on_redlock_when_it_is_made() {
    let servers = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    let client = Client::redlock(servers.iter().map(RedisServer::url))
        .build()
        .expect("valid settings");
    let refused = client.latch("batch").expect_err("refused");
    assert!(
        matches!(&refused, Error::InvalidArgument(why) if why.contains("latch") && why.contains("RedLock")),
        "{refused}"
    );
}

#[test]
fn count_downs_open_a_latch_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0);
    let client = || {
        Client::cluster(cluster.seed_urls())
            .command_timeout(Duration::from_secs(2))
            .build()
            .expect("valid settings")
    };
    count_downs_from_many_clients_open_the_latch_once(&client, "batch");
    a_latch_is_set_only_from_zero_and_its_waiters_wait_for_their_round(&client, "rounds");
}

#[test]
fn a_waiter_rides_out_a_failover_and_is_woken_by_the_new_primary() {
    let mut set = SentinelSet::start();
    let client = || {
        Client::sentinel(set.master_name(), set.sentinel_urls())
            // Room for a replica's acknowledgement while other tests start their servers on the
            // same cores: 500 ms was seen to pass without one.
            .command_timeout(Duration::from_secs(3))
            .connect_timeout(Duration::from_secs(1))
            .replica_acks(1, Duration::from_secs(2))
            .build()
            .expect("valid settings")
    };
    let counter = client();
    let latch = counter.latch("failover").expect("valid");
    assert!(common::retried_while_unavailable(
        Duration::from_secs(20),
        || latch.set_count(2)
    ));
    assert_eq!(latch.count_down().expect("reachable"), 1);
    let waiter = {
        let latch = client().latch("failover").expect("valid");
        thread::spawn(move || {
            let opened = latch.wait_for(Duration::from_secs(60));
            (opened, Instant::now())
        })
    };
    thread::sleep(Duration::from_millis(300));
    let old = set.kill_primary();
    let primary = set.wait_primary_changed(old);
    // The old primary comes back as the new one's replica, which acknowledges the last count.
    set.start_again(old);
    set.wait_replicated();
    // The count was acknowledged by the replica: the new primary has it.
    assert_eq!(
        common::retried_while_unavailable(Duration::from_secs(20), || latch.count()),
        1
    );
    assert!(!waiter.is_finished(), "the waiter waits on");
    // The waiter's subscriber follows the primary and subscribes there again.
    common::wait_until("the waiter subscribed on the new primary", || {
        let subscribed: Vec<(String, u64)> = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg("{failover}:latch:freed")
            .query(&mut set.server(primary).connection())
            .unwrap_or_default();
        subscribed.first().is_some_and(|(_, count)| *count > 0)
    });
    // The new primary's replica acknowledges writes again before the count-down that must be.
    common::wait_until("the replica acknowledges the new primary's writes", || {
        let acked: u64 = redis::cmd("WAIT")
            .arg(1)
            .arg(500)
            .query(&mut set.server(primary).connection())
            .unwrap_or(0);
        acked >= 1
    });
    // Sent once: a count-down is not to be sent again (it may have been counted).
    let left = latch.count_down().expect("counted, and acknowledged");
    let opened_at = Instant::now();
    assert_eq!(left, 0);
    let (opened, at) = waiter.join().expect("no panic");
    assert!(opened.expect("the wait outlasts the failover"));
    assert!(
        at.saturating_duration_since(opened_at) < Duration::from_millis(2500),
        "woken {:?} after the opening: by the new primary's announcement, not the backstop",
        at.saturating_duration_since(opened_at)
    );
}
