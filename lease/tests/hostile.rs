//! The library probed as an attacker would: servers that never answer, freeze, or drip their
//! replies; keys of the wrong type and fencing counters that cannot give a token; refusals that
//! retrying will not fix; bad settings; passwords that must never show.

mod common;

use common::RedisServer;
use redis::Commands;
use redis_lease::{Client, Error, MultiLock};
use std::sync::{Mutex, Once};
use std::thread;
use std::time::{Duration, Instant};
use testkit::{Drip, Lossy, Silent};

const TIMEOUT: Duration = Duration::from_millis(500);

fn impatient(url: &str) -> Client {
    Client::builder(url)
        .connect_timeout(TIMEOUT)
        .command_timeout(TIMEOUT)
        .build()
        .expect("valid settings")
}

/// Runs `call`, and checks that it failed as unavailable within the command timeout (and a
/// generous allowance for a loaded machine).
fn bounded<T: std::fmt::Debug>(what: &str, call: impl FnOnce() -> redis_lease::Result<T>) {
    let started = Instant::now();
    let outcome = call();
    let took = started.elapsed();
    assert!(
        took < TIMEOUT + Duration::from_millis(400),
        "{what} took {took:?}: {outcome:?}"
    );
    assert!(
        matches!(&outcome, Err(error @ Error::Unavailable { .. }) if error.server().is_some()),
        "{what}: {outcome:?}"
    );
}

fn every_call_is_bounded(client: &Client) {
    let lock = client.lock("bounded").expect("valid");
    bounded("inspect", || lock.inspect());
    bounded("is_locked", || lock.is_locked());
    bounded("try_lock", || lock.try_lock());
    bounded("with_lease + try_lock", || {
        lock.with_lease(Duration::from_secs(5)).try_lock()
    });
    bounded("force_unlock", || lock.force_unlock());
    let started = Instant::now();
    let waited = lock.try_lock_for(Duration::from_millis(300));
    assert!(
        started.elapsed() < Duration::from_millis(300) + TIMEOUT + Duration::from_millis(400),
        "try_lock_for took {:?}: {waited:?}",
        started.elapsed()
    );
}

#[test]
fn every_call_returns_within_its_bound_on_a_silent_server() {
    let silent = Silent::start();
    every_call_is_bounded(&impatient(&silent.url()));
}

#[test]
fn every_call_returns_within_its_bound_on_a_drip_fed_server() {
    let server = RedisServer::start();
    let drip = Drip::start(server.port(), Duration::from_millis(500));
    every_call_is_bounded(&impatient(&drip.url()));
}

#[test]
fn every_call_and_a_release_return_within_their_bound_on_a_frozen_server() {
    let server = RedisServer::start();
    let client = impatient(&server.url());
    let lock = client.lock("frozen").expect("valid");
    let guard = lock
        .with_lease(Duration::from_secs(30))
        .try_lock()
        .expect("reachable")
        .expect("free");
    server.pause();
    every_call_is_bounded(&client);
    bounded("unlock", || guard.unlock());
    let guard = {
        server.resume();
        let guard = lock.with_lease(Duration::from_secs(30)).lock();
        server.pause();
        guard.expect("the unsettled release is sent again first, then acquired")
    };
    let started = Instant::now();
    drop(guard);
    let took = started.elapsed();
    server.resume();
    assert!(
        took < TIMEOUT + Duration::from_millis(400),
        "a release on drop took {took:?}"
    );
}

#[test]
fn every_call_returns_within_its_bound_on_a_frozen_server_behind_a_unix_socket() {
    // A small accept queue, filled by the connections of calls that timed out: a connect that
    // waits for room in it would wait as long as the server is frozen.
    let server = RedisServer::start_with(&["--tcp-backlog", "2"]);
    let client = impatient(&server.unix_url());
    let lock = client.lock("frozen").expect("valid");
    assert!(!lock.is_locked().expect("reachable"));
    server.pause();
    for _ in 0..3 {
        every_call_is_bounded(&client);
    }
    server.resume();
}

