//! [`LockId`]: a lock as the core names it, in no store's terms: its name, the primitive it
//! serves ([`Kind`]) and how the client's own bookkeeping knows it (its scope).

use crate::error::{Error, Result};

/// The longest lock name or key prefix, in bytes: it is sent with every call, and a name longer
/// than this is a mistake rather than a lock.
pub(crate) const MAX_NAME: usize = 1024;

/// Which primitive a name serves, and how one acquisition takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A lock: one hold at a time, reentrant.
    Lock,
    /// A lock granted in the order its waiters asked, across clients.
    Fair,
    /// A semaphore of `permits`, each acquisition taking `take` of them in one hold.
    Semaphore { permits: u32, take: u32 },
    /// The shared side of a read-write lock.
    Read,
    /// The exclusive side of a read-write lock.
    Write,
    /// A leader election: a lock whose hold is a term of leadership, each term a new hold in
    /// the store (never handed from thread to thread), with the value its leader proclaims.
    Leader,
}

impl Kind {
    /// Whether several holds may hold at once (a semaphore, a read-write lock), each a hold of
    /// its own, rather than one hold at a time.
    pub(crate) fn shared(self) -> bool {
        matches!(self, Kind::Semaphore { .. } | Kind::Read | Kind::Write)
    }

    /// Whether an owner's acquisition re-enters the hold it has: not a semaphore's, where each
    /// acquisition takes permits of its own.
    pub(crate) fn reentrant(self) -> bool {
        !matches!(self, Kind::Semaphore { .. })
    }

    /// Whether a release may hand the lock straight to a waiting thread of its client: only a
    /// plain lock's (a fair lock's next holder is the first in its line, and a shared hold's
    /// release frees what several may be waiting for).
    pub(crate) fn grants(self) -> bool {
        self == Kind::Lock
    }

    /// Whether the threads of one client take turns to contend in the store. A fair lock's
    /// waiters each stand in its line in the store instead, in the order they asked.
    pub(crate) fn queues_locally(self) -> bool {
        self != Kind::Fair
    }

    /// Whether a waiting acquisition leaves a mark in the store that must be withdrawn when it
    /// ends without the lock: a fair lock's place in the line, a writer's claim to go before new
    /// readers.
    pub(crate) fn marks_waiting(self) -> bool {
        matches!(self, Kind::Fair | Kind::Write)
    }

    /// The primitive, as messages name it.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Kind::Lock => "lock",
            Kind::Fair => "fair lock",
            Kind::Semaphore { .. } => "semaphore",
            Kind::Read => "read lock",
            Kind::Write => "write lock",
            Kind::Leader => "leader election",
        }
    }
}

/// A lock as the core names it: what a backend builds its [`Place`](super::Place) from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LockId {
    /// The name as the caller gave it.
    pub(crate) name: String,
    /// The primitive, and how an acquisition takes it.
    pub(crate) kind: Kind,
    /// What the client's own bookkeeping (holds re-entered, the local queue) knows the
    /// primitive by: the name, and the side of a read-write lock, or a semaphore.
    pub(crate) scope: String,
}

impl LockId {
    /// The primitive `kind` named `name`: 1 to [`MAX_NAME`] bytes, without braces (which keep
    /// every scope apart, and which Redis reads as a hash tag). A store may refuse more.
    pub(crate) fn new(name: &str, kind: Kind) -> Result<LockId> {
        if name.is_empty() {
            return Err(Error::InvalidArgument(
                "a lock name must not be empty".into(),
            ));
        }
        if name.len() > MAX_NAME {
            return Err(Error::InvalidArgument(format!(
                "a lock name must not be longer than {MAX_NAME} bytes"
            )));
        }
        if name.contains(['{', '}']) {
            return Err(Error::InvalidArgument(format!(
                "lock name {name:?} must not contain braces"
            )));
        }
        Ok(LockId {
            name: name.to_owned(),
            kind,
            scope: scope(name, kind),
        })
    }

    /// The same primitive, for acquisitions of another kind (a semaphore's, taking another
    /// number of permits; a read-write lock's other side).
    pub(crate) fn with_kind(&self, kind: Kind) -> LockId {
        LockId {
            name: self.name.clone(),
            kind,
            scope: scope(&self.name, kind),
        }
    }
}

/// Checks a key prefix a builder was given: no braces (kept out of every scope and hash tag),
/// at most [`MAX_NAME`] bytes.
pub(crate) fn check_prefix(prefix: &str) -> Result<()> {
    if prefix.contains(['{', '}']) {
        return Err(Error::InvalidArgument(
            "the key prefix must not contain braces".into(),
        ));
    }
    if prefix.len() > MAX_NAME {
        return Err(Error::InvalidArgument(format!(
            "the key prefix is longer than {MAX_NAME} bytes"
        )));
    }
    Ok(())
}

/// What the client's own bookkeeping knows the primitive `kind` named `name` by. Names hold no
/// braces, so no name's scope is another's.
pub(crate) fn scope(name: &str, kind: Kind) -> String {
    match kind {
        Kind::Lock | Kind::Fair => name.to_owned(),
        Kind::Semaphore { .. } => format!("{name}{{semaphore}}"),
        Kind::Read => format!("{name}{{read}}"),
        Kind::Write => format!("{name}{{write}}"),
        Kind::Leader => format!("{name}{{leader}}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_braced_and_huge_names_are_refused() {
        for name in ["", "a{b}", &"x".repeat(MAX_NAME + 1)] {
            assert!(
                matches!(
                    LockId::new(name, Kind::Lock),
                    Err(Error::InvalidArgument(_))
                ),
                "{name:.20}"
            );
        }
        assert!(LockId::new(&"x".repeat(MAX_NAME), Kind::Lock).is_ok());
    }

    #[test]
    fn the_sides_and_the_semaphore_of_a_name_have_scopes_of_their_own() {
        let lock = LockId::new("jobs", Kind::Lock).expect("valid");
        let scopes = [
            lock.scope.clone(),
            lock.with_kind(Kind::Read).scope,
            lock.with_kind(Kind::Write).scope,
            lock.with_kind(Kind::Semaphore {
                permits: 2,
                take: 1,
            })
            .scope,
        ];
        for (i, a) in scopes.iter().enumerate() {
            for b in &scopes[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(lock.with_kind(Kind::Fair).scope, lock.scope);
    }
}
