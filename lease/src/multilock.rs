//! [`MultiLock`]: all or nothing over several locks, on one client or several.

use crate::error::{Error, Result};
use crate::lock::{LeaseGuard, Lock};
use crate::lost::Lost;
use crate::policy::after;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// Several locks taken together: all of them, or none. Members are taken in one stable order
/// (by server URL, then key), so two `MultiLock`s over overlapping sets, taken from any threads,
/// never deadlock; on failure, every member taken so far is released. Each member is taken with
/// its client's default lease and renewed by its client's watchdog, so members on one client are
/// renewed together.
///
/// A lock is given twice when two members have one key on one server, however the server is
/// named (`redis://127.0.0.1:6379` and `redis://localhost:6379`, a proxy, two clients): servers
/// are told apart by what they say they are (the run id of `INFO server`, else the address their
/// socket reached), asked when the set is made or, for a server that does not answer then, at
/// its first acquisition. Such a set is refused rather than taken as one member: the two members
/// are two owners (two clients, or two owner ids) of one key, which can never both hold it, so
/// the set could never be taken; and a member cannot stand for another whose owner, lease and
/// watchdog are its own.
///
/// ```no_run
/// use redis_lease::{Client, MultiLock};
///
/// let client = Client::open("redis://127.0.0.1:6379")?;
/// let transfer = MultiLock::new([client.lock("account/17")?, client.lock("account/42")?])?;
/// let guard = transfer.lock()?;
/// // ... move money while !guard.is_lost() ...
/// guard.unlock()?;
/// # Ok::<(), redis_lease::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct MultiLock {
    members: Vec<Lock>,
    /// Set once every member's servers were identified and no lock is given twice.
    distinct: Arc<OnceLock<()>>,
}

impl MultiLock {
    /// The set of `locks`. Refuses an empty set, and a lock given twice (the same key on one
    /// server, by URL or by the server's identity; a member whose server does not answer now is
    /// compared at the set's first acquisition).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for an empty set or a lock given twice.
    pub fn new(locks: impl IntoIterator<Item = Lock>) -> Result<MultiLock> {
        let mut members: Vec<Lock> = locks.into_iter().collect();
        if members.is_empty() {
            return Err(Error::InvalidArgument(
                "a MultiLock needs at least one lock".into(),
            ));
        }
        members.sort_by(|a, b| a.address().cmp(&b.address()));
        if let Some(pair) = members
            .windows(2)
            .find(|pair| pair[0].address() == pair[1].address())
        {
            return Err(Error::InvalidArgument(format!(
                "lock {:?} is given twice",
                pair[0].name()
            )));
        }
        let set = MultiLock {
            members,
            distinct: Arc::new(OnceLock::new()),
        };
        match set.check_distinct() {
            Err(error @ Error::InvalidArgument(_)) => Err(error),
            // A server that does not answer now is compared when the set is first taken.
            _ => Ok(set),
        }
    }

    /// Refuses a lock given twice: two members of one key whose servers are one, as the servers
    /// identify themselves. Done once; until it is, each acquisition asks the servers.
    fn check_distinct(&self) -> Result<()> {
        if self.distinct.get().is_some() {
            return Ok(());
        }
        let servers = self
            .members
            .iter()
            .map(Lock::servers)
            .collect::<Result<Vec<_>>>()?;
        for (i, first) in self.members.iter().enumerate() {
            for (j, second) in self.members.iter().enumerate().skip(i + 1) {
                let one_server = servers[i]
                    .iter()
                    .any(|a| servers[j].iter().any(|b| a.same_server(b)));
                if one_server && first.address().1 == second.address().1 {
                    return Err(Error::InvalidArgument(format!(
                        "lock {:?} is given twice: {} and {} reach one server",
                        first.name(),
                        first.address().0,
                        second.address().0
                    )));
                }
            }
        }
        let _ = self.distinct.set(());
        Ok(())
    }

    /// The members, in the order they are taken.
    pub fn members(&self) -> &[Lock] {
        &self.members
    }

    /// Takes every member, waiting as long as it takes.
    ///
    /// # Errors
    ///
    /// As [`Lock::lock`] for the first member that fails; the members taken before are released.
    /// [`Error::InvalidArgument`] if a lock is given twice (see [`MultiLock::new`]), or the
    /// error that kept its servers from being compared.
    pub fn lock(&self) -> Result<MultiGuard> {
        self.check_distinct()?;
        let mut guards = Vec::with_capacity(self.members.len());
        for member in &self.members {
            guards.push(member.lock()?);
        }
        Ok(MultiGuard { guards })
    }

