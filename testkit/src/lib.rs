//! Test support shared by the workspace's tests and benchmarks. No mocks: a [`RedisServer`] is a
//! real `redis-server` process on a free loopback port; [`RedisServer::start_tls`] starts one
//! that speaks TLS with certificates made at test time; [`RedisCluster`] and [`SentinelSet`]
//! are real topologies of such processes on loopback. [`ZooKeeper`] and [`ZooKeeperEnsemble`]
//! are real ZooKeeper servers from Debian's `zookeeper` package, and a [`Proxy`] in front of one
//! cuts or freezes the network to it. [`PgServer`] is a real PostgreSQL 15 cluster made with
//! `initdb` (password users, TLS), and [`PgBouncer`] a real PgBouncer in transaction mode in
//! front of one. Every process is killed when the value that started it is
//! dropped, also when a test panics.
//!
//! ```no_run
//! use testkit::{
//!     zookeeper_mode, Failover, Proxy, RedisCluster, RedisServer, SentinelSet, TlsOptions,
//!     ZooKeeper, ZooKeeperEnsemble,
//! };
//!
//! // rediss://127.0.0.1:port, with the CA, a client certificate and its key as PEM files.
//! let tls = RedisServer::start_tls(TlsOptions::default());
//! let files = tls.tls_certificates().expect("a TLS server");
//! let _ = (tls.url(), files.ca_cert(), files.client_cert(), files.client_key());
//!
//! // Three masters and three replicas; the replica of a key's master takes over.
//! let cluster = RedisCluster::start(3, 1);
//! let master = cluster.master_for_key("{lock}");
//! cluster.failover(cluster.replicas_of(master)[0], Failover::Coordinated);
//!
//! // A primary, a replica and three Sentinels; a failover on request.
//! let sentinels = SentinelSet::start();
//! let _ = (sentinels.sentinel_urls(), sentinels.master_name());
//! let new_primary = sentinels.failover();
//! # let _ = new_primary;
//!
//! // A standalone ZooKeeper, reached through a proxy that can cut the network.
//! let zk = ZooKeeper::start();
//! let proxy = Proxy::start(([127, 0, 0, 1], zk.port()).into());
//! proxy.cut();
//! proxy.heal();
//! assert_eq!(zookeeper_mode(zk.port()).as_deref(), Some("standalone"));
//!
//! // Three ZooKeeper servers; killing the leader elects another.
//! let mut ensemble = ZooKeeperEnsemble::start(3);
//! let leader = ensemble.leader();
//! ensemble.stop(leader);
//! let _ = (ensemble.connect_string(), ensemble.leader(), proxy.addr());
//!
//! // PostgreSQL 15 with TLS, and PgBouncer in transaction mode in front of it.
//! use testkit::{PgBouncer, PgOptions, PgServer, PgTls, Shutdown};
//! let mut pg = PgServer::start_with(PgOptions {
//!     tls: Some(PgTls::default()),
//!     settings: vec![("synchronous_commit".into(), "off".into())],
//! });
//! let bouncer = PgBouncer::start(&pg);
//! let _ = (pg.scram_url(), pg.md5_url(), bouncer.scram_url(), pg.psql("SELECT 1"));
//! pg.pause();
//! pg.resume();
//! pg.restart(Shutdown::Immediate);
//! ```
#![allow(clippy::unwrap_used)]

mod acl;
mod cli;
mod cluster;
mod gate;
mod hostile;
mod info;
mod lcg;
mod monitor;
mod pgbouncer;
mod postgres;
mod programs;
mod redis_server;
mod sentinel;
mod tied;
mod timed_run;
mod tls;
mod tls_server;
mod wait;
mod zookeeper;

pub use cli::redis_cli;
pub use cluster::{slot, ClusterNode, Failover, RedisCluster, Role, SLOTS};
pub use gate::{Gate, PEER_SOURCE};
pub use hostile::{Drip, Garbage, Lossy, Silent};
pub use lcg::Lcg;
pub use monitor::{Monitor, Monitored};
pub use pgbouncer::PgBouncer;
pub use postgres::{PgOptions, PgServer, PgTls, Shutdown};
pub use redis_server::RedisServer;
pub use sentinel::SentinelSet;
pub use tls::{ClientAuth, TlsCertificates, TlsOptions};
pub use wait::wait_until;
pub use zookeeper::{
    zookeeper_four_letter_word, zookeeper_mode, zookeeper_zxid, Proxy, ZooKeeper, ZooKeeperEnsemble,
};