fn counter_is_refused(server: &RedisServer, setup: impl FnOnce(&mut redis::Connection)) -> Error {
    let mut con = server.connection();
    let _: () = redis::cmd("FLUSHALL").query(&mut con).expect("FLUSHALL");
    setup(&mut con);
    let before: Vec<u8> = redis::cmd("DUMP")
        .arg("{k}:fence")
        .query(&mut con)
        .expect("DUMP");
    let error = impatient(&server.url())
        .lock("k")
        .expect("valid")
        .with_lease(Duration::from_secs(30))
        .try_lock()
        .expect_err("no token can be had");
    let exists: bool = con.exists("{k}").expect("EXISTS");
    assert!(!exists, "a hold was written before the check: {error}");
    let after: Vec<u8> = redis::cmd("DUMP")
        .arg("{k}:fence")
        .query(&mut con)
        .expect("DUMP");
    assert_eq!(before, after, "the counter changed: {error}");
    error
}

#[test]
fn scripts_check_the_fencing_counter_before_they_write() {
    let server = RedisServer::start();
    let error = counter_is_refused(&server, |con| {
        let _: () = con.hset("{k}:fence", "a", "b").expect("HSET");
    });
    assert!(
        matches!(&error, Error::WrongType { key } if key == "{k}:fence"),
        "the error names the counter: {error:?}"
    );
    for value in [
        "-5",
        "abc",
        "007",
        "1.5",
        "99999999999999999999",
        "9223372036854775807",
    ] {
        let error = counter_is_refused(&server, |con| {
            let _: () = con.set("{k}:fence", value).expect("SET");
        });
        assert!(
            matches!(&error, Error::BadValue { key, .. } if key == "{k}:fence"),
            "{value}: {error:?}"
        );
    }
    // One token is left below 2^63 - 1, and it is handed out exactly.
    let mut con = server.connection();
    let _: () = con.set("{k}:fence", "9223372036854775806").expect("SET");
    let guard = impatient(&server.url())
        .lock("k")
        .expect("valid")
        .with_lease(Duration::from_secs(30))
        .try_lock()
        .expect("one token left")
        .expect("free");
    assert_eq!(guard.fencing_token(), Some(9_223_372_036_854_775_807));
}

#[test]
fn a_release_that_cannot_grant_frees_the_lock_and_the_waiter_is_told_why() {
    let server = RedisServer::start();
    let client = impatient(&server.url());
    let lock = client.lock("grant").expect("valid");
    let guard = lock.lock().expect("free");
    // A waiter with a lease of its own: the hold cannot be handed to it in memory, so the
    // release grants it in Redis.
    let waiter = {
        let lock = lock.with_lease(Duration::from_secs(20));
        thread::spawn(move || lock.try_lock_for(Duration::from_secs(10)))
    };
    // The waiter's two attempts are in before it sleeps with its offer open.
    thread::sleep(Duration::from_millis(300));
    let _: () = server
        .connection()
        .set("{grant}:fence", "not a number")
        .expect("SET");
    guard.unlock().expect("the release itself is fine");
    let waited = waiter.join().expect("no panic");
    assert!(
        matches!(&waited, Err(Error::BadValue { key, .. }) if key == "{grant}:fence"),
        "{waited:?}"
    );
    assert!(!lock.is_locked().expect("reachable"), "nobody holds it");
}

#[test]
fn a_grant_whose_release_reply_is_lost_is_withdrawn_well_before_its_lease_lapses() {
    let server = RedisServer::start();
    let proxy = Lossy::start(server.port());
    let client = impatient(&proxy.url());
    let lease = client.default_lease();
    let lock = client.lock("lost-grant").expect("valid");
    // A waiter with a lease of its own: the hold cannot be handed to it in memory, so the
    // release grants it in Redis.
    let grant = || {
        let guard = lock.lock().expect("free");
        let waiter = {
            let lock = lock.with_lease(lease * 2);
            thread::spawn(move || lock.try_lock_for(Duration::from_secs(10)))
        };
        // The waiter's two attempts are in before it sleeps with its offer open.
        thread::sleep(Duration::from_millis(300));
        (guard, waiter)
    };
    // The server knows the scripts of a grant: a reply that is lost is not a NOSCRIPT one.
    let (guard, waiter) = grant();
    guard.unlock().expect("released");
    let granted = waiter.join().expect("no panic").expect("reachable");
    granted.expect("granted").unlock().expect("released");
    let (guard, waiter) = grant();
    // The release runs, and grants the lock to the waiter; its reply is lost, and so is every
    // reply the waiter gets while it asks what became of the grant.
    proxy.lose_replies(true);
    let released = guard.unlock();
    assert!(
        matches!(released, Err(Error::Unavailable { .. })),
        "{released:?}"
    );
    let waited = waiter.join().expect("no panic");
    proxy.lose_replies(false);
    let started = Instant::now();
    let direct = impatient(&server.url());
    let seen = direct.lock("lost-grant").expect("valid");
    // Free, or the waiter's (a waiter that was told it holds it): never a hold nobody knows of.
    while seen.is_locked().expect("reachable") && !matches!(waited, Ok(Some(_))) {
        assert!(
            started.elapsed() < lease / 10,
            "an orphan hold stands: {:?} ({waited:?})",
            seen.inspect()
        );
        thread::sleep(Duration::from_millis(20));
    }
    if let Ok(Some(guard)) = waited {
        assert!(!guard.is_lost(), "the waiter holds it");
        guard.unlock().expect("the waiter releases it");
    }
}

