//! Redis Cluster: every call goes to the master that serves the lock's slot (all of a lock's keys
//! and its channel share one hash tag, so one slot), following `MOVED` (the slot moved: the map is
//! corrected and the call sent there) and `ASK` (the slot is migrating: the call is sent once to
//! the importing node, after `ASKING`). A call that certainly did not run (redirected, refused by
//! a cluster that is down or busy with a migration, or whose connection could not be opened) is
//! sent again within its deadline; one that may have run is not, and an acquisition that got no
//! answer is undone on its connection as on one server. Releases are announced on sharded
//! channels (`SPUBLISH`), which waiters subscribe on the slot's master (`SSUBSCRIBE`).
//!
//! The routing is this crate's own rather than the `redis` crate's cluster client, because every
//! call must end by its deadline (the crate's own connections) and renewals are pipelined per
//! node: one round trip per master per renewal round, whatever the number of leases.

mod renew;
mod routes;
pub(crate) mod slots;

use routes::{PoolSettings, Routes};

use crate::backend::Renewer;
use crate::error::{Error, Result};
use crate::stores::redis::conn::{io_error, Conn, Endpoint};
use crate::stores::redis::pool::{Pool, Setup, Via};
use crate::stores::redis::pubsub::{Announcer, Subscriber};
use crate::stores::redis::scripts::Acks;
use crate::stores::redis::settings::RedisSettings;
use crate::waiters::Waiters;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The most redirections one call follows.
const MAX_REDIRECTS: usize = 5;
/// The pause before a call is sent again to a cluster that is down or busy with a migration.
const BUSY_PAUSE: Duration = Duration::from_millis(20);
/// A call redirected by `ASK`: `ASKING` before each of its commands, none after.
const ASKING: Setup = Setup {
    apply: Conn::ask_each,
    undo: Conn::stop_asking,
};

pub(crate) struct Cluster {
    routes: Arc<Routes>,
    place: String,
}

/// A client of the cluster whose nodes at `seeds` (one or more) tell the rest.
pub(crate) fn build(settings: &RedisSettings, seeds: Vec<Endpoint>) -> Result<Cluster> {
    let acks = settings.primary_acks()?;
    if seeds.is_empty() {
        return Err(Error::InvalidArgument(
            "a cluster client needs the URL of at least one node".into(),
        ));
    }
    if seeds.iter().any(|endpoint| endpoint.db != 0) {
        return Err(Error::InvalidArgument(
            "a cluster has only database 0".into(),
        ));
    }
    let place = seeds
        .iter()
        .map(|endpoint| endpoint.shown().to_owned())
        .collect::<Vec<_>>()
        .join(",");
    let routes = Routes::new(
        seeds,
        PoolSettings {
            max_idle: settings.pool_size,
            max_connections: settings.max_connections,
            connect_timeout: settings.connect_timeout,
            command_timeout: settings.command_timeout,
            acks,
            pipelining: settings.pipelining,
        },
    );
    Ok(Cluster {
        routes: Arc::new(routes),
        place,
    })
}

