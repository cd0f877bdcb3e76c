//! Holds handed on between the threads of one client without Redis: fencing tokens still rise
//! strictly from holder to holder, here and across clients; a hold that is lost, or whose client
//! was frozen past its lease, is handed to nobody; every holder of a handed-on hold hears of its
//! loss; and what a client shows of such a hold is its current holder.

mod common;

use common::RedisServer;
use redis::Commands;
use redis_lease::{Client, Error, LeaseGuard, Lock};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

/// How many connections of every client watch a lock's channel.
fn watchers(server: &RedisServer, name: &str) -> u64 {
    server.subscribers(&format!("{{{name}}}:freed"))
}

/// The last fencing token Redis handed out or reserved for `name`, as another client reads it.
fn last_token(observer: &Lock) -> u64 {
    observer
        .inspect()
        .expect("reachable")
        .last_token
        .unwrap_or(0)
}

/// A thread of `lock`'s client that waits for the lock and sends back its guard.
fn waiter(lock: &Lock) -> mpsc::Receiver<redis_lease::Result<LeaseGuard>> {
    let (sent, got) = mpsc::channel();
    let lock = lock.clone();
    thread::spawn(move || {
        let _ = sent.send(lock.lock());
    });
    got
}

/// Takes `lock` and starts a waiter of the same client: the hold, the waiter, and the last token
/// reserved once the waiter has reserved its block for the hold.
fn held_with_a_reserving_waiter(
    lock: &Lock,
    observer: &Lock,
) -> (
    LeaseGuard,
    mpsc::Receiver<redis_lease::Result<LeaseGuard>>,
    u64,
) {
    let first = lock.lock().expect("free");
    let first_token = first.fencing_token().expect("tokens");
    let got = waiter(lock);
    common::wait_until("tokens are reserved", || last_token(observer) > first_token);
    (first, got, last_token(observer))
}

/// The waiter's guard, which must be a hold of its own from Redis, past every reserved token.
fn taken_from_redis_past(
    got: &mpsc::Receiver<redis_lease::Result<LeaseGuard>>,
    reserved_up_to: u64,
) -> LeaseGuard {
    let next = got
        .recv_timeout(Duration::from_secs(10))
        .expect("the waiter acquired")
        .expect("from Redis");
    let token = next.fencing_token().expect("tokens");
    assert!(
        token > reserved_up_to,
        "handed on in memory with {token}, not a new hold from Redis past {reserved_up_to}"
    );
    next
}

/// Takes `lock`, lets a waiter of the same client reserve tokens for the hold, and releases: the
/// first holder's token and owner, and the waiter's guard, from a round in which the hold was
/// handed on in memory. The waiter reserves its tokens in Redis, then records them: a release
/// that comes between the two cannot hand the hold on, and frees it through Redis instead (the
/// waiter then takes a new hold above the block); such a round is set aside and played again.
fn handed_on_once(lock: &Lock, observer: &Lock) -> (u64, String, LeaseGuard) {
    for _ in 0..5 {
        let (first, got, _) = held_with_a_reserving_waiter(lock, observer);
        let first_token = first.fencing_token().expect("tokens");
        let first_owner = first.owner().to_owned();
        first.unlock().expect("held");
        let second = got
            .recv_timeout(Duration::from_secs(10))
            .expect("the waiter acquired")
            .expect("handed on");
        if second.fencing_token() == Some(first_token + 1) {
            return (first_token, first_owner, second);
        }
        assert!(
            second.fencing_token() > Some(first_token),
            "tokens rise either way"
        );
        second.unlock().expect("held");
    }
    panic!("no round handed the hold on in memory");
}

#[test]
fn a_hold_handed_on_in_memory_gets_the_next_token_and_shows_its_holder() {
    let server = RedisServer::start();
    let (client, _clock, _timer) = common::manual_client(&server, Duration::from_secs(30));
    let observer = common::client(&server).lock("baton").expect("valid");
    let lock = client.lock("baton").expect("valid");
    // As in `handed_on_once`: a round whose release came between the waiter's reservation in
    // Redis and its record of it went through Redis, and is played again.
    let (first_token, first_owner, second) = handed_on_once(&lock, &observer);
    assert_eq!(second.fencing_token(), Some(first_token + 1));
    assert_eq!(second.holds_at_acquire(), 1);
    // Redis still holds the first holder's hold: nothing was sent.
    let stored = observer.inspect().expect("reachable");
    assert_eq!(stored.holders, vec![(first_owner, 1)]);
    assert_eq!(stored.hold_token, Some(first_token));
    // Read through the client that holds it, the current holder shows.
    let shown = lock.inspect().expect("reachable");
    assert_eq!(shown.holders, vec![(second.owner().to_owned(), 1)]);
    assert_eq!(shown.hold_token, second.fencing_token());
    second.unlock().expect("held");
    assert!(!observer.is_locked().expect("reachable"), "freed in Redis");
}

