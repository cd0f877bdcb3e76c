//! Every public method of the lock, on one server and on RedLock's masters (the cluster runs the
//! same in `tests/cluster.rs`).

mod common;

use common::election::an_election_works;
use common::methods::{every_public_method, Offers};
use common::RedisServer;
use redis_lease::Client;
use std::time::Duration;

const LEASE: Duration = Duration::from_millis(300);

#[test]
fn every_public_method_works_on_one_server() {
    let server = RedisServer::start();
    let client = Client::builder(server.url())
        .default_lease(LEASE)
        .build()
        .expect("valid settings");
    every_public_method(&client, Offers::redis(true));
}

#[test]
fn an_election_works_on_one_server() {
    let server = RedisServer::start();
    let clients = [(); 2].map(|()| {
        Client::builder(server.url())
            .default_lease(LEASE)
            .build()
            .expect("valid settings")
    });
    an_election_works(&clients[0], &clients[1], "leaders");
}

#[test]
fn ping_says_whether_a_server_or_a_quorum_of_masters_serves() {
    let server = RedisServer::start();
    let client = Client::builder(server.url())
        .command_timeout(Duration::from_millis(300))
        .build()
        .expect("valid settings");
    client.ping().expect("serves");
    server.pause();
    let started = std::time::Instant::now();
    let paused = client.ping();
    assert!(
        matches!(paused, Err(redis_lease::Error::Unavailable { .. })),
        "{paused:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    server.resume();
    client.ping().expect("serves again");

    let mut masters: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let redlock = Client::redlock(masters.iter().map(RedisServer::url))
        .command_timeout(Duration::from_millis(100))
        .build()
        .expect("valid settings");
    redlock.ping().expect("3 of 3");
    masters[0].stop();
    redlock.ping().expect("2 of 3: a quorum");
    masters[1].stop();
    let short = redlock.ping();
    assert!(
        matches!(&short, Err(redis_lease::Error::Unavailable { cause, .. }) if cause.to_string().contains("1 of 3")),
        "{short:?}"
    );
}

#[test]
fn an_election_is_refused_on_redlock_saying_why() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let client = Client::redlock(servers.iter().map(RedisServer::url))
        .build()
        .expect("valid settings");
    let refused = client.election("leaders");
    assert!(
        matches!(&refused, Err(redis_lease::Error::InvalidArgument(why)) if why.contains("counter")),
        "{refused:?}"
    );
}

#[test]
fn every_public_method_works_on_redlock() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let client = Client::redlock(servers.iter().map(RedisServer::url))
        .default_lease(LEASE)
        .command_timeout(Duration::from_millis(100))
        .build()
        .expect("valid settings");
    every_public_method(&client, Offers::redis(false));
}
