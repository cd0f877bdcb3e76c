//! Key layout. Every key of one lock shares the lock name as its `{hash tag}`, so that in Redis
//! Cluster they live in one slot and one script may touch them all.

use crate::error::{Error, Result};

/// The longest lock name or key prefix, in bytes: a key is sent with every call, and a name
/// longer than this is a mistake rather than a lock.
pub(crate) const MAX_NAME: usize = 1024;

/// The Redis names belonging to one lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LockKeys {
    /// The lock's name as the caller gave it.
    pub(crate) name: String,
    /// Hash: owner -> hold count, and the hold's id, token and acquisitions (fields starting
    /// with ':'), with the lease as its TTL.
    pub(crate) lock: String,
    /// Counter: the last fencing token handed out. Never expires.
    pub(crate) fence: String,
    /// String: the id of the acquisition whose release last freed the lock, for 60 s, so that a
    /// release retried after a lost reply is told it was applied.
    pub(crate) released: String,
    /// Pub/sub channel announcing that the lock was freed.
    pub(crate) channel: String,
    /// String, on a cluster only: the configuration epoch of the node serving the slot, beside
    /// its replication id (`<replid>:<epoch>`), so that the scripts read `CLUSTER INFO` once per
    /// term of a primary rather than at every acquisition. Never expires.
    pub(crate) epoch: String,
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
    pub(crate) fn new(prefix: &str, name: &str) -> Result<Self> {
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
            lock: base.clone(),
            fence: format!("{base}:fence"),
            released: format!("{base}:released"),
            channel: format!("{base}:freed"),
            epoch: format!("{base}:epoch"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_shares_the_hash_tag() {
        let keys = LockKeys::new("app:", "jobs/nightly").expect("valid");
        assert_eq!(keys.lock, "app:{jobs/nightly}");
        for key in [&keys.fence, &keys.released, &keys.channel, &keys.epoch] {
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
