//! Checks of the semaphore, the read-write lock, the fair lock and cancellable waits, shared by
//! the tests of every deployment that offers them. Each takes a way to make clients (as many as
//! it needs, each its own process's worth of threads) and a name of its own.

use redis_lease::{Cancel, Client, Error, LeaseGuard};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Makes a client of the deployment under test, with the given default lease.
pub type Clients<'a> = &'a dyn Fn(Duration) -> Client;

const LEASE: Duration = Duration::from_millis(600);

/// Every check of this file but the frozen fair waiter's, each on names of its own: what a store
/// that offers every primitive must pass.
pub fn every_primitive(clients: Clients<'_>) {
    semaphore_bounds_its_holders(clients, "s-bounds");
    semaphore_permits_change_while_held(clients, "s-change");
    semaphore_permits_of_the_dead_come_back(clients, "s-dead");
    read_write_lock_excludes_writers(clients, "rw-excl");
    read_write_lock_does_not_starve_writers(clients, "rw-starve");
    read_write_lock_passes_a_reader_queued_between_two_writers(clients, "rw-queued");
    read_write_lock_forgets_writers_that_left(clients, "rw-left");
    fair_lock_grants_in_order(clients, "fair-order");
    waits_end_when_cancelled(clients, "cancel");
    primitives_refuse_each_others_keys(clients, "mixed");
}

/// At most `permits` held at once, across clients and by several permits at once; a release
/// lets the next one in; tokens rise; the count of permits in use is what Redis holds.
pub fn semaphore_bounds_its_holders(clients: Clients<'_>, name: &str) {
    let (a, b) = (clients(LEASE), clients(LEASE));
    let sa = a.semaphore(name, 3).expect("valid");
    let sb = b.semaphore(name, 3).expect("valid");
    assert_eq!((sa.name(), sa.permits()), (name, 3));
    let first = sa.acquire().expect("free");
    let second = sb.acquire().expect("free");
    let third = sa.acquire().expect("free: a semaphore is not reentrant");
    assert!(
        sb.try_acquire().expect("reachable").is_none(),
        "3 of 3 held"
    );
    assert!(
        sa.try_acquire().expect("reachable").is_none(),
        "3 of 3 held"
    );
    let tokens: Vec<u64> = [&first, &second, &third]
        .iter()
        .map(|guard| guard.fencing_token().expect("fenced"))
        .collect();
    assert!(
        tokens.windows(2).all(|pair| pair[0] < pair[1]),
        "{tokens:?}"
    );
    let state = sa.inspect().expect("reachable");
    assert_eq!(
        (state.permits, state.permits_in_use),
        (Some(3), Some(3)),
        "{state:?}"
    );
    assert_eq!(state.holders.len(), 3, "{state:?}");
    assert_eq!(sa.available_permits().expect("reachable"), 0);
    // Renewed past several leases, all three still held.
    thread::sleep(LEASE * 2);
    assert!(!first.is_lost() && !second.is_lost() && !third.is_lost());
    assert!(sb.try_acquire().expect("reachable").is_none());
    // Two permits at once wait until two are free.
    let waiter = {
        let sb = sb.clone();
        thread::spawn(move || {
            sb.taking(2)
                .expect("a number of permits it has")
                .try_lock_for(Duration::from_secs(10))
        })
    };
    first.unlock().expect("held");
    thread::sleep(Duration::from_millis(200));
    assert!(!waiter.is_finished(), "one permit free is not two");
    second.unlock().expect("held");
    let pair = waiter
        .join()
        .expect("no panic")
        .expect("reachable")
        .expect("two came free");
    assert!(pair.fencing_token() > Some(tokens[2]));
    assert_eq!(
        sa.inspect().expect("reachable").permits_in_use,
        Some(3),
        "one hold of two permits and one of one"
    );
    assert!(matches!(sa.taking(4), Err(Error::InvalidArgument(_))));
    assert!(matches!(sa.taking(0), Err(Error::InvalidArgument(_))));
    pair.unlock().expect("held");
    third.unlock().expect("held");
    assert_eq!(sa.available_permits().expect("reachable"), 3);
}

