//! [`Latch`]: a count-down latch shared by every client of a name, woken by the store.

use crate::backend::{not_offered, LatchRead, Latches, Place};
use crate::cancel::{sleep_until, Cancel};
use crate::error::{Error, Result};
use crate::lock::core::Core;
use crate::policy::{after, check_lease, MAX_LEASE, RETRY_PAUSE};
use crate::waiters::Watch;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a latch lasts after its last change unless told otherwise: a day.
pub const DEFAULT_LATCH_EXPIRY: Duration = Duration::from_secs(24 * 3600);

/// The longest a waiter goes without reading its latch when nothing wakes it: a backstop for an
/// announcement lost without its connection breaking, not how it is woken.
const LOOK_BACKSTOP: Duration = Duration::from_secs(5);

/// How long after a latch's expiry a waiter reads it again, for it to have lapsed in the store.
const LAPSE_MARGIN: Duration = Duration::from_millis(5);

/// A count-down latch by name, shared by every client of the store: [`Latch::set_count`] gives
/// it a count, [`Latch::count_down`] takes one off, and waiters ([`Latch::wait`],
/// [`Latch::wait_for`], [`Latch::wait_until`]) return once it reaches zero. Waiters are woken by
/// the store (Redis's pub/sub, ZooKeeper's watches, PostgreSQL's `NOTIFY`), not by polling: a
/// waiter reads the latch when it starts, when woken, when the latch would lapse, and every 5 s
/// at most in case an announcement was lost. Cheap to clone.
///
/// ```no_run
/// # fn main() -> redis_lease::Result<()> {
/// # let client = redis_lease::Client::open("redis://127.0.0.1/")?;
/// let loaded = client.latch("nightly/shards-loaded")?;
/// loaded.set_count(3)?; // three loaders, on any hosts
/// // ... each loader, when done:
/// loaded.count_down()?;
/// // ... the report, on another host, waits for all three:
/// if loaded.wait_for(std::time::Duration::from_secs(600))? {
///     // every shard is loaded
/// }
/// # Ok(())
/// # }
/// ```
///
/// **Rounds.** A count is set only while the latch is at zero or absent: a latch that counts is
/// never reset behind its waiters' backs. Each setting starts a round, and a waiter waits for
/// the round it found: it returns when that round reaches zero, even if a new round began
/// before it looked again. A waiter that finds the latch at zero, or absent, returns at once.
///
/// **Expiry.** A latch left behind (its counters gone) does not stay in the store for ever: it
/// lapses [`Latch::expire_after`] (a day by default) after its last change, its count set or
/// counted down, and reads as absent then; once at zero it is kept that long, and at least
/// 10 s, for its waiters to see it open. A waiter whose latch lapses before it reached zero
/// gets [`Error::Gone`]. On ZooKeeper the latch is a node with a TTL, deleted by the ensemble's
/// periodic check (every minute by default) once its expiry passed, and its expiry is the one
/// it was first made with; it needs servers started with
/// `zookeeper.extendedTypesEnabled=true`.
///
/// On one Redis server, Sentinel, Cluster, ZooKeeper and PostgreSQL; refused on RedLock.
#[derive(Clone)]
pub struct Latch {
    core: Arc<Core>,
    place: Arc<dyn Place>,
    expiry: Duration,
    cancel: Option<Cancel>,
}

/// What the store holds for a latch, from [`Latch::inspect`]: for operators and tools.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LatchState {
    /// The latch's name.
    pub name: String,
    /// Whether the store holds the latch (set, and not lapsed).
    pub exists: bool,
    /// Its count (0 for a latch at zero, or absent).
    pub count: u32,
    /// How long until it lapses, where the store tells (not ZooKeeper).
    pub ttl: Option<Duration>,
}

impl Latch {
    pub(crate) fn new(core: Arc<Core>, place: Arc<dyn Place>) -> Latch {
        Latch {
            core,
            place,
            expiry: DEFAULT_LATCH_EXPIRY,
            cancel: None,
        }
    }

    /// The latch's name.
    pub fn name(&self) -> &str {
        &self.place.id().name
    }

    /// The same latch, lapsing `expiry` (1 s to a year) after its last change when it is set
    /// or counted down through this handle (see "Expiry"). An expiry out of range is refused,
    /// not here, so that the settings chain, but by those calls, with
    /// [`Error::InvalidArgument`].
    #[must_use = "this returns a new handle with the setting; the one it is called on is unchanged"]
    pub fn expire_after(&self, expiry: Duration) -> Latch {
        Latch {
            expiry,
            ..self.clone()
        }
    }

    /// The same latch, its waits ended from another thread by `cancel`: a waiting call returns
    /// [`Error::Cancelled`] soon after [`Cancel::cancel`] (within one command timeout).
    #[must_use = "this returns a new handle with the setting; the one it is called on is unchanged"]
    pub fn cancel_on(&self, cancel: &Cancel) -> Latch {
        Latch {
            cancel: Some(cancel.clone()),
            ..self.clone()
        }
    }

