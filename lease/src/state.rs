//! [`LockState`]: a lock as its store holds it, for operators and tools.

use std::time::Duration;

/// A lock as its store holds it, from [`Lock::inspect`](crate::Lock::inspect), read in one
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
    /// On ZooKeeper, the session that holds the lock (its id, in hex); `None` on Redis.
    pub holder_session: Option<String>,
    /// On ZooKeeper, when the holder's node was created (on the server's clock); `None` on
    /// Redis.
    pub held_since: Option<std::time::SystemTime>,
    /// On ZooKeeper, how many contenders wait behind the holder; `None` on Redis, where
    /// waiters do not queue in the server.
    pub waiting: Option<u64>,
    /// A semaphore's permits, as its last acquisition declared them; `None` for a lock.
    pub permits: Option<u64>,
    /// A semaphore's permits held now; `None` for a lock.
    pub permits_in_use: Option<u64>,
    /// On a leader election, the value its leader proclaimed, if one leads and has; `None`
    /// for every other primitive.
    pub proclaimed: Option<String>,
    /// Whether a fencing counter read for this lock is at the largest token.
    exhausted: bool,
    /// The lock's key, if it holds another type than the primitive's.
    pub(crate) foreign: Option<String>,
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
            holder_session: None,
            held_since: None,
            waiting: None,
            permits: None,
            permits_in_use: None,
            proclaimed: None,
            exhausted: false,
            foreign: None,
        }
    }

    /// Records that the fencing counter is at the largest token, with `problem` saying so.
    pub(crate) fn mark_exhausted(&mut self, problem: String) {
        self.exhausted = true;
        self.problems.push(problem);
    }

    /// Takes in what another server (a master of RedLock's) says of the same lock's keys: its
    /// problems, named by `shown`, and whether its counter is exhausted.
    pub(crate) fn add_view(&mut self, shown: &str, view: LockState) {
        self.exhausted |= view.exhausted;
        self.problems.extend(
            view.problems
                .into_iter()
                .map(|problem| format!("{shown}: {problem}")),
        );
    }

    /// Whether anyone holds the lock.
    pub fn is_held(&self) -> bool {
        !self.holders.is_empty()
    }

    /// Whether the fencing counter has reached the largest token (2^63 - 1): no acquisition
    /// of this name can succeed (each fails with [`Error::BadValue`](crate::Error::BadValue))
    /// until the counter is deleted or set lower, and [`LockState::last_token`] is `None`. On
    /// RedLock, whether any master's counter is; the [`problems`](LockState::problems) say which.
    pub fn tokens_exhausted(&self) -> bool {
        self.exhausted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counter_at_the_largest_token_is_exhausted_on_any_deployment() {
        let mut state = LockState::empty("worn");
        assert!(!state.tokens_exhausted());
        let mut master = LockState::empty("worn");
        master.problems.push("not a whole number".into());
        state.add_view("redis://a:6379", master.clone());
        assert!(!state.tokens_exhausted());
        master.mark_exhausted("at the largest token".into());
        state.add_view("redis://b:6379", master);
        assert!(state.tokens_exhausted());
        assert_eq!(state.problems.len(), 3, "{:?}", state.problems);
        assert!(state.problems[2].starts_with("redis://b:6379: "));
    }
}
