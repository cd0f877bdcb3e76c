//! Releases whose outcome is unknown (Redis did not answer in time), and holds abandoned without
//! a release. The owner believes it holds nothing, but its hold may still be in Redis, where it
//! would keep the owner's next acquisition waiting until it lapses. So each is sent again (it
//! names its hold and acquisition, and is applied at most once) before the same owner acquires
//! the same lock again.
//!
//! A client keeps at most [`MAX_UNSETTLED`] of them: lock names that are never taken again (one
//! per job, say) would otherwise keep theirs for ever. Past the bound the oldest is let go; its
//! hold, if it still stands, lapses with its lease.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// The most releases a client keeps to send again.
pub(crate) const MAX_UNSETTLED: usize = 10_000;

/// A release to send again: acquisition `id` of hold `hold`.
#[derive(Debug, Clone)]
pub(crate) struct Unsettled {
    pub(crate) hold: Arc<str>,
    pub(crate) id: String,
}

/// Per (lock key, owner), the releases whose outcome is unknown, each with the number of its
/// arrival.
#[derive(Default)]
pub(crate) struct UnsettledReleases {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    releases: HashMap<(String, String), Vec<(u64, Unsettled)>>,
    count: usize,
    arrivals: u64,
    /// Whether letting one go was logged as a warning already (later ones are debug records).
    warned: bool,
}

impl UnsettledReleases {
    pub(crate) fn remember(&self, lock_key: &str, owner: &str, release: Unsettled) {
        let mut state = self.state.lock();
        if state.count >= MAX_UNSETTLED {
            state.forget_oldest();
        }
        state.arrivals += 1;
        let arrival = state.arrivals;
        state
            .releases
            .entry((lock_key.to_owned(), owner.to_owned()))
            .or_default()
            .push((arrival, release));
        state.count += 1;
    }

    pub(crate) fn take(&self, lock_key: &str, owner: &str) -> Vec<Unsettled> {
        let mut state = self.state.lock();
        if state.releases.is_empty() {
            return Vec::new();
        }
        let taken = state
            .releases
            .remove(&(lock_key.to_owned(), owner.to_owned()))
            .unwrap_or_default();
        state.count -= taken.len();
        taken.into_iter().map(|(_, release)| release).collect()
    }

    /// How many releases are kept.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.state.lock().count
    }
}

impl State {
    /// Lets the release that arrived first go.
    fn forget_oldest(&mut self) {
        let oldest = self
            .releases
            .iter()
            .filter_map(|(key, releases)| releases.first().map(|(arrival, _)| (*arrival, key)))
            .min()
            .map(|(_, key)| key.clone());
        let Some(key) = oldest else {
            return;
        };
        if let Some(releases) = self.releases.get_mut(&key) {
            releases.remove(0);
            self.count -= 1;
            if releases.is_empty() {
                self.releases.remove(&key);
            }
        }
        let level = if std::mem::replace(&mut self.warned, true) {
            log::Level::Debug
        } else {
            log::Level::Warn
        };
        log::log!(
            level,
            "more than {MAX_UNSETTLED} releases of unknown outcome: the oldest, of {:?}, is \
             not sent again; its hold lapses with its lease",
            key.0
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release(id: usize) -> Unsettled {
        Unsettled {
            hold: Arc::from("hold"),
            id: id.to_string(),
        }
    }

    #[test]
    fn the_store_is_bounded_and_lets_the_oldest_go() {
        let store = UnsettledReleases::default();
        for n in 0..MAX_UNSETTLED + 10 {
            store.remember(&format!("job/{n}"), "owner", release(n));
        }
        assert_eq!(store.len(), MAX_UNSETTLED);
        assert!(store.take("job/0", "owner").is_empty(), "the oldest went");
        let kept = store.take(&format!("job/{}", MAX_UNSETTLED + 9), "owner");
        assert_eq!(kept.len(), 1);
        assert_eq!(store.len(), MAX_UNSETTLED - 1);
    }

    #[test]
    fn releases_are_taken_per_lock_and_owner_in_order() {
        let store = UnsettledReleases::default();
        for n in 0..3 {
            store.remember("lock", "a", release(n));
        }
        store.remember("lock", "b", release(9));
        let ids: Vec<String> = store
            .take("lock", "a")
            .into_iter()
            .map(|release| release.id)
            .collect();
        assert_eq!(ids, ["0", "1", "2"]);
        assert!(store.take("lock", "a").is_empty());
        assert_eq!(store.len(), 1);
    }
}
