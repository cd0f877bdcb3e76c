//! The lock on a real ZooKeeper (Debian's, started by the testkit): every public method, mutual
//! exclusion between clients, the recipe's hard cases, the session as the lease, and hostile
//! peers.

mod common;

use common::election::an_election_works;
use common::methods::{every_public_method, Offers};
use redis_lease::{Client, Error, LostReason};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};
use testkit::{wait_until, Proxy, ZooKeeper, ZooKeeperEnsemble};

/// The session timeout, which is every hold's lease.
const SESSION: Duration = Duration::from_millis(600);

fn client(hosts: &str) -> Client {
    client_with(hosts, SESSION)
}

/// A client of `hosts` whose session timeout (every hold's lease) is `lease`.
fn client_with(hosts: &str, lease: Duration) -> Client {
    Client::zookeeper([hosts])
        .default_lease(lease)
        .connect_timeout(Duration::from_secs(1))
        .command_timeout(Duration::from_secs(1))
        .build()
        .expect("valid settings")
}

#[test]
fn every_public_method_works_on_zookeeper() {
    let zk = ZooKeeper::start_with(&["forceSync=no"]);
    let client = client(&zk.connect_string());
    every_public_method(
        &client,
        Offers {
            fenced: true,
            server_ttl: false,
            long_lease: SESSION,
        },
    );
}

#[test]
fn an_election_works_on_zookeeper() {
    let zk = ZooKeeper::start_with(&["forceSync=no"]);
    let hosts = zk.connect_string();
    an_election_works(&client(&hosts), &client(&hosts), "leaders/scheduler");
}

