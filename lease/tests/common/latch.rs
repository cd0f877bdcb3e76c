//! Checks of the count-down latch, shared by the tests of every store that offers it: count-downs
//! from many clients, each counted once, open the latch once and wake its waiters (in every
//! client, soon, by the store rather than by the waiters' backstop); a count is set only from
//! zero, and a waiter waits for its own round; cancelled and bounded waits; a latch left behind
//! lapses and its waiter is told.

use redis_lease::{Cancel, Client, Error, Latch};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

/// Makes a client of the store under test (each its own connections and subscriber, as a
/// process of its own has).
pub type Clients<'a> = &'a dyn Fn() -> Client;

/// How long a waiter may take to return after the count-down that opened its latch: well
/// under the 5 s a waiter goes without reading when nothing wakes it, so that a waiter woken
/// only by that backstop fails the check.
const WOKEN_WITHIN: Duration = Duration::from_millis(2500);

/// Counters in as many clients (and threads) count a latch down together, several times each;
/// every count-down is counted once (they return every count from the top down to 0, each
/// once), the latch opens once, and waiters in other clients return after the count-down that
/// opened it was sent, and soon after it returned.
pub fn count_downs_from_many_clients_open_the_latch_once(clients: Clients<'_>, name: &str) {
    const COUNTERS: usize = 6;
    const EACH: u32 = 5;
    let total = COUNTERS as u32 * EACH;
    let setter = clients();
    let latch = setter.latch(name).expect("valid");
    assert_eq!(latch.name(), name);
    assert!(
        latch.set_count(total).expect("reachable"),
        "set from absent"
    );
    assert_eq!(latch.count().expect("reachable"), total);
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let latch = clients().latch(name).expect("valid");
            thread::spawn(move || {
                let opened = latch.wait_for(Duration::from_secs(60));
                (opened, Instant::now())
            })
        })
        .collect();
    // All but the last count-down, from every counter at once.
    let start = Arc::new(Barrier::new(COUNTERS));
    let counters: Vec<_> = (0..COUNTERS)
        .map(|i| {
            let latch = clients().latch(name).expect("valid");
            let start = Arc::clone(&start);
            thread::spawn(move || {
                // Connected before the count-downs start together.
                assert_eq!(latch.count().expect("reachable"), total);
                start.wait();
                let turns = if i == 0 { EACH - 1 } else { EACH };
                (0..turns)
                    .map(|_| latch.count_down().expect("reachable"))
                    .collect::<Vec<u32>>()
            })
        })
        .collect();
    let mut left: Vec<u32> = counters
        .into_iter()
        .flat_map(|counter| counter.join().expect("no panic"))
        .collect();
    assert_eq!(latch.count().expect("reachable"), 1);
    assert!(
        waiters.iter().all(|waiter| !waiter.is_finished()),
        "a waiter returned before zero"
    );
    assert!(
        !latch.set_count(3).expect("reachable"),
        "never reset above zero"
    );
    // Time for the waiters to be asleep, woken only by the opening (a waiter that reads the
    // latch open first returns as soon).
    thread::sleep(Duration::from_millis(300));
    let sent = Instant::now();
    let last = clients().latch(name).expect("valid").count_down();
    let returned = Instant::now();
    left.push(last.expect("reachable"));
    left.sort_unstable();
    assert_eq!(left, (0..total).collect::<Vec<u32>>(), "each counted once");
    for waiter in waiters {
        let (opened, at) = waiter.join().expect("no panic");
        assert!(opened.expect("reachable"), "opened before the wait's end");
        assert!(at >= sent, "returned before the last count-down was sent");
        assert!(
            at.saturating_duration_since(returned) < WOKEN_WITHIN,
            "woken {:?} after the opening",
            at.saturating_duration_since(returned)
        );
    }
    assert_eq!(
        latch.count_down().expect("reachable"),
        0,
        "at zero: nothing"
    );
    let state = latch.inspect().expect("reachable");
    assert!(state.exists && state.count == 0, "kept open: {state:?}");
    assert!(latch.wait_for(Duration::ZERO).expect("reachable"));
}