#[test]
fn a_lock_key_of_another_type_is_refused_described_and_can_be_cleared() {
    let server = RedisServer::start();
    let _: () = server.connection().set("{k}", "x").expect("SET");
    let lock = impatient(&server.url()).lock("k").expect("valid");
    let error = lock.try_lock().expect_err("not a lock");
    assert!(
        matches!(&error, Error::WrongType { key } if key == "{k}"),
        "{error:?}"
    );
    let state = lock.inspect().expect("inspection describes it");
    assert!(!state.is_held());
    assert!(
        state
            .problems
            .iter()
            .any(|problem| problem.contains("string")),
        "{state:?}"
    );
    assert!(lock.force_unlock().expect("cleared"));
    lock.try_lock()
        .expect("reachable")
        .expect("a lock now")
        .unlock()
        .expect("held");
}

#[test]
fn refusals_that_retrying_cannot_fix_are_not_unavailability() {
    let server = RedisServer::start_with(&["--requirepass", "s3cret-pw"]);
    let port = server.port();
    let attempt = |url: String| {
        impatient(&url)
            .lock("k")
            .expect("valid")
            .try_lock()
            .map(|guard| guard.is_some())
    };
    for url in [
        format!("redis://:wrong-pw@127.0.0.1:{port}"),
        format!("redis://127.0.0.1:{port}"),
        format!("redis://:s3cret-pw@127.0.0.1:{port}/99"),
    ] {
        match attempt(url.clone()) {
            Err(error @ Error::Refused { .. }) => {
                let text = error.to_string();
                assert!(
                    !text.contains("s3cret") && !text.contains("wrong-pw"),
                    "{text}"
                );
                let at = format!("127.0.0.1:{port}");
                assert_eq!(error.server(), Some(at.as_str()), "{error:?}");
                assert!(text.contains(&at), "{text}");
                assert!(!text.contains("18446744073709551615"), "{text}");
            }
            other => panic!("{url}: {other:?}"),
        }
    }
    assert!(attempt(format!("redis://:s3cret-pw@127.0.0.1:{port}/3")).expect("logged in"));
    let given_apart = Client::builder(format!("redis://:wrong-pw@127.0.0.1:{port}"))
        .password("s3cret-pw")
        .connect_timeout(TIMEOUT)
        .command_timeout(TIMEOUT);
    assert!(!format!("{given_apart:?}").contains("s3cret"));
    let lock = given_apart
        .build()
        .expect("valid")
        .lock("k")
        .expect("valid");
    assert!(lock
        .try_lock()
        .expect("logged in with the password given apart")
        .is_some());
}

