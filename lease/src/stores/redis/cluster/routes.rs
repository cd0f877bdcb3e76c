//! Which master serves which slot, learned from `CLUSTER SLOTS` and corrected by the
//! redirections nodes answer with; and one connection pool per node.
//!
//! The map is read from any node that answers (known nodes first, then the seeds), at most every
//! [`MIN_REFRESH`], and whenever a call finds it wrong: a `MOVED` reply moves the slot at once and
//! marks the map stale, a refused connection marks it stale. A stale map is read again before the
//! next call is routed by it.

use super::slots::{self, Range, SLOTS};
use crate::error::{Error, Result};
use crate::stores::redis::conn::Endpoint;
use crate::stores::redis::fencing::Epoch;
use crate::stores::redis::pool::{Fixed, Pool};
use crate::stores::redis::scripts::Acks;
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The shortest time between two readings of the slot map.
const MIN_REFRESH: Duration = Duration::from_millis(100);

/// What the pools of the nodes are made with.
pub(crate) struct PoolSettings {
    pub(crate) max_idle: usize,
    pub(crate) max_connections: Option<usize>,
    pub(crate) connect_timeout: Duration,
    pub(crate) command_timeout: Duration,
    /// The replica acknowledgements every write waits for.
    pub(crate) acks: Option<Acks>,
    /// Whether threads' calls to a node share one pipelined connection.
    pub(crate) pipelining: bool,
}

pub(crate) struct Routes {
    seeds: Vec<Endpoint>,
    settings: PoolSettings,
    /// The node of each slot (`host:port`), if known.
    slots: RwLock<Vec<Option<Arc<str>>>>,
    nodes: Mutex<HashMap<Arc<str>, Arc<Pool>>>,
    stale: AtomicBool,
    /// When the map was last read, and by whom (one reader at a time).
    refreshed: Mutex<Option<Instant>>,
}

/// `host` and `port` of a `host:port` address (IPv6 in brackets).
fn split(addr: &str) -> Option<(&str, u16)> {
    let (host, port) = addr.rsplit_once(':')?;
    Some((
        host.trim_start_matches('[').trim_end_matches(']'),
        port.parse().ok()?,
    ))
}

impl Routes {
    pub(crate) fn new(seeds: Vec<Endpoint>, settings: PoolSettings) -> Routes {
        Routes {
            seeds,
            settings,
            slots: RwLock::new(vec![None; SLOTS]),
            nodes: Mutex::new(HashMap::new()),
            stale: AtomicBool::new(true),
            refreshed: Mutex::new(None),
        }
    }

    pub(crate) fn command_timeout(&self) -> Duration {
        self.settings.command_timeout
    }

    /// The replica acknowledgements every write waits for.
    pub(crate) fn acks(&self) -> Option<Acks> {
        self.settings.acks
    }

    /// The pool of the node at `addr`, made on first use.
    pub(crate) fn pool_at(&self, addr: &str) -> Option<(Arc<str>, Arc<Pool>)> {
        let mut nodes = self.nodes.lock();
        if let Some((name, pool)) = nodes.get_key_value(addr) {
            return Some((Arc::clone(name), Arc::clone(pool)));
        }
        let (host, port) = split(addr)?;
        let template = self.seeds.first()?;
        // A node's tokens are drawn in its own configuration epoch, which the scripts read.
        let pool = Pool::to(
            Box::new(Fixed::new(template.at(host, port), Epoch::Cluster)),
            self.settings.max_idle,
            self.settings.connect_timeout,
            self.settings.command_timeout,
        )
        .with_sharing(self.settings.pipelining)
        .with_acks(self.settings.acks)
        .with_cap(self.settings.max_connections);
        let pool = Arc::new(pool);
        let name: Arc<str> = Arc::from(addr);
        nodes.insert(Arc::clone(&name), Arc::clone(&pool));
        Some((name, pool))
    }

    /// The node of `slot` by the map as it is, without reading it again.
    pub(crate) fn known(&self, slot: usize) -> Option<(Arc<str>, Arc<Pool>)> {
        let addr = self.slots.read().get(slot)?.clone()?;
        self.pool_at(&addr)
    }

