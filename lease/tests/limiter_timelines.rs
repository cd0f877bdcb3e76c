//! Redisson's `RRateLimiter` bugs, their timelines played against this rate limiter (see
//! `docs/track-record.md`): on PostgreSQL on a clock the test moves (exact), and on Redis on the
//! host's clock (the test waits, with margins around each edge).

// What only the PostgreSQL half uses goes unused without its feature.
#![cfg_attr(not(feature = "postgres"), allow(unused_imports, dead_code))]

mod common;

use common::limiter::{check_store_times, Logged};
use common::RedisServer;
use redis::Commands;
use redis_lease::{Client, Error, Granted, RateLimiter};
use std::cell::Cell;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A store whose clock a timeline moves on.
trait Timeline {
    fn client(&self) -> &Client;
    /// Lets `by` pass on the store's clock.
    fn pass(&self, by: Duration);
}

/// Redis on the host's clock: time passes as the test waits.
struct OnRedis {
    server: RedisServer,
    client: Client,
}

impl OnRedis {
    fn start() -> OnRedis {
        let server = RedisServer::start();
        let client = common::client(&server);
        OnRedis { server, client }
    }
}

impl Timeline for OnRedis {
    fn client(&self) -> &Client {
        &self.client
    }

    fn pass(&self, by: Duration) {
        std::thread::sleep(by);
    }
}

/// PostgreSQL on a clock the test moves.
#[cfg(feature = "postgres")]
struct OnPostgres {
    server: testkit::PgServer,
    client: Client,
    clock: Cell<SystemTime>,
}

#[cfg(feature = "postgres")]
impl OnPostgres {
    fn start() -> OnPostgres {
        let at = UNIX_EPOCH + Duration::from_secs(1_950_000_000);
        let server = testkit::PgServer::start_on_clock(at);
        server
            .psql(&format!(
                "GRANT CREATE ON DATABASE postgres TO {}",
                testkit::PgServer::SCRAM_USER
            ))
            .expect("granted");
        let client = Client::postgres(server.scram_url())
            .build()
            .expect("valid settings");
        OnPostgres {
            server,
            client,
            clock: Cell::new(at),
        }
    }
}

#[cfg(feature = "postgres")]
impl Timeline for OnPostgres {
    fn client(&self) -> &Client {
        &self.client
    }

    fn pass(&self, by: Duration) {
        self.clock.set(self.clock.get() + by);
        self.server.set_clock(self.clock.get());
    }
}

/// Plays `timeline` on Redis and, with the feature, on PostgreSQL.
fn on_every_store(timeline: impl Fn(&dyn Timeline)) {
    timeline(&OnRedis::start());
    #[cfg(feature = "postgres")]
    timeline(&OnPostgres::start());
}

fn logged(granted: Granted) -> Logged {
    Logged {
        before: 0,
        after: 0,
        at: granted.granted_at(),
    }
}

fn took(limiter: &RateLimiter) -> Option<Granted> {
    limiter.try_acquire(1).expect("reachable")
}

/// Redisson #2931: permits taken at the end of one interval and at the start of the next were
/// all granted, twice the rate within a window. Here a window is any window: taken at its end,
/// nothing more is granted until a window after those grants.
#[test]
fn grants_at_a_windows_end_leave_nothing_at_the_next_ones_start() {
    on_every_store(|store| {
        let window = Duration::from_millis(500);
        let limiter = store
            .client()
            .rate_limiter("edge", 10, window)
            .expect("valid");
        store.pass(Duration::from_millis(450));
        let end = limiter
            .try_acquire(10)
            .expect("reachable")
            .expect("a window's worth");
        for _ in 0..4 {
            store.pass(Duration::from_millis(100));
            assert!(
                took(&limiter).is_none(),
                "granted within a window of the ten"
            );
        }
        store.pass(Duration::from_millis(100));
        let next = took(&limiter).expect("a window after");
        assert!(next.granted_at() >= end.granted_at() + window);
    });
}

