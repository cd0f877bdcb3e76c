//! The lock on a real Redis Cluster on loopback (3 masters, 3 replicas): mutual exclusion over
//! names in every slot from two clients, every public method, a resharding while locks are held,
//! renewed and waited on, a replica promoted under a holder, and fencing tokens that rise across
//! a forced failover to a replica that missed the last acquisition.

mod common;

use common::election::an_election_works;
use common::methods::{every_public_method, Offers};
use redis_lease::{Client, Error, LeaseGuard};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};
use testkit::{slot, Failover, RedisCluster};

fn client(cluster: &RedisCluster, lease: Duration) -> Client {
    Client::cluster(cluster.seed_urls())
        .default_lease(lease)
        .connect_timeout(Duration::from_secs(2))
        .command_timeout(Duration::from_secs(2))
        .build()
        .expect("valid settings")
}

/// A master of `cluster` other than `than`.
fn another_master(cluster: &RedisCluster, than: u16) -> u16 {
    *cluster
        .masters()
        .iter()
        .find(|&&master| master != than)
        .expect("another master")
}

/// Names whose slots fall on every master.
fn names(count: usize) -> Vec<String> {
    (0..count).map(|n| format!("name-{n}")).collect()
}

#[test]
fn two_clients_of_eight_threads_over_names_in_every_slot_range_never_overlap() {
    let cluster = RedisCluster::start(3, 1);
    let names = names(24);
    let masters: std::collections::HashSet<u16> = names
        .iter()
        .map(|name| cluster.master_for_key(format!("{{{name}}}")))
        .collect();
    assert_eq!(masters.len(), 3, "the names cover every master");
    let inside: Arc<HashMap<String, AtomicBool>> = Arc::new(
        names
            .iter()
            .map(|name| (name.clone(), AtomicBool::new(false)))
            .collect(),
    );
    let overlaps = Arc::new(AtomicU64::new(0));
    let sections = Arc::new(AtomicU64::new(0));
    let tokens: Arc<Mutex<HashMap<String, Vec<u64>>>> = Arc::default();
    let clients = [
        client(&cluster, Duration::from_secs(5)),
        client(&cluster, Duration::from_secs(5)),
    ];
    let mut threads = Vec::new();
    for (c, client) in clients.iter().enumerate() {
        for t in 0..8 {
            let (client, names) = (client.clone(), names.clone());
            let (inside, overlaps, sections, tokens) = (
                Arc::clone(&inside),
                Arc::clone(&overlaps),
                Arc::clone(&sections),
                Arc::clone(&tokens),
            );
            threads.push(thread::spawn(move || {
                for round in 0..40 {
                    let name = &names[(c * 7 + t * 3 + round * 5) % names.len()];
                    let guard = client
                        .lock(name)
                        .expect("valid")
                        .try_lock_for(Duration::from_secs(10))
                        .expect("reachable")
                        .expect("acquired within the wait");
                    if inside[name].swap(true, Ordering::SeqCst) {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    tokens
                        .lock()
                        .expect("not poisoned")
                        .entry(name.clone())
                        .or_default()
                        .push(guard.fencing_token().expect("a token"));
                    thread::yield_now();
                    inside[name].store(false, Ordering::SeqCst);
                    sections.fetch_add(1, Ordering::SeqCst);
                    guard.unlock().expect("held");
                }
            }));
        }
    }
    for thread in threads {
        thread.join().expect("no panic");
    }
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
    assert_eq!(sections.load(Ordering::SeqCst), 2 * 8 * 40);
    for (name, mut seen) in tokens.lock().expect("not poisoned").drain() {
        let count = seen.len();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), count, "a token of {name} was handed out twice");
    }
}

#[test]
fn an_election_works_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0);
    let lease = Duration::from_millis(300);
    an_election_works(
        &client(&cluster, lease),
        &client(&cluster, lease),
        "leaders",
    );
}

#[test]
fn every_public_method_works_on_a_cluster() {
    let cluster = RedisCluster::start(3, 1);
    let client = client(&cluster, Duration::from_millis(300));
    every_public_method(&client, Offers::redis(true));
    let state = client
        .lock("methods")
        .expect("valid")
        .inspect()
        .expect("reachable");
    let master = cluster.master_for_key("{methods}");
    assert_eq!(
        state.node.as_deref(),
        Some(format!("127.0.0.1:{master}").as_str()),
        "the node that holds the lock"
    );
}

