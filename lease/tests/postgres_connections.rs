//! On PostgreSQL a hold is a row, not a connection: the server closing every connection of the
//! holder's client (as an administrator, a pooler's recycling or a server restart does) neither
//! frees the lock nor loses the hold, which is renewed over new connections.

mod common;

use common::postgres::server;
use redis_lease::Client;
use std::thread;
use std::time::{Duration, Instant};
use testkit::PgServer;

fn client(server: &PgServer, lease: Duration) -> Client {
    Client::postgres(server.scram_url())
        .default_lease(lease)
        .connect_timeout(Duration::from_secs(5))
        .command_timeout(Duration::from_secs(5))
        .build()
        .expect("valid settings")
}

/// Ends every session of the password user (`pg_terminate_backend`, whose sessions are told
/// `57P01` and closed); how many it ended.
fn end_every_session(server: &PgServer) -> usize {
    let ended = server
        .psql(&format!(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = '{}'",
            PgServer::SCRAM_USER
        ))
        .expect("sessions ended");
    ended.trim().parse().expect("a count")
}

/// The owners of unexpired holds of `{jobs}`, as the store's table has them.
fn holders(server: &PgServer) -> Vec<String> {
    server
        .psql("SELECT owner FROM lease.holds WHERE key = '{jobs}' AND expires > clock_timestamp()")
        .expect("an answer")
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Takes and releases a lock from four threads at once, leaving `client` several idle
/// connections.
fn warm(client: &Client) {
    thread::scope(|threads| {
        for n in 0..4 {
            threads.spawn(move || {
                for _ in 0..5 {
                    let lock = client.lock(&format!("warm-{n}")).expect("valid");
                    let guard = lock
                        .try_lock_for(Duration::from_secs(10))
                        .expect("an answer")
                        .expect("free");
                    guard.unlock().expect("released");
                }
            });
        }
    });
}

#[test]
fn a_hold_outlives_every_connection_of_its_client() {
    let server = server();
    let lease = Duration::from_secs(3);
    let holder = client(&server, lease);
    warm(&holder);
    let guard = holder
        .lock("jobs")
        .expect("valid")
        .try_lock()
        .expect("an answer")
        .expect("free");
    let owner = vec![guard.owner().to_owned()];

    // Every connection of the client is closed by the server, its listening one included, and
    // again a lease later: the hold stays the holder's, renewed over new connections.
    let ended = end_every_session(&server);
    assert!(ended >= 2, "the holder's calls and its listener: {ended}");
    let watched_until = Instant::now() + lease * 2;
    let mut ended_again = false;
    while Instant::now() < watched_until {
        assert!(!guard.is_lost(), "the hold was lost: {:?}", guard.lost());
        assert_eq!(
            holders(&server),
            owner,
            "the hold went with its connections"
        );
        if !ended_again && Instant::now() + lease > watched_until {
            ended_again = true;
            end_every_session(&server);
        }
        thread::sleep(Duration::from_millis(50));
    }
    assert!(!guard.is_lost(), "the hold was lost: {:?}", guard.lost());
}

#[test]
fn a_release_after_the_server_closed_the_clients_connections_frees_the_lock_at_once() {
    let server = server();
    // A lease of a minute: a release that failed would leave the lock held that long.
    let holder = client(&server, Duration::from_secs(60));
    warm(&holder);
    let guard = holder
        .lock("jobs")
        .expect("valid")
        .try_lock()
        .expect("an answer")
        .expect("free");
    let ended = end_every_session(&server);
    let released = guard.unlock();
    let left = holders(&server);
    assert!(
        released.is_ok() && left.is_empty(),
        "{ended} sessions ended; the release: {released:?}; still held by {left:?}"
    );
    // A rival's first call after the sessions ended is answered too.
    end_every_session(&server);
    let rival = holder.lock("jobs").expect("valid");
    assert!(rival.try_lock().expect("an answer").is_some());
}
