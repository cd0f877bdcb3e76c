//! The lock over TLS (a server that requires client certificates) and as an ACL user limited to
//! the rules lease/guide/library.md gives: acquiring, renewing, waiting (pub/sub), inspecting and forcing,
//! and the refusals a misconfigured client gets; and the rules for a cluster and for Sentinels,
//! on a cluster and through Sentinels.

mod common;

use common::RedisServer;
use redis_lease::{Client, Error};
use std::thread;
use std::time::Duration;
use testkit::{ClientAuth, TlsOptions};

/// Holds a renewed lock past several leases while another thread waits for it, then hands it
/// over: what a deployment must support.
fn exercise(client: &Client) {
    let lock = client.lock("deployed").expect("valid");
    let guard = lock.lock().expect("free");
    let waiter = {
        let lock = lock.clone();
        thread::spawn(move || {
            lock.try_lock_for(Duration::from_secs(10))
                .expect("reachable")
                .map(|guard| guard.fencing_token())
        })
    };
    thread::sleep(client.default_lease() * 3);
    assert!(!guard.is_lost(), "{:?}", guard.lost());
    let state = lock.inspect().expect("reachable");
    assert!(state.is_held() && state.problems.is_empty(), "{state:?}");
    let token = guard.fencing_token();
    guard.unlock().expect("held");
    let next = waiter.join().expect("no panic").expect("handed over");
    assert!(next > token);
    let forced = lock
        .with_lease(Duration::from_secs(30))
        .lock()
        .expect("free");
    assert!(lock.force_unlock().expect("reachable"));
    drop(forced);
}

#[test]
fn the_lock_works_over_tls_with_a_client_certificate() {
    let server = RedisServer::start_tls(TlsOptions {
        client_auth: ClientAuth::Required,
        ..TlsOptions::default()
    });
    let certs = server.tls_certificates().expect("a TLS server").clone();
    assert!(server.url().starts_with("rediss://"));
    let client = Client::builder(server.url())
        .tls_ca_file(certs.ca_cert())
        .tls_client_cert(certs.client_cert(), certs.client_key())
        .default_lease(Duration::from_millis(300))
        .build()
        .expect("valid settings");
    exercise(&client);

    // Without the CA, the server's certificate does not verify: a refusal, not unavailability.
    let unverified = Client::open(&server.url()).expect("valid");
    let refused = unverified.lock("x").expect("valid").try_lock();
    assert!(
        matches!(&refused, Err(Error::Refused { cause, .. }) if cause.code() == Some("TLS")),
        "{refused:?}"
    );
    // Without a client certificate, the server does not let the client in.
    let anonymous = Client::builder(server.url())
        .tls_ca_file(certs.ca_cert())
        .command_timeout(Duration::from_millis(500))
        .build()
        .expect("valid");
    let refused = anonymous.lock("x").expect("valid").try_lock();
    assert!(refused.is_err(), "{refused:?}");
    // Files that are missing or hold no certificate are refused when the client is built.
    for bad in [
        Client::builder(server.url()).tls_ca_file("/nonexistent/ca.pem"),
        Client::builder(server.url()).tls_ca_file(certs.client_key()),
        Client::builder(server.url()).tls_client_cert(certs.ca_cert(), "/nonexistent/key"),
    ] {
        assert!(matches!(bad.build(), Err(Error::InvalidArgument(_))));
    }
}

#[test]
fn certificates_given_in_memory_work_as_files_do_and_the_key_is_never_shown() {
    let server = RedisServer::start_tls(TlsOptions {
        client_auth: ClientAuth::Required,
        ..TlsOptions::default()
    });
    let certs = server.tls_certificates().expect("a TLS server").clone();
    let read = |path: std::path::PathBuf| std::fs::read(path).expect("readable");
    let key = read(certs.client_key());
    let builder = Client::builder(server.url())
        .tls_ca_pem(read(certs.ca_cert()))
        .tls_client_cert_pem(read(certs.client_cert()), &key)
        .default_lease(Duration::from_millis(300));
    let shown = format!("{builder:?}");
    let key_text = String::from_utf8_lossy(&key);
    let body = key_text.lines().nth(1).expect("a PEM body");
    assert!(!shown.contains(body), "{shown}");
    exercise(&builder.build().expect("valid settings"));
    for bad in [
        Client::builder(server.url()).tls_ca_pem("not PEM"),
        Client::builder(server.url()).tls_client_cert_pem(read(certs.client_cert()), "not a key"),
        Client::builder(server.url()).tls_client_cert_pem("", &key),
    ] {
        let built = bad.build();
        assert!(matches!(built, Err(Error::InvalidArgument(_))), "{built:?}");
    }
}

