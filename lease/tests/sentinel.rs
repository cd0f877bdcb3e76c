//! The lock on a Sentinel-managed primary with a replica and three Sentinels: it follows a
//! failover, its fencing tokens rise across one that lost the last acquisition, and with replica
//! acknowledgements required it hands out only holds a replica has; and it reaches Sentinels and
//! data servers that require a password, or TLS with a client certificate.

mod common;

use common::election::{an_election_works, next_change, until_reported};

use redis_lease::{Client, Error, LeaseGuard, Lock};
use std::thread;
use std::time::{Duration, Instant};
use testkit::SentinelSet;

/// How long a failover may take to become usable before a test fails.
const SETTLE: Duration = Duration::from_secs(20);

fn client(set: &SentinelSet) -> Client {
    Client::sentinel(set.master_name(), set.sentinel_urls())
        .command_timeout(Duration::from_secs(1))
        .connect_timeout(Duration::from_secs(1))
        .build()
        .expect("valid settings")
}

fn acked_client(set: &SentinelSet) -> Client {
    Client::sentinel(set.master_name(), set.sentinel_urls())
        .command_timeout(Duration::from_secs(1))
        .connect_timeout(Duration::from_secs(1))
        .replica_acks(1, Duration::from_millis(300))
        .build()
        .expect("valid settings")
}

/// The epoch a token carries in its high bits.
fn epoch(token: u64) -> u64 {
    token >> 44
}

/// `lock` taken with `lease`, tried again while the deployment is unavailable (a failover in
/// progress), failing the test after [`SETTLE`].
fn lock_when_available(lock: &Lock, lease: Duration) -> LeaseGuard {
    when_available(|| lock.with_lease(lease).try_lock())
}

/// Takes `lock` once the deployment is available again, checks that its token is of a higher
/// epoch than `before`, and releases it.
fn next_token_is_of_a_higher_epoch(lock: &Lock, before: u64) {
    let guard = lock_when_available(lock, Duration::from_secs(30));
    let token = guard.fencing_token().expect("a token");
    assert!(
        epoch(token) > epoch(before),
        "tokens {before} then {token}: the epoch did not rise"
    );
    guard.unlock().expect("held");
}

/// `lock` taken with the client's default (renewed) lease, as [`lock_when_available`].
fn lock_when_available_renewed(lock: &Lock) -> LeaseGuard {
    when_available(|| lock.try_lock())
}

/// The guard `attempt` takes, attempted again while the deployment is unavailable.
fn when_available(attempt: impl FnMut() -> redis_lease::Result<Option<LeaseGuard>>) -> LeaseGuard {
    retried_while_unavailable(attempt).expect("the lock is held")
}

/// What `call` returns, called again while the deployment is unavailable (a failover in
/// progress), failing the test after [`SETTLE`].
fn retried_while_unavailable<T>(call: impl FnMut() -> redis_lease::Result<T>) -> T {
    common::retried_while_unavailable(SETTLE, call)
}

/// How many connections subscribed to a channel the Sentinel on `sentinel` has (Sentinels
/// subscribe to each other on the data servers, not on one another: these are clients').
fn subscribers(sentinel: &testkit::RedisServer) -> usize {
    subscriber_ids(sentinel).len()
}

/// The client ids of the connections subscribed to a channel on `sentinel`.
fn subscriber_ids(sentinel: &testkit::RedisServer) -> Vec<String> {
    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut sentinel.connection())
        .expect("CLIENT LIST");
    clients
        .lines()
        .filter(|line| line.split(' ').any(|field| field == "sub=1"))
        .filter_map(|line| line.split(' ').find_map(|field| field.strip_prefix("id=")))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_failover_listeners_follow_every_sentinel_and_leave_one_that_stopped_answering() {
    let set = SentinelSet::start();
    let client = client(&set);
    let lock = client.lock("listened").expect("valid");
    lock_when_available(&lock, Duration::from_secs(5))
        .unlock()
        .expect("held");
    let sentinels = set.sentinels();
    common::wait_until("a listener subscribes on every Sentinel", || {
        sentinels.iter().all(|sentinel| subscribers(sentinel) == 1)
    });
    let before = subscriber_ids(&sentinels[0]);
    sentinels[0].pause();
    // Its listener leaves it after a PING goes unanswered (1 s of quiet, then the command
    // timeout), and subscribes again once it answers: a new connection.
    thread::sleep(Duration::from_secs(3));
    assert_eq!(
        (subscribers(&sentinels[1]), subscribers(&sentinels[2])),
        (1, 1),
        "the other Sentinels' listeners stay"
    );
    sentinels[0].resume();
    common::wait_until(
        "the listener subscribes on the first Sentinel again",
        || {
            let now = subscriber_ids(&sentinels[0]);
            now.len() == 1 && now != before
        },
    );
    drop(client);
}

