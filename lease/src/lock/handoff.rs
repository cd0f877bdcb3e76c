//! The grant hand-off: a release by a thread of this client hands the lock straight to this
//! client's contender sleeping for it, saving the contender a round trip. This file owns the
//! contender's [`Offer`], a releaser's [`Claim`] on it, and the one fairness rule (when a run of
//! grants ends and a release frees the lock for every client instead).
//!
//! While the contender sleeps it leaves an offer; a releaser may *claim* it and either hand it
//! the hold itself without the store (a pass: `baton.rs`), or have the release in the store grant the
//! lock to the contender's owner. The offer's states:
//!
//! ```text
//! Closed --open()--> Open --claim()--> Claimed --passed---> Passed (the hold, in memory)
//!    ^                 |                  |------granted--> Granted { token, sent_at }
//!    |                 |                  |------declined-> Open
//!    |                 |                  +------unknown--> Unknown (the contender asks the store)
//!    +----close()------+-- from any state, by the contender, which learns what it was
//! ```
//!
//! Only the contender opens and closes it, and it closes it before every attempt of its own, so a
//! grant never races the contender's own acquisition. Fairness is decided here alone, from what
//! the backend reports at each grant ([`Rivals`]): while waiters of other clients may be waiting,
//! at most [`MAX_GRANTS_IN_A_ROW`] grants follow one another; then a release frees the lock for
//! everyone, and this client's contender holds back for [`YIELD`].

use super::baton::Passed;
use crate::backend::{Grant, GrantFate, Place, Released, Reserved, Rivals};
use crate::error::Result;
use crate::sync::{Condvar, Mutex};
use crate::watchdog;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Consecutive grants within one client before a release frees the lock for other clients.
const MAX_GRANTS_IN_A_ROW: u32 = 32;
/// After such a release, how long this client's contender holds back, so that waiters of other
/// clients (who hear of the release later, by the store's announcements) may take the lock first.
const YIELD: Duration = Duration::from_millis(1);

/// Where a contender's offer stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OfferState {
    /// The contender is trying by itself: not grantable.
    Closed,
    /// The contender sleeps: a releaser may claim it.
    Open,
    /// A releaser is running a release with a grant for it.
    Claimed,
    /// The lock was granted to the contender's owner (as the offer's hold) with this fencing
    /// token where there are tokens, by a release sent at `sent_at` (on the watchdog's clock):
    /// the grant's lease runs from no earlier than that; with the tokens reserved past it.
    Granted {
        token: Option<u64>,
        sent_at: Instant,
        reserved: Option<Reserved>,
    },
    /// A release with a grant for it failed or was retried: the store knows whether it holds.
    Unknown,
    /// A releaser handed the contender its hold without the store (kept in `passed`).
    Passed,
}

/// The offer's state and when it was last opened, under one mutex.
struct OfferInner {
    state: OfferState,
    /// When the offer last went from closed to open: no grant can have been sent before.
    opened_at: Option<Instant>,
    /// The hold handed on, from `Passed` until the contender takes it.
    passed: Option<Passed>,
}

/// What the contender waits for the lock as: the acquisition's owner, lease and `max_hold`.
pub(crate) struct Taker {
    pub(crate) owner: String,
    pub(crate) lease: Duration,
    /// Whether the lease is the renewed one (not a fixed lease).
    pub(crate) renewed: bool,
    pub(crate) max_hold: Option<Duration>,
}

/// A sleeping contender's readiness to be granted the lock.
pub(crate) struct Offer {
    taker: Taker,
    /// The id of the hold a grant makes (the contender's acquisition).
    hold: Arc<str>,
    inner: Mutex<OfferInner>,
    resolved: Condvar,
}

/// A grant the contender takes: the acquisition it holds it under, its hold's fencing token
/// where there are tokens, and when the release that made it was sent (its lease runs from no
/// earlier); or the hold a releaser handed it without the store.
pub(crate) enum Taken {
    Granted {
        id: String,
        token: Option<u64>,
        sent_at: Instant,
        reserved: Option<Reserved>,
    },
    Passed(Passed),
}

impl Offer {
    /// A closed offer to grant the lock to `taker` as the new hold `hold`.
    pub(crate) fn new(taker: Taker, hold: Arc<str>) -> Arc<Offer> {
        Arc::new(Offer {
            taker,
            hold,
            inner: Mutex::new(OfferInner {
                state: OfferState::Closed,
                opened_at: None,
                passed: None,
            }),
            resolved: Condvar::new(),
        })
    }