    /// The latch calls of its place: offered wherever the latch could be made.
    fn latches(&self) -> Result<&dyn Latches> {
        self.place
            .latches()
            .ok_or_else(|| not_offered(self.place.id().kind, self.core.backend().address()))
    }

    /// The expiry, checked.
    fn expiry(&self) -> Result<Duration> {
        if !(Duration::from_secs(1)..=MAX_LEASE).contains(&self.expiry) {
            return Err(Error::InvalidArgument(format!(
                "a latch's expiry must be from 1s to {} days, not {:?}",
                MAX_LEASE.as_secs() / 86_400,
                self.expiry
            )));
        }
        check_lease("a latch's expiry", self.expiry)
    }

    /// Gives the latch `count` (from 1), starting a new round, if it is at zero or absent:
    /// whether it did (`false`: it counts down a round already, left as it is).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a count of 0 or an expiry out of range;
    /// [`Error::Unavailable`] if the store does not answer in time (the count may have been
    /// set); [`Error::Refused`] if it refuses (on ZooKeeper also an ensemble without TTL
    /// nodes); [`Error::NotReplicated`] where replicas must acknowledge; [`Error::WrongType`]
    /// and [`Error::BadValue`] for a key that holds something else (Redis).
    pub fn set_count(&self, count: u32) -> Result<bool> {
        if count == 0 {
            return Err(Error::InvalidArgument(
                "a latch's count must be from 1; a latch at zero is open already".into(),
            ));
        }
        let expiry = self.expiry()?;
        let round = self.core.ids().next();
        let set = self
            .latches()?
            .set_count(count, &round, expiry, self.core.call_deadline())?;
        log::debug!("latch {:?}: count {count} set: {set}", self.name());
        Ok(set)
    }

    /// Counts the latch down once, if it is above zero: the count left. At zero its waiters
    /// are woken, in every client. Counting down a latch at zero, or absent, does nothing and
    /// returns 0.
    ///
    /// A count-down that gets no answer ([`Error::Unavailable`]) may or may not have been
    /// counted, and one too few replicas acknowledged ([`Error::NotReplicated`]) was counted on
    /// the primary: neither is sent again, and a caller that sends it again may count twice.
    ///
    /// # Errors
    ///
    /// As [`Latch::set_count`] (but a count of 0).
    pub fn count_down(&self) -> Result<u32> {
        let expiry = self.expiry()?;
        let left = self
            .latches()?
            .count_down(expiry, self.core.call_deadline())?;
        if left == 0 {
            // This client's waiters at once.
            self.core.waiters().notify(self.place.wake_key());
        }
        Ok(left)
    }

    /// The latch's count now (0 at zero, or absent).
    ///
    /// # Errors
    ///
    /// [`Error::Unavailable`] if the store does not answer in time, [`Error::Refused`] if it
    /// refuses; [`Error::WrongType`] and [`Error::BadValue`] for a key that holds something
    /// else.
    pub fn count(&self) -> Result<u32> {
        Ok(self.read(false)?.count)
    }

    /// What the store holds for the latch now.
    ///
    /// # Errors
    ///
    /// As [`Latch::count`].
    pub fn inspect(&self) -> Result<LatchState> {
        let read = self.read(false)?;
        Ok(LatchState {
            name: self.name().to_owned(),
            exists: read.round.is_some(),
            count: read.count,
            ttl: read.ttl,
        })
    }

    fn read(&self, watch: bool) -> Result<LatchRead> {
        self.latches()?.read(watch, self.core.call_deadline())
    }

    /// Waits until the latch reaches zero (or is cancelled, with [`Latch::cancel_on`]).
    ///
    /// # Errors
    ///
    /// [`Error::Gone`] if the latch lapsed before it reached zero, [`Error::Cancelled`], and
    /// the errors of [`Latch::count`] from any read (a store unavailable ends the wait: wait
    /// with a deadline to ride out a failover).
    pub fn wait(&self) -> Result<()> {
        self.wait_while(None).map(drop)
    }

    /// Waits up to `wait` for the latch to reach zero: whether it did. Returns within `wait`
    /// plus one command timeout.
    ///
    /// # Errors
    ///
    /// As [`Latch::wait`], except that a read that fails for a reason that may pass
    /// ([`Error::Unavailable`]: a failover, say) is made again every 100 ms until the deadline,
    /// which then ends the wait with that error.
    pub fn wait_for(&self, wait: Duration) -> Result<bool> {
        self.wait_until(after(wait))
    }

    /// Waits until `deadline` for the latch to reach zero: whether it did.
    ///
    /// # Errors
    ///
    /// As [`Latch::wait_for`].
    pub fn wait_until(&self, deadline: Instant) -> Result<bool> {
        self.wait_while(Some(deadline))
    }

