//! How a call reaches the server that keeps a key: [`Route::Server`], one server's pool (the
//! server a URL names, or the primary the Sentinels name), or [`Route::Cluster`], the master of
//! the key's slot, following redirections. Whatever a lock's call does once there is the same on
//! both (`on_server.rs`), and one place type runs every call through its route (`place.rs`).

use crate::backend::{Renewer, ServerIdentity};
use crate::error::Result;
use crate::stores::redis::cluster::Cluster;
use crate::stores::redis::pool::{Pool, Via};
use crate::stores::redis::scripts::{Acks, Announce};
use crate::stores::redis::server;
use crate::waiters::Waiters;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The server a call reached: one server's pool, or a Cluster's slot master.
pub(crate) enum Node<'a> {
    Shown(&'a Pool),
    Slot(Arc<str>),
}

impl Node<'_> {
    /// The server, as shown to people (passwords hidden).
    pub(crate) fn shown(&self) -> &str {
        match self {
            Node::Shown(pool) => pool.shown(),
            Node::Slot(node) => node,
        }
    }
}

/// How the calls of a Redis client reach the server that keeps a key.
pub(crate) enum Route {
    /// Every key on one server, reached through its pool.
    Server(Arc<Pool>),
    /// Each key on the master of its slot.
    Cluster(Cluster),
}

impl Route {
    /// Runs `op` on the server that keeps `key`, by `deadline`. On a Cluster, `op` is sent
    /// again where it certainly did not run (redirected, the cluster busy).
    pub(crate) fn call<T>(
        &self,
        key: &str,
        deadline: Instant,
        op: impl FnMut(Via<'_>) -> Result<T>,
    ) -> Result<T> {
        self.named(key, deadline, op).map(|(value, _)| value)
    }

    /// [`Route::call`], naming the server that answered (as the pool shows it, for one server).
    pub(crate) fn named<T>(
        &self,
        key: &str,
        deadline: Instant,
        mut op: impl FnMut(Via<'_>) -> Result<T>,
    ) -> Result<(T, Node<'_>)> {
        match self {
            Route::Server(pool) => op(Via::direct(pool)).map(|value| (value, Node::Shown(pool))),
            Route::Cluster(cluster) => cluster
                .run(key, deadline, op)
                .map(|(value, node)| (value, Node::Slot(node))),
        }
    }

    /// How releases are announced: on the server's channels, or on the sharded channels of the
    /// slot's master.
    pub(crate) fn announce(&self) -> Announce {
        match self {
            Route::Server(_) => Announce::Global,
            Route::Cluster(_) => Announce::Sharded,
        }
    }

    /// The replica acknowledgements every write waits for, if the client asks for any.
    pub(crate) fn acks(&self) -> Option<Acks> {
        match self {
            Route::Server(pool) => pool.acks(),
            Route::Cluster(cluster) => cluster.acks(),
        }
    }

    /// Where the keys live, as text (passwords hidden).
    pub(crate) fn address(&self) -> &str {
        match self {
            Route::Server(pool) => pool.shown(),
            Route::Cluster(cluster) => cluster.address(),
        }
    }

    /// The longest one call may take.
    pub(crate) fn call_timeout(&self) -> Duration {
        match self {
            Route::Server(pool) => pool.command_timeout(),
            Route::Cluster(cluster) => cluster.command_timeout(),
        }
    }

    /// The server that keeps `key`, as it says who it is.
    pub(crate) fn identify(&self, key: &str, deadline: Instant) -> Result<ServerIdentity> {
        self.call(key, deadline, |via| via.pool.identify(deadline))
    }

    /// One round trip to what a lock's call would reach: the server says who it is; a Cluster
    /// node answers with the map of the slots' masters, which the client takes.
    pub(crate) fn ping(&self, deadline: Instant) -> Result<()> {
        match self {
            Route::Server(pool) => pool.identify(deadline).map(drop),
            Route::Cluster(cluster) => cluster.refresh(deadline),
        }
    }

    /// The watchdog's renewals: one batched call per server.
    pub(crate) fn renewer(&self) -> Box<dyn Renewer> {
        match self {
            Route::Server(pool) => server::renewer(Arc::clone(pool)),
            Route::Cluster(cluster) => cluster.renewer(),
        }
    }

    /// The client's waiters, woken by the pub/sub subscriber of the releases' channels.
    pub(crate) fn waiters(&self, thread_name: String) -> Waiters {
        match self {
            Route::Server(pool) => server::waiters(Arc::clone(pool), thread_name),
            Route::Cluster(cluster) => cluster.waiters(thread_name),
        }
    }
}
