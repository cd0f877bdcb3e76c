//! The seam between one lock and the ways Redis can be deployed. A lock's logic (the acquire
//! loop, the local queue and its grants, the watchdog, the guard, the lost signal) exists once,
//! in the modules above; a [`Backend`] knows only what differs: how to make one attempt, release
//! one acquisition, renew leases, wake waiters, and read or clear a lock's state, on one server
//! ([`server`]), on a Redis Cluster ([`cluster`]: the master of the lock's slot), on the primary
//! that Redis Sentinel names ([`sentinel`]), or on a quorum of independent masters ([`quorum`],
//! RedLock: "one server is a quorum of one").
//!
//! Each deployment builds and checks itself from the builder's [`Settings`] and its URLs (its
//! `build`), and keeps what only it needs in its own module: where its connections go (a
//! `pool::Target`), what a new connection must pass (a `pool::Admission`), how a connection is
//! set up for one operation (a `pool::Setup`). Adding a deployment is one module here and one
//! line in `ClientBuilder::build`.
//!
//! Every call takes the deadline it must end by; none blocks past it.

mod settings;

pub(crate) use settings::Settings;

use crate::error::Result;
use crate::state::LockState;
use crate::stores::redis::keys::LockKeys;
use crate::stores::redis::pool::Identity;
use crate::stores::redis::pubsub::Waiters;
use crate::stores::redis::scripts;
use crate::watchdog::Renewer;
use std::time::{Duration, Instant};

/// One acquisition attempt, as the lock asks a backend to make it.
pub(crate) struct Attempt<'a> {
    pub(crate) owner: &'a str,
    pub(crate) lease: Duration,
    /// This acquisition's id; also the new hold's id if the lock is free.
    pub(crate) id: &'a str,
    /// The hold the owner holds here and may re-enter.
    pub(crate) reenter: Option<&'a str>,
    /// Until when a lease acquired by this attempt is valid (its send time, plus the lease, less
    /// the drift allowance), on the watchdog's clock; with `now`, for a backend that must check
    /// that the attempt did not take too long.
    pub(crate) valid_until: Instant,
    pub(crate) now: &'a (dyn Fn() -> Instant + Sync),
    /// Whether the acquisition waits if it finds the lock held: a waiting acquisition of a fair
    /// lock takes a place in its queue, a waiting writer goes before new readers.
    pub(crate) waits: bool,
}

/// What an attempt came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempted {
    /// Held: a new hold (`holds` 1) or a re-entry, with the hold's fencing token where the
    /// backend has tokens.
    Acquired {
        holds: u64,
        token: Option<u64>,
        /// When the server last confirmed the hold's lease, if later than the attempt was sent
        /// (ZooKeeper: the send time of the session's last answered request, where the attempt
        /// took several round trips): the hold's deadline counts from then.
        confirmed_at: Option<Instant>,
    },
    /// Busy: another hold holds it, for about `ttl` (`None`: unknown).
    Busy { ttl: Option<Duration> },
}

/// A waiting owner of this client that a release may grant the lock to.
pub(crate) struct Grant<'a> {
    pub(crate) owner: &'a str,
    /// The id of the hold the grant makes.
    pub(crate) hold: &'a str,
    pub(crate) lease: Duration,
    /// Until when a lease granted now is valid, for a backend that must check it.
    pub(crate) valid_until: Instant,
    pub(crate) now: &'a (dyn Fn() -> Instant + Sync),
}

/// One acquisition to release.
pub(crate) struct Release<'a> {
    pub(crate) owner: &'a str,
    pub(crate) hold: &'a str,
    pub(crate) id: &'a str,
    pub(crate) grant: Option<Grant<'a>>,
}

impl Release<'_> {
    /// The release script's call for this release on `keys`, announcing a freed lock as
    /// `announce` says, a grant's token drawn in `epoch`.
    pub(crate) fn call(
        &self,
        keys: &LockKeys,
        announce: scripts::Announce,
        epoch: crate::stores::redis::fencing::Epoch,
    ) -> scripts::Call {
        let grant = self.grant.as_ref().map(|grant| scripts::Grant {
            owner: grant.owner,
            hold: grant.hold,
            lease: grant.lease,
        });
        scripts::release(
            keys,
            self.owner,
            self.hold,
            self.id,
            grant.as_ref(),
            announce,
            epoch,
        )
    }
}

/// What a release came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Released {
    /// Applied; `holds_left` acquisitions of the hold are left (0: the lock was freed).
    Applied { holds_left: u64 },
    /// Applied to the last acquisition, and the lock granted to the grant's owner, with this
    /// token where the backend has tokens; `rivals`: what the backend saw of other clients'
    /// waiters.
    Granted { token: Option<u64>, rivals: Rivals },
    /// Applied before (a retry).
    AlreadyApplied,
    /// The hold does not hold the lock.
    NotOwner,
}

