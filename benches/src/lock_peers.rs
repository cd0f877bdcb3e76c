//! The distributed locks the benchmarks compare, behind one interface: this workspace's `redis-lease`
//! (its single-server `Lock`, and its RedLock over several masters), the raw floor (SET NX PX,
//! then a Lua check-and-delete, on one connection), `rslock` and `redlock`. `rslock` and
//! `redlock` run over every URL given: one for the single-server tables, three for RedLock's.

use redis::Script;
use std::time::Duration;

/// The lease every peer takes its lock with.
pub const LEASE: Duration = Duration::from_secs(30);

/// A lock under test, used by one thread.
pub trait LockPeer: Send + 'static {
    /// The name printed in reports.
    const NAME: &'static str;
    /// `threads` handles on the servers at `urls` (single-server peers use the first), sharing
    /// whatever the library shares.
    fn group(urls: &[String], threads: usize) -> Vec<Self>
    where
        Self: Sized;
    /// Takes `name` (waiting as the library waits), runs `critical`, releases.
    fn with_lock(&mut self, name: &str, critical: &mut dyn FnMut());
}

/// `threads` handles on one `redis-lease` client built by `builder`, as the benchmarks set it up.
fn lease_group<P>(
    builder: redis_lease::ClientBuilder,
    pipelining: bool,
    threads: usize,
    handle: impl Fn(redis_lease::Client) -> P,
) -> Vec<P> {
    let client = builder
        .default_lease(LEASE)
        .pool_size(threads.max(1))
        .pipelining(pipelining)
        .build()
        .expect("valid settings");
    (0..threads).map(|_| handle(client.clone())).collect()
}

/// One critical section under `redis-lease`'s lock `name`, on any deployment.
fn lease_section(client: &redis_lease::Client, name: &str, critical: &mut dyn FnMut()) {
    let guard = client
        .lock(name)
        .expect("valid name")
        .lock()
        .expect("acquired");
    critical();
    guard.unlock().expect("released");
}

