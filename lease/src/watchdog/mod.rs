//! The watchdog's facade and its scheduling: it renews the leases of locks taken with the default
//! lease, and tells a holder when its hold can no longer be trusted, for every hold.
//!
//! The wheel timer only *triggers*. A renewal trigger puts the hold in the renewal queue; the
//! renewal thread sends whatever is queued, up to the batch size, in one call per server on its own
//! connection, so a slow or hung store never delays a timer. Each hold also has a deadline
//! timeout at its local deadline: when it fires and no renewal has moved the deadline, the hold
//! is lost, even if the renewal call is still waiting for the store.
//!
//! Where each part lives:
//!
//! * this file: [`Watchdog`] (watch, unwatch, read) and the timeouts it schedules on the timer;
//! * `grid.rs`: when a hold's deadline falls, and when its renewals and retries do (pure
//!   arithmetic, the renewal cadence);
//! * `renewal.rs`: the renewal thread, the [`Renewer`] seam the backends implement, and how a
//!   call's outcome moves deadlines;
//! * `deadline_task.rs`: what runs at a hold's deadline, or tells its holder when a stopped timer
//!   drops it;
//! * `table.rs`: the watched holds and the states they move through;
//! * `metrics.rs`: the counters a client reports.

mod deadline_task;
mod grid;
#[cfg(all(shuttle, test))]
mod interleavings;
mod metrics;
mod renewal;
mod table;

pub(crate) use grid::valid_until;
pub use metrics::WatchdogMetrics;
pub(crate) use renewal::{check_batch, DEFAULT_BATCH};
pub(crate) use table::EntryRef;

use crate::backend::Renewer;
use crate::error::{Error, Result};
use crate::events::Events;
use crate::lost::{Lost, LostReason, Status};
use crate::sync::{self, Condvar, Mutex};
use crossbeam_channel::{Receiver, Sender};
use deadline_task::DeadlineTask;
use grid::Grid;
use hashwheel::Timer;
use std::sync::Arc;
use std::time::{Duration, Instant};
use table::{EntryState, NewEntry, Table};

/// The timer a builder was given, or a new one on its own thread named `thread_name`.
pub(crate) fn timer_or_new(given: Option<Timer>, thread_name: String) -> Result<Timer> {
    match given {
        Some(timer) => Ok(timer),
        None => Timer::builder()
            .thread_name(thread_name)
            .build()
            .map_err(|error| match error {
                hashwheel::BuildError::Spawn(error) => Error::Spawn(error),
                other => Error::InvalidArgument(format!("watchdog timer: {other}")),
            }),
    }
}

/// A client's watchdog. Dropping it stops the renewal thread (and the timer, unless it was
/// given by the caller and is shared).
pub(crate) struct Watchdog {
    shared: Arc<WatchdogShared>,
}

struct WatchdogShared {
    timer: Timer,
    table: Mutex<Table>,
    /// Signalled whenever a renewal call's outcome has been applied.
    settled: Condvar,
    queue: sync::Sender<EntryRef>,
    /// When renewals and deadlines fall.
    grid: Grid,
}

/// The two timeouts of a hold.
#[derive(Clone, Copy)]
enum Trigger {
    /// Its local deadline: lost unless a renewal moved it.
    Deadline,
    /// Its next renewal.
    Renewal,
}

/// A hold for the watchdog to watch, from the moment its acquisition was sent.
pub(crate) struct Hold {
    /// The lock's name, for messages.
    pub(crate) name: Arc<str>,
    /// Where the hold lives, as its place names it for renewals.
    pub(crate) address: Arc<str>,
    pub(crate) owner: Arc<str>,
    /// The hold's id, which renewals name.
    pub(crate) hold: Arc<str>,
    pub(crate) lease: Duration,
    /// Renew it every lease/3 (a lock taken with the default lease), or only watch its expiry.
    pub(crate) renew: bool,
    pub(crate) max_hold: Option<Duration>,
    /// When the command that acquired it (or granted it) was sent, on [`Watchdog::now`]'s clock.
    pub(crate) sent_at: Instant,
}