/// While permits are held, an acquisition declaring another number than the holders did is
/// refused, naming both; a resize changes the number: lowered, the holds in excess keep their
/// permits and no one gets in until fewer than the new number are held; raised, waiters are let
/// in. With nobody holding, a new number is stored by the next acquisition.
pub fn semaphore_permits_change_while_held(clients: Clients<'_>, name: &str) {
    let client = clients(LEASE);
    let four = client.semaphore(name, 4).expect("valid");
    let held: Vec<LeaseGuard> = (0..4).map(|_| four.acquire().expect("free")).collect();
    let two = four.with_permits(2).expect("valid");
    assert_eq!(two.permits(), 2);
    let refused = |result: redis_lease::Result<Option<LeaseGuard>>, declared: u32, asked: u32| {
        let names_both = |why: &str| {
            why.contains(&format!("declared {declared} permits"))
                && why.contains(&format!("acquisition {asked}"))
        };
        assert!(
            matches!(&result, Err(Error::InvalidArgument(why)) if names_both(why)),
            "{result:?}"
        );
    };
    // A drifted number is refused, by a try and by a wait alike, and nothing is left behind.
    refused(two.try_acquire(), 4, 2);
    refused(two.try_acquire_for(Duration::from_millis(300)), 4, 2);
    assert_eq!(four.available_permits().expect("reachable"), 0);
    // Resized, the old number is the one refused.
    assert_eq!(two.resize(2).expect("reachable"), Some(4));
    refused(four.try_acquire(), 2, 4);
    assert!(two.try_acquire().expect("reachable").is_none());
    let mut held = held.into_iter();
    for _ in 0..2 {
        held.next().expect("four").unlock().expect("held");
        assert!(
            two.try_acquire().expect("reachable").is_none(),
            "still 2 or more held of 2"
        );
    }
    held.next().expect("four").unlock().expect("held");
    let one_more = two.try_acquire().expect("reachable").expect("1 of 2 held");
    assert_eq!(
        two.inspect().expect("reachable").permits,
        Some(2),
        "the number stored"
    );
    // A waiter for a third permit is let in once the number is raised.
    let last = held.next().expect("four");
    let three = two.with_permits(3).expect("valid");
    refused(three.try_acquire(), 2, 3);
    assert_eq!(three.resize(3).expect("reachable"), Some(2));
    let got = three
        .try_acquire_for(Duration::from_secs(5))
        .expect("reachable");
    assert!(got.is_some(), "2 of 3 held");
    drop((last, one_more, got));
    // Nobody holds a permit: a new number is simply stored by the next acquisition.
    let five = client.semaphore(name, 5).expect("valid");
    let first = five.try_acquire().expect("reachable").expect("free");
    assert_eq!(five.inspect().expect("reachable").permits, Some(5));
    drop(first);
    assert!(matches!(
        client.semaphore(name, 0),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        client.semaphore(name, redis_lease::MAX_PERMITS + 1),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        four.with_permits(0),
        Err(Error::InvalidArgument(_))
    ));
}

/// A permit whose holder stopped renewing it (abandoned, as a dead holder's) comes back when its
/// lease lapses; a fixed lease is never renewed.
pub fn semaphore_permits_of_the_dead_come_back(clients: Clients<'_>, name: &str) {
    // The dead holder is another client: an owner's own next acquisition would release what it
    // abandoned first.
    let dead = clients(Duration::from_millis(400));
    // Connected before the dead holder acquires: its first call's set-up must not eat the lease.
    let client = clients(Duration::from_millis(400));
    client.ping().expect("reachable");
    let semaphore = client.semaphore(name, 1).expect("valid");
    dead.semaphore(name, 1)
        .expect("valid")
        .acquire()
        .expect("free")
        .abandon();
    assert!(semaphore.try_acquire().expect("reachable").is_none());
    let started = Instant::now();
    let back = semaphore
        .try_acquire_for(Duration::from_secs(5))
        .expect("reachable")
        .expect("the lease lapses");
    assert!(started.elapsed() < Duration::from_secs(3));
    let fixed = semaphore.taking(1).expect("valid");
    drop(back);
    let guard = fixed
        .with_lease(Duration::from_millis(300))
        .try_lock()
        .expect("reachable")
        .expect("free");
    let lost = guard
        .lost_signal()
        .recv_timeout(Duration::from_secs(5))
        .expect("a fixed lease is lost when it runs out");
    assert!(lost.valid_until <= Instant::now());
    assert!(guard.valid_until() <= Instant::now());
    let after = semaphore
        .try_acquire_for(Duration::from_secs(5))
        .expect("reachable");
    assert!(after.is_some(), "the fixed lease lapsed");
}