#[test]
fn the_holder_a_hold_was_handed_to_re_enters_it_and_hears_of_its_loss() {
    let server = RedisServer::start();
    let lease = Duration::from_secs(3);
    let (client, clock, _timer) = common::manual_client(&server, lease);
    let observer = common::client(&server).lock("told").expect("valid");
    let lock = client.lock("told").expect("valid");
    // The waiter reserves its tokens in Redis, then records them: a release that comes between
    // the two cannot hand the hold on in memory, and frees it through Redis instead (the waiter
    // then takes a new hold, above the block). Such a round is set aside and played again.
    let mut rounds = 0;
    let (first_token, first_lost, token, holds, count, lost, go, holder) = loop {
        rounds += 1;
        assert!(rounds <= 5, "no round handed the hold on in memory");
        let first = lock.lock().expect("free");
        let first_token = first.fencing_token().expect("tokens");
        let first_lost = first.lost_signal();
        let (sent, got) = mpsc::channel();
        let (go, release) = mpsc::channel::<()>();
        let holder = {
            let lock = lock.clone();
            thread::spawn(move || {
                let guard = lock.lock().expect("handed on");
                let inner = lock.lock().expect("re-entered");
                sent.send((
                    guard.fencing_token(),
                    inner.holds_at_acquire(),
                    lock.hold_count().expect("reachable"),
                    guard.lost_signal(),
                ))
                .expect("test alive");
                release.recv().expect("test alive");
                drop(inner);
                guard.unlock()
            })
        };
        common::wait_until("tokens are reserved", || {
            last_token(&observer) > first_token
        });
        first.unlock().expect("held");
        let (token, holds, count, lost) = got.recv_timeout(Duration::from_secs(10)).expect("held");
        if token == Some(first_token + 1) {
            break (
                first_token,
                first_lost,
                token,
                holds,
                count,
                lost,
                go,
                holder,
            );
        }
        assert!(token > Some(first_token), "tokens rise either way");
        go.send(()).expect("holder alive");
        holder.join().expect("no panic").expect("released");
    };
    assert_eq!(token, Some(first_token + 1));
    assert_eq!((holds, count), (2, 2), "the re-entry counts in Redis");
    // No renewal is confirmed on the manual clock: past the deadline the hold is lost, and its
    // holder now is the one told; the first holder released it and hears nothing.
    clock.advance(lease);
    let told = lost.recv_timeout(Duration::from_secs(10)).expect("told");
    assert_eq!(told.reason, redis_lease::LostReason::Unconfirmed);
    assert!(
        first_lost.try_recv().is_err(),
        "the first holder let go of it"
    );
    go.send(()).expect("holder alive");
    let released = holder.join().expect("no panic");
    assert!(
        matches!(released, Ok(()) | Err(Error::NotOwner { .. })),
        "{released:?}"
    );
}

#[test]
fn a_lost_hold_is_handed_to_no_waiter() {
    let server = RedisServer::start();
    let lease = Duration::from_secs(3);
    let (client, clock, _timer) = common::manual_client(&server, lease);
    let observer = common::client(&server).lock("lost").expect("valid");
    let lock = client.lock("lost").expect("valid");
    let (first, got, reserved_up_to) = held_with_a_reserving_waiter(&lock, &observer);
    clock.advance(lease);
    common::wait_until("the holder is told", || first.is_lost());
    let _ = first.unlock();
    let next = taken_from_redis_past(&got, reserved_up_to);
    assert!(!next.is_lost());
    assert_eq!(
        observer.inspect().expect("reachable").hold_token,
        next.fencing_token()
    );
}

/// A hold known valid for less than a third of its lease more is not handed on in memory (its
/// renewal may never come, and the next holder would have too little of it): the waiter gets a
/// hold of its own from Redis, past every reserved token.
#[test]
fn a_hold_about_to_lapse_is_handed_to_no_waiter() {
    let server = RedisServer::start();
    let lease = Duration::from_secs(3);
    let (client, clock, _timer) = common::manual_client(&server, lease);
    let observer = common::client(&server).lock("lapsing").expect("valid");
    let lock = client.lock("lapsing").expect("valid");
    let (first, got, reserved_up_to) = held_with_a_reserving_waiter(&lock, &observer);
    server.pause();
    clock.advance(lease / 3);
    common::wait_until("the renewal is on its way", || {
        client.watchdog_metrics().in_flight == 1
    });
    clock.advance(first.valid_until() - clock.now() - Duration::from_millis(200));
    let releasing = thread::spawn(move || first.unlock());
    server.resume();
    let _next = taken_from_redis_past(&got, reserved_up_to);
    let _ = releasing.join().expect("no panic");
}

