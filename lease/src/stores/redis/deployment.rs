//! The Redis store as the seam sees it: a [`Deployment`] (one server, a Cluster, a Sentinel's
//! primary, a RedLock quorum) does the per-lock calls on a lock's keys, and [`Redis`] makes a
//! [`Place`] of each lock's keys for the core. The deployments share the key layout and the
//! scripts; what differs between them (which server, how many) is theirs.

use crate::backend::{
    Attempt, Attempted, Backend, GrantFate, HoldEnd, Kind, Leading, LockId, Place, Release,
    ReleaseOutcome, Renewer, ServerIdentity,
};
use crate::error::Result;
use crate::state::LockState;
use crate::stores::redis::keys::LockKeys;
use crate::waiters::Waiters;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What one Redis deployment does, on a lock's keys.
pub(crate) trait Deployment: Send + Sync + 'static {
    /// Whether holds carry fencing tokens.
    fn fenced(&self) -> bool;

    /// Whether a release may grant the lock straight to a waiting owner of the client.
    fn grants(&self) -> bool;

    /// The deployment, as text (passwords hidden).
    fn address(&self) -> &str;

    /// The longest one call may take.
    fn call_timeout(&self) -> Duration;

    /// Checks that a lock with these keys can live here (RedLock offers plain locks only).
    fn admit(&self, _keys: &LockKeys) -> Result<()> {
        Ok(())
    }

    /// As [`Place::servers`].
    fn servers(&self, keys: &LockKeys, deadline: Instant) -> Result<Vec<ServerIdentity>>;

    /// As [`Place::attempt`].
    fn attempt(
        &self,
        keys: &LockKeys,
        attempt: &Attempt<'_>,
        deadline: Instant,
    ) -> Result<Attempted>;

    /// As [`Place::abandon`].
    fn abandon(&self, _keys: &LockKeys, _owner: &str, _waited: bool) {}

    /// As [`Place::release`].
    fn release(&self, keys: &LockKeys, release: &Release<'_>, deadline: Instant) -> ReleaseOutcome;

    /// As [`Place::settle_grant`].
    fn settle_grant(
        &self,
        keys: &LockKeys,
        owner: &str,
        hold: &str,
        deadline: Instant,
    ) -> Result<GrantFate>;

    /// As [`Backend::pause`].
    fn pause(&self, ttl: Option<Duration>) -> Duration;

    /// As [`Place::inspect`].
    fn inspect(&self, keys: &LockKeys, deadline: Instant) -> Result<LockState>;

    /// As [`Place::force_release`].
    fn force_release(&self, keys: &LockKeys, deadline: Instant) -> Result<bool>;

    /// As [`Place::resize`], on a deployment that admits semaphores.
    fn resize(&self, keys: &LockKeys, permits: u32, deadline: Instant) -> Result<Option<u32>>;

    /// As [`Place::proclaim`], on a deployment that admits elections.
    fn proclaim(
        &self,
        keys: &LockKeys,
        owner: &str,
        hold: &str,
        value: &str,
        deadline: Instant,
    ) -> Result<bool>;

    /// As [`Backend::renewer`].
    fn renewer(&self) -> Box<dyn Renewer>;

    /// As [`Backend::waiters`].
    fn waiters(&self, thread_name: String) -> Result<Waiters>;

    /// As [`Backend::ping`].
    fn ping(&self, deadline: Instant) -> Result<()>;
}

/// A Redis deployment, under a key prefix.
pub(crate) struct Redis {
    deployment: Arc<dyn Deployment>,
    prefix: String,
}

impl Redis {
    /// The backend of `deployment`, its keys under `prefix`.
    pub(crate) fn backend(deployment: impl Deployment, prefix: &str) -> Box<dyn Backend> {
        Box::new(Redis {
            deployment: Arc::new(deployment),
            prefix: prefix.to_owned(),
        })
    }
}

impl Backend for Redis {
    fn place(&self, id: &LockId) -> Result<Arc<dyn Place>> {
        let keys = LockKeys::of(&self.prefix, id);
        self.deployment.admit(&keys)?;
        Ok(Arc::new(KeysPlace {
            id: id.clone(),
            keys,
            deployment: Arc::clone(&self.deployment),
        }))
    }

