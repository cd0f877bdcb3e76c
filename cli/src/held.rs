//! What `lease run` holds while the command runs: a lock's hold, or a term of an election's
//! leadership. Both are renewed, lost and told alike; they differ in how they end.

use redis_lease::{Guard, Leadership, LeaseGuard};

pub enum Held {
    Lock(LeaseGuard),
    Leader(Leadership),
}

impl Held {
    pub fn name(&self) -> &str {
        match self {
            Held::Lock(guard) => guard.name(),
            Held::Leader(leadership) => leadership.name(),
        }
    }

    /// The fencing token the command gets: the hold's, or the term.
    pub fn token(&self) -> Option<u64> {
        match self {
            Held::Lock(guard) => guard.fencing_token(),
            Held::Leader(leadership) => Some(leadership.term()),
        }
    }

    /// The owner id the command is told of: a lock's (an election's is its campaign's own).
    pub fn owner(&self) -> Option<&str> {
        match self {
            Held::Lock(guard) => Some(guard.owner()),
            Held::Leader(_) => None,
        }
    }

    /// Stops renewing without a command sent: it lapses with its lease.
    pub fn abandon(self) {
        match self {
            Held::Lock(guard) => guard.abandon(),
            Held::Leader(leadership) => leadership.abandon(),
        }
    }

    /// Releases the lock, or resigns the leadership.
    pub fn release(self) -> redis_lease::Result<()> {
        match self {
            Held::Lock(guard) => guard.unlock(),
            Held::Leader(leadership) => Guard::unlock(leadership),
        }
    }
}

/// What every hold offers (lost or not, until when it is valid, the lost signal), whichever
/// primitive made it.
impl std::ops::Deref for Held {
    type Target = dyn Guard + 'static;

    fn deref(&self) -> &(dyn Guard + 'static) {
        match self {
            Held::Lock(guard) => guard,
            Held::Leader(leadership) => leadership,
        }
    }
}