#[test]
fn a_lock_whose_keys_moved_mid_migration_is_served_on_the_importing_node() {
    let cluster = RedisCluster::start(3, 0);
    let client = client(&cluster, Duration::from_secs(30));
    let name = "asked";
    let key_slot = slot(format!("{{{name}}}"));
    let from = cluster.master_for_key(format!("{{{name}}}"));
    let to = another_master(&cluster, from);
    let lock = client.lock(name).expect("valid");
    // One hold taken and released first, so that all four of the lock's keys exist: an
    // importing node runs a script for a migrating slot only when it has every key it names.
    let lease = Duration::from_secs(30);
    lock.with_lease(lease)
        .lock()
        .expect("free")
        .unlock()
        .expect("held");
    let guard = lock.with_lease(lease).lock().expect("free");
    // Half way through a resharding: the keys are on the importing node, while the slot is
    // still the migrating node's, which sends every call for them on with `ASK`.
    cluster.begin_migration(key_slot, from, to);
    assert_eq!(
        cluster.move_keys(key_slot, from, to),
        4,
        "the lock's four keys"
    );
    assert_eq!(cluster.master_of_slot(key_slot), from);
    let state = lock.inspect().expect("inspected on the importing node");
    assert_eq!(state.hold_token, guard.fencing_token());
    let again = lock
        .try_lock()
        .expect("reachable")
        .expect("re-entered on the importing node");
    assert_eq!(again.fencing_token(), guard.fencing_token());
    again.unlock().expect("released once on the importing node");
    guard.unlock().expect("released on the importing node");
    cluster.finish_migration(key_slot, from, to);
    let next = lock.try_lock().expect("reachable").expect("free");
    assert!(next.fencing_token() > state.hold_token);
    next.unlock().expect("held");
}

#[test]
fn calls_follow_a_frozen_master_to_the_replica_that_took_its_place() {
    let cluster = RedisCluster::start(3, 1);
    let client = client(&cluster, Duration::from_secs(30));
    let name = "frozen-master";
    let master = cluster.master_for_key(format!("{{{name}}}"));
    let replica = cluster.replicas_of(master)[0];
    let lock = client.lock(name).expect("valid");
    // Fixed leases only: no renewal fails to tell the client that its map is wrong.
    let lease = Duration::from_secs(5);
    lock.with_lease(lease)
        .lock()
        .expect("free")
        .unlock()
        .expect("held");
    // A refusal names the node that refused, the slot's master, whichever seed was given.
    let full = |maxmemory: u64| cluster.server(master).config_set("maxmemory", maxmemory);
    full(1);
    match lock.with_lease(lease).try_lock() {
        Err(error @ Error::Refused { .. }) => {
            assert_eq!(error.code(), Some("OOM"), "{error}");
            assert_eq!(
                error.server(),
                Some(format!("127.0.0.1:{master}").as_str()),
                "{error}"
            );
        }
        other => panic!("a full master: {other:?}"),
    }
    full(0);
    cluster.pause(master);
    let mut promoted = cluster.server(replica).connection();
    common::wait_until("the replica takes the frozen master's place", || {
        let role: Vec<redis::Value> = redis::cmd("ROLE").query(&mut promoted).expect("ROLE");
        matches!(role.first(), Some(redis::Value::BulkString(role)) if role == b"master")
    });
    let guard = lock
        .with_lease(lease)
        .try_lock_for(Duration::from_secs(15))
        .expect("reachable")
        .expect("free, on the promoted replica");
    assert_eq!(
        lock.inspect().expect("reachable").node.as_deref(),
        Some(format!("127.0.0.1:{replica}").as_str())
    );
    guard.unlock().expect("held");
    cluster.resume(master);
}