#[test]
fn the_lock_follows_a_failover_and_its_tokens_rise_with_the_epoch() {
    let set = SentinelSet::start();
    let client = client(&set);
    let lock = client.lock("follows").expect("valid");
    let first = lock
        .with_lease(Duration::from_secs(30))
        .lock()
        .expect("free");
    let before = first.fencing_token().expect("a token");
    first.unlock().expect("held");
    let second = lock
        .with_lease(Duration::from_secs(30))
        .lock()
        .expect("free");
    assert_eq!(second.fencing_token(), Some(before + 1));

    set.failover();
    // The hold was replicated before the coordinated failover: it is still held, by the old
    // guard, on the new primary.
    let state = retried_while_unavailable(|| lock.inspect());
    assert!(state.is_held(), "{state:?}");
    second.unlock().expect("held on the new primary");
    next_token_is_of_a_higher_epoch(&lock, before);
}

#[test]
fn a_failover_the_sentinels_announce_drops_the_connections_to_the_old_primary() {
    let set = SentinelSet::start();
    let client = client(&set);
    let lock = client.lock("announced").expect("valid");
    // A connection to the primary, idle in the pool.
    assert!(!lock.inspect().expect("reachable").is_held());
    set.failover();
    // The old primary is a replica now (its clients were not cut off): a call on the idle
    // connection would be refused (READONLY). The announcement (+switch-master) reaches the
    // client within its poll, and the next call goes to the new primary at once.
    thread::sleep(Duration::from_secs(1));
    let guard = lock
        .with_lease(Duration::from_secs(30))
        .try_lock()
        .expect("the first call after the announcement goes to the new primary")
        .expect("free");
    guard.unlock().expect("held");
}

#[test]
fn holders_and_waiters_carry_on_across_a_failover() {
    let set = SentinelSet::start();
    let lease = Duration::from_millis(900);
    let holder = Client::sentinel(set.master_name(), set.sentinel_urls())
        .command_timeout(Duration::from_millis(300))
        .default_lease(lease)
        .build()
        .expect("valid settings");
    let lock = holder.lock("carried").expect("valid");
    let guard = lock_when_available_renewed(&lock);
    let token = guard.fencing_token().expect("a token");
    let waiter = {
        let waiting = self::client(&set);
        thread::spawn(move || {
            let lock = waiting.lock("carried").expect("valid");
            let taken = lock
                .try_lock_for(SETTLE)
                .expect("the wait outlasts the failover")
                .expect("handed over before the wait ends");
            (Instant::now(), taken.fencing_token())
        })
    };
    thread::sleep(lease);
    set.failover();
    thread::sleep(lease * 2);
    // Renewed on the new primary, or told lost by its deadline: never neither.
    match guard.lost() {
        None => assert!(
            lock.inspect().map_or(true, |state| state.is_held()),
            "not told lost, yet not held"
        ),
        Some(lost) => assert!(lost.valid_until <= Instant::now(), "told lost: {lost:?}"),
    }
    let released = Instant::now();
    drop(guard);
    let (taken_at, next) = waiter.join().expect("no panic");
    assert!(next > Some(token), "{next:?} after {token}");
    assert!(
        taken_at.saturating_duration_since(released) < Duration::from_secs(3),
        "the waiter took the lock {:?} after the release",
        taken_at.saturating_duration_since(released)
    );
}

#[test]
fn an_election_works_on_a_sentinel_primary_with_acknowledged_writes() {
    let set = SentinelSet::start();
    an_election_works(&acked_client(&set), &acked_client(&set), "leaders");
}

