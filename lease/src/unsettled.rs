//! Releases whose outcome is unknown (Redis did not answer in time), and holds abandoned without
//! a release. The owner believes it holds nothing, but its hold may still be in Redis; were it to
//! acquire the same lock again, the acquire script would re-enter that hold and the lock would
//! never be freed. So the release is sent (again, with the same release id, which the script
//! applies at most once) before the same owner acquires the same lock again.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::time::Duration;

/// A release to send again.
#[derive(Debug, Clone)]
pub(crate) struct Unsettled {
    pub(crate) release_id: String,
    pub(crate) lease: Duration,
}

/// Per (lock key, owner), the release whose outcome is unknown.
#[derive(Default)]
pub(crate) struct UnsettledReleases {
    releases: Mutex<HashMap<(String, String), Unsettled>>,
}

impl UnsettledReleases {
    pub(crate) fn remember(&self, lock_key: &str, owner: &str, release: Unsettled) {
        self.releases
            .lock()
            .insert((lock_key.to_owned(), owner.to_owned()), release);
    }

    pub(crate) fn take(&self, lock_key: &str, owner: &str) -> Option<Unsettled> {
        let mut releases = self.releases.lock();
        if releases.is_empty() {
            return None;
        }
        releases.remove(&(lock_key.to_owned(), owner.to_owned()))
    }
}
