//! One Redis server: each attempt, release and renewal is one script call on a pooled
//! connection, and releases are announced by pub/sub. The lock calls themselves, which a
//! Sentinel's primary and a cluster's slot master share, are in `on_server.rs`.

use crate::backend::{
    Attempt, Attempted, Backend, GrantFate, Release, ReleaseOutcome, Renewal, Renewed, Renewer,
    ServerIdentity,
};
use crate::error::{Error, Result};
use crate::state::LockState;
use crate::stores::redis::conn::{Conn, Endpoint};
use crate::stores::redis::deployment::{Deployment, Redis};
use crate::stores::redis::fencing::Epoch;
use crate::stores::redis::keys::LockKeys;
use crate::stores::redis::on_server::{
    attempt_on, log_withdrawal, pause, proclaim_on, release_on, resize_on, settle_grant_on,
    withdraw_on,
};
use crate::stores::redis::pool::{Fixed, Pool, Via};
use crate::stores::redis::pubsub::{OneServer as OneServerAnnouncer, Subscriber};
use crate::stores::redis::scripts::{self, Announce};
use crate::stores::redis::settings::RedisSettings;
use crate::waiters::Waiters;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) struct Server {
    pool: Arc<Pool>,
}

impl Server {
    pub(crate) fn new(pool: Arc<Pool>) -> Server {
        Server { pool }
    }
}

/// A client of the one server at `endpoints` (the builder's one URL). It connects to nothing
/// yet: an unreachable server shows on the first lock operation.
pub(crate) fn build(
    settings: &RedisSettings,
    mut endpoints: Vec<Endpoint>,
) -> Result<Box<dyn Backend>> {
    let acks = settings.primary_acks()?;
    let endpoint = endpoints
        .pop()
        .ok_or_else(|| Error::InvalidArgument("a client needs the URL of a server".into()))?;
    let pool = settings.pool(Box::new(Fixed::new(endpoint, Epoch::None)));
    Ok(Redis::backend(
        Server::new(Arc::new(pool.with_acks(acks))),
        &settings.prefix,
    ))
}

impl Deployment for Server {
    fn fenced(&self) -> bool {
        true
    }

    fn grants(&self) -> bool {
        self.pool.acks().is_none()
    }

    fn address(&self) -> &str {
        self.pool.shown()
    }

    fn servers(&self, _: &LockKeys, deadline: Instant) -> Result<Vec<ServerIdentity>> {
        Ok(vec![self.pool.identify(deadline)?])
    }

    fn call_timeout(&self) -> Duration {
        self.pool.command_timeout()
    }

    fn attempt(
        &self,
        keys: &LockKeys,
        attempt: &Attempt<'_>,
        deadline: Instant,
    ) -> Result<Attempted> {
        attempt_on(
            Via::direct(&self.pool),
            keys,
            attempt,
            deadline,
            Announce::Global,
        )
    }

    fn abandon(&self, keys: &LockKeys, owner: &str, waited: bool) {
        if waited && keys.kind.marks_waiting() {
            let deadline = self.pool.call_deadline();
            log_withdrawal(
                keys,
                withdraw_on(Via::direct(&self.pool), keys, owner, deadline),
            );
        }
    }

    fn release(&self, keys: &LockKeys, release: &Release<'_>, deadline: Instant) -> ReleaseOutcome {
        release_on(
            Via::direct(&self.pool),
            keys,
            release,
            deadline,
            Announce::Global,
        )
    }

    fn settle_grant(
        &self,
        keys: &LockKeys,
        owner: &str,
        hold: &str,
        deadline: Instant,
    ) -> Result<GrantFate> {
        settle_grant_on(Via::direct(&self.pool), keys, owner, hold, deadline)
    }

    fn pause(&self, ttl: Option<Duration>) -> Duration {
        pause(ttl)
    }

    fn inspect(&self, keys: &LockKeys, deadline: Instant) -> Result<LockState> {
        let mut state = self
            .pool
            .call(deadline, |con| scripts::inspect(con, keys))?;
        state.node = Some(self.pool.shown().to_owned());
        Ok(state)
    }

    fn force_release(&self, keys: &LockKeys, deadline: Instant) -> Result<bool> {
        self.pool.call(deadline, |con| {
            scripts::force_release(con, keys, Announce::Global)
        })
    }

    fn resize(&self, keys: &LockKeys, permits: u32, deadline: Instant) -> Result<Option<u32>> {
        resize_on(Via::direct(&self.pool), keys, permits, deadline)
    }

    fn proclaim(
        &self,
        keys: &LockKeys,
        owner: &str,
        hold: &str,
        value: &str,
        deadline: Instant,
    ) -> Result<bool> {
        let via = Via::direct(&self.pool);
        proclaim_on(via, keys, (owner, hold, value), deadline, Announce::Global)
    }

    /// The server (through Sentinels: the primary they name) says who it is.
    fn ping(&self, deadline: Instant) -> Result<()> {
        self.pool.identify(deadline).map(drop)
    }

    fn renewer(&self) -> Box<dyn Renewer> {
        Box::new(OneServer {
            pool: Arc::clone(&self.pool),
            connection: None,
        })
    }

    fn waiters(&self, thread_name: String) -> Result<Waiters> {
        let announcer = Arc::new(OneServerAnnouncer(Arc::clone(&self.pool)));
        Ok(Waiters::announced(|notifier| {
            Arc::new(Subscriber::new(announcer, thread_name, notifier))
        }))
    }
}

/// Renewals on one server, over a connection of their own.
struct OneServer {
    pool: Arc<Pool>,
    connection: Option<Conn>,
}

impl OneServer {
    fn call(&mut self, leases: &[Renewal<'_>]) -> Result<Vec<bool>> {
        let deadline = self.pool.call_deadline();
        if self
            .connection
            .as_ref()
            .is_some_and(|con| !self.pool.is_current(con))
        {
            self.connection = None;
        }
        let con = match &mut self.connection {
            Some(con) => {
                con.set_deadline(deadline);
                con
            }
            None => self.connection.insert(self.pool.open(deadline)?),
        };
        let outcome = scripts::renew(leases)
            .run_acked(con, "", self.pool.acks())
            .and_then(|(reply, shortfall)| match shortfall {
                Some(shortfall) => Err(shortfall.error(format!("{} leases", leases.len()))),
                None => scripts::parse_renew(&reply, leases.len()),
            });
        if !con.is_usable() {
            // Its state is unknown: the next call starts on a fresh connection.
            self.connection = None;
        }
        outcome
    }
}

impl Renewer for OneServer {
    fn renew(&mut self, leases: &[Renewal<'_>]) -> Vec<Renewed> {
        match self.call(leases) {
            Ok(renewed) => renewed
                .into_iter()
                .map(|yes| if yes { Renewed::Yes } else { Renewed::Gone })
                .collect(),
            Err(error) => {
                log::warn!(
                    "renewing {} leases failed: {error}; each is tried again before its deadline",
                    leases.len()
                );
                vec![Renewed::Failed; leases.len()]
            }
        }
    }
}
