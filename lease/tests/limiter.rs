//! The rate limiter on one server: its calls, the limit stored with it, waits scheduled for the
//! moment the store names (and nothing asked of the store in between), what it keeps in Redis,
//! and the stores that refuse it.

mod common;

use common::limiter::a_limiter_works;
use common::{client, RedisServer};
use redis::Commands;
use redis_lease::{hashwheel::Timer, Client, Error, RateLimit};
use std::time::{Duration, Instant};

#[test]
fn a_limiter_works_on_one_server() {
    let server = RedisServer::start();
    a_limiter_works(&client(&server), "api");
}

#[test]
fn a_blocked_acquisition_asks_the_store_twice_and_sleeps_on_the_timer() {
    let server = RedisServer::start();
    let timer = Timer::builder()
        .thread_name("limiter-test-timer")
        .build()
        .expect("valid settings");
    let client = Client::builder(server.url())
        .timer(timer.clone())
        .build()
        .expect("valid settings");
    let window = Duration::from_millis(300);
    let limiter = client.rate_limiter("twice", 1, window).expect("valid");
    let first = limiter.acquire(1).expect("free");
    let (calls, scheduled) = (server.command_calls("evalsha"), timer.metrics().scheduled);
    let second = limiter.acquire(1).expect("granted after a window");
    assert_eq!(
        server.command_calls("evalsha") - calls,
        2,
        "one call told the wait, one took the grant"
    );
    assert_eq!(
        timer.metrics().scheduled - scheduled,
        1,
        "one wait, on the timer"
    );
    let gap = second
        .granted_at()
        .duration_since(first.granted_at())
        .expect("later");
    assert!(gap >= window && gap < window * 3, "{gap:?}");
}

#[test]
fn the_limiter_keeps_two_keys_in_the_slot_of_its_name_for_two_windows_at_most() {
    let server = RedisServer::start();
    let client = Client::builder(server.url())
        .key_prefix("app:")
        .build()
        .expect("valid settings");
    let window = Duration::from_secs(20);
    client
        .rate_limiter("jobs", 5, window)
        .expect("valid")
        .try_acquire(2)
        .expect("reachable")
        .expect("free");
    let mut con = server.connection();
    let members: Vec<(String, u64)> = con
        .zrange_withscores("app:{jobs}:limiter:log", 0, -1)
        .expect("ZRANGE");
    assert_eq!(members.len(), 2, "one record per grant");
    let mode: String = con.hget("app:{jobs}:limiter", "mode").expect("HGET");
    assert_eq!(mode, "window");
    // Kept up to a window past the window of the last grant: kept longer about once a window.
    for key in ["app:{jobs}:limiter", "app:{jobs}:limiter:log"] {
        let ttl: i64 = con.pttl(key).expect("PTTL");
        assert!(ttl > 20_000 && ttl <= 40_001, "{key}: {ttl}");
    }
    // A cell rate keeps its hash alone, until its arrival time.
    client
        .cell_rate_limiter("cells", 10, Duration::from_secs(10), 5)
        .expect("valid")
        .try_acquire(3)
        .expect("reachable")
        .expect("free");
    let ttl: i64 = con.pttl("app:{cells}:limiter").expect("PTTL");
    assert!(
        ttl > 12_000 && ttl <= 13_001,
        "three intervals of 1 s, and a period: {ttl}"
    );
    let log: bool = con.exists("app:{cells}:limiter:log").expect("EXISTS");
    assert!(!log);
    // Nothing of the lock of the same name.
    let lock: bool = con.exists("app:{jobs}").expect("EXISTS");
    assert!(!lock);
}

#[test]
fn the_limiter_and_the_lock_of_one_name_are_two_primitives() {
    let server = RedisServer::start();
    let client = client(&server);
    let guard = client.lock("shared").expect("valid").lock().expect("free");
    let limiter = client
        .rate_limiter("shared", 1, Duration::from_secs(10))
        .expect("valid");
    assert!(limiter.try_acquire(1).expect("reachable").is_some());
    guard.unlock().expect("held");
}

