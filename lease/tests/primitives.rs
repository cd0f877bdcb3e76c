//! The semaphore, the read-write lock, the fair lock and cancellable waits, on one server, on a
//! Sentinel-managed primary and on a Redis Cluster; refused on RedLock.

mod common;

use common::primitives::*;
use common::RedisServer;
use redis_lease::{Client, Error};
use std::time::Duration;
use testkit::{Proxy, RedisCluster, SentinelSet};

fn server_client(url: &str, lease: Duration) -> Client {
    Client::builder(url)
        .default_lease(lease)
        .command_timeout(Duration::from_secs(1))
        .build()
        .expect("valid settings")
}

#[test]
fn primitives_work_on_one_server() {
    let server = RedisServer::start();
    let url = server.url();
    every_primitive(&|lease| server_client(&url, lease));
}

#[test]
fn a_fair_locks_frozen_waiter_holds_the_line_up_for_a_bounded_time() {
    let server = RedisServer::start();
    let url = server.url();
    let proxy = Proxy::start(
        format!("127.0.0.1:{}", server.port())
            .parse()
            .expect("addr"),
    );
    let frozen = server_client(
        &format!("redis://{}", proxy.addr()),
        Duration::from_millis(600),
    );
    let clients = |lease| server_client(&url, lease);
    fair_lock_passes_over_vanished_waiters(&clients, &frozen, &|| proxy.freeze(), "fair-frozen");
    proxy.heal();
}

#[test]
fn keys_of_the_wrong_type_are_named_errors() {
    let server = RedisServer::start();
    let client = server_client(&server.url(), Duration::from_millis(600));
    let mut con = server.connection();
    let _: () = redis::cmd("HSET")
        .arg("{w}:writer")
        .arg("a")
        .arg("b")
        .query(&mut con)
        .expect("written");
    let rw = client.read_write_lock("w").expect("valid");
    let waited = rw.write_lock().try_lock_for(Duration::from_millis(200));
    let read = rw.read_lock().try_lock();
    for outcome in [waited.map(drop), read.map(drop)] {
        assert!(
            matches!(&outcome, Err(Error::WrongType { key }) if key == "{w}:writer"),
            "{outcome:?}"
        );
    }
    let _: () = redis::cmd("SET")
        .arg("{f}:queue")
        .arg("x")
        .query(&mut con)
        .expect("written");
    let fair = client.fair_lock("f").expect("valid");
    let outcome = fair.try_lock_for(Duration::from_millis(200)).map(drop);
    assert!(
        matches!(&outcome, Err(Error::WrongType { key }) if key == "{f}:queue"),
        "{outcome:?}"
    );
    let _: () = redis::cmd("ZADD")
        .arg("{z}")
        .arg(1)
        .arg("someone")
        .query(&mut con)
        .expect("written");
    let semaphore = client.semaphore("z", 2).expect("valid");
    assert!(matches!(
        semaphore.try_acquire(),
        Err(Error::WrongType { .. })
    ));
}

#[test]
fn primitives_work_on_sentinel() {
    let set = SentinelSet::start();
    let clients = |lease| {
        Client::sentinel(set.master_name(), set.sentinel_urls())
            .default_lease(lease)
            .command_timeout(Duration::from_secs(1))
            .build()
            .expect("valid settings")
    };
    semaphore_bounds_its_holders(&clients, "s-bounds");
    read_write_lock_excludes_writers(&clients, "rw-excl");
    read_write_lock_does_not_starve_writers(&clients, "rw-starve");
    read_write_lock_passes_a_reader_queued_between_two_writers(&clients, "rw-queued");
    fair_lock_grants_in_order(&clients, "fair-order");
    waits_end_when_cancelled(&clients, "cancel");
}

#[test]
fn primitives_work_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0);
    let clients = |lease| {
        Client::cluster(cluster.seed_urls())
            .default_lease(lease)
            .command_timeout(Duration::from_secs(1))
            .build()
            .expect("valid settings")
    };
    semaphore_bounds_its_holders(&clients, "s-bounds");
    semaphore_permits_of_the_dead_come_back(&clients, "s-dead");
    read_write_lock_excludes_writers(&clients, "rw-excl");
    read_write_lock_does_not_starve_writers(&clients, "rw-starve");
    read_write_lock_passes_a_reader_queued_between_two_writers(&clients, "rw-queued");
    fair_lock_grants_in_order(&clients, "fair-order");
    waits_end_when_cancelled(&clients, "cancel");
    primitives_refuse_each_others_keys(&clients, "mixed");
}

#[test]
fn redlock_refuses_what_its_quorum_cannot_bound() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let client = Client::redlock(servers.iter().map(RedisServer::url))
        .build()
        .expect("valid settings");
    assert!(matches!(
        client.semaphore("s", 2),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        client.read_write_lock("rw"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        client.fair_lock("f"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(client.lock("l").is_ok());
}
