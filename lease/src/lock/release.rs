//! The one release, for every deployment, and [`Holding`], the narrow handle a guard releases
//! through. At a hold's last acquisition the lock goes straight to a thread of this client that
//! sleeps waiting for it, if there is one (a grant, claimed through the hand-off's offer);
//! otherwise it is freed, and this client's own waiters are woken at once. A release that gets
//! no answer is remembered and sent again before the same owner acquires the same lock again.

use super::core::Core;
use super::handoff::Claiming;
use super::registry::Unsettled;
use crate::backend::{HoldEnd, Place, Release, ReleaseOutcome, Released};
use crate::error::{Error, Result};
use crate::watchdog::Watched;
use std::sync::Arc;
use std::time::Instant;

/// Whether a release may grant the lock to this client's sleeping contender.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Grants {
    Allowed,
    No,
}

/// One acquisition, as its guard releases it: which it is, and the part of the client that
/// stops its renewal, releases it and tells whether it was lost. Nothing else of the client is
/// reachable through it.
pub(crate) struct Holding {
    core: Arc<Core>,
    place: Arc<dyn Place>,
    owner: String,
    /// The hold's id: the same for every re-entry of one hold.
    hold: Arc<str>,
    /// This acquisition's id.
    id: String,
    /// When it was acquired, for the hold's length in the metrics.
    acquired_at: Instant,
}

impl Holding {
    pub(crate) fn new(
        core: Arc<Core>,
        place: Arc<dyn Place>,
        owner: String,
        hold: Arc<str>,
        id: String,
    ) -> Holding {
        Holding {
            core,
            place,
            owner,
            hold,
            id,
            acquired_at: Instant::now(),
        }
    }

    /// The lock's name.
    pub(crate) fn name(&self) -> &str {
        &self.place.id().name
    }

    pub(crate) fn owner(&self) -> &str {
        &self.owner
    }

    /// Whether the watchdog counts the hold lost (its deadline read on the watchdog's clock).
    pub(crate) fn is_lost(&self, watched: &Watched) -> bool {
        self.core.watchdog().is_lost(&watched.status)
    }

    /// Stops watching and releases, all within one call timeout.
    pub(crate) fn release(&self, watched: &Watched) -> Result<()> {
        let core = &self.core;
        core.events().held(self.acquired_at.elapsed());
        let deadline = core.call_deadline();
        core.watchdog().unwatch(watched.entry, Some(deadline));
        core.guard_gone(self.place.id(), &self.owner, &self.hold);
        let outcome = send(
            core,
            &*self.place,
            &self.owner,
            &self.hold,
            &self.id,
            deadline,
            Grants::Allowed,
        );
        result(self.name(), &self.owner, outcome)
    }

    /// Stops watching without a release: the hold lapses, or is released before the owner's
    /// next acquisition of the lock.
    pub(crate) fn abandon(&self, watched: &Watched) {
        self.core.events().held(self.acquired_at.elapsed());
        self.core.watchdog().unwatch(watched.entry, None);
        let lapses_at = watched.valid_until();
        self.place
            .ended(&self.hold, HoldEnd::Abandoned { lapses_at });
        self.core.abandoned(
            self.place.id(),
            &self.owner,
            Unsettled {
                hold: Arc::clone(&self.hold),
                id: self.id.clone(),
            },
        );
    }
}

/// Releases acquisition `id` of hold `hold`, by `deadline`, and keeps this client's view of the
/// lock in step with the outcome.
pub(crate) fn send(
    core: &Core,
    place: &dyn Place,
    owner: &str,
    hold: &Arc<str>,
    id: &str,
    deadline: Instant,
    grants: Grants,
) -> ReleaseOutcome {
    let claiming = match grants {
        Grants::Allowed if core.backend().grants() && place.id().kind.grants() => {
            core.claim(place.id())
        }
        Grants::Allowed | Grants::No => Claiming::Free,
    };
    let (claim, wake_locally) = match claiming {
        Claiming::Grant(claim) => (Some(claim), true),
        Claiming::Free => (None, true),
        Claiming::FreeForOthers => (None, false),
    };
    let sent_at = core.watchdog().now();
    let now = || core.watchdog().now();
    let grant = claim.as_ref().map(|claim| claim.grant(sent_at, &now));
    let outcome = place.release(
        &Release {
            owner,
            hold,
            id,
            grant,
        },
        deadline,
    );
    let unknown = (!outcome.settled).then(|| Unsettled {
        hold: Arc::clone(hold),
        id: id.to_owned(),
    });
    let freed = matches!(
        outcome.released,
        Ok(Released::Applied { holds_left: 0 } | Released::Granted { .. })
    );
    let still_held_here = matches!(
        outcome.released,
        Ok(Released::Granted { .. } | Released::Applied { holds_left: 1.. })
    );
    core.released(place.id(), owner, still_held_here, unknown);
    if let Some(claim) = claim {
        if let Some(rivals) = claim.resolve(&outcome.released, outcome.settled, sent_at) {
            core.granted(place.id(), rivals);
        }
    }
    if wake_locally && (freed || !outcome.settled) {
        // Wake this client's waiter at once: granted, free to try, or to look for itself.
        core.waiters().notify(place.wake_key());
    }
    outcome
}

/// The caller's view of a release: `Ok` once it is applied (now or before), `NotOwner` if the
/// hold no longer held the lock.
pub(crate) fn result(name: &str, owner: &str, outcome: ReleaseOutcome) -> Result<()> {
    match outcome.released? {
        Released::NotOwner => Err(Error::NotOwner {
            name: name.to_owned(),
            owner: owner.to_owned(),
        }),
        Released::Applied { .. } | Released::Granted { .. } | Released::AlreadyApplied => {
            log::debug!("lock {name:?} released");
            Ok(())
        }
    }
}
