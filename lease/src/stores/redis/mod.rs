//! Redis: connections ([`conn`], [`pool`], the shared pipelined connection in [`pipe`]), the
//! scripts and their keys ([`scripts`], [`keys`], the fencing epoch in [`fencing`]), the pub/sub
//! subscriber ([`pubsub`]), and the deployments: one server ([`server`]), a Redis Cluster
//! ([`cluster`]: the master of the lock's slot), the primary Sentinel names ([`sentinel`]), and a
//! quorum of independent masters ([`quorum`], RedLock, over [`fanout`]). The lock calls the first
//! three make on the one server they reach are in [`on_server`], a rate limiter's in `limiter`.

pub(crate) mod cluster;
pub(crate) mod conn;
mod errors;
pub(crate) mod fanout;
pub(crate) mod fencing;
pub(crate) mod keys;
mod limiter;
pub(crate) mod on_server;
pub(crate) mod pipe;
pub(crate) mod place;
pub(crate) mod pool;
pub(crate) mod pubsub;
pub(crate) mod quorum;
pub(crate) mod route;
pub(crate) mod scripts;
pub(crate) mod sentinel;
pub(crate) mod server;
pub(crate) mod settings;
pub(crate) mod topology;
