//! The semaphore, the read-write lock and the fair lock against reference models: random
//! sequences of operations by several owners, run on a real server, each outcome the one the
//! model predicts.

mod common;

use common::RedisServer;
use proptest::prelude::*;
use redis_lease::{Client, Error, LeaseGuard};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

/// One server for the cases that run at the same time; each case uses names of its own. It stops
/// when the last of them ends (a static would never be dropped, and the server would outlive the
/// tests).
fn server() -> Arc<RedisServer> {
    static SHARED: Mutex<Weak<RedisServer>> = Mutex::new(Weak::new());
    let mut shared = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(server) = shared.upgrade() {
        return server;
    }
    let server = Arc::new(RedisServer::start());
    *shared = Arc::downgrade(&server);
    server
}

fn client(server: &RedisServer) -> Client {
    Client::builder(server.url())
        .default_lease(Duration::from_secs(5))
        .build()
        .expect("valid settings")
}

/// A name no other case uses.
fn fresh(what: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("{what}-{}", NEXT.fetch_add(1, Ordering::SeqCst))
}

const OWNERS: usize = 3;

#[derive(Debug, Clone)]
enum SemaphoreOp {
    /// Owner tries for this many permits.
    Take(usize, u32),
    /// Owner releases its oldest hold, if it has one.
    Give(usize),
    /// Every handle declares this many permits from now on.
    Declare(u32),
    /// The number the handles declare is made the semaphore's.
    Resize,
}

fn semaphore_op() -> impl Strategy<Value = SemaphoreOp> {
    prop_oneof![
        4 => (0..OWNERS, 1..=3u32).prop_map(|(owner, n)| SemaphoreOp::Take(owner, n)),
        3 => (0..OWNERS).prop_map(SemaphoreOp::Give),
        1 => (1..=5u32).prop_map(SemaphoreOp::Declare),
        1 => Just(SemaphoreOp::Resize),
    ]
}

#[derive(Debug, Clone)]
enum RwOp {
    Read(usize),
    Write(usize),
    /// Owner releases its newest guard, if it has one.
    Release(usize),
}

