//! The [`Backend`] of a PostgreSQL client: a place per lock, its renewals and its waiters, over
//! what its locks share (`shared.rs`).

use super::listen::{Listener, Silent};
use super::place::{key_of, PgPlace};
use super::renew::PgRenewer;
use super::shared::Shared;
use crate::backend::{Backend, LockId, Place, Renewer};
use crate::error::Result;
use crate::waiters::Waiters;
use postgres_blocking::Config;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest a waiter sleeps before looking at the lock again when nothing wakes it: a
/// release's announcement may be lost with the listening connection. It also sleeps no longer
/// than the holder's remaining lease.
const MAX_RECHECK: Duration = Duration::from_secs(1);

/// A PostgreSQL client's locks.
pub(crate) struct PgStore {
    pub(crate) shared: Arc<Shared>,
    /// The configuration of the listening connection.
    pub(crate) listen: Config,
}

impl Backend for PgStore {
    fn place(&self, id: &LockId) -> Result<Arc<dyn Place>> {
        Ok(Arc::new(PgPlace {
            key: key_of(&self.shared.prefix, id),
            id: id.clone(),
            shared: Arc::clone(&self.shared),
        }))
    }

    fn fenced(&self) -> bool {
        true
    }

    fn address(&self) -> &str {
        &self.shared.shown
    }

    fn call_timeout(&self) -> Duration {
        self.shared.call_timeout
    }

    fn pause(&self, ttl: Option<Duration>) -> Duration {
        ttl.unwrap_or(MAX_RECHECK)
            .clamp(Duration::from_millis(1), MAX_RECHECK)
    }

    fn renewer(&self) -> Box<dyn Renewer> {
        Box::new(PgRenewer::new(Arc::clone(&self.shared)))
    }

    fn waiters(&self, thread_name: String) -> Result<Waiters> {
        let shared = Arc::clone(&self.shared);
        let listen = self.listen.clone();
        let mut started = Ok(());
        let waiters = Waiters::announced(|notifier| {
            match Listener::start(shared, listen, notifier, thread_name) {
                Ok(listener) => listener,
                Err(error) => {
                    started = Err(error);
                    Arc::new(Silent)
                }
            }
        });
        started.map(|()| waiters)
    }

    fn ping(&self, deadline: Instant) -> Result<()> {
        self.shared.call(&self.shared.sql.schema, deadline, |conn| {
            conn.ping(deadline)
        })
    }
}