    /// One attempt at each member: `Ok(None)` (and nothing held) if any is held elsewhere.
    ///
    /// # Errors
    ///
    /// As [`Lock::try_lock`] for the first member that fails; the members taken before are
    /// released. As [`MultiLock::lock`] for a lock given twice.
    pub fn try_lock(&self) -> Result<Option<MultiGuard>> {
        self.take_each(|member| member.try_lock())
    }

    /// Waits up to `wait` in all for every member: `Ok(None)` (and nothing held) if one stayed
    /// held elsewhere.
    ///
    /// # Errors
    ///
    /// As [`Lock::try_lock_for`] for the first member that fails; the members taken before are
    /// released. As [`MultiLock::lock`] for a lock given twice.
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<MultiGuard>> {
        self.try_lock_until(after(wait))
    }

    /// Waits until `deadline` for every member: `Ok(None)` (and nothing held) if one stayed held
    /// elsewhere.
    ///
    /// # Errors
    ///
    /// As [`MultiLock::try_lock_for`].
    pub fn try_lock_until(&self, deadline: Instant) -> Result<Option<MultiGuard>> {
        self.take_each(|member| member.try_lock_until(deadline))
    }

    /// Takes the members in order; at the first that is not taken, the guards taken so far are
    /// dropped, which releases them.
    fn take_each(
        &self,
        mut take: impl FnMut(&Lock) -> Result<Option<LeaseGuard>>,
    ) -> Result<Option<MultiGuard>> {
        self.check_distinct()?;
        let mut guards = Vec::with_capacity(self.members.len());
        for member in &self.members {
            match take(member)? {
                Some(guard) => guards.push(guard),
                None => return Ok(None),
            }
        }
        Ok(Some(MultiGuard { guards }))
    }
}

/// Every member of a [`MultiLock`], held. Dropping it releases them all (in reverse order), one
/// after another, each within its own client's command timeout: against unresponsive servers a
/// drop or [`MultiGuard::unlock`] of N members takes up to N command timeouts, so that a member
/// on a healthy server is always released even when one before it finds its server frozen.
#[must_use = "the locks are released as soon as the guard is dropped"]
#[derive(Debug)]
pub struct MultiGuard {
    guards: Vec<LeaseGuard>,
}

impl MultiGuard {
    /// The members' guards, in the order they were taken.
    pub fn guards(&self) -> &[LeaseGuard] {
        &self.guards
    }

    /// Whether any member's hold can no longer be trusted.
    pub fn is_lost(&self) -> bool {
        self.guards.iter().any(LeaseGuard::is_lost)
    }

    /// The first loss the watchdog found among the members, if any.
    pub fn lost(&self) -> Option<Lost> {
        self.guards.iter().find_map(LeaseGuard::lost)
    }

    /// Until when every member's hold is known valid: the earliest of their deadlines.
    pub fn valid_until(&self) -> Instant {
        self.guards
            .iter()
            .map(LeaseGuard::valid_until)
            .min()
            .unwrap_or_else(Instant::now)
    }

    /// A receiver that gets a [`Lost`] when any member is lost.
    pub fn lost_signal(&self) -> crate::LostSignal {
        let (tell, told) = crossbeam_channel::bounded(self.guards.len());
        for guard in &self.guards {
            guard.watched().lost_to(tell.clone());
        }
        told
    }

    /// Calls `told` once, with the first loss, when any member is lost (at once, on this
    /// thread, if one is lost already), as [`LeaseGuard::on_lost`] does for one hold: on the
    /// watchdog's thread, so it must return at once. Dropped uncalled if every member ends
    /// without being lost.
    pub fn on_lost(&self, told: impl FnOnce(Lost) + Send + 'static) {
        let told = std::sync::Arc::new(parking_lot::Mutex::new(Some(told)));
        for guard in &self.guards {
            let told = std::sync::Arc::clone(&told);
            guard.on_lost(move |lost| {
                if let Some(told) = told.lock().take() {
                    told(lost);
                }
            });
        }
    }

    /// Releases every member (in reverse order) and reports the first failure.
    ///
    /// # Errors
    ///
    /// The first error of the members' [`LeaseGuard::unlock`]s; every member is released in any
    /// case.
    pub fn unlock(mut self) -> Result<()> {
        let mut first_error = None;
        while let Some(guard) = self.guards.pop() {
            if let Err(error) = guard.unlock() {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for MultiGuard {
    fn drop(&mut self) {
        while let Some(guard) = self.guards.pop() {
            drop(guard);
        }
    }
}
