//! Writes made only while a hold holds, on ZooKeeper: the caller's operations in one
//! transaction (`multi`) behind a check that the hold's node still exists, through the session
//! that made it. The node is ephemeral, and it holds until it goes: while it exists, the hold
//! holds.

use super::ensemble::unavailable;
use super::LockNode;
use crate::backend::WritesWhileHeld;
use crate::error::{Cause, Error, Result};
use crate::write::{wrong_kind, Write, Written};
use std::time::Instant;
use zookeeper_blocking::{Error as ZkError, Op};

impl WritesWhileHeld for LockNode {
    fn if_held(
        &self,
        owner: &str,
        hold: &str,
        write: &Write,
        deadline: Instant,
    ) -> Result<Option<Written>> {
        #[allow(unreachable_patterns)] // other kinds exist with the other stores' features
        let ops = match write {
            Write::Zk(ops) => ops,
            other => return Err(wrong_kind(other, &self.zk.address, "ZooKeeper operations")),
        };
        let held = self.zk.table.lock().held.get(hold).cloned();
        let Some(held) = held.filter(|held| held.owner == owner && !held.ending) else {
            return Ok(None);
        };
        let session = self.zk.ensemble.session(deadline)?;
        if session.session_id() != held.session {
            // Its session ended, and its node with it.
            return Ok(None);
        }
        let mut all = Vec::with_capacity(ops.len() + 1);
        all.push(Op::check(&held.node.path, None));
        all.extend(ops.iter().cloned());
        match session.multi(&all, deadline) {
            Ok(mut results) => {
                results.remove(0);
                Ok(Some(Written::Zk(results)))
            }
            Err(ZkError::Aborted { index: 0, error }) if *error == ZkError::NoNode => Ok(None),
            Err(ZkError::Aborted { index, error }) => Err(Error::Refused {
                server: session.server(),
                cause: Cause::text(
                    "zookeeper",
                    match index {
                        0 => format!(
                            "the check of the hold's node failed ({error}); nothing was written"
                        ),
                        _ => format!(
                            "operation {} of the write failed ({error}); nothing was written",
                            index - 1
                        ),
                    },
                ),
            }),
            Err(ZkError::BadPath(why)) => {
                Err(Error::InvalidArgument(format!("a write's path: {why}")))
            }
            Err(error) => Err(unavailable(&error)),
        }
    }
}
