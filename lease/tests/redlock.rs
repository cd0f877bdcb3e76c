//! RedLock over 3 and 5 local masters, and MultiLock: quorum arithmetic over every mask of
//! blocked masters, masters killed, restarted and paused, mutual exclusion under churn, and bad
//! settings.

mod common;

use common::{client, RedisServer};
use redis::Commands;
use redis_lease::{Client, ClientBuilder, Error, LostReason, MultiLock};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

fn servers(count: usize) -> Vec<RedisServer> {
    (0..count).map(|_| RedisServer::start()).collect()
}

fn masters(servers: &[RedisServer], lease: Duration, node_timeout: Duration) -> Client {
    Client::redlock(servers.iter().map(RedisServer::url))
        .default_lease(lease)
        .command_timeout(node_timeout)
        .build()
        .expect("valid settings")
}

/// Whether `owner` holds the lock key on a running server.
fn holds(server: &RedisServer, key: &str, owner: &str) -> bool {
    let count: Option<u64> = server.connection().hget(key, owner).expect("HGET");
    count.is_some()
}

#[test]
fn a_reentry_refused_for_want_of_a_quorum_never_queues_behind_its_own_waiter() {
    let servers = servers(3);
    let client = masters(&servers, Duration::from_secs(3), Duration::from_millis(200));
    let (to_holder, orders) = std::sync::mpsc::channel::<()>();
    let (tell, told) = std::sync::mpsc::channel();
    let holder = {
        let lock = client.lock("busy").expect("valid");
        thread::spawn(move || {
            let guard = lock.lock().expect("free");
            tell.send(None).expect("main waits");
            orders.recv().expect("told to re-enter");
            // Two of three masters frozen: no quorum until they are back.
            let again = lock.lock().map(|again| again.holds_at_acquire());
            tell.send(Some(again)).expect("main waits");
            drop(guard);
        })
    };
    assert!(told.recv().expect("held").is_none());
    // Another thread of the client waits for the lock: this client's contender.
    let waiter = {
        let lock = client.lock("busy").expect("valid");
        thread::spawn(move || {
            lock.try_lock_for(Duration::from_secs(20))
                .map(|g| g.is_some())
        })
    };
    thread::sleep(Duration::from_millis(300));
    servers[1].pause();
    servers[2].pause();
    to_holder.send(()).expect("holder waits");
    thread::sleep(Duration::from_secs(1));
    servers[1].resume();
    servers[2].resume();
    let holds = told
        .recv_timeout(Duration::from_secs(10))
        .expect("the re-entry went on once the masters were back, without waiting for the waiter")
        .expect("the re-entry's outcome")
        .expect("re-entered");
    assert!(holds >= 2, "a re-entry: {holds} holds");
    holder.join().expect("no panic");
    // Masters that did not answer lately are left out of a release for a second: what they
    // still hold lapses with its lease (3 s), and the waiter has the lock by then.
    assert!(waiter.join().expect("no panic").expect("reachable"));
}

#[test]
fn every_mask_of_taken_or_down_masters_wins_exactly_with_a_quorum() {
    for count in [3usize, 5] {
        let mut servers = servers(count);
        let redlock = masters(
            &servers,
            Duration::from_secs(10),
            Duration::from_millis(200),
        );
        let quorum = count / 2 + 1;
        for mask in 0..(1u32 << count) {
            let name = format!("mask-{count}-{mask}");
            let key = format!("{{{name}}}");
            let blocked = |i: usize| mask & (1 << i) != 0;
            for (i, server) in servers.iter_mut().enumerate().filter(|(i, _)| blocked(*i)) {
                if i % 2 == 0 {
                    let _: i64 = server
                        .connection()
                        .hset(&key, "someone-else", 1)
                        .expect("HSET");
                } else {
                    server.stop();
                }
            }
            let free = (0..count).filter(|i| !blocked(*i)).count();
            let up = (0..count).filter(|i| !blocked(*i) || i % 2 == 0).count();
            let lock = redlock.lock(&name).expect("valid name");
            let owner = lock.owner();
            let won = match lock.with_lease(Duration::from_secs(10)).try_lock() {
                Ok(Some(guard)) => {
                    guard.unlock().expect("held on a quorum");
                    true
                }
                Ok(None) => false,
                Err(Error::Unavailable { .. }) if up == 0 => false,
                Err(other) => panic!("mask {mask:0count$b}: {other}"),
            };
            assert_eq!(
                won,
                free >= quorum,
                "{count} masters, mask {mask:0count$b}: {free} free and up"
            );
            for server in servers.iter_mut() {
                server.start_again();
                assert!(
                    !holds(server, &key, &owner),
                    "{count} masters, mask {mask:0count$b}: a key of ours was left behind"
                );
            }
        }
    }
}