/// A guard's link to its watched hold.
pub(crate) struct Watched {
    pub(crate) entry: EntryRef,
    pub(crate) status: Arc<Status>,
}

impl Watched {
    pub(crate) fn lost(&self) -> Option<Lost> {
        self.status.lost()
    }

    pub(crate) fn valid_until(&self) -> Instant {
        self.status.valid_until()
    }

    pub(crate) fn lost_signal(&self) -> Receiver<Lost> {
        self.status.subscribe()
    }

    /// Listens for the loss on a channel of the caller's (one message per loss).
    pub(crate) fn lost_to(&self, listener: Sender<Lost>) {
        self.status.subscribe_with(listener);
    }

    /// Calls `told` once when the hold is lost (at once if it is already), on the thread that
    /// finds it lost: it must not block.
    pub(crate) fn on_lost(&self, told: Box<dyn FnOnce(&Lost) + Send>) {
        self.status.on_lost(told);
    }
}

impl Watchdog {
    /// Starts the renewal thread, which renews through `renewer`; `timer` triggers renewals and
    /// deadlines.
    pub(crate) fn start(
        timer: Timer,
        renewer: Box<dyn Renewer>,
        batch: usize,
        thread_name: String,
        events: Events,
    ) -> Result<Watchdog> {
        let (queue, requests) = sync::unbounded();
        let origin = timer.now();
        let shared = Arc::new(WatchdogShared {
            grid: Grid::new(origin, timer.tick_floor(origin), timer.tick()),
            timer,
            table: Mutex::new(Table::with_events(events)),
            settled: Condvar::new(),
            queue,
        });
        let weak = Arc::downgrade(&shared);
        sync::Builder::new()
            .name(thread_name)
            .spawn(move || renewal::run(weak, requests, renewer, batch))
            .map_err(Error::Spawn)?;
        Ok(Watchdog { shared })
    }

    /// The time on the watchdog's clock, which every instant given to it must be read on.
    pub(crate) fn now(&self) -> Instant {
        self.shared.timer.now()
    }

    /// The client's timer, which the watchdog runs on and other waits of the client may use.
    pub(crate) fn timer(&self) -> &Timer {
        &self.shared.timer
    }

    /// Watches a hold that was just acquired. A renewed hold the owner already has (a re-entry)
    /// shares the existing entry, so it is renewed once.
    pub(crate) fn watch(&self, hold: Hold) -> Result<Watched> {
        let shared = &self.shared;
        let mut table = shared.table.lock();
        if hold.renew {
            if let Some(entry) = table.renewed_hold(&hold.hold) {
                if let Some(found) = table.get_mut(entry) {
                    found.guards += 1;
                    // A re-entry's own `max_hold` counts from its acquisition: the hold stops
                    // being renewed at whichever end comes first.
                    if let Some(max) = hold.max_hold {
                        let held_for = hold.sent_at.saturating_duration_since(found.acquired_at);
                        let end = held_for.saturating_add(max);
                        found.max_hold = Some(found.max_hold.map_or(end, |own| own.min(end)));
                    }
                    return Ok(Watched {
                        entry,
                        status: Arc::clone(&found.status),
                    });
                }
            }
        }
        let valid_until = shared.grid.deadline_after(hold.sent_at, hold.lease);
        let entry = table.insert(NewEntry {
            name: Arc::clone(&hold.name),
            address: hold.address,
            owner: hold.owner,
            hold: hold.hold,
            lease: hold.lease,
            renewed: hold.renew,
            acquired_at: hold.sent_at,
            max_hold: hold.max_hold,
            valid_until,
        });
        let scheduled = shared
            .schedule_deadline(&mut table, entry, valid_until)
            .and_then(|()| match hold.renew {
                true => {
                    let at = shared.grid.renewal_after(hold.sent_at, hold.lease);
                    shared.schedule_renewal(&mut table, entry, at)
                }
                false => Ok(()),
            });
        if let Err(reason) = scheduled {
            table.remove(entry);
            return Err(Error::Watchdog {
                name: hold.name.to_string(),
                reason,
            });
        }
        let status = match table.get(entry) {
            Some(found) => Arc::clone(&found.status),
            None => return Err(Error::Protocol("a new watchdog entry vanished".into())),
        };
        Ok(Watched { entry, status })
    }