/// Readers share, a writer excludes everyone; both sides are reentrant; a writer downgrades;
/// an upgrade is refused.
pub fn read_write_lock_excludes_writers(clients: Clients<'_>, name: &str) {
    let (a, b) = (clients(LEASE), clients(LEASE));
    let rw_a = a.read_write_lock(name).expect("valid");
    let rw_b = b.read_write_lock(name).expect("valid");
    assert_eq!(rw_a.name(), name);
    let r1 = rw_a.read_lock().lock().expect("free");
    let r2 = rw_b.read_lock().lock().expect("readers share");
    let again = rw_a.read_lock().lock().expect("re-entered");
    assert_eq!(again.holds_at_acquire(), 2);
    assert_eq!(again.fencing_token(), r1.fencing_token());
    let rw_c = clients(LEASE).read_write_lock(name).expect("valid");
    assert!(rw_c.write_lock().try_lock().expect("reachable").is_none());
    assert!(
        matches!(rw_a.write_lock().try_lock(), Err(Error::InvalidArgument(_))),
        "an upgrade waits for itself"
    );
    let readers = rw_a.read_lock().inspect().expect("reachable");
    assert_eq!(readers.holders.len(), 2, "{readers:?}");
    drop((r1, again));
    thread::sleep(LEASE * 2);
    assert!(!r2.is_lost(), "renewed");
    r2.unlock().expect("held");
    let w = rw_b.write_lock().lock().expect("free");
    let w2 = rw_b.write_lock().lock().expect("re-entered");
    assert_eq!(w2.holds_at_acquire(), 2);
    assert!(rw_a.read_lock().try_lock().expect("reachable").is_none());
    assert!(rw_a.write_lock().try_lock().expect("reachable").is_none());
    assert_eq!(
        rw_b.write_lock().hold_count().expect("reachable"),
        2,
        "the writer's holds"
    );
    // Downgrade: the writer reads, then stops writing, and others read with it.
    let downgraded = rw_b.read_lock().lock().expect("the writer may read");
    assert!(downgraded.fencing_token() > w.fencing_token());
    let reading = rw_c.read_lock().inspect().expect("reachable");
    assert_eq!(
        reading.holders,
        [(rw_b.read_lock().owner().into_owned(), 1)],
        "the writer's own read holds the read side"
    );
    drop((w, w2));
    let other = rw_a
        .read_lock()
        .try_lock()
        .expect("reachable")
        .expect("the writer only reads now");
    assert!(rw_c.write_lock().try_lock().expect("reachable").is_none());
    drop((downgraded, other));
    assert!(rw_a.write_lock().try_lock().expect("reachable").is_some());
}

/// A waiting writer goes before readers that come after it, though readers hold the lock.
pub fn read_write_lock_does_not_starve_writers(clients: Clients<'_>, name: &str) {
    let (a, b, c) = (clients(LEASE), clients(LEASE), clients(LEASE));
    let reader = a.read_write_lock(name).expect("valid");
    let held = reader.read_lock().lock().expect("free");
    let writer = {
        let rw = b.read_write_lock(name).expect("valid");
        thread::spawn(move || {
            let guard = rw.write_lock().lock().expect("written in time");
            let at = Instant::now();
            thread::sleep(Duration::from_millis(300));
            drop(guard);
            at
        })
    };
    // Until the writer asks, new readers get in.
    let late = c.read_write_lock(name).expect("valid");
    thread::sleep(Duration::from_millis(300));
    assert!(
        late.read_lock().try_lock().expect("reachable").is_none(),
        "a writer waits: later readers wait behind it"
    );
    let late_reader = {
        let late = late.clone();
        thread::spawn(move || {
            let guard = late.read_lock().lock().expect("read in time");
            let at = Instant::now();
            drop(guard);
            at
        })
    };
    thread::sleep(Duration::from_millis(200));
    drop(held);
    let wrote_at = writer.join().expect("no panic");
    let read_at = late_reader.join().expect("no panic");
    assert!(wrote_at < read_at, "the writer went first");
}

/// kazoo #649: a writer holds, a reader asks, a second writer asks behind the reader, the first
/// writer lets go. Both waiters get the lock in turn, never together, and neither waits on the
/// other for ever (kazoo's reader watched the writer behind it, which watched the reader).
pub fn read_write_lock_passes_a_reader_queued_between_two_writers(
    clients: Clients<'_>,
    name: &str,
) {
    let (a, b, c) = (clients(LEASE), clients(LEASE), clients(LEASE));
    let first = a.read_write_lock(name).expect("valid");
    let held = first.write_lock().lock().expect("free");
    let (done, finished) = std::sync::mpsc::channel();
    let turn = |side: &'static str, rw: redis_lease::ReadWriteLock| {
        let done = done.clone();
        thread::spawn(move || {
            let guard = if side == "reader" {
                rw.read_lock().lock()
            } else {
                rw.write_lock().lock()
            }
            .expect("taken in time");
            let from = Instant::now();
            thread::sleep(Duration::from_millis(100));
            let to = Instant::now();
            guard.unlock().expect("released");
            let _ = done.send((side, from, to));
        })
    };
    let reader = turn("reader", b.read_write_lock(name).expect("valid"));
    thread::sleep(Duration::from_millis(200));
    let second = turn("second writer", c.read_write_lock(name).expect("valid"));
    thread::sleep(Duration::from_millis(200));
    held.unlock().expect("released");
    let mut turns: Vec<(&str, Instant, Instant)> = (0..2)
        .map(|_| {
            finished
                .recv_timeout(Duration::from_secs(10))
                .expect("both waiters got the lock: neither waits on the other")
        })
        .collect();
    reader.join().expect("no panic");
    second.join().expect("no panic");
    turns.sort_by_key(|turn| turn.1);
    assert!(
        turns[0].2 <= turns[1].1,
        "the reader and the second writer held at once: {turns:?}"
    );
}

