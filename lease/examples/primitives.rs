//! The primitives beside the lock, each in a few lines: a semaphore whose permits are leases, a
//! read-write lock, a fair lock, a MultiLock over several names, and a wait ended from another
//! thread. Against a Redis server at the URL given (default `redis://127.0.0.1:6379`).
//!
//! ```sh
//! redis-server --port 6379 &
//! cargo run -p redis-lease --example primitives -- redis://127.0.0.1:6379
//! ```
#![allow(clippy::print_stdout)] // an example that says what it does

use redis_lease::{Cancel, Client, MultiLock};
use std::error::Error;
use std::time::Duration;

/// Takes each primitive once and says what it got.
pub fn main() -> Result<(), Box<dyn Error>> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "redis://127.0.0.1:6379".into());
    let client = Client::builder(url.as_str())
        .default_lease(Duration::from_secs(5))
        .build()?;

    // At most 3 holders at once, each permit a lease of its own with a fencing token.
    let exports = client.semaphore("example/exports", 3)?;
    let permit = exports.acquire()?;
    let two = exports.taking(2)?.try_lock_for(Duration::from_secs(1))?;
    println!(
        "semaphore: {} of 3 permits in use",
        exports.inspect()?.permits_in_use.unwrap_or(0)
    );
    drop((permit, two));

    // Many readers, or one writer.
    let prices = client.read_write_lock("example/prices")?;
    let reading = prices.read_lock().lock()?;
    let also_reading = prices.read_lock().owned_by("another reader").lock()?;
    drop((reading, also_reading));
    let writing = prices.write_lock().lock()?;
    println!(
        "read-write lock: written with token {:?}",
        writing.fencing_token()
    );
    writing.unlock()?;

    // Granted in the order the waiters asked, across processes.
    let turn = client.fair_lock("example/turns")?.lock()?;
    println!("fair lock: my turn, token {:?}", turn.fencing_token());
    turn.unlock()?;

    // Several names, all or nothing, in a stable order.
    let both = MultiLock::new(vec![
        client.lock("example/account-a")?,
        client.lock("example/account-b")?,
    ])?;
    let transfer = both.lock()?;
    println!("multilock: both accounts held");
    transfer.unlock()?;

    // A wait ended from another thread.
    let busy = client
        .lock("example/busy")?
        .owned_by("someone else")
        .lock()?;
    let cancel = Cancel::new();
    let stopper = cancel.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        stopper.cancel();
    });
    let waited = client.lock("example/busy")?.cancel_on(&cancel).lock();
    println!("cancelled wait: {}", waited.is_err());
    busy.unlock()?;
    Ok(())
}
