//! Redis Sentinel: one primary, the one a majority of its Sentinels name, followed across
//! failovers. Each new connection asks the Sentinels for the primary ([`discovery`]); every
//! Sentinel is listened to for `+switch-master` ([`switches`]); and no connection is opened to a
//! primary older than one already reached or announced. Lock calls, renewals and waiters run as
//! on one server ([`Server`]), over a pool whose connections go to that primary.

mod ask;
mod discovery;
mod switches;

use super::server::Server;
use super::{Backend, Settings};
use crate::conn::Endpoint;
use crate::error::{Error, Result};
use crate::fencing::Epoch;
use crate::pool::{Opened, Target};
use discovery::Sentinels;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// A client of the primary that the Sentinels at `sentinels` (at least one) name under
/// `master`, listening to each of them by a thread named `lease-sentinel-<client>-<index>`.
pub(crate) fn build(
    settings: &Settings,
    master: &str,
    sentinels: Vec<Endpoint>,
) -> Result<Box<dyn Backend>> {
    let acks = settings.primary_acks()?;
    let sentinels = Arc::new(Sentinels::new(sentinels, master)?);
    let target = NamedPrimary {
        sentinels: Arc::clone(&sentinels),
        primary_epoch: AtomicU64::new(0),
    };
    let pool = Arc::new(settings.pool(Box::new(target)).with_acks(acks));
    let thread_name = settings.thread_name("sentinel");
    switches::watch(&pool, &sentinels, &thread_name).map_err(Error::Spawn)?;
    Ok(Box::new(Server::new(pool)))
}

/// Where a Sentinel client's connections go: to the primary the Sentinels name, its tokens drawn
/// in the epoch it was promoted in.
struct NamedPrimary {
    sentinels: Arc<Sentinels>,
    /// One more than the highest Sentinel configuration epoch of a primary a connection was
    /// opened to; 0 before the first.
    primary_epoch: AtomicU64,
}

impl Target for NamedPrimary {
    fn shown(&self) -> &str {
        self.sentinels.shown()
    }

    fn open(&self, deadline: Instant) -> Result<Opened> {
        let conn = self.sentinels.connect(deadline)?;
        let mut supersedes = false;
        if let Epoch::Known(epoch) = conn.epoch() {
            let term = epoch.saturating_add(1);
            let seen = self.primary_epoch.fetch_max(term, Ordering::AcqRel);
            if seen > term {
                // A primary of an older term than one already reached: the Sentinels that named
                // it have not caught up yet.
                return Err(Error::unavailable(crate::conn::io_error(
                    std::io::ErrorKind::Other,
                    format!(
                        "the Sentinels named a primary of epoch {epoch}, older than epoch {} \
                         already seen",
                        seen - 1
                    ),
                )));
            }
            // The Sentinels name a newer primary than the pool's other connections reach,
            // announced or not: none of those may serve another call.
            supersedes = seen != 0 && seen < term;
        }
        Ok(Opened { conn, supersedes })
    }
}
