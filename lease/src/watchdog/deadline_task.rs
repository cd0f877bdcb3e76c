//! A hold's deadline task: at the hold's local deadline it finds the hold lost unless a renewal
//! moved the deadline meanwhile, and it tells the holder when a stopped timer drops it unrun.
//!
//! A [`Timer`](hashwheel::Timer) that is stopped (a timer shared through
//! `ClientBuilder::timer`, stopped by its owner) drops its pending tasks without running them:
//! the hold's renewals and its deadline would never run again, and a holder waiting on its lost
//! signal would never hear of the lease lapsing. Every live hold has exactly one deadline task
//! pending, so the drop of that task, unrun while the timer is stopped, is where the holder is
//! told.
//!
//! The drop may happen inside a `cancel` that the watchdog makes with its table locked; so the
//! table is only tried, and where it is busy the hold's own status (whose lock is never held
//! across a cancel) is marked lost directly.

use super::table::{EntryRef, EntryState};
use super::WatchdogShared;
use crate::lost::{Lost, LostReason, Status};
use std::sync::{Arc, Weak};

/// The deadline task of one hold: `fire` runs it; dropped unrun on a stopped timer, it marks
/// the hold lost.
pub(super) struct DeadlineTask {
    pub(super) shared: Weak<WatchdogShared>,
    pub(super) entry: EntryRef,
    pub(super) name: Arc<str>,
    pub(super) owner: Arc<str>,
    pub(super) hold: Arc<str>,
    pub(super) status: Arc<Status>,
    pub(super) ran: bool,
}

impl DeadlineTask {
    /// Runs on the timer thread at the hold's local deadline. Run by whoever a stop handed it
    /// to instead, it tells the holder of the stop, as its drop would.
    pub(super) fn fire(mut self) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        if shared.timer.is_stopped() {
            return;
        }
        self.ran = true;
        shared.deadline_passed(self.entry);
    }
}

impl Drop for DeadlineTask {
    fn drop(&mut self) {
        if self.ran {
            return;
        }
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        if !shared.timer.is_stopped() {
            // Cancelled by the watchdog: replaced by a later deadline, or the hold is gone.
            return;
        }
        if let Some(mut table) = shared.table.try_lock() {
            table.lose(self.entry, LostReason::TimerStopped);
            return;
        }
        let reason = LostReason::TimerStopped;
        log::warn!("lock {:?} is lost: {reason}", self.name);
        self.status.mark_lost(Lost {
            name: self.name.to_string(),
            owner: self.owner.to_string(),
            reason,
            valid_until: self.status.valid_until(),
            hold: Arc::clone(&self.hold),
        });
    }
}

impl WatchdogShared {
    /// On the timer thread: the hold is lost unless a renewal moved its deadline meanwhile.
    fn deadline_passed(&self, entry: EntryRef) {
        let now = self.timer.now();
        let mut table = self.table.lock();
        let Some(found) = table.get(entry) else {
            return;
        };
        if !found.live() || now < found.valid_until {
            return;
        }
        let reason = if !found.renewed {
            LostReason::Expired
        } else if found.state == EntryState::Expiring {
            LostReason::MaxHold
        } else {
            LostReason::Unconfirmed
        };
        table.lose(entry, reason);
    }
}
