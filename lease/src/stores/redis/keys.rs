//! Key layout. Every key of one lock shares the lock name as its `{hash tag}`, so that in Redis
//! Cluster they live in one slot and one script may touch them all.

use crate::error::{Error, Result};

/// The longest lock name or key prefix, in bytes: a key is sent with every call, and a name
/// longer than this is a mistake rather than a lock.
pub(crate) const MAX_NAME: usize = 1024;

/// Which primitive a name's keys serve, and how one acquisition takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A lock: one hold at a time, reentrant.
    Lock,
    /// A lock granted in the order its waiters asked, across clients (a queue in Redis).
    Fair,
    /// A semaphore of `permits`, each acquisition taking `take` of them in one hold.
    Semaphore { permits: u32, take: u32 },
    /// The shared side of a read-write lock.
    Read,
    /// The exclusive side of a read-write lock.
    Write,
}

impl Kind {
    /// Whether holds live in keys of their own beside a set of holds (a semaphore, a read-write
    /// lock), rather than in the one lock hash.
    pub(crate) fn shared(self) -> bool {
        matches!(self, Kind::Semaphore { .. } | Kind::Read | Kind::Write)
    }

    /// Whether an owner's acquisition re-enters the hold it has: not a semaphore's, where each
    /// acquisition takes permits of its own.
    pub(crate) fn reentrant(self) -> bool {
        !matches!(self, Kind::Semaphore { .. })
    }

    /// Whether a release may hand the lock straight to a waiting thread of its client: only a
    /// plain lock's (a fair lock's next holder is the queue's head, and a shared hold's release
    /// frees what several may be waiting for).
    pub(crate) fn grants(self) -> bool {
        self == Kind::Lock
    }

    /// Whether the threads of one client take turns to contend in Redis. A fair lock's waiters
    /// each stand in its queue in Redis instead, in the order they asked.
    pub(crate) fn queues_locally(self) -> bool {
        self != Kind::Fair
    }

    /// Whether a waiting acquisition leaves a mark in Redis that must be withdrawn when it ends
    /// without the lock: a fair lock's place in the queue, a writer's claim to go before new
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
        }
    }
}

/// The Redis names belonging to one lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LockKeys {
    /// The lock's name as the caller gave it.
    pub(crate) name: String,
    /// The primitive.
    pub(crate) kind: Kind,
    /// What the client's own bookkeeping (holds re-entered, the local queue) knows the
    /// primitive by: the name, and the side of a read-write lock, or a semaphore.
    pub(crate) scope: String,
    /// A lock: hash of owner -> hold count, and the hold's id, token and acquisitions (fields
    /// starting with ':'), with the lease as its TTL. A semaphore or read-write lock: sorted set
    /// of its holds (see `scripts/shared.lua`), each hold a hash of its own, as a lock's.
    pub(crate) lock: String,
    /// Counter: the last fencing token handed out. Never expires.
    pub(crate) fence: String,
    /// String: the id of the acquisition whose release last freed the lock, for 60 s, so that a
    /// release retried after a lost reply is told it was applied.
    pub(crate) released: String,
    /// Pub/sub channel announcing that the lock was freed.
    pub(crate) channel: String,
    /// A fair lock's queue: list of waiting owners, in the order they asked.
    pub(crate) queue: String,
    /// A fair lock's queue: sorted set of waiting owners by when their place lapses (ms on the
    /// server's clock).
    pub(crate) queue_until: String,
    /// A read-write lock: string naming the writer that waits, which new readers let go
    /// first; it lapses if the writer stops asking.
    pub(crate) writer: String,
    /// String, on a cluster only: the configuration epoch of the node serving the slot, beside
    /// its replication id (`<replid>:<epoch>`), so that the scripts read `CLUSTER INFO` once per
    /// term of a primary rather than at every acquisition. Never expires.
    pub(crate) epoch: String,
}

/// What the client's own bookkeeping knows the primitive `kind` named `name` by. Names hold no
/// braces, so no name's scope is another's.
pub(crate) fn scope(name: &str, kind: Kind) -> String {
    match kind {
        Kind::Lock | Kind::Fair => name.to_owned(),
        Kind::Semaphore { .. } => format!("{name}{{semaphore}}"),
        Kind::Read => format!("{name}{{read}}"),
        Kind::Write => format!("{name}{{write}}"),
    }
}

/// Checks a key prefix a builder was given: braces would break the hash tag.
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

impl LockKeys {
    /// The keys of the lock `name`.
    pub(crate) fn new(prefix: &str, name: &str) -> Result<Self> {
        Self::of(prefix, name, Kind::Lock)
    }

    /// The keys of the primitive `kind` named `name`. A lock and a fair lock of one name are one
    /// lock (the fair one's waiters queue); a semaphore or read-write lock of a lock's name finds
    /// a key of another type.
    pub(crate) fn of(prefix: &str, name: &str, kind: Kind) -> Result<Self> {
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
                "lock name {name:?} must not contain braces: they delimit the hash tag"
            )));
        }
        let base = format!("{prefix}{{{name}}}");
        Ok(LockKeys {
            name: name.to_owned(),
            kind,
            scope: scope(name, kind),
            lock: base.clone(),
            queue: format!("{base}:queue"),
            queue_until: format!("{base}:queue:until"),
            writer: format!("{base}:writer"),
            fence: format!("{base}:fence"),
            released: format!("{base}:released"),
            channel: format!("{base}:freed"),
            epoch: format!("{base}:epoch"),
        })
    }

    /// The same primitive's keys for an acquisition of another kind (a semaphore's, taking
    /// another number of permits).
    pub(crate) fn with_kind(&self, kind: Kind) -> LockKeys {
        LockKeys {
            kind,
            scope: scope(&self.name, kind),
            ..self.clone()
        }
    }

    /// The key that holds the hold `hold`: the lock's own, or a shared primitive's hold key.
    pub(crate) fn hold_key(&self, hold: &str) -> String {
        if self.kind.shared() {
            format!("{}:h:{hold}", self.lock)
        } else {
            self.lock.clone()
        }
    }

    /// A shared primitive's release log of the hold `hold` (see `keys.released`).
    pub(crate) fn hold_released(&self, hold: &str) -> String {
        format!("{}:r:{hold}", self.lock)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_shares_the_hash_tag() {
        let keys = LockKeys::new("app:", "jobs/nightly").expect("valid");
        assert_eq!(keys.lock, "app:{jobs/nightly}");
        let semaphore = LockKeys::of(
            "app:",
            "jobs/nightly",
            Kind::Semaphore {
                permits: 2,
                take: 1,
            },
        )
        .expect("valid");
        let hold = semaphore.hold_key("h1");
        for key in [
            &keys.fence,
            &keys.released,
            &keys.channel,
            &keys.epoch,
            &keys.queue,
            &hold,
        ] {
            assert!(key.starts_with("app:{jobs/nightly}:"), "{key}");
        }
    }

    #[test]
    fn empty_braced_and_huge_names_are_refused() {
        for name in ["", "a{b}", &"x".repeat(MAX_NAME + 1)] {
            assert!(
                matches!(LockKeys::new("", name), Err(Error::InvalidArgument(_))),
                "{name:.20}"
            );
        }
        assert!(LockKeys::new("", &"x".repeat(MAX_NAME)).is_ok());
    }
}
