//! From async code (`lease/guide/asynchronous.md`): the crate's calls block, so a tokio task runs them on the
//! blocking pool, and learns of a lost hold by `on_lost` feeding a oneshot channel, without a
//! thread parked on the lost signal.

mod common;

use common::RedisServer;
use redis_lease::{Client, LostReason};
use std::sync::Arc;
use std::time::Duration;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// The guide's example: work beside the loss of the lock, the lock taken and released off the
/// runtime's threads.
async fn work_while_held(client: Arc<Client>, work: Duration) -> redis_lease::Result<&'static str> {
    let lock = client.lock("reports/nightly")?;
    // `lock()` waits for the lock over the network: on the blocking pool.
    let guard = tokio::task::spawn_blocking(move || lock.lock())
        .await
        .expect("not cancelled")?;
    let (tell, told) = tokio::sync::oneshot::channel();
    guard.on_lost(move |lost| {
        let _ = tell.send(lost);
    });
    tokio::select! {
        () = tokio::time::sleep(work) => {
            // Releasing is a network call too.
            tokio::task::spawn_blocking(move || guard.unlock())
                .await
                .expect("not cancelled")?;
            Ok("done")
        }
        lost = told => {
            let lost = lost.expect("told before the guard is dropped");
            assert_eq!(lost.reason, LostReason::Taken);
            // Stop writing: another owner may hold the lock by now. Nothing to release.
            tokio::task::spawn_blocking(move || guard.abandon())
                .await
                .expect("not cancelled");
            Ok("lost")
        }
    }
}

#[test]
fn a_task_works_while_it_holds_and_releases_off_the_runtime() {
    let server = RedisServer::start();
    let client = Arc::new(common::client_with_lease(
        &server,
        Duration::from_millis(600),
    ));
    let outcome = runtime().block_on(work_while_held(
        Arc::clone(&client),
        Duration::from_millis(900),
    ));
    assert_eq!(outcome.expect("reachable"), "done");
    let lock = client.lock("reports/nightly").expect("valid");
    assert!(!lock.is_locked().expect("reachable"), "released");
}

#[test]
fn a_task_is_told_of_a_lost_hold_by_a_oneshot_and_stops() {
    let server = RedisServer::start();
    let client = Arc::new(common::client_with_lease(
        &server,
        Duration::from_millis(600),
    ));
    let operator = common::client(&server);
    let runtime = runtime();
    let task = runtime.spawn(work_while_held(
        Arc::clone(&client),
        Duration::from_secs(30),
    ));
    let lock = operator.lock("reports/nightly").expect("valid");
    common::wait_until("the task holds the lock", || {
        lock.is_locked().expect("reachable")
    });
    assert!(lock.force_unlock().expect("reachable"));
    let outcome = runtime
        .block_on(async { tokio::time::timeout(Duration::from_secs(5), task).await })
        .expect("told within a renewal")
        .expect("no panic");
    assert_eq!(outcome.expect("reachable"), "lost");
}