    /// The id of the hold a grant makes.
    pub(crate) fn hold(&self) -> &Arc<str> {
        &self.hold
    }

    fn set(&self, state: OfferState) {
        self.inner.lock().state = state;
        self.resolved.notify_all();
    }

    /// Makes the offer grantable (the contender is going to sleep); `now` is read on the
    /// watchdog's clock.
    pub(crate) fn open(&self, now: Instant) {
        let mut inner = self.inner.lock();
        if inner.state == OfferState::Closed {
            inner.state = OfferState::Open;
            inner.opened_at = Some(now);
        }
    }

    /// Withdraws the offer before the contender acts by itself, and tells what became of it
    /// (with the hold, if one was passed); the offer is closed afterwards whatever it was. A
    /// claim in progress is waited for, at most `limit`; if it does not resolve, the answer is
    /// [`OfferState::Unknown`].
    fn close(&self, limit: Duration) -> (OfferState, Option<Instant>, Option<Passed>) {
        let deadline = Instant::now() + limit;
        let mut inner = self.inner.lock();
        let mut seen = inner.state;
        while seen == OfferState::Claimed {
            if self.resolved.wait_until(&mut inner, deadline).timed_out() {
                seen = OfferState::Unknown;
                break;
            }
            seen = inner.state;
        }
        inner.state = OfferState::Closed;
        (seen, inner.opened_at, inner.passed.take())
    }

    /// Closes the offer before the contender acts by itself, and returns the grant if a releaser
    /// of this client granted it the lock meanwhile; a grant of unknown outcome is settled with
    /// `place` first (its calls bounded by `call_timeout`): claimed if it stands, else withdrawn.
    /// `now` reads the watchdog's clock.
    pub(crate) fn settle(
        &self,
        place: &dyn Place,
        call_timeout: Duration,
        now: Instant,
        deadline: Instant,
    ) -> Result<Option<Taken>> {
        let (state, opened_at, passed) = self.close(call_timeout * 4);
        if let Some(passed) = passed {
            return Ok(Some(Taken::Passed(passed)));
        }
        match state {
            OfferState::Granted {
                token,
                sent_at,
                reserved,
            } => Ok(Some(Taken::Granted {
                id: self.hold.to_string(),
                token,
                sent_at,
                reserved,
            })),
            OfferState::Unknown => {
                let sent_at = opened_at.unwrap_or(now);
                let fate = match place.grants() {
                    Some(grants) => grants.settle_grant(&self.taker.owner, &self.hold, deadline)?,
                    // No grant is made where none is offered.
                    None => GrantFate::Withdrawn,
                };
                Ok(match fate {
                    // Tokens it may have reserved are not known: none are handed on.
                    GrantFate::Granted { token, id } => Some(Taken::Granted {
                        id,
                        token,
                        sent_at,
                        reserved: None,
                    }),
                    GrantFate::Withdrawn => None,
                })
            }
            OfferState::Closed | OfferState::Open | OfferState::Claimed | OfferState::Passed => {
                Ok(None)
            }
        }
    }
}

/// The hand-off's state for one lock name, kept in the client's registry: the contender's offer
/// while it has one, and the run of grants.
#[derive(Default)]
pub(crate) struct Lane {
    offer: Option<Arc<Offer>>,
    granted_in_a_row: u32,
    /// This client's contender does not try before then (see [`YIELD`]).
    yield_until: Option<Instant>,
}

/// What a releasing thread of this client does at the last hold.
pub(crate) enum Claiming {
    /// Grant the lock to this client's sleeping contender.
    Grant(Claim),
    /// Free the lock, and wake this client's waiters at once.
    Free,
    /// A thread of this client contends but does not sleep on an offer yet: keep a hold that
    /// may be handed on here for it (`baton.rs`); free any other, and wake it.
    Keep,
    /// Free the lock, and let this client's waiters learn of it from the store like everyone else's.
    FreeForOthers,
}

impl Lane {
    /// The contender's offer, until its contention is over.
    pub(crate) fn offered(&mut self, offer: Arc<Offer>) {
        self.offer = Some(offer);
    }

    /// The contention that left `offer` is over.
    pub(crate) fn withdrawn(&mut self, offer: &Arc<Offer>) {
        if self
            .offer
            .as_ref()
            .is_some_and(|ours| Arc::ptr_eq(ours, offer))
        {
            self.offer = None;
        }
    }

