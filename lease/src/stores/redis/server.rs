//! One Redis server: each attempt, release and renewal is one script call on a pooled
//! connection, and releases are announced by pub/sub. Its calls run through the route of one
//! server's pool (which a Sentinel's primary shares); here are how its pool is built, and its
//! renewals and waiters.

use crate::backend::{Renewal, Renewed, Renewer};
use crate::error::{Error, Result};
use crate::stores::redis::conn::{Conn, Endpoint};
use crate::stores::redis::fencing::Epoch;
use crate::stores::redis::pool::{Fixed, Pool};
use crate::stores::redis::pubsub::{OneServer as OneServerAnnouncer, Subscriber};
use crate::stores::redis::scripts;
use crate::stores::redis::settings::RedisSettings;
use crate::waiters::Waiters;
use std::sync::Arc;

/// A client of the one server at `endpoints` (the builder's one URL). It connects to nothing
/// yet: an unreachable server shows on the first lock operation.
pub(crate) fn build(settings: &RedisSettings, mut endpoints: Vec<Endpoint>) -> Result<Arc<Pool>> {
    let acks = settings.primary_acks()?;
    let endpoint = endpoints
        .pop()
        .ok_or_else(|| Error::InvalidArgument("a client needs the URL of a server".into()))?;
    let pool = settings.pool(Box::new(Fixed::new(endpoint, Epoch::None)));
    Ok(Arc::new(pool.with_acks(acks)))
}

/// The renewals of leases on the server `pool` reaches, over a connection of their own.
pub(crate) fn renewer(pool: Arc<Pool>) -> Box<dyn Renewer> {
    Box::new(OneServer {
        pool,
        connection: None,
    })
}

/// The waiters of a client of the server `pool` reaches, woken by its pub/sub subscriber on a
/// thread named `thread_name`.
pub(crate) fn waiters(pool: Arc<Pool>, thread_name: String) -> Waiters {
    let announcer = Arc::new(OneServerAnnouncer(pool));
    Waiters::announced(|notifier| Arc::new(Subscriber::new(announcer, thread_name, notifier)))
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
