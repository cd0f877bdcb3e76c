//! Key layout. Every key of one lock shares the lock name as its `{hash tag}`, so that in Redis
//! Cluster they live in one slot and one script may touch them all.

use crate::backend::{Kind, LockId};

/// The Redis names belonging to one lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LockKeys {
    /// The lock's name as the caller gave it.
    pub(crate) name: String,
    /// The primitive.
    pub(crate) kind: Kind,
    /// A lock: hash of owner -> hold count, and the hold's id, token and acquisitions (fields
    /// starting with ':'), with the lease as its TTL. A semaphore or read-write lock: sorted set
    /// of its holds (see `scripts/shared.lua`), each hold a hash of its own, as a lock's. A
    /// latch: hash of its count and round, with its expiry as its TTL (see
    /// `scripts/latch_set.lua`).
    pub(crate) lock: String,
    /// Counter: the last fencing token handed out. Never expires.
    pub(crate) fence: String,
    /// String: the id of the acquisition whose release last freed the lock, for 60 s, so that a
    /// release retried after a lost reply is told it was applied.
    pub(crate) released: String,
    /// Pub/sub channel announcing that the lock was freed (a latch: that it reached zero).
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

impl LockKeys {
    /// The keys of the lock `id`, under `prefix` (checked by the builder: no braces).
    pub(crate) fn of(prefix: &str, id: &LockId) -> LockKeys {
        // Made for every primitive a client hands out: concatenated, not formatted, which
        // costs several times less.
        let tail = match id.kind {
            // An election, a latch or a rate limiter is not the lock of the same name: keys of
            // its own, in the same slot (a limiter's `lock` is its hash, `limiter_log` its log).
            Kind::Leader => "}:leader",
            Kind::Latch => "}:latch",
            Kind::Limiter => "}:limiter",
            _ => "}",
        };
        let base = [prefix, "{", &id.name, tail].concat();
        let key = |suffix: &str| [base.as_str(), suffix].concat();
        LockKeys {
            name: id.name.clone(),
            kind: id.kind,
            queue: key(":queue"),
            queue_until: key(":queue:until"),
            writer: key(":writer"),
            fence: key(":fence"),
            released: key(":released"),
            channel: key(":freed"),
            epoch: key(":epoch"),
            lock: base,
        }
    }

    /// The keys of the plain lock `name`, without a prefix, for tests.
    #[cfg(test)]
    pub(crate) fn for_test(name: &str) -> LockKeys {
        LockKeys::of("", &LockId::new(name, Kind::Lock).expect("a valid name"))
    }

    /// The same primitive's keys for an acquisition of another kind (a semaphore's, taking
    /// another number of permits).
    pub(crate) fn with_kind(&self, kind: Kind) -> LockKeys {
        LockKeys {
            kind,
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

    /// A rate limiter's log of grants (a sorted set), beside its hash `lock`.
    pub(crate) fn limiter_log(&self) -> String {
        [self.lock.as_str(), ":log"].concat()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_shares_the_hash_tag() {
        let id = LockId::new("jobs/nightly", Kind::Lock).expect("valid");
        let keys = LockKeys::of("app:", &id);
        assert_eq!(keys.lock, "app:{jobs/nightly}");
        let semaphore = keys.with_kind(Kind::Semaphore {
            permits: 2,
            take: 1,
        });
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
}
