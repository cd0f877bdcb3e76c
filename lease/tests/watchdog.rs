//! The watchdog end to end, on real time with short leases (300 ms) and generous bounds: holds
//! outlast their lease, faults are reported by the deadline, and released leases are never
//! renewed.

mod common;

use common::{client_with_lease, wait_until, RedisServer};
use redis_lease::LostReason;
use std::collections::HashMap;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const LEASE: Duration = Duration::from_millis(300);
/// Scheduling noise allowed on a shared machine, on top of the one tick (1 ms) the watchdog
/// promises.
const SLACK: Duration = Duration::from_millis(100);

#[test]
fn a_renewed_hold_outlasts_five_leases_and_nobody_else_gets_it() {
    let server = RedisServer::start();
    let holder = client_with_lease(&server, LEASE);
    let rival = client_with_lease(&server, LEASE);
    let guard = holder
        .lock("long-job")
        .expect("valid name")
        .lock()
        .expect("free");
    let rival_lock = rival.lock("long-job").expect("valid name");
    let until = Instant::now() + LEASE * 6;
    let mut tries = 0;
    while Instant::now() < until {
        let stolen = rival_lock
            .try_lock_for(Duration::from_millis(50))
            .expect("reachable");
        assert!(stolen.is_none(), "the rival got a renewed lock");
        tries += 1;
    }
    assert!(tries >= 10);
    assert!(!guard.is_lost());
    assert!(guard.valid_until() > Instant::now());
    let metrics = holder.watchdog_metrics();
    assert!(metrics.renewed >= 15, "renewed every lease/3: {metrics:?}");
    guard.unlock().expect("still held");
    assert!(rival_lock
        .try_lock_for(Duration::from_secs(2))
        .expect("reachable")
        .is_some());
}

#[test]
fn redis_paused_past_the_lease_is_reported_by_the_deadline_and_not_resurrected() {
    let server = RedisServer::start();
    let holder = client_with_lease(&server, LEASE);
    let guard = holder
        .lock("frozen")
        .expect("valid name")
        .lock()
        .expect("free");
    let lost = guard.lost_signal();
    thread::sleep(LEASE / 2);
    server.pause();
    let told = lost
        .recv_timeout(LEASE * 3)
        .expect("told while redis is frozen");
    let told_at = Instant::now();
    assert_eq!(told.reason, LostReason::Unconfirmed);
    assert!(
        told_at <= told.valid_until + SLACK,
        "told {:?} after the deadline",
        told_at - told.valid_until
    );
    server.resume();

    // Whatever the renewal that was waiting for the frozen server did, the old holder stays
    // lost, and another owner gets the lock within two leases.
    let rival = client_with_lease(&server, LEASE);
    let taken = rival
        .lock("frozen")
        .expect("valid name")
        .try_lock_for(LEASE * 2 + SLACK)
        .expect("reachable");
    assert!(taken.is_some(), "the lapsed lease was not kept alive");
    assert!(guard.is_lost());
}

/// etcd #10811: a holder cut off from Redis (its connections closed, new ones refused) while a
/// rival waits. The rival gets the lock once the holder's lease lapses, never before the holder
/// is told; back in touch, the old guard cannot release the rival's hold.
#[test]
fn a_holder_cut_off_is_told_before_a_waiting_rival_takes_the_lock() {
    let server = RedisServer::start();
    let gate = testkit::Gate::start(server.port());
    let holding = redis_lease::Client::builder(gate.url())
        .default_lease(LEASE)
        .connect_timeout(LEASE)
        .command_timeout(LEASE)
        .build()
        .expect("valid settings");
    let guard = holding
        .lock("cut")
        .expect("valid name")
        .lock()
        .expect("free");
    let lost = guard.lost_signal();
    let rival = client_with_lease(&server, LEASE);
    gate.close();
    let taken = rival
        .lock("cut")
        .expect("valid name")
        .try_lock_for(Duration::from_secs(10))
        .expect("reachable")
        .expect("the cut-off lease lapses");
    let taken_at = Instant::now();
    let told = lost
        .try_recv()
        .expect("the holder was told before the rival took the lock");
    assert!(
        told.valid_until <= taken_at,
        "the holder believed itself valid {:?} after the rival took the lock",
        told.valid_until - taken_at
    );
    assert!(taken.fencing_token() > guard.fencing_token());
    gate.open();
    let released = guard.unlock();
    assert!(
        matches!(released, Err(redis_lease::Error::NotOwner { .. })),
        "{released:?}"
    );
    assert!(!taken.is_lost());
    let ttl: i64 = redis::cmd("PTTL")
        .arg("{cut}")
        .query(&mut server.connection())
        .expect("PTTL");
    assert!(ttl > 0, "the old guard released the rival's hold");
}

fn client_pause(server: &RedisServer, pause: Duration) {
    let () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(pause.as_millis() as u64)
        .arg("ALL")
        .query(&mut server.connection())
        .expect("CLIENT PAUSE");
}

#[test]
fn client_pause_past_the_lease_is_reported_by_the_deadline() {
    let server = RedisServer::start();
    let holder = client_with_lease(&server, LEASE);
    let guard = holder
        .lock("paused")
        .expect("valid name")
        .lock()
        .expect("free");
    let lost = guard.lost_signal();
    client_pause(&server, LEASE * 3);
    let told = lost.recv_timeout(LEASE * 2).expect("told during the pause");
    assert_eq!(told.reason, LostReason::Unconfirmed);
    assert!(Instant::now() <= told.valid_until + SLACK);
}