#[test]
fn observers_follow_an_acknowledged_leadership_through_a_failover_and_terms_rise_after_it() {
    let mut set = SentinelSet::start();
    let (leading, following) = (acked_client(&set), acked_client(&set));
    let election = leading.election("failover").expect("valid");
    let observer = following
        .election("failover")
        .expect("valid")
        .observe()
        .expect("reachable");
    assert_eq!(next_change(&observer), None);
    let mut leadership = election.campaign("a").expect("free");
    let term = leadership.term();
    until_reported(&observer, &Some((term, "a".into())));
    let old = set.kill_primary();
    set.wait_primary_changed(old);
    set.start_again(old);
    set.wait_replicated();

    // The term and its value were acknowledged: they survive the failover, and a proclamation
    // made after it reaches the observer, which never saw the term go.
    retried_while_unavailable(|| leadership.proclaim("a2"));
    assert!(!leadership.is_lost(), "the acknowledged term survives");
    assert_eq!(next_change(&observer), Some((term, "a2".into())));
    retried_while_unavailable(|| leadership.resign());
    assert_eq!(next_change(&observer), None);
    let next =
        retried_while_unavailable(|| following.election("failover").expect("valid").campaign("b"));
    assert!(
        epoch(next.term()) > epoch(term),
        "term {} after {term}",
        next.term()
    );
    until_reported(&observer, &Some((next.term(), "b".into())));
}

#[test]
fn a_term_a_failover_lost_is_told_to_its_leader_and_the_next_term_is_above_it() {
    let mut set = SentinelSet::start();
    let (leading, following) = (client(&set), client(&set));
    let observer = following
        .election("lost-term")
        .expect("valid")
        .observe()
        .expect("reachable");
    assert_eq!(next_change(&observer), None);
    set.pause_replica();
    let leadership = leading
        .election("lost-term")
        .expect("valid")
        .campaign("a")
        .expect("free");
    let term = leadership.term();
    until_reported(&observer, &Some((term, "a".into())));
    let told = leadership.lost_signal();
    let old = set.kill_primary();
    set.resume_replica();
    set.wait_primary_changed(old);

    // Not replicated, the term is gone with the primary: its leader hears it at a renewal.
    let lost = told.recv_timeout(SETTLE).expect("told the term is lost");
    assert!(leadership.is_lost(), "{lost:?}");
    let next = retried_while_unavailable(|| {
        following
            .election("lost-term")
            .expect("valid")
            .try_campaign("b")
    })
    .expect("free on the new primary");
    assert!(
        epoch(next.term()) > epoch(term),
        "term {} after {term}",
        next.term()
    );
    // The observer never goes back: the lost term is shown over, then the next one.
    let skipped = until_reported(&observer, &Some((next.term(), "b".into())));
    assert!(skipped.iter().all(Option::is_none), "{skipped:?}");
}

#[test]
fn tokens_rise_across_a_failover_that_lost_the_last_acquisition() {
    let mut set = SentinelSet::start();
    let client = client(&set);
    let lock = client.lock("lost").expect("valid");
    set.pause_replica();
    let lost = lock
        .with_lease(Duration::from_secs(60))
        .lock()
        .expect("free");
    let lost_token = lost.fencing_token().expect("a token");
    let old = set.kill_primary();
    set.resume_replica();
    set.wait_primary_changed(old);

    // Without replica acknowledgements the hold is gone with the primary (two holders now),
    // but the token of the next holder is above the lost one: the fenced resource refuses the
    // first holder's writes once the second has written.
    let other = self::client(&set);
    let taken = lock_when_available(&other.lock("lost").expect("valid"), Duration::from_secs(60));
    let token = taken.fencing_token().expect("a token");
    assert!(
        token > lost_token,
        "token {token} after the lost {lost_token}: a fenced write would be accepted twice"
    );
    drop(lost);
    taken.unlock().expect("held");
}