/// The rules lease/guide/library.md gives for a user of the key prefix `app:`.
const RULES: &[&str] = &[
    "on",
    ">locker-pw",
    "resetchannels",
    "~app:{*",
    "&app:{*",
    "+evalsha",
    "+script|load",
    "+type",
    "+exists",
    "+get",
    "+set",
    "+del",
    "+incr",
    "+hset",
    "+hget",
    "+hexists",
    "+hincrby",
    "+hdel",
    "+hgetall",
    "+hmget",
    "+pexpire",
    "+pttl",
    "+publish",
    "+pubsub|numsub",
    "+subscribe",
    "+unsubscribe",
];

#[test]
fn an_acl_user_with_the_documented_rules_can_do_everything_and_no_more() {
    let server = RedisServer::start();
    server.acl_setuser("locker", RULES);
    let client = Client::builder(server.url_as("locker", "locker-pw"))
        .key_prefix("app:")
        .default_lease(Duration::from_millis(300))
        .build()
        .expect("valid settings");
    exercise(&client);

    // Outside its key pattern, the user is refused: a refusal, not unavailability.
    let elsewhere = Client::builder(server.url_as("locker", "locker-pw"))
        .key_prefix("other:")
        .build()
        .expect("valid");
    let refused = elsewhere.lock("x").expect("valid").try_lock();
    assert!(
        matches!(&refused, Err(Error::Refused { cause, .. }) if cause.code() == Some("NOPERM")),
        "{refused:?}"
    );
    let wrong = Client::open(&server.url_as("locker", "not-the-password")).expect("valid");
    assert!(matches!(
        wrong.lock("x").expect("valid").try_lock(),
        Err(Error::Refused { .. })
    ));
}

/// What lease/guide/library.md adds to [`RULES`] on a cluster.
const CLUSTER_RULES: &[&str] = &[
    "+spublish",
    "+pubsub|shardnumsub",
    "+ssubscribe",
    "+sunsubscribe",
    "+cluster|slots",
    "+cluster|info",
    "+asking",
];

#[test]
fn an_acl_user_with_the_documented_cluster_rules_locks_on_a_cluster_with_or_without_info() {
    let cluster = testkit::RedisCluster::start(3, 0);
    let rules: Vec<&str> = RULES.iter().chain(CLUSTER_RULES).copied().collect();
    let with_info: Vec<&str> = rules.iter().copied().chain(["+info"]).collect();
    for port in cluster.ports() {
        cluster.server(port).acl_setuser("locker", &rules);
        cluster.server(port).acl_setuser("noter", &with_info);
    }
    for (user, noted) in [("locker", false), ("noter", true)] {
        let urls: Vec<String> = cluster
            .ports()
            .into_iter()
            .map(|port| cluster.server(port).url_as(user, "locker-pw"))
            .collect();
        let client = Client::cluster(urls)
            .key_prefix("app:")
            .default_lease(Duration::from_millis(300))
            .build()
            .expect("valid settings");
        exercise(&client);
        // With `+info` the scripts note the node's epoch beside its replication id; without it
        // they read it every time, and write no note.
        let master = cluster.master_for_key("{deployed}");
        let note: Option<String> = redis::cmd("GETDEL")
            .arg("app:{deployed}:epoch")
            .query(&mut cluster.server(master).connection())
            .expect("GETDEL");
        assert_eq!(note.is_some(), noted, "{user}: {note:?}");
    }
}

#[test]
fn an_acl_user_with_the_documented_rules_locks_through_sentinels() {
    let set = testkit::SentinelSet::start();
    let data: Vec<&str> = RULES.iter().copied().chain(["+role"]).collect();
    for port in [set.primary(), set.replica()] {
        set.server(port).acl_setuser("locker", &data);
    }
    for sentinel in set.sentinels() {
        sentinel.acl_setuser("locker", &["on", ">locker-pw", "+sentinel|master"]);
    }
    let as_locker = |user: &str| -> Vec<String> {
        set.sentinels()
            .iter()
            .map(|sentinel| sentinel.url_as(user, "locker-pw"))
            .collect()
    };
    let client = Client::sentinel(set.master_name(), as_locker("locker"))
        .key_prefix("app:")
        .default_lease(Duration::from_millis(300))
        .build()
        .expect("valid settings");
    exercise(&client);
    let stranger = Client::sentinel(set.master_name(), as_locker("stranger"))
        .key_prefix("app:")
        .build()
        .expect("valid settings");
    let refused = stranger.lock("x").expect("valid").try_lock();
    assert!(
        matches!(&refused, Err(Error::Refused { .. })),
        "{refused:?}"
    );
}

