//! RedLock over independent Redis masters: a hold stands while a quorum of them (by default
//! N/2+1) keep it.
//!
//! An attempt sends the acquire script to every master at once, from the calling thread, with a
//! per-node timeout far below the lease; it wins if a quorum granted it and the lease, less the
//! time the attempt took and the drift allowance, is still ahead. A lost attempt is undone on every
//! master that may have granted it. Renewals go to every master in one batched call each; a lease
//! is renewed when a quorum extended it. There are no fencing tokens: no single counter exists
//! across independent masters.
//!
//! The algorithm is written once, over the masters (`masters.rs`, `fanout.rs`): this file is the
//! backend and what it offers, `place.rs` a lock's calls.

mod build;
mod masters;
mod place;
mod renew;

pub(crate) use build::build;

use crate::backend::{Backend, Kind, LockId, Place, Renewer};
use crate::error::{Error, Result};
use crate::stores::redis::keys::LockKeys;
use crate::waiters::Waiters;
use masters::Quorum;
use place::QuorumPlace;
use renew::QuorumRenewer;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A RedLock client's locks, under a key prefix.
pub(crate) struct RedLock {
    quorum: Arc<Quorum>,
    prefix: String,
}

impl RedLock {
    pub(crate) fn new(quorum: Quorum, prefix: &str) -> RedLock {
        RedLock {
            quorum: Arc::new(quorum),
            prefix: prefix.to_owned(),
        }
    }
}

impl Backend for RedLock {
    /// Plain locks only: see [`admit`].
    fn place(&self, id: &LockId) -> Result<Arc<dyn Place>> {
        admit(id.kind)?;
        Ok(Arc::new(QuorumPlace {
            id: id.clone(),
            keys: LockKeys::of(&self.prefix, id),
            quorum: Arc::clone(&self.quorum),
        }))
    }

    fn fenced(&self) -> bool {
        false
    }

    fn address(&self) -> &str {
        &self.quorum.place
    }

    fn call_timeout(&self) -> Duration {
        self.quorum.node_timeout
    }

    /// A pause from 1 ms to the retry delay, so that contenders fall out of step.
    fn pause(&self, _: Option<Duration>) -> Duration {
        let mut state = self.quorum.random.lock();
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        let span = u64::try_from(self.quorum.retry_delay.as_micros())
            .unwrap_or(u64::MAX)
            .max(1000);
        Duration::from_micros(1000 + *state % (span - 999))
    }

    /// A quorum of the masters says who they are, each within the node timeout.
    fn ping(&self, deadline: Instant) -> Result<()> {
        let deadline = self.quorum.deadline(deadline);
        let mut last_error = None;
        let mut answered = 0;
        for master in self.quorum.masters.iter() {
            match master.pool.identify(deadline) {
                Ok(_) => answered += 1,
                Err(error) => last_error = Some(error),
            }
        }
        if answered >= self.quorum.quorum {
            return Ok(());
        }
        let why = last_error.map_or_else(String::new, |error| format!(" (last: {error})"));
        Err(Error::Unavailable {
            server: None,
            cause: crate::error::Cause::text(
                "redis",
                format!(
                    "{answered} of {} masters answered, fewer than the quorum of {}{why}",
                    self.quorum.masters.len(),
                    self.quorum.quorum
                ),
            ),
        })
    }

    fn renewer(&self) -> Box<dyn Renewer> {
        Box::new(QuorumRenewer {
            masters: Arc::clone(&self.quorum.masters),
            quorum: self.quorum.quorum,
            node_timeout: self.quorum.node_timeout,
        })
    }

    fn waiters(&self, _: String) -> Result<Waiters> {
        Ok(Waiters::local())
    }
}

/// Which primitives a RedLock offers: plain locks only.
fn admit(kind: Kind) -> Result<()> {
    match kind {
        Kind::Lock => Ok(()),
        Kind::Leader => Err(Error::InvalidArgument(
            "a leader election is not offered on RedLock: a term is a fencing token, which \
             needs one counter, and RedLock's masters each keep their own"
                .into(),
        )),
        Kind::Latch => Err(Error::InvalidArgument(
            "a latch is not offered on RedLock: its masters would each keep a count of their \
             own, and counted down on a quorum of them it would open on some and not others"
                .into(),
        )),
        Kind::Limiter => Err(Error::InvalidArgument(format!(
            "a rate limiter is not offered on RedLock: its masters would each count grants by \
             their own clocks, and a quorum of them does not bound the grants as one store \
             does; {}",
            crate::backend::LIMITS_NEED
        ))),
        other => Err(Error::InvalidArgument(format!(
            "a {} is not offered on RedLock: its masters would each keep their own holds or \
             line, and a quorum of them does not bound its holders as one server does",
            other.label()
        ))),
    }
}