#[test]
fn an_acquisition_no_replica_acknowledges_is_undone_and_never_handed_out() {
    let set = SentinelSet::start();
    let client = acked_client(&set);
    let lock = client.lock("acked").expect("valid");
    let guard = lock_when_available(&lock, Duration::from_secs(30));
    guard.unlock().expect("held");

    set.pause_replica();
    let started = Instant::now();
    let refused = lock.with_lease(Duration::from_secs(30)).try_lock();
    assert!(
        matches!(
            &refused,
            Err(Error::NotReplicated {
                acked: 0,
                wanted: 1,
                ..
            })
        ),
        "{refused:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "within the call's bound"
    );
    let state = client.lock("acked").expect("valid").inspect();
    assert!(
        !state.as_ref().expect("reachable").is_held(),
        "the unacknowledged hold was undone: {state:?}"
    );

    set.resume_replica();
    set.wait_replicated();
    let guard = lock_when_available(&lock, Duration::from_secs(30));
    guard.unlock().expect("held");
}

#[test]
fn an_acknowledged_hold_survives_the_death_of_its_primary() {
    let mut set = SentinelSet::start();
    let client = acked_client(&set);
    let lock = client.lock("survives").expect("valid");
    let held = lock_when_available(&lock, Duration::from_secs(60));
    let token = held.fencing_token().expect("a token");
    let old = set.kill_primary();
    set.wait_primary_changed(old);

    let other = acked_client(&set);
    let theirs = other.lock("survives").expect("valid");
    let deadline = Instant::now() + SETTLE;
    loop {
        match theirs.with_lease(Duration::from_secs(60)).try_lock() {
            Ok(None) => break,
            Ok(Some(guard)) => panic!(
                "token {:?} handed out while {token} is held",
                guard.fencing_token()
            ),
            // The first calls after a failover may find no primary, or no replica for it.
            Err(_) if Instant::now() < deadline => thread::sleep(Duration::from_millis(50)),
            Err(error) => panic!("{error}"),
        }
    }
    drop(held);
}

#[test]
fn renewals_no_replica_acknowledges_do_not_keep_a_hold() {
    let set = SentinelSet::start();
    let client = Client::sentinel(set.master_name(), set.sentinel_urls())
        .command_timeout(Duration::from_millis(400))
        .replica_acks(1, Duration::from_millis(100))
        .default_lease(Duration::from_millis(600))
        .build()
        .expect("valid settings");
    let lock = client.lock("renewed").expect("valid");
    let deadline = Instant::now() + SETTLE;
    let guard = loop {
        match lock.try_lock() {
            Ok(Some(guard)) => break guard,
            // The first calls after a failover may find no primary, or no replica for it.
            Err(_) if Instant::now() < deadline => thread::sleep(Duration::from_millis(50)),
            other => panic!("{other:?}"),
        }
    };
    thread::sleep(Duration::from_millis(900));
    assert!(!guard.is_lost(), "renewed while the replica acknowledges");
    set.pause_replica();
    let paused = Instant::now();
    while !guard.is_lost() {
        assert!(
            paused.elapsed() < Duration::from_secs(3),
            "renewals nobody acknowledged kept the hold"
        );
        thread::sleep(Duration::from_millis(20));
    }
    set.resume_replica();
}