/// A `redis-lease` peer: one client shared by every thread, as an application would use it.
macro_rules! lease_peer {
    ($(#[$doc:meta])* $peer:ident, $name:literal, $builder:expr, $pipelining:literal) => {
        $(#[$doc])*
        pub struct $peer(redis_lease::Client);

        impl LockPeer for $peer {
            const NAME: &'static str = $name;
            fn group(urls: &[String], threads: usize) -> Vec<Self> {
                let builder: fn(&[String]) -> redis_lease::ClientBuilder = $builder;
                lease_group(builder(urls), $pipelining, threads, $peer)
            }
            fn with_lock(&mut self, name: &str, critical: &mut dyn FnMut()) {
                lease_section(&self.0, name, critical);
            }
        }
    };
}

lease_peer!(
    /// `redis-lease` on one server, its calls pipelined (the default).
    Lease,
    "lease",
    |urls| redis_lease::Client::builder(urls[0].as_str()),
    true
);
lease_peer!(
    /// [`Lease`] with every call on a pooled connection of its own.
    LeaseUnpipelined,
    "lease, unpipelined",
    |urls| redis_lease::Client::builder(urls[0].as_str()),
    false
);
lease_peer!(
    /// `redis-lease` on a Redis Cluster (the URLs are seed nodes).
    LeaseCluster,
    "lease, cluster",
    |urls| redis_lease::Client::cluster(urls.iter().cloned()),
    true
);
lease_peer!(
    /// [`LeaseCluster`] with every call on a pooled connection of its own.
    LeaseClusterUnpipelined,
    "lease, cluster, unpipelined",
    |urls| redis_lease::Client::cluster(urls.iter().cloned()),
    false
);

/// [`LeaseCluster`] on a cluster of masters without replicas: the same client, so that beside
/// it the cost of the slot routing shows apart from the cost of replication.
pub struct LeaseClusterNoReplicas(LeaseCluster);

impl LockPeer for LeaseClusterNoReplicas {
    const NAME: &'static str = "lease, cluster without replicas";
    fn group(urls: &[String], threads: usize) -> Vec<Self> {
        LeaseCluster::group(urls, threads)
            .into_iter()
            .map(LeaseClusterNoReplicas)
            .collect()
    }
    fn with_lock(&mut self, name: &str, critical: &mut dyn FnMut()) {
        self.0.with_lock(name, critical);
    }
}

/// The raw floor's release: delete the key if it still holds the taker's token.
pub const CHECK_AND_DELETE_LUA: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";

/// The check-and-delete script of the raw floor, for `redis-benchmark` to run by its SHA1.
pub fn check_and_delete() -> &'static Script {
    &CHECK_AND_DELETE
}

static CHECK_AND_DELETE: std::sync::LazyLock<Script> =
    std::sync::LazyLock::new(|| Script::new(CHECK_AND_DELETE_LUA));

/// The raw floor's take: `SET name value NX PX ms`; whether it took the key.
pub fn set_nx_px(
    con: &mut redis::Connection,
    name: &str,
    value: impl redis::ToRedisArgs,
    ms: u64,
) -> bool {
    let set: Option<String> = redis::cmd("SET")
        .arg(name)
        .arg(value)
        .arg("NX")
        .arg("PX")
        .arg(ms)
        .query(con)
        .expect("SET");
    set.is_some()
}

/// The floor: SET NX PX to take, a Lua check-and-delete to release, one connection per thread;
/// contended, it spins on SET NX without pausing.
pub struct Raw {
    con: redis::Connection,
    token: u64,
}

impl LockPeer for Raw {
    const NAME: &'static str = "raw SET NX + Lua delete";
    fn group(urls: &[String], threads: usize) -> Vec<Self> {
        (0..threads)
            .map(|n| Raw {
                con: redis::Client::open(urls[0].as_str())
                    .and_then(|client| client.get_connection())
                    .expect("connect"),
                token: (n as u64) << 40,
            })
            .collect()
    }
    fn with_lock(&mut self, name: &str, critical: &mut dyn FnMut()) {
        self.token += 1;
        while !set_nx_px(&mut self.con, name, self.token, LEASE.as_millis() as u64) {}
        critical();
        let _: i64 = CHECK_AND_DELETE
            .key(name)
            .arg(self.token)
            .invoke(&mut self.con)
            .expect("delete");
    }
}

/// `rslock` (async, driven by a current-thread tokio runtime per thread), over every URL, its
/// default retry policy.
pub struct Rslock {
    runtime: tokio::runtime::Runtime,
    manager: rslock::LockManager,
}

impl LockPeer for Rslock {
    const NAME: &'static str = "rslock";
    fn group(urls: &[String], threads: usize) -> Vec<Self> {
        (0..threads)
            .map(|_| Rslock {
                runtime: tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime"),
                manager: rslock::LockManager::new(urls.to_vec()),
            })
            .collect()
    }
    fn with_lock(&mut self, name: &str, critical: &mut dyn FnMut()) {
        let manager = &self.manager;
        let lock = self.runtime.block_on(async {
            loop {
                if let Ok(lock) = manager.lock(name.as_bytes(), LEASE).await {
                    return lock;
                }
            }
        });
        critical();
        self.runtime.block_on(manager.unlock(&lock));
    }
}

/// `redlock` (blocking), over every URL, its default retry policy.
pub struct Redlock(redlock::RedLock);

impl LockPeer for Redlock {
    const NAME: &'static str = "redlock";
    fn group(urls: &[String], threads: usize) -> Vec<Self> {
        (0..threads)
            .map(|_| Redlock(redlock::RedLock::new(urls.to_vec())))
            .collect()
    }
    fn with_lock(&mut self, name: &str, critical: &mut dyn FnMut()) {
        let lock = loop {
            if let Ok(Some(lock)) = self.0.lock(name.as_bytes(), LEASE.as_millis() as usize) {
                break lock;
            }
        };
        critical();
        self.0.unlock(&lock);
    }
}

/// `redis-lease`'s RedLock over every URL: one client shared by every thread, with a command timeout of
/// 5% of the lease.
pub struct LeaseRedLock(redis_lease::Client);

impl LockPeer for LeaseRedLock {
    const NAME: &'static str = "lease RedLock";
    fn group(urls: &[String], threads: usize) -> Vec<Self> {
        let masters = redis_lease::Client::redlock(urls.iter().cloned())
            .default_lease(LEASE)
            .command_timeout(LEASE / 20)
            .build()
            .expect("valid settings");
        (0..threads)
            .map(|_| LeaseRedLock(masters.clone()))
            .collect()
    }
    fn with_lock(&mut self, name: &str, critical: &mut dyn FnMut()) {
        lease_section(&self.0, name, critical);
    }
}
