//! The faults a scenario injects, each with its facts in one place: the deployments it applies
//! to, what it needs set up, what it does to the servers' logs and how its effect shows (in
//! [`Fault::traits`], `traits.rs`), and how it is injected and healed (in [`Fault::inject`]),
//! both in the order the variants are declared; whom a fault strikes in `holders.rs`.

mod holders;
mod traits;

pub use traits::{Evidence, Traits};

use crate::clients::Clients;
use crate::clock::now_ns;
use crate::failover;
use crate::postgres::Deployment;
use crate::proxy::{Mode as ProxyMode, Proxy};
use crate::LOCK_KEY;
use holders::{holder_owner, holding, pid_of, WAITER_SEARCH_LEASES};
use redis::Commands;
use std::path::PathBuf;
use std::process::Command;
use std::thread;
use std::time::Duration;
use testkit::{Failover, RedisCluster, RedisServer, SentinelSet, Shutdown, ZooKeeperEnsemble};

/// The fault a scenario injects, again and again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    None,
    /// SIGSTOP of the lock server (with RedLock, of one master; on PostgreSQL, of the server and
    /// every process of it) for this many leases.
    FreezeServer(u32),
    /// `CLIENT PAUSE` on the lock server for this many leases.
    ClientPause(u32),
    /// `DEBUG SLEEP` on the lock server for this many leases.
    DebugSleep(u32),
    /// SIGSTOP of the client process holding the lock, for this many leases (the long-GC case).
    /// On ZooKeeper, past the session timeout (one lease): the ensemble expires the session; the
    /// holder is one of the long holds, looked for in the histories. On PostgreSQL, the owner of
    /// the hold the store's table has.
    FreezeHolder(u32),
    /// The lock key's TTL cut to 1 ms while it is held (a key expiring early).
    ExpireKey,
    /// One master killed, and restarted empty after this many leases.
    KillMaster(u32),
    /// One master killed and restarted empty at once.
    RestartMasterNow,
    /// Through a proxy: every reply arrives 1.5 leases late, for this many leases.
    DelayReplies(u32),
    /// Through a proxy: one RedLock master answers 50 ms late (half the clients' node timeout),
    /// for this many leases.
    SlowMaster(u32),
    /// Through a proxy: replies are held for this many leases, then delivered.
    HoldReplies(u32),
    /// The clients' wall clock stepped 5 minutes forward, then back, and so on (libfaketime);
    /// their monotonic clock is left alone.
    ClockJumps,
    /// Through a proxy: bytes dropped both ways for this many leases (with RedLock, to one
    /// master; on PostgreSQL, on the clients' calls, their listening connection going straight
    /// to the server), then every connection reset.
    Partition(u32),
    /// On a cluster: SIGSTOP of the master of the lock's slot for one and a half leases, within
    /// the cluster's node timeout, so that no replica takes over.
    FreezeSlotMaster,
    /// On a cluster: the replica of the lock's slot master made master by a coordinated
    /// `CLUSTER FAILOVER` (the old master stops writes until the replica has caught up).
    PromoteReplica,
    /// On a cluster: the lock's slot, with its keys, moved to another master while the clients
    /// go on, in the steps `redis-cli --cluster reshard` takes.
    Reshard,
    /// On a cluster: the replica of the lock's slot master cut off, the clients on the master
    /// alone for half a lease, the master killed, the replica made master by
    /// `CLUSTER FAILOVER FORCE`, and the old master back, empty, as its replica.
    ForceFailover,
    /// With Sentinels: the replica cut off, the clients on the primary alone for half a lease,
    /// the primary killed, the replica promoted, and the old primary back, empty, as its replica.
    KillUnreplicated,
    /// With Sentinels: `SENTINEL FAILOVER`, the old primary made the new one's replica.
    SentinelFailover,
    /// With Sentinels: one Sentinel frozen (SIGSTOP, taking turns), `SENTINEL FAILOVER` asked of
    /// another, the old primary made the new one's replica, and the frozen Sentinel let run
    /// again once the clients have gone on for a lease.
    FailoverPastAFrozenSentinel,
    /// With Sentinels: the primary cut off from the Sentinels and its replica while the clients
    /// still reach it (a partition), for this many leases after the Sentinels promoted the
    /// replica; then healed, and the old primary made the new one's replica.
    PartitionPrimary(u32),
    /// With Sentinels: the primary frozen (SIGSTOP) until its replica is promoted, then back,
    /// believing it is the primary until the Sentinels make it a replica; then its copy of the
    /// lock is compared with the new primary's.
    FreezePrimary,
    /// On ZooKeeper: the leader killed (SIGKILL) while one of the long holds is renewed, and
    /// started again with its data after this many leases; the two others elect a new leader
    /// meanwhile.
    KillLeader(u32),
    /// On ZooKeeper: the leader frozen (SIGSTOP) while one of the long holds is renewed, for this
    /// many leases, then let run again. The followers leave a leader they have not heard from for
    /// `syncLimit` ticks (2 s here, two leases): frozen longer, it is replaced, and cannot undo
    /// anything when it wakes; frozen shorter but past the session timeout, it wakes to expire
    /// the sessions it has not heard of, which its followers kept answering meanwhile.
    FreezeLeader(u32),
    /// On ZooKeeper: every connection of the client process in one of the long holds frozen (its
    /// own proxies in front of the three servers pass nothing on, either way) for this many
    /// leases, past its session timeout, then healed.
    CutOffHolder(u32),
    /// On ZooKeeper: the follower that serves the most client sessions killed (SIGKILL) and
    /// started again with its data at once; then every client's connections to the leader cut
    /// for a quarter lease, so that the sessions it gathered move on to the followers.
    RestartFollower,
    /// On PostgreSQL: the server stopped, by a fast shutdown (sessions ended, a checkpoint) or
    /// an immediate one (every process gone at once, the WAL replayed at the next start, as after
    /// a crash), and started again with its data at once.
    RestartServer(Shutdown),
    /// On PostgreSQL, through a proxy in front of the clients' listening connections only:
    /// bytes dropped both ways for this many leases, then every connection reset. The calls
    /// go on; the releases' notifications do not reach the waiters meanwhile.
    PartitionListener(u32),
    /// A client process killed (SIGKILL) while all its threads wait for the lock, one of them
    /// for a tenth of a lease at least, and another started in its place for the rest of the
    /// scenario (as a supervisor restarts a service).
    KillWaiter,
    /// Each time one of [`Fault::mix`], drawn from the seed: the soak.
    Mix,
}

