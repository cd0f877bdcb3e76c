//! [`Leadership`]: one term of an election, from its campaign to its resignation.

use super::check_value;
use crate::error::{Error, Result};
use crate::lock::{LeaseGuard, Lock};
use crate::lost::{Lost, LostSignal};
use std::time::Instant;

/// Where a term is in its ending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// It leads.
    Leading,
    /// A resignation was sent and its outcome is unknown: the term may still stand in the
    /// store (until its lease lapses at the latest: it is renewed no more).
    Resigning,
    /// Over in the store: released, or found gone.
    Resigned,
    /// Renewed no more, without a resignation: it ends when its lease lapses.
    Abandoned,
}

/// One term of leadership, from [`Election::campaign`](crate::Election::campaign): renewed by
/// the watchdog while it lives, told when it can no longer be trusted as a lock's guard is, and
/// ended by [`Leadership::resign`] or by being dropped.
///
/// The term is a fencing token: it rises strictly from leader to leader of the name (across
/// failovers, where the store's tokens do). A leader sends it with every write it makes as
/// leader, and the store it writes to refuses a write with a term lower than one it has seen:
/// a leader that was paused past its lease and wakes up believing it leads is refused there.
#[must_use = "the leadership is resigned as soon as it is dropped"]
pub struct Leadership {
    /// The election's lock, as this campaign's owner.
    lock: Lock,
    guard: LeaseGuard,
    term: u64,
    value: String,
    phase: Phase,
}

impl Leadership {
    pub(super) fn new(lock: Lock, guard: LeaseGuard) -> Result<Leadership> {
        let term = guard.fencing_token().ok_or_else(|| {
            Error::Protocol("a leadership was taken without a fencing token".into())
        })?;
        Ok(Leadership {
            lock,
            guard,
            term,
            value: String::new(),
            phase: Phase::Leading,
        })
    }

    /// The election's name.
    pub fn name(&self) -> &str {
        self.lock.name()
    }

    /// This term: a fencing token, above the term of every leader before this one.
    pub fn term(&self) -> u64 {
        self.term
    }

    /// The value this leader last proclaimed.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// Whether this leadership can no longer be trusted: resigned, or lost as a lock's hold is
    /// (see [`LeaseGuard::is_lost`]). Once lost, it never leads again; a new campaign makes a
    /// new term.
    pub fn is_lost(&self) -> bool {
        self.phase != Phase::Leading || self.guard.is_lost()
    }

    /// How the leadership was lost, once the watchdog found it lost (not set by a resignation).
    pub fn lost(&self) -> Option<Lost> {
        self.guard.lost()
    }

    /// Until when the leadership is known valid, on the watchdog's clock: before then no other
    /// campaign can lead (see [`LeaseGuard::valid_until`]).
    pub fn valid_until(&self) -> Instant {
        self.guard.valid_until()
    }

    /// A receiver told once when the leadership is lost, no later than one timer tick after its
    /// local deadline, which comes before any other campaign can lead (see
    /// [`LeaseGuard::lost_signal`]). A resignation does not send it.
    pub fn lost_signal(&self) -> LostSignal {
        self.guard.lost_signal()
    }

    /// Calls `told` once when the leadership is lost, as [`LeaseGuard::on_lost`] does (not on a
    /// resignation).
    pub fn on_lost(&self, told: impl FnOnce(Lost) + Send + 'static) {
        self.guard.on_lost(told);
    }

    /// Changes what observers see as this leader's value, within this term (no new term):
    /// stored only while this leadership is not lost and its term still stands in the store.
    ///
    /// # Errors
    ///
    /// [`Error::NotOwner`] if the term is over (lost, or resigned), [`Error::InvalidArgument`]
    /// for a value longer than [`MAX_VALUE`](crate::election::MAX_VALUE) or holding a NUL,
    /// [`Error::Unavailable`] if the store does not answer in time (the value may have been
    /// stored), [`Error::Refused`] if it refuses the call.
    pub fn proclaim(&mut self, value: impl Into<String>) -> Result<()> {
        let value = value.into();
        check_value(&value)?;
        if self.is_lost() {
            return Err(self.not_leading());
        }
        let (owner, hold) = self.guard.hold();
        let deadline = self.lock.core().call_deadline();
        if !self
            .lock
            .elects()?
            .proclaim(owner, hold, &value, deadline)?
        {
            return Err(self.not_leading());
        }
        self.value = value;
        Ok(())
    }

    /// Ends this term in the store, within the command timeout, so that another campaign may
    /// lead at once; the leadership is lost from the call on, whatever the outcome. `Ok` once
    /// the term is over in the store: released now or before, or found gone already.
    ///
    /// Safe to call again: a resignation that failed ([`Error::Unavailable`]: it may or may not
    /// have been applied) leaves the term renewed no more, so that it ends when its lease
    /// lapses at the latest, and a later call sends it again and reports whether it is over
    /// now. A resignation is never forgotten as done before it is.
    ///
    /// # Errors
    ///
    /// [`Error::Unavailable`] if the store did not answer in time, [`Error::Refused`] if it
    /// refused the call: the term may still stand, until its lease lapses.
    pub fn resign(&mut self) -> Result<()> {
        let outcome = match self.phase {
            Phase::Resigned | Phase::Abandoned => return Ok(()),
            Phase::Leading => self.guard.release_once(),
            Phase::Resigning => self.guard.release_again(),
        };
        match outcome {
            Ok(()) | Err(Error::NotOwner { .. }) => {
                self.phase = Phase::Resigned;
                Ok(())
            }
            Err(error) => {
                self.phase = Phase::Resigning;
                Err(error)
            }
        }
    }

    /// Stops renewing this leadership without resigning: its term lapses with its lease, and
    /// this returns at once, without a command sent. For a leader that lost its lease, or
    /// cannot reach the store, and must not wait on a resignation.
    pub fn abandon(mut self) {
        self.phase = Phase::Abandoned;
        self.guard.abandon_once();
    }

    /// Whether the term is over in the store, as far as this leadership knows: a resignation
    /// was applied, or found it gone.
    pub fn is_resigned(&self) -> bool {
        self.phase == Phase::Resigned
    }

    fn not_leading(&self) -> Error {
        Error::NotOwner {
            name: self.name().to_owned(),
        }
    }
}

impl Drop for Leadership {
    /// Resigns, once more if a resignation failed before; a failure is logged (the term then
    /// ends when its lease lapses).
    fn drop(&mut self) {
        if let Err(error) = self.resign() {
            log::warn!(
                "resigning the leadership of {:?} on drop failed: {error}; it ends when its \
                 lease lapses",
                self.name()
            );
        }
    }
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("election", &self.name())
            .field("term", &self.term)
            .field("phase", &self.phase)
            .finish_non_exhaustive()
    }
}