/// The lease of the lock in the refusal tests: a hold left behind by a refused call lapses
/// within it.
const SHORT_LEASE: Duration = Duration::from_secs(2);

/// The key of the lock `name` without a key prefix, and its `PTTL` on `server`: -2 if it does not
/// exist, -1 if it never expires.
fn pttl(server: &RedisServer, name: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(format!("{{{name}}}"))
        .query(&mut server.connection())
        .expect("PTTL")
}

/// Asserts that a call as a user without some command came to a typed refusal or succeeded.
fn refused_or_done<T: std::fmt::Debug>(what: &str, outcome: &redis_lease::Result<T>) {
    assert!(
        matches!(outcome, Ok(_) | Err(Error::Refused { .. })),
        "{what}: {outcome:?}"
    );
}

#[test]
fn a_user_refused_a_command_the_scripts_use_never_leaves_a_lock_without_expiry() {
    let server = RedisServer::start();
    let admin = Client::builder(server.url())
        .command_timeout(Duration::from_secs(2))
        .build()
        .expect("valid settings");
    for command in [
        "set", "incr", "hset", "pexpire", "hincrby", "hdel", "del", "pttl", "publish",
    ] {
        let user = format!("no-{command}");
        let without = format!("-{command}");
        server.acl_setuser(&user, &["on", ">pw", "~*", "&*", "+@all", &without]);
        let client = Client::builder(server.url_as(&user, "pw"))
            .default_lease(SHORT_LEASE)
            .command_timeout(Duration::from_secs(2))
            .build()
            .expect("valid settings");
        let name = format!("without-{command}");
        let lock = client.lock(&name).expect("valid");
        let taken = lock.try_lock();
        refused_or_done(&format!("{user} acquiring"), &taken);
        if let Ok(taken) = taken {
            let guard = taken.expect("free");
            // A re-entry, and its release: the scripts' other paths.
            let again = lock.try_lock();
            refused_or_done(&format!("{user} re-entering"), &again);
            if let Ok(Some(inner)) = again {
                refused_or_done(&format!("{user} releasing a re-entry"), &inner.unlock());
            }
            refused_or_done(&format!("{user} releasing"), &guard.unlock());
        }
        let ttl = pttl(&server, &name);
        assert!(ttl == -2 || ttl > 0, "{user} left {name:?} with PTTL {ttl}");
        let next = admin
            .lock(&name)
            .expect("valid")
            .try_lock_for(SHORT_LEASE + Duration::from_secs(2))
            .expect("reachable");
        assert!(next.is_some(), "{user}: the lock was never free again");
    }
}

#[test]
fn a_user_without_publish_frees_the_lock_and_unlocks_with_ok() {
    let server = RedisServer::start();
    server.acl_setuser("quiet", &["on", ">pw", "~*", "&*", "+@all", "-publish"]);
    let client = Client::builder(server.url_as("quiet", "pw"))
        .default_lease(SHORT_LEASE)
        .build()
        .expect("valid settings");
    let guard = client
        .lock("unannounced")
        .expect("valid")
        .try_lock()
        .expect("reachable")
        .expect("free");
    let released = guard.unlock();
    assert!(released.is_ok(), "{released:?}");
    assert_eq!(pttl(&server, "unannounced"), -2, "the lock is freed");
}

#[test]
fn a_user_without_wait_and_with_replica_acks_leaves_no_hold() {
    let server = RedisServer::start();
    server.acl_setuser("unacked", &["on", ">pw", "~*", "&*", "+@all", "-wait"]);
    let client = Client::builder(server.url_as("unacked", "pw"))
        .command_timeout(Duration::from_secs(1))
        .replica_acks(1, Duration::from_millis(200))
        .build()
        .expect("valid settings");
    let attempt = client.lock("unwaited").expect("valid").try_lock();
    assert!(
        matches!(&attempt, Err(Error::Refused { cause, .. }) if cause.code() == Some("NOPERM")),
        "{attempt:?}"
    );
    assert_eq!(pttl(&server, "unwaited"), -2, "no hold is left behind");
}