    /// Until when this client's contender should let other clients try first, if it should.
    pub(crate) fn yield_until(&self) -> Option<Instant> {
        let until = self.yield_until?;
        (until > Instant::now()).then_some(until)
    }

    /// What a release should do about this client's waiters, `contended` if a thread of this
    /// client is in the lock's local queue: grant the lock to the sleeping contender, keep it
    /// for one on its way, or free it (after a run of grants, without waking this client's
    /// waiters first, so that other clients get an equal chance).
    pub(crate) fn claim(&mut self, contended: bool) -> Claiming {
        if !contended {
            return Claiming::Free;
        }
        if self.granted_in_a_row >= MAX_GRANTS_IN_A_ROW {
            self.granted_in_a_row = 0;
            self.yield_until = Some(Instant::now() + YIELD);
            return Claiming::FreeForOthers;
        }
        let Some(offer) = self.offer.clone() else {
            return Claiming::Keep;
        };
        let mut inner = offer.inner.lock();
        if inner.state != OfferState::Open {
            return Claiming::Keep;
        }
        inner.state = OfferState::Claimed;
        drop(inner);
        Claiming::Grant(Claim {
            offer,
            resolved: false,
        })
    }

    /// A grant went through, the backend reporting `rivals`. The fairness rule: only grants
    /// while other clients' waiters may be waiting (subscribed, or polling where the backend
    /// cannot tell) count toward the run after which the lock is freed for them.
    pub(crate) fn granted(&mut self, rivals: Rivals) {
        self.granted_in_a_row = match rivals {
            Rivals::Subscribed | Rivals::Unknown => self.granted_in_a_row + 1,
            Rivals::None => 0,
        };
    }
}

/// A releaser's hold on an open offer; resolve it with [`Claim::resolve`]. Dropped unresolved,
/// it counts as unknown.
pub(crate) struct Claim {
    offer: Arc<Offer>,
    resolved: bool,
}

impl Claim {
    /// Who the claimed offer's contender waits as.
    pub(crate) fn taker(&self) -> &Taker {
        &self.offer.taker
    }

    /// Hands the contender a hold without the store.
    pub(crate) fn pass(mut self, passed: Passed) {
        self.resolved = true;
        let mut inner = self.offer.inner.lock();
        inner.passed = Some(passed);
        inner.state = OfferState::Passed;
        drop(inner);
        self.offer.resolved.notify_all();
    }