#[test]
fn holds_are_renewed_and_waiters_woken_across_a_resharding() {
    let cluster = RedisCluster::start(3, 1);
    let lease = Duration::from_millis(900);
    let holder = client(&cluster, lease);
    let waiter_client = client(&cluster, lease);
    let name = "resharded";
    let key_slot = slot(format!("{{{name}}}"));
    let from = cluster.master_for_key(format!("{{{name}}}"));
    let to = another_master(&cluster, from);
    let guard: LeaseGuard = holder.lock(name).expect("valid").lock().expect("free");
    let token = guard.fencing_token();
    let waiter = {
        let lock = waiter_client.lock(name).expect("valid");
        thread::spawn(move || {
            let started = Instant::now();
            lock.try_lock_for(Duration::from_secs(20))
                .expect("reachable")
                .map(|guard| (guard.fencing_token(), started.elapsed()))
        })
    };
    thread::sleep(Duration::from_millis(300));
    cluster.migrate_slot(key_slot, from, to);
    assert_eq!(cluster.master_of_slot(key_slot), to);
    // Renewals follow the slot to its new master for several leases.
    thread::sleep(lease * 3);
    assert!(!guard.is_lost(), "{:?}", guard.lost());
    let state = holder
        .lock(name)
        .expect("valid")
        .inspect()
        .expect("reachable");
    assert_eq!(
        state.node.as_deref(),
        Some(format!("127.0.0.1:{to}").as_str())
    );
    assert_eq!(state.hold_token, token);
    let released = Instant::now();
    guard.unlock().expect("held, on the new master");
    let (next, _) = waiter
        .join()
        .expect("no panic")
        .expect("the waiter got the lock");
    assert!(next > token, "{next:?} after {token:?}");
    assert!(
        released.elapsed() < Duration::from_secs(3),
        "woken {:?} after the release",
        released.elapsed()
    );
}

#[test]
fn a_replica_promoted_under_a_holder_keeps_the_hold_or_tells_the_holder() {
    let cluster = RedisCluster::start(3, 1);
    let lease = Duration::from_millis(900);
    let holder = client(&cluster, lease);
    let names = names(9);
    let guards: Vec<(String, LeaseGuard)> = names
        .iter()
        .map(|name| {
            (
                name.clone(),
                holder.lock(name).expect("valid").lock().expect("free"),
            )
        })
        .collect();
    let master = cluster.master_for_key(format!("{{{}}}", names[0]));
    let replica = cluster.replicas_of(master)[0];
    cluster.failover(replica, Failover::Coordinated);
    thread::sleep(lease * 3);
    let other = client(&cluster, lease);
    for (name, guard) in &guards {
        let taken = other
            .lock(name)
            .expect("valid")
            .try_lock()
            .expect("reachable")
            .map(|theirs| theirs.fencing_token());
        match (guard.is_lost(), taken) {
            // Kept: nobody else gets it.
            (false, None) => {}
            // Lost, and said so: another may get it, with a higher token.
            (true, Some(theirs)) => assert!(theirs > guard.fencing_token(), "{name}"),
            (true, None) => {}
            (false, Some(theirs)) => {
                panic!("{name}: taken ({theirs:?}) while its holder was not told it lost it")
            }
        }
    }
    assert!(
        guards.iter().filter(|(_, guard)| !guard.is_lost()).count() > 0,
        "a coordinated failover loses no acknowledged write"
    );
}

#[test]
fn tokens_rise_across_a_forced_failover_to_a_replica_that_missed_the_last_acquisition() {
    let cluster = RedisCluster::start(3, 1);
    let lease = Duration::from_secs(60);
    let name = "behind";
    let master = cluster.master_for_key(format!("{{{name}}}"));
    let replica = cluster.replicas_of(master)[0];
    let first = client(&cluster, lease);
    let lock = first.lock(name).expect("valid");
    let before = lock.lock().expect("free");
    let replicated = before.fencing_token().expect("a token");
    before.unlock().expect("held");
    thread::sleep(Duration::from_millis(200));

    cluster.pause_replica(replica);
    let lost = lock.lock().expect("free");
    let lost_token = lost.fencing_token().expect("a token");
    assert!(lost_token > replicated);
    cluster.pause(master);
    cluster.resume(replica);
    cluster.failover(replica, Failover::Force);

    // The promoted replica never had the last acquisition, nor the counter's last value: its
    // tokens are still above it, since its configuration epoch rose with the promotion.
    let second = client(&cluster, lease);
    let taken = second
        .lock(name)
        .expect("valid")
        .try_lock_for(Duration::from_secs(10))
        .expect("reachable")
        .expect("the lost hold is not on the new master");
    let token = taken.fencing_token().expect("a token");
    assert!(
        token > lost_token,
        "token {token} after the lost {lost_token}: a fenced write would be accepted twice"
    );
    cluster.resume(master);
    drop(lost);
    taken.unlock().expect("held");
}

const EPOCH_SPAN: u64 = 1 << 44;

