//! The deployments a scenario's clients take the lock on.

/// Which lock the clients take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `redis_lease::Lock` on one server, with fencing tokens.
    Single,
    /// `redis_lease::RedLock` on three masters (no fencing tokens).
    Red,
    /// `redis_lease::Lock` on a Redis Cluster of three masters and three replicas, with fencing tokens
    /// (kept in the lock's slot).
    Cluster,
    /// `redis_lease::Lock` on a Sentinel-managed primary with one replica and three Sentinels, with
    /// fencing tokens; with `acks`, every acquisition, renewal and release waits for the
    /// replica's acknowledgement (`WAIT`) before it counts.
    Sentinel { acks: bool },
    /// `redis_lease::Client::zookeeper` on an ensemble of three ZooKeeper servers, with fencing
    /// tokens (the holder nodes' creation zxids); the session is every hold's lease.
    ZooKeeper,
    /// `redis_lease::Client::postgres` on one PostgreSQL server, with fencing tokens (a name's
    /// counter row); with `pooled`, every call goes through PgBouncer in transaction mode, with
    /// fewer server connections than the clients have, and the listening connection straight to
    /// the server.
    Postgres { pooled: bool },
}

impl Mode {
    /// Whether the clients get fencing tokens, so that stale writes can be counted.
    pub fn fenced(self) -> bool {
        self != Mode::Red
    }

    /// The mode `fault_client` takes.
    pub(crate) fn client_mode(self) -> &'static str {
        match self {
            Mode::Single => "single",
            Mode::Red => "redlock",
            Mode::Cluster => "cluster",
            Mode::Sentinel { acks: false } => "sentinel",
            Mode::Sentinel { acks: true } => "sentinel-acks",
            Mode::ZooKeeper => "zookeeper",
            Mode::Postgres { .. } => "postgres",
        }
    }

    /// Whether the lock lives on Redis servers, whose `MONITOR` logs can be replayed.
    pub(crate) fn on_redis(self) -> bool {
        !matches!(self, Mode::ZooKeeper | Mode::Postgres { .. })
    }
}