/// What a backend can tell, at a grant, of the waiters of other clients. A fact, not a decision:
/// the hand-off (`lock/handoff.rs`) decides from it whether the run of grants goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rivals {
    /// Connections of other clients are subscribed to the lock's channel.
    Subscribed,
    /// No connection of another client is subscribed to it.
    None,
    /// The backend cannot tell: other clients' waiters poll rather than subscribe.
    Unknown,
}

/// What became of a grant whose outcome was unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GrantFate {
    /// It stands, claimed: the waiting owner holds the lock under the acquisition `id`, with
    /// this token where there are tokens.
    Granted { token: Option<u64>, id: String },
    /// It did not go through, or was withdrawn.
    Withdrawn,
}

/// A release and whether every server it went to answered. An unsettled release is sent again
/// before the same owner acquires the same lock again.
pub(crate) struct ReleaseOutcome {
    pub(crate) released: Result<Released>,
    pub(crate) settled: bool,
}

/// What differs between deployments.
pub(crate) trait Backend: Send + Sync + 'static {
    /// Whether holds carry fencing tokens.
    fn fenced(&self) -> bool;

    /// Whether a release may grant the lock straight to a waiting owner of the client. Not with
    /// replica acknowledgements required: the granted hold would be one no replica has, so the
    /// waiter takes the lock by an acquisition of its own.
    fn grants(&self) -> bool;

    /// Where the locks live, as text: it orders the locks of a `MultiLock`.
    fn place(&self) -> &str;

    /// The servers that keep the lock at `keys`, as they identify themselves (see
    /// [`Identity`]): two locks of one key on one server are one lock, however its server is
    /// named. RedLock names those of its masters that answer by `deadline`.
    fn servers(&self, keys: &LockKeys, deadline: Instant) -> Result<Vec<Identity>>;

    /// The longest one call may take (the command timeout, or RedLock's node timeout).
    fn call_timeout(&self) -> Duration;

    /// Checks that a lock with these keys can live here (a name ZooKeeper accepts as a node).
    fn admit(&self, _keys: &LockKeys) -> Result<()> {
        Ok(())
    }

    /// One attempt. An attempt that got no answer may still land later; the backend makes sure
    /// it is then undone.
    fn attempt(
        &self,
        keys: &LockKeys,
        attempt: &Attempt<'_>,
        deadline: Instant,
    ) -> Result<Attempted>;

    /// Withdraws `owner`'s place in the lock's queue when its acquisition ends without the lock,
    /// for a backend that keeps a place while a contender waits (ZooKeeper's nodes; on Redis, a
    /// fair lock's line and a waiting writer's mark, which only an acquisition that `waited`
    /// leaves). Returns within one call timeout; ZooKeeper's withdrawal finishes in the
    /// background.
    fn abandon(&self, _keys: &LockKeys, _owner: &str, _waited: bool) {}

    /// The client stops keeping `hold` alive (its guard abandoned it): the hold must be gone
    /// after `at`, as a lease that lapses in Redis is. A backend whose holds lapse by themselves
    /// does nothing; one whose holds live as long as a session (ZooKeeper) deletes the hold
    /// then, unless it is released first.
    fn lapse(&self, _keys: &LockKeys, _hold: &str, _at: Instant) {}

    /// Where a backend whose holds do not lapse by themselves (ZooKeeper's live as long as the
    /// session) hears of every hold's loss (a fixed lease run out, a `max_hold` reached, an
    /// unconfirmed lease), to end the hold in the server once its holder was told.
    fn losses(&self) -> Option<crossbeam_channel::Sender<crate::lost::Lost>> {
        None
    }

    /// Releases one acquisition (and grants the lock at the hold's last, if asked to).
    fn release(&self, keys: &LockKeys, release: &Release<'_>, deadline: Instant) -> ReleaseOutcome;

    /// After a grant whose outcome is unknown: whether it went through and stands, claimed by
    /// the waiting owner (with its token where the backend has tokens), or not, having withdrawn
    /// whatever part of it may have gone through. A release that grants and gets no answer
    /// withdraws its grant behind itself where it can; the claim and that withdrawal exclude
    /// each other, so that every grant ends claimed or withdrawn.
    fn settle_grant(
        &self,
        keys: &LockKeys,
        owner: &str,
        hold: &str,
        deadline: Instant,
    ) -> Result<GrantFate>;

    /// How long a waiter sleeps before trying again when nothing wakes it, the holder having
    /// `ttl` left.
    fn pause(&self, ttl: Option<Duration>) -> Duration;

    /// What Redis holds for the lock.
    fn inspect(&self, keys: &LockKeys, deadline: Instant) -> Result<LockState>;

    /// Deletes the lock whoever holds it; whether it was held.
    fn force_release(&self, keys: &LockKeys, deadline: Instant) -> Result<bool>;

    /// The renewer the watchdog's renewal thread uses.
    fn renewer(&self) -> Box<dyn Renewer>;

    /// The waiters of the client, woken by this backend's announcements if it has any.
    fn waiters(&self, thread_name: String) -> Result<Waiters>;
}
