//! Every public method of a lock and its guard, on whatever deployment the client talks to.

use redis_lease::{Client, Error, Guard, LostReason, MultiLock};
use std::sync::mpsc::Sender;
use std::thread;
use std::time::{Duration, Instant};

/// What a deployment offers that others do not.
pub struct Offers {
    /// Fencing tokens.
    pub fenced: bool,
    /// A remaining lease that the server keeps (not ZooKeeper's: its session is the lease).
    pub server_ttl: bool,
    /// A lease long enough not to lapse during the checks (on ZooKeeper, at most the session
    /// timeout).
    pub long_lease: Duration,
}

impl Offers {
    /// A Redis deployment's, with or without fencing tokens.
    pub fn redis(fenced: bool) -> Offers {
        Offers {
            fenced,
            server_ttl: true,
            long_lease: Duration::from_secs(30),
        }
    }
}

/// Runs every public method of `Lock` and `LeaseGuard` on `client`, whose default lease is short
/// (hundreds of milliseconds).
pub fn every_public_method(client: &Client, offers: Offers) {
    let fenced = offers.fenced;
    assert_eq!(client.has_fencing_tokens(), fenced);
    let lease = client.default_lease();
    let lock = client.lock("methods").expect("valid");
    assert_eq!(lock.name(), "methods");
    let owned = lock.owned_by("job-1");
    assert_eq!(owned.owner(), "job-1");
    let outer = owned.lock().expect("free");
    let inner = owned.lock().expect("re-entered");
    assert_eq!((outer.holds_at_acquire(), inner.holds_at_acquire()), (1, 2));
    assert_eq!(inner.fencing_token(), outer.fencing_token());
    assert_eq!(outer.fencing_token().is_some(), fenced);
    assert_eq!(
        (outer.name(), outer.owner(), outer.lease()),
        ("methods", "job-1", lease)
    );
    assert!(lock.is_locked().expect("reachable"));
    assert_eq!(owned.hold_count().expect("reachable"), 2);
    assert!(owned.is_held_by_current_thread().expect("reachable"));
    assert!(!lock.is_held_by_current_thread().expect("reachable"));
    assert_eq!(
        lock.remaining_ttl().expect("reachable").is_some(),
        offers.server_ttl
    );
    let state = lock.inspect().expect("reachable");
    assert_eq!(state.holders, vec![("job-1".to_owned(), 2)]);
    assert_eq!(state.hold_token, outer.fencing_token());
    assert!(state.problems.is_empty(), "{state:?}");
    // Renewed past several leases.
    thread::sleep(lease * 3);
    assert!(!outer.is_lost(), "{:?}", outer.lost());
    assert!(outer.valid_until() > Instant::now());
    assert!(outer.lost().is_none());
    inner.unlock().expect("held");
    outer.unlock().expect("held");
    assert!(!lock.is_locked().expect("reachable"));

    // A fixed lease runs out and says so; a deadline already past makes one attempt.
    let fixed = lock
        .with_lease(lease)
        .try_lock()
        .expect("reachable")
        .expect("free");
    let told = fixed.lost_signal();
    assert!(told.recv_timeout(lease * 3).is_ok(), "told it expired");
    assert!(fixed.is_lost());
    drop(fixed);
    let theirs = client.lock("methods").expect("valid");
    let once = theirs
        .try_lock_until(Instant::now())
        .expect("reachable")
        .expect("free");
    let other_thread = {
        let lock = lock.clone();
        thread::spawn(move || {
            lock.with_lease(lease)
                .try_lock_for(Duration::from_millis(100))
                .expect("reachable")
                .is_none()
        })
    };
    assert!(other_thread.join().expect("no panic"), "held: not acquired");
    once.unlock().expect("held");

    // max_hold ends a hold; force_unlock clears one; abandon lets one lapse.
    let bounded = lock.max_hold(lease / 2).lock().expect("free");
    testkit::wait_until("max_hold ends the hold", Duration::from_secs(10), || {
        bounded.is_lost()
    });
    drop(bounded);
    let forced = lock
        .with_lease(offers.long_lease)
        .try_lock_until(Instant::now() + lease * 3)
        .expect("reachable")
        .expect("free once the lease lapsed");
    assert!(lock.force_unlock().expect("reachable"));
    assert!(matches!(forced.unlock(), Err(Error::NotOwner { .. })));
    let abandoned = lock
        .with_lease(lease)
        .try_lock()
        .expect("reachable")
        .expect("free");
    abandoned.abandon();
    let again = lock
        .with_lease(offers.long_lease)
        .lock()
        .expect("free again");
    again.unlock().expect("held");

    // MultiLock over several locks; tokens rise per name.
    let names: Vec<String> = (0..5).map(|n| format!("multi-{n}")).collect();
    let multi = MultiLock::new(names.iter().map(|name| client.lock(name).expect("valid")))
        .expect("distinct");
    assert_eq!(multi.members().len(), 5);
    let all = multi.lock().expect("all free");
    assert!(!all.is_lost() && all.lost().is_none());
    assert!(all.valid_until() > Instant::now());
    let _signal = all.lost_signal();
    let elsewhere = {
        let multi = multi.clone();
        thread::spawn(move || multi.try_lock().expect("reachable").is_none())
    };
    assert!(
        elsewhere.join().expect("no panic"),
        "held: another thread gets none"
    );
    all.unlock().expect("held");
    assert!(multi
        .try_lock_for(lease)
        .expect("reachable")
        .expect("free")
        .unlock()
        .is_ok());
    // A MultiGuard tells of its first loss once, through the `Guard` trait as any hold does.
    let bounded = MultiLock::new(
        names
            .iter()
            .map(|name| client.lock(name).expect("valid").with_lease(lease)),
    )
    .expect("distinct")
    .lock()
    .expect("all free");
    let (tell, told) = std::sync::mpsc::channel();
    tell_when_lost(&bounded, tell);
    let first = told.recv_timeout(lease * 10).expect("told of the loss");
    assert_eq!(first, LostReason::Expired);
    assert!(
        told.recv_timeout(lease * 2).is_err(),
        "told once, not once per member"
    );
    drop(bounded);

    if fenced {
        let tokens: Vec<u64> = (0..3)
            .map(|_| {
                let guard = lock.try_lock().expect("reachable").expect("free");
                let token = guard.fencing_token().expect("a token");
                guard.unlock().expect("held");
                token
            })
            .collect();
        assert!(
            tokens.windows(2).all(|pair| pair[0] < pair[1]),
            "{tokens:?}"
        );
    }
}

/// Sends the reason of `hold`'s loss to `tell` when it is lost, whichever primitive made it.
fn tell_when_lost(hold: &impl Guard, tell: Sender<LostReason>) {
    hold.on_lost(move |lost| {
        let _ = tell.send(lost.reason);
    });
}
