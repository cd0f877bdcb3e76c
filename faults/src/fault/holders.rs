//! Who a fault strikes: the client process holding the lock (from the lock server's key or the
//! store's table, and the owner ids the clients recorded), or one of the long holds the
//! histories tell of; and how long a fault looks for a holder or a waiter.

use crate::clock::now_ns;
use crate::history::{self, Event};
use crate::LOCK_KEY;
use redis::Commands;
use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};
use testkit::RedisServer;

/// The owner of the hold on `{jobs}` on `server`.
pub(super) fn holder_owner(server: &RedisServer) -> Option<String> {
    let fields: Vec<String> = server.connection().hkeys(LOCK_KEY).ok()?;
    // Owner ids never start with ':', the hold's own fields always do.
    fields.into_iter().find(|field| !field.starts_with(':'))
}

/// The process id of the client whose owner id is `owner`, from the owner ids the clients
/// recorded when they started (the last process to start with it).
pub(super) fn pid_of(owner: &str, histories: &[PathBuf]) -> Option<u32> {
    history::merge(histories)
        .into_iter()
        .rev()
        .find_map(|event| match event {
            Event::Start { owner: o, pid, .. } if o == owner => Some(pid),
            _ => None,
        })
}

/// How many leases a fault looks for a long hold before it strikes. They come in bunches, 7 to
/// 10 s apart: one acquisition in twenty of each client is long, and while one is held the
/// others' waits fail, which draws their turns together.
pub(super) const SEARCH_LEASES: u32 = 8;

/// The hold open now that the histories tell of, preferring one open for a tenth to a half of a
/// lease: one of the long holds (half a lease per step, a lease and a half in all), which will
/// still be held, and renewed, a lease from now; the others last a few ms. Looks for
/// [`SEARCH_LEASES`] leases, then takes the latest open hold; `None` if there is none.
pub(super) fn holding(histories: &[PathBuf], lease: Duration) -> Option<history::OpenHold> {
    let give_up = Instant::now() + lease * SEARCH_LEASES;
    let (young, old) = (
        (lease / 10).as_nanos() as u64,
        (lease / 2).as_nanos() as u64,
    );
    loop {
        let now = now_ns();
        let holds = history::open_holds(histories);
        let long = holds
            .iter()
            .filter(|hold| (young..=old).contains(&now.saturating_sub(hold.since)))
            .max_by_key(|hold| hold.since);
        if let Some(hold) = long {
            return Some(hold.clone());
        }
        if Instant::now() >= give_up {
            return holds.into_iter().max_by_key(|hold| hold.since);
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// How many leases a fault looks for a client process whose threads all wait: most wait most of
/// the time, both threads of a process at once less often.
pub(super) const WAITER_SEARCH_LEASES: u32 = 4;
