//! Replica acknowledgements (`ClientBuilder::replica_acks`): counts `WAIT` cannot take are
//! refused when the client is built, and an acquisition that reports failure (too few
//! acknowledgements, no answer in time) leaves no hold behind it, on a primary with a replica.

mod common;

use common::RedisServer;
use redis::Commands;
use redis_lease::{Client, Error};
use std::thread;
use std::time::{Duration, Instant};

/// A primary and one replica of it, linked and in sync.
fn primary_with_replica() -> (RedisServer, RedisServer) {
    let primary = RedisServer::start();
    let replica = RedisServer::start();
    let () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(primary.port())
        .query(&mut replica.connection())
        .expect("REPLICAOF");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut primary.connection())
            .expect("INFO");
        if info.contains("connected_slaves:1") && info.contains(",state=online,") {
            break;
        }
        assert!(Instant::now() < deadline, "the replica never came online");
        thread::sleep(Duration::from_millis(20));
    }
    (primary, replica)
}

/// A client of `server` without acknowledgements.
fn plain(server: &RedisServer) -> Client {
    Client::builder(server.url())
        .command_timeout(Duration::from_secs(2))
        .build()
        .expect("valid settings")
}

/// Asserts that the lock `name` on `server` is free (its key gone), and that another client
/// takes it at once.
fn left_free(server: &RedisServer, name: &str) {
    let mut con = server.connection();
    let key = format!("{{{name}}}");
    let exists: bool = con.exists(&key).expect("EXISTS");
    let ttl: i64 = con.pttl(&key).expect("PTTL");
    assert!(!exists, "a hold was left behind with {ttl} ms to live");
    let other = plain(server);
    let taken = other
        .lock(name)
        .expect("valid")
        .try_lock()
        .expect("reachable");
    assert!(taken.is_some(), "another client must take the lock at once");
}

#[test]
fn counts_wait_cannot_take_are_refused_when_the_client_is_built() {
    let server = RedisServer::start();
    for replicas in [
        0,
        usize::MAX,
        usize::try_from(i64::MAX).expect("64-bit") + 1,
    ] {
        let built = Client::builder(server.url())
            .command_timeout(Duration::from_secs(2))
            .replica_acks(replicas, Duration::from_millis(200))
            .build();
        assert!(
            matches!(&built, Err(Error::InvalidArgument(_))),
            "{replicas}: {built:?}"
        );
    }
    let largest = Client::builder(server.url())
        .command_timeout(Duration::from_secs(2))
        .replica_acks(
            usize::try_from(i64::MAX).expect("64-bit"),
            Duration::from_millis(200),
        )
        .build();
    assert!(largest.is_ok(), "{largest:?}");
}

#[test]
fn an_unacknowledged_acquisition_after_a_script_flush_is_undone() {
    let (primary, _replica) = primary_with_replica();
    let client = Client::builder(primary.url())
        .command_timeout(Duration::from_secs(2))
        .replica_acks(3, Duration::from_secs(1))
        .build()
        .expect("valid settings");
    primary.flush_scripts();
    let started = Instant::now();
    let attempt = client.lock("flushed").expect("valid").try_lock();
    assert!(
        matches!(
            &attempt,
            Err(Error::NotReplicated {
                acked: 1,
                wanted: 3,
                ..
            })
        ),
        "{attempt:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    left_free(&primary, "flushed");
}

#[test]
fn an_acknowledged_acquisition_that_got_no_answer_is_undone() {
    let (primary, replica) = primary_with_replica();
    let client = Client::builder(primary.url())
        .command_timeout(Duration::from_millis(500))
        .replica_acks(1, Duration::from_millis(200))
        .build()
        .expect("valid settings");
    // A first call loads the scripts and opens the connection the attempt uses (whether the
    // replica acknowledged it in time on a busy machine does not matter here).
    let warm = client.lock("warm").expect("valid").try_lock();
    assert!(
        matches!(&warm, Ok(_) | Err(Error::NotReplicated { .. })),
        "{warm:?}"
    );
    drop(warm);
    primary.pause();
    let resume = {
        let pid_owner = &primary;
        thread::scope(|scope| {
            let resumer = scope.spawn(|| {
                thread::sleep(Duration::from_millis(900));
                pid_owner.resume();
            });
            let attempt = client.lock("frozen").expect("valid").try_lock();
            resumer.join().expect("no panic");
            attempt
        })
    };
    assert!(
        matches!(&resume, Err(Error::Unavailable { .. })),
        "{resume:?}"
    );
    // The late attempt and its undoing run once the primary runs again.
    thread::sleep(Duration::from_millis(500));
    left_free(&primary, "frozen");
    let mut on_replica = replica.connection();
    let exists: bool = on_replica.exists("{frozen}").expect("EXISTS");
    assert!(!exists, "the replica keeps the hold");
}
