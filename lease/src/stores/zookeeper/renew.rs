//! Renewals on ZooKeeper: the session is every hold's lease, so a renewal is an answered
//! question about the hold's node. The server answering proves the session alive when the
//! question was sent, and the ensemble expires a session no sooner than its timeout after it
//! last heard from it; so the watchdog's deadline (that send time, plus the lease, which is at
//! most the session timeout, less the drift allowance) falls before the ensemble can hand the
//! lock on. All of a batch's questions go out together, in one round trip.

use super::ensemble::Ensemble;
use super::table::Table;
use crate::backend::{Renewal, Renewed, Renewer};
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};
use zookeeper_blocking::Error as ZkError;

pub(super) struct SessionRenewer {
    pub(super) ensemble: Arc<Ensemble>,
    pub(super) table: Arc<Mutex<Table>>,
    pub(super) call_timeout: Duration,
}

impl Renewer for SessionRenewer {
    fn renew(&mut self, leases: &[Renewal<'_>]) -> Vec<Renewed> {
        let Some(session) = self.ensemble.current() else {
            // No session, or it expired: every hold made through it is gone.
            return vec![Renewed::Gone; leases.len()];
        };
        let sid = session.session_id();
        let nodes: Vec<Option<String>> = {
            let table = self.table.lock();
            leases
                .iter()
                .map(|lease| {
                    table
                        .held
                        .get(lease.hold)
                        .filter(|held| held.session == sid)
                        .map(|held| held.node.path.clone())
                })
                .collect()
        };
        let paths: Vec<String> = nodes.iter().flatten().cloned().collect();
        let mut answers = session
            .exists_many(&paths, Instant::now() + self.call_timeout)
            .into_iter();
        nodes
            .iter()
            .map(|node| {
                if node.is_none() {
                    return Renewed::Gone;
                }
                match answers.next() {
                    Some(Ok(Some(stat))) if stat.ephemeral_owner == sid => Renewed::Yes,
                    Some(Ok(_) | Err(ZkError::SessionExpired | ZkError::Closed)) => Renewed::Gone,
                    Some(Err(error)) => {
                        log::debug!("renewal on zookeeper failed: {error}");
                        Renewed::Failed
                    }
                    None => Renewed::Failed,
                }
            })
            .collect()
    }
}
