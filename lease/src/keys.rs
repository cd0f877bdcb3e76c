//! Key layout. Every key of one lock shares the lock name as its `{hash tag}`, so that in Redis
//! Cluster they live in one slot and one script may touch them all.

use crate::error::{Error, Result};

/// The Redis names belonging to one lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LockKeys {
    /// The lock's name as the caller gave it.
    pub(crate) name: String,
    /// Hash: owner -> hold count, with the lease as its TTL.
    pub(crate) lock: String,
    /// Counter: the last fencing token handed out. Never expires.
    pub(crate) fence: String,
    /// Hash: owner -> id of its last applied release, so that a retried release is not applied
    /// twice. Short TTL.
    pub(crate) releases: String,
    /// Pub/sub channel announcing that the lock was freed.
    pub(crate) channel: String,
}

/// Checks a key prefix a builder was given: braces would break the hash tag.
pub(crate) fn check_prefix(prefix: &str) -> Result<()> {
    if prefix.contains(['{', '}']) {
        return Err(Error::InvalidArgument(
            "the key prefix must not contain braces".into(),
        ));
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
            releases: format!("{base}:releases"),
            channel: format!("{base}:freed"),
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
        for key in [&keys.fence, &keys.releases, &keys.channel] {
            assert!(key.starts_with("app:{jobs/nightly}:"), "{key}");
        }
    }

    #[test]
    fn empty_and_braced_names_are_refused() {
        assert!(matches!(
            LockKeys::new("", ""),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            LockKeys::new("", "a{b}"),
            Err(Error::InvalidArgument(_))
        ));
    }
}