#[test]
fn two_of_three_masters_frozen_fail_within_the_node_timeout_and_leave_no_key() {
    let servers = servers(3);
    let node_timeout = Duration::from_millis(100);
    let redlock = masters(&servers, Duration::from_secs(10), node_timeout);
    let lock = redlock.lock("frozen").expect("valid name");
    let owner = lock.owner();
    // Connections are open before the freeze, as in a running service.
    lock.try_lock()
        .expect("reachable")
        .expect("free")
        .unlock()
        .expect("held");
    servers[1].pause();
    servers[2].pause();
    let started = Instant::now();
    let outcome = lock.try_lock().expect("one master answered");
    let took = started.elapsed();
    // Known silent now, the frozen masters are left out: the next attempt does not wait.
    let started = Instant::now();
    assert!(lock.try_lock().expect("one master answered").is_none());
    let again = started.elapsed();
    servers[1].resume();
    servers[2].resume();
    assert!(outcome.is_none(), "no quorum with two masters frozen");
    assert!(
        took < node_timeout * 3,
        "took {took:?} with a node timeout of {node_timeout:?}"
    );
    assert!(again < node_timeout, "took {again:?} again");
    // The frozen masters ran the acquisition late, and the undo right after it.
    thread::sleep(Duration::from_millis(200));
    for server in &servers {
        assert!(
            !holds(server, "{frozen}", &owner),
            "a key of ours was left behind"
        );
    }
}

#[test]
fn a_held_redlock_survives_a_master_killed_and_is_lost_without_a_quorum() {
    let mut servers = servers(3);
    let lease = Duration::from_millis(600);
    let redlock = masters(&servers, lease, Duration::from_millis(50));
    let rival = masters(&servers, lease, Duration::from_millis(50));
    let guard = redlock
        .lock("survivor")
        .expect("valid")
        .lock()
        .expect("free");
    servers[0].stop();
    let until = Instant::now() + lease * 3;
    while Instant::now() < until {
        let stolen = rival
            .lock("survivor")
            .expect("valid")
            .try_lock_for(Duration::from_millis(100))
            .expect("two masters answer");
        assert!(stolen.is_none(), "taken while a quorum held it");
    }
    assert!(
        !guard.is_lost(),
        "renewed on the two masters left: {:?}",
        guard.lost()
    );
    let lost = guard.lost_signal();
    servers[1].pause();
    let told = lost
        .recv_timeout(lease * 3)
        .expect("told: one master of three answers");
    servers[1].resume();
    assert!(matches!(
        told.reason,
        LostReason::Unconfirmed | LostReason::Taken
    ));
    servers[0].start_again();
}

#[test]
fn mutual_exclusion_holds_while_masters_restart_after_more_than_a_lease() {
    let mut servers = servers(3);
    let lease = Duration::from_millis(300);
    let clients: Vec<Client> = (0..2)
        .map(|_| masters(&servers, lease, Duration::from_millis(50)))
        .collect();
    let inside = Arc::new(AtomicUsize::new(0));
    let counter = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..8)
        .map(|n| {
            let lock = clients[n % 2].lock("counter").expect("valid name");
            let (inside, counter, stop) = (inside.clone(), counter.clone(), stop.clone());
            thread::spawn(move || {
                let mut done = 0;
                while !stop.load(Ordering::SeqCst) {
                    let Ok(Some(guard)) = lock.try_lock_for(Duration::from_millis(500)) else {
                        continue;
                    };
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                    let seen = counter.load(Ordering::SeqCst);
                    thread::sleep(Duration::from_micros(200));
                    counter.store(seen + 1, Ordering::SeqCst);
                    inside.fetch_sub(1, Ordering::SeqCst);
                    drop(guard);
                    done += 1;
                }
                done
            })
        })
        .collect();
    for round in 0..3 {
        let victim = round % 3;
        thread::sleep(lease);
        servers[victim].stop();
        thread::sleep(lease * 2);
        servers[victim].start_again();
    }
    thread::sleep(lease);
    stop.store(true, Ordering::SeqCst);
    let done: usize = workers
        .into_iter()
        .map(|worker| worker.join().expect("no two holders"))
        .sum();
    assert!(done > 50, "only {done} critical sections");
    assert_eq!(counter.load(Ordering::SeqCst), done, "no update was lost");
}

#[test]
fn bad_settings_are_refused_and_a_down_master_is_allowed() {
    let server = RedisServer::start();
    let url = server.url();
    let refused = |builder: ClientBuilder| match builder.build() {
        Err(Error::InvalidArgument(text)) => text,
        other => panic!("expected a refusal, got {other:?}"),
    };
    assert!(refused(Client::redlock(Vec::<String>::new())).contains("at least one"));
    assert!(refused(Client::redlock([url.clone(), url.clone()])).contains("one server"));
    let three = || {
        let others = servers(2);
        let urls: Vec<String> = std::iter::once(url.clone())
            .chain(others.iter().map(RedisServer::url))
            .collect();
        (others, urls)
    };
    let (_others, urls) = three();
    assert!(refused(Client::redlock(urls.clone()).quorum(1)).contains("quorum"));
    assert!(refused(Client::redlock(urls.clone()).quorum(4)).contains("quorum"));
    assert!(
        refused(Client::redlock(urls.clone()).command_timeout(Duration::ZERO))
            .contains("above zero")
    );

    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let mut with_down = urls[..2].to_vec();
    with_down.push(format!("redis://127.0.0.1:{closed}"));
    let redlock = Client::redlock(with_down)
        .command_timeout(Duration::from_millis(100))
        .build()
        .expect("a master down at build time is allowed");
    let guard = redlock
        .lock("two-of-three")
        .expect("valid name")
        .try_lock()
        .expect("two masters answer")
        .expect("two of three is a quorum");
    guard.unlock().expect("held");
}

