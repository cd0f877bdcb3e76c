//! The watchdog's table of holds: one entry per watched hold, found by a slab slot plus an id
//! that tells a reused slot apart, and an index of the renewed holds by hold id, so that a
//! reentrant hold is renewed once.
//!
//! # Ground rules
//!
//! * An entry changes only with the table's lock held, and the lock is never held across I/O:
//!   the renewal thread takes what to send under it, sends without it, and applies the outcome
//!   under it again.
//! * An entry's [`EntryState`] moves along these edges, and no others:
//!
//!   ```text
//!   Held --renewal due--> Queued --taken by the renewal thread--> Renewing
//!   Renewing --confirmed or failed--> Held        Held --max_hold reached--> Expiring
//!   Held | Queued | Renewing | Expiring --deadline passed, or the store says gone--> Lost
//!   any --last guard gone--> Released
//!   ```
//!
//!   A hold taken with a fixed lease stays `Held` until it is lost or released: it is never
//!   queued.
//! * `renewal_out` is set while a renewal call naming the hold is out, from the moment the
//!   renewal thread takes it until the call's outcome is applied, whatever the state meanwhile:
//!   a hold lost or released during the call is still named by it. A release waits for it to
//!   clear, so that no renewal of the lease it frees lands after it.
//! * Nothing is sent for an entry that is `Lost` or `Released`; a late renewal reply never makes
//!   a lost hold valid again.
//! * `Released` entries leave the table at once; `Lost` ones stay until their last guard goes, so
//!   that a guard of the hold still finds it lost.

use super::metrics::WatchdogMetrics;
use crate::events::Events;
use crate::lost::{Lost, LostReason, Status};
use hashwheel::Timeout;
use slab::Slab;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Names one entry; stale once the entry is gone, even if its slot is reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EntryRef {
    slot: usize,
    id: u64,
}

/// Where a watched hold stands (see the ground rules above).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EntryState {
    /// Held, and not in a renewal now.
    Held,
    /// Waiting in the renewal queue.
    Queued,
    /// In a renewal call whose outcome has not been applied.
    Renewing,
    /// Renewed for its `max_hold`: no more renewals; its deadline is still watched.
    Expiring,
    /// Lost: the holder was told. Final, until the last guard goes.
    Lost,
    /// The last guard went: nothing may be sent for it any more.
    Released,
}

/// One watched hold.
pub(super) struct Entry {
    id: u64,
    pub(super) state: EntryState,
    /// A renewal call naming the hold is out (see the ground rules).
    pub(super) renewal_out: bool,
    /// The lock's name, for messages.
    pub(super) name: Arc<str>,
    /// Where the hold lives, as its place named it for renewals.
    pub(super) address: Arc<str>,
    pub(super) owner: Arc<str>,
    /// The hold's id, which every renewal names.
    pub(super) hold: Arc<str>,
    pub(super) lease: Duration,
    /// Renewed by the watchdog (taken with the default lease), or only watched until it expires.
    pub(super) renewed: bool,
    pub(super) acquired_at: Instant,
    pub(super) max_hold: Option<Duration>,
    /// Live guards sharing this hold (reentrant acquisitions of a renewed hold).
    pub(super) guards: usize,
    pub(super) status: Arc<Status>,
    /// The local deadline: the last confirmed renewal's (or the acquisition's) send time plus
    /// the lease less the drift allowance.
    pub(super) valid_until: Instant,
    pub(super) deadline_timer: Option<Timeout>,
    pub(super) renewal_timer: Option<Timeout>,
}

impl Entry {
    /// Whether anything may still be sent for it, or said of it.
    pub(super) fn live(&self) -> bool {
        matches!(
            self.state,
            EntryState::Held | EntryState::Queued | EntryState::Renewing | EntryState::Expiring
        )
    }
}

