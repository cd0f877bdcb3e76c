//! The lock on a Sentinel-managed primary when a Sentinel of three does not answer (frozen, or
//! a host that accepts connections and says nothing) or hears of a failover late: a majority of
//! answers is enough for every connection, holders are renewed on a promoted replica, and
//! fencing tokens never step back across a failover that one Sentinel alone performed.

mod common;

use redis_lease::{Client, Error};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};
use testkit::{SentinelSet, Silent};

/// How long a failover may take to become usable before a test fails.
const SETTLE: Duration = Duration::from_secs(20);

/// The most that one Sentinel of three that never answers may cost a new connection, in these
/// tests: twice the wait for late answers (100 ms, for the look-up and its confirmation) and
/// room for a loaded machine. The budget of each call is 2 s.
const SILENT_SENTINEL_COST: Duration = Duration::from_millis(800);

fn client_of(set: &SentinelSet, sentinels: Vec<String>) -> Client {
    Client::sentinel(set.master_name(), sentinels)
        .command_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(2))
        .build()
        .expect("valid settings")
}

/// Takes and releases `name` on a new client of `sentinels` and returns how long it took.
fn time_a_first_lock(set: &SentinelSet, sentinels: Vec<String>, name: &str) -> Duration {
    let client = client_of(set, sentinels);
    let lock = client.lock(name).expect("valid");
    let began = Instant::now();
    let guard = lock
        .try_lock_for(Duration::from_secs(6))
        .unwrap_or_else(|error| panic!("{name}: {error}"))
        .unwrap_or_else(|| panic!("{name}: free, yet not acquired"));
    let took = began.elapsed();
    guard.unlock().expect("held");
    took
}

#[test]
fn a_frozen_sentinel_anywhere_in_the_list_costs_a_new_connection_little() {
    let set = SentinelSet::start();
    for frozen in 0..3 {
        set.sentinels()[frozen].pause();
        let took = time_a_first_lock(&set, set.sentinel_urls(), &format!("frozen-{frozen}"));
        set.sentinels()[frozen].resume();
        assert!(
            took < SILENT_SENTINEL_COST,
            "with Sentinel {frozen} of 3 frozen, the first lock took {took:?}"
        );
    }
}

#[test]
fn a_sentinel_that_accepts_and_never_answers_costs_a_new_connection_little() {
    let set = SentinelSet::start();
    let silent = Silent::start();
    for place in 0..3 {
        let mut sentinels = set.sentinel_urls();
        sentinels[place] = silent.url();
        let took = time_a_first_lock(&set, sentinels, &format!("silent-{place}"));
        assert!(
            took < SILENT_SENTINEL_COST,
            "with a silent host in place {place} of 3, the first lock took {took:?}"
        );
    }
}

#[test]
fn a_holder_is_renewed_on_the_promoted_replica_while_the_last_sentinel_is_frozen() {
    let mut set = SentinelSet::start();
    let lease = Duration::from_secs(9);
    let client = Client::sentinel(set.master_name(), set.sentinel_urls())
        .command_timeout(Duration::from_secs(1))
        .connect_timeout(Duration::from_secs(1))
        .replica_acks(1, Duration::from_millis(500))
        .default_lease(lease)
        .build()
        .expect("valid settings");
    let lock = client.lock("renewed-across").expect("valid");
    let guard =
        common::retried_while_unavailable(SETTLE, || lock.try_lock()).expect("free, yet acquired");
    set.sentinels()[2].pause();
    let old = set.kill_primary();
    let new = set.wait_primary_changed(old);
    // The old primary comes back as the new one's replica, which acknowledges renewals there.
    set.start_again(old);
    set.wait_replicated();
    assert!(!guard.is_lost(), "lost before the failover ended");
    // Past the lease the hold had when its primary died: only renewals on `new` keep it.
    thread::sleep(lease + Duration::from_secs(1));
    assert!(!guard.is_lost(), "the hold was lost: {:?}", guard.lost());
    let role: redis::Value = redis::cmd("ROLE")
        .query(&mut set.server(new).connection())
        .expect("ROLE");
    let ttl = common::retried_while_unavailable(SETTLE, || lock.remaining_ttl());
    assert!(
        ttl.is_some_and(|ttl| ttl > lease / 2),
        "the lock's key on the promoted replica ({role:?}) has {ttl:?} left"
    );
    set.sentinels()[2].resume();
    guard.unlock().expect("held");
}