#[test]
fn a_key_of_another_type_is_refused_with_nothing_written() {
    let server = RedisServer::start();
    let mut con = server.connection();
    let () = con.set("{taken}:limiter", "text").expect("SET");
    let limiter = client(&server)
        .rate_limiter("taken", 1, Duration::from_secs(1))
        .expect("valid");
    for refused in [
        limiter.try_acquire(1).map(drop),
        limiter.inspect().map(drop),
        limiter.reconfigure().map(drop),
    ] {
        assert!(
            matches!(&refused, Err(Error::WrongType { key }) if key == "{taken}:limiter"),
            "{refused:?}"
        );
    }
    let () = con.del("{taken}:limiter").expect("DEL");
    let () = con.sadd("{taken}:limiter:log", "x").expect("SADD");
    assert!(matches!(
        limiter.try_acquire(1),
        Err(Error::WrongType { .. })
    ));
    let written: bool = con.exists("{taken}:limiter").expect("EXISTS");
    assert!(!written, "nothing written");
}

#[test]
fn limits_and_asks_out_of_range_are_refused_before_any_call() {
    let server = RedisServer::start();
    let client = client(&server);
    for made in [
        client.rate_limiter("bad", 0, Duration::from_secs(1)),
        client.rate_limiter("bad", 100_001, Duration::from_secs(1)),
        client.rate_limiter("bad", 1, Duration::from_micros(10)),
        client.cell_rate_limiter("bad", 0, Duration::from_secs(1), 1),
        client.cell_rate_limiter("bad", 10, Duration::from_secs(1), 0),
        client.rate_limiter("", 1, Duration::from_secs(1)),
        client.rate_limiter("a{b}", 1, Duration::from_secs(1)),
    ] {
        assert!(matches!(made, Err(Error::InvalidArgument(_))), "{made:?}");
    }
    let limiter = client
        .rate_limiter("asks", 3, Duration::from_secs(1))
        .expect("valid");
    let calls = server.command_calls("evalsha");
    for n in [0, 4] {
        assert!(matches!(
            limiter.try_acquire(n),
            Err(Error::InvalidArgument(_))
        ));
    }
    assert_eq!(server.command_calls("evalsha"), calls, "nothing sent");
}

#[test]
fn a_deadline_before_the_moment_returns_at_once_and_one_after_it_waits_for_it() {
    let server = RedisServer::start();
    let limiter = client(&server)
        .rate_limiter("deadline", 1, Duration::from_millis(500))
        .expect("valid");
    let first = limiter.try_acquire(1).expect("reachable").expect("free");
    let started = Instant::now();
    assert!(limiter
        .try_acquire_until(1, started + Duration::from_millis(200))
        .expect("reachable")
        .is_none());
    assert!(started.elapsed() < Duration::from_millis(200));
    let granted = limiter
        .try_acquire_for(1, Duration::from_secs(5))
        .expect("reachable")
        .expect("within the wait");
    let gap = granted
        .granted_at()
        .duration_since(first.granted_at())
        .expect("later");
    assert!(gap >= Duration::from_millis(500), "{gap:?}");
}

#[test]
fn a_limiter_is_refused_on_redlock_at_construction() {
    let masters: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let client = Client::redlock(masters.iter().map(RedisServer::url))
        .build()
        .expect("valid settings");
    for made in [
        client.rate_limiter("api", 10, Duration::from_secs(1)),
        client.cell_rate_limiter("api", 10, Duration::from_secs(1), 2),
    ] {
        assert!(
            matches!(&made, Err(Error::InvalidArgument(why)) if why.contains("rate limiter is not offered on RedLock")),
            "{made:?}"
        );
    }
}

#[test]
fn a_window_lowered_by_reconfiguration_counts_the_grants_made_before() {
    let server = RedisServer::start();
    let client = client(&server);
    let window = Duration::from_secs(30);
    let wide = client.rate_limiter("lowered", 5, window).expect("valid");
    wide.try_acquire(4).expect("reachable").expect("free");
    let narrow = wide
        .with_limit(RateLimit::window(3, window))
        .expect("valid");
    assert_eq!(
        narrow.reconfigure().expect("reachable"),
        Some(RateLimit::window(5, window))
    );
    let state = narrow.inspect().expect("reachable");
    assert_eq!((state.used, state.available), (4, 0));
    assert!(narrow.try_acquire(1).expect("reachable").is_none());
    assert_eq!(
        narrow.reconfigure().expect("reachable"),
        Some(RateLimit::window(3, window)),
        "the same limit again"
    );
}
