//! [`Lock`]: one named lock of a client; acquisition with its waiting policy, and queries.

use crate::client::Client;
use crate::error::{Error, Result};
use crate::guard::LeaseGuard;
use crate::keys::LockKeys;
use crate::local_queue::{Claiming, Offer, OfferState, Refused};
use crate::pool::with_connection;
use crate::pubsub::Watch;
use crate::scripts::{self, Acquire, Grant, Release};
use redis::Commands;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest a waiter sleeps before looking at the lock again, in case a release message was
/// lost. It also sleeps no longer than the holder's remaining lease.
const MAX_RECHECK: Duration = Duration::from_secs(1);

/// Whose lock it is: the calling thread's, or a fixed owner id.
#[derive(Debug, Clone)]
enum OwnerPolicy {
    Thread,
    Fixed(Arc<str>),
}

/// A named lock. Cheap to clone. Reentrant per owner: by default each thread is its own owner;
/// [`Lock::owned_by`] makes every caller act as one fixed owner instead.
#[derive(Clone)]
pub struct Lock {
    client: Client,
    keys: Arc<LockKeys>,
    owner: OwnerPolicy,
}

/// How long an acquisition may wait.
#[derive(Clone, Copy)]
enum Wait {
    /// One attempt.
    No,
    /// Until the deadline (`None`: forever).
    Until(Option<Instant>),
}

impl Lock {
    pub(crate) fn new(client: Client, keys: LockKeys) -> Self {
        Lock {
            client,
            keys: Arc::new(keys),
            owner: OwnerPolicy::Thread,
        }
    }

    /// The same lock, held on behalf of `owner` whichever thread calls: a lease that is not tied
    /// to a thread (a job id, a host name). The owner id must be unique to the holder.
    pub fn owned_by(&self, owner: impl Into<String>) -> Result<Lock> {
        let owner = owner.into();
        if owner.is_empty() {
            return Err(Error::InvalidArgument(
                "an owner id must not be empty".into(),
            ));
        }
        Ok(Lock {
            owner: OwnerPolicy::Fixed(owner.into()),
            ..self.clone()
        })
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.keys.name
    }

    /// The owner id the calling thread acts as.
    pub fn owner(&self) -> String {
        match &self.owner {
            OwnerPolicy::Thread => self.client.inner.thread_owner(),
            OwnerPolicy::Fixed(owner) => owner.to_string(),
        }
    }

    /// Takes the lock with the client's default lease, waiting as long as it takes.
    pub fn lock(&self) -> Result<LeaseGuard> {
        self.lock_with_lease(self.client.inner.default_lease)
    }

    /// Takes the lock with the given lease, waiting as long as it takes.
    pub fn lock_with_lease(&self, lease: Duration) -> Result<LeaseGuard> {
        self.acquire(lease, Wait::Until(None))?
            .ok_or_else(|| Error::Protocol("a waiting acquisition returned nothing".into()))
    }

    /// One attempt with the default lease: `Ok(None)` if another owner holds it (or another thread
    /// of this client is already contending for it).
    pub fn try_lock(&self) -> Result<Option<LeaseGuard>> {
        self.acquire(self.client.inner.default_lease, Wait::No)
    }

    /// [`Lock::try_lock`] with the given lease.
    pub fn try_lock_with_lease(&self, lease: Duration) -> Result<Option<LeaseGuard>> {
        self.acquire(lease, Wait::No)
    }

    /// Waits up to `wait` for the lock (default lease); `Ok(None)` if it stayed held.
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<LeaseGuard>> {
        self.try_lock_until(Instant::now().checked_add(wait).unwrap_or_else(far_future))
    }

    /// Waits until `deadline` for the lock (default lease); `Ok(None)` if it stayed held. A
    /// deadline already past makes one attempt.
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<LeaseGuard>> {
        self.try_lock_until_with_lease(deadline, self.client.inner.default_lease)
    }

    /// [`Lock::try_lock_for`] with the given lease.
    pub fn try_lock_for_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<LeaseGuard>> {
        let deadline = Instant::now().checked_add(wait).unwrap_or_else(far_future);
        self.try_lock_until_with_lease(deadline, lease)
    }

    /// [`Lock::try_lock_until`] with the given lease.
    pub fn try_lock_until_with_lease(
        &self,
        deadline: Instant,
        lease: Duration,
    ) -> Result<Option<LeaseGuard>> {
        match self.acquire(lease, Wait::Until(Some(deadline))) {
            Err(Error::Timeout { .. }) => Ok(None),
            other => other,
        }
    }

