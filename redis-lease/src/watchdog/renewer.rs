//! The renewal thread: it takes whatever holds are queued, up to the batch size, and renews them
//! in one call through its [`Renewer`], which the backend provides. It ends when its client is
//! gone.

use super::{EntryRef, Shared};
use crate::scripts::Renewal;
use crossbeam_channel::Receiver;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// One lease in a renewal call.
pub(crate) struct Pending {
    pub(super) entry: EntryRef,
    pub(crate) lock_key: String,
    pub(crate) hold: Arc<str>,
    pub(crate) lease: Duration,
}

impl Pending {
    pub(crate) fn renewal(&self) -> Renewal<'_> {
        Renewal {
            lock_key: &self.lock_key,
            hold: &self.hold,
            lease: self.lease,
        }
    }
}

/// What became of one lease in a renewal call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Renewed {
    /// Extended: its deadline moves.
    Yes,
    /// Redis says the owner no longer holds it (or, over several masters, too few still do).
    Gone,
    /// No answer that settles it (connection lost, timed out): try again before the deadline.
    Failed,
}

/// Where renewals go: one server, or a quorum of masters (see `backend`).
pub(crate) trait Renewer: Send + 'static {
    /// Renews the leases in one call (per server); one outcome per lease, in order.
    fn renew(&mut self, leases: &[Pending]) -> Vec<Renewed>;
}

pub(super) fn run(
    shared: Weak<Shared>,
    queue: Receiver<EntryRef>,
    mut renewer: Box<dyn Renewer>,
    batch: usize,
) {
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
        let outcome = renewer.renew(&pending);
        shared.finish_renewal(&pending, sent_at, &outcome);
    }
    log::debug!("renewal thread ends: its client is gone");
}
