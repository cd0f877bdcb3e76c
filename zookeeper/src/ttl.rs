//! Nodes with a TTL: persistent nodes the server deletes once they are left unchanged, and
//! childless, for a time (`createTTL`).

use super::path;
use super::proto::{Reply, Request};
use super::session::Call;
use super::{unexpected, Error, Session, Stat};
use std::time::{Duration, Instant};

/// The longest TTL a node may have: the server keeps it in the low 40 bits of the node's
/// ephemeral owner.
const MAX_TTL_MS: i64 = (1 << 40) - 1;

impl Session {
    /// Creates a persistent node that the server deletes once it has gone unchanged (its data
    /// not set) and childless for `ttl` (1 ms to 2^40 - 1 ms), as `CreateMode.PERSISTENT_WITH_TTL`
    /// does; returns its path and stat. The server looks for such nodes periodically (every
    /// minute by default, its `znode.container.checkIntervalMs`), so one may outlive its TTL by
    /// that much. Only servers started with `zookeeper.extendedTypesEnabled=true` (a Java system
    /// property, or `extendedTypesEnabled=true` in `zoo.cfg`) offer it.
    ///
    /// # Errors
    ///
    /// `Unimplemented` where the servers do not offer TTL nodes, `NodeExists`, `NoNode` (no
    /// parent), `NoAuth`, `BadPath` (also for a TTL out of range), or a session or connection
    /// error.
    pub fn create_ttl(
        &self,
        path: &str,
        data: &[u8],
        ttl: Duration,
        deadline: Instant,
    ) -> Result<(String, Stat), Error> {
        path::check(path, false)?;
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        if !(1..=MAX_TTL_MS).contains(&ttl_ms) {
            return Err(Error::BadPath(format!(
                "{path:?}: a TTL must be from 1 ms to {MAX_TTL_MS} ms, not {ttl:?}"
            )));
        }
        let request = Request::CreateTtl {
            path: self.shared().chroot.prefix(path),
            data: data.to_vec(),
            ttl_ms,
        };
        match self.shared().call(Call::new(request), deadline)? {
            Reply::Created(created, stat) => Ok((self.shared().chroot.strip(&created), stat)),
            other => Err(unexpected(other)),
        }
    }
}
