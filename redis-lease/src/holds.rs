//! The holds that guards of this client hold now, by lock and owner: an acquisition by an owner
//! that holds the lock here re-enters that hold by naming it, and never re-enters a hold it does
//! not know of (an earlier hold of the same owner that was lost, abandoned or never answered for
//! lapses instead).

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// A lock key and an owner id.
type Place = (String, String);

#[derive(Default)]
pub(crate) struct LiveHolds {
    /// (lock key, owner) -> the latest hold and its live guards.
    holds: Mutex<HashMap<Place, (Arc<str>, usize)>>,
}

impl LiveHolds {
    /// The hold `owner` holds on `lock_key` through a live guard, if any.
    pub(crate) fn reentrant(&self, lock_key: &str, owner: &str) -> Option<Arc<str>> {
        let holds = self.holds.lock();
        if holds.is_empty() {
            return None;
        }
        holds
            .get(&(lock_key.to_owned(), owner.to_owned()))
            .map(|(hold, _)| Arc::clone(hold))
    }

    /// A guard of `hold` now exists. A newer hold of the owner replaces an older one: only the
    /// latest is re-entered.
    pub(crate) fn add(&self, lock_key: &str, owner: &str, hold: &Arc<str>) {
        let mut holds = self.holds.lock();
        let entry = holds
            .entry((lock_key.to_owned(), owner.to_owned()))
            .or_insert_with(|| (Arc::clone(hold), 0));
        if entry.0 != *hold {
            *entry = (Arc::clone(hold), 0);
        }
        entry.1 += 1;
    }

    /// A guard of `hold` is gone.
    pub(crate) fn remove(&self, lock_key: &str, owner: &str, hold: &str) {
        let mut holds = self.holds.lock();
        let key = (lock_key.to_owned(), owner.to_owned());
        if let Some((latest, guards)) = holds.get_mut(&key) {
            if &**latest == hold {
                *guards -= 1;
                if *guards == 0 {
                    holds.remove(&key);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_latest_hold_with_live_guards_is_reentered() {
        let holds = LiveHolds::default();
        let (first, second): (Arc<str>, Arc<str>) = ("h1".into(), "h2".into());
        holds.add("k", "o", &first);
        holds.add("k", "o", &first);
        assert_eq!(holds.reentrant("k", "o").as_deref(), Some("h1"));
        holds.add("k", "o", &second);
        holds.remove("k", "o", "h1");
        assert_eq!(
            holds.reentrant("k", "o").as_deref(),
            Some("h2"),
            "a stale guard leaves it"
        );
        holds.remove("k", "o", "h2");
        assert_eq!(holds.reentrant("k", "o"), None);
        assert_eq!(holds.reentrant("k", "other"), None);
    }
}
