//! The renewal thread: it takes whatever holds are queued, up to the batch size, and renews them
//! in one script call on its own connection. It ends when its client is gone.

use super::{EntryRef, Shared};
use crate::error::Result;
use crate::pool::Pool;
use crate::scripts::{self, Renewal};
use crossbeam_channel::Receiver;
use redis::Connection;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// One lease in a renewal call.
pub(super) struct Pending {
    pub(super) entry: EntryRef,
    pub(super) lock_key: String,
    pub(super) owner: Arc<str>,
    pub(super) lease: Duration,
}

pub(super) fn run(shared: Weak<Shared>, queue: Receiver<EntryRef>, pool: Arc<Pool>, batch: usize) {
    let mut connection: Option<Connection> = None;
    let mut queued = Vec::with_capacity(batch);
    // The queue's only sender lives in `Shared`: when the client is gone, this ends.
    while let Ok(first) = queue.recv() {
        queued.clear();
        queued.push(first);
        queued.extend(queue.try_iter().take(batch.saturating_sub(1)));
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let pending = shared.begin_renewal(&queued);
        if pending.is_empty() {
            continue;
        }
        let sent_at = shared.timer.now();
        let outcome = renew(&mut connection, &pool, &pending);
        shared.finish_renewal(&pending, sent_at, &outcome);
    }
    log::debug!("renewal thread ends: its client is gone");
}

/// Sends one renewal call, connecting first if need be. A connection that failed is dropped, so
/// the next call starts on a fresh one.
fn renew(
    connection: &mut Option<Connection>,
    pool: &Pool,
    pending: &[Pending],
) -> Result<Vec<bool>> {
    let con = match connection {
        Some(con) => con,
        None => connection.insert(pool.connect()?),
    };
    let renewals: Vec<Renewal<'_>> = pending
        .iter()
        .map(|lease| Renewal {
            lock_key: &lease.lock_key,
            owner: &lease.owner,
            lease: lease.lease,
        })
        .collect();
    let outcome = scripts::renew(con, &renewals);
    if outcome.is_err() {
        *connection = None;
    }
    outcome
}