/// Redisson #3639: after a quiet spell the limiter let a burst above its rate through (a
/// token bucket's stored tokens). Here a quiet spell stores nothing: the grants of any window
/// are at most the limit however long it was quiet.
#[test]
fn an_idle_limiter_grants_no_burst_above_its_limit() {
    on_every_store(|store| {
        let window = Duration::from_millis(400);
        let limiter = store
            .client()
            .rate_limiter("hard", 18, window)
            .expect("valid");
        let mut grants = Vec::new();
        grants.extend(std::iter::from_fn(|| took(&limiter)).take(100).map(logged));
        assert_eq!(grants.len(), 18);
        store.pass(window * 5);
        for _ in 0..8 {
            grants.extend(std::iter::from_fn(|| took(&limiter)).take(100).map(logged));
            store.pass(window / 4);
        }
        assert!(grants.len() <= 18 * 4, "{} grants", grants.len());
        if let Err(excess) = check_store_times(&grants, 18, window) {
            panic!("{excess}");
        }
    });
}

/// Redisson #7342 (its `release()` losing the permits it gave back when the window moved) and
/// #7329 (`availablePermits()` above the rate after a release and an expiry): there is no
/// release. What is available is the limit less the grants within the window, never more than
/// the limit, and it rises by exactly the grants that leave the window.
#[test]
fn available_is_the_limit_less_the_grants_in_the_window_and_never_above_it() {
    on_every_store(|store| {
        let window = Duration::from_millis(1000);
        let limiter = store
            .client()
            .rate_limiter("available", 10, window)
            .expect("valid");
        assert_eq!(limiter.available().expect("reachable"), 10);
        for taken in 1..=9u64 {
            took(&limiter).expect("room");
            assert_eq!(limiter.available().expect("reachable"), 10 - taken);
            store.pass(Duration::from_millis(100));
        }
        // 950 ms after the first grant: nine count; 1050 ms: the first has left.
        store.pass(Duration::from_millis(50));
        let state = limiter.inspect().expect("reachable");
        assert!(state.available <= 10 && state.used + state.available == 10);
        store.pass(Duration::from_millis(100));
        let state = limiter.inspect().expect("reachable");
        assert!(state.used <= 8, "{state:?}");
        assert_eq!(state.available, 10 - state.used);
        store.pass(window * 2);
        assert_eq!(limiter.available().expect("reachable"), 10, "never above");
    });
}

/// Redisson #2072: the first acquisition of a new limiter was granted more permits than its
/// rate. Here more than the limit is refused whenever asked, and the first take is counted as
/// any other.
#[test]
fn the_first_take_of_a_new_limiter_is_held_to_the_limit() {
    on_every_store(|store| {
        let limiter = store
            .client()
            .rate_limiter("first", 5, Duration::from_secs(60))
            .expect("valid");
        assert!(matches!(
            limiter.try_acquire(6),
            Err(Error::InvalidArgument(_))
        ));
        let first = limiter.try_acquire(5).expect("reachable").expect("free");
        assert_eq!(first.available(), 0);
        assert!(took(&limiter).is_none());
    });
}