#[test]
fn clients_exclude_each_other_and_tokens_rise_with_each_holder() {
    let zk = ZooKeeper::start_with(&["forceSync=no"]);
    let inside = Arc::new(AtomicBool::new(false));
    let tokens = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..3)
        .flat_map(|_| {
            let client = Arc::new(client(&zk.connect_string()));
            (0..2).map(move |_| Arc::clone(&client))
        })
        .map(|client| {
            let (inside, tokens) = (Arc::clone(&inside), Arc::clone(&tokens));
            thread::spawn(move || {
                let lock = client.lock("shared/section").expect("valid");
                for _ in 0..15 {
                    let guard = lock
                        .try_lock_for(Duration::from_secs(20))
                        .expect("reachable")
                        .expect("acquired in time");
                    assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                    tokens
                        .lock()
                        .expect("not poisoned")
                        .push(guard.fencing_token().expect("a token"));
                    thread::sleep(Duration::from_millis(1));
                    inside.store(false, Ordering::SeqCst);
                    guard.unlock().expect("held");
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("no panic");
    }
    let tokens = tokens.lock().expect("not poisoned");
    assert_eq!(tokens.len(), 90);
    assert!(
        tokens.windows(2).all(|pair| pair[0] < pair[1]),
        "tokens rise in the order the lock was held: {tokens:?}"
    );
}

#[test]
fn a_waiter_is_woken_by_the_release_and_gives_up_its_place_when_it_stops_waiting() {
    let zk = ZooKeeper::start_with(&["forceSync=no"]);
    let (holder, waiter) = (client(&zk.connect_string()), client(&zk.connect_string()));
    let held = holder.lock("queue").expect("valid").lock().expect("free");
    // A try that fails leaves no node in the queue.
    let lock = waiter.lock("queue").expect("valid");
    assert!(lock.try_lock().expect("reachable").is_none());
    wait_until(
        "the failed try's node is gone",
        Duration::from_secs(5),
        || lock.inspect().expect("reachable").waiting == Some(0),
    );
    let released_at = Arc::new(Mutex::new(None));
    let waiting = {
        let released_at = Arc::clone(&released_at);
        thread::spawn(move || {
            let guard = lock
                .try_lock_for(Duration::from_secs(10))
                .expect("reachable")
                .expect("acquired");
            let released = released_at
                .lock()
                .expect("not poisoned")
                .expect("released first");
            (
                guard.fencing_token(),
                Instant::now().duration_since(released),
            )
        })
    };
    let state = holder.lock("queue").expect("valid");
    wait_until("the waiter queues", Duration::from_secs(5), || {
        state.inspect().expect("reachable").waiting == Some(1)
    });
    let token = held.fencing_token();
    *released_at.lock().expect("not poisoned") = Some(Instant::now());
    held.unlock().expect("held");
    let (next, after) = waiting.join().expect("no panic");
    assert!(next > token, "{next:?} after {token:?}");
    // Woken by the watch on its predecessor, not by the one-second re-check.
    assert!(after < Duration::from_millis(900), "woken after {after:?}");
}

#[test]
fn a_holder_cut_off_is_told_before_its_session_expires_and_only_then_does_another_hold() {
    let zk = ZooKeeper::start_with(&["forceSync=no"]);
    let proxy = Proxy::start(zk.connect_string().parse().expect("an address"));
    let cut_off = client(&proxy.addr());
    let other = client(&zk.connect_string());
    let guard = cut_off
        .lock("partition")
        .expect("valid")
        .lock()
        .expect("free");
    let told = guard.lost_signal();
    let token = guard.fencing_token().expect("a token");
    let next = thread::spawn(move || {
        let guard = other
            .lock("partition")
            .expect("valid")
            .try_lock_for(Duration::from_secs(10))
            .expect("reachable")
            .expect("free once the session expired");
        (guard, Instant::now())
    });
    thread::sleep(Duration::from_millis(50));
    proxy.freeze();
    let lost = told.recv_timeout(SESSION * 3).expect("told it is lost");
    assert_eq!(lost.reason, LostReason::Unconfirmed);
    let (next, acquired_at) = next.join().expect("no panic");
    assert!(
        lost.valid_until <= acquired_at,
        "the old hold was valid until {:?} after the new one began",
        lost.valid_until - acquired_at
    );
    assert!(next.fencing_token().expect("a token") > token);
    // The expired session is never brought back. While the old guard lives and another client
    // holds, the same owner's attempt is no re-entry of the dead hold (CURATOR-604), and the old
    // holder's release is refused.
    // (The first call after the cut may find the session expired and say so: a new session
    // opens behind it.)
    proxy.heal();
    let again = cut_off.lock("partition").expect("valid");
    let mut answered = false;
    for _ in 0..20 {
        match again.try_lock() {
            Ok(reentered) => {
                assert!(
                    reentered.is_none(),
                    "took the lock while another client held it: {reentered:?}"
                );
                answered = true;
                break;
            }
            Err(Error::Unavailable { .. }) => thread::sleep(Duration::from_millis(50)),
            Err(other) => panic!("{other:?}"),
        }
    }
    assert!(answered, "no answer from a new session");
    assert!(matches!(guard.unlock(), Err(Error::NotOwner { .. })));
    next.unlock().expect("held");
    // The cut-off client opens a new session for new acquisitions.
    let again = cut_off
        .lock("partition")
        .expect("valid")
        .try_lock_for(Duration::from_secs(5))
        .expect("reachable")
        .expect("free");
    again.unlock().expect("held");
}

/// etcd #11456 and #19597: a waiter whose session expires while it waits (cut off from the
/// ensemble past its session timeout). It never takes the lock while the holder holds (its old
/// node went with its session, and no answer of the old session counts), and it does not wait
/// for ever on a node that is gone: once the holder lets go, it holds within a moment, with a
/// higher token.
#[test]
fn a_waiter_whose_session_expires_never_holds_early_and_holds_once_the_lock_is_freed() {
    let zk = ZooKeeper::start_with(&["forceSync=no"]);
    let proxy = Proxy::start(zk.connect_string().parse().expect("an address"));
    let holder = client(&zk.connect_string());
    let waiter = client(&proxy.addr());
    let held = holder
        .lock("expiring-waiter")
        .expect("valid")
        .lock()
        .expect("free");
    let (done, outcome) = std::sync::mpsc::channel();
    let waiting = {
        let lock = waiter.lock("expiring-waiter").expect("valid");
        thread::spawn(move || {
            let taken = lock.try_lock_for(Duration::from_secs(20));
            let _ = done.send((
                taken.map(|guard| guard.map(|g| (g.fencing_token(), g))),
                Instant::now(),
            ));
        })
    };
    thread::sleep(SESSION / 2);
    proxy.freeze();
    thread::sleep(SESSION * 3);
    proxy.heal();
    thread::sleep(SESSION * 2);
    assert!(!held.is_lost(), "the holder's session lives");
    if let Ok((taken, _)) = outcome.try_recv() {
        assert!(
            !matches!(taken, Ok(Some(_))),
            "the waiter held while the holder held: {taken:?}"
        );
        panic!("the waiter gave up instead of waiting: {taken:?}");
    }
    let token = held.fencing_token();
    let released_at = Instant::now();
    held.unlock().expect("released");
    let (taken, at) = outcome
        .recv_timeout(Duration::from_secs(5))
        .expect("the waiter took the lock once it was freed");
    let (next_token, guard) = taken.expect("reachable").expect("held");
    assert!(at >= released_at, "the waiter held before the release");
    assert!(
        at - released_at < Duration::from_secs(2),
        "the waiter held {:?} after the release",
        at - released_at
    );
    assert!(next_token > token);
    guard.unlock().expect("released");
    waiting.join().expect("no panic");
}

/// CURATOR-678 and CURATOR-486: a release cut off on its way (the connection closed before the
/// delete reached the ensemble), the session living on. The release says it could not be
/// confirmed; the node it did not delete is not left to block the lock for the session's life:
/// another client takes the lock, and the same client takes it again afresh.
#[test]
fn a_release_cut_off_leaves_no_node_to_block_the_lock() {
    let zk = ZooKeeper::start_with(&["forceSync=no"]);
    let proxy = Proxy::start(zk.connect_string().parse().expect("an address"));
    let cut_off = client_with(&proxy.addr(), Duration::from_secs(4));
    let other = client(&zk.connect_string());
    let guard = cut_off
        .lock("cut-release")
        .expect("valid")
        .lock()
        .expect("free");
    let token = guard.fencing_token().expect("a token");
    proxy.cut();
    let released = guard.unlock();
    assert!(
        matches!(released, Err(Error::Unavailable { .. })),
        "{released:?}"
    );
    proxy.heal();
    // Well within the session's 4 s: the release is finished, not left to the session's end.
    let next = other
        .lock("cut-release")
        .expect("valid")
        .try_lock_for(Duration::from_secs(3))
        .expect("reachable")
        .expect("freed before the session could end");
    assert!(next.fencing_token().expect("a token") > token);
    next.unlock().expect("held");
    let again = cut_off
        .lock("cut-release")
        .expect("valid")
        .try_lock_for(Duration::from_secs(3))
        .expect("reachable")
        .expect("free");
    assert_eq!(again.holds_at_acquire(), 1, "a fresh hold, not a re-entry");
    again.unlock().expect("held");
}

#[test]
fn a_leader_cut_off_is_told_before_its_session_expires_and_observers_are_woken_by_watches() {
    let zk = ZooKeeper::start_with(&["forceSync=no"]);
    let proxy = Proxy::start(zk.connect_string().parse().expect("an address"));
    let cut_off = client(&proxy.addr());
    let other = client(&zk.connect_string());
    let leadership = cut_off
        .election("partition")
        .expect("valid")
        .campaign("a")
        .expect("free");
    let told = leadership.lost_signal();
    let election = other.election("partition").expect("valid");
    let observer = election.observe().expect("reachable");
    let first = observer
        .changes()
        .recv_timeout(Duration::from_secs(5))
        .expect("the leader at the start")
        .expect("a leader");
    assert_eq!((first.term, first.value.as_str()), (leadership.term(), "a"));
    proxy.freeze();
    let next = election
        .try_campaign_for(Duration::from_secs(10), "b")
        .expect("reachable")
        .expect("leads once the session expired");
    let led_at = Instant::now();
    let lost = told.try_recv().expect("told before the next term began");
    assert!(lost.valid_until <= led_at);
    assert!(next.term() > leadership.term());
    // The session's end, and the next leader's value, reach the observer by its watches.
    let mut seen = Vec::new();
    loop {
        let change = observer
            .changes()
            .recv_timeout(Duration::from_secs(5))
            .expect("a change");
        let done = change
            .as_ref()
            .is_some_and(|leader| leader.term == next.term());
        seen.push(change);
        if done {
            break;
        }
    }
    assert!(
        led_at.elapsed() < Duration::from_millis(900),
        "woken {:?} after, not by a watch: {seen:?}",
        led_at.elapsed()
    );
    proxy.heal();
    assert!(leadership.is_lost());
}

#[test]
fn a_session_that_reconnects_within_its_timeout_keeps_its_hold() {
    let zk = ZooKeeper::start_with(&["forceSync=no"]);
    let proxy = Proxy::start(zk.connect_string().parse().expect("an address"));
    let client = client(&proxy.addr());
    let guard = client.lock("blip").expect("valid").lock().expect("free");
    let token = guard.fencing_token();
    proxy.cut();
    thread::sleep(SESSION / 5);
    proxy.heal();
    thread::sleep(SESSION * 2);
    assert!(!guard.is_lost(), "{:?}", guard.lost());
    let state = client
        .lock("blip")
        .expect("valid")
        .inspect()
        .expect("reachable");
    assert_eq!(state.hold_token, token);
    guard.unlock().expect("still held");
}

#[test]
fn a_hold_survives_the_loss_of_its_server_in_an_ensemble_and_tokens_keep_rising() {
    let mut ensemble = ZooKeeperEnsemble::start_with(3, &["forceSync=no"]);
    let client = Client::zookeeper([ensemble.connect_string()])
        .default_lease(Duration::from_secs(4))
        .command_timeout(Duration::from_secs(1))
        .build()
        .expect("valid settings");
    let lock = client.lock("elections").expect("valid");
    let first = lock.lock().expect("free");
    let token = first.fencing_token().expect("a token");
    let leader = ensemble.leader();
    ensemble.stop(leader);
    // The session moves to another server, and a new leader is elected; the hold stays.
    wait_until("the ensemble serves again", Duration::from_secs(20), || {
        lock.inspect().is_ok()
    });
    assert!(!first.is_lost(), "{:?}", first.lost());
    // The ensemble may still be settling: a release it does not answer is completed in the
    // background, and the lock is free again either way.
    match first.unlock() {
        Ok(()) | Err(Error::Unavailable { .. }) => {}
        Err(other) => panic!("the hold was kept: {other}"),
    }
    let second = lock
        .try_lock_for(Duration::from_secs(10))
        .expect("reachable")
        .expect("free");
    assert!(second.fencing_token().expect("a token") > token);
    second.unlock().expect("held");
}

#[test]
fn a_fixed_lease_frees_the_lock_when_it_runs_out_though_its_guard_lives() {
    let zk = ZooKeeper::start_with(&["forceSync=no"]);
    let (holder, other) = (client(&zk.connect_string()), client(&zk.connect_string()));
    let lease = SESSION / 2;
    let guard = holder
        .lock("fixed")
        .expect("valid")
        .with_lease(lease)
        .lock()
        .expect("free");
    let told = guard.lost_signal();
    let next = other
        .lock("fixed")
        .expect("valid")
        .try_lock_for(Duration::from_secs(10))
        .expect("reachable")
        .expect("free once the lease ran out");
    let lost = told.try_recv().expect("the holder was told first");
    assert_eq!(lost.reason, LostReason::Expired);
    assert!(next.fencing_token() > guard.fencing_token());
    assert!(matches!(guard.unlock(), Err(Error::NotOwner { .. })));
    next.unlock().expect("held");
}

#[test]
fn an_owner_that_takes_the_lock_again_after_a_loss_keeps_its_new_hold() {
    let zk = ZooKeeper::start_with(&["forceSync=no"]);
    let client = client(&zk.connect_string());
    let lock = client.lock("again").expect("valid");
    for _ in 0..5 {
        let fixed = lock.with_lease(SESSION / 4).lock().expect("free");
        let lost = fixed.lost_signal().recv_timeout(SESSION * 2);
        assert!(lost.is_ok(), "the fixed lease ran out");
        // The same owner, at once: the old hold's end in the server must not end this one.
        let renewed = lock
            .try_lock_for(Duration::from_secs(5))
            .expect("reachable");
        let renewed = renewed.expect("acquired");
        thread::sleep(SESSION);
        assert!(!renewed.is_lost(), "{:?}", renewed.lost());
        let state = lock.inspect().expect("reachable");
        assert_eq!(state.hold_token, renewed.fencing_token());
        drop(fixed);
        renewed.unlock().expect("held");
    }
}

#[test]
fn digest_credentials_are_sent_and_never_shown() {
    let zk = ZooKeeper::start_with(&["forceSync=no"]);
    let builder = Client::zookeeper([format!("{}/app/locks", zk.connect_string())])
        .zookeeper_auth("locker", "s3cret-digest")
        .default_lease(SESSION);
    assert!(!format!("{builder:?}").contains("s3cret"), "{builder:?}");
    let client = builder.build().expect("valid settings");
    assert!(!format!("{client:?}").contains("s3cret"));
    let guard = client
        .lock("jobs/nightly")
        .expect("valid")
        .lock()
        .expect("free");
    // Under the chroot: another client of the same chroot sees it, one without does not.
    let same = self::client(&format!("{}/app/locks", zk.connect_string()));
    let root = self::client(&zk.connect_string());
    assert!(same
        .lock("jobs/nightly")
        .expect("valid")
        .is_locked()
        .expect("reachable"));
    assert!(!root
        .lock("jobs/nightly")
        .expect("valid")
        .is_locked()
        .expect("reachable"));
    guard.unlock().expect("held");
}

#[test]
fn names_that_are_not_node_paths_are_refused() {
    let zk = ZooKeeper::start_with(&["forceSync=no"]);
    let client = client(&zk.connect_string());
    for name in ["/absolute", "a//b", "trailing/", "a/../b", "."] {
        assert!(
            matches!(client.lock(name), Err(Error::InvalidArgument(_))),
            "{name:?}"
        );
    }
    assert!(client.lock("jobs/nightly").is_ok());
}

#[test]
fn a_silent_port_or_a_server_that_is_not_zookeeper_fails_within_the_bound() {
    let silent = TcpListener::bind("127.0.0.1:0").expect("a port");
    let hosts = silent.local_addr().expect("an address").to_string();
    let talker = TcpListener::bind("127.0.0.1:0").expect("a port");
    let talker_hosts = talker.local_addr().expect("an address").to_string();
    thread::spawn(move || {
        for stream in talker.incoming().flatten() {
            let mut stream = stream;
            let _ = std::io::Write::write_all(&mut stream, b"-ERR unknown command\r\n");
        }
    });
    for hosts in [hosts, talker_hosts] {
        let client = client(&hosts);
        let started = Instant::now();
        let error = client
            .lock("x")
            .expect("valid")
            .try_lock()
            .expect_err("no ZooKeeper there");
        assert!(
            matches!(error, Error::Unavailable { .. } | Error::Protocol(_)),
            "{error}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
    }
    drop(silent);
}

#[test]
fn a_fair_lock_is_the_lock_in_line_and_a_wait_ends_when_cancelled() {
    let zk = ZooKeeper::start_with(&["forceSync=no"]);
    let hosts = zk.connect_string();
    let clients = |lease| client_with(&hosts, lease);
    common::primitives::fair_lock_grants_in_order(&clients, "fair");
    let client = clients(SESSION);
    // A wait on ZooKeeper ends when cancelled, its node withdrawn.
    let lock = client.lock("cancelled").expect("valid");
    let held = lock.lock().expect("free");
    let other = clients(SESSION).lock("cancelled").expect("valid");
    let cancel = redis_lease::Cancel::new();
    let waiter = {
        let cancel = cancel.clone();
        std::thread::spawn(move || other.cancel_on(&cancel).lock().map(drop))
    };
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(lock.inspect().expect("reachable").waiting, Some(1));
    cancel.cancel();
    let outcome = waiter.join().expect("no panic");
    assert!(
        matches!(outcome, Err(Error::Cancelled { .. })),
        "{outcome:?}"
    );
    wait_until("the node withdrawn", Duration::from_secs(5), || {
        lock.inspect().expect("reachable").waiting == Some(0)
    });
    drop(held);
}

#[test]
fn semaphores_and_read_write_locks_work_on_zookeeper() {
    use common::primitives::*;
    let zk = ZooKeeper::start_with(&["forceSync=no"]);
    let hosts = zk.connect_string();
    let clients = |lease| client_with(&hosts, lease);
    semaphore_bounds_its_holders(&clients, "s-bounds");
    semaphore_permits_change_while_held(&clients, "s-change");
    semaphore_permits_of_the_dead_come_back(&clients, "s-dead");
    read_write_lock_excludes_writers(&clients, "rw-excl");
    read_write_lock_does_not_starve_writers(&clients, "rw-starve");
    read_write_lock_passes_a_reader_queued_between_two_writers(&clients, "rw-queued");
    read_write_lock_forgets_writers_that_left(&clients, "rw-left");
    waits_end_when_cancelled(&clients, "cancel");
}

/// A try that finds the semaphore full has withdrawn its node by the time it returns: left for
/// the background, the node would count as a permit held against this client's next try.
#[test]
fn a_failed_try_leaves_no_node_behind_when_it_returns() {
    let zk = ZooKeeper::start_with(&["forceSync=no"]);
    let client = client(&zk.connect_string());
    let semaphore = client.semaphore("s-withdrawn", 1).expect("valid");
    let held = semaphore.acquire().expect("free");
    let ephemerals = || {
        let dump = testkit::zookeeper_four_letter_word(zk.port(), "dump").expect("dump");
        dump.lines()
            .filter(|line| line.contains("s-withdrawn"))
            .count()
    };
    assert_eq!(ephemerals(), 1, "the holder's node");
    for round in 0..20 {
        assert!(semaphore.try_acquire().expect("reachable").is_none());
        assert_eq!(
            ephemerals(),
            1,
            "round {round}: a failed try's node is left"
        );
    }
    held.unlock().expect("held");
    semaphore
        .try_acquire()
        .expect("reachable")
        .expect("free once released")
        .unlock()
        .expect("held");
}

/// A server that offers TTL nodes (which a latch is), and looks for lapsed ones every 100 ms.
fn ttl_server() -> ZooKeeper {
    ZooKeeper::start_with_properties(
        &["forceSync=no", "extendedTypesEnabled=true"],
        &["znode.container.checkIntervalMs=100"],
    )
}

#[test]
fn a_latch_works_on_zookeeper() {
    use common::latch::*;
    let zk = ttl_server();
    let hosts = zk.connect_string();
    let clients = || client(&hosts);
    count_downs_from_many_clients_open_the_latch_once(&clients, "jobs/batch");
    a_latch_is_set_only_from_zero_and_its_waiters_wait_for_their_round(&clients, "rounds");
    a_latch_left_behind_lapses_and_its_waiter_is_told(&clients, "left", Duration::from_secs(2));
}

#[test]
fn a_latch_is_refused_clearly_by_an_ensemble_without_ttl_nodes() {
    let zk = ZooKeeper::start_with(&["forceSync=no"]);
    let latch = client(&zk.connect_string()).latch("batch").expect("valid");
    let refused = latch.set_count(2).expect_err("no TTL nodes");
    assert!(
        matches!(&refused, Error::Refused { .. })
            && refused.to_string().contains("extendedTypesEnabled"),
        "{refused}"
    );
    assert_eq!(latch.count().expect("reachable"), 0, "nothing made");
}

/// The log of a lock `name` on ZooKeeper: an entry is a sequential node under `/log/<name>`
/// holding it, and its count one under `/count/<name>`, made in one transaction.
fn append_zk(name: &str, entry: &str) -> redis_lease::Write {
    use redis_lease::zookeeper_blocking::{CreateMode, Op};
    redis_lease::Write::Zk(vec![
        Op::create(
            format!("/log/{name}/e-"),
            entry.as_bytes().to_vec(),
            CreateMode::PersistentSequential,
        ),
        Op::create(
            format!("/count/{name}/c-"),
            Vec::new(),
            CreateMode::PersistentSequential,
        ),
    ])
}

/// The count a transaction of [`append_zk`] left: its counting node's sequence, plus one.
fn zk_count(written: &redis_lease::Written) -> Option<u64> {
    use redis_lease::zookeeper_blocking::OpResult;
    let redis_lease::Written::Zk(results) = written else {
        return None;
    };
    match results.as_slice() {
        [OpResult::Created { .. }, OpResult::Created { path }] => {
            let sequence: u64 = path.rsplit_once('-')?.1.parse().ok()?;
            Some(sequence + 1)
        }
        _ => None,
    }
}

#[test]
fn writes_are_made_only_while_the_hold_holds_on_zookeeper() {
    use common::held_write::*;
    use redis_lease::zookeeper_blocking::{Config, Op, Session};
    let zk = ZooKeeper::start_with(&["forceSync=no"]);
    let hosts = zk.connect_string();
    let soon = || Instant::now() + Duration::from_secs(5);
    let session = Session::connect(Config::new(vec![hosts.clone()]), soon(), Arc::new(|_| {}))
        .expect("connect");
    for name in ["stock", "ordered", "stock-permits"] {
        session
            .ensure_path(&format!("/log/{name}"), soon())
            .expect("made");
        session
            .ensure_path(&format!("/count/{name}"), soon())
            .expect("made");
    }
    let read = |name: &str| {
        let (mut entries, _) = session
            .get_children(&format!("/log/{name}"), false, soon())
            .expect("listed");
        entries.sort();
        let logged = entries
            .iter()
            .map(|entry| {
                let (data, _) = session
                    .get_data(&format!("/log/{name}/{entry}"), false, soon())
                    .expect("read");
                String::from_utf8(data).expect("text")
            })
            .collect();
        let (counted, _) = session
            .get_children(&format!("/count/{name}"), false, soon())
            .expect("listed");
        (logged, counted.len() as u64)
    };
    let clients = |lease| client_with(&hosts, lease);
    let log = Log {
        append: &append_zk,
        read: &read,
        count_of: zk_count,
    };
    writes_are_made_only_while_the_hold_holds(&clients, &log, "stock");
    writes_while_held_follow_the_holds_in_token_order(&clients, &log, "ordered");

    // An operation that fails refuses the whole write, and names itself.
    let guard = client(&hosts)
        .lock("stock")
        .expect("valid")
        .lock()
        .expect("free");
    let failing = redis_lease::Write::Zk(vec![
        Op::create(
            "/log/stock/e-",
            b"half".to_vec(),
            redis_lease::zookeeper_blocking::CreateMode::PersistentSequential,
        ),
        Op::set_data("/count/stock", Vec::new(), Some(99)),
    ]);
    let refused = guard.if_held(&failing);
    assert!(
        matches!(&refused, Err(Error::Refused { .. }))
            && refused
                .as_ref()
                .err()
                .is_some_and(|error| error.to_string().contains("operation 1")),
        "{refused:?}"
    );
    assert_eq!(read("stock").0, ["a1", "b1"], "nothing of it");
}
#[test]
fn a_rate_limiter_is_refused_at_construction_saying_why() {
    let zk = ZooKeeper::start_with(&["forceSync=no"]);
    let client = client(&zk.connect_string());
    for made in [
        client.rate_limiter("api", 10, Duration::from_secs(1)),
        client.cell_rate_limiter("api", 10, Duration::from_secs(1), 2),
    ] {
        assert!(
            matches!(&made, Err(redis_lease::Error::InvalidArgument(why))
                if why.contains("not offered on ZooKeeper") && why.contains("clock")),
            "{made:?}"
        );
    }
}