/// One acquisition: when it began, when it returned, and its token.
#[derive(Clone, Copy, Debug)]
struct Taken {
    began: Instant,
    returned: Instant,
    token: u64,
}

/// The acquisitions whose token is not above every token returned before they began.
fn steps_back(taken: &[Taken]) -> Vec<(Taken, Taken)> {
    let mut steps = Vec::new();
    for later in taken {
        let highest_before = taken
            .iter()
            .filter(|earlier| earlier.returned < later.began)
            .max_by_key(|earlier| earlier.token);
        if let Some(earlier) = highest_before {
            if earlier.token >= later.token {
                steps.push((*earlier, *later));
            }
        }
    }
    steps
}

#[test]
fn tokens_never_step_back_across_a_failover_one_sentinel_performed() {
    let set = SentinelSet::start();
    let taken = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..4)
        .map(|index| {
            // Each client lists the Sentinels starting from another one.
            let mut sentinels = set.sentinel_urls();
            sentinels.rotate_left(index % 3);
            let client = client_of(&set, sentinels);
            let (taken, stop) = (Arc::clone(&taken), Arc::clone(&stop));
            thread::spawn(move || {
                let lock = client.lock("stepped").expect("valid");
                while !stop.load(Ordering::Acquire) {
                    let began = Instant::now();
                    match lock.with_lease(Duration::from_millis(300)).try_lock() {
                        Ok(Some(guard)) => {
                            let returned = Instant::now();
                            let token = guard.fencing_token().expect("a token");
                            taken.lock().expect("not poisoned").push(Taken {
                                began,
                                returned,
                                token,
                            });
                            // A release the failover cuts off lapses with its lease.
                            let _ = guard.unlock();
                        }
                        Ok(None) | Err(Error::Unavailable { .. }) => {
                            thread::sleep(Duration::from_millis(5));
                        }
                        Err(error) => panic!("{error}"),
                    }
                }
            })
        })
        .collect();
    common::wait_until("the clients to take the lock", || {
        taken.lock().expect("not poisoned").len() >= 20
    });
    let before = taken.lock().expect("not poisoned").len();
    // A frozen Sentinel tells its listeners nothing, and the last one performs the failover:
    // clients must hear of it from a Sentinel they list later all the same.
    set.sentinels()[1].pause();
    let old = set.request_failover(2);
    set.wait_primary_changed(old);
    // The old primary stays writable meanwhile, as it does until the Sentinels convert it.
    thread::sleep(Duration::from_millis(1500));
    set.sentinels()[1].resume();
    thread::sleep(Duration::from_millis(1000));
    set.demote(old);
    common::wait_until("the clients to take the lock on the new primary", || {
        taken.lock().expect("not poisoned").len() >= before + 40
    });
    stop.store(true, Ordering::Release);
    for worker in workers {
        worker.join().expect("a worker");
    }
    let taken = taken.lock().expect("not poisoned");
    let newest = taken.iter().map(|taken| taken.token >> 44).max();
    let oldest = taken.iter().map(|taken| taken.token >> 44).min();
    assert!(newest > oldest, "no acquisition on the new primary");
    let steps = steps_back(&taken);
    assert!(
        steps.is_empty(),
        "{} of {} acquisitions stepped back, e.g. token {} returned before {} began: {:?}",
        steps.len(),
        taken.len(),
        steps[0].0.token,
        steps[0].1.token,
        &steps[..steps.len().min(5)]
    );
}