    /// The grant to ask of the backend, for a release sent at `sent_at`, with `reserve` tokens
    /// past the granted hold's own for this client to hand on; `now` reads the watchdog's
    /// clock.
    pub(crate) fn grant<'a>(
        &'a self,
        sent_at: Instant,
        now: &'a (dyn Fn() -> Instant + Sync),
        reserve: u32,
    ) -> Grant<'a> {
        let offer = &self.offer;
        Grant {
            owner: &offer.taker.owner,
            hold: &offer.hold,
            lease: offer.taker.lease,
            valid_until: watchdog::valid_until(sent_at, offer.taker.lease),
            now,
            reserve,
        }
    }

    /// Tells the contender what the release sent at `sent_at` came to; the backend's report of
    /// rivals if the grant went through.
    pub(crate) fn resolve(
        mut self,
        released: &Result<Released>,
        settled: bool,
        sent_at: Instant,
    ) -> Option<Rivals> {
        self.resolved = true;
        match (released, settled) {
            (
                Ok(Released::Granted {
                    token,
                    rivals,
                    reserved,
                }),
                _,
            ) => {
                self.offer.set(OfferState::Granted {
                    token: *token,
                    sent_at,
                    reserved: *reserved,
                });
                Some(*rivals)
            }
            (Ok(Released::Applied { .. } | Released::NotOwner), true) => {
                self.offer.set(OfferState::Open);
                None
            }
            // No answer from everyone: whether the grant went through is for the store to say.
            _ => {
                self.offer.set(OfferState::Unknown);
                None
            }
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.resolved {
            self.offer.set(OfferState::Unknown);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lane whose contender sleeps with an open offer.
    pub(super) fn lane_with_open_offer() -> (Lane, Arc<Offer>) {
        let taker = Taker {
            owner: "owner".into(),
            lease: Duration::from_secs(1),
            renewed: true,
            max_hold: None,
        };
        let offer = Offer::new(taker, Arc::from("hold"));
        offer.open(Instant::now());
        let mut lane = Lane::default();
        lane.offered(Arc::clone(&offer));
        (lane, offer)
    }

    fn grant_once(lane: &mut Lane, offer: &Offer, rivals: Rivals) -> bool {
        let Claiming::Grant(claim) = lane.claim(true) else {
            return false;
        };
        let released = Ok(Released::Granted {
            token: Some(1),
            rivals,
            reserved: None,
        });
        if let Some(rivals) = claim.resolve(&released, true, Instant::now()) {
            lane.granted(rivals);
        }
        offer.close(Duration::ZERO);
        offer.open(Instant::now());
        true
    }

    #[test]
    fn a_run_of_grants_seen_by_rivals_ends_with_a_release_for_everyone() {
        for rivals in [Rivals::Subscribed, Rivals::Unknown] {
            let (mut lane, offer) = lane_with_open_offer();
            for _ in 0..MAX_GRANTS_IN_A_ROW {
                assert!(grant_once(&mut lane, &offer, rivals));
            }
            assert!(matches!(lane.claim(true), Claiming::FreeForOthers));
            assert!(lane.yield_until().is_some(), "the contender holds back");
            assert!(grant_once(&mut lane, &offer, rivals), "a new run starts");
        }
    }

    #[test]
    fn grants_no_rival_waits_for_never_end_a_run() {
        let (mut lane, offer) = lane_with_open_offer();
        for _ in 0..MAX_GRANTS_IN_A_ROW * 2 {
            assert!(grant_once(&mut lane, &offer, Rivals::None));
        }
    }

    #[test]
    fn a_claim_dropped_unresolved_leaves_the_grant_for_the_store_to_tell() {
        let (mut lane, offer) = lane_with_open_offer();
        let Claiming::Grant(claim) = lane.claim(true) else {
            panic!("the offer is open");
        };
        assert!(matches!(lane.claim(true), Claiming::Keep), "claimed once");
        drop(claim);
        assert_eq!(offer.close(Duration::ZERO).0, OfferState::Unknown);
    }
}

/// The grant hand-off under every interleaving `shuttle` tries (`RUSTFLAGS="--cfg shuttle" cargo
/// test -p redis-lease --lib interleavings`, as `scripts/test` runs it).
#[cfg(all(shuttle, test))]
mod interleavings {
    use super::*;
    use crate::backend::Released;
    use shuttle::rand::{thread_rng, RngCore};
    use shuttle::sync::atomic::{AtomicBool, Ordering};

    /// A releaser claims the sleeping contender's offer and grants it the lock, or is refused,
    /// or gets no answer, while the contender closes its offer to try by itself (its wait for a
    /// claim in progress ending at the checker's choice). The contender never misses a grant
    /// that went through (it sees it, or learns that it must ask the store), and never sees one
    /// that was not made.
    fn a_grant_is_never_missed_nor_made_up() {
        let (lane, offer) = super::tests::lane_with_open_offer();
        let lane = Arc::new(Mutex::new(lane));
        let granted = Arc::new(AtomicBool::new(false));
        let releaser = {
            let (lane, granted) = (Arc::clone(&lane), Arc::clone(&granted));
            shuttle::thread::spawn(move || {
                let Claiming::Grant(claim) = lane.lock().claim(true) else {
                    return;
                };
                shuttle::thread::yield_now();
                let now = Instant::now();
                match thread_rng().next_u32() % 3 {
                    0 => {
                        granted.store(true, Ordering::SeqCst);
                        let released = Ok(Released::Granted {
                            token: Some(1),
                            rivals: Rivals::None,
                            reserved: None,
                        });
                        claim.resolve(&released, true, now);
                    }
                    1 => {
                        claim.resolve(&Ok(Released::NotOwner), true, now);
                    }
                    // No answer: what became of the grant is for the store to say.
                    _ => drop(claim),
                }
            })
        };
        let (seen, _, _) = offer.close(Duration::from_secs(1));
        releaser.join().expect("no panic");
        let granted = granted.load(Ordering::SeqCst);
        match seen {
            OfferState::Granted { .. } => assert!(granted, "a grant made up"),
            OfferState::Unknown => {}
            other => assert!(!granted, "a grant missed: the contender saw {other:?}"),
        }
    }

    #[test]
    fn a_grant_is_never_missed_nor_made_up_under_any_interleaving() {
        hashwheel::checks::explore(a_grant_is_never_missed_nor_made_up, 20_000);
    }
}
