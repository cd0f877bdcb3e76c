//! [`RedLock`]: one name over a set of [`Masters`]: attempts, waiting, local grants, release.

use super::fanout::{self, Answer, Master};
use super::{Masters, RedLockGuard};
use crate::error::{Error, Result};
use crate::keys::LockKeys;
use crate::local_queue::{Claiming, Offer, OfferState, Refused};
use crate::owner;
use crate::policy::{after, LeaseKind, Wait};
use crate::scripts::{self, Acquire, Grant, Release};
use crate::watchdog::{Hold, Watchdog};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One RedLock name over a set of [`Masters`]. Cheap to clone. Reentrant per thread on every
/// master, as [`Lock`](crate::Lock) is. No fencing token: no single counter exists across
/// independent masters.
#[derive(Clone)]
pub struct RedLock {
    pub(super) masters: Masters,
    pub(super) keys: Arc<LockKeys>,
}

impl RedLock {
    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.keys.name
    }

    /// The owner id the calling thread acts as.
    pub fn owner(&self) -> String {
        format!("{}:{}", self.masters.inner.id, owner::thread_id())
    }

    /// Takes the lock with the default lease, renewed while held, waiting as long as it takes.
    pub fn lock(&self) -> Result<RedLockGuard> {
        self.acquire(LeaseKind::Renewed, Wait::Until(None))?
            .ok_or_else(|| Error::Protocol("a waiting acquisition returned nothing".into()))
    }

    /// Takes the lock with the given lease, never renewed, waiting as long as it takes.
    pub fn lock_with_lease(&self, lease: Duration) -> Result<RedLockGuard> {
        self.acquire(LeaseKind::Fixed(lease), Wait::Until(None))?
            .ok_or_else(|| Error::Protocol("a waiting acquisition returned nothing".into()))
    }

    /// One attempt with the default lease (renewed while held): `Ok(None)` if no quorum granted
    /// it. [`Error::Unavailable`] if no master answered at all.
    pub fn try_lock(&self) -> Result<Option<RedLockGuard>> {
        self.acquire(LeaseKind::Renewed, Wait::No)
    }

    /// [`RedLock::try_lock`] with the given lease, never renewed.
    pub fn try_lock_with_lease(&self, lease: Duration) -> Result<Option<RedLockGuard>> {
        self.acquire(LeaseKind::Fixed(lease), Wait::No)
    }

    /// Attempts until `wait` has passed (default lease, renewed while held).
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<RedLockGuard>> {
        self.try_until(after(wait), LeaseKind::Renewed)
    }

    /// [`RedLock::try_lock_for`] with the given lease, never renewed.
    pub fn try_lock_for_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<RedLockGuard>> {
        self.try_until(after(wait), LeaseKind::Fixed(lease))
    }

    fn try_until(&self, deadline: Instant, kind: LeaseKind) -> Result<Option<RedLockGuard>> {
        match self.acquire(kind, Wait::Until(Some(deadline))) {
            Err(Error::Timeout { .. }) => Ok(None),
            other => other,
        }
    }

    fn acquire(&self, kind: LeaseKind, wait: Wait) -> Result<Option<RedLockGuard>> {
        let inner = &self.masters.inner;
        let lease = kind.lease(inner.default_lease)?;
        let started = Instant::now();
        let deadline = wait.deadline(started);
        let owner = self.owner();
        let turn = match inner.queues.enter(&self.keys.name, deadline) {
            Ok(turn) => turn,
            Err(Refused::Full { waiting }) => {
                return Err(Error::QueueFull {
                    name: self.keys.name.clone(),
                    waiting,
                })
            }
            Err(Refused::TimedOut) => return wait.gave_up(&self.keys.name, started),
        };
        self.settle_release(&owner);
        // Listening before the first attempt: a release by a thread of this client between a
        // failed attempt and the wait wakes the wait at once.
        let mut released_here = inner.bell.listen(&self.keys.name);
        let mut offer: Option<Arc<Offer>> = None;
        loop {
            // A releaser of this client may have granted the lock while this thread slept.
            if let Some(offer) = &offer {
                if let Some(sent_at) = self.settle_offer(offer, &owner, lease) {
                    drop(released_here);
                    drop(turn);
                    return self.guard(owner, lease, kind, sent_at).map(Some);
                }
            }
            if let Some(until) = inner.queues.yield_until(&self.keys.name) {
                std::thread::sleep(until.saturating_duration_since(Instant::now()));
            }
            if let Some(sent_at) = self.attempt(&owner, lease)? {
                drop(released_here);
                drop(turn);
                return self.guard(owner, lease, kind, sent_at).map(Some);
            }
            if matches!(wait, Wait::No) {
                return Ok(None);
            }
            let now = Instant::now();
            if deadline.is_some_and(|deadline| now >= deadline) {
                return wait.gave_up(&self.keys.name, started);
            }
            let pause = now + inner.random_delay();
            let until = deadline.map_or(pause, |deadline| deadline.min(pause));
            offer
                .get_or_insert_with(|| turn.offer(owner.clone(), lease))
                .open(inner.watchdog.now());
            released_here.wait(until);
        }
    }

    /// Closes the contender's offer before it acts by itself; returns when the grant was sent if
    /// a releaser of this client granted it the lock on a quorum meanwhile. A grant whose fate is
    /// unknown is withdrawn on every master, so that the attempt that follows starts clean.
    fn settle_offer(&self, offer: &Offer, owner: &str, lease: Duration) -> Option<Instant> {
        let inner = &self.masters.inner;
        match offer.close(inner.node_timeout(lease) * 4) {
            OfferState::Granted { sent_at, .. } => Some(sent_at),
            OfferState::Unknown => {
                let withdraw =
                    scripts::pack_release(&self.keys, owner, &inner.next_release_id(), lease, None);
                self.everywhere(&withdraw, lease);
                None
            }
            OfferState::Closed | OfferState::Open | OfferState::Claimed => None,
        }
    }

    /// Sends again this owner's last release of the lock to every master if some did not answer
    /// it, so that the acquisition that follows does not re-enter a hold the owner believes
    /// released. Best effort: a master still silent is tried again next time.
    fn settle_release(&self, owner: &str) {
        let inner = &self.masters.inner;
        let Some(unsettled) = inner.unsettled.take(&self.keys.lock, owner) else {
            return;
        };
        let call = scripts::pack_release(
            &self.keys,
            owner,
            &unsettled.release_id,
            unsettled.lease,
            None,
        );
        let answers = self.everywhere(&call, unsettled.lease);
        if answers
            .iter()
            .any(|answer| !matches!(answer, Answer::Ints(_)))
        {
            inner.unsettled.remember(&self.keys.lock, owner, unsettled);
        }
    }

    /// Sends `call` to every master and reads every reply, within the node timeout.
    fn everywhere(&self, call: &scripts::Packed, lease: Duration) -> Vec<Answer> {
        let inner = &self.masters.inner;
        let all: Vec<&Master> = inner.masters.iter().collect();
        let deadline = Instant::now() + inner.node_timeout(lease);
        fanout::exchange(&all, call, deadline, None, &fanout::all_replies)
    }

    /// One attempt on every master. Returns when it was sent if a quorum granted it in time;
    /// otherwise undoes it wherever it may have been granted.
    fn attempt(&self, owner: &str, lease: Duration) -> Result<Option<Instant>> {
        let inner = &self.masters.inner;
        let node_timeout = inner.node_timeout(lease);
        let sent_at = inner.watchdog.now();
        let acquire = scripts::pack_acquire(&self.keys, owner, lease);
        let undo = scripts::pack_release(&self.keys, owner, &inner.next_release_id(), lease, None);
        let all: Vec<&Master> = inner.masters.iter().collect();
        // Settled once a quorum granted it, or too few masters are left to.
        let quorum = inner.quorum;
        let settled = |answers: &[Answer]| {
            let (mut granted, mut refused) = (0, 0);
            for answer in answers {
                match answer {
                    Answer::Ints(reply) => match scripts::parse_acquire(reply) {
                        Ok(Acquire::Acquired { .. }) => granted += 1,
                        _ => refused += 1,
                    },
                    Answer::Failed(_) => refused += 1,
                    Answer::Silent => {}
                }
            }
            granted >= quorum || answers.len() - refused < quorum
        };
        let answers = fanout::exchange(
            &all,
            &acquire,
            Instant::now() + node_timeout,
            Some(&undo),
            &settled,
        );
        let mut granted: Vec<&Master> = Vec::new();
        let mut answered = 0;
        let mut last_error = None;
        for (master, answer) in inner.masters.iter().zip(answers) {
            match answer {
                Answer::Ints(reply) => {
                    answered += 1;
                    if let Ok(Acquire::Acquired { .. }) = scripts::parse_acquire(&reply) {
                        granted.push(master);
                    }
                }
                Answer::Failed(error) => last_error = Some(error),
                Answer::Silent => {}
            }
        }
        if granted.len() >= inner.quorum && inner.watchdog.still_valid(sent_at, lease) {
            return Ok(Some(sent_at));
        }
        if !granted.is_empty() {
            fanout::exchange(
                &granted,
                &undo,
                Instant::now() + node_timeout,
                None,
                &fanout::all_replies,
            );
        }
        match (answered, last_error) {
            (0, Some(error)) => Err(Error::Unavailable(error)),
            _ => Ok(None),
        }
    }

    fn guard(
        &self,
        owner: String,
        lease: Duration,
        kind: LeaseKind,
        sent_at: Instant,
    ) -> Result<RedLockGuard> {
        let inner = &self.masters.inner;
        let watched = inner.watchdog.watch(Hold {
            keys: Arc::clone(&self.keys),
            owner: Arc::from(owner.as_str()),
            lease,
            renew: kind.renewed(),
            max_hold: None,
            sent_at,
        });
        match watched {
            Ok(watched) => {
                inner.queues.set_held_here(&self.keys.name, true);
                Ok(RedLockGuard::new(self.clone(), owner, lease, watched))
            }
            Err(error) => {
                let _ = self.release(&owner, lease);
                Err(error)
            }
        }
    }

    pub(crate) fn watchdog(&self) -> &Watchdog {
        &self.masters.inner.watchdog
    }

    /// Releases one hold of `owner` on every master, waiting at most the node timeout. Succeeds
    /// if any master applied it. At the last hold, the lock goes straight to a thread of this
    /// client that sleeps waiting for it, if there is one: granted on a quorum in the same call,
    /// or withdrawn from the masters that granted it.
    pub(crate) fn release(&self, owner: &str, lease: Duration) -> Result<()> {
        let inner = &self.masters.inner;
        let claim = match inner.queues.claim(&self.keys.name) {
            Claiming::Grant(claim) => Some(claim),
            Claiming::Free | Claiming::FreeForOthers => None,
        };
        let grant = claim.as_ref().map(|claim| Grant {
            owner: &claim.offer().owner,
            lease: claim.offer().lease,
        });
        let release_id = inner.next_release_id();
        let call = scripts::pack_release(&self.keys, owner, &release_id, lease, grant.as_ref());
        // Withdraws the grant where it went through but cannot stand; a silent master gets it
        // behind the release.
        let withdraw = grant.as_ref().map(|grant| {
            scripts::pack_release(
                &self.keys,
                grant.owner,
                &inner.next_release_id(),
                grant.lease,
                None,
            )
        });
        let all: Vec<&Master> = inner.masters.iter().collect();
        let sent_at = inner.watchdog.now();
        let deadline = Instant::now() + inner.node_timeout(lease);
        let answers = fanout::exchange(
            &all,
            &call,
            deadline,
            withdraw.as_ref(),
            &fanout::all_replies,
        );
        if answers
            .iter()
            .any(|answer| !matches!(answer, Answer::Ints(_)))
        {
            inner.unsettled.remember(
                &self.keys.lock,
                owner,
                crate::unsettled::Unsettled { release_id, lease },
            );
        }
        let (mut applied, mut not_owner, mut last_error) = (0, 0, None);
        let mut granted: Vec<&Master> = Vec::new();
        for (master, answer) in inner.masters.iter().zip(answers) {
            match answer {
                Answer::Ints(reply) => match scripts::parse_release(&reply) {
                    Ok(Release::NotOwner) => not_owner += 1,
                    Ok(Release::Granted { .. }) => {
                        applied += 1;
                        granted.push(master);
                    }
                    Ok(_) => applied += 1,
                    Err(error) => last_error = Some(error),
                },
                Answer::Failed(error) => last_error = Some(Error::Unavailable(error)),
                Answer::Silent => {}
            }
        }
        let mut handed_over = false;
        let grant_lease = grant.as_ref().map(|grant| grant.lease);
        if let (Some(claim), Some(grant_lease), Some(withdraw)) = (claim, grant_lease, withdraw) {
            if granted.len() >= inner.quorum && inner.watchdog.still_valid(sent_at, grant_lease) {
                // Other clients can only poll: they count as waiting, so that a run of grants
                // ends and the lock is freed for them now and then.
                claim.granted(0, sent_at, true);
                handed_over = true;
            } else {
                if !granted.is_empty() {
                    let deadline = Instant::now() + inner.node_timeout(grant_lease);
                    fanout::exchange(&granted, &withdraw, deadline, None, &fanout::all_replies);
                }
                claim.declined();
            }
        }
        inner.queues.set_held_here(&self.keys.name, handed_over);
        inner.bell.ring(&self.keys.name);
        if applied > 0 {
            Ok(())
        } else if not_owner > 0 {
            Err(Error::NotOwner {
                name: self.keys.name.clone(),
                owner: owner.to_owned(),
            })
        } else {
            Err(last_error.unwrap_or_else(|| {
                Error::Unavailable(redis::RedisError::from((
                    redis::ErrorKind::Io,
                    "no master answered the release in time",
                )))
            }))
        }
    }
}

impl std::fmt::Debug for RedLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedLock")
            .field("name", &self.keys.name)
            .finish_non_exhaustive()
    }
}
