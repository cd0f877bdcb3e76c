//! What only some primitives need of a place, offered by the places that can: a semaphore's
//! stored number of permits ([`Resizes`]), an election's value and leader ([`Elects`]), a
//! release that grants the lock straight to a waiting owner of the same client ([`Grants`]),
//! and a rate limiter's grants counted by the store's clock ([`Limits`]). As
//! `lock_api` offers `try_lock_for` only where `RawMutexTimed` is implemented, a place offers
//! each by returning it from [`Place`]; a primitive whose place does not offer what it needs is
//! refused when it is made ([`needs`]), never at its first call.

use super::{GrantFate, Kind, Leading, Place};
use crate::error::{Error, Result};
use std::time::Instant;

use super::Taken;
use crate::rate::{LimiterState, RateLimit};

/// A semaphore's number of permits, stored with it, changed on purpose.
pub(crate) trait Resizes: Send + Sync {
    /// Makes `permits` the semaphore's number of permits, which every acquisition must declare
    /// while any hold stands; the number declared before, if any was.
    fn resize(&self, permits: u32, deadline: Instant) -> Result<Option<u32>>;
}

/// An election: its leader's value, and the hold that leads.
pub(crate) trait Elects: Send + Sync {
    /// An election's leader proclaims `value`: stored beside its hold `hold` of `owner`, for
    /// observers to read and be woken by, if that hold still holds the lock; whether it did.
    fn proclaim(&self, owner: &str, hold: &str, value: &str, deadline: Instant) -> Result<bool>;

    /// The hold that leads the election now, if one does. With `watch`, a store that wakes
    /// waiters by watches arms those that a change of leader or value fires (a store that
    /// announces does so anyway).
    fn leader(&self, watch: bool, deadline: Instant) -> Result<Option<Leading>>;
}

/// A release at a hold's last that grants the lock straight to a waiting owner of this client
/// ([`Release::grant`](super::Release)), and the settling of a grant whose outcome is unknown.
pub(crate) trait Grants: Send + Sync {
    /// After a grant whose outcome is unknown: whether it went through and stands, claimed by
    /// the waiting owner (with its token where there are tokens), or not, having withdrawn
    /// whatever part of it may have gone through. A release that grants and gets no answer
    /// withdraws its grant behind itself where it can; the claim and that withdrawal exclude
    /// each other, so that every grant ends claimed or withdrawn.
    fn settle_grant(&self, owner: &str, hold: &str, deadline: Instant) -> Result<GrantFate>;

    /// The acquisition id under which the claimant of the grant of hold `hold` holds it, once it
    /// claimed the grant: the same for every try, so that a claim sent again finds its own, and
    /// a release of unknown outcome can name it.
    fn claim_id(&self, hold: &str) -> String;
}

/// Refuses a primitive whose place does not offer what the primitive's kind needs, naming both
/// and the store.
pub(crate) fn needs(place: &dyn Place, store: &str) -> Result<()> {
    let kind = place.id().kind;
    let offered = match kind {
        Kind::Semaphore { .. } => place.resizes().is_some(),
        Kind::Leader => place.elects().is_some(),
        Kind::Limiter => place.limits().is_some(),
        Kind::Lock | Kind::Fair | Kind::Read | Kind::Write => true,
    };
    if offered {
        Ok(())
    } else {
        Err(not_offered(kind, store))
    }
}

/// The error of a primitive `kind` that `store` does not offer.
pub(crate) fn not_offered(kind: Kind, store: &str) -> Error {
    if kind == Kind::Limiter {
        return Error::InvalidArgument(format!(
            "a rate limiter is not offered on {store}: {LIMITS_NEED}"
        ));
    }
    Error::InvalidArgument(format!("a {} is not offered on {store}", kind.label()))
}

// ---- A rate limiter's calls ----

/// What a store must do to offer a rate limiter, as the refusals of those that cannot say.
pub(crate) const LIMITS_NEED: &str = "each grant must be decided and recorded by one store, \
    in one atomic step, against that store's own clock (Redis on one server, through \
    Sentinel or on a Cluster, and PostgreSQL, offer it)";

/// A rate limiter's grants, counted in the store by the store's own clock: every call reads
/// the clock, judges and records in one atomic step, so that the limit holds whatever the
/// clients' clocks say and however many ask at once. A call that asks under a limit other than
/// the one stored is told so ([`Taken::Declared`]), nothing written.
pub(crate) trait Limits: Send + Sync {
    /// Grants `n` grants under `limit` if the limiter allows them now, and records them; else
    /// says how long until it could, by the store's clock, if nothing else takes them first.
    fn take(&self, limit: &RateLimit, n: u64, deadline: Instant) -> Result<Taken>;

    /// Stores `limit` as the limiter's, whatever was stored; the limit stored before, if one
    /// was. Refused with `InvalidArgument` where the stored limit is of the other mode and its
    /// grants still count.
    fn reconfigure(&self, limit: &RateLimit, deadline: Instant) -> Result<Option<RateLimit>>;

    /// What the store holds for the limiter now, counted by the stored limit, or by `limit`
    /// if none is stored. Writes nothing.
    fn meter(&self, limit: &RateLimit, deadline: Instant) -> Result<LimiterState>;
}