/// A writer that stops waiting withdraws its mark at once, and a vanished one's lapses.
pub fn read_write_lock_forgets_writers_that_left(clients: Clients<'_>, name: &str) {
    let (a, b) = (clients(LEASE), clients(LEASE));
    let rw_a = a.read_write_lock(name).expect("valid");
    let rw_b = b.read_write_lock(name).expect("valid");
    let held = rw_a.read_lock().lock().expect("free");
    let gave_up = rw_b
        .write_lock()
        .try_lock_for(Duration::from_millis(300))
        .expect("reachable");
    assert!(gave_up.is_none());
    assert!(
        rw_b.read_lock().try_lock().expect("reachable").is_some(),
        "the writer that gave up no longer holds readers back"
    );
    drop(held);
}

/// A fair lock grants in the order its waiters asked, across clients and threads.
pub fn fair_lock_grants_in_order(clients: Clients<'_>, name: &str) {
    let made: Vec<Client> = (0..3).map(|_| clients(LEASE)).collect();
    let holder = made[0]
        .fair_lock(name)
        .expect("valid")
        .lock()
        .expect("free");
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..6 {
        let lock = made[i % 3].fair_lock(name).expect("valid");
        let order = Arc::clone(&order);
        waiters.push(thread::spawn(move || {
            let guard = lock.lock().expect("granted in time");
            order.lock().expect("no panic").push(i);
            thread::sleep(Duration::from_millis(20));
            drop(guard);
        }));
        // Each has asked (and taken its place) before the next asks.
        let line = made[1].fair_lock(name).expect("valid");
        testkit::wait_until(
            "the waiter takes its place",
            Duration::from_secs(10),
            || line.inspect().expect("reachable").waiting >= Some(i as u64 + 1),
        );
    }
    let state = made[1]
        .fair_lock(name)
        .expect("valid")
        .inspect()
        .expect("reachable");
    assert_eq!(state.waiting, Some(6), "{state:?}");
    drop(holder);
    for waiter in waiters {
        waiter.join().expect("no panic");
    }
    assert_eq!(*order.lock().expect("no panic"), vec![0, 1, 2, 3, 4, 5]);
    // A plain lock of the same name is the same lock.
    let fair = made[0]
        .fair_lock(name)
        .expect("valid")
        .lock()
        .expect("free");
    let plain = made[1].lock(name).expect("valid");
    assert!(plain.try_lock().expect("reachable").is_none());
    drop(fair);
    assert!(plain.try_lock().expect("reachable").is_some());
}

/// A fair lock's waiter that stops asking (frozen behind `freeze`, which stops its client's
/// traffic) holds the line up for a bounded time; one that gives up leaves it at once.
pub fn fair_lock_passes_over_vanished_waiters(
    clients: Clients<'_>,
    frozen: &Client,
    freeze: &dyn Fn(),
    name: &str,
) {
    let a = clients(LEASE);
    let holder = a.fair_lock(name).expect("valid").lock().expect("free");
    // A waiter that gives up leaves the line (another thread: the holder's would re-enter).
    let quitter = a.fair_lock(name).expect("valid");
    let quit = thread::spawn(move || {
        quitter
            .try_lock_for(Duration::from_millis(300))
            .map(|g| g.is_none())
    });
    assert!(quit.join().expect("no panic").expect("reachable"));
    // One that is frozen while it waits keeps its place only until it lapses.
    let stuck = frozen.fair_lock(name).expect("valid");
    let stuck_waiter = thread::spawn(move || stuck.try_lock_for(Duration::from_secs(30)));
    thread::sleep(Duration::from_millis(400));
    freeze();
    let b = clients(LEASE);
    let next = b.fair_lock(name).expect("valid");
    let next_waiter = thread::spawn(move || {
        let started = Instant::now();
        let guard = next.lock().expect("granted");
        (started.elapsed(), guard.fencing_token())
    });
    thread::sleep(Duration::from_millis(300));
    drop(holder);
    let (waited, _) = next_waiter.join().expect("no panic");
    assert!(
        waited < Duration::from_secs(12),
        "the frozen waiter's place lapsed: waited {waited:?}"
    );
    drop(stuck_waiter);
}