/// Redisson #3025 and #5516: one period after the first acquisition, every call failed with a
/// Lua error (`bad argument #2 to 'unpack'`): the limiter's keys lapsed apart, and the script
/// read one without the other. Here the hash and the log expire together, a limit that lapsed
/// is as good as none whatever its keys still hold, and a limiter that lost either key alone
/// takes on, counting what is left.
#[test]
fn a_limiter_whose_keys_lapsed_or_one_of_them_was_lost_takes_on() {
    let store = OnRedis::start();
    let window = Duration::from_millis(300);
    let limiter = store
        .client()
        .rate_limiter("lapsed", 3, window)
        .expect("valid");
    limiter.try_acquire(2).expect("reachable").expect("free");
    store.pass(window + Duration::from_millis(50));
    let state = limiter.inspect().expect("reachable");
    assert_eq!(
        (state.limit, state.used),
        (None, 0),
        "lapsed a window after its last grant"
    );
    let mut con = store.server.connection();
    limiter
        .try_acquire(3)
        .expect("reachable")
        .expect("all again");
    // The hash lost alone: the log still counts.
    let () = con.del("{lapsed}:limiter").expect("DEL");
    assert!(took(&limiter).is_none(), "the log's grants still count");
    assert_eq!(limiter.inspect().expect("reachable").used, 3);
    // The log lost alone: the hash's limit still stands.
    store.pass(window + Duration::from_millis(50));
    limiter.try_acquire(1).expect("reachable").expect("free");
    let () = con.del("{lapsed}:limiter:log").expect("DEL");
    limiter
        .try_acquire(3)
        .expect("reachable")
        .expect("nothing counts");
    let other = limiter
        .with_limit(redis_lease::RateLimit::window(4, window))
        .expect("valid");
    assert!(matches!(
        other.try_acquire(1),
        Err(Error::InvalidArgument(_))
    ));
}

/// Redisson #4176: a limit of so many per day gave nothing back at the day's end. Here the
/// grants of a day's window are available again a day after them, to the microsecond.
#[cfg(feature = "postgres")]
#[test]
fn a_days_window_gives_its_grants_back_a_day_after_them() {
    let store = OnPostgres::start();
    let day = Duration::from_secs(86_400);
    let limiter = store
        .client()
        .rate_limiter("daily", 10_000, day)
        .expect("valid");
    let first = limiter
        .try_acquire(10_000)
        .expect("reachable")
        .expect("a day's worth");
    store.pass(day - Duration::from_micros(1));
    assert!(took(&limiter).is_none());
    let state = limiter.inspect().expect("reachable");
    assert_eq!(state.next_in, Some(Duration::from_micros(1)));
    store.pass(Duration::from_micros(1));
    let again = limiter
        .try_acquire(10_000)
        .expect("reachable")
        .expect("all");
    assert_eq!(again.granted_at(), first.granted_at() + day);
}

/// Redisson #4176 on Redis: a day's window keeps its grants a day, and its keys two at most.
#[test]
fn a_days_window_keeps_its_grants_a_day_and_its_keys_two_at_most_on_redis() {
    let store = OnRedis::start();
    let day = Duration::from_secs(86_400);
    let limiter = store
        .client()
        .rate_limiter("daily", 10_000, day)
        .expect("valid");
    limiter
        .try_acquire(10_000)
        .expect("reachable")
        .expect("all");
    let state = limiter.inspect().expect("reachable");
    let next = state.next_in.expect("none left");
    assert!(
        next <= day && next > day - Duration::from_secs(60),
        "{next:?}"
    );
    let ttl: i64 = store
        .server
        .connection()
        .pttl("{daily}:limiter:log")
        .expect("PTTL");
    assert!(ttl > 86_400_000 && ttl <= 2 * 86_400_000 + 1, "{ttl}");
}

/// Redisson #5687: a handle set up (`setRate`) for every call reset the limiter, and the rate
/// was exceeded under load. Here making a handle writes nothing: a handle made for every call,
/// from several clients, counts every grant.
#[test]
fn a_handle_made_for_every_call_counts_every_grant() {
    on_every_store(|store| {
        let window = Duration::from_millis(300);
        let mut grants = Vec::new();
        for _ in 0..6 {
            for _ in 0..40 {
                let handle = store
                    .client()
                    .rate_limiter("remade", 15, window)
                    .expect("valid");
                if let Some(granted) = took(&handle) {
                    grants.push(logged(granted));
                }
            }
            store.pass(window / 3);
        }
        assert!(grants.len() >= 15, "{} grants", grants.len());
        if let Err(excess) = check_store_times(&grants, 15, window) {
            panic!("{excess}");
        }
    });
}