#[test]
fn a_waiter_with_another_lease_is_granted_the_lock_by_redis() {
    let server = RedisServer::start();
    let client = common::client_with_lease(&server, Duration::from_secs(30));
    let observer = common::client(&server).lock("leases").expect("valid");
    let lock = client.lock("leases").expect("valid");
    let first = lock.lock().expect("free");
    let first_token = first.fencing_token().expect("tokens");
    let got = waiter(&lock.with_lease(Duration::from_secs(10)));
    common::wait_until("the waiter watches", || watchers(&server, "leases") > 0);
    thread::sleep(Duration::from_millis(100));
    assert_eq!(last_token(&observer), first_token, "nothing reserved");
    first.unlock().expect("held");
    let next = got
        .recv_timeout(Duration::from_secs(10))
        .expect("acquired")
        .expect("granted");
    assert_eq!(next.fencing_token(), Some(first_token + 1));
    assert_eq!(next.lease(), Duration::from_secs(10));
    let stored = observer.inspect().expect("reachable");
    assert_eq!(stored.holders, vec![(next.owner().to_owned(), 1)]);
    assert!(stored.ttl.expect("a lease") <= Duration::from_secs(10));
}

/// One critical section's record: which client, the token, whether another section was open.
#[derive(Default)]
struct Sections {
    tokens: Vec<(usize, u64)>,
    overlaps: usize,
}

