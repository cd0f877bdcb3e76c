//! Test support shared by the workspace's tests and benchmarks. No mocks: a [`RedisServer`] is a
//! real `redis-server` process on a free loopback port.
#![allow(missing_docs, clippy::unwrap_used)]

mod lcg;
mod monitor;
mod redis_server;

pub use lcg::Lcg;
pub use monitor::{Monitor, Monitored};
pub use redis_server::RedisServer;
