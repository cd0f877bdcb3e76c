//! Redis as the seam sees it, on one server, a Sentinel's primary or a Cluster: a [`Place`] is
//! a lock's keys, and every call on it runs the lock's script on the server its [`Route`] reaches
//! (`on_server.rs`), announcing releases on the route's channels. RedLock, whose algorithm
//! differs, is a place of its own (`quorum/`). A latch's calls are in `place/latch.rs`, writes
//! made while a hold holds in `place/write.rs`.

mod latch;
mod write;

use crate::backend::{
    Attempt, Attempted, Backend, Elects, GrantFate, Grants, HoldEnd, Kind, Latches, Leading,
    Limits, LockId, Place, Release, ReleaseOutcome, Renewer, Resizes, ServerIdentity,
    WritesWhileHeld,
};
use crate::error::{Error, Result};
use crate::state::LockState;
use crate::stores::redis::keys::LockKeys;
use crate::stores::redis::on_server::{
    attempt_on, log_withdrawal, pause, proclaim_on, release_on, resize_on, settle_grant_on,
    withdraw_on,
};
use crate::stores::redis::route::Route;
use crate::stores::redis::scripts;
use crate::waiters::Waiters;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A Redis client's locks, under a key prefix, reached by one route.
pub(crate) struct RedisStore {
    route: Arc<Route>,
    prefix: String,
}

impl RedisStore {
    /// The backend of the locks `route` reaches, their keys under `prefix`.
    pub(crate) fn backend(route: Route, prefix: &str) -> Box<dyn Backend> {
        Box::new(RedisStore {
            route: Arc::new(route),
            prefix: prefix.to_owned(),
        })
    }
}

impl Backend for RedisStore {
    fn place(&self, id: &LockId) -> Result<Arc<dyn Place>> {
        Ok(Arc::new(KeysPlace {
            id: id.clone(),
            keys: LockKeys::of(&self.prefix, id),
            route: Arc::clone(&self.route),
        }))
    }

    fn fenced(&self) -> bool {
        true
    }

    fn address(&self) -> &str {
        self.route.address()
    }

    fn call_timeout(&self) -> Duration {
        self.route.call_timeout()
    }

    fn pause(&self, ttl: Option<Duration>) -> Duration {
        pause(ttl)
    }

    fn renewer(&self) -> Box<dyn Renewer> {
        self.route.renewer()
    }

    fn waiters(&self, thread_name: String) -> Result<Waiters> {
        Ok(self.route.waiters(thread_name))
    }

    fn ping(&self, deadline: Instant) -> Result<()> {
        self.route.ping(deadline)
    }
}

/// A lock on Redis: its keys, and the route to the server that keeps them.
pub(super) struct KeysPlace {
    pub(super) id: LockId,
    pub(super) keys: LockKeys,
    pub(super) route: Arc<Route>,
}

impl Place for KeysPlace {
    fn id(&self) -> &LockId {
        &self.id
    }

    fn of_kind(&self, kind: Kind) -> Arc<dyn Place> {
        Arc::new(KeysPlace {
            id: self.id.with_kind(kind),
            keys: self.keys.with_kind(kind),
            route: Arc::clone(&self.route),
        })
    }

    fn address(&self) -> (&str, &str) {
        (self.route.address(), &self.keys.lock)
    }

    fn wake_key(&self) -> &str {
        &self.keys.channel
    }

    fn hold_address(&self, hold: &str) -> Arc<str> {
        Arc::from(self.keys.hold_key(hold))
    }

    fn servers(&self, deadline: Instant) -> Result<Vec<ServerIdentity>> {
        Ok(vec![self.route.identify(&self.keys.lock, deadline)?])
    }

    fn attempt(&self, attempt: &Attempt<'_>, deadline: Instant) -> Result<Attempted> {
        let (keys, announce) = (&self.keys, self.route.announce());
        self.route.call(&keys.lock, deadline, |via| {
            attempt_on(via, keys, attempt, deadline, announce)
        })
    }

    fn abandon(&self, owner: &str, waited: bool) {
        if waited && self.keys.kind.marks_waiting() {
            let keys = &self.keys;
            let deadline = crate::policy::after(self.route.call_timeout());
            let withdrawn = self.route.call(&keys.lock, deadline, |via| {
                withdraw_on(via, keys, owner, deadline)
            });
            log_withdrawal(keys, withdrawn);
        }
    }

