//! What an acquisition settles on its way, before it acts by itself: this owner's releases of the
//! lock whose outcome is unknown, sent again; and the contender's offer, closed, with the hold a
//! releaser of this client may have granted or passed it meanwhile.

use super::handoff::{Offer, Taken};
use super::release::{self, Grants};
use super::request::{Acquired, Origin, Request};
use crate::error::{Error, Result};
use std::sync::Arc;
use std::time::Instant;

/// Sends again this owner's releases of the lock whose outcome is unknown, so that a hold the
/// owner believes released does not keep it waiting, all by `deadline`. Those still unanswered
/// are kept for next time; the acquisition goes on unless the store refused (a hold left over only
/// makes it wait).
pub(super) fn settle_releases(lock: &Request<'_>, deadline: Instant) -> Result<()> {
    let (core, owner) = (lock.core, lock.owner.as_str());
    for unsettled in core.take_unsettled(lock.place.id(), owner) {
        // Not settled again: `send` remembers it again.
        let outcome = release::send(
            core,
            &**lock.place,
            &unsettled.owner,
            &unsettled.hold,
            &unsettled.id,
            deadline,
            Grants::No,
        );
        if outcome.settled {
            log::debug!(
                "an unsettled release of {:?} is settled",
                lock.place.id().name
            );
        }
        if let Err(error @ (Error::Refused { .. } | Error::WrongType { .. })) = outcome.released {
            return Err(error);
        }
    }
    Ok(())
}

/// Closes the contender's offer before it acts by itself, and returns the hold if a releaser of
/// this client granted it the lock meanwhile. If what became of a grant cannot be learnt, the
/// grant, claimed or not, is released before the owner's next acquisition of the lock (should
/// neither its releaser's withdrawal nor the claim's undoing have reached the store).
pub(super) fn settle_offer(lock: &Request<'_>, offer: &Offer) -> Result<Option<Acquired>> {
    let core = lock.core;
    let now = core.watchdog().now();
    let taken = offer
        .settle(
            &**lock.place,
            core.backend().call_timeout(),
            now,
            core.call_deadline(),
        )
        .inspect_err(|_| core.grant_unknown(&**lock.place, &lock.owner, offer.hold()))?;
    Ok(taken.map(|taken| match taken {
        Taken::Granted {
            id,
            token,
            sent_at,
            reserved,
        } => Acquired {
            hold: Arc::clone(offer.hold()),
            id,
            token,
            holds: 1,
            sent_at,
            reserved,
            origin: Origin::Store,
        },
        Taken::Passed(passed) => Acquired {
            hold: Arc::clone(passed.baton.hold()),
            id: passed.id.clone(),
            token: Some(passed.token),
            holds: 1,
            sent_at: now,
            reserved: None,
            origin: Origin::Passed(passed),
        },
    }))
}