/// On a full server Redis decides whether a script may still write (Redis 7 lets a script without
/// flags run); when it refuses, the refusal is not unavailability. Inspection and force unlock,
/// an operator's last resort, work either way.
#[test]
fn a_full_server_is_inspected_and_cleared_and_its_refusals_are_typed() {
    let server =
        RedisServer::start_with(&["--maxmemory", "2mb", "--maxmemory-policy", "noeviction"]);
    let lock = impatient(&server.url()).lock("full").expect("valid");
    let held = lock
        .with_lease(Duration::from_secs(30))
        .try_lock()
        .expect("reachable")
        .expect("free");
    std::mem::forget(held);
    let mut con = server.connection();
    let block = "x".repeat(64 * 1024);
    for n in 0.. {
        let filled: redis::RedisResult<()> = con.set(format!("filler-{n}"), &block);
        if filled.is_err() {
            break;
        }
        assert!(n < 1000, "the server never filled up");
    }
    let other = impatient(&server.url()).lock("other").expect("valid");
    let attempt = other.try_lock();
    assert!(
        matches!(attempt, Ok(Some(_)) | Err(Error::Refused { .. })),
        "{attempt:?}"
    );
    let refused: redis::RedisResult<()> = con.set("one-more", &block);
    assert!(
        refused.is_err_and(|error| error.code() == Some("OOM")),
        "still full"
    );
    let state = lock.inspect().expect("inspection works on a full server");
    assert!(state.is_held());
    assert!(lock.force_unlock().expect("so does force unlock"));
}

/// Log records the crate writes, for the test that reads them.
static RECORDS: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Recorder;

impl log::Log for Recorder {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, record: &log::Record<'_>) {
        if record.level() <= log::Level::Warn {
            if let Ok(mut records) = RECORDS.lock() {
                records.push(record.args().to_string());
            }
        }
    }
    fn flush(&self) {}
}

#[test]
fn a_server_that_may_evict_keys_is_warned_about_once() {
    static LOGGER: Once = Once::new();
    LOGGER.call_once(|| {
        let _ = log::set_logger(&Recorder);
        log::set_max_level(log::LevelFilter::Warn);
    });
    let evicting = RedisServer::start_with(&["--maxmemory-policy", "volatile-lru"]);
    let lock = impatient(&evicting.url()).lock("k").expect("valid");
    lock.inspect().expect("reachable");
    lock.inspect().expect("reachable");
    let safe = RedisServer::start();
    impatient(&safe.url())
        .lock("k")
        .expect("valid")
        .inspect()
        .expect("reachable");
    let records = RECORDS.lock().expect("not poisoned");
    let warnings: Vec<&String> = records
        .iter()
        .filter(|record| record.contains("evicts keys"))
        .collect();
    assert_eq!(warnings.len(), 1, "{records:?}");
    assert!(warnings[0].contains("volatile-lru"), "{warnings:?}");
    assert!(
        warnings[0].contains(&evicting.port().to_string()),
        "{warnings:?}"
    );
}