    /// The wait, until `deadline` if there is one.
    fn wait_while(&self, deadline: Option<Instant>) -> Result<bool> {
        let core = &self.core;
        let latches = self.latches()?;
        let cancelled = || Error::Cancelled {
            name: self.name().to_owned(),
        };
        let mut watch: Option<Watch> = None;
        let mut round: Option<String> = None;
        let mut look_at = Instant::now();
        loop {
            if self.cancel.as_ref().is_some_and(Cancel::is_cancelled) {
                return Err(cancelled());
            }
            if Instant::now() >= look_at {
                match latches.read(true, core.call_deadline()) {
                    Ok(read) => {
                        // Again just after it would lapse, where the store tells when.
                        let next = read
                            .ttl
                            .map_or(LOOK_BACKSTOP, |ttl| (ttl + LAPSE_MARGIN).min(LOOK_BACKSTOP));
                        if let Some(opened) = opened(&mut round, read, self.name())? {
                            return Ok(opened);
                        }
                        look_at = Instant::now() + next;
                        if watch.is_none() {
                            // Watched once the first read found it counting (the read tells a
                            // Cluster's client where the latch lives), then read again: an
                            // opening between the two is not missed.
                            let confirm_by = deadline
                                .map_or(core.call_deadline(), |end| end.min(core.call_deadline()));
                            watch = Some(core.waiters().watch(self.place.wake_key(), confirm_by));
                            look_at = Instant::now();
                            continue;
                        }
                    }
                    Err(error) => {
                        let retry_at = Instant::now() + RETRY_PAUSE;
                        if !error.is_unavailable() || deadline.is_none_or(|end| retry_at >= end) {
                            return Err(error);
                        }
                        log::debug!("latch {:?}: {error}; reading again", self.name());
                        look_at = retry_at;
                    }
                }
            }
            let now = Instant::now();
            if deadline.is_some_and(|deadline| now >= deadline) {
                return Ok(false);
            }
            let until = deadline.map_or(look_at, |deadline| deadline.min(look_at));
            let woken = match &watch {
                Some(watch) => watch.wait_or_cancel(until, self.cancel.as_ref()),
                None => {
                    // Not watched yet (a first read failed): a pause before the next.
                    sleep_until(self.cancel.as_ref(), until);
                    false
                }
            };
            if woken {
                look_at = Instant::now();
            }
        }
    }
}

/// What a waiter makes of `read`, having found the round `round` counting before (`None`: at
/// its first read): `Some(true)` once that round is over (at zero, or a later round began,
/// which only a round at zero lets), `None` while it counts; the round a first read finds
/// counting goes into `round`. A latch gone before its round reached zero is an error.
fn opened(round: &mut Option<String>, read: LatchRead, name: &str) -> Result<Option<bool>> {
    let Some(now) = read.round else {
        return match round {
            // Never set, or lapsed, before the wait: nothing to wait for.
            None => Ok(Some(true)),
            Some(_) => Err(Error::Gone {
                name: name.to_owned(),
            }),
        };
    };
    match round {
        _ if read.count == 0 => Ok(Some(true)),
        Some(waited) if *waited != now => Ok(Some(true)),
        Some(_) => Ok(None),
        None => {
            *round = Some(now);
            Ok(None)
        }
    }
}

impl std::fmt::Debug for Latch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Latch")
            .field("name", &self.name())
            .field("expiry", &self.expiry)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counting(count: u32, round: &str) -> LatchRead {
        LatchRead {
            round: Some(round.into()),
            count,
            ttl: None,
        }
    }

    #[test]
    fn a_waiter_returns_once_its_round_is_over_and_only_then() {
        let mut round = None;
        assert_eq!(opened(&mut round, counting(2, "a"), "l").ok(), Some(None));
        assert_eq!(round.as_deref(), Some("a"));
        assert_eq!(opened(&mut round, counting(1, "a"), "l").ok(), Some(None));
        assert_eq!(
            opened(&mut round, counting(0, "a"), "l").ok(),
            Some(Some(true))
        );
        // Reset from zero before the waiter looked again: its round is over.
        assert_eq!(
            opened(&mut round, counting(5, "b"), "l").ok(),
            Some(Some(true))
        );
        let gone = opened(&mut round, LatchRead::absent(), "l");
        assert!(matches!(gone, Err(Error::Gone { .. })), "{gone:?}");
    }

    #[test]
    fn a_latch_at_zero_or_absent_at_the_first_read_is_open() {
        let mut round = None;
        assert_eq!(
            opened(&mut round, LatchRead::absent(), "l").ok(),
            Some(Some(true))
        );
        assert_eq!(
            opened(&mut round, counting(0, "a"), "l").ok(),
            Some(Some(true))
        );
        assert_eq!(round, None);
    }
}