/// Every waiting call ends with `Cancelled` soon after its token is cancelled: a waiter in
/// Redis, one in the local queue behind it, a semaphore's, a reader's; nothing is held after.
pub fn waits_end_when_cancelled(clients: Clients<'_>, name: &str) {
    let (a, b) = (clients(LEASE), clients(LEASE));
    let lock = a.lock(name).expect("valid");
    let held = lock.lock().expect("free");
    let other = b.lock(name).expect("valid");
    let cancel = Cancel::new();
    let semaphore = b.semaphore(&format!("{name}-s"), 1).expect("valid");
    let permit = a
        .semaphore(&format!("{name}-s"), 1)
        .expect("valid")
        .acquire()
        .expect("free");
    let rw = b.read_write_lock(&format!("{name}-rw")).expect("valid");
    let written = a
        .read_write_lock(&format!("{name}-rw"))
        .expect("valid")
        .write_lock()
        .lock()
        .expect("free");
    let mut waits = Vec::new();
    for _ in 0..2 {
        // The second waits in the local queue behind the first.
        let (other, cancel) = (other.clone(), cancel.clone());
        waits.push(thread::spawn(move || {
            other.cancel_on(&cancel).lock().map(drop)
        }));
    }
    {
        let (other, cancel) = (other.clone(), cancel.clone());
        waits.push(thread::spawn(move || {
            other
                .cancel_on(&cancel)
                .try_lock_for(Duration::from_secs(60))
                .map(drop)
        }));
    }
    {
        let (semaphore, cancel) = (semaphore.clone(), cancel.clone());
        waits.push(thread::spawn(move || {
            semaphore.cancel_on(&cancel).acquire().map(drop)
        }));
    }
    {
        let (rw, cancel) = (rw.clone(), cancel.clone());
        waits.push(thread::spawn(move || {
            rw.read_lock().cancel_on(&cancel).lock().map(drop)
        }));
    }
    thread::sleep(Duration::from_millis(400));
    assert!(waits.iter().all(|wait| !wait.is_finished()));
    let cancelled_at = Instant::now();
    cancel.cancel();
    for wait in waits {
        let outcome = wait.join().expect("no panic");
        assert!(
            matches!(&outcome, Err(Error::Cancelled { .. })),
            "{outcome:?}"
        );
    }
    assert!(cancelled_at.elapsed() < Duration::from_secs(3));
    assert!(matches!(
        other.cancel_on(&cancel).lock(),
        Err(Error::Cancelled { .. })
    ));
    drop((held, permit, written));
    assert!(other.try_lock().expect("reachable").is_some());
}

/// Names used by one primitive are refused by another, with the key named; bad keys are typed
/// errors, not panics or hangs.
pub fn primitives_refuse_each_others_keys(clients: Clients<'_>, name: &str) {
    let client = clients(LEASE);
    let lock = client.lock(name).expect("valid");
    let guard = lock.lock().expect("free");
    let semaphore = client.semaphore(name, 2).expect("valid");
    assert!(
        matches!(semaphore.try_acquire(), Err(Error::WrongType { .. })),
        "a lock's name"
    );
    let rw = client.read_write_lock(name).expect("valid");
    assert!(matches!(
        rw.read_lock().try_lock(),
        Err(Error::WrongType { .. })
    ));
    drop(guard);
    let other = format!("{name}-2");
    let permit = client
        .semaphore(&other, 2)
        .expect("valid")
        .acquire()
        .expect("free");
    let lock = client.lock(&other).expect("valid");
    assert!(matches!(lock.try_lock(), Err(Error::WrongType { .. })));
    let rw = client.read_write_lock(&other).expect("valid");
    assert!(
        matches!(rw.write_lock().try_lock(), Err(Error::WrongType { .. })),
        "a semaphore's name"
    );
    let state = rw.write_lock().inspect().expect("readable");
    assert!(!state.is_held() && state.problems.len() == 1, "{state:?}");
    let state = lock.inspect().expect("readable");
    assert!(!state.is_held() && state.problems.len() == 1, "{state:?}");
    drop(permit);
}
