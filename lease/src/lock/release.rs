//! The one release, for every deployment, and [`Holding`], the narrow handle a guard releases
//! through. At a hold's last acquisition the lock goes straight to a thread of this client that
//! sleeps waiting for it, if there is one (claimed through the hand-off's offer): handed on in
//! memory where the hold has a baton with a token left (nothing is sent), else granted by the
//! release in the store. Otherwise it is freed, and this client's own waiters are woken at once. A
//! release that gets no answer is remembered and sent again before the same owner acquires the
//! same lock again.

use super::baton::{Baton, Kept, Passed, TOKENS_RESERVED};
use super::core::Core;
use super::handoff::{Claim, Claiming};
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
    /// The owner id the store knows the hold by: `owner`, unless the hold was handed on.
    store_owner: Arc<str>,
    /// The hold's id: the same for every re-entry of one hold.
    hold: Arc<str>,
    /// This acquisition's id.
    id: String,
    /// The hold's baton, if this client's threads may hand it on.
    baton: Option<Arc<Baton>>,
    /// When it was acquired, for the hold's length in the metrics.
    acquired_at: Instant,
}

/// What a [`Holding`] is made of.
pub(crate) struct HoldingOf {
    pub(crate) owner: String,
    pub(crate) store_owner: Arc<str>,
    pub(crate) hold: Arc<str>,
    pub(crate) id: String,
    pub(crate) baton: Option<Arc<Baton>>,
}

impl Holding {
    pub(crate) fn new(core: Arc<Core>, place: Arc<dyn Place>, of: HoldingOf) -> Holding {
        Holding {
            core,
            place,
            owner: of.owner,
            store_owner: of.store_owner,
            hold: of.hold,
            id: of.id,
            baton: of.baton,
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

    /// The owner id the store knows the hold by, and the hold's id.
    pub(crate) fn store_hold(&self) -> (&str, &str) {
        (&self.store_owner, &self.hold)
    }

    /// The lock's place, and the client's parts, for a write made while the hold holds.
    pub(crate) fn place_and_core(&self) -> (&dyn Place, &Core) {
        (&*self.place, &self.core)
    }

    /// Whether the watchdog counts the hold lost (its deadline read on the watchdog's clock).
    pub(crate) fn is_lost(&self, watched: &Watched) -> bool {
        self.core.watchdog().is_lost(&watched.status)
    }

    /// Hands the hold on to this client's sleeping contender, or stops watching and releases,
    /// all within one call timeout.
    pub(crate) fn release(&self, watched: &Watched) -> Result<()> {
        let core = &self.core;
        core.events().held(self.acquired_at.elapsed());
        let claiming = claiming(core, &*self.place, Grants::Allowed);
        let claiming = match self.pass(watched, claiming) {
            Ok(()) => return Ok(()),
            Err(claiming) => claiming,
        };
        let deadline = core.call_deadline();
        core.watchdog().unwatch(watched.entry, Some(deadline));
        core.guard_gone(self.place.id(), &self.owner, &self.hold);
        let outcome = send_claimed(
            core,
            &*self.place,
            &self.store_owner,
            &self.hold,
            &self.id,
            deadline,
            claiming,
        );
        result(self.name(), outcome)
    }

    /// Sends this acquisition's release again, after one whose outcome was unknown or refused,
    /// within one call timeout. For the one hold of an owner of its own (an election's
    /// campaign): the owner's remembered releases are this one, sent here rather than before
    /// the owner's next acquisition, which never comes.
    pub(crate) fn release_again(&self) -> Result<()> {
        let core = &self.core;
        drop(core.take_unsettled(self.place.id(), &self.store_owner));
        let outcome = send(
            core,
            &*self.place,
            &self.store_owner,
            &self.hold,
            &self.id,
            core.call_deadline(),
            Grants::No,
        );
        result(self.name(), outcome)
    }

    /// Hands the hold on without the store, if it may be: to the contender `claiming` claimed,
    /// or kept here for the one on its way. Only where the hold has a baton with a token left,
    /// this is its last guard here with nothing of it unsettled, the contender waits with the
    /// same renewed lease, and the watchdog knows the hold valid for a third of its lease more.
    /// Otherwise gives `claiming` back.
    fn pass(&self, watched: &Watched, claiming: Claiming) -> Result<(), Claiming> {
        let core = &self.core;
        let id = self.place.id();
        let passable = matches!(claiming, Claiming::Grant(_) | Claiming::Keep)
            && self.baton.is_some()
            && core.sole_guard(id, &self.owner, &self.hold);
        let Some(baton) = self.baton.as_ref().filter(|_| passable) else {
            return Err(claiming);
        };
        match claiming {
            Claiming::Grant(claim) => self.hand_to(baton, watched, claim).map_err(Claiming::Grant),
            Claiming::Keep => self.keep(baton, watched).map_err(|()| Claiming::Keep),
            other => Err(other),
        }
    }

    /// Keeps the hold here, renewed, for the contender on its way.
    fn keep(&self, baton: &Arc<Baton>, watched: &Watched) -> Result<(), ()> {
        let core = &self.core;
        if !baton.has_tokens() {
            return Err(());
        }
        let margin = baton.pass_margin();
        let kept = core
            .watchdog()
            .hand_over(watched.entry, baton.store_owner(), None, margin)
            .ok_or(())?;
        baton.kept(Arc::clone(&kept.status));
        let kept = Kept {
            place: Arc::clone(&self.place),
            baton: Arc::clone(baton),
            id: self.id.clone(),
            watched: kept,
        };
        core.keep(self.place.id(), &self.owner, &self.hold, kept);
        core.waiters().notify(self.place.wake_key());
        Ok(())
    }

    /// Hands the hold to the contender `claim` claimed.
    fn hand_to(&self, baton: &Arc<Baton>, watched: &Watched, claim: Claim) -> Result<(), Claim> {
        let core = &self.core;
        let id = self.place.id();
        let taker = claim.taker();
        if !baton.fits(taker.renewed, taker.lease) {
            return Err(claim);
        }
        let Some((token, rivals)) = baton.take_token() else {
            return Err(claim);
        };
        let holder: Arc<str> = Arc::from(taker.owner.as_str());
        let margin = baton.pass_margin();
        let handed = core
            .watchdog()
            .hand_over(watched.entry, &holder, taker.max_hold, margin);
        let Some(next) = handed else {
            return Err(claim);
        };
        baton.passed(holder, token, Arc::clone(&next.status));
        core.passed(id, &self.owner, &self.hold, rivals);
        claim.pass(Passed {
            baton: Arc::clone(baton),
            id: self.id.clone(),
            token,
            watched: next,
        });
        core.waiters().notify(self.place.wake_key());
        log::trace!("lock {:?} handed on in memory (token {token})", id.name);
        Ok(())
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
                owner: Arc::clone(&self.store_owner),
                hold: Arc::clone(&self.hold),
                id: self.id.clone(),
            },
        );
    }
}

