//! A ZooKeeper ensemble (feature `zookeeper`): locks on ephemeral sequential nodes, with the
//! session as every hold's lease (see [`recipe`] for the recipe, [`renew`] for the lease).
//!
//! What differs from Redis: there are no announcements (a waiter watches the node before its
//! own, and the watch wakes it), no grants from one thread of the client to another (the next
//! thread of the local queue queues its own node), re-entry is counted in the process, and a
//! lock's node stays in the tree when it is free (as Curator leaves it).

pub(crate) mod client;
mod ensemble;
mod line;
mod paths;
mod reaper;
mod recipe;
mod renew;
mod table;

use crate::backend::{Attempt, Attempted, Backend, GrantFate, Release, ReleaseOutcome, Settings};
use crate::error::{Error, Result};
use crate::state::LockState;
use crate::stores::redis::keys::LockKeys;
use crate::stores::redis::pool::Identity;
use crate::stores::redis::pubsub::Waiters;
use crate::stores::zookeeper::client::ZkConfig;
use crate::watchdog::Renewer;
use ensemble::Ensemble;
use parking_lot::Mutex;
use reaper::Reaper;
use std::sync::Arc;
use std::time::{Duration, Instant};
use table::Table;

/// The longest a waiter sleeps before looking at its queue again when no watch fires. Watches
/// are not lost while the session lives (they are set again after a reconnection), so this only
/// bounds the cost of a defect.
const MAX_RECHECK: Duration = Duration::from_secs(1);

/// How long after an abandoned hold's local deadline its node is deleted: the deadline is
/// already short of the lease by the drift allowance; this covers a late clock reading.
const LAPSE_MARGIN: Duration = Duration::from_millis(5);

/// Where to reach an ensemble, and as whom, from [`crate::Client::zookeeper`].
#[derive(Clone, Default)]
pub(crate) struct ZooKeeperSettings {
    pub(crate) hosts: Vec<String>,
    pub(crate) chroot: Option<String>,
    pub(crate) digest: Option<String>,
}

impl std::fmt::Debug for ZooKeeperSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZooKeeperSettings")
            .field("hosts", &self.hosts)
            .field("chroot", &self.chroot)
            .field("digest", &self.digest.as_ref().map(|_| "***"))
            .finish()
    }
}

pub(crate) struct ZooKeeper {
    ensemble: Arc<Ensemble>,
    table: Arc<Mutex<Table>>,
    reaper: Reaper,
    waiters: Mutex<Option<Waiters>>,
    prefix: String,
    place: String,
    call_timeout: Duration,
}

/// A client of the ensemble `zk` names, whose sessions ask for `session_timeout`. It connects
/// to nothing yet: the session opens with the first lock operation.
pub(crate) fn build(
    settings: &Settings,
    zk: &ZooKeeperSettings,
    prefix: &str,
    session_timeout: Duration,
) -> Result<Box<dyn Backend>> {
    if zk.hosts.is_empty() {
        return Err(Error::InvalidArgument(
            "a ZooKeeper client needs at least one host:port".into(),
        ));
    }
    for host in &zk.hosts {
        let port = crate::stores::zookeeper::client::host_and_port(host).map(|(_, port)| port);
        if port.is_none_or(|port| port == 0) || host.contains('/') {
            return Err(Error::InvalidArgument(format!(
                "ZooKeeper host {host:?} is not host:port"
            )));
        }
    }
    if let Some(chroot) = &zk.chroot {
        if !chroot.starts_with('/') || chroot.ends_with('/') || chroot.contains("//") {
            return Err(Error::InvalidArgument(format!(
                "ZooKeeper chroot {chroot:?} must be an absolute path without a trailing '/'"
            )));
        }
    }
    let waiters = Waiters::local();
    let config = ZkConfig {
        hosts: zk.hosts.clone(),
        chroot: zk.chroot.clone(),
        session_timeout,
        connect_timeout: settings.connect_timeout,
        digest: zk.digest.clone(),
    };
    let ensemble = Arc::new(Ensemble::new(config, waiters.notifier()));
    let table = Arc::new(Mutex::new(Table::default()));
    let reaper = Reaper::start(
        reaper::Context {
            ensemble: Arc::downgrade(&ensemble),
            table: Arc::clone(&table),
            call_timeout: settings.command_timeout,
        },
        settings.thread_name("zk-reap"),
    )?;
    let place = format!(
        "zookeeper://{}{}",
        zk.hosts.join(","),
        zk.chroot.as_deref().unwrap_or("")
    );
    Ok(Box::new(ZooKeeper {
        ensemble,
        table,
        reaper,
        waiters: Mutex::new(Some(waiters)),
        prefix: prefix.to_owned(),
        place,
        call_timeout: settings.command_timeout,
    }))
}

