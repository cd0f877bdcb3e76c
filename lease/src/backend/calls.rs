//! What the core and a backend say to each other about one lock: an attempt and what it came
//! to, a release (with the grant it may make) and what it came to, and how a server says who it
//! is. Plain data, in no store's terms.

use crate::error::Result;
use std::time::{Duration, Instant};

/// One acquisition attempt, as the lock asks a place to make it.
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
    /// Fencing tokens to reserve for this client's threads to hand on (a backend that cannot
    /// answers as if not asked).
    pub(crate) reserve: Option<ReserveFor<'a>>,
}

/// Fencing tokens to reserve for a hold of this client, which its threads hand on without the
/// store (`lock/baton.rs`): `count` past the new hold's own if the attempt takes the lock, or
/// `count` for `holder`, a hold of this client, should the attempt find it holding the lock.
/// `watching`: whether the asking client watches the lock (its own watcher is then among the
/// store's count of them).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReserveFor<'a> {
    pub(crate) holder: Option<&'a str>,
    pub(crate) count: u32,
    pub(crate) watching: bool,
}

/// Fencing tokens the store reserved for a hold of this client: `first..=last`, none of which
/// any other hold is ever handed; `rivals`, what the store saw of other clients' waiters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reserved {
    pub(crate) first: u64,
    pub(crate) last: u64,
    pub(crate) rivals: Rivals,
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
        /// Tokens reserved past a new hold's own, as the attempt asked.
        reserved: Option<Reserved>,
    },
    /// Busy: another hold holds it, for about `ttl` (`None`: unknown).
    Busy { ttl: Option<Duration> },
    /// Busy, held by the hold the attempt named to reserve tokens for (for about `ttl`), and
    /// these tokens reserved for it.
    Reserved {
        ttl: Option<Duration>,
        reserved: Reserved,
    },
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
    /// How many tokens to reserve past the granted hold's own, for this client to hand on (a
    /// backend that cannot reserves none).
    pub(crate) reserve: u32,
}

/// One acquisition to release.
pub(crate) struct Release<'a> {
    pub(crate) owner: &'a str,
    pub(crate) hold: &'a str,
    pub(crate) id: &'a str,
    pub(crate) grant: Option<Grant<'a>>,
}

/// What a release came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Released {
    /// Applied; `holds_left` acquisitions of the hold are left (0: the lock was freed).
    Applied { holds_left: u64 },
    /// Applied to the last acquisition, and the lock granted to the grant's owner, with this
    /// token where the backend has tokens (and the tokens reserved past it, as the grant
    /// asked); `rivals`: what the backend saw of other clients' waiters.
    Granted {
        token: Option<u64>,
        rivals: Rivals,
        reserved: Option<Reserved>,
    },
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

/// The hold that leads an election now, as the store holds it: its token (the term), what its
/// leader proclaimed (`None` until its first proclamation lands), and how long its lease has
/// left where the store can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Leading {
    pub(crate) term: u64,
    pub(crate) value: Option<String>,
    pub(crate) ttl: Option<Duration>,
}

/// A release and whether every server it went to answered. An unsettled release is sent again
/// before the same owner acquires the same lock again.
pub(crate) struct ReleaseOutcome {
    pub(crate) released: Result<Released>,
    pub(crate) settled: bool,
}

/// How the client stopped vouching for a hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HoldEnd {
    /// Its holder was told it is lost (a fixed lease run out, a `max_hold` reached, a lease not
    /// confirmed in time, the store saying it is gone): its lease lapsed already.
    Lost,
    /// One acquisition of it was abandoned by its guard: unless re-entered, the hold lapses at
    /// `lapses_at`, its local deadline.
    Abandoned { lapses_at: Instant },
}

/// What a server says it is, to tell whether two addresses reach one server: its own id where
/// it has one (a server's run id), and the address its socket reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerIdentity {
    pub(crate) run_id: Option<String>,
    pub(crate) peer: Option<String>,
}

impl ServerIdentity {
    /// Whether both identities are of one server.
    pub(crate) fn same_server(&self, other: &ServerIdentity) -> bool {
        let same = |a: &Option<String>, b: &Option<String>| a.is_some() && a == b;
        same(&self.run_id, &other.run_id) || same(&self.peer, &other.peer)
    }
}

/// A count-down latch as the store holds it: absent (never set, or lapsed), or its count and
/// the round it counts down, and how long until it lapses where the store can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LatchRead {
    /// `None` while the latch is absent.
    pub(crate) round: Option<String>,
    pub(crate) count: u32,
    pub(crate) ttl: Option<Duration>,
}

impl LatchRead {
    /// An absent latch.
    pub(crate) fn absent() -> LatchRead {
        LatchRead {
            round: None,
            count: 0,
            ttl: None,
        }
    }

    /// A latch's count and round, from the text a store keeps them in (`<count> <round>`); an
    /// error naming `key` for text of another shape.
    pub(crate) fn parse(text: &str, key: &str, ttl: Option<Duration>) -> Result<LatchRead> {
        let (count, round) = text
            .split_once(' ')
            .and_then(|(count, round)| Some((count.parse().ok()?, round)))
            .filter(|(_, round)| !round.is_empty())
            .ok_or_else(|| crate::error::Error::BadValue {
                key: key.to_owned(),
                detail: "it is not a latch's count and round".into(),
            })?;
        Ok(LatchRead {
            round: Some(round.to_owned()),
            count,
            ttl,
        })
    }
}
