//! A ZooKeeper ensemble (feature `zookeeper`): locks on ephemeral sequential nodes, with the
//! session as every hold's lease (see [`recipe`] for the recipe, [`renew`] for the lease).
//!
//! What differs from Redis: there are no announcements (a waiter watches the node before its
//! own, and the watch wakes it), no grants from one thread of the client to another (the next
//! thread of the local queue queues its own node), re-entry is counted in the process, and a
//! lock's node stays in the tree when it is free (as Curator leaves it). A count-down latch is a
//! node of its own with a TTL (`latch.rs`); writes made while a hold holds are transactions
//! with a check of its node (`write.rs`).

mod ensemble;
mod inspect;
mod latch;
mod line;
mod offers;
mod paths;
mod reaper;
mod recipe;
mod renew;
mod table;
mod write;

use crate::backend::{
    Attempt, Attempted, Backend, Elects, HoldEnd, Kind, Latches, LockId, Place, Release,
    ReleaseOutcome, Renewer, Resizes, ServerIdentity, Settings, WritesWhileHeld,
};
use crate::error::{Error, Result};
use crate::state::LockState;
use crate::waiters::Waiters;
use ensemble::Ensemble;
use parking_lot::Mutex;
use reaper::Reaper;
use std::sync::Arc;
use std::time::{Duration, Instant};
use table::Table;
use zookeeper_blocking::Config as ZkConfig;

/// The longest a waiter sleeps before looking at its queue again when no watch fires. Watches
/// are not lost while the session lives (they are set again after a reconnection), so this only
/// bounds the cost of a defect.
const MAX_RECHECK: Duration = Duration::from_secs(1);

/// How long after an abandoned hold's local deadline its node is deleted: the deadline is
/// already short of the lease by the drift allowance; this covers a late clock reading.
const LAPSE_MARGIN: Duration = Duration::from_millis(5);

/// Why ZooKeeper offers no rate limiter: a grant must be judged by a clock in the same atomic
/// step that records it, and ZooKeeper's only clock (the leader's, stamped on each transaction as
/// it commits) cannot be read inside a transaction, nor relied on to be one clock across leaders.
const LIMITER_REFUSED: &str = "a transaction cannot read the ensemble's clock, which is only \
    stamped on it as it commits (by whichever server leads then)";

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

/// What every lock of a ZooKeeper client shares.
pub(super) struct Ensembled {
    ensemble: Arc<Ensemble>,
    table: Arc<Mutex<Table>>,
    reaper: Reaper,
    prefix: String,
    address: String,
    call_timeout: Duration,
}

/// A ZooKeeper client's backend.
pub(crate) struct ZooKeeper {
    shared: Arc<Ensembled>,
    /// Made at build, so that the ensemble's events wake them; handed to the client once.
    waiters: Mutex<Option<Waiters>>,
}

/// What a ZooKeeper client does not honour, and why.
const FOREIGN: &[(&str, &str)] = &[
    ("password", "a session authenticates with zookeeper_auth"),
    ("postgres_schema", "it is PostgreSQL's"),
    ("postgres_listen_url", "it is PostgreSQL's"),
    (
        "tls_ca_file",
        "this client speaks to ZooKeeper in plaintext only",
    ),
    (
        "tls_ca_pem",
        "this client speaks to ZooKeeper in plaintext only",
    ),
    (
        "tls_client_cert",
        "this client speaks to ZooKeeper in plaintext only",
    ),
    (
        "tls_client_cert_pem",
        "this client speaks to ZooKeeper in plaintext only",
    ),
    (
        "replica_acks",
        "a write is acknowledged once a quorum of the ensemble has it",
    ),
    ("pool_size", "a session is one connection"),
    ("max_connections", "a session is one connection"),
    ("pipelining", "a session is one connection"),
    ("quorum", "it is RedLock's"),
    ("retry_delay", "it is RedLock's"),
];