    /// A guard of the hold is gone. At the last one, renewal stops for good. With a release to
    /// follow (`release_by`), this returns only once no renewal of the hold is out (or at that
    /// deadline), so that the release is never overtaken by a renewal of the lease it frees.
    pub(crate) fn unwatch(&self, entry: EntryRef, release_by: Option<Instant>) {
        let shared = &self.shared;
        let mut table = shared.table.lock();
        let Some(found) = table.get_mut(entry) else {
            return;
        };
        found.guards = found.guards.saturating_sub(1);
        if found.guards > 0 {
            return;
        }
        found.state = EntryState::Released;
        table.forget(entry);
        if let Some(limit) = release_by {
            // A renewal call still out names the hold even if it was lost meanwhile: wait
            // for it, whatever the state.
            while table.get(entry).is_some_and(|found| found.renewal_out) {
                if shared.settled.wait_until(&mut table, limit).timed_out() {
                    log::warn!("a renewal call is still out at the release's deadline");
                    break;
                }
            }
        }
        table.remove(entry);
    }

    /// Hands the hold of `entry`, watched for its one guard, to a new holder of this client, who
    /// is told of its loss from now on (the old holder's status hears no more of it). Its
    /// renewals go on as they were; `max_hold` counts afresh from now. Refused (`None`) unless
    /// the hold is renewed, not lost, not at its `max_hold`, and known valid for at least
    /// `margin` more: a hold about to lapse is not handed on.
    pub(crate) fn hand_over(
        &self,
        entry: EntryRef,
        owner: &Arc<str>,
        max_hold: Option<Duration>,
        margin: Duration,
    ) -> Option<Watched> {
        let shared = &self.shared;
        let now = self.now();
        let mut table = shared.table.lock();
        let found = table.get_mut(entry)?;
        let handable = found.renewed
            && found.guards == 1
            && matches!(
                found.state,
                EntryState::Held | EntryState::Queued | EntryState::Renewing
            )
            && found.status.lost().is_none()
            && now + margin < found.valid_until
            && !shared.timer.is_stopped();
        if !handable {
            return None;
        }
        let status = Arc::new(Status::new(found.valid_until));
        found.status = Arc::clone(&status);
        found.owner = Arc::clone(owner);
        found.acquired_at = now;
        found.max_hold = max_hold;
        let valid_until = found.valid_until;
        // The deadline task tells the status it was made with: the new holder's from now on.
        if let Err(reason) = shared.schedule_deadline(&mut table, entry, valid_until) {
            // The timer stopped meanwhile: lost, and not handed on.
            table.lose(entry, reason);
            return None;
        }
        Some(Watched { entry, status })
    }

    /// Whether the hold is lost, reading its deadline against the clock too, so that a timer
    /// running late never makes a hold look valid past its deadline.
    pub(crate) fn is_lost(&self, status: &Status) -> bool {
        status.lost().is_some() || self.now() >= status.valid_until()
    }

    pub(crate) fn metrics(&self) -> WatchdogMetrics {
        self.shared.table.lock().metrics
    }

    /// The counters of the timer the watchdog runs on.
    #[cfg(feature = "metrics")]
    pub(crate) fn timer_metrics(&self) -> hashwheel::Metrics {
        self.shared.timer.metrics()
    }
}

