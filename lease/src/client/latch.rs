//! [`Client::latch`]: the count-down latches of a client, apart from its locks.

use super::Client;
use crate::backend::{Kind, LockId};
use crate::error::Result;
use std::sync::Arc;

impl Client {
    /// A count-down latch by name (names as for [`Client::lock`]; the latch is not the lock of
    /// the same name): see [`Latch`](crate::Latch). On one server, Sentinel, Cluster,
    /// ZooKeeper (whose servers must offer TTL nodes) and PostgreSQL.
    ///
    /// ```no_run
    /// # let client = redis_lease::Client::open("redis://127.0.0.1:6379")?;
    /// let ready = client.latch("deploy/ready")?;
    /// ready.set_count(2)?;
    /// # Ok::<(), redis_lease::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a name
    /// [`Client::lock`] refuses, or on RedLock.
    pub fn latch(&self, name: &str) -> Result<crate::Latch> {
        let backend = self.core.backend();
        let place = backend.place(&LockId::new(name, Kind::Latch)?)?;
        crate::backend::needs(&*place, backend.address())?;
        Ok(crate::Latch::new(Arc::clone(&self.core), place))
    }
}