/// A count is set only while the latch is at zero or absent, and a waiter waits for the round it
/// found: one opened and set again at once still lets its waiters go; bounded waits end with
/// `false`, cancelled ones with `Cancelled`; counts and expiries out of range are refused.
pub fn a_latch_is_set_only_from_zero_and_its_waiters_wait_for_their_round(
    clients: Clients<'_>,
    name: &str,
) {
    let (a, b) = (clients(), clients());
    let latch = a.latch(name).expect("valid");
    let theirs = b.latch(name).expect("valid");
    let state = latch.inspect().expect("reachable");
    assert!(!state.exists && state.count == 0, "{state:?}");
    assert!(latch.wait_for(Duration::ZERO).expect("reachable"), "absent");
    assert!(matches!(latch.set_count(0), Err(Error::InvalidArgument(_))));
    for expiry in [
        Duration::from_millis(500),
        Duration::from_secs(400 * 86_400),
    ] {
        // Refused in the same words whichever end of the range it misses.
        assert!(
            matches!(
                latch.expire_after(expiry).set_count(1),
                Err(Error::InvalidArgument(why)) if why.contains("from 1s to 365 days")
            ),
            "{expiry:?}"
        );
    }
    assert!(latch.set_count(2).expect("reachable"));
    assert!(!theirs.set_count(5).expect("reachable"), "counts already");
    assert_eq!(theirs.count().expect("reachable"), 2);
    assert_eq!(theirs.count_down().expect("reachable"), 1);
    assert!(!latch.set_count(1).expect("reachable"), "still counts");
    let started = Instant::now();
    assert!(!latch
        .wait_for(Duration::from_millis(300))
        .expect("reachable"));
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(theirs.count_down().expect("reachable"), 0);
    assert!(latch.wait_for(Duration::ZERO).expect("reachable"));
    assert!(
        theirs.set_count(3).expect("reachable"),
        "set again from zero"
    );
    assert_eq!(latch.count().expect("reachable"), 3);

    // A round opened and a new one set at once: its waiters go all the same.
    let waiter = {
        let latch = latch.clone();
        thread::spawn(move || latch.wait_for(Duration::from_secs(30)))
    };
    thread::sleep(Duration::from_millis(200));
    for left in [2, 1, 0] {
        assert_eq!(theirs.count_down().expect("reachable"), left);
    }
    assert!(theirs.set_count(4).expect("reachable"));
    assert!(
        waiter.join().expect("no panic").expect("reachable"),
        "the waiter of the round that opened"
    );
    assert!(!latch
        .wait_for(Duration::from_millis(100))
        .expect("reachable"));

    // A cancelled wait.
    let cancel = Cancel::new();
    let cancelled = {
        let latch = latch.cancel_on(&cancel);
        thread::spawn(move || latch.wait())
    };
    thread::sleep(Duration::from_millis(200));
    let asked = Instant::now();
    cancel.cancel();
    let outcome = cancelled.join().expect("no panic");
    assert!(
        matches!(outcome, Err(Error::Cancelled { .. })),
        "{outcome:?}"
    );
    assert!(asked.elapsed() < Duration::from_secs(2));
}

/// A latch left behind (set, counted down once, then no more) lapses its expiry after its last
/// change, no sooner, and reads as absent: its waiter is told it is gone (within `told` of its
/// lapse), and a count may be set again. Where the store tells a latch's time left, a latch at
/// zero is kept for at least 10 s whatever its expiry.
pub fn a_latch_left_behind_lapses_and_its_waiter_is_told(
    clients: Clients<'_>,
    name: &str,
    told: Duration,
) {
    let expiry = Duration::from_secs(1);
    let latch: Latch = clients().latch(name).expect("valid").expire_after(expiry);
    assert!(latch.set_count(2).expect("reachable"));
    let changed = Instant::now();
    assert_eq!(latch.count_down().expect("reachable"), 1);
    if let Some(ttl) = latch.inspect().expect("reachable").ttl {
        assert!(ttl <= expiry, "{ttl:?}");
    }
    let waiter = clients().latch(name).expect("valid");
    let outcome = waiter.wait_for(expiry + told + Duration::from_secs(5));
    let at = changed.elapsed();
    assert!(matches!(outcome, Err(Error::Gone { .. })), "{outcome:?}");
    assert!(at >= expiry, "gone {at:?} after its last change");
    assert!(at < expiry + told, "told {at:?} after its last change");
    let state = waiter.inspect().expect("reachable");
    assert!(!state.exists && state.count == 0, "{state:?}");
    assert!(latch.set_count(1).expect("reachable"), "absent: set again");
    assert_eq!(latch.count_down().expect("reachable"), 0);
    if let Some(ttl) = latch.inspect().expect("reachable").ttl {
        assert!(ttl > Duration::from_secs(9), "kept open for {ttl:?}");
    }
}
