//! The local queue: per lock name, one thread of this client contends in Redis at a time; the
//! others wait here, in FIFO order, without sending anything to Redis. Past `max_waiters`, a
//! caller is refused at once.
//!
//! While the contender sleeps it leaves an [`Offer`]: a thread of this client that releases the
//! lock may *claim* it and have the release script grant the lock straight to the contender's
//! owner, saving the contender a round trip. The offer's states:
//!
//! ```text
//! Closed --open()--> Open --claim()--> Claimed --granted()--> Granted { token, sent_at }
//!    ^                 |                  |------declined()--> Open
//!    |                 |                  +------unknown()---> Unknown (the contender checks Redis)
//!    +----close()------+-- from any state, by the contender, which learns what it was
//! ```
//!
//! Only the contender opens and closes it, and it closes it before every attempt of its own, so a
//! grant never races the contender's own acquisition. While other clients watch the lock, at most
//! [`MAX_GRANTS_IN_A_ROW`] grants follow one another; then a release frees the lock for everyone.

use parking_lot::{Condvar, Mutex};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Consecutive grants within one client before a release frees the lock for other clients.
const MAX_GRANTS_IN_A_ROW: u32 = 32;
/// After such a release, how long this client's contender holds back, so that waiters of other
/// clients (who hear of the release later, by pub/sub) may take the lock first.
const YIELD: Duration = Duration::from_millis(1);

/// Where a contender's offer stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OfferState {
    /// The contender is trying by itself: not grantable.
    Closed,
    /// The contender sleeps: a releaser may claim it.
    Open,
    /// A releaser is running the release script with a grant for it.
    Claimed,
    /// The lock was granted to the contender's owner (as the offer's hold) with this fencing
    /// token where there are tokens, by a release sent at `sent_at` (on the watchdog's clock):
    /// the grant's lease runs from no earlier than that.
    Granted {
        token: Option<u64>,
        sent_at: Instant,
    },
    /// A release with a grant for it failed or was retried: Redis knows whether it holds.
    Unknown,
}

/// A sleeping contender's readiness to be granted the lock.
pub(crate) struct Offer {
    pub(crate) owner: String,
    /// The id of the hold a grant makes (the contender's acquisition).
    pub(crate) hold: Arc<str>,
    pub(crate) lease: Duration,
    state: Mutex<OfferState>,
    /// When the offer last went from closed to open: no grant can have been sent before.
    opened_at: Mutex<Option<Instant>>,
    resolved: Condvar,
}

impl Offer {
    fn set(&self, state: OfferState) {
        *self.state.lock() = state;
        self.resolved.notify_all();
    }

    /// Makes the offer grantable (the contender is going to sleep); `now` is read on the
    /// watchdog's clock.
    pub(crate) fn open(&self, now: Instant) {
        let mut state = self.state.lock();
        if *state == OfferState::Closed {
            *state = OfferState::Open;
            *self.opened_at.lock() = Some(now);
        }
    }

    /// When the offer was last opened: a lower bound for when any grant to it was sent.
    pub(crate) fn opened_at(&self) -> Option<Instant> {
        *self.opened_at.lock()
    }

    /// Withdraws the offer before the contender acts by itself, and tells what became of it; the
    /// offer is closed afterwards whatever it was. A claim in progress is waited for, at most
    /// `limit`; if it does not resolve, the answer is [`OfferState::Unknown`].
    pub(crate) fn close(&self, limit: Duration) -> OfferState {
        let deadline = Instant::now() + limit;
        let mut state = self.state.lock();
        let mut seen = *state;
        while seen == OfferState::Claimed {
            if self.resolved.wait_until(&mut state, deadline).timed_out() {
                seen = OfferState::Unknown;
                break;
            }
            seen = *state;
        }
        *state = OfferState::Closed;
        seen
    }
}

/// What a releasing thread of this client does at the last hold.
pub(crate) enum Claiming<'a> {
    /// Grant the lock to this client's sleeping contender.
    Grant(Claim<'a>),
    /// Free the lock, and wake this client's waiters at once.
    Free,
    /// Free the lock, and let this client's waiters learn of it from Redis like everyone else's.
    FreeForOthers,
}

/// A releaser's hold on an open offer; resolve it with `granted`, `declined` or `unknown`.
/// Dropped unresolved, it counts as unknown.
pub(crate) struct Claim<'a> {
    queues: &'a LocalQueues,
    name: String,
    offer: Arc<Offer>,
    resolved: bool,
}

