//! The renewal thread's side of the watchdog: it takes whatever holds are queued, up to the batch
//! size, renews them in one call through its [`Renewer`], which the backend provides, and applies
//! the outcome to the table: confirmed leases get a later deadline and their next renewal, refused
//! ones are lost, failed ones are tried again before their deadline. It ends when its client is
//! gone.

use super::table::{EntryState, Table};
use super::{EntryRef, WatchdogShared};
use crate::backend::{Renewal, Renewed, Renewer};
use crate::error::{Error, Result};
use crate::events::RenewOutcome;
use crate::lost::LostReason;
use crate::sync::Receiver;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// The renewal queue is served in calls of at most this many leases unless configured.
pub(crate) const DEFAULT_BATCH: usize = 100;

/// The largest renewal batch: one call's keys and reply stay small.
const MAX_BATCH: usize = 10_000;

/// Checks the renewal batch size a builder was given.
pub(crate) fn check_batch(batch: usize) -> Result<()> {
    if batch == 0 || batch > MAX_BATCH {
        return Err(Error::InvalidArgument(format!(
            "the renewal batch must be from 1 to {MAX_BATCH}"
        )));
    }
    Ok(())
}

/// One lease in a renewal call.
pub(super) struct Pending {
    pub(super) entry: EntryRef,
    pub(super) address: Arc<str>,
    pub(super) hold: Arc<str>,
    pub(super) lease: Duration,
}

impl Pending {
    fn renewal(&self) -> Renewal<'_> {
        Renewal {
            address: &self.address,
            hold: &self.hold,
            lease: self.lease,
        }
    }
}

pub(super) fn run(
    shared: Weak<WatchdogShared>,
    queue: Receiver<EntryRef>,
    mut renewer: Box<dyn Renewer>,
    batch: usize,
) {
    let mut queued = Vec::with_capacity(batch);
    // The queue's only sender lives in `WatchdogShared`: when the client is gone, this ends.
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
        let renewals: Vec<Renewal<'_>> = pending.iter().map(Pending::renewal).collect();
        let outcome = renewer.renew(&renewals);
        shared.finish_renewal(&pending, sent_at, &outcome);
    }
    log::debug!("renewal thread ends: its client is gone");
}

impl WatchdogShared {
    /// Marks the queued holds as in flight and returns what to send for those still watched.
    fn begin_renewal(&self, queued: &[EntryRef]) -> Vec<Pending> {
        let mut table = self.table.lock();
        let mut pending = Vec::with_capacity(queued.len());
        for &entry in queued {
            let Some(found) = table.get_mut(entry) else {
                continue;
            };
            if found.state != EntryState::Queued {
                continue;
            }
            found.state = EntryState::Renewing;
            found.renewal_out = true;
            pending.push(Pending {
                entry,
                address: Arc::clone(&found.address),
                hold: Arc::clone(&found.hold),
                lease: found.lease,
            });
        }
        table.metrics.in_flight += pending.len();
        pending
    }

    /// Applies a renewal call's outcome: confirmed leases get a later deadline and their next
    /// renewal, refused ones are lost, and after a failed call each is tried again before its
    /// deadline.
    fn finish_renewal(self: &Arc<Self>, sent: &[Pending], sent_at: Instant, outcome: &[Renewed]) {
        let now = self.timer.now();
        let mut table = self.table.lock();
        table.metrics.renewal_calls += 1;
        table.metrics.renewals_sent += sent.len() as u64;
        if outcome.contains(&Renewed::Failed) {
            table.metrics.failed_calls += 1;
        }
        let count = |what: Renewed| outcome.iter().filter(|&&one| one == what).count() as u64;
        let events = &table.events;
        events.renewals(RenewOutcome::Renewed, count(Renewed::Yes));
        events.renewals(RenewOutcome::Gone, count(Renewed::Gone));
        events.renewals(RenewOutcome::Failed, count(Renewed::Failed));
        log::trace!(
            "renewal of {} leases: {} confirmed",
            sent.len(),
            count(Renewed::Yes)
        );
        for (index, pending) in sent.iter().enumerate() {
            table.metrics.in_flight = table.metrics.in_flight.saturating_sub(1);
            let Some(found) = table.get_mut(pending.entry) else {
                continue;
            };
            found.renewal_out = false;
            match found.state {
                EntryState::Renewing => found.state = EntryState::Held,
                _ => continue,
            }
            let scheduled = match outcome.get(index).copied().unwrap_or(Renewed::Failed) {
                Renewed::Yes => {
                    table.metrics.renewed += 1;
                    self.confirmed(&mut table, pending.entry, sent_at)
                }
                Renewed::Gone => Err(LostReason::Taken),
                Renewed::Failed => {
                    let at = self.grid.retry_after(now, pending.lease);
                    match table.get(pending.entry) {
                        Some(found) if at < found.valid_until => {
                            self.schedule_renewal(&mut table, pending.entry, at)
                        }
                        // No retry can land before the deadline, which will tell the holder.
                        _ => Ok(()),
                    }
                }
            };
            if let Err(reason) = scheduled {
                table.lose(pending.entry, reason);
            }
        }
        drop(table);
        self.settled.notify_all();
    }

    /// A renewal sent at `sent_at` was confirmed: move the deadline and schedule the next one;
    /// unless the deadline has passed already, which loses the hold.
    fn confirmed(
        self: &Arc<Self>,
        table: &mut Table,
        entry: EntryRef,
        sent_at: Instant,
    ) -> Result<(), LostReason> {
        let Some(found) = table.get_mut(entry) else {
            return Ok(());
        };
        if self.timer.now() >= found.valid_until {
            // Past the deadline the hold is lost, whatever comes later: its holder may already
            // have read `is_lost()` as true, and a lost hold never becomes valid again.
            return Err(LostReason::Unconfirmed);
        }
        let lease = found.lease;
        let valid_until = self.grid.deadline_after(sent_at, lease);
        if valid_until > found.valid_until {
            found.valid_until = valid_until;
            found.status.extend(valid_until);
            self.schedule_deadline(table, entry, valid_until)?;
        }
        let next = self.grid.renewal_after(sent_at, lease);
        self.schedule_renewal(table, entry, next)
    }
}
