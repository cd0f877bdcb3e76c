//! Redis Sentinel: one primary, the one a majority of its Sentinels name, followed across
//! failovers. Each new connection asks the Sentinels for the primary ([`discovery`]); every
//! Sentinel is listened to for `+switch-master` ([`switches`]); and no connection is opened to a
//! primary older than one already reached or announced. Lock calls, renewals and waiters run as
//! on one server, over a pool whose connections go to that primary.

mod ask;
mod discovery;
mod switches;

use crate::error::{Error, Result};
use crate::stores::redis::conn::Endpoint;
use crate::stores::redis::pool::{Opened, Pool, Target};
use crate::stores::redis::settings::RedisSettings;
use discovery::Sentinels;
use std::sync::Arc;
use std::time::Instant;

/// A client of the primary that the Sentinels at `sentinels` (at least one) name under
/// `master`, listening to each of them by a thread named `lease-sentinel-<client>-<index>`.
pub(crate) fn build(
    settings: &RedisSettings,
    master: &str,
    sentinels: Vec<Endpoint>,
) -> Result<Arc<Pool>> {
    let acks = settings.primary_acks()?;
    let sentinels = Arc::new(Sentinels::new(sentinels, master)?);
    let target = NamedPrimary {
        sentinels: Arc::clone(&sentinels),
    };
    let pool = Arc::new(settings.pool(Box::new(target)).with_acks(acks));
    let thread_name = settings.thread_name("sentinel");
    switches::watch(&pool, &sentinels, &thread_name).map_err(Error::Spawn)?;
    Ok(pool)
}

/// Where a Sentinel client's connections go: to the primary the Sentinels name, its tokens drawn
/// in the epoch it was promoted in (see [`Sentinels::connect`]).
struct NamedPrimary {
    sentinels: Arc<Sentinels>,
}

impl Target for NamedPrimary {
    fn shown(&self) -> &str {
        self.sentinels.shown()
    }

    fn open(&self, deadline: Instant) -> Result<Opened> {
        self.sentinels.connect(deadline)
    }
}
