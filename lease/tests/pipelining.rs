//! Many threads of one client sharing one pipelined connection: mutual exclusion holds, a few
//! connections serve them all, and a server that freezes under them fails each call by its own
//! deadline and keeps no lock taken by a call that got no answer.

mod common;

use common::RedisServer;
use redis_lease::{Client, Error};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

fn connections_received(server: &RedisServer) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query(&mut server.connection())
        .expect("INFO stats");
    info.lines()
        .find_map(|line| line.strip_prefix("total_connections_received:"))
        .and_then(|count| count.trim().parse().ok())
        .expect("a count")
}

/// `threads` threads of `client` take and release names among `names` for `run`, each checking
/// that nobody else holds the name it holds. Returns the pairs made.
fn hammer(client: &Client, threads: usize, names: usize, run: Duration) -> u64 {
    let held: Arc<Vec<AtomicBool>> = Arc::new((0..names).map(|_| AtomicBool::new(false)).collect());
    let pairs = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..threads)
        .map(|n| {
            let (client, held, pairs) = (client.clone(), held.clone(), pairs.clone());
            thread::spawn(move || {
                let mut rng = testkit::Lcg(n as u64 + 7);
                let began = Instant::now();
                while began.elapsed() < run {
                    let name = rng.below(names as u64) as usize;
                    let lock = client.lock(&format!("many:{name}")).expect("valid");
                    let guard = lock.lock().expect("acquired");
                    assert!(
                        !held[name].swap(true, Ordering::SeqCst),
                        "two holders of many:{name}"
                    );
                    held[name].store(false, Ordering::SeqCst);
                    guard.unlock().expect("released");
                    pairs.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("no failed assertion");
    }
    pairs.load(Ordering::Relaxed)
}

#[test]
fn many_threads_share_a_few_connections_and_exclusion_holds() {
    let server = RedisServer::start();
    let run = Duration::from_millis(1500);
    let before = connections_received(&server);
    let shared = Client::builder(server.url())
        .pool_size(32)
        .build()
        .expect("valid settings");
    let pairs = hammer(&shared, 32, 8, run);
    let opened = connections_received(&server) - before;
    assert!(pairs > 100, "{pairs} pairs");
    // One shared connection, one subscriber, and the odd one of its own for a call that needs
    // it (an inspection, a renewal).
    assert!(opened <= 4, "{opened} connections for {pairs} pairs");

    let before = connections_received(&server);
    let own = Client::builder(server.url())
        .pool_size(32)
        .pipelining(false)
        .build()
        .expect("valid settings");
    let pairs = hammer(&own, 32, 8, run);
    let opened = connections_received(&server) - before;
    assert!(
        opened > 8,
        "a connection per busy thread: {opened} for {pairs} pairs"
    );
}

#[test]
fn a_frozen_server_fails_each_waiting_thread_by_its_deadline_and_keeps_no_ghost_lock() {
    frozen_under_many_threads(true);
}

#[test]
fn the_same_without_pipelining() {
    frozen_under_many_threads(false);
}

fn frozen_under_many_threads(pipelining: bool) {
    let server = RedisServer::start();
    let timeout = Duration::from_millis(300);
    let client = Client::builder(server.url())
        .connect_timeout(timeout)
        .command_timeout(timeout)
        .pipelining(pipelining)
        .build()
        .expect("valid settings");
    // The shared connection is open, and the scripts loaded, before the server freezes.
    client
        .lock("warm")
        .expect("valid")
        .lock()
        .expect("acquired")
        .unlock()
        .expect("released");
    server.pause();
    let callers: Vec<_> = (0..8)
        .map(|n| {
            let client = client.clone();
            thread::spawn(move || {
                let lock = client.lock(&format!("frozen:{n}")).expect("valid");
                let began = Instant::now();
                let outcome = lock.with_lease(Duration::from_secs(60)).try_lock();
                let took = began.elapsed();
                assert!(
                    matches!(outcome, Err(Error::Unavailable { .. })),
                    "{outcome:?}"
                );
                assert!(
                    took < timeout + Duration::from_millis(400),
                    "a call bound to {timeout:?} took {took:?}"
                );
            })
        })
        .collect();
    for caller in callers {
        caller.join().expect("no failed assertion");
    }
    server.resume();
    // Every acquisition ran when the server thawed, and the release written behind it ran
    // next: no name is left held by an attempt its caller was told had failed.
    let deadline = Instant::now() + Duration::from_secs(5);
    for n in 0..8 {
        let lock = client.lock(&format!("frozen:{n}")).expect("valid");
        loop {
            match lock.is_locked() {
                Ok(false) => break,
                other => assert!(
                    Instant::now() < deadline,
                    "frozen:{n} is still held after the thaw: {other:?}"
                ),
            }
            thread::sleep(Duration::from_millis(20));
        }
        let guard = lock.try_lock().expect("reachable");
        assert!(guard.is_some(), "frozen:{n} can be taken again");
    }
}