    /// The node of `slot`, reading the map again first if it is stale or the slot unknown.
    pub(crate) fn node(&self, slot: usize, deadline: Instant) -> Result<(Arc<str>, Arc<Pool>)> {
        if self.stale.load(Ordering::Acquire) || self.known(slot).is_none() {
            self.refresh(deadline)?;
        }
        self.known(slot).ok_or_else(|| {
            Error::unavailable(crate::stores::redis::conn::io_error(
                std::io::ErrorKind::NotFound,
                format!("no node of the cluster serves slot {slot}"),
            ))
        })
    }

    /// A node answered `MOVED slot host:port`: the slot is there now.
    pub(crate) fn moved(&self, slot: usize, addr: &str) {
        if let Some(entry) = self.slots.write().get_mut(slot) {
            *entry = Some(Arc::from(addr));
        }
        self.stale.store(true, Ordering::Release);
    }

    /// Something suggests the map is wrong (a node refused connections, said the cluster is
    /// down): read it again before it is next used.
    pub(crate) fn mark_stale(&self) {
        self.stale.store(true, Ordering::Release);
    }

    /// Reads the slot map from the first node (known ones, then seeds) that answers by
    /// `deadline`; at most every [`MIN_REFRESH`], by one thread at a time (the others wait for
    /// it, by their own deadlines). Each node is given half the time left, so that a node that
    /// stopped answering cannot take all of it.
    pub(crate) fn refresh(&self, deadline: Instant) -> Result<()> {
        let Some(mut refreshed) = self.refreshed.try_lock_until(deadline) else {
            return Err(Error::unavailable(crate::stores::redis::conn::io_error(
                std::io::ErrorKind::TimedOut,
                "the cluster's slot map was being read by another call until the deadline",
            )));
        };
        if refreshed.is_some_and(|at| at.elapsed() < MIN_REFRESH)
            && !self.slots.read().iter().all(Option::is_none)
        {
            return Ok(());
        }
        let known: Vec<(Arc<str>, Arc<Pool>)> = self
            .nodes
            .lock()
            .iter()
            .map(|(name, pool)| (Arc::clone(name), Arc::clone(pool)))
            .collect();
        let seeds = self.seeds.iter().map(|seed| {
            let pool = Arc::new(Pool::new(
                seed.clone(),
                1,
                self.settings.connect_timeout,
                self.settings.command_timeout,
            ));
            (Arc::from(seed.addr.to_string()), pool)
        });
        let mut last_error = None;
        for (name, pool) in known.into_iter().chain(seeds) {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            let read = pool.call(now + (deadline - now) / 2, |con| {
                let sorted = |error| Error::unavailable_or_refused(error).at(&name);
                let reply = con
                    .exchange(&[redis::cmd("CLUSTER").arg("SLOTS").clone()])
                    .map_err(sorted)?;
                let reply = reply
                    .into_iter()
                    .next()
                    .ok_or_else(|| Error::Protocol("CLUSTER SLOTS: no reply".into()))?
                    .extract_error()
                    .map_err(sorted)?;
                slots::parse(&reply, &name)
                    .ok_or_else(|| Error::Protocol(format!("CLUSTER SLOTS replied {reply:?}")))
            });
            match read {
                Ok(ranges) if !ranges.is_empty() => {
                    self.install(&ranges);
                    *refreshed = Some(Instant::now());
                    self.stale.store(false, Ordering::Release);
                    return Ok(());
                }
                Ok(_) => {
                    last_error = Some(Error::unavailable(crate::stores::redis::conn::io_error(
                        std::io::ErrorKind::NotFound,
                        format!("{name} serves no slot: the cluster is not set up"),
                    )))
                }
                Err(error) => last_error = Some(error),
            }
        }
        Err(last_error.unwrap_or_else(|| {
            Error::unavailable(crate::stores::redis::conn::io_error(
                std::io::ErrorKind::TimedOut,
                "no node of the cluster answered",
            ))
        }))
    }

    fn install(&self, ranges: &[Range]) {
        let mut slots = vec![None; SLOTS];
        for range in ranges {
            let (name, _) = match self.pool_at(&range.master) {
                Some(node) => node,
                None => continue,
            };
            for slot in &mut slots[range.first..=range.last] {
                *slot = Some(Arc::clone(&name));
            }
        }
        *self.slots.write() = slots;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_split_into_host_and_port() {
        assert_eq!(split("127.0.0.1:7000"), Some(("127.0.0.1", 7000)));
        assert_eq!(split("[::1]:7001"), Some(("::1", 7001)));
        assert_eq!(split("nohost"), None);
        assert_eq!(split("h:notaport"), None);
    }
}
