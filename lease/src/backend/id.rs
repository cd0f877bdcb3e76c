//! [`LockId`]: a lock as the core names it, in no store's terms: its name, the primitive it
//! serves ([`Kind`]) and how the client's own bookkeeping knows it (its [`Scope`]).

use crate::error::{Error, Result};
use std::sync::Arc;

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
    /// A count-down latch: no holds, a count stored with it that its waiters wait to see at
    /// zero ([`Latches`](super::Latches)). Its place is never acquired: where a store's code
    /// sorts kinds by how they are held, a latch goes with the lock.
    Latch,
    /// A rate limiter: no holds, only grants the store counts by its own clock (see
    /// [`Limits`](super::Limits)); never acquired as a lock.
    Limiter,
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

    /// Whether the primitive is held: a lock's, a semaphore's, a read-write lock's or an
    /// election's hold, which a write may be checked against. A latch and a rate limiter have no
    /// holds.
    pub(crate) fn holds(self) -> bool {
        !matches!(self, Kind::Latch | Kind::Limiter)
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
            Kind::Latch => "latch",
            Kind::Limiter => "rate limiter",
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
    /// primitive by.
    pub(crate) scope: Scope,
}

impl LockId {
    /// The primitive `kind` named `name`: 1 to [`MAX_NAME`] bytes, without braces (which a
    /// store may use to keep its keys together). A store may refuse more.
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
            scope: Scope::new(name, kind),
        })
    }

    /// The same primitive, for acquisitions of another kind (a semaphore's, taking another
    /// number of permits; a read-write lock's other side).
    pub(crate) fn with_kind(&self, kind: Kind) -> LockId {
        LockId {
            name: self.name.clone(),
            kind,
            scope: self.scope.of_kind(kind),
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

/// What the client's own bookkeeping (holds re-entered, the local queue, the hand-off) knows a
/// primitive by: its name and which primitive of the name, or which side of it, it is; and, for
/// a waiter that queues in the store rather than in the client (a fair lock's), the waiter. Two
/// scopes are one only when all of these are, whatever the names hold.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct Scope {
    name: Arc<str>,
    side: Side,
    alone: Option<Arc<str>>,
}

/// Which primitive of a name a scope is: the lock and the fair lock of a name are one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Side {
    Lock,
    Semaphore,
    Read,
    Write,
    Leader,
    Latch,
    Limiter,
}

impl Scope {
    /// The scope of the primitive `kind` named `name`.
    pub(crate) fn new(name: &str, kind: Kind) -> Scope {
        Scope {
            name: Arc::from(name),
            side: Side::of(kind),
            alone: None,
        }
    }

    /// The same name's primitive of another kind.
    pub(crate) fn of_kind(&self, kind: Kind) -> Scope {
        Scope {
            name: Arc::clone(&self.name),
            side: Side::of(kind),
            alone: None,
        }
    }

    /// The scope of `owner` waiting on its own, apart from the primitive's other waiters.
    pub(crate) fn alone(&self, owner: &str) -> Scope {
        Scope {
            alone: Some(Arc::from(owner)),
            ..self.clone()
        }
    }
}

/// The name and the primitive, as messages show them: never a waiter's owner id, a credential.
impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let side = match self.side {
            Side::Lock => "lock",
            Side::Semaphore => "semaphore",
            Side::Read => "read lock",
            Side::Write => "write lock",
            Side::Leader => "leader election",
            Side::Latch => "latch",
            Side::Limiter => "rate limiter",
        };
        write!(f, "{side} {:?}", self.name)
    }
}

impl std::fmt::Debug for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope")
            .field("name", &self.name)
            .field("side", &self.side)
            .field("alone", &self.alone.is_some())
            .finish()
    }
}

impl Side {
    fn of(kind: Kind) -> Side {
        match kind {
            Kind::Lock | Kind::Fair => Side::Lock,
            Kind::Semaphore { .. } => Side::Semaphore,
            Kind::Read => Side::Read,
            Kind::Write => Side::Write,
            Kind::Leader => Side::Leader,
            Kind::Latch => Side::Latch,
            Kind::Limiter => Side::Limiter,
        }
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
        assert_ne!(lock.with_kind(Kind::Leader).scope, lock.scope);
        let (a, b) = (lock.scope.alone("a"), lock.scope.alone("b"));
        assert!(a != b && a != lock.scope && a == lock.scope.alone("a"));
    }
}