#[test]
fn the_epoch_is_read_once_per_term_of_a_primary_and_again_after_a_promotion() {
    let cluster = RedisCluster::start(3, 1);
    let name = "noted";
    let master = cluster.master_for_key(format!("{{{name}}}"));
    let replica = cluster.replicas_of(master)[0];
    let client = client(&cluster, Duration::from_secs(30));
    let lock = client.lock(name).expect("valid");
    cluster.server(master).reset_stats();
    let mut last = 0;
    for _ in 0..20 {
        let guard = lock.lock().expect("free");
        let token = guard.fencing_token().expect("a token");
        assert!(token > last);
        assert_eq!(token / EPOCH_SPAN, cluster.config_epoch(master));
        last = token;
        guard.unlock().expect("held");
    }
    // The test's own config_epoch reads are 20 of them.
    assert_eq!(
        cluster.server(master).command_calls("cluster|info"),
        21,
        "one read by the scripts"
    );

    thread::sleep(Duration::from_millis(200));
    cluster.failover(replica, Failover::Coordinated);
    assert!(cluster.config_epoch(replica) > last / EPOCH_SPAN);
    cluster.server(replica).reset_stats();
    for _ in 0..20 {
        let guard = lock
            .try_lock_for(Duration::from_secs(10))
            .expect("reachable")
            .expect("free");
        let token = guard.fencing_token().expect("a token");
        assert!(token > last, "token {token} after {last}");
        last = token;
        guard.unlock().expect("held");
    }
    assert_eq!(
        last / EPOCH_SPAN,
        cluster.config_epoch(replica),
        "the promoted node's epoch"
    );
    assert_eq!(
        cluster.server(replica).command_calls("cluster|info"),
        2,
        "one read by the scripts"
    );
}

#[test]
fn an_epoch_note_is_believed_only_by_its_node_and_only_while_the_counter_is_in_its_range() {
    let cluster = RedisCluster::start(3, 0);
    let name = "forged";
    let master = cluster.master_for_key(format!("{{{name}}}"));
    let mut con = cluster.server(master).connection();
    let note = format!("{{{name}}}:epoch");
    let fence = format!("{{{name}}}:fence");
    let client = client(&cluster, Duration::from_secs(30));
    let lock = client.lock(name).expect("valid");
    let epoch = cluster.config_epoch(master);
    assert!(epoch >= 1, "a created cluster's masters have epochs from 1");
    let first = lock.lock().expect("free");
    let token = first.fencing_token().expect("a token");
    assert_eq!(token, epoch * EPOCH_SPAN);
    first.unlock().expect("held");
    let written: String = redis::cmd("GET").arg(&note).query(&mut con).expect("GET");
    let id = written.split(':').next().expect("an id").to_owned();
    assert_eq!(written, format!("{id}:{epoch}"));

    // The node's own id with an epoch the counter is past: read again, never a token below.
    let () = redis::cmd("SET")
        .arg(&note)
        .arg(format!("{id}:0"))
        .query(&mut con)
        .expect("SET");
    let second = lock.lock().expect("free");
    assert_eq!(second.fencing_token(), Some(token + 1));
    second.unlock().expect("held");
    let rewritten: String = redis::cmd("GET").arg(&note).query(&mut con).expect("GET");
    assert_eq!(
        rewritten, written,
        "the note is read again and written again"
    );

    // Another node's id (as after a promotion) with a higher epoch: not believed.
    let () = redis::cmd("SET")
        .arg(&note)
        .arg(format!("{}:{}", "ab".repeat(20), epoch + 7))
        .query(&mut con)
        .expect("SET");
    let third = lock.lock().expect("free");
    assert_eq!(third.fencing_token(), Some(token + 2));
    third.unlock().expect("held");

    // A note of another type: refused before anything is written.
    let () = redis::cmd("DEL").arg(&note).query(&mut con).expect("DEL");
    let () = redis::cmd("HSET")
        .arg(&note)
        .arg("x")
        .arg("y")
        .query(&mut con)
        .expect("HSET");
    match lock.try_lock() {
        Err(redis_lease::Error::WrongType { key }) => assert_eq!(key, note),
        other => panic!("expected WrongType for the note, got {other:?}"),
    }
    let counter: u64 = redis::cmd("GET").arg(&fence).query(&mut con).expect("GET");
    assert_eq!(counter, token + 2, "nothing written");
    assert!(!lock.is_locked().expect("reachable"));
    let state = lock.inspect().expect("reachable");
    assert!(
        state.problems.iter().any(|problem| problem.contains(&note)),
        "{state:?}"
    );
    let () = redis::cmd("DEL").arg(&note).query(&mut con).expect("DEL");
    let fourth = lock.lock().expect("free");
    assert_eq!(fourth.fencing_token(), Some(token + 3));
    fourth.unlock().expect("held");
}