/// Redisson #3474: a managed Redis without `WAIT` (here renamed away, as some services do). A
/// client that asks for no replica acknowledgements never sends it and locks as usual; one that
/// asks for them is refused at its first acquisition, with no hold left behind.
#[test]
fn a_server_without_wait_locks_without_acks_and_refuses_acks_leaving_no_hold() {
    let server = RedisServer::start_with(&["--rename-command", "WAIT", "\"\""]);
    let wait: redis::RedisResult<i64> = redis::cmd("WAIT")
        .arg(0)
        .arg(0)
        .query(&mut server.connection());
    assert!(wait.is_err(), "WAIT is still there: {wait:?}");
    let plain = common::client(&server);
    let guard = plain
        .lock("waitless")
        .expect("valid")
        .try_lock()
        .expect("reachable")
        .expect("free");
    guard.unlock().expect("released");

    let acked = Client::builder(server.url())
        .command_timeout(Duration::from_secs(1))
        .replica_acks(1, Duration::from_millis(200))
        .build()
        .expect("valid settings");
    let attempt = acked.lock("waitless").expect("valid").try_lock();
    assert!(
        matches!(&attempt, Err(Error::Refused { cause, .. }) if cause.code() == Some("ERR")),
        "{attempt:?}"
    );
    assert_eq!(pttl(&server, "waitless"), -2, "no hold is left behind");
}

/// What lease/guide/library.md adds to [`RULES`] for semaphores, read-write locks and fair locks.
const PRIMITIVE_RULES: &[&str] = &[
    "+zadd",
    "+zrem",
    "+zrange",
    "+zscore",
    "+zrangebyscore",
    "+zcard",
    "+time",
];

#[test]
fn an_acl_user_with_the_documented_primitive_rules_takes_every_primitive() {
    let server = RedisServer::start();
    let rules: Vec<&str> = RULES.iter().chain(PRIMITIVE_RULES).copied().collect();
    server.acl_setuser("locker", &rules);
    server.acl_setuser("plain", RULES);
    let client = Client::builder(server.url_as("locker", "locker-pw"))
        .key_prefix("app:")
        .default_lease(Duration::from_millis(300))
        .build()
        .expect("valid settings");
    let semaphore = client.semaphore("permits", 2).expect("valid");
    let (first, second) = (
        semaphore.acquire().expect("free"),
        semaphore.acquire().expect("free"),
    );
    let waiter = {
        let semaphore = semaphore.clone();
        thread::spawn(move || {
            semaphore
                .try_acquire_for(Duration::from_secs(10))
                .map(|g| g.is_some())
        })
    };
    thread::sleep(client.default_lease() * 3);
    assert!(!first.is_lost() && !second.is_lost());
    assert_eq!(
        semaphore.inspect().expect("reachable").permits_in_use,
        Some(2)
    );
    drop(first);
    assert!(waiter.join().expect("no panic").expect("reachable"));
    assert!(semaphore.force_unlock().expect("reachable"));
    drop(second);

    let rw = client.read_write_lock("table").expect("valid");
    let read = rw.read_lock().lock().expect("free");
    let writer = {
        let rw = rw.clone();
        thread::spawn(move || {
            rw.write_lock()
                .try_lock_for(Duration::from_secs(10))
                .map(|g| g.is_some())
        })
    };
    thread::sleep(Duration::from_millis(300));
    drop(read);
    assert!(writer.join().expect("no panic").expect("reachable"));
    assert!(rw
        .write_lock()
        .try_lock_for(Duration::from_millis(100))
        .is_ok());

    let fair = client.fair_lock("line").expect("valid");
    let held = fair.lock().expect("free");
    let next = {
        let fair = fair.clone();
        thread::spawn(move || {
            fair.try_lock_for(Duration::from_secs(10))
                .map(|g| g.is_some())
        })
    };
    thread::sleep(Duration::from_millis(300));
    assert_eq!(fair.inspect().expect("reachable").waiting, Some(1));
    drop(held);
    assert!(next.join().expect("no panic").expect("reachable"));

    // Without them, the primitives are refused before anything is written.
    let plain = Client::builder(server.url_as("plain", "locker-pw"))
        .key_prefix("app:")
        .build()
        .expect("valid settings");
    let refused = plain.semaphore("other", 2).expect("valid").try_acquire();
    assert!(
        matches!(&refused, Err(Error::Refused { cause, .. }) if cause.code() == Some("NOPERM")),
        "{refused:?}"
    );
    let state = client
        .semaphore("other", 2)
        .expect("valid")
        .inspect()
        .expect("reachable");
    assert!(!state.is_held() && state.problems.is_empty(), "{state:?}");
}

