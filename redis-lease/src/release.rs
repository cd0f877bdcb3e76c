//! The one release, for every deployment. At a hold's last acquisition the lock goes straight to
//! a thread of this client that sleeps waiting for it, if there is one (a grant, claimed through
//! the local queue's offer); otherwise it is freed, and this client's own waiters are woken at
//! once. A release that gets no answer is remembered and sent again before the same owner
//! acquires the same lock again.

use crate::backend::{Grant, Release, ReleaseOutcome, Released};
use crate::client::Core;
use crate::error::{Error, Result};
use crate::keys::LockKeys;
use crate::local_queue::Claiming;
use crate::unsettled::Unsettled;
use crate::watchdog;
use std::sync::Arc;
use std::time::Instant;

/// Whether a release may hand the lock to this client's sleeping contender.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handoff {
    Allowed,
    No,
}

/// Releases acquisition `id` of hold `hold`, by `deadline`, and keeps this client's view of the
/// lock in step with the outcome.
pub(crate) fn send(
    core: &Core,
    keys: &LockKeys,
    owner: &str,
    hold: &Arc<str>,
    id: &str,
    deadline: Instant,
    handoff: Handoff,
) -> ReleaseOutcome {
    let claiming = match handoff {
        Handoff::Allowed if core.backend.grants() => core.queues.claim(&keys.name),
        Handoff::Allowed | Handoff::No => Claiming::Free,
    };
    let (claim, wake_locally) = match claiming {
        Claiming::Grant(claim) => (Some(claim), true),
        Claiming::Free => (None, true),
        Claiming::FreeForOthers => (None, false),
    };
    let sent_at = core.watchdog.now();
    let now = || core.watchdog.now();
    let grant = claim.as_ref().map(|claim| Grant {
        owner: &claim.offer().owner,
        hold: &claim.offer().hold,
        lease: claim.offer().lease,
        valid_until: watchdog::valid_until(sent_at, claim.offer().lease),
        now: &now,
    });
    let outcome = core.backend.release(
        keys,
        &Release {
            owner,
            hold,
            id,
            grant,
        },
        deadline,
    );
    if !outcome.settled {
        core.unsettled.remember(
            &keys.lock,
            owner,
            Unsettled {
                hold: Arc::clone(hold),
                id: id.to_owned(),
            },
        );
    }
    let freed = matches!(
        outcome.released,
        Ok(Released::Applied { holds_left: 0 } | Released::Granted { .. })
    );
    let still_held_here = matches!(
        outcome.released,
        Ok(Released::Granted { .. } | Released::Applied { holds_left: 1.. })
    );
    core.queues.set_held_here(&keys.name, still_held_here);
    if let Some(claim) = claim {
        match (&outcome.released, outcome.settled) {
            (
                Ok(Released::Granted {
                    token,
                    others_waiting,
                }),
                _,
            ) => claim.granted(*token, sent_at, *others_waiting),
            (Ok(Released::Applied { .. } | Released::NotOwner), true) => claim.declined(),
            // No answer from everyone: whether the grant went through is for Redis to say.
            _ => claim.unknown(),
        }
    }
    if wake_locally && (freed || !outcome.settled) {
        // Wake this client's waiter at once: granted, free to try, or to look for itself.
        core.waiters.notify(&keys.channel);
    }
    outcome
}

/// The caller's view of a release: `Ok` once it is applied (now or before), `NotOwner` if the
/// hold no longer held the lock.
pub(crate) fn result(keys: &LockKeys, owner: &str, outcome: ReleaseOutcome) -> Result<()> {
    match outcome.released? {
        Released::NotOwner => Err(Error::NotOwner {
            name: keys.name.clone(),
            owner: owner.to_owned(),
        }),
        Released::Applied { .. } | Released::Granted { .. } | Released::AlreadyApplied => {
            log::debug!("lock {:?} released", keys.name);
            Ok(())
        }
    }
}