impl Claim<'_> {
    pub(crate) fn offer(&self) -> &Offer {
        &self.offer
    }

    /// The grant went through. `others_waiting`: connections besides this client's watch the
    /// lock; only then do grants count toward the run after which the lock is freed for them.
    pub(crate) fn granted(mut self, token: Option<u64>, sent_at: Instant, others_waiting: bool) {
        self.resolved = true;
        if let Some(queue) = self.queues.queues.lock().get_mut(&self.name) {
            queue.granted_in_a_row = if others_waiting {
                queue.granted_in_a_row + 1
            } else {
                0
            };
        }
        self.offer.set(OfferState::Granted { token, sent_at });
    }

    pub(crate) fn declined(mut self) {
        self.resolved = true;
        self.offer.set(OfferState::Open);
    }

    pub(crate) fn unknown(mut self) {
        self.resolved = true;
        self.offer.set(OfferState::Unknown);
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if !self.resolved {
            self.offer.set(OfferState::Unknown);
        }
    }
}

/// Why a turn was not given.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// `max_waiters` threads wait already.
    Full { waiting: usize },
    /// The deadline passed while waiting (or had passed, and another thread has the turn).
    TimedOut,
}

#[derive(Default)]
struct Ticket {
    ready: Mutex<bool>,
    given: Condvar,
}

#[derive(Default)]
struct Queue {
    busy: bool,
    waiting: VecDeque<Arc<Ticket>>,
    /// The contender's offer, while it has one.
    offer: Option<Arc<Offer>>,
    granted_in_a_row: u32,
    /// A thread of this client took the lock and has not freed it yet (as far as this client
    /// knows: the lease may have lapsed since). The entry lives while this is so, so that the
    /// run of grants is counted across turns.
    held_here: bool,
    /// This client's contender does not try before then (see [`YIELD`]).
    yield_until: Option<Instant>,
}

pub(crate) struct LocalQueues {
    queues: Mutex<HashMap<String, Queue>>,
    max_waiters: usize,
}

impl LocalQueues {
    pub(crate) fn new(max_waiters: usize) -> Self {
        LocalQueues {
            queues: Mutex::new(HashMap::new()),
            max_waiters,
        }
    }

    /// Waits for this thread's turn to contend for `name`, until `deadline` (`None`: no limit).
    pub(crate) fn enter(&self, name: &str, deadline: Option<Instant>) -> Result<Turn<'_>, Refused> {
        let ticket = {
            let mut queues = self.queues.lock();
            let queue = queues.entry(name.to_owned()).or_default();
            if !queue.busy {
                queue.busy = true;
                return Ok(self.turn(name));
            }
            if deadline.is_some_and(|deadline| deadline <= Instant::now()) {
                return Err(Refused::TimedOut);
            }
            if queue.waiting.len() >= self.max_waiters {
                return Err(Refused::Full {
                    waiting: queue.waiting.len(),
                });
            }
            let ticket = Arc::new(Ticket::default());
            queue.waiting.push_back(Arc::clone(&ticket));
            ticket
        };
        let mut ready = ticket.ready.lock();
        while !*ready {
            match deadline {
                Some(deadline) => {
                    if ticket.given.wait_until(&mut ready, deadline).timed_out() && !*ready {
                        break;
                    }
                }
                None => ticket.given.wait(&mut ready),
            }
        }
        if *ready {
            return Ok(self.turn(name));
        }
        drop(ready);
        // Timed out: leave the queue, unless the turn arrived meanwhile; then pass it on.
        let mut queues = self.queues.lock();
        let still_queued = queues.get_mut(name).is_some_and(|queue| {
            let before = queue.waiting.len();
            queue
                .waiting
                .retain(|waiting| !Arc::ptr_eq(waiting, &ticket));
            queue.waiting.len() < before
        });
        drop(queues);
        if !still_queued {
            drop(self.turn(name));
        }
        Err(Refused::TimedOut)
    }

    fn turn(&self, name: &str) -> Turn<'_> {
        Turn {
            queues: self,
            name: name.to_owned(),
        }
    }

    /// Records whether a thread of this client holds `name` now.
    pub(crate) fn set_held_here(&self, name: &str, held: bool) {
        let mut queues = self.queues.lock();
        if held {
            queues.entry(name.to_owned()).or_default().held_here = true;
        } else if let Some(queue) = queues.get_mut(name) {
            queue.held_here = false;
            if !queue.busy && queue.waiting.is_empty() {
                queues.remove(name);
            }
        }
    }

    /// Until when this client's contender should let other clients try first, if it should.
    pub(crate) fn yield_until(&self, name: &str) -> Option<Instant> {
        let until = self.queues.lock().get(name)?.yield_until?;
        (until > Instant::now()).then_some(until)
    }

    /// What a release of `name` should do about this client's waiters: grant the lock to the
    /// sleeping contender, or free it (after a run of grants, without waking this client's
    /// waiters first, so that other clients get an equal chance).
    pub(crate) fn claim(&self, name: &str) -> Claiming<'_> {
        let mut queues = self.queues.lock();
        let Some(queue) = queues.get_mut(name) else {
            return Claiming::Free;
        };
        let Some(offer) = queue.offer.clone() else {
            return Claiming::Free;
        };
        if queue.granted_in_a_row >= MAX_GRANTS_IN_A_ROW {
            queue.granted_in_a_row = 0;
            queue.yield_until = Some(Instant::now() + YIELD);
            return Claiming::FreeForOthers;
        }
        let mut state = offer.state.lock();
        if *state != OfferState::Open {
            return Claiming::Free;
        }
        *state = OfferState::Claimed;
        drop(state);
        Claiming::Grant(Claim {
            queues: self,
            name: name.to_owned(),
            offer,
            resolved: false,
        })
    }

    fn pass_on(&self, name: &str) {
        let mut queues = self.queues.lock();
        let Some(queue) = queues.get_mut(name) else {
            return;
        };
        queue.offer = None;
        match queue.waiting.pop_front() {
            Some(next) => {
                *next.ready.lock() = true;
                next.given.notify_one();
            }
            None => {
                queue.busy = false;
                // Kept while a thread of this client holds the lock: the run of grants and
                // what this client knows of the lock live here.
                if !queue.held_here {
                    queues.remove(name);
                }
            }
        }
    }

    /// Threads waiting for `name` behind the current contender.
    #[cfg(test)]
    fn waiting(&self, name: &str) -> usize {
        self.queues
            .lock()
            .get(name)
            .map_or(0, |queue| queue.waiting.len())
    }
}