/// A client of the ensemble `zk` names, whose sessions ask for `session_timeout`, after the
/// settings it cannot honour are refused. It connects to nothing yet: the session opens with the
/// first lock operation.
pub(crate) fn build(
    settings: &Settings,
    zk: &ZooKeeperSettings,
    session_timeout: Duration,
) -> Result<Box<dyn Backend>> {
    for (setting, why) in FOREIGN {
        settings.refuse(&[setting], "ZooKeeper", why)?;
    }
    if zk.hosts.is_empty() {
        return Err(Error::InvalidArgument(
            "a ZooKeeper client needs at least one host:port".into(),
        ));
    }
    for host in &zk.hosts {
        let port = zookeeper_blocking::host_and_port(host).map(|(_, port)| port);
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
    let mut config = ZkConfig::new(zk.hosts.clone());
    config.chroot.clone_from(&zk.chroot);
    config.session_timeout = session_timeout;
    config.connect_timeout = settings.connect_timeout;
    config.digest.clone_from(&zk.digest);
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
    let address = format!(
        "zookeeper://{}{}",
        zk.hosts.join(","),
        zk.chroot.as_deref().unwrap_or("")
    );
    Ok(Box::new(ZooKeeper {
        shared: Arc::new(Ensembled {
            ensemble,
            table,
            reaper,
            prefix: settings.prefix.clone(),
            address,
            call_timeout: settings.command_timeout,
        }),
        waiters: Mutex::new(Some(waiters)),
    }))
}

impl Backend for ZooKeeper {
    /// Every lock's primitive; a rate limiter is refused (see [`LIMITER_REFUSED`]).
    fn place(&self, id: &LockId) -> Result<Arc<dyn Place>> {
        if id.kind == Kind::Limiter {
            return Err(Error::InvalidArgument(format!(
                "a rate limiter is not offered on ZooKeeper: {LIMITER_REFUSED}; {}",
                crate::backend::LIMITS_NEED
            )));
        }
        let path = paths::place_path(&self.shared.prefix, &id.name, id.kind)?;
        Ok(Arc::new(LockNode {
            id: id.clone(),
            path,
            zk: Arc::clone(&self.shared),
        }))
    }

    fn fenced(&self) -> bool {
        true
    }

    fn address(&self) -> &str {
        &self.shared.address
    }

    fn call_timeout(&self) -> Duration {
        self.shared.call_timeout
    }

    fn pause(&self, _ttl: Option<Duration>) -> Duration {
        MAX_RECHECK
    }

    fn renewer(&self) -> Box<dyn Renewer> {
        Box::new(renew::SessionRenewer {
            ensemble: Arc::clone(&self.shared.ensemble),
            table: Arc::clone(&self.shared.table),
            call_timeout: self.shared.call_timeout,
        })
    }

    /// The session's server answers a request.
    fn ping(&self, deadline: Instant) -> Result<()> {
        let session = self.shared.ensemble.session(deadline)?;
        session
            .sync_ping(deadline)
            .map_err(|error| ensemble::unavailable(&error))
    }

    fn waiters(&self, _thread_name: String) -> Result<Waiters> {
        Ok(self.waiters.lock().take().unwrap_or_else(Waiters::local))
    }
}

/// A lock on ZooKeeper: the node its contenders queue under. Its waiters are woken by the
/// node's path, on which the ensemble's watch events arrive.
pub(super) struct LockNode {
    id: LockId,
    path: String,
    zk: Arc<Ensembled>,
}

impl Place for LockNode {
    fn id(&self) -> &LockId {
        &self.id
    }

    fn of_kind(&self, kind: Kind) -> Arc<dyn Place> {
        Arc::new(LockNode {
            id: self.id.with_kind(kind),
            path: self.path.clone(),
            zk: Arc::clone(&self.zk),
        })
    }

    fn address(&self) -> (&str, &str) {
        (&self.zk.address, &self.path)
    }

    fn wake_key(&self) -> &str {
        &self.path
    }

    /// A renewal asks about the hold's node, which the client's table knows by the hold.
    fn hold_address(&self, hold: &str) -> Arc<str> {
        Arc::from(hold)
    }

    fn servers(&self, _deadline: Instant) -> Result<Vec<ServerIdentity>> {
        Ok(vec![ServerIdentity {
            run_id: Some(self.zk.address.clone()),
            peer: None,
        }])
    }

    fn attempt(&self, attempt: &Attempt<'_>, deadline: Instant) -> Result<Attempted> {
        recipe::attempt(self, attempt, deadline)
    }

    fn abandon(&self, owner: &str, _waited: bool) {
        recipe::abandon(self, owner);
    }

    fn ended(&self, hold: &str, end: HoldEnd) {
        match end {
            HoldEnd::Lost => self.zk.reaper.lost(hold),
            HoldEnd::Abandoned { lapses_at } => {
                let held = self.zk.table.lock().held.get(hold).map(|held| held.session);
                let Some(session) = held else {
                    return;
                };
                let job = reaper::Job::Lapse {
                    hold: hold.to_owned(),
                    session,
                };
                self.zk.reaper.reap_at(job, lapses_at + LAPSE_MARGIN);
            }
        }
    }

    fn release(&self, release: &Release<'_>, deadline: Instant) -> ReleaseOutcome {
        recipe::release(self, release, deadline)
    }

    fn inspect(&self, deadline: Instant) -> Result<LockState> {
        inspect::inspect(self, deadline)
    }

    fn force_release(&self, deadline: Instant) -> Result<bool> {
        inspect::force_release(self, deadline)
    }

    fn resizes(&self) -> Option<&dyn Resizes> {
        Some(self)
    }

    fn elects(&self) -> Option<&dyn Elects> {
        Some(self)
    }

    fn latches(&self) -> Option<&dyn Latches> {
        (self.id.kind == Kind::Latch).then_some(self as &dyn Latches)
    }

    /// Every primitive's holds: each is a node of its own, which holds until it goes.
    fn writes(&self) -> Option<&dyn WritesWhileHeld> {
        self.id.kind.holds().then_some(self as &dyn WritesWhileHeld)
    }
}