/// Releases through the store a hold kept here that no contender took, within one call
/// timeout: the lock is freed (and this client's waiters woken) or granted.
pub(crate) fn release_kept(core: &Core, kept: Kept) {
    let deadline = core.call_deadline();
    core.watchdog().unwatch(kept.watched.entry, Some(deadline));
    core.baton_gone(kept.place.id(), &kept.baton);
    let outcome = send(
        core,
        &*kept.place,
        kept.baton.store_owner(),
        kept.baton.hold(),
        &kept.id,
        deadline,
        Grants::Allowed,
    );
    if let Err(error) = outcome.released {
        log::debug!(
            "releasing lock {:?}, kept for a contender that did not take it: {error}",
            kept.place.id().name
        );
    }
}

/// What a release at a hold's last does about this client's contender, if `grants` allows one.
fn claiming(core: &Core, place: &dyn Place, grants: Grants) -> Claiming {
    match grants {
        Grants::Allowed if place.grants().is_some() => core.claim(place.id()),
        Grants::Allowed | Grants::No => Claiming::Free,
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
    let claiming = claiming(core, place, grants);
    send_claimed(core, place, owner, hold, id, deadline, claiming)
}

/// [`send`], with what the release does about this client's contender decided already.
fn send_claimed(
    core: &Core,
    place: &dyn Place,
    owner: &str,
    hold: &Arc<str>,
    id: &str,
    deadline: Instant,
    claiming: Claiming,
) -> ReleaseOutcome {
    let (claim, wake_locally) = match claiming {
        Claiming::Grant(claim) => (Some(claim), true),
        Claiming::Free | Claiming::Keep => (None, true),
        Claiming::FreeForOthers => (None, false),
    };
    let sent_at = core.watchdog().now();
    let now = || core.watchdog().now();
    let grant = claim.as_ref().map(|claim| {
        // Others waiting behind the granted thread: tokens for it to hand on to them.
        let hands_on = claim.taker().renewed && core.reserves_with_new_hold(place);
        let reserve = if hands_on { TOKENS_RESERVED - 1 } else { 0 };
        claim.grant(sent_at, &now, reserve)
    });
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
        owner: Arc::from(owner),
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
pub(crate) fn result(name: &str, outcome: ReleaseOutcome) -> Result<()> {
    match outcome.released? {
        Released::NotOwner => Err(Error::NotOwner {
            name: name.to_owned(),
        }),
        Released::Applied { .. } | Released::Granted { .. } | Released::AlreadyApplied => {
            log::debug!("lock {name:?} released");
            Ok(())
        }
    }
}
