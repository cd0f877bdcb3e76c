//! [`Lock`]: one named lock of a client; acquisition with its waiting policy, and queries.

use crate::client::Client;
use crate::error::{Error, Result};
use crate::guard::LeaseGuard;
use crate::keys::LockKeys;
use crate::local_queue::{Claiming, Offer, OfferState, Refused};
use crate::policy::{after, LeaseKind, Wait};
use crate::pool::with_connection;
use crate::pubsub::Watch;
use crate::scripts::{self, Acquire, Grant, Release};
use crate::watchdog::Hold;
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
///
/// Taken without a lease ([`Lock::lock`], [`Lock::try_lock`], ...), a lock gets the client's
/// default lease and the watchdog renews it every lease/3 for as long as it is held. Taken with
/// an explicit lease (the `_with_lease` methods), it is never renewed. Either way the guard tells
/// its holder when the hold can no longer be trusted: see [`LeaseGuard::is_lost`].
#[derive(Clone)]
pub struct Lock {
    client: Client,
    keys: Arc<LockKeys>,
    owner: OwnerPolicy,
    max_hold: Option<Duration>,
}

impl Lock {
    pub(crate) fn new(client: Client, keys: LockKeys) -> Self {
        Lock {
            client,
            keys: Arc::new(keys),
            owner: OwnerPolicy::Thread,
            max_hold: None,
        }
    }