#[test]
fn local_hand_offs_and_takeovers_by_another_client_keep_exclusion_and_token_order() {
    let server = RedisServer::start();
    let clients: Vec<Client> = (0..2)
        .map(|_| common::client_with_lease(&server, Duration::from_secs(2)))
        .collect();
    let sections = Arc::new(Mutex::new(Sections::default()));
    let inside = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(9));
    let threads: Vec<_> = (0..8)
        .map(|n| {
            let client_no = n % 2;
            let lock = clients[client_no].lock("mixed").expect("valid");
            let (sections, inside, stop, start) = (
                Arc::clone(&sections),
                Arc::clone(&inside),
                Arc::clone(&stop),
                Arc::clone(&start),
            );
            thread::spawn(move || {
                start.wait();
                let mut round = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let guard = lock.lock().expect("acquired");
                    let overlap = inside.swap(true, Ordering::SeqCst);
                    {
                        let mut seen = sections.lock().expect("not poisoned");
                        seen.overlaps += usize::from(overlap);
                        let token = guard.fencing_token().expect("tokens");
                        seen.tokens.push((client_no, token));
                    }
                    // Some sections last long enough for the other client's waiter to act.
                    round += 1;
                    if round % 7 == n as u64 {
                        thread::sleep(Duration::from_micros(300));
                    }
                    inside.store(false, Ordering::SeqCst);
                    guard.unlock().expect("held");
                }
            })
        })
        .collect();
    start.wait();
    thread::sleep(Duration::from_millis(2_500));
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().expect("no panic");
    }
    let seen = sections.lock().expect("not poisoned");
    assert_eq!(seen.overlaps, 0, "two holders at once");
    let tokens = &seen.tokens;
    assert!(tokens.len() > 200, "only {} sections", tokens.len());
    for pair in tokens.windows(2) {
        assert!(pair[0].1 < pair[1].1, "tokens out of order: {pair:?}");
    }
    let takeovers = tokens.windows(2).filter(|p| p[0].0 != p[1].0).count();
    let per_client = |c: usize| tokens.iter().filter(|(of, _)| *of == c).count();
    let (first, second) = (per_client(0), per_client(1));
    assert!(takeovers >= 4, "the clients took turns {takeovers} times");
    assert!(
        first * 4 >= tokens.len() && second * 4 >= tokens.len(),
        "each client gets a quarter of the sections: {first} and {second}"
    );
    // Most sections were handed on in memory: far fewer holds were made in Redis.
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.connection())
        .expect("INFO");
    let holds_made = stats
        .lines()
        .find_map(|line| line.strip_prefix("cmdstat_hset:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|calls| calls.parse::<usize>().ok())
        .unwrap_or(0);
    assert!(
        holds_made * 2 < tokens.len(),
        "{holds_made} holds made in Redis for {} sections",
        tokens.len()
    );
}

/// The fenced write of the frozen-client test: accepted only with a token at least the last
/// accepted one.
const FENCED_WRITE: &str = "local last = tonumber(redis.call('get', KEYS[1]) or '0') \
     if tonumber(ARGV[1]) < last then return 0 end \
     redis.call('set', KEYS[1], ARGV[1]) return 1";

/// One fenced write of `token`; records `what` and whether it was accepted.
fn fenced(con: &mut redis::Connection, token: u64, what: &str) -> bool {
    let accepted: i64 = redis::Script::new(FENCED_WRITE)
        .key("resource")
        .arg(token)
        .invoke(con)
        .expect("the script runs");
    let outcome = if accepted == 1 { "ok" } else { "refused" };
    let _: () = con
        .rpush("outcomes", format!("{what} {outcome} {token}"))
        .expect("RPUSH");
    accepted == 1
}

/// The child half of the frozen-client test: three threads of one client take the lock in
/// turn, each write fenced at the start and the end of its section, until told to stop.
#[test]
fn frozen_child_entry() {
    let Ok(url) = std::env::var("LEASE_HANDOFF_CHILD_URL") else {
        return;
    };
    let client = Client::builder(url.as_str())
        .default_lease(Duration::from_millis(600))
        .command_timeout(Duration::from_millis(500))
        .build()
        .expect("valid settings");
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let lock = client.lock("frozen").expect("valid");
            let mut con = redis::Client::open(url.as_str())
                .expect("valid url")
                .get_connection()
                .expect("reachable");
            thread::spawn(move || loop {
                let stop: Option<String> = con.get("stop").expect("GET");
                if stop.is_some() {
                    return;
                }
                let Ok(Some(guard)) = lock.try_lock_for(Duration::from_secs(1)) else {
                    continue;
                };
                let token = guard.fencing_token().expect("tokens");
                fenced(&mut con, token, "child-begin");
                thread::sleep(Duration::from_millis(20));
                fenced(&mut con, token, "child-end");
                let _ = guard.unlock();
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("no panic");
    }
}

#[test]
fn a_client_frozen_with_its_waiters_hands_its_hold_to_none_of_them_after_its_lease() {
    let server = RedisServer::start();
    let mut con = server.connection();
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "frozen_child_entry", "--test-threads=1"])
        .env("LEASE_HANDOFF_CHILD_URL", server.url())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn the child");
    let observer = common::client(&server).lock("frozen").expect("valid");
    common::wait_until("the child's threads take turns", || {
        con.llen::<_, usize>("outcomes").expect("LLEN") > 40
    });
    // Freeze the child while one of its threads holds the lock, its other threads waiting.
    let pid = child.id().to_string();
    let signal = |name: &str| {
        let status = Command::new("kill")
            .args([name, &pid])
            .status()
            .expect("kill");
        assert!(status.success(), "kill {name}");
    };
    loop {
        signal("-STOP");
        if observer.is_locked().expect("reachable") {
            break;
        }
        signal("-CONT");
        thread::sleep(Duration::from_millis(3));
    }
    let frozen_at = con.llen::<_, usize>("outcomes").expect("LLEN");
    // Another client takes the lock once the frozen hold has lapsed, and holds it while the
    // child runs again.
    let other = common::client_with_lease(&server, Duration::from_millis(600));
    let lock = other.lock("frozen").expect("valid");
    let guard = lock
        .try_lock_for(Duration::from_secs(10))
        .expect("reachable")
        .expect("the frozen hold lapses");
    let token = guard.fencing_token().expect("tokens");
    assert!(fenced(&mut con, token, "other-begin"), "the first write");
    signal("-CONT");
    thread::sleep(Duration::from_millis(1_500));
    assert!(fenced(&mut con, token, "other-end"), "no one wrote over it");
    guard.unlock().expect("held");
    // The child's threads go on, and take the lock again from Redis.
    common::wait_until("the child takes the lock again", || {
        con.llen::<_, usize>("outcomes").expect("LLEN") > frozen_at + 10
    });
    let _: () = con.set("stop", 1).expect("SET");
    assert!(child.wait().expect("ran").success(), "the child failed");
    let outcomes: Vec<String> = con.lrange("outcomes", 0, -1).expect("LRANGE");
    let token_of = |line: &str| -> u64 {
        line.rsplit(' ')
            .next()
            .and_then(|t| t.parse().ok())
            .expect("a token")
    };
    let refused: Vec<&String> = outcomes
        .iter()
        .filter(|line| line.contains("refused"))
        .collect();
    // Only the frozen holder's own writes may come late (one hold, one token); no waiter of the
    // child ever held the lock while the other client did.
    let stale: std::collections::BTreeSet<u64> = refused.iter().map(|l| token_of(l)).collect();
    assert!(
        refused.len() <= 2 && stale.len() <= 1 && stale.iter().all(|&t| t < token),
        "stale writes: {refused:?}"
    );
    let after: Vec<&String> = outcomes[frozen_at..]
        .iter()
        .filter(|line| line.starts_with("child-begin ok"))
        .collect();
    let first_after = after.first().expect("the child held it again");
    let first_token = token_of(first_after);
    assert!(first_token > token, "{first_after} after token {token}");
}
