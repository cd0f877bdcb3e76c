//! The seam between the one lock and the stores it can live in. A lock's logic (the acquire loop,
//! the local queue and its grants, the watchdog, the guard, the lost signal) exists once, above
//! this seam, and names a lock by a [`LockId`]; a store implements [`Backend`], which builds a
//! [`Place`] for each lock, holding the store's own addressing (Redis keys and a channel, a
//! ZooKeeper path). Nothing above this seam imports a store, and no store imports another: each
//! lives in `stores/`, builds itself from the client's settings, and refuses at build every
//! setting it cannot honour.
//!
//! # What a backend promises
//!
//! * **Every call ends by its deadline**, whatever the servers do; one that got no answer in
//!   time says so with [`Error::Unavailable`](crate::Error::Unavailable) (it may have landed).
//! * **An attempt that reports failure leaves nothing behind**: an acquisition that landed
//!   without its answer is undone behind it, or found and reused by the next attempt of the same
//!   owner, before anything else of that owner is done with the lock.
//! * **A hold is the store's until its lease lapses**: the store frees it by itself no sooner
//!   than the lease after the send time of the last confirmed acquisition or renewal, so that a
//!   holder told by its local deadline (that send time, plus the lease, less the drift allowance)
//!   is told before anyone else can hold. A place whose holds do not lapse by themselves (a
//!   session's) ends one when told the client [stopped vouching](Place::ended) for it.
//! * **A release belongs to a hold**: it names the hold and the acquisition, is applied at most
//!   once however often it is sent, and never touches another hold of the same owner.
//! * **Tokens rise**, where there are tokens ([`Backend::fenced`]): every new hold of a name gets
//!   a token above every one handed out before for that name.
//! * **Waiters are woken**: a release that frees a lock reaches this client's waiters at once
//!   (the core does that) and other clients' through the store's announcements or watches,
//!   keyed by [`Place::wake_key`]; where a message may be lost, waiters look again by
//!   [`Backend::pause`].

mod calls;
mod id;
mod limits;
mod offers;
mod renew;
mod settings;

pub(crate) use calls::{
    Attempt, Attempted, Grant, GrantFate, HoldEnd, LatchRead, Leading, Release, ReleaseOutcome,
    Released, ReserveFor, Reserved, Rivals, ServerIdentity,
};
pub(crate) use id::{check_prefix, Kind, LockId, Scope};
pub(crate) use limits::Taken;
pub(crate) use offers::{needs, not_offered, Elects, Grants, Limits, Resizes, LIMITS_NEED};
pub(crate) use offers::{Latches, WritesWhileHeld, LATCH_KEPT_OPEN};
pub(crate) use renew::{Renewal, Renewed, Renewer};
pub(crate) use settings::Settings;

use crate::error::Result;
use crate::state::LockState;
use crate::waiters::Waiters;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A store, as the client sees it: what every lock on it shares.
pub(crate) trait Backend: Send + Sync + 'static {
    /// The place of the lock `id`, if such a lock can live here (a name a store cannot take,
    /// a primitive it does not offer, is refused with `InvalidArgument`).
    fn place(&self, id: &LockId) -> Result<Arc<dyn Place>>;

    /// Whether holds carry fencing tokens.
    fn fenced(&self) -> bool;

    /// Where the locks live, as text (passwords hidden).
    fn address(&self) -> &str;

    /// The longest one call may take (the command timeout, or RedLock's node timeout).
    fn call_timeout(&self) -> Duration;

    /// How long a waiter sleeps before trying again when nothing wakes it, the holder having
    /// `ttl` left.
    fn pause(&self, ttl: Option<Duration>) -> Duration;

    /// The renewer the watchdog's renewal thread uses.
    fn renewer(&self) -> Box<dyn Renewer>;

    /// The waiters of the client, woken by this store's announcements or watches if it has any.
    fn waiters(&self, thread_name: String) -> Result<Waiters>;

    /// Whether the store serves now: one round trip to what a lock's call would reach, ended
    /// by `deadline`.
    fn ping(&self, deadline: Instant) -> Result<()>;
}

/// One lock in one store: the store's addressing of it, and the calls on it.
pub(crate) trait Place: Send + Sync + 'static {
    /// The lock, as the core names it.
    fn id(&self) -> &LockId;

    /// The same lock, for acquisitions of another kind (see [`LockId::with_kind`]).
    fn of_kind(&self, kind: Kind) -> Arc<dyn Place>;

    /// Where the lock lives, as text, which orders the locks of a `MultiLock`: the store's
    /// address and the lock's within it.
    fn address(&self) -> (&str, &str);

    /// What this lock's waiters are woken by ([`Waiters::watch`]).
    fn wake_key(&self) -> &str;

    /// What a renewal of `hold` names ([`Renewal::address`]), worked out once per hold.
    fn hold_address(&self, hold: &str) -> Arc<str>;

    /// The servers that keep the lock, as they identify themselves: two locks of one address on
    /// one server are one lock, however the server is named. RedLock names those of its masters
    /// that answer by `deadline`.
    fn servers(&self, deadline: Instant) -> Result<Vec<ServerIdentity>>;

    /// One attempt. An attempt that got no answer may still land later; the place makes sure it
    /// is then undone.
    fn attempt(&self, attempt: &Attempt<'_>, deadline: Instant) -> Result<Attempted>;

    /// Withdraws `owner`'s place in the lock's line when its acquisition ends without the lock,
    /// for a store that keeps a place while a contender waits (ZooKeeper's nodes; on Redis, a
    /// fair lock's line and a waiting writer's mark, which only an acquisition that `waited`
    /// leaves). Returns within one call timeout; a withdrawal may finish in the background.
    fn abandon(&self, owner: &str, waited: bool);

    /// The client stops vouching for `hold` ([`HoldEnd`]): the hold must be gone when its lease
    /// would have lapsed. A place whose holds lapse with their lease does nothing; one whose
    /// holds live as long as a session deletes the hold then, unless it is released first.
    fn ended(&self, hold: &str, end: HoldEnd);

    /// Releases one acquisition (and grants the lock at the hold's last, if asked to).
    fn release(&self, release: &Release<'_>, deadline: Instant) -> ReleaseOutcome;

    /// What the store holds for the lock.
    fn inspect(&self, deadline: Instant) -> Result<LockState>;

    /// Ends every hold of the lock whoever holds it; whether anything was held.
    fn force_release(&self, deadline: Instant) -> Result<bool>;

    /// The semaphore calls, where the place offers semaphores.
    fn resizes(&self) -> Option<&dyn Resizes> {
        None
    }

    /// The election calls, where the place offers elections.
    fn elects(&self) -> Option<&dyn Elects> {
        None
    }

    /// Grants, where a release of this lock may grant it straight to a waiting owner of the
    /// client: a plain lock's, on a store that can make and settle a grant (not with replica
    /// acknowledgements required: the granted hold would be one no replica has, so the waiter
    /// takes the lock by an acquisition of its own).
    fn grants(&self) -> Option<&dyn Grants> {
        None
    }

    /// The latch calls, where the place is a latch the store offers.
    fn latches(&self) -> Option<&dyn Latches> {
        None
    }

    /// Writes made only while a hold holds, where the store can check a hold and write in one
    /// atomic step.
    fn writes(&self) -> Option<&dyn WritesWhileHeld> {
        None
    }

    /// A rate limiter's calls, where the place is a limiter's and its store counts grants by
    /// its own clock in one atomic step.
    fn limits(&self) -> Option<&dyn Limits> {
        None
    }
}