impl Fault {
    /// Injects the fault once and heals it; `count` is how many of its kind came before, to
    /// take turns among servers and directions. Returns the window in which it was active, or
    /// nothing if it could not be injected.
    pub(crate) fn inject(
        self,
        lease: Duration,
        count: usize,
        targets: Targets<'_>,
    ) -> Option<(u64, u64)> {
        let Targets {
            servers,
            cluster,
            sentinels,
            ensemble,
            postgres,
            proxies,
            client_proxies,
            clients,
            histories,
            diverged,
        } = targets;
        // Later for a fault that first looks for the holder.
        let mut start = now_ns();
        match self {
            Fault::None | Fault::Mix => return None,
            Fault::FreezeServer(leases) if postgres.is_some() => {
                postgres?.freeze(lease * leases);
            }
            Fault::FreezeServer(leases) => {
                let victim = count % servers.len();
                servers[victim].pause();
                thread::sleep(lease * leases);
                servers[victim].resume();
            }
            Fault::ClientPause(leases) => {
                let millis = (lease * leases).as_millis() as u64;
                let paused: redis::RedisResult<()> = redis::cmd("CLIENT")
                    .arg("PAUSE")
                    .arg(millis)
                    .arg("ALL")
                    .query(&mut servers[0].connection());
                paused.ok()?;
                thread::sleep(lease * leases);
            }
            Fault::DebugSleep(leases) => {
                let seconds = (lease * leases).as_secs_f64();
                let _: redis::RedisResult<()> = redis::cmd("DEBUG")
                    .arg("SLEEP")
                    .arg(seconds)
                    .query(&mut servers[0].connection());
            }
            Fault::FreezeHolder(leases) => {
                // Without a lock key or row to read the owner from (ZooKeeper; a semaphore's or a
                // read-write lock's holds), the histories tell the holder.
                let owner = match (postgres, servers.first()) {
                    (Some(postgres), _) => postgres.holder(),
                    (None, Some(server)) if ensemble.is_none() => holder_owner(server),
                    _ => None,
                };
                let pid = owner.and_then(|owner| pid_of(&owner, histories));
                let pid = match pid {
                    Some(pid) => pid,
                    None => holding(histories, lease)?.pid,
                };
                start = now_ns();
                signal(pid, "-STOP");
                thread::sleep(lease * leases);
                signal(pid, "-CONT");
            }
            Fault::ExpireKey => {
                let cut: redis::RedisResult<i64> = servers[0].connection().pexpire(LOCK_KEY, 1);
                if cut.ok()? == 0 {
                    return None;
                }
            }
            Fault::KillMaster(leases) => {
                let victim = count % servers.len();
                servers[victim].stop();
                thread::sleep(lease * leases);
                servers[victim].start_again();
            }
            Fault::RestartMasterNow => {
                let victim = count % servers.len();
                servers[victim].restart();
            }
            Fault::DelayReplies(leases) => {
                proxies[0].set(ProxyMode::DelayReplies(lease * 3 / 2));
                thread::sleep(lease * leases);
                proxies[0].set(ProxyMode::Pass);
            }
            Fault::SlowMaster(leases) => {
                let victim = &proxies[count % proxies.len()];
                victim.set(ProxyMode::DelayReplies(lease / 20));
                thread::sleep(lease * leases);
                victim.set(ProxyMode::Pass);
            }
            Fault::HoldReplies(leases) => {
                proxies[0].set(ProxyMode::HoldReplies);
                thread::sleep(lease * leases);
                proxies[0].set(ProxyMode::Pass);
            }
            Fault::ClockJumps => {
                let offset = if count.is_multiple_of(2) {
                    "+5m"
                } else {
                    "-5m"
                };
                let clock_file = histories.first()?.with_file_name("faketime");
                std::fs::write(clock_file, format!("{offset}\n")).ok()?;
            }
            Fault::Partition(leases) => {
                let victim = &proxies[count % proxies.len()];
                victim.set(ProxyMode::Blackhole);
                thread::sleep(lease * leases);
                // Bytes were dropped mid-stream: the connections cannot be trusted any more.
                victim.reset();
                victim.set(ProxyMode::Pass);
            }
            Fault::FreezeSlotMaster => {
                let cluster = cluster?;
                let master = cluster.master_for_key(LOCK_KEY);
                cluster.pause(master);
                thread::sleep(lease * 3 / 2);
                cluster.resume(master);
            }
            Fault::PromoteReplica => {
                let cluster = cluster?;
                let master = cluster.master_for_key(LOCK_KEY);
                let replica = *cluster.replicas_of(master).first()?;
                cluster.failover(replica, Failover::Coordinated);
            }
            Fault::Reshard => {
                let cluster = cluster?;
                let slot = testkit::slot(LOCK_KEY);
                let from = cluster.master_of_slot(slot);
                let masters = cluster.masters();
                let at = masters.iter().position(|&port| port == from)?;
                let to = masters[(at + 1) % masters.len()];
                cluster.migrate_slot(slot, from, to);
            }
            Fault::ForceFailover => failover::force_behind(cluster?, lease)?,
            Fault::KillUnreplicated => failover::kill_unreplicated(sentinels?, lease),
            Fault::SentinelFailover => failover::on_request(sentinels?),
            Fault::FailoverPastAFrozenSentinel => {
                failover::past_a_frozen_sentinel(sentinels?, count, lease);
            }
            Fault::PartitionPrimary(leases) => {
                failover::partition_primary(sentinels?, lease * leases)
            }
            Fault::FreezePrimary => diverged.extend(failover::freeze_primary(sentinels?)),
            Fault::KillLeader(leases) => {
                let ensemble = ensemble?;
                // Killed whether a long hold turns up or not.
                let _ = holding(histories, lease);
                let leader = ensemble.wait_for_leader(lease * 10)?;
                start = now_ns();
                ensemble.stop(leader);
                thread::sleep(lease * leases);
                ensemble.start_again(leader);
            }
            Fault::FreezeLeader(leases) => {
                let ensemble = ensemble?;
                // Frozen whether a long hold turns up or not.
                let _ = holding(histories, lease);
                let leader = ensemble.wait_for_leader(lease * 10)?;
                start = now_ns();
                ensemble.pause(leader);
                thread::sleep(lease * leases);
                ensemble.resume(leader);
            }
            Fault::CutOffHolder(leases) => {
                let holder = holding(histories, lease)?;
                // The histories are each process's threads' in turn.
                let threads = histories.len() / client_proxies.len().max(1);
                let own = client_proxies.get(holder.index / threads.max(1))?;
                start = now_ns();
                own.iter().for_each(testkit::Proxy::freeze);
                thread::sleep(lease * leases);
                own.iter().for_each(testkit::Proxy::heal);
            }
            Fault::RestartFollower => {
                let ensemble = ensemble?;
                let leader = ensemble.wait_for_leader(lease * 10)?;
                // The follower serving the most client sessions, taking turns when they tie.
                let (served, _, victim) = (0..ensemble.len())
                    .filter(|&node| node != leader)
                    .map(|node| {
                        let turn = (node + count) % ensemble.len();
                        (sessions_served(ensemble.port(node)), turn, node)
                    })
                    .max()?;
                if served == 0 {
                    return None;
                }
                start = now_ns();
                ensemble.stop(victim);
                ensemble.start_again(victim);
                // Sessions leave a server that fails and never come back by themselves: the
                // leader, never restarted here, would soon serve them all, and a follower's
                // restart would reach nobody. So every client's connection to the leader is cut
                // for a moment, and the sessions it served move on to the followers.
                let leader = ensemble.wait_for_leader(lease * 10).unwrap_or(leader);
                let to_leader: Vec<&testkit::Proxy> = client_proxies
                    .iter()
                    .filter_map(|own| own.get(leader))
                    .collect();
                to_leader.iter().for_each(|proxy| proxy.cut());
                thread::sleep(lease / 4);
                to_leader.iter().for_each(|proxy| proxy.heal());
            }
            Fault::RestartServer(how) => postgres?.restart(how),
            Fault::PartitionListener(leases) => {
                let proxy = proxies.first()?;
                // Nothing to cut if no listening connection is up (each client keeps one).
                if proxy.carried() == 0 {
                    return None;
                }
                proxy.set(ProxyMode::Blackhole);
                thread::sleep(lease * leases);
                proxy.reset();
                proxy.set(ProxyMode::Pass);
            }
            Fault::KillWaiter => {
                return clients.restart_a_waiter(count, lease / 10, lease * WAITER_SEARCH_LEASES);
            }
        }
        Some((start, now_ns()))
    }
}

/// What a fault is injected into.
pub(crate) struct Targets<'a> {
    pub servers: &'a mut [RedisServer],
    pub cluster: Option<&'a mut RedisCluster>,
    pub sentinels: Option<&'a mut SentinelSet>,
    pub ensemble: Option<&'a mut ZooKeeperEnsemble>,
    pub proxies: &'a [Proxy],
    /// On ZooKeeper, each client process's own proxies in front of the servers, by process.
    pub client_proxies: &'a [Vec<testkit::Proxy>],
    pub histories: &'a [PathBuf],
    /// Where a failover that brings the old primary back tells how its copy differed.
    pub diverged: &'a mut Vec<String>,
    /// On PostgreSQL, the server (and PgBouncer).
    pub postgres: Option<&'a mut Deployment>,
    /// The client processes, to kill one and start another in its place.
    pub clients: &'a mut Clients,
}

/// How many client connections with a session the ZooKeeper server on `port` serves, from its
/// `cons` (the connection asking has no session yet).
fn sessions_served(port: u16) -> usize {
    testkit::zookeeper_four_letter_word(port, "cons").map_or(0, |answer| {
        answer
            .lines()
            .filter(|line| line.contains("sid=0x"))
            .count()
    })
}

fn signal(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status();
}
