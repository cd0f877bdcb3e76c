//! The watchdog's table of holds: one entry per watched hold, found by a slab slot plus an id
//! that tells a reused slot apart, and an index of the renewed holds by lock and owner, so that a
//! reentrant hold is renewed once.

use super::metrics::WatchdogMetrics;
use crate::keys::LockKeys;
use crate::lost::{Lost, LostReason, Status};
use slab::Slab;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wheel::Timeout;

/// Names one entry; stale once the entry is gone, even if its slot is reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EntryRef {
    slot: usize,
    id: u64,
}

/// One watched hold.
pub(super) struct Entry {
    id: u64,
    pub(super) keys: Arc<LockKeys>,
    pub(super) owner: Arc<str>,
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
    /// Waiting in the renewal queue.
    pub(super) queued: bool,
    /// In a renewal call whose reply has not been applied.
    pub(super) in_flight: bool,
    pub(super) lost: bool,
    /// Its last guard is gone: nothing may be sent for it any more.
    pub(super) released: bool,
    pub(super) max_hold_reached: bool,
}

/// What a new entry starts from.
pub(super) struct NewEntry {
    pub(super) keys: Arc<LockKeys>,
    pub(super) owner: Arc<str>,
    pub(super) lease: Duration,
    pub(super) renewed: bool,
    pub(super) acquired_at: Instant,
    pub(super) max_hold: Option<Duration>,
    pub(super) valid_until: Instant,
}

#[derive(Default)]
pub(super) struct Table {
    entries: Slab<Entry>,
    /// Renewed holds that are not lost, by (lock key, owner).
    renewed: HashMap<(String, Arc<str>), EntryRef>,
    next_id: u64,
    pub(super) metrics: WatchdogMetrics,
}

impl Table {
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

    /// The renewed, not lost, hold of `owner` on `lock_key`, if there is one.
    pub(super) fn renewed_hold(&self, lock_key: &str, owner: &str) -> Option<EntryRef> {
        self.renewed
            .get(&(lock_key.to_owned(), Arc::from(owner)))
            .copied()
    }

    pub(super) fn insert(&mut self, new: NewEntry) -> EntryRef {
        self.next_id += 1;
        let id = self.next_id;
        let index_key = (new.keys.lock.clone(), Arc::clone(&new.owner));
        let renewed = new.renewed;
        let slot = self.entries.insert(Entry {
            id,
            status: Arc::new(Status::new(new.valid_until)),
            keys: new.keys,
            owner: new.owner,
            lease: new.lease,
            renewed: new.renewed,
            acquired_at: new.acquired_at,
            max_hold: new.max_hold,
            guards: 1,
            valid_until: new.valid_until,
            deadline_timer: None,
            renewal_timer: None,
            queued: false,
            in_flight: false,
            lost: false,
            released: false,
            max_hold_reached: false,
        });
        let entry = EntryRef { slot, id };
        if renewed {
            self.renewed.insert(index_key, entry);
        }
        self.metrics.watched = self.entries.len();
        entry
    }

    /// Stops everything scheduled for the entry and drops it from the index of renewed holds:
    /// a new acquisition by the same owner then starts a new entry.
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
        let index_key = (found.keys.lock.clone(), Arc::clone(&found.owner));
        if self.renewed.get(&index_key) == Some(&entry) {
            self.renewed.remove(&index_key);
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
        if found.lost {
            return;
        }
        found.lost = true;
        let lost = Lost {
            name: found.keys.name.clone(),
            owner: found.owner.to_string(),
            reason,
            valid_until: found.valid_until,
        };
        log::warn!(
            "lock {:?} held by {} is lost: {reason}",
            lost.name,
            lost.owner
        );
        found.status.mark_lost(lost);
        self.metrics.lost += 1;
    }
}
