//! Checks of writes made only while a hold holds (`LeaseGuard::if_held`), shared by the tests
//! of every store that offers them. Each store gives its own kind of write: one that appends an
//! entry to a log kept in the store and counts it, in two writes, so that a write half made
//! would show as a count that is not the log's length.

use redis_lease::{Client, Error, LeaseGuard, Write, Written};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Makes a client of the store under test with the given default lease.
pub type Clients<'a> = &'a dyn Fn(Duration) -> Client;

/// A store's side of the checks.
pub struct Log<'a> {
    /// The write that appends `entry` to the log of the lock `name`, and counts it.
    pub append: &'a (dyn Fn(&str, &str) -> Write + Sync),
    /// The log of the lock `name` and its count, as the store holds them.
    pub read: &'a dyn Fn(&str) -> (Vec<String>, u64),
    /// The count a write's reply says the log has after it.
    pub count_of: fn(&Written) -> Option<u64>,
}

/// A lease longer than a check takes. Taken as a fixed lease, never renewed, a hold is not
/// found taken away by the watchdog during a check: a refusal is then the store's own check,
/// not the guard's.
const LONG: Duration = Duration::from_secs(10);

/// The log of `name` as the store holds it, checked whole: as many counted as logged.
fn whole(log: &Log<'_>, name: &str) -> Vec<String> {
    let (entries, count) = (log.read)(name);
    assert_eq!(
        entries.len() as u64,
        count,
        "half written: {entries:?}, {count}"
    );
    entries
}

/// `guard`'s write of `entry`, refused: the hold no longer holds.
fn refused(guard: &LeaseGuard, log: &Log<'_>, entry: &str) {
    let write = (log.append)(guard.name(), entry);
    let outcome = guard.if_held(&write);
    assert!(
        matches!(outcome, Err(Error::NotOwner { .. })),
        "{outcome:?}"
    );
}

/// A write is made while the hold holds, and refused, with nothing of it made, once the hold was
/// taken away behind its guard's back (force-unlocked: the guard does not know), once another
/// holds the lock (a takeover), and once the guard knows its hold lost; a semaphore's permit
/// writes as a lock's hold does.
pub fn writes_are_made_only_while_the_hold_holds(clients: Clients<'_>, log: &Log<'_>, name: &str) {
    let (a, b) = (clients(LONG), clients(LONG));
    let lock = a.lock(name).expect("valid");
    let first = lock.with_lease(LONG).lock().expect("free");
    let written = first
        .if_held(&(log.append)(name, "a1"))
        .expect("held: written");
    assert_eq!((log.count_of)(&written), Some(1), "{written:?}");
    assert_eq!(whole(log, name), ["a1"]);

    // Taken away by an operator: the guard does not know, the store refuses.
    assert!(b
        .lock(name)
        .expect("valid")
        .force_unlock()
        .expect("reachable"));
    assert!(!first.is_lost(), "never renewed, the guard cannot know");
    refused(&first, log, "a2");
    assert_eq!(whole(log, name), ["a1"], "nothing of a refused write");

    // Taken over by another: its writes go in, the old hold's never.
    let second = b
        .lock(name)
        .expect("valid")
        .with_lease(LONG)
        .lock()
        .expect("free");
    refused(&first, log, "a3");
    let written = second
        .if_held(&(log.append)(name, "b1"))
        .expect("held: written");
    assert_eq!((log.count_of)(&written), Some(2));
    refused(&first, log, "a4");
    drop(first);
    second.unlock().expect("held");
    assert_eq!(whole(log, name), ["a1", "b1"]);

    // Lost as the guard knows it: refused without a call.
    let lease = Duration::from_millis(300);
    let lapsing = lock.with_lease(lease).lock().expect("free");
    assert!(lapsing.lost_signal().recv_timeout(lease * 10).is_ok());
    refused(&lapsing, log, "a5");
    drop(lapsing);
    assert_eq!(whole(log, name), ["a1", "b1"]);

    // A semaphore's permit is a hold of its own.
    let permits = a.semaphore(&format!("{name}-permits"), 2).expect("valid");
    let permit = permits.acquire().expect("free");
    let other = permits.acquire().expect("free");
    permit
        .if_held(&(log.append)(&format!("{name}-permits"), "p1"))
        .expect("held: written");
    assert!(permits.force_unlock().expect("reachable"));
    refused(&other, log, "p2");
    assert_eq!(whole(log, &format!("{name}-permits")), ["p1"]);
}

/// Clients of several threads take the lock in turn and write their hold's fencing token while
/// they hold, while an operator keeps taking the lock away from whoever holds it: the tokens
/// written never go back (a hold taken away never writes after a later one did), and every write
/// is whole.
pub fn writes_while_held_follow_the_holds_in_token_order(
    clients: Clients<'_>,
    log: &Log<'_>,
    name: &str,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let outcomes = Arc::new(Mutex::new((0u64, 0u64)));
    let until = Instant::now() + Duration::from_secs(3);
    let append = log.append;
    thread::scope(|scope| {
        for _ in 0..3 {
            let client = clients(LONG);
            for _ in 0..2 {
                let (client, outcomes) = (client.clone(), Arc::clone(&outcomes));
                scope.spawn(move || {
                    let lock = client.lock(name).expect("valid");
                    while Instant::now() < until {
                        let Some(guard) = lock.try_lock_for(Duration::from_secs(5)).expect("ok")
                        else {
                            continue;
                        };
                        let token = guard.fencing_token().expect("fenced");
                        // A pause inside the hold, for the operator to strike in.
                        thread::sleep(Duration::from_millis(2));
                        let outcome = guard.if_held(&append(name, &token.to_string()));
                        let mut counts = outcomes.lock().expect("not poisoned");
                        match outcome {
                            Ok(_) => counts.0 += 1,
                            Err(Error::NotOwner { .. }) => counts.1 += 1,
                            Err(error) => panic!("{error}"),
                        }
                        drop(counts);
                        let _ = guard.unlock();
                    }
                });
            }
        }
        let operator = clients(LONG).lock(name).expect("valid");
        let stop = Arc::clone(&stop);
        scope.spawn(move || {
            while Instant::now() < until && !stop.load(Ordering::Relaxed) {
                operator.force_unlock().expect("reachable");
                thread::sleep(Duration::from_millis(7));
            }
        });
    });
    stop.store(true, Ordering::Relaxed);
    let entries = whole(log, name);
    let (written, refused) = *outcomes.lock().expect("not poisoned");
    assert_eq!(
        entries.len() as u64,
        written,
        "every write reported made is there"
    );
    assert!(
        written > 10 && refused > 0,
        "{written} made, {refused} refused"
    );
    let tokens: Vec<u64> = entries
        .iter()
        .map(|entry| entry.parse().expect("a token"))
        .collect();
    assert!(
        tokens.windows(2).all(|pair| pair[0] <= pair[1]),
        "a token written after a later one: {tokens:?}"
    );
}