    /// A hold in Redis lapses with its key's lease.
    fn ended(&self, _hold: &str, _end: HoldEnd) {}

    fn release(&self, release: &Release<'_>, deadline: Instant) -> ReleaseOutcome {
        let (keys, announce) = (&self.keys, self.route.announce());
        let mut settled = true;
        let released = self.route.call(&keys.lock, deadline, |via| {
            let outcome = release_on(via, keys, release, deadline, announce);
            settled = outcome.settled;
            outcome.released
        });
        ReleaseOutcome { released, settled }
    }

    fn inspect(&self, deadline: Instant) -> Result<LockState> {
        let keys = &self.keys;
        let (mut state, node) = self.route.named(&keys.lock, deadline, |via| {
            via.call(deadline, |con| scripts::inspect(con, keys))
        })?;
        state.node = Some(node.shown().to_owned());
        Ok(state)
    }

    fn force_release(&self, deadline: Instant) -> Result<bool> {
        let (keys, announce) = (&self.keys, self.route.announce());
        self.route.call(&keys.lock, deadline, |via| {
            via.call(deadline, |con| scripts::force_release(con, keys, announce))
        })
    }

    fn resizes(&self) -> Option<&dyn Resizes> {
        matches!(self.id.kind, Kind::Semaphore { .. }).then_some(self as &dyn Resizes)
    }

    fn elects(&self) -> Option<&dyn Elects> {
        (self.id.kind == Kind::Leader).then_some(self as &dyn Elects)
    }

    /// A plain lock's, unless replica acknowledgements are required.
    fn grants(&self) -> Option<&dyn Grants> {
        (self.id.kind.grants() && self.route.acks().is_none()).then_some(self as &dyn Grants)
    }

    fn latches(&self) -> Option<&dyn Latches> {
        (self.id.kind == Kind::Latch).then_some(self as &dyn Latches)
    }

    /// Every primitive's holds: each is a hash with the hold's id and owner (see `holds.lua`).
    fn writes(&self) -> Option<&dyn WritesWhileHeld> {
        self.id.kind.holds().then_some(self as &dyn WritesWhileHeld)
    }

    /// A rate limiter's, on every route (see `limiter.rs`).
    fn limits(&self) -> Option<&dyn Limits> {
        (self.id.kind == Kind::Limiter).then_some(self as &dyn Limits)
    }
}

impl Resizes for KeysPlace {
    fn resize(&self, permits: u32, deadline: Instant) -> Result<Option<u32>> {
        let keys = &self.keys;
        self.route.call(&keys.lock, deadline, |via| {
            resize_on(via, keys, permits, deadline)
        })
    }
}

impl Elects for KeysPlace {
    fn proclaim(&self, owner: &str, hold: &str, value: &str, deadline: Instant) -> Result<bool> {
        let (keys, announce) = (&self.keys, self.route.announce());
        self.route.call(&keys.lock, deadline, |via| {
            proclaim_on(via, keys, (owner, hold, value), deadline, announce)
        })
    }

    /// Read as an inspection: the hold's token and value are fields of the lock's hash.
    /// Observers are woken by the election's channel, which a proclamation and a release
    /// announce on.
    fn leader(&self, _watch: bool, deadline: Instant) -> Result<Option<Leading>> {
        leading(self.inspect(deadline)?)
    }
}

impl Grants for KeysPlace {
    fn claim_id(&self, hold: &str) -> String {
        scripts::claim_id(hold)
    }

    fn settle_grant(&self, owner: &str, hold: &str, deadline: Instant) -> Result<GrantFate> {
        let keys = &self.keys;
        self.route.call(&keys.lock, deadline, |via| {
            settle_grant_on(via, keys, owner, hold, deadline)
        })
    }
}

/// The hold that leads, from what Redis holds for the election: none if nothing holds it, and
/// an error if its key holds something else, which no campaign can take.
fn leading(state: LockState) -> Result<Option<Leading>> {
    if let Some(key) = state.foreign {
        return Err(Error::WrongType { key });
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