/// What lease/guide/library.md lists for a rate limiter's scripts.
const LIMITER_RULES: &[&str] = &[
    "+time",
    "+hmget",
    "+hset",
    "+zcount",
    "+zrangebyscore",
    "+zadd",
    "+zremrangebyscore",
    "+pexpireat",
    "+del",
    "+type",
];

#[test]
fn an_acl_user_with_the_documented_limiter_rules_takes_reads_and_reconfigures() {
    let server = RedisServer::start();
    let rules: Vec<&str> = RULES.iter().chain(LIMITER_RULES).copied().collect();
    server.acl_setuser("locker", &rules);
    let client = Client::builder(server.url_as("locker", "locker-pw"))
        .key_prefix("app:")
        .build()
        .expect("valid settings");
    for limiter in [
        client.rate_limiter("api", 3, Duration::from_secs(60)),
        client.cell_rate_limiter("uploads", 3, Duration::from_secs(60), 3),
    ] {
        let limiter = limiter.expect("valid");
        // Past a trim of the log (one grant in 32 and every call for several).
        assert!(limiter.try_acquire(2).expect("allowed").is_some());
        assert!(limiter.try_acquire(1).expect("allowed").is_some());
        assert!(limiter.try_acquire(1).expect("allowed").is_none());
        assert_eq!(limiter.available().expect("allowed"), 0);
        assert_eq!(limiter.inspect().expect("allowed").used, 3);
        limiter.reconfigure().expect("allowed");
    }
}

#[test]
fn a_user_refused_a_command_a_limiter_writes_with_is_never_granted_more_than_it_was_told() {
    let server = RedisServer::start();
    let admin = Client::builder(server.url())
        .command_timeout(Duration::from_secs(2))
        .build()
        .expect("valid settings");
    for command in ["hset", "zadd", "zremrangebyscore", "pexpireat"] {
        let user = format!("no-{command}");
        let without = format!("-{command}");
        server.acl_setuser(&user, &["on", ">pw", "~*", "&*", "+@all", &without]);
        let client = Client::builder(server.url_as(&user, "pw"))
            .command_timeout(Duration::from_secs(2))
            .build()
            .expect("valid settings");
        let name = format!("without-{command}");
        let limiter = client
            .rate_limiter(&name, 100, Duration::from_secs(60))
            .expect("valid");
        // Enough takes to reach every write: the first (the keys' expiry), a trim (one grant in
        // 32), and a take of several (trimmed at once).
        let mut granted = 0;
        for n in std::iter::repeat_n(1, 40).chain([3]) {
            match limiter.try_acquire(n) {
                Ok(Some(_)) => granted += n,
                Ok(None) => panic!("{user}: refused under a limit of 100"),
                Err(Error::Refused { cause, .. }) => {
                    assert_eq!(cause.code(), Some("NOPERM"), "{user}: {cause}")
                }
                Err(other) => panic!("{user}: {other:?}"),
            }
        }
        let used = admin
            .rate_limiter(&name, 100, Duration::from_secs(60))
            .expect("valid")
            .inspect()
            .expect("reachable")
            .used;
        assert_eq!(
            used, granted,
            "{user}: the store counts what was granted, no more"
        );
        let log = format!("{{{name}}}:limiter:log");
        let kept: i64 = redis::cmd("PTTL")
            .arg(format!("{{{name}}}:limiter"))
            .query(&mut server.connection())
            .expect("PTTL");
        assert!(
            kept == -2 || kept > 0,
            "{user}: the hash kept with PTTL {kept}"
        );
        let kept: i64 = redis::cmd("PTTL")
            .arg(&log)
            .query(&mut server.connection())
            .expect("PTTL");
        assert!(
            kept == -2 || kept > 0,
            "{user}: the log kept with PTTL {kept}"
        );
    }
}
