//! Holds handed on between the threads of one client without PostgreSQL, with the tokens the
//! store reserved for them: two clients of four threads each on one name never hold together,
//! tokens rise strictly from holder to holder across both, the clients take turns, and most
//! sections never reach the store.

use redis_lease::Client;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;
use testkit::PgServer;

fn client(url: &str) -> Client {
    Client::postgres(url)
        .default_lease(Duration::from_secs(5))
        .connect_timeout(Duration::from_secs(5))
        .command_timeout(Duration::from_secs(5))
        .build()
        .expect("valid settings")
}

#[test]
fn local_hand_offs_and_takeovers_by_another_client_keep_exclusion_and_token_order() {
    let server = PgServer::start();
    let url = server.url();
    let clients: Vec<Client> = (0..2).map(|_| client(&url)).collect();
    let tokens: Arc<Mutex<Vec<(usize, u64)>>> = Arc::default();
    let overlaps = Arc::new(Mutex::new(0usize));
    let inside = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(9));
    let threads: Vec<_> = (0..8)
        .map(|n| {
            let client_no = n % 2;
            let lock = clients[client_no].lock("mixed").expect("valid");
            let (tokens, overlaps, inside, stop, start) = (
                Arc::clone(&tokens),
                Arc::clone(&overlaps),
                Arc::clone(&inside),
                Arc::clone(&stop),
                Arc::clone(&start),
            );
            thread::spawn(move || {
                start.wait();
                let mut round = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let guard = lock.lock().expect("acquired");
                    if inside.swap(true, Ordering::SeqCst) {
                        *overlaps.lock().expect("not poisoned") += 1;
                    }
                    let token = guard.fencing_token().expect("tokens");
                    tokens
                        .lock()
                        .expect("not poisoned")
                        .push((client_no, token));
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
    thread::sleep(Duration::from_millis(3_000));
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().expect("no panic");
    }
    assert_eq!(
        *overlaps.lock().expect("not poisoned"),
        0,
        "two holders at once"
    );
    let tokens = tokens.lock().expect("not poisoned");
    assert!(tokens.len() > 200, "only {} sections", tokens.len());
    for pair in tokens.windows(2) {
        assert!(pair[0].1 < pair[1].1, "tokens out of order: {pair:?}");
    }
    let takeovers = tokens.windows(2).filter(|p| p[0].0 != p[1].0).count();
    assert!(takeovers >= 4, "the clients took turns {takeovers} times");
    // Each hold made in the store ends with one record of its last release: far fewer than the
    // sections, most of which were handed on in memory.
    let ended = server
        .psql("SELECT count(*) FROM lease.ended WHERE how = 'released'")
        .expect("read the store");
    let holds_made: usize = ended.trim().parse().expect("a count");
    assert!(
        holds_made * 2 < tokens.len(),
        "{holds_made} holds made in the store for {} sections",
        tokens.len()
    );
}
