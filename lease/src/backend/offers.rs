//! What only some primitives need of a place, offered by the places that can: a semaphore's
//! stored number of permits ([`Resizes`]), an election's value and leader ([`Elects`]), a
//! release that grants the lock straight to a waiting owner of the same client ([`Grants`]), a
//! count-down latch's count ([`Latches`]), writes made only while a hold holds
//! ([`WritesWhileHeld`]), and a rate limiter's grants counted by the store's clock ([`Limits`]). As
//! `lock_api` offers `try_lock_for` only where `RawMutexTimed` is implemented, a place offers
//! each by returning it from [`Place`]; a primitive whose place does not offer what it needs is
//! refused when it is made ([`needs`]), never at its first call.

use super::{GrantFate, Kind, LatchRead, Leading, Place};
use crate::error::{Error, Result};
use crate::write::{Write, Written};
use std::time::{Duration, Instant};

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
        Kind::Latch => place.latches().is_some(),
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

// Count-down latches, and writes made only while a hold holds.

/// A count-down latch: a count stored with it, set while it is at zero or absent, counted down
/// to zero, which wakes its waiters. Each setting starts a round, named by an id the client
/// draws, so that a waiter of one round tells its opening from a later round's count. A latch
/// lapses `expiry` after its last change (kept, once at zero, for at least
/// [`LATCH_KEPT_OPEN`]); a store that cannot change a latch's expiry after it made it keeps the
/// first.
pub(crate) trait Latches: Send + Sync {
    /// Sets the count to `count` (from 1) as the round `round`, if the latch is at zero or
    /// absent; whether it did.
    fn set_count(
        &self,
        count: u32,
        round: &str,
        expiry: Duration,
        deadline: Instant,
    ) -> Result<bool>;

    /// Counts down once, if above zero: the count left (0 once at zero, now or before, or if
    /// the latch is absent). Reaching zero wakes the latch's waiters through the store.
    fn count_down(&self, expiry: Duration, deadline: Instant) -> Result<u32>;

    /// The latch now. With `watch`, a store that wakes waiters by watches arms one that the
    /// latch's next change fires (a store that announces does so anyway).
    fn read(&self, watch: bool, deadline: Instant) -> Result<LatchRead>;
}

/// How long a latch is kept, once at zero, at the least: long enough for every waiter of its
/// round to see it open, waiters looking at least every few seconds.
pub(crate) const LATCH_KEPT_OPEN: Duration = Duration::from_secs(10);

/// Writes of the caller's own, made only while a hold still holds the lock.
pub(crate) trait WritesWhileHeld: Send + Sync {
    /// Makes `write` in one atomic step with a check that `owner`'s hold `hold` still holds
    /// the lock: what it returned, or `None` if the hold no longer holds (nothing written). A
    /// write of another store's kind is refused with `InvalidArgument`.
    fn if_held(
        &self,
        owner: &str,
        hold: &str,
        write: &Write,
        deadline: Instant,
    ) -> Result<Option<Written>>;
}

// A rate limiter's calls.

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