#[test]
fn client_pauses_shorter_than_a_third_of_the_lease_do_no_harm() {
    let server = RedisServer::start();
    let holder = client_with_lease(&server, LEASE);
    let guard = holder
        .lock("hiccups")
        .expect("valid name")
        .lock()
        .expect("free");
    for _ in 0..8 {
        client_pause(&server, LEASE / 4);
        thread::sleep(LEASE / 2);
    }
    assert!(!guard.is_lost(), "lost: {:?}", guard.lost());
    guard.unlock().expect("still held");
}

#[test]
fn no_renewal_reaches_a_released_lease_over_ten_thousand_cycles() {
    let server = RedisServer::start();
    let monitor = server.monitor();
    // Long enough that a loaded machine does not lose a lease, short enough that renewals are
    // many: renewals fall due 50 ms after an acquisition.
    let lease = Duration::from_millis(150);
    let client = client_with_lease(&server, lease);
    let threads = 8;
    let cycles = 10_000 / threads;
    let workers: Vec<_> = (0..threads)
        .map(|n| {
            let lock = client
                .lock(&format!("cycle-{}", n % 4))
                .expect("valid name");
            thread::spawn(move || {
                for cycle in 0..cycles {
                    let guard = lock.lock().expect("reachable");
                    // Most holds are short; one in 50 lasts 45 to 56 ms, so that renewals
                    // (due 50 ms after an acquisition) meet releases.
                    if cycle % 50 == 0 {
                        let millis = 45 + (cycle as u64 / 50) % 12;
                        thread::sleep(Duration::from_millis(millis));
                    }
                    drop(guard);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("no panic");
    }
    thread::sleep(lease * 2);
    let mut con = server.connection();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("{cycle-*}")
        .query(&mut con)
        .expect("KEYS");
    assert!(keys.is_empty(), "lock keys left: {keys:?}");
    let metrics = client.watchdog_metrics();
    assert_eq!(metrics.watched, 0);
    assert_eq!(metrics.lost, 0, "{metrics:?}");

    let renew_sha = redis::Script::new(
        &[
            include_str!("../src/stores/redis/scripts/access.lua"),
            include_str!("../src/stores/redis/scripts/checks.lua"),
            include_str!("../src/stores/redis/scripts/holds.lua"),
            include_str!("../src/stores/redis/scripts/renew.lua"),
        ]
        .concat(),
    )
    .get_hash()
    .to_owned();
    let checked = check_renewals_hit_only_held_leases(&monitor.stop(), &renew_sha);
    assert!(
        checked >= 50,
        "only {checked} renewals ran: the test did not exercise the watchdog"
    );
}

/// Replays the server's command log: a lock is held by a hold from the `hset` that took it to
/// the `del` that freed it; every lease the renewal script extends must be held, by the very
/// hold the renewal named. Returns the number of renewals checked.
fn check_renewals_hit_only_held_leases(log: &[testkit::Monitored], renew_sha: &str) -> usize {
    let mut holder: HashMap<String, String> = HashMap::new();
    // The hold each key of the running renewal call names.
    let mut named: HashMap<String, String> = HashMap::new();
    let mut checked = 0;
    for command in log {
        let args: Vec<&str> = command.args.iter().map(String::as_str).collect();
        if !command.from_script {
            named.clear();
            if let ["evalsha", sha, count, rest @ ..] = args.as_slice() {
                if *sha == renew_sha {
                    let count: usize = count.parse().expect("a key count");
                    let (keys, argv) = rest.split_at(count);
                    for (key, pair) in keys.iter().zip(argv.chunks(2)) {
                        named.insert(key.to_string(), pair[0].to_owned());
                    }
                }
            }
            continue;
        }
        match args.as_slice() {
            ["hset", key, _owner, "1", ":hold", hold, ..] => {
                holder.insert(key.to_string(), hold.to_string());
            }
            ["del", key] => {
                holder.remove(*key);
            }
            ["pexpire", key, _] if !named.is_empty() => {
                checked += 1;
                assert_eq!(
                    holder.get(*key),
                    named.get(*key),
                    "a renewal of {key} reached a lease that was not its hold's"
                );
            }
            _ => {}
        }
    }
    checked
}

#[test]
fn one_renewal_thread_serves_many_holds_in_batches() {
    let server = RedisServer::start();
    let client = Arc::new(
        redis_lease::Client::builder(server.url())
            .default_lease(LEASE)
            .renewal_batch(10)
            .build()
            .expect("valid settings"),
    );
    let guards: Vec<_> = (0..50)
        .map(|n| {
            client
                .lock(&format!("batch-{n}"))
                .expect("valid name")
                .lock()
                .expect("free")
        })
        .collect();
    wait_until("every hold renewed twice", || {
        client.watchdog_metrics().renewed >= 100
    });
    let metrics = client.watchdog_metrics();
    assert!(
        metrics.renewal_calls * 10 >= metrics.renewals_sent,
        "at most 10 per call: {metrics:?}"
    );
    assert!(
        metrics.renewal_calls * 2 < metrics.renewals_sent,
        "leases due together share calls: {metrics:?}"
    );
    assert!(guards.iter().all(|guard| !guard.is_lost()));
}