#[test]
fn without_a_majority_of_sentinels_no_primary_is_named() {
    let set = SentinelSet::start();
    let client = client(&set);
    let lock = client.lock("majority").expect("valid");
    set.sentinels()[0].pause();
    set.sentinels()[1].pause();
    let started = Instant::now();
    let refused = lock.try_lock();
    assert!(
        matches!(&refused, Err(Error::Unavailable { .. })),
        "{refused:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
    set.sentinels()[0].resume();
    set.sentinels()[1].resume();
    let guard = lock_when_available(&lock, Duration::from_secs(30));
    guard.unlock().expect("held");
}

#[test]
fn settings_a_sentinel_client_refuses() {
    let no_sentinel = Client::sentinel("m", Vec::<String>::new()).build();
    assert!(matches!(no_sentinel, Err(Error::InvalidArgument(_))));
    let no_name = Client::sentinel("", ["redis://127.0.0.1:1"]).build();
    assert!(matches!(no_name, Err(Error::InvalidArgument(_))));
    let long_wait = Client::sentinel("m", ["redis://127.0.0.1:1"])
        .command_timeout(Duration::from_millis(100))
        .replica_acks(1, Duration::from_millis(100))
        .build();
    assert!(matches!(long_wait, Err(Error::InvalidArgument(_))));
    let no_replicas = Client::builder("redis://127.0.0.1:1")
        .replica_acks(0, Duration::from_millis(10))
        .build();
    assert!(matches!(no_replicas, Err(Error::InvalidArgument(_))));
    let redlock = Client::redlock(["redis://127.0.0.1:1", "redis://127.0.0.1:2"])
        .replica_acks(1, Duration::from_millis(10))
        .build();
    assert!(matches!(redlock, Err(Error::InvalidArgument(_))));
}

/// A refusal of the primary names the primary, not the Sentinels the client was given.
#[test]
fn a_refusal_names_the_primary_the_sentinels_named() {
    let set = SentinelSet::start();
    let client = client(&set);
    let lock = client.lock("full").expect("valid");
    lock_when_available(&lock, Duration::from_secs(30))
        .unlock()
        .expect("held");
    let primary = set.primary();
    set.server(primary).config_set("maxmemory", 1);
    match lock.try_lock() {
        Err(error @ Error::Refused { .. }) => {
            assert_eq!(error.code(), Some("OOM"), "{error}");
            let at = format!("127.0.0.1:{primary}");
            assert_eq!(error.server(), Some(at.as_str()), "{error}");
            assert!(error.to_string().contains(&at), "{error}");
        }
        other => panic!("a full primary: {other:?}"),
    }
}

/// A password on every server; a wrong password or master name is a refusal, not unavailability.
#[test]
fn a_client_logs_in_to_sentinels_and_data_servers_that_require_a_password() {
    let set = SentinelSet::start_with_password("s3cret");
    let without = client(&set);
    let refused = without.lock("guarded").expect("valid").try_lock();
    assert!(
        matches!(&refused, Err(Error::Refused { cause, .. }) if cause.code() == Some("NOAUTH")),
        "every Sentinel refused: {refused:?}"
    );
    let unknown = Client::sentinel("no-such-master", set.sentinel_urls())
        .password("s3cret")
        .build()
        .expect("valid settings");
    let refused = unknown.lock("guarded").expect("valid").try_lock();
    assert!(
        matches!(&refused, Err(Error::Refused { .. })),
        "{refused:?}"
    );
    let client = Client::sentinel(set.master_name(), set.sentinel_urls())
        .password("s3cret")
        .command_timeout(Duration::from_secs(1))
        .build()
        .expect("valid settings");
    let lock = client.lock("guarded").expect("valid");
    let guard = lock_when_available(&lock, Duration::from_secs(30));
    assert_eq!(guard.fencing_token(), Some(1));
    guard.unlock().expect("held");
    set.failover();
    let guard = lock_when_available(&lock, Duration::from_secs(30));
    assert!(
        epoch(guard.fencing_token().expect("a token")) > 0,
        "{guard:?}"
    );
    guard.unlock().expect("held");
}

#[cfg(feature = "tls")]
#[test]
fn a_client_reaches_sentinels_and_data_servers_over_tls_with_a_client_certificate() {
    let certificates = std::sync::Arc::new(testkit::TlsCertificates::generate());
    let set = SentinelSet::start_tls(std::sync::Arc::clone(&certificates));
    assert!(set
        .sentinel_urls()
        .iter()
        .all(|url| url.starts_with("rediss://")));
    let over_tls = || {
        Client::sentinel(set.master_name(), set.sentinel_urls())
            .tls_ca_file(certificates.ca_cert())
            .command_timeout(Duration::from_secs(1))
            .connect_timeout(Duration::from_secs(1))
    };
    // Without the client certificate, no Sentinel lets the client in.
    let anonymous = over_tls().build().expect("valid settings");
    assert!(anonymous.lock("secure").expect("valid").try_lock().is_err());

    let client = over_tls()
        .tls_client_cert(certificates.client_cert(), certificates.client_key())
        .build()
        .expect("valid settings");
    let lock = client.lock("secure").expect("valid");
    let first = lock_when_available(&lock, Duration::from_secs(30));
    let before = first.fencing_token().expect("a token");
    first.unlock().expect("held");

    // Across a failover the client finds the new primary through the Sentinels, over TLS.
    let old = set.primary();
    set.failover();
    assert_ne!(set.primary(), old);
    next_token_is_of_a_higher_epoch(&lock, before);
}
