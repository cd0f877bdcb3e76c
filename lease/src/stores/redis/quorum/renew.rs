//! RedLock's renewals: one batched call to every master at once, counted against the quorum.

use crate::backend::{Renewal, Renewed, Renewer};
use crate::stores::redis::fanout::{self, Answer, Master};
use crate::stores::redis::scripts;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Renewals over several masters: one batched call to every master at once; a lease is renewed
/// when a quorum extended it, and gone when too few still could.
pub(super) struct QuorumRenewer {
    pub(super) masters: Arc<Vec<Master>>,
    pub(super) quorum: usize,
    pub(super) node_timeout: Duration,
}

impl Renewer for QuorumRenewer {
    fn renew(&mut self, leases: &[Renewal<'_>]) -> Vec<Renewed> {
        let call = scripts::renew(leases);
        let deadline = Instant::now() + self.node_timeout;
        let masters: Vec<&Master> = self.masters.iter().collect();
        let answers = fanout::exchange(&masters, &call, deadline, &[], &fanout::all_replies);
        let mut extended = vec![0usize; leases.len()];
        let mut failed = 0;
        for answer in &answers {
            match answer {
                Answer::Reply(reply) => match scripts::parse_renew(reply, leases.len()) {
                    Ok(flags) => {
                        for (count, yes) in extended.iter_mut().zip(flags) {
                            *count += usize::from(yes);
                        }
                    }
                    Err(_) => failed += 1,
                },
                Answer::Failed(_) | Answer::Silent => failed += 1,
            }
        }
        if failed > 0 {
            log::warn!(
                "renewing {} leases: {failed} of {} masters did not answer",
                leases.len(),
                self.masters.len()
            );
        }
        extended
            .into_iter()
            .map(|count| {
                if count >= self.quorum {
                    Renewed::Yes
                } else if count + failed < self.quorum {
                    Renewed::Gone
                } else {
                    Renewed::Failed
                }
            })
            .collect()
    }
}
