//! [`LockState`]: a lock as Redis holds it, for operators and tools.

use std::time::Duration;

/// A lock as Redis holds it, from [`Lock::inspect`](crate::Lock::inspect), read in one
/// pipeline. It also describes keys that hold something a lock cannot use, rather than fail:
/// see [`LockState::problems`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockState {
    /// The lock's name.
    pub name: String,
    /// The server that answered for it (for a cluster, the master of its slot), password
    /// hidden.
    pub node: Option<String>,
    /// Owner ids holding it, with their hold counts: empty if the lock is free.
    pub holders: Vec<(String, u64)>,
    /// The remaining lease, if it is held (`None`: free, or held without expiry).
    pub ttl: Option<Duration>,
    /// The fencing token of the hold that holds the lock now, if one does.
    pub hold_token: Option<u64>,
    /// The last fencing token handed out for this name, if any ever was.
    pub last_token: Option<u64>,
    /// What is wrong with the lock's keys, if anything: a key of another type, a fencing counter
    /// a lock cannot use. Empty for a sound lock.
    pub problems: Vec<String>,
}

impl LockState {
    pub(crate) fn empty(name: &str) -> LockState {
        LockState {
            name: name.to_owned(),
            node: None,
            holders: Vec::new(),
            ttl: None,
            hold_token: None,
            last_token: None,
            problems: Vec::new(),
        }
    }

    /// Whether anyone holds the lock.
    pub fn is_held(&self) -> bool {
        !self.holders.is_empty()
    }
}