impl WatchdogShared {
    fn schedule_deadline(
        self: &Arc<Self>,
        table: &mut Table,
        entry: EntryRef,
        at: Instant,
    ) -> Result<(), LostReason> {
        self.schedule(table, entry, at, Trigger::Deadline)
    }

    fn schedule_renewal(
        self: &Arc<Self>,
        table: &mut Table,
        entry: EntryRef,
        at: Instant,
    ) -> Result<(), LostReason> {
        self.schedule(table, entry, at, Trigger::Renewal)
    }

    /// Puts the entry's timeout of this kind at `at`, replacing (and cancelling) the one it had.
    fn schedule(
        self: &Arc<Self>,
        table: &mut Table,
        entry: EntryRef,
        at: Instant,
        trigger: Trigger,
    ) -> Result<(), LostReason> {
        if self.timer.is_stopped() {
            return Err(LostReason::TimerStopped);
        }
        let weak = Arc::downgrade(self);
        let scheduled = match trigger {
            Trigger::Deadline => {
                let Some(found) = table.get(entry) else {
                    return Ok(());
                };
                let task = DeadlineTask {
                    shared: weak,
                    entry,
                    name: Arc::clone(&found.name),
                    owner: Arc::clone(&found.owner),
                    hold: Arc::clone(&found.hold),
                    status: Arc::clone(&found.status),
                    ran: false,
                };
                self.timer
                    .schedule_at(at, move || task.fire())
                    .map_err(drop)
            }
            Trigger::Renewal => self
                .timer
                .schedule_at(at, move || {
                    if let Some(shared) = weak.upgrade() {
                        shared.renewal_due(entry);
                    }
                })
                .map_err(drop),
        };
        let timeout = scheduled.map_err(|()| LostReason::TimerStopped)?;
        if let Some(found) = table.get_mut(entry) {
            let slot = match trigger {
                Trigger::Deadline => &mut found.deadline_timer,
                Trigger::Renewal => &mut found.renewal_timer,
            };
            if let Some(old) = slot.replace(timeout) {
                old.cancel();
            }
        }
        Ok(())
    }

    /// On the timer thread: queue the hold for renewal, unless its `max_hold` is used up.
    fn renewal_due(&self, entry: EntryRef) {
        let now = self.timer.now();
        let mut table = self.table.lock();
        let Some(found) = table.get_mut(entry) else {
            return;
        };
        if found.state != EntryState::Held {
            return;
        }
        let held_for = now.saturating_duration_since(found.acquired_at);
        if found.max_hold.is_some_and(|max| held_for >= max) {
            found.state = EntryState::Expiring;
            log::info!("lock {:?} reached its max_hold: renewal stops", found.name);
            return;
        }
        if self.queue.send(entry).is_ok() {
            found.state = EntryState::Queued;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hashwheel::ManualClock;

    /// The grid floors deadlines to the boundaries the timer fires at, wherever the watchdog
    /// starts between them.
    #[test]
    fn deadlines_fall_on_the_timer_s_tick_boundaries() {
        let clock = ManualClock::new();
        let timer = Timer::builder()
            .clock(clock.clone())
            .tick(Duration::from_micros(1_700))
            .build()
            .expect("valid timer settings");
        for start_offset in [0, 1, 699_999, 1_699_999] {
            clock.advance(Duration::from_nanos(start_offset));
            let origin = timer.now();
            let grid = Grid::new(origin, timer.tick_floor(origin), timer.tick());
            for lease in [10, 11, 31, 30_000].map(Duration::from_millis) {
                for nanos in (0..90_000_000u64).step_by(333_331) {
                    let sent = origin + Duration::from_nanos(nanos);
                    assert_eq!(
                        grid.deadline_after(sent, lease),
                        timer.tick_floor(valid_until(sent, lease)),
                        "{lease:?} sent {nanos} ns after the start"
                    );
                }
            }
        }
    }
}
