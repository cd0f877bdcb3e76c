//! Uncontended lock + unlock against one local redis-server, for `redis-lease` and its peers in the same
//! run; on three masters (RedLock); and on a local Redis Cluster. Contention, fairness and hand-off latency are printed by
//! `cargo run --release -p benches --bin lock_figures`.
//!
//! Run: `cargo bench -p benches --bench locks`.
#![allow(missing_docs)]

use benches::lock_peers::{
    Lease, LeaseCluster, LeaseRedLock, LeaseUnpipelined, LockPeer, Raw, Redlock, Rslock,
};
use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion};
use std::time::Duration;
use testkit::{RedisCluster, RedisServer};

fn pair<P: LockPeer>(group: &mut BenchmarkGroup<'_, WallTime>, urls: &[String]) {
    let mut peer = P::group(urls, 1).pop().expect("one handle");
    group.bench_function(P::NAME, |b| {
        b.iter(|| peer.with_lock("bench:uncontended", &mut || {}))
    });
}

fn uncontended(c: &mut Criterion) {
    let server = RedisServer::start();
    let urls = [server.url()];
    let mut group = c.benchmark_group("uncontended lock+unlock");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    pair::<Raw>(&mut group, &urls);
    pair::<Lease>(&mut group, &urls);
    pair::<LeaseUnpipelined>(&mut group, &urls);
    pair::<Rslock>(&mut group, &urls);
    pair::<Redlock>(&mut group, &urls);
    group.finish();
}

fn three_masters(c: &mut Criterion) {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let mut group = c.benchmark_group("uncontended lock+unlock, 3 masters");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    pair::<LeaseRedLock>(&mut group, &urls);
    pair::<Rslock>(&mut group, &urls);
    pair::<Redlock>(&mut group, &urls);
    group.finish();
}

fn cluster(c: &mut Criterion) {
    let cluster = RedisCluster::start(3, 1);
    let mut group = c.benchmark_group("uncontended lock+unlock, cluster");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    pair::<LeaseCluster>(&mut group, &cluster.seed_urls());
    group.finish();
}

criterion_group!(locks, uncontended, three_masters, cluster);
criterion_main!(locks);