#[test]
fn bad_settings_are_refused_when_the_client_is_built() {
    let url = "redis://127.0.0.1:1";
    let refused = |builder: redis_lease::ClientBuilder| match builder.build() {
        Err(Error::InvalidArgument(text)) => text,
        other => panic!("expected a refusal, got {other:?}"),
    };
    for lease in [
        Duration::from_nanos(1),
        Duration::from_millis(2),
        Duration::from_millis(9),
        redis_lease::MAX_LEASE + Duration::from_secs(1),
        Duration::MAX,
    ] {
        refused(Client::builder(url).default_lease(lease));
    }
    refused(Client::builder(url).command_timeout(Duration::MAX));
    refused(Client::builder(url).connect_timeout(Duration::ZERO));
    refused(Client::builder(url).renewal_batch(0));
    refused(Client::builder(url).renewal_batch(1_000_000));
    refused(Client::builder(url).key_prefix("a{b"));
    refused(Client::builder(url).quorum(1));
    let client = Client::builder(url).build().expect("valid");
    let lock = client.lock("k").expect("valid");
    for lease in [
        Duration::from_nanos(1),
        Duration::from_millis(2),
        Duration::MAX,
    ] {
        assert!(
            matches!(
                lock.with_lease(lease).try_lock(),
                Err(Error::InvalidArgument(_))
            ),
            "{lease:?}"
        );
    }
    // A bad owner or max_hold is refused by every acquisition, before the (unreachable) server
    // is asked: the error is the setting's, never `Unavailable`.
    let invalid = |result: redis_lease::Result<_>, what: &str| {
        assert!(
            matches!(result, Err(Error::InvalidArgument(_))),
            "{what}: {:?}",
            result.map(|_: ()| ())
        );
    };
    let cancel = redis_lease::Cancel::new();
    let mut refused_locks: Vec<(String, redis_lease::Lock)> = ["", ":hold", &"o".repeat(2000)]
        .into_iter()
        .map(|owner| (format!("owner {owner:.8?}"), lock.owned_by(owner)))
        .collect();
    refused_locks.push(("max_hold 0".into(), lock.max_hold(Duration::ZERO)));
    refused_locks.push((
        "max_hold 0 then a good owner".into(),
        lock.max_hold(Duration::ZERO).owned_by("fine"),
    ));
    let semaphore = client.semaphore("s", 2).expect("valid");
    let rw = client.read_write_lock("rw").expect("valid");
    for (what, refused) in refused_locks
        .iter()
        .map(|(what, lock)| (what.as_str(), lock.clone()))
        .chain([
            (
                "semaphore",
                semaphore.owned_by(":x").taking(1).expect("1 of 2"),
            ),
            ("read side", rw.owned_by("").read_lock().clone()),
            ("write side", rw.owned_by("").write_lock().clone()),
        ])
    {
        let second = Duration::from_secs(1);
        invalid(refused.lock().map(drop), what);
        invalid(refused.try_lock().map(drop), what);
        invalid(refused.with_lease(second).lock().map(drop), what);
        invalid(refused.try_lock_for(second).map(drop), what);
        invalid(
            refused.try_lock_until(Instant::now() + second).map(drop),
            what,
        );
        invalid(refused.cancel_on(&cancel).lock().map(drop), what);
        invalid(
            refused.cancel_on(&cancel).try_lock_for(second).map(drop),
            what,
        );
    }
    for owner in ["", ":hold", &"o".repeat(2000)] {
        invalid(lock.owned_by(owner).hold_count().map(drop), "hold_count");
    }
    invalid(
        semaphore.max_hold(Duration::ZERO).acquire().map(drop),
        "semaphore max_hold",
    );
    // A good owner given after a bad one is the lock's owner again.
    assert!(matches!(
        lock.owned_by("").owned_by("fine").try_lock(),
        Err(Error::Unavailable { .. })
    ));
    assert!(matches!(
        client.lock(&"n".repeat(2000)),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn redlock_refuses_two_urls_of_one_server() {
    let servers: Vec<RedisServer> = (0..2).map(|_| RedisServer::start()).collect();
    let port = servers[0].port();
    let by_name = Client::redlock([
        format!("redis://127.0.0.1:{port}"),
        format!("redis://localhost:{port}"),
        servers[1].url(),
    ])
    .command_timeout(TIMEOUT)
    .build();
    assert!(
        matches!(&by_name, Err(Error::InvalidArgument(text)) if text.contains("one server")),
        "{by_name:?}"
    );
    // Through a proxy the address differs; the server's run id does not.
    let proxy = Drip::start(port, Duration::ZERO);
    let by_proxy = Client::redlock([servers[0].url(), proxy.url(), servers[1].url()])
        .command_timeout(TIMEOUT)
        .build();
    assert!(
        matches!(&by_proxy, Err(Error::InvalidArgument(text)) if text.contains("one server")),
        "{by_proxy:?}"
    );
}

#[test]
fn a_multilock_refuses_one_lock_reached_through_two_urls_of_one_server() {
    let servers: Vec<RedisServer> = (0..2).map(|_| RedisServer::start()).collect();
    let port = servers[0].port();
    let client_at = |url: String| {
        Client::builder(url)
            .command_timeout(TIMEOUT)
            .build()
            .expect("valid settings")
    };
    let by_address = client_at(format!("redis://127.0.0.1:{port}"));
    let by_name = client_at(format!("redis://localhost:{port}"));
    let other = client_at(servers[1].url());
    let twice = MultiLock::new([
        by_address.lock("account").expect("valid"),
        by_name.lock("account").expect("valid"),
    ]);
    assert!(
        matches!(&twice, Err(Error::InvalidArgument(text)) if text.contains("twice")),
        "{twice:?}"
    );
    // The same name on two servers, and two names on one server, are distinct locks.
    for pair in [
        [
            by_address.lock("account").expect("valid"),
            other.lock("account").expect("valid"),
        ],
        [
            by_address.lock("account").expect("valid"),
            by_name.lock("ledger").expect("valid"),
        ],
    ] {
        let set = MultiLock::new(pair).expect("distinct locks");
        let guard = set
            .try_lock_for(Duration::from_secs(5))
            .expect("reachable")
            .expect("free");
        guard.unlock().expect("held");
    }
}

#[test]
fn passwords_never_show_in_errors_or_debug_output() {
    let builder = Client::builder("redis://user:hunter2@127.0.0.1:6379/0");
    assert!(!format!("{builder:?}").contains("hunter2"), "{builder:?}");
    let redlock = Client::redlock(["redis://:hunter2@a:1", "redis://:hunter2@b:2"]);
    assert!(!format!("{redlock:?}").contains("hunter2"));
    for url in [
        "redis://:hunter2@host:notaport",
        "redis://:hunter2@host/x",
        "hunter2@",
    ] {
        let error = Client::open(url).expect_err(url).to_string();
        assert!(!error.contains("hunter2"), "{error}");
    }
    let client = Client::builder("redis://user:hunter2@127.0.0.1:1")
        .build()
        .expect("valid");
    assert!(!format!("{client:?}").contains("hunter2"));
    let lock = client.lock("k").expect("valid");
    assert!(!format!("{lock:?}").contains("hunter2"));
    let error = lock
        .try_lock()
        .expect_err("nothing listens there")
        .to_string();
    assert!(!error.contains("hunter2"), "{error}");
}

#[test]
fn owner_ids_and_passwords_never_show_in_debug_or_display() {
    const OWNER: &str = "owner-credential-7f3a9c";
    const PASSWORD: &str = "pw-credential-51be";
    let server = RedisServer::start_with(&["--requirepass", PASSWORD]);
    let url = format!("redis://:{PASSWORD}@127.0.0.1:{}", server.port());
    let client = Client::open(url.as_str()).expect("valid settings");
    let lock = client.lock("probed").expect("valid");
    let fixed = lock.owned_by(OWNER).with_lease(Duration::from_millis(300));
    let held = fixed.lock().expect("free");
    let lost_signal = held.lost_signal();
    let by_thread = client
        .lock("probed-2")
        .expect("valid")
        .lock()
        .expect("free");
    let thread_owner = by_thread.owner().to_owned();
    let semaphore = client.semaphore("probed-sem", 2).expect("valid");
    let permit = semaphore.owned_by(OWNER).acquire().expect("a permit");
    let rw = client.read_write_lock("probed-rw").expect("valid");
    let read = rw.read_lock().owned_by(OWNER).lock().expect("free");
    let mut shown = vec![
        format!("{client:?}"),
        format!("{lock:?} {fixed:?}"),
        format!("{held:?} {by_thread:?} {permit:?} {read:?}"),
        format!("{semaphore:?} {rw:?}"),
    ];
    // Lost: the lease lapses and another owner takes the lock.
    let lost = lost_signal
        .recv_timeout(Duration::from_secs(10))
        .expect("told of the loss");
    shown.push(format!("{lost:?}"));
    let _taken = lock
        .owned_by("someone-else")
        .try_lock_for(Duration::from_secs(10))
        .expect("answered")
        .expect("free after the lease");
    let error = held.unlock().expect_err("no longer held");
    assert!(matches!(error, Error::NotOwner { .. }), "{error:?}");
    shown.push(format!("{error} {error:?}"));
    for text in &shown {
        for secret in [OWNER, PASSWORD, thread_owner.as_str()] {
            assert!(!text.contains(secret), "{secret:?} shown in {text}");
        }
    }
}

#[test]
fn an_election_whose_key_holds_another_type_is_refused_by_every_call_not_read_as_no_leader() {
    let server = RedisServer::start();
    let mut con = server.connection();
    let _: () = con.set("{vote}:leader", "x").expect("SET");
    let election = impatient(&server.url()).election("vote").expect("valid");
    let is_wrong =
        |error: &Error| matches!(error, Error::WrongType { key } if key == "{vote}:leader");
    let campaign = election.try_campaign("a").expect_err("not an election");
    assert!(is_wrong(&campaign), "{campaign:?}");
    let leader = election.leader().expect_err("not an election");
    assert!(is_wrong(&leader), "{leader:?}");
    let observed = election.observe().expect_err("not an election");
    assert!(is_wrong(&observed), "{observed:?}");
    let state = election.inspect().expect("described, not refused");
    assert!(!state.problems.is_empty(), "{state:?}");
    let _: () = con.del("{vote}:leader").expect("DEL");
    let mut leadership = election
        .try_campaign("a")
        .expect("reachable")
        .expect("free");
    leadership.resign().expect("led");
}
