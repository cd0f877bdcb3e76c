//! The stores a lock can live in, one folder each: [`redis`] (one server, a Cluster, a
//! Sentinel-managed primary, a RedLock quorum of masters) and, with the `zookeeper` feature,
//! [`zookeeper`]. Each builds its [`Backend`](crate::backend::Backend) from the client's
//! settings; neither imports the other, and nothing above the seam imports either.

#[cfg(feature = "postgres")]
pub(crate) mod postgres;
pub(crate) mod redis;
#[cfg(feature = "zookeeper")]
pub(crate) mod zookeeper;
