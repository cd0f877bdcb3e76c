//! A count-down latch on ZooKeeper: a persistent node with a TTL, `/lease-latches/<name>`, whose
//! data is its count and round (`<count> <round>`), changed by compare-and-set on its version
//! and watched by its waiters. ZooKeeper deletes it once it has gone unchanged for its expiry
//! (checked every minute by default), which needs TTL nodes: servers started with
//! `zookeeper.extendedTypesEnabled=true`. A node's TTL is the one it was made with: a latch
//! keeps the expiry of its first setting until it lapses.

use super::ensemble::unavailable;
use super::{paths, LockNode};
use crate::backend::{LatchRead, Latches};
use crate::error::{Cause, Error, Result};
use std::time::{Duration, Instant};
use zookeeper_blocking::{Error as ZkError, Session, Stat};

impl Latches for LockNode {
    fn set_count(
        &self,
        count: u32,
        round: &str,
        expiry: Duration,
        deadline: Instant,
    ) -> Result<bool> {
        let session = self.zk.ensemble.session(deadline)?;
        let data = text(count, round);
        loop {
            let Some((read, stat)) = read(&session, &self.path, false, deadline)? else {
                if let Err(error) = session.ensure_path(paths::parent(&self.path), deadline) {
                    return Err(unavailable(&error));
                }
                match session.create_ttl(&self.path, data.as_bytes(), expiry, deadline) {
                    Ok(_) => return Ok(true),
                    // Made meanwhile: look at it.
                    Err(ZkError::NodeExists) => continue,
                    Err(ZkError::Unimplemented) => return Err(no_ttl_nodes(&session)),
                    Err(error) => return Err(unavailable(&error)),
                }
            };
            if read.count > 0 {
                return Ok(false);
            }
            match session.set_data(&self.path, data.as_bytes(), Some(stat.version), deadline) {
                Ok(_) => return Ok(true),
                // Changed or lapsed meanwhile: look again.
                Err(ZkError::BadVersion | ZkError::NoNode) => continue,
                Err(error) => return Err(unavailable(&error)),
            }
        }
    }

    fn count_down(&self, _expiry: Duration, deadline: Instant) -> Result<u32> {
        let session = self.zk.ensemble.session(deadline)?;
        loop {
            let Some((read, stat)) = read(&session, &self.path, false, deadline)? else {
                return Ok(0);
            };
            let Some(round) = read.round.filter(|_| read.count > 0) else {
                return Ok(0);
            };
            let left = read.count - 1;
            let data = text(left, &round);
            match session.set_data(&self.path, data.as_bytes(), Some(stat.version), deadline) {
                Ok(_) => return Ok(left),
                Err(ZkError::BadVersion) => continue,
                Err(ZkError::NoNode) => return Ok(0),
                Err(error) => return Err(unavailable(&error)),
            }
        }
    }

    fn read(&self, watch: bool, deadline: Instant) -> Result<LatchRead> {
        let session = self.zk.ensemble.session(deadline)?;
        Ok(read(&session, &self.path, watch, deadline)?
            .map_or_else(LatchRead::absent, |(read, _)| read))
    }
}

/// The latch at `path` and its node's stat, or `None` if it is absent. With `watch`, a watch is
/// armed either way: on its data, or on its creation.
fn read(
    session: &Session,
    path: &str,
    watch: bool,
    deadline: Instant,
) -> Result<Option<(LatchRead, Stat)>> {
    loop {
        match session.get_data(path, watch, deadline) {
            Ok((data, stat)) => {
                let text = String::from_utf8_lossy(&data);
                return Ok(Some((LatchRead::parse(&text, path, None)?, stat)));
            }
            Err(ZkError::NoNode) if watch => match session.exists(path, true, deadline) {
                Ok(None) => return Ok(None),
                // Made between the two: read it.
                Ok(Some(_)) => continue,
                Err(error) => return Err(unavailable(&error)),
            },
            Err(ZkError::NoNode) => return Ok(None),
            Err(error) => return Err(unavailable(&error)),
        }
    }
}

/// The data of a latch counting `count` in the round `round` (as [`LatchRead::parse`] reads it).
fn text(count: u32, round: &str) -> String {
    format!("{count} {round}")
}

/// The refusal of a latch by an ensemble without TTL nodes.
fn no_ttl_nodes(session: &Session) -> Error {
    Error::Refused {
        server: session.server(),
        cause: Cause::text(
            "zookeeper",
            "a latch is a node with a TTL, which this ensemble does not offer: start its \
             servers with zookeeper.extendedTypesEnabled=true (extendedTypesEnabled=true in \
             zoo.cfg)",
        ),
    }
}