    /// Whether anyone holds the lock.
    pub fn is_locked(&self) -> Result<bool> {
        self.query(|con, keys| con.exists(&keys.lock))
    }

    /// Whether the calling thread's owner id holds the lock.
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        Ok(self.hold_count()? > 0)
    }

    /// How many holds the calling thread's owner id has on the lock (0: none).
    pub fn hold_count(&self) -> Result<u64> {
        let owner = self.owner();
        let count: Option<u64> = self.query(|con, keys| con.hget(&keys.lock, &owner))?;
        Ok(count.unwrap_or(0))
    }

    /// How long the current lease has left, or `None` if the lock is free.
    pub fn remaining_ttl(&self) -> Result<Option<Duration>> {
        let millis: i64 = self.query(|con, keys| con.pttl(&keys.lock))?;
        Ok(u64::try_from(millis).ok().map(Duration::from_millis))
    }

    /// Deletes the lock whoever holds it and wakes its waiters. For operators clearing a dead
    /// holder; the holder is not told. Returns whether the lock was held.
    pub fn force_unlock(&self) -> Result<bool> {
        let freed = with_connection(&self.client.inner.pool, |con| {
            scripts::force_release(con, &self.keys)
        })?;
        if freed {
            let inner = &self.client.inner;
            inner.queues.set_held_here(&self.keys.name, false);
            inner.subscriber.notify_local(&self.keys.channel);
        }
        Ok(freed)
    }

    fn query<T>(
        &self,
        op: impl FnOnce(&mut redis::Connection, &LockKeys) -> redis::RedisResult<T>,
    ) -> Result<T> {
        with_connection(&self.client.inner.pool, |con| {
            op(con, &self.keys).map_err(|error| Error::from_redis(error, &self.keys.lock))
        })
    }

    fn attempt(&self, owner: &str, lease: Duration) -> Result<Acquire> {
        with_connection(&self.client.inner.pool, |con| {
            scripts::acquire(con, &self.keys, owner, lease)
        })
    }

    fn acquire(&self, lease: Duration, wait: Wait) -> Result<Option<LeaseGuard>> {
        if lease.is_zero() {
            return Err(Error::InvalidArgument("a lease must be above zero".into()));
        }
        let inner = &self.client.inner;
        let started = Instant::now();
        let owner = self.owner();
        let queue_deadline = match wait {
            Wait::No => Some(started),
            Wait::Until(deadline) => deadline,
        };
        let turn = match inner.queues.enter(&self.keys.name, queue_deadline) {
            Ok(turn) => turn,
            Err(Refused::Full { waiting }) => {
                return Err(Error::QueueFull {
                    name: self.keys.name.clone(),
                    waiting,
                })
            }
            Err(Refused::TimedOut) => return self.gave_up(wait, started),
        };
        let mut waiting: Option<(Watch, Arc<Offer>)> = None;
        let holding = |token, holds| {
            inner.queues.set_held_here(&self.keys.name, true);
            log::debug!(
                "lock {:?} acquired by {owner} (token {token})",
                self.keys.name
            );
            Ok(Some(LeaseGuard::new(
                self.clone(),
                owner.clone(),
                token,
                holds,
                lease,
            )))
        };
        loop {
            // A releaser of this client may have granted the lock while this thread slept.
            if let Some((_, offer)) = &waiting {
                if let Some(token) = self.settle_offer(offer, &owner)? {
                    drop(turn);
                    return holding(token, 1);
                }
            }
            if let Some(until) = inner.queues.yield_until(&self.keys.name) {
                std::thread::sleep(until.saturating_duration_since(Instant::now()));
            }
            match self.attempt(&owner, lease)? {
                Acquire::Acquired { holds, token } => {
                    drop(turn);
                    return holding(token, holds);
                }
                Acquire::Held { ttl } => {
                    let deadline = match wait {
                        Wait::No => return Ok(None),
                        Wait::Until(deadline) => deadline,
                    };
                    let now = Instant::now();
                    if deadline.is_some_and(|deadline| now >= deadline) {
                        return self.gave_up(wait, started);
                    }
                    let Some((watch, offer)) = &waiting else {
                        // Subscribe, then look again: a release between the attempt and the
                        // subscription would otherwise go unseen until the next re-check.
                        let confirm_by = now + inner.command_timeout;
                        let confirm_by = deadline.map_or(confirm_by, |d| d.min(confirm_by));
                        let watch = inner.subscriber.watch(&self.keys.channel, confirm_by);
                        waiting = Some((watch, turn.offer(owner.clone(), lease)));
                        continue;
                    };
                    let recheck = ttl
                        .unwrap_or(MAX_RECHECK)
                        .clamp(Duration::from_millis(1), MAX_RECHECK);
                    let until = deadline.map_or(now + recheck, |d| d.min(now + recheck));
                    offer.open();
                    watch.wait(until);
                }
            }
        }
    }

    /// Closes the contender's offer before it acts by itself, and returns the fencing token if a
    /// releaser of this client granted it the lock meanwhile.
    fn settle_offer(&self, offer: &Offer, owner: &str) -> Result<Option<u64>> {
        let limit = self.client.inner.command_timeout * 4;
        match offer.close(limit) {
            OfferState::Granted(token) => Ok(Some(token)),
            OfferState::Unknown => self.granted_in_redis(owner),
            OfferState::Closed | OfferState::Open | OfferState::Claimed => Ok(None),
        }
    }

    /// Whether a grant whose reply was lost went through: a waiting owner held nothing, so it
    /// holds the lock now only if it was granted. Returns the token if so.
    fn granted_in_redis(&self, owner: &str) -> Result<Option<u64>> {
        let (holds, token): (Option<u64>, Option<u64>) = self.query(|con, keys| {
            redis::pipe()
                .atomic()
                .hget(&keys.lock, owner)
                .get(&keys.fence)
                .query(con)
        })?;
        Ok(holds.filter(|&holds| holds > 0).and(token))
    }

    fn gave_up(&self, wait: Wait, started: Instant) -> Result<Option<LeaseGuard>> {
        match wait {
            Wait::No => Ok(None),
            Wait::Until(_) => Err(Error::Timeout {
                name: self.keys.name.clone(),
                waited: started.elapsed(),
            }),
        }
    }

    /// Releases one hold of `owner`. At the last hold, the lock goes straight to a thread of this
    /// client that sleeps waiting for it, if there is one. A release whose reply was lost is
    /// retried once with the same release id, which the script applies at most once.
    pub(crate) fn release(&self, owner: &str, lease: Duration) -> Result<()> {
        let inner = &self.client.inner;
        let release_id = inner.next_release_id();
        let (claim, wake_locally) = match inner.queues.claim(&self.keys.name) {
            Claiming::Grant(claim) => (Some(claim), true),
            Claiming::Free => (None, true),
            Claiming::FreeForOthers => (None, false),
        };
        let grant = claim.as_ref().map(|claim| Grant {
            owner: &claim.offer().owner,
            lease: claim.offer().lease,
        });
        let mut retried = false;
        let outcome = loop {
            let outcome = with_connection(&inner.pool, |con| {
                scripts::release(con, &self.keys, owner, &release_id, lease, grant.as_ref())
            });
            match outcome {
                Err(Error::Unavailable(error)) if !retried => {
                    log::debug!("release of {:?} failed ({error}); retrying", self.keys.name);
                    retried = true;
                }
                other => break other,
            }
        };
        let freed = matches!(
            outcome,
            Ok(Release::Applied { holds_left: 0 } | Release::Granted { .. })
        );
        let still_held_here = matches!(
            outcome,
            Ok(Release::Granted { .. } | Release::Applied { holds_left: 1.. })
        );
        inner.queues.set_held_here(&self.keys.name, still_held_here);
        if let Some(claim) = claim {
            match (&outcome, retried) {
                (Ok(Release::Granted { token, subscribers }), _) => {
                    claim.granted(*token, *subscribers > 1)
                }
                (Ok(Release::Applied { .. } | Release::NotOwner), false) => claim.declined(),
                // A retry, or no answer: whether the grant went through is for Redis to say.
                _ => claim.unknown(),
            }
        }
        if wake_locally && (freed || retried) {
            // Wake this client's waiter at once: granted, free to try, or to check.
            inner.subscriber.notify_local(&self.keys.channel);
        }
        match outcome? {
            Release::NotOwner => Err(Error::NotOwner {
                name: self.keys.name.clone(),
                owner: owner.to_owned(),
            }),
            Release::Applied { .. } | Release::Granted { .. } | Release::AlreadyApplied => {
                log::debug!("lock {:?} released by {owner}", self.keys.name);
                Ok(())
            }
        }
    }
}

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600)
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("name", &self.keys.name)
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}
