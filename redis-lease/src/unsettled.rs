//! Releases whose outcome is unknown (Redis did not answer in time), and holds abandoned without
//! a release. The owner believes it holds nothing, but its hold may still be in Redis, where it
//! would keep the owner's next acquisition waiting until it lapses. So each is sent again (it
//! names its hold and acquisition, and is applied at most once) before the same owner acquires
//! the same lock again.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// A release to send again: acquisition `id` of hold `hold`.
#[derive(Debug, Clone)]
pub(crate) struct Unsettled {
    pub(crate) hold: Arc<str>,
    pub(crate) id: String,
}

/// Per (lock key, owner), the releases whose outcome is unknown.
#[derive(Default)]
pub(crate) struct UnsettledReleases {
    releases: Mutex<HashMap<(String, String), Vec<Unsettled>>>,
}

impl UnsettledReleases {
    pub(crate) fn remember(&self, lock_key: &str, owner: &str, release: Unsettled) {
        self.releases
            .lock()
            .entry((lock_key.to_owned(), owner.to_owned()))
            .or_default()
            .push(release);
    }

    pub(crate) fn take(&self, lock_key: &str, owner: &str) -> Vec<Unsettled> {
        let mut releases = self.releases.lock();
        if releases.is_empty() {
            return Vec::new();
        }
        releases
            .remove(&(lock_key.to_owned(), owner.to_owned()))
            .unwrap_or_default()
    }
}