impl Cluster {
    /// Runs `op` on the master of `key`'s slot by `deadline`, following redirections, and sends
    /// it again where it certainly did not run. Returns the node that answered.
    pub(crate) fn run<T>(
        &self,
        key: &str,
        deadline: Instant,
        mut op: impl FnMut(Via<'_>) -> Result<T>,
    ) -> Result<(T, Arc<str>)> {
        let slot = slots::slot(key);
        let mut ask: Option<(Arc<str>, Arc<Pool>)> = None;
        let mut redirects = 0;
        loop {
            let asking = ask.is_some();
            let (node, pool) = match ask.take() {
                Some(node) => node,
                None => self.routes.node(slot, deadline)?,
            };
            let outcome = op(Via::set_up(&pool, asking.then_some(ASKING)));
            let error = match outcome {
                Ok(value) => return Ok((value, node)),
                Err(error) => error,
            };
            match Redirect::of(&error) {
                Some(Redirect::Moved(addr)) => {
                    self.routes.moved(slot, &addr);
                    if redirects > 0 {
                        // Moved again: the nodes disagree while a failover settles.
                        std::thread::sleep(
                            BUSY_PAUSE.min(deadline.saturating_duration_since(Instant::now())),
                        );
                    }
                }
                Some(Redirect::Ask(addr)) => ask = self.routes.pool_at(&addr),
                Some(Redirect::Busy) => {
                    self.routes.mark_stale();
                    std::thread::sleep(
                        BUSY_PAUSE.min(deadline.saturating_duration_since(Instant::now())),
                    );
                }
                None => {
                    if matches!(error, Error::Unavailable { .. }) {
                        // Refused, reset or silent: a node that stopped serving may have been
                        // failed over, and only the map read again can say where to.
                        self.routes.mark_stale();
                    }
                    return Err(error);
                }
            }
            redirects += 1;
            if redirects > MAX_REDIRECTS || Instant::now() >= deadline {
                // Still sent on: the slot's master is not settled, which a wait rides out.
                return Err(Error::unavailable(io_error(
                    std::io::ErrorKind::Other,
                    format!("the slot of {key:?} is still moving between nodes: {error}"),
                )));
            }
        }
    }
}

/// Why a call did not run where it was sent, and where it should go.
enum Redirect {
    /// `MOVED`: the slot is served by this node now.
    Moved(String),
    /// `ASK`: the slot is migrating; this node runs the call after `ASKING`.
    Ask(String),
    /// `CLUSTERDOWN`, `TRYAGAIN`: not now; the same call may run a moment later.
    Busy,
}

impl Redirect {
    fn of(error: &Error) -> Option<Redirect> {
        let redis = match error {
            Error::Refused { cause, .. } | Error::Unavailable { cause, .. } => cause.as_redis()?,
            _ => return None,
        };
        let to = || slots::redirect_target(redis);
        match redis.code()? {
            "MOVED" => to().map(Redirect::Moved),
            "ASK" => to().map(Redirect::Ask),
            "CLUSTERDOWN" | "TRYAGAIN" => Some(Redirect::Busy),
            _ => None,
        }
    }
}

impl Cluster {
    /// The replica acknowledgements every write waits for.
    pub(crate) fn acks(&self) -> Option<Acks> {
        self.routes.acks()
    }

    /// The seeds, as text (passwords hidden).
    pub(crate) fn address(&self) -> &str {
        &self.place
    }

    pub(crate) fn command_timeout(&self) -> Duration {
        self.routes.command_timeout()
    }

    /// Reads the map of the slots' masters from a node.
    pub(crate) fn refresh(&self, deadline: Instant) -> Result<()> {
        self.routes.refresh(deadline)
    }

    /// Renewals pipelined per node: one round trip per master per renewal round.
    pub(crate) fn renewer(&self) -> Box<dyn Renewer> {
        Box::new(renew::ClusterRenewer::new(Arc::clone(&self.routes)))
    }

    /// Waiters woken by a subscriber of the sharded channels, on each slot's master.
    pub(crate) fn waiters(&self, thread_name: String) -> Waiters {
        let announcer = Arc::new(SlotMasters(Arc::clone(&self.routes)));
        Waiters::announced(|notifier| Arc::new(Subscriber::new(announcer, thread_name, notifier)))
    }
}

/// Releases are announced on sharded channels, on the master of the channel's slot.
struct SlotMasters(Arc<Routes>);

impl Announcer for SlotMasters {
    /// By the slot map as it is: the waiters ask with their lock held, so this never reads the
    /// map again (a waiter's attempt, made before it watches, has read it). A channel of a slot
    /// the map does not know is not subscribed; its waiters look at their lock on their own.
    fn server_of(&self, channel: &str) -> Option<(String, Arc<Pool>)> {
        let node = self.0.known(slots::slot(channel))?;
        Some((node.0.to_string(), node.1))
    }

    fn sharded(&self) -> bool {
        true
    }
}