    fn fenced(&self) -> bool {
        self.deployment.fenced()
    }

    fn grants(&self) -> bool {
        self.deployment.grants()
    }

    fn address(&self) -> &str {
        self.deployment.address()
    }

    fn call_timeout(&self) -> Duration {
        self.deployment.call_timeout()
    }

    fn pause(&self, ttl: Option<Duration>) -> Duration {
        self.deployment.pause(ttl)
    }

    fn renewer(&self) -> Box<dyn Renewer> {
        self.deployment.renewer()
    }

    fn waiters(&self, thread_name: String) -> Result<Waiters> {
        self.deployment.waiters(thread_name)
    }

    fn ping(&self, deadline: Instant) -> Result<()> {
        self.deployment.ping(deadline)
    }
}

/// A lock on Redis: its keys, and the deployment that serves them.
struct KeysPlace {
    id: LockId,
    keys: LockKeys,
    deployment: Arc<dyn Deployment>,
}

impl Place for KeysPlace {
    fn id(&self) -> &LockId {
        &self.id
    }

    fn of_kind(&self, kind: Kind) -> Arc<dyn Place> {
        Arc::new(KeysPlace {
            id: self.id.with_kind(kind),
            keys: self.keys.with_kind(kind),
            deployment: Arc::clone(&self.deployment),
        })
    }

    fn address(&self) -> (&str, &str) {
        (self.deployment.address(), &self.keys.lock)
    }

    fn wake_key(&self) -> &str {
        &self.keys.channel
    }

    fn hold_address(&self, hold: &str) -> Arc<str> {
        Arc::from(self.keys.hold_key(hold))
    }

    fn servers(&self, deadline: Instant) -> Result<Vec<ServerIdentity>> {
        self.deployment.servers(&self.keys, deadline)
    }

    fn attempt(&self, attempt: &Attempt<'_>, deadline: Instant) -> Result<Attempted> {
        self.deployment.attempt(&self.keys, attempt, deadline)
    }

    fn abandon(&self, owner: &str, waited: bool) {
        self.deployment.abandon(&self.keys, owner, waited);
    }

    /// A hold in Redis lapses with its key's lease.
    fn ended(&self, _hold: &str, _end: HoldEnd) {}

    fn release(&self, release: &Release<'_>, deadline: Instant) -> ReleaseOutcome {
        self.deployment.release(&self.keys, release, deadline)
    }

    fn settle_grant(&self, owner: &str, hold: &str, deadline: Instant) -> Result<GrantFate> {
        self.deployment
            .settle_grant(&self.keys, owner, hold, deadline)
    }

    fn inspect(&self, deadline: Instant) -> Result<LockState> {
        self.deployment.inspect(&self.keys, deadline)
    }

    fn force_release(&self, deadline: Instant) -> Result<bool> {
        self.deployment.force_release(&self.keys, deadline)
    }

    fn resize(&self, permits: u32, deadline: Instant) -> Result<Option<u32>> {
        self.deployment.resize(&self.keys, permits, deadline)
    }

    fn proclaim(&self, owner: &str, hold: &str, value: &str, deadline: Instant) -> Result<bool> {
        self.deployment
            .proclaim(&self.keys, owner, hold, value, deadline)
    }

    /// Read as an inspection: the hold's token and value are fields of the lock's hash.
    /// Observers are woken by the election's channel, which a proclamation and a release
    /// announce on.
    fn leader(&self, _watch: bool, deadline: Instant) -> Result<Option<Leading>> {
        let state = self.deployment.inspect(&self.keys, deadline)?;
        leading(state)
    }
}

/// The hold that leads, from what Redis holds for the election: none if nothing holds it, and
/// an error if its key holds something else, which no campaign can take.
fn leading(state: LockState) -> Result<Option<Leading>> {
    if let Some(key) = state.foreign {
        return Err(crate::error::Error::WrongType { key });
    }
    if !state.is_held() {
        return Ok(None);
    }
    Ok(state.hold_token.map(|term| Leading {
        term,
        value: state.proclaimed,
        ttl: state.ttl,
    }))
}