/// What a new entry starts from.
pub(super) struct NewEntry {
    pub(super) name: Arc<str>,
    pub(super) address: Arc<str>,
    pub(super) owner: Arc<str>,
    pub(super) hold: Arc<str>,
    pub(super) lease: Duration,
    pub(super) renewed: bool,
    pub(super) acquired_at: Instant,
    pub(super) max_hold: Option<Duration>,
    pub(super) valid_until: Instant,
}

#[derive(Default)]
pub(super) struct Table {
    entries: Slab<Entry>,
    /// Renewed holds that are not lost, by hold id.
    renewed: HashMap<Arc<str>, EntryRef>,
    next_id: u64,
    pub(super) metrics: WatchdogMetrics,
    /// Where losses are told as they happen.
    pub(super) events: Events,
}

impl Table {
    /// An empty table whose losses are told to `events`.
    pub(super) fn with_events(events: Events) -> Table {
        Table {
            events,
            ..Table::default()
        }
    }

    pub(super) fn get(&self, entry: EntryRef) -> Option<&Entry> {
        self.entries
            .get(entry.slot)
            .filter(|found| found.id == entry.id)
    }

    pub(super) fn get_mut(&mut self, entry: EntryRef) -> Option<&mut Entry> {
        self.entries
            .get_mut(entry.slot)
            .filter(|found| found.id == entry.id)
    }

    /// The renewed, not lost, entry of hold `hold`, if there is one.
    pub(super) fn renewed_hold(&self, hold: &str) -> Option<EntryRef> {
        self.renewed.get(hold).copied()
    }

    pub(super) fn insert(&mut self, new: NewEntry) -> EntryRef {
        self.next_id += 1;
        let id = self.next_id;
        let hold = Arc::clone(&new.hold);
        let renewed = new.renewed;
        let slot = self.entries.insert(Entry {
            id,
            state: EntryState::Held,
            renewal_out: false,
            status: Arc::new(Status::new(new.valid_until)),
            name: new.name,
            address: new.address,
            owner: new.owner,
            hold: new.hold,
            lease: new.lease,
            renewed: new.renewed,
            acquired_at: new.acquired_at,
            max_hold: new.max_hold,
            guards: 1,
            valid_until: new.valid_until,
            deadline_timer: None,
            renewal_timer: None,
        });
        let entry = EntryRef { slot, id };
        if renewed {
            self.renewed.insert(hold, entry);
        }
        self.metrics.watched = self.entries.len();
        entry
    }

    /// Stops everything scheduled for the entry and drops it from the index of renewed holds.
    pub(super) fn forget(&mut self, entry: EntryRef) {
        let Some(found) = self.get_mut(entry) else {
            return;
        };
        for timer in [found.deadline_timer.take(), found.renewal_timer.take()]
            .into_iter()
            .flatten()
        {
            timer.cancel();
        }
        let hold = Arc::clone(&found.hold);
        if self.renewed.get(&hold) == Some(&entry) {
            self.renewed.remove(&hold);
        }
    }

    pub(super) fn remove(&mut self, entry: EntryRef) {
        self.forget(entry);
        if self.get(entry).is_some() {
            self.entries.remove(entry.slot);
        }
        self.metrics.watched = self.entries.len();
    }

    /// Marks the hold lost, stops its renewal and tells its holder. The entry stays until its
    /// last guard is gone.
    pub(super) fn lose(&mut self, entry: EntryRef, reason: LostReason) {
        self.forget(entry);
        let Some(found) = self.get_mut(entry) else {
            return;
        };
        if !found.live() {
            return;
        }
        found.state = EntryState::Lost;
        let lost = Lost {
            name: found.name.to_string(),
            owner: found.owner.to_string(),
            reason,
            valid_until: found.valid_until,
            hold: Arc::clone(&found.hold),
        };
        log::warn!("lock {:?} is lost: {reason}", lost.name);
        found.status.mark_lost(lost);
        self.metrics.lost += 1;
        self.events.lost(reason);
    }
}
