//! Writes made only while a hold holds, on Redis: the caller's Lua body run in one script with
//! the check of the hold's key, on the server that keeps the lock (a Cluster's slot master:
//! every key of the write must be in the lock's hash tag).

use super::KeysPlace;
use crate::backend::WritesWhileHeld;
use crate::error::{Error, Result};
use crate::stores::redis::route::Route;
use crate::stores::redis::scripts::HeldWrite;
use crate::write::{wrong_kind, Write, Written};
use std::time::Instant;

impl WritesWhileHeld for KeysPlace {
    fn if_held(
        &self,
        owner: &str,
        hold: &str,
        write: &Write,
        deadline: Instant,
    ) -> Result<Option<Written>> {
        #[allow(unreachable_patterns)] // other kinds exist with the other stores' features
        let (script, keys, args) = match write {
            Write::Lua { script, keys, args } => (script, keys, args),
            other => return Err(wrong_kind(other, self.route.address(), "Lua scripts")),
        };
        if let Route::Cluster(_) = &*self.route {
            check_tags(&self.keys.name, keys)?;
        }
        let lock = &self.keys.lock;
        let held = HeldWrite::new(&self.keys.hold_key(hold), (owner, hold), script, keys, args);
        let reply = self.route.call(lock, deadline, |via| {
            let acks = via.pool.acks();
            via.call(deadline, |con| {
                let (reply, shortfall) = held.run(con, lock, acks)?;
                match shortfall {
                    // Written on the primary all the same: a failover may lose it.
                    Some(shortfall) if reply.is_some() => Err(shortfall.error(&self.keys.name)),
                    _ => Ok(reply),
                }
            })
        })?;
        Ok(reply.map(Written::Lua))
    }
}

/// The hash tag of `key` as a Cluster reads it: what lies between its first `{` and the next
/// `}`, if that is not empty.
fn hash_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let len = key[open + 1..].find('}')?;
    (len > 0).then(|| &key[open + 1..open + 1 + len])
}

/// Refuses a key of a Cluster's write that is not in the lock `name`'s hash tag, and so not
/// surely in its slot.
fn check_tags(name: &str, keys: &[String]) -> Result<()> {
    match keys.iter().find(|key| hash_tag(key) != Some(name)) {
        Some(key) => Err(Error::InvalidArgument(format!(
            "key {key:?} of a write while holding {name:?} is not in the lock's hash tag: on a \
             Cluster, a write's keys must hold {{{name}}} to live in the lock's slot"
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clusters_write_takes_only_keys_in_the_locks_hash_tag() {
        assert_eq!(hash_tag("app:{sale}:stock"), Some("sale"));
        assert_eq!(hash_tag("{}:{sale}"), None);
        assert_eq!(hash_tag("{sale"), None);
        let keys = |keys: &[&str]| keys.iter().map(|key| (*key).to_owned()).collect::<Vec<_>>();
        assert!(check_tags("sale", &keys(&["{sale}:stock", "x{sale}"])).is_ok());
        assert!(check_tags("sale", &[]).is_ok());
        for bad in ["stock", "{sales}:stock", "{}{sale}", "{other}{sale}"] {
            let refused = check_tags("sale", &keys(&[bad]));
            assert!(
                matches!(&refused, Err(Error::InvalidArgument(why)) if why.contains(bad)),
                "{bad}: {refused:?}"
            );
        }
    }
}