#[test]
fn multilock_is_all_or_nothing() {
    let server = RedisServer::start();
    let (mine, theirs) = (client(&server), client(&server));
    let set = MultiLock::new([
        mine.lock("a").expect("valid"),
        mine.lock("b").expect("valid"),
        mine.lock("c").expect("valid"),
    ])
    .expect("three locks");
    let taken = theirs
        .lock("b")
        .expect("valid")
        .with_lease(Duration::from_secs(30))
        .lock()
        .expect("free");
    assert!(set.try_lock().expect("reachable").is_none());
    for name in ["a", "c"] {
        assert!(!mine
            .lock(name)
            .expect("valid")
            .is_locked()
            .expect("reachable"));
    }
    drop(taken);
    let guard = set.try_lock().expect("reachable").expect("all free");
    assert_eq!(guard.guards().len(), 3);
    assert!(!guard.is_lost());
    guard.unlock().expect("held");
    assert!(MultiLock::new([
        mine.lock("a").expect("valid"),
        mine.lock("a").expect("valid")
    ])
    .is_err());
    assert!(MultiLock::new(Vec::new()).is_err());

    // Lost when any member is lost.
    let short = common::client_with_lease(&server, Duration::from_millis(300));
    let set = MultiLock::new([
        short.lock("x").expect("valid"),
        short.lock("y").expect("valid"),
    ])
    .expect("two locks");
    let guard = set.lock().expect("free");
    let lost = guard.lost_signal();
    let _: i64 = server.connection().del("{y}").expect("DEL");
    let told = lost.recv_timeout(Duration::from_secs(5)).expect("told");
    assert_eq!((told.name.as_str(), told.reason), ("y", LostReason::Taken));
    assert!(guard.is_lost());
}

#[test]
fn overlapping_multilocks_never_deadlock_and_never_overlap() {
    let server = RedisServer::start();
    let clients = [client(&server), client(&server)];
    let names = ["a", "b", "c", "d"];
    let in_use: Arc<Vec<AtomicBool>> =
        Arc::new(names.iter().map(|_| AtomicBool::new(false)).collect());
    let sets: [&[usize]; 6] = [&[0, 1], &[1, 2], &[2, 3, 0], &[3, 1], &[0, 2], &[1, 2, 3]];
    let workers: Vec<_> = sets
        .iter()
        .enumerate()
        .map(|(n, set)| {
            let client = clients[n % 2].clone();
            // Given in a scrambled order: the MultiLock orders them itself.
            let locks: Vec<_> = set
                .iter()
                .rev()
                .map(|&i| client.lock(names[i]).expect("valid"))
                .collect();
            let multi = MultiLock::new(locks).expect("distinct locks");
            let (set, in_use) = (set.to_vec(), in_use.clone());
            thread::spawn(move || {
                for _ in 0..60 {
                    let guard = multi.lock().expect("reachable");
                    for &i in &set {
                        assert!(
                            !in_use[i].swap(true, Ordering::SeqCst),
                            "{} held twice",
                            names[i]
                        );
                    }
                    thread::sleep(Duration::from_micros(300));
                    for &i in &set {
                        in_use[i].store(false, Ordering::SeqCst);
                    }
                    guard.unlock().expect("held");
                }
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    for worker in workers {
        while !worker.is_finished() {
            assert!(Instant::now() < deadline, "deadlocked");
            thread::sleep(Duration::from_millis(10));
        }
        worker.join().expect("never held twice");
    }
}

#[test]
fn inspecting_with_fewer_than_a_quorum_answering_is_unavailable_not_free() {
    let mut servers = servers(3);
    let client = masters(
        &servers,
        Duration::from_secs(10),
        Duration::from_millis(300),
    );
    let lock = client.lock("inspected").expect("valid");
    let _guard = lock.try_lock().expect("masters up").expect("free");
    assert!(lock.inspect().expect("all answer").is_held());
    servers[2].pause();
    assert!(
        lock.inspect()
            .expect("a frozen master costs the others nothing")
            .is_held(),
        "held on the two masters that answer"
    );
    servers[2].resume();
    servers[0].stop();
    assert!(lock.inspect().expect("a quorum answers").is_held());
    servers[1].stop();
    // The hold may stand on a quorum that counts the stopped masters: the one that answers
    // cannot call the lock free.
    match lock.inspect() {
        Err(Error::Unavailable { .. }) => {}
        other => panic!("one master of three answered: {other:?}"),
    }
}
