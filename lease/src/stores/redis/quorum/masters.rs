//! A RedLock's masters and how it reaches them: every master at once, each by the node timeout,
//! and the undoing of what a call did on masters where it cannot stand.

use crate::error::{Error, Result};
use crate::state::LockState;
use crate::stores::redis::fanout::{self, Answer, Master};
use crate::stores::redis::fencing::Epoch;
use crate::stores::redis::keys::LockKeys;
use crate::stores::redis::scripts::{self, Announce, Call};
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) struct Quorum {
    pub(super) masters: Arc<Vec<Master>>,
    pub(super) quorum: usize,
    pub(super) node_timeout: Duration,
    pub(super) retry_delay: Duration,
    pub(super) random: Mutex<u64>,
    pub(super) place: String,
}

impl Quorum {
    pub(super) fn all(&self) -> Vec<&Master> {
        self.masters.iter().collect()
    }

    pub(super) fn deadline(&self, deadline: Instant) -> Instant {
        deadline.min(Instant::now() + self.node_timeout)
    }

    /// Each master's view of the lock, in the masters' order, all read at once (a thread per
    /// master: inspection is rare), each by the node timeout: a frozen master costs the others
    /// nothing.
    pub(super) fn views(&self, keys: &LockKeys, deadline: Instant) -> Vec<Result<LockState>> {
        let node_deadline = self.deadline(deadline);
        std::thread::scope(|scope| {
            let readers: Vec<_> = self
                .masters
                .iter()
                .map(|master| {
                    std::thread::Builder::new()
                        .name("lease-inspect".into())
                        .spawn_scoped(scope, move || {
                            master
                                .pool
                                .call(node_deadline, |con| scripts::inspect(con, keys))
                        })
                })
                .collect();
            readers
                .into_iter()
                .map(|reader| match reader {
                    Ok(reader) => reader.join().unwrap_or_else(|_| {
                        Err(Error::Protocol("reading a master's view panicked".into()))
                    }),
                    Err(error) => Err(Error::Spawn(error)),
                })
                .collect()
        })
    }

    /// Sends `call` to `masters` and reads every reply.
    pub(super) fn everywhere(
        &self,
        masters: &[&Master],
        call: &Call,
        deadline: Instant,
    ) -> Vec<Answer> {
        fanout::exchange(
            masters,
            call,
            self.deadline(deadline),
            &[],
            &fanout::all_replies,
        )
    }
}

/// How long past a call's deadline the undoing of what it did on masters that have just
/// answered may be waited for: enough for a master that answers, too little to stretch the call.
const UNDO_GRACE: Duration = Duration::from_millis(50);

/// The deadline of an undo that follows a call whose deadline is `deadline`. An undo whose
/// reply misses it was written all the same, and runs when the master gets to it; one that
/// could not even be written by then (no connection in time) leaves what it undoes to lapse
/// with its lease.
pub(super) fn undo_deadline(deadline: Instant) -> Instant {
    deadline.max(Instant::now() + UNDO_GRACE)
}

/// The release of a new hold `hold` of `owner` through its first acquisition, whose id is the
/// hold's: it undoes an attempt or a grant wherever it went through, and changes nothing
/// elsewhere.
pub(super) fn release_new_hold(keys: &LockKeys, owner: &str, hold: &str) -> Call {
    scripts::release(keys, owner, hold, hold, None, Announce::Global, Epoch::None)
}