    /// The same lock, renewed for at most `max_hold` in total per hold: then renewal stops, the
    /// lease runs out (within one lease) and the holder is told, with [`LostReason::MaxHold`].
    /// A bound on a job that hangs while holding.
    ///
    /// [`LostReason::MaxHold`]: crate::LostReason::MaxHold
    pub fn max_hold(&self, max_hold: Duration) -> Result<Lock> {
        if max_hold.is_zero() {
            return Err(Error::InvalidArgument("max_hold must be above zero".into()));
        }
        Ok(Lock {
            max_hold: Some(max_hold),
            ..self.clone()
        })
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

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// A hold of `owner` was abandoned: the client no longer counts the lock as held here, and
    /// the owner's next acquisition of it first releases what may be left of that hold.
    pub(crate) fn abandoned(&self, owner: &str, lease: Duration) {
        let inner = &self.client.inner;
        inner.queues.set_held_here(&self.keys.name, false);
        inner.unsettled.remember(
            &self.keys.lock,
            owner,
            crate::unsettled::Unsettled {
                release_id: inner.next_release_id(),
                lease,
            },
        );
    }

    /// Where the lock lives: its server's URL and its key. It orders the locks of a
    /// [`MultiLock`](crate::MultiLock).
    pub(crate) fn place(&self) -> (&str, &str) {
        (&self.client.inner.url, &self.keys.lock)
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

    /// Takes the lock with the client's default lease, renewed while held, waiting as long as it
    /// takes.
    pub fn lock(&self) -> Result<LeaseGuard> {
        self.acquire_waiting(LeaseKind::Renewed)
    }

    /// Takes the lock with the given lease, never renewed, waiting as long as it takes.
    pub fn lock_with_lease(&self, lease: Duration) -> Result<LeaseGuard> {
        self.acquire_waiting(LeaseKind::Fixed(lease))
    }

    fn acquire_waiting(&self, lease: LeaseKind) -> Result<LeaseGuard> {
        self.acquire(lease, Wait::Until(None))?
            .ok_or_else(|| Error::Protocol("a waiting acquisition returned nothing".into()))
    }

    /// One attempt with the default lease (renewed while held): `Ok(None)` if another owner
    /// holds it (or another thread of this client is already contending for it).
    pub fn try_lock(&self) -> Result<Option<LeaseGuard>> {
        self.acquire(LeaseKind::Renewed, Wait::No)
    }

    /// [`Lock::try_lock`] with the given lease, never renewed.
    pub fn try_lock_with_lease(&self, lease: Duration) -> Result<Option<LeaseGuard>> {
        self.acquire(LeaseKind::Fixed(lease), Wait::No)
    }

    /// Waits up to `wait` for the lock (default lease, renewed while held); `Ok(None)` if it
    /// stayed held.
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<LeaseGuard>> {
        self.try_until(after(wait), LeaseKind::Renewed)
    }

    /// Waits until `deadline` for the lock (default lease, renewed while held); `Ok(None)` if it
    /// stayed held. A deadline already past makes one attempt.
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<LeaseGuard>> {
        self.try_until(deadline, LeaseKind::Renewed)
    }

    /// [`Lock::try_lock_for`] with the given lease, never renewed.
    pub fn try_lock_for_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<LeaseGuard>> {
        self.try_until(after(wait), LeaseKind::Fixed(lease))
    }

    /// [`Lock::try_lock_until`] with the given lease, never renewed.
    pub fn try_lock_until_with_lease(
        &self,
        deadline: Instant,
        lease: Duration,
    ) -> Result<Option<LeaseGuard>> {
        self.try_until(deadline, LeaseKind::Fixed(lease))
    }

    fn try_until(&self, deadline: Instant, lease: LeaseKind) -> Result<Option<LeaseGuard>> {
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

    /// What Redis holds for the lock now: its holders with their hold counts, its remaining
    /// lease, and the last fencing token handed out. Read atomically; for operators and tools.
    pub fn inspect(&self) -> Result<LockState> {
        let (holders, ttl, token): (Vec<(String, u64)>, i64, Option<u64>) =
            self.query(|con, keys| {
                redis::pipe()
                    .atomic()
                    .hgetall(&keys.lock)
                    .pttl(&keys.lock)
                    .get(&keys.fence)
                    .query(con)
            })?;
        Ok(LockState {
            name: self.keys.name.clone(),
            holders,
            ttl: u64::try_from(ttl).ok().map(Duration::from_millis),
            last_token: token,
        })
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

    /// One acquire call. If Redis does not answer, the call may still run later, making the
    /// owner hold a lock it does not know of; so a release is written right behind it on the same
    /// connection before that is closed. Redis runs a connection's commands in order: if the
    /// acquisition runs at all, it is undone at once. (Both go by EVALSHA: if the server lost its
    /// scripts meanwhile, neither runs.)
    fn attempt(&self, owner: &str, lease: Duration) -> Result<Acquire> {
        let inner = &self.client.inner;
        let mut con = inner.pool.get()?;
        let outcome = scripts::acquire(&mut con, &self.keys, owner, lease);
        if matches!(outcome, Err(Error::Unavailable(_))) {
            let undo =
                scripts::pack_release(&self.keys, owner, &inner.next_release_id(), lease, None);
            let _ = con.send_packed_command(&undo.command.get_packed_command());
            con.discard();
        }
        outcome
    }

    fn acquire(&self, kind: LeaseKind, wait: Wait) -> Result<Option<LeaseGuard>> {
        let inner = &self.client.inner;
        let lease = kind.lease(inner.default_lease)?;
        let started = Instant::now();
        let owner = self.owner();
        let turn = match inner.queues.enter(&self.keys.name, wait.deadline(started)) {
            Ok(turn) => turn,
            Err(Refused::Full { waiting }) => {
                return Err(Error::QueueFull {
                    name: self.keys.name.clone(),
                    waiting,
                })
            }
            Err(Refused::TimedOut) => return wait.gave_up(&self.keys.name, started),
        };
        self.settle_release(&owner)?;
        let mut waiting: Option<(Watch, Arc<Offer>)> = None;
        let holding = |token, holds, sent_at| {
            inner.queues.set_held_here(&self.keys.name, true);
            log::debug!(
                "lock {:?} acquired by {owner} (token {token})",
                self.keys.name
            );
            self.guard(&owner, token, holds, lease, kind, sent_at)
                .map(Some)
        };
        loop {
            // A releaser of this client may have granted the lock while this thread slept.
            if let Some((_, offer)) = &waiting {
                if let Some((token, sent_at)) = self.settle_offer(offer, &owner)? {
                    drop(turn);
                    return holding(token, 1, sent_at);
                }
            }
            if let Some(until) = inner.queues.yield_until(&self.keys.name) {
                std::thread::sleep(until.saturating_duration_since(Instant::now()));
            }
            let sent_at = inner.watchdog.now();
            match self.attempt(&owner, lease)? {
                Acquire::Acquired { holds, token } => {
                    drop(turn);
                    return holding(token, holds, sent_at);
                }
                Acquire::Held { ttl } => {
                    let deadline = match wait {
                        Wait::No => return Ok(None),
                        Wait::Until(deadline) => deadline,
                    };
                    let now = Instant::now();
                    if deadline.is_some_and(|deadline| now >= deadline) {
                        return wait.gave_up(&self.keys.name, started);
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
                    offer.open(inner.watchdog.now());
                    watch.wait(until);
                }
            }
        }
    }

    /// The guard of a hold just acquired, watched by the watchdog from `sent_at`. If the
    /// watchdog cannot take it on, the hold is given back.
    fn guard(
        &self,
        owner: &str,
        token: u64,
        holds: u64,
        lease: Duration,
        kind: LeaseKind,
        sent_at: Instant,
    ) -> Result<LeaseGuard> {
        let watched = self.client.inner.watchdog.watch(Hold {
            keys: Arc::clone(&self.keys),
            owner: Arc::from(owner),
            lease,
            renew: kind.renewed(),
            max_hold: self.max_hold,
            sent_at,
        });
        match watched {
            Ok(watched) => Ok(LeaseGuard::new(
                self.clone(),
                owner.to_owned(),
                token,
                holds,
                lease,
                watched,
            )),
            Err(error) => {
                if let Err(release) = self.release(owner, lease) {
                    log::warn!(
                        "giving back lock {:?} that could not be watched failed: {release}",
                        self.keys.name
                    );
                }
                Err(error)
            }
        }
    }

    /// Sends again this owner's last release of the lock if its outcome is unknown, so that the
    /// acquisition that follows cannot re-enter a hold the owner believes released.
    fn settle_release(&self, owner: &str) -> Result<()> {
        let inner = &self.client.inner;
        let Some(unsettled) = inner.unsettled.take(&self.keys.lock, owner) else {
            return Ok(());
        };
        let outcome = with_connection(&inner.pool, |con| {
            scripts::release(
                con,
                &self.keys,
                owner,
                &unsettled.release_id,
                unsettled.lease,
                None,
            )
        });
        match outcome {
            Ok(_) => {
                log::debug!("an unsettled release of {:?} is settled", self.keys.name);
                inner.queues.set_held_here(&self.keys.name, false);
                inner.subscriber.notify_local(&self.keys.channel);
                Ok(())
            }
            Err(error) => {
                inner.unsettled.remember(&self.keys.lock, owner, unsettled);
                Err(error)
            }
        }
    }

    /// Closes the contender's offer before it acts by itself, and returns the fencing token and
    /// the grant's send time (a lower bound of it) if a releaser of this client granted it the
    /// lock meanwhile.
    fn settle_offer(&self, offer: &Offer, owner: &str) -> Result<Option<(u64, Instant)>> {
        let limit = self.client.inner.command_timeout * 4;
        match offer.close(limit) {
            OfferState::Granted { token, sent_at } => Ok(Some((token, sent_at))),
            OfferState::Unknown => {
                let sent_at = offer
                    .opened_at()
                    .unwrap_or_else(|| self.client.inner.watchdog.now());
                Ok(self.granted_in_redis(owner)?.map(|token| (token, sent_at)))
            }
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
        let sent_at = inner.watchdog.now();
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
        if matches!(outcome, Err(Error::Unavailable(_))) {
            inner.unsettled.remember(
                &self.keys.lock,
                owner,
                crate::unsettled::Unsettled {
                    release_id: release_id.clone(),
                    lease,
                },
            );
        }
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
                    claim.granted(*token, sent_at, *subscribers > 1)
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

/// A lock as Redis holds it, from [`Lock::inspect`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockState {
    /// The lock's name.
    pub name: String,
    /// Owner ids holding it, with their hold counts: empty if the lock is free.
    pub holders: Vec<(String, u64)>,
    /// The remaining lease, if it is held (`None`: free, or held without expiry).
    pub ttl: Option<Duration>,
    /// The last fencing token handed out for this name, if any ever was.
    pub last_token: Option<u64>,
}

impl LockState {
    /// Whether anyone holds the lock.
    pub fn is_held(&self) -> bool {
        !self.holders.is_empty()
    }
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("name", &self.keys.name)
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}