fn rw_op() -> impl Strategy<Value = RwOp> {
    prop_oneof![
        3 => (0..OWNERS).prop_map(RwOp::Read),
        2 => (0..OWNERS).prop_map(RwOp::Write),
        3 => (0..OWNERS).prop_map(RwOp::Release),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// While permits are held, a take declaring another number than the one stored is refused;
    /// otherwise it succeeds exactly when the permits held plus those taken are at most the
    /// permits declared. A resize stores the declared number, and says the one it replaced.
    #[test]
    fn a_semaphore_holds_what_the_model_holds(ops in prop::collection::vec(semaphore_op(), 1..40)) {
        let server = server();
        let client = client(&server);
        let name = fresh("semaphore");
        let mut permits = 3u32;
        let mut stored: Option<u32> = None;
        let mut held: Vec<Vec<(u32, LeaseGuard)>> = (0..OWNERS).map(|_| Vec::new()).collect();
        for op in ops {
            match op {
                SemaphoreOp::Take(owner, n) => {
                    let in_use: u32 = held.iter().flatten().map(|(n, _)| n).sum();
                    let semaphore = client
                        .semaphore(&name, permits)
                        .expect("valid")
                        .owned_by(format!("owner-{owner}"));
                    let taken = semaphore.taking(n);
                    if n > permits {
                        prop_assert!(matches!(taken, Err(Error::InvalidArgument(_))));
                        continue;
                    }
                    let tried = taken.expect("valid").try_lock();
                    if in_use > 0 && stored.is_some_and(|stored| stored != permits) {
                        prop_assert!(
                            matches!(&tried, Err(Error::InvalidArgument(why)) if why.contains("declared")),
                            "{:?} with {:?} stored and {} declared", tried, stored, permits
                        );
                        continue;
                    }
                    let got = tried.expect("reachable");
                    prop_assert_eq!(got.is_some(), in_use + n <= permits, "{} held of {}", in_use, permits);
                    if let Some(guard) = got {
                        held[owner].push((n, guard));
                        stored = Some(permits);
                    }
                }
                SemaphoreOp::Give(owner) => {
                    if !held[owner].is_empty() {
                        let (_, guard) = held[owner].remove(0);
                        prop_assert!(guard.unlock().is_ok());
                    }
                }
                SemaphoreOp::Declare(n) => permits = n,
                SemaphoreOp::Resize => {
                    let in_use: u32 = held.iter().flatten().map(|(n, _)| n).sum();
                    let before = client.semaphore(&name, permits).expect("valid").resize(permits).expect("reachable");
                    if in_use > 0 {
                        prop_assert_eq!(before, stored);
                    }
                    stored = Some(permits);
                }
            }
            let in_use: u32 = held.iter().flatten().map(|(n, _)| n).sum();
            let state = client.semaphore(&name, permits).expect("valid").inspect().expect("reachable");
            prop_assert_eq!(state.permits_in_use, Some(u64::from(in_use)));
        }
    }

    /// Readers or one writer; each side re-entered by its owner; the writer may read; a reader
    /// that does not write may not write.
    #[test]
    fn a_read_write_lock_holds_what_the_model_holds(ops in prop::collection::vec(rw_op(), 1..40)) {
        let server = server();
        let client = client(&server);
        let name = fresh("rw");
        let rw = client.read_write_lock(&name).expect("valid");
        let sides: Vec<_> = (0..OWNERS)
            .map(|owner| rw.owned_by(format!("owner-{owner}")))
            .collect();
        // Per owner: its guards, newest last, each marked as a write or a read.
        let mut guards: Vec<Vec<(bool, LeaseGuard)>> = (0..OWNERS).map(|_| Vec::new()).collect();
        let reads = |guards: &Vec<Vec<(bool, LeaseGuard)>>, owner: usize| {
            guards[owner].iter().any(|(write, _)| !write)
        };
        let writes = |guards: &Vec<Vec<(bool, LeaseGuard)>>, owner: usize| {
            guards[owner].iter().any(|(write, _)| *write)
        };
        for op in ops {
            match op {
                RwOp::Read(owner) => {
                    let other_writes = (0..OWNERS).any(|o| o != owner && writes(&guards, o));
                    let expected = reads(&guards, owner) || !other_writes;
                    let got = sides[owner].read_lock().try_lock().expect("reachable");
                    prop_assert_eq!(got.is_some(), expected, "read by {}", owner);
                    if let Some(guard) = got {
                        guards[owner].push((false, guard));
                    }
                }
                RwOp::Write(owner) => {
                    let got = sides[owner].write_lock().try_lock();
                    if reads(&guards, owner) && !writes(&guards, owner) {
                        prop_assert!(matches!(got, Err(Error::InvalidArgument(_))), "an upgrade");
                        continue;
                    }
                    let others = (0..OWNERS).any(|o| o != owner && !guards[o].is_empty());
                    let expected = writes(&guards, owner) || (!others && !reads(&guards, owner));
                    let got = got.expect("reachable");
                    prop_assert_eq!(got.is_some(), expected, "write by {}", owner);
                    if let Some(guard) = got {
                        guards[owner].push((true, guard));
                    }
                }
                RwOp::Release(owner) => {
                    if let Some((_, guard)) = guards[owner].pop() {
                        prop_assert!(guard.unlock().is_ok());
                    }
                }
            }
            let writers: usize = (0..OWNERS).filter(|&o| writes(&guards, o)).count();
            prop_assert!(writers <= 1);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4, ..ProptestConfig::default() })]

    /// Waiters spread over clients as the case says are granted the fair lock in the order they
    /// asked.
    #[test]
    fn a_fair_lock_grants_in_the_order_asked(spread in prop::collection::vec(0..3usize, 2..7)) {
        let server = server();
        let clients: Vec<Client> = (0..3).map(|_| client(&server)).collect();
        let name = fresh("fair");
        let holder = clients[0].fair_lock(&name).expect("valid").lock().expect("free");
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiters = Vec::new();
        for (i, &which) in spread.iter().enumerate() {
            let lock = clients[which].fair_lock(&name).expect("valid");
            let order = Arc::clone(&order);
            waiters.push(std::thread::spawn(move || {
                let guard = lock.lock().expect("granted");
                order.lock().expect("no panic").push(i);
                drop(guard);
            }));
            std::thread::sleep(Duration::from_millis(100));
        }
        drop(holder);
        for waiter in waiters {
            waiter.join().expect("no panic");
        }
        let expected: Vec<usize> = (0..spread.len()).collect();
        prop_assert_eq!(order.lock().expect("no panic").clone(), expected);
    }
}