impl ZooKeeper {
    /// The node of `keys`'s lock.
    fn lock_path(&self, keys: &LockKeys) -> Result<String> {
        paths::lock_path(&self.prefix, &keys.name)
    }
}

impl Backend for ZooKeeper {
    fn fenced(&self) -> bool {
        true
    }

    fn grants(&self) -> bool {
        false
    }

    fn place(&self) -> &str {
        &self.place
    }

    fn servers(&self, _keys: &LockKeys, _deadline: Instant) -> Result<Vec<Identity>> {
        Ok(vec![Identity {
            run_id: Some(self.place.clone()),
            peer: None,
        }])
    }

    fn call_timeout(&self) -> Duration {
        self.call_timeout
    }

    fn admit(&self, keys: &LockKeys) -> Result<()> {
        self.lock_path(keys).map(drop)
    }

    fn attempt(
        &self,
        keys: &LockKeys,
        attempt: &Attempt<'_>,
        deadline: Instant,
    ) -> Result<Attempted> {
        recipe::attempt(self, keys, attempt, deadline)
    }

    fn abandon(&self, keys: &LockKeys, owner: &str, _waited: bool) {
        recipe::abandon(self, keys, owner);
    }

    fn lapse(&self, _keys: &LockKeys, hold: &str, at: Instant) {
        let Some(session) = self.table.lock().held.get(hold).map(|held| held.session) else {
            return;
        };
        let job = reaper::Job::Lapse {
            hold: hold.to_owned(),
            session,
        };
        self.reaper.reap_at(job, at + LAPSE_MARGIN);
    }

    fn losses(&self) -> Option<crossbeam_channel::Sender<crate::lost::Lost>> {
        Some(self.reaper.losses())
    }

    fn release(
        &self,
        _keys: &LockKeys,
        release: &Release<'_>,
        deadline: Instant,
    ) -> ReleaseOutcome {
        recipe::release(self, release, deadline)
    }

    fn settle_grant(
        &self,
        _keys: &LockKeys,
        _owner: &str,
        _hold: &str,
        _deadline: Instant,
    ) -> Result<GrantFate> {
        // No grants are made here.
        Ok(GrantFate::Withdrawn)
    }

    fn pause(&self, _ttl: Option<Duration>) -> Duration {
        MAX_RECHECK
    }

    fn inspect(&self, keys: &LockKeys, deadline: Instant) -> Result<LockState> {
        recipe::inspect(self, keys, deadline)
    }

    fn force_release(&self, keys: &LockKeys, deadline: Instant) -> Result<bool> {
        recipe::force_release(self, keys, deadline)
    }

    fn renewer(&self) -> Box<dyn Renewer> {
        Box::new(renew::SessionRenewer {
            ensemble: Arc::clone(&self.ensemble),
            table: Arc::clone(&self.table),
            call_timeout: self.call_timeout,
        })
    }

    fn waiters(&self, _thread_name: String) -> Result<Waiters> {
        Ok(self.waiters.lock().take().unwrap_or_else(Waiters::local))
    }
}