/// The right to contend for one lock name in Redis; passed to the next waiter on drop.
pub(crate) struct Turn<'a> {
    queues: &'a LocalQueues,
    name: String,
}

impl Turn<'_> {
    /// Leaves an offer (closed) for releasers of this client.
    pub(crate) fn offer(&self, owner: String, hold: Arc<str>, lease: Duration) -> Arc<Offer> {
        let offer = Arc::new(Offer {
            owner,
            hold,
            lease,
            state: Mutex::new(OfferState::Closed),
            opened_at: Mutex::new(None),
            resolved: Condvar::new(),
        });
        if let Some(queue) = self.queues.queues.lock().get_mut(&self.name) {
            queue.offer = Some(Arc::clone(&offer));
        }
        offer
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.queues.pass_on(&self.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::thread;
    use std::time::Duration;

    #[test]
    fn turns_pass_in_fifo_order() {
        let queues = Arc::new(LocalQueues::new(10));
        let first = queues.enter("a", None).expect("free");
        let (done, order) = mpsc::channel();
        let mut threads = Vec::new();
        for n in 0..3 {
            let (shared, done) = (queues.clone(), done.clone());
            threads.push(thread::spawn(move || {
                let turn = shared.enter("a", None).expect("waits its turn");
                done.send(n).expect("test alive");
                drop(turn);
            }));
            while queues.waiting("a") < n + 1 {
                thread::yield_now();
            }
        }
        drop(first);
        let got: Vec<usize> = (0..3)
            .map(|_| order.recv_timeout(Duration::from_secs(10)).expect("ran"))
            .collect();
        assert_eq!(got, vec![0, 1, 2]);
        for thread in threads {
            thread.join().expect("no panic");
        }
        assert!(
            queues.enter("a", Some(Instant::now())).is_ok(),
            "free again"
        );
    }

    #[test]
    fn full_queue_refuses_at_once_and_timeouts_leave_the_queue() {
        let queues = LocalQueues::new(0);
        let _first = queues.enter("a", None).expect("free");
        assert_eq!(
            queues.enter("a", None).err(),
            Some(Refused::Full { waiting: 0 })
        );
        let queues = LocalQueues::new(5);
        let first = queues.enter("a", None).expect("free");
        let soon = Instant::now() + Duration::from_millis(20);
        assert_eq!(queues.enter("a", Some(soon)).err(), Some(Refused::TimedOut));
        assert_eq!(queues.waiting("a"), 0);
        drop(first);
        assert!(
            queues.enter("b", Some(Instant::now())).is_ok(),
            "other names are separate"
        );
    }
}
