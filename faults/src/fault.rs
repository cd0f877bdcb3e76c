//! The faults a scenario injects, each with its facts in one place: the deployments it applies
//! to, what it needs set up, what it does to the servers' logs and how its effect shows (in
//! [`Fault::traits`]), and how it is injected and healed (in [`Fault::inject`]), both in the
//! order the variants are declared.

use crate::clock::now_ns;
use crate::failover;
use crate::history::{self, Event};
use crate::mode::Mode;
use crate::proxy::{Mode as ProxyMode, Proxy};
use crate::LOCK_KEY;
use redis::Commands;
use std::path::PathBuf;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};
use testkit::{Failover, RedisCluster, RedisServer, SentinelSet, ZooKeeperEnsemble};

/// The fault a scenario injects, again and again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    None,
    /// SIGSTOP of the lock server (with RedLock, of one master) for this many leases.
    FreezeServer(u32),
    /// `CLIENT PAUSE` on the lock server for this many leases.
    ClientPause(u32),
    /// `DEBUG SLEEP` on the lock server for this many leases.
    DebugSleep(u32),
    /// SIGSTOP of the client process holding the lock, for this many leases (the long-GC case).
    /// On ZooKeeper, past the session timeout (one lease): the ensemble expires the session; the
    /// holder is one of the long holds, looked for in the histories.
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
    /// master), then every connection reset.
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
    /// Each time one of [`Fault::mix`], drawn from the seed: the soak.
    Mix,
}

/// What a fault asks of a scenario, and how the scenario judges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Traits {
    /// The deployments it can be injected into.
    pub modes: &'static [Mode],
    /// Whether the clients reach the lock servers through proxies, which the fault sets.
    pub proxied: bool,
    /// Whether the clients' wall clock is faked, so that it can be stepped.
    pub fakes_clock: bool,
    /// Whether the `MONITOR` logs cannot be replayed: the fault restarts servers, which ends
    /// their logs, or moves the lock's key to another node, whose log does not start with it.
    pub ends_logs: bool,
    /// What tells that one injection of it took effect.
    pub evidence: Evidence,
    /// How many leases the fault and the recovery after it may take: the room it needs before
    /// the clients stop.
    pub room_leases: u32,
    /// Whether the data servers stand behind gates that can partition them from the Sentinels
    /// (`SentinelSet::start_partitionable`).
    pub partitionable: bool,
    /// Whether each client process reaches the ZooKeeper servers through proxies of its own
    /// (`testkit::Proxy`, one per server), which the fault freezes.
    pub client_proxies: bool,
}

/// What tells that an injected fault took effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evidence {
    /// A symptom in the clients' histories within two leases of the fault's end.
    Symptom,
    /// Some client's wall clock moving against its monotonic clock (the clients record both).
    WallClockJump,
    /// On ZooKeeper, fencing tokens of a new epoch handed to the clients within two leases of
    /// the fault's end: a new leader, whom the sessions followed.
    NewEpoch,
    /// Being in place: the clients see nothing of it by design.
    InPlace,
}

const ALL: &[Mode] = &[
    Mode::Single,
    Mode::Red,
    Mode::Cluster,
    Mode::Sentinel { acks: false },
    Mode::Sentinel { acks: true },
    Mode::ZooKeeper,
];
const ONE_SERVER: &[Mode] = &[Mode::Single];
const HOLDERS: &[Mode] = &[Mode::Single, Mode::ZooKeeper];
const SERVERS: &[Mode] = &[Mode::Single, Mode::Red];
const REDLOCK: &[Mode] = &[Mode::Red];
const CLUSTER: &[Mode] = &[Mode::Cluster];
const SENTINELS: &[Mode] = &[
    Mode::Sentinel { acks: false },
    Mode::Sentinel { acks: true },
];
const ZOOKEEPER: &[Mode] = &[Mode::ZooKeeper];

impl Traits {
    /// A fault of `modes` on direct connections, whose logs replay, shown by a symptom, with
    /// room for four leases.
    const fn on(modes: &'static [Mode]) -> Traits {
        Traits {
            modes,
            proxied: false,
            fakes_clock: false,
            ends_logs: false,
            evidence: Evidence::Symptom,
            room_leases: 4,
            partitionable: false,
            client_proxies: false,
        }
    }

    const fn client_proxies(self) -> Traits {
        Traits {
            client_proxies: true,
            ..self
        }
    }

    const fn partitionable(self) -> Traits {
        Traits {
            partitionable: true,
            ..self
        }
    }

    const fn proxied(self) -> Traits {
        Traits {
            proxied: true,
            ..self
        }
    }

    const fn ends_logs(self) -> Traits {
        Traits {
            ends_logs: true,
            ..self
        }
    }

    const fn shown_by(self, evidence: Evidence) -> Traits {
        Traits { evidence, ..self }
    }

    const fn room(self, room_leases: u32) -> Traits {
        Traits {
            room_leases,
            ..self
        }
    }
}

impl Fault {
    /// What the fault asks of a scenario on `mode`, and how the scenario judges it.
    pub fn traits(self, mode: Mode) -> Traits {
        use Evidence::InPlace;
        use Fault::*;
        let traits = match self {
            None => Traits::on(ALL),
            FreezeServer(_) => Traits::on(SERVERS),
            ClientPause(_) | DebugSleep(_) | ExpireKey => Traits::on(ONE_SERVER),
            // On ZooKeeper, also for the search for a long hold.
            FreezeHolder(leases) if mode == Mode::ZooKeeper => {
                Traits::on(HOLDERS).room(SEARCH_LEASES + leases + 2)
            }
            FreezeHolder(_) => Traits::on(HOLDERS),
            KillMaster(_) | RestartMasterNow => Traits::on(REDLOCK).ends_logs(),
            DelayReplies(_) | HoldReplies(_) => Traits::on(ONE_SERVER).proxied(),
            SlowMaster(_) => Traits::on(REDLOCK).proxied(),
            ClockJumps => Traits {
                fakes_clock: true,
                ..Traits::on(ALL).shown_by(Evidence::WallClockJump)
            },
            Partition(_) => Traits::on(SERVERS).proxied(),
            FreezeSlotMaster => Traits::on(CLUSTER),
            // The lock moved to another server on request, with its replica caught up.
            PromoteReplica | Reshard => Traits::on(CLUSTER).ends_logs().shown_by(InPlace),
            // A failover waits for servers to be promoted and synced.
            ForceFailover => Traits::on(CLUSTER).ends_logs().room(10),
            KillUnreplicated => Traits::on(SENTINELS).ends_logs().room(10),
            SentinelFailover => Traits::on(SENTINELS).ends_logs().shown_by(InPlace).room(10),
            FailoverPastAFrozenSentinel => {
                Traits::on(SENTINELS).ends_logs().shown_by(InPlace).room(10)
            }
            PartitionPrimary(_) => Traits::on(SENTINELS)
                .ends_logs()
                .shown_by(InPlace)
                .partitionable()
                .room(12),
            // Also for the Sentinels' turning the old primary into a replica (8 s).
            FreezePrimary => Traits::on(SENTINELS).ends_logs().room(16),
            // Also for the search for a long hold, and the killed server's start (a JVM, 1 to 3 s
            // on two busy cores). Sessions ride over an election that ends within their timeout
            // (ZooKeeper's design), so a symptom may not show; the new leader's epoch does.
            KillLeader(leases) => Traits::on(ZOOKEEPER)
                .shown_by(Evidence::NewEpoch)
                .room(SEARCH_LEASES + leases + 4),
            // Replaced (a new epoch), or back as the leader and expiring sessions (their
            // holders told lost).
            FreezeLeader(leases) if leases > 2 => Traits::on(ZOOKEEPER)
                .shown_by(Evidence::NewEpoch)
                .room(SEARCH_LEASES + leases + 4),
            FreezeLeader(leases) => Traits::on(ZOOKEEPER).room(SEARCH_LEASES + leases + 4),
            CutOffHolder(leases) => Traits::on(ZOOKEEPER)
                .client_proxies()
                .room(SEARCH_LEASES + leases + 2),
            // The sessions the follower served move to another server within their timeout:
            // by design the clients see nothing (the follower chosen is one that serves some).
            RestartFollower => Traits::on(ZOOKEEPER)
                .client_proxies()
                .shown_by(InPlace)
                .room(6),
            Mix => Traits {
                proxied: true,
                client_proxies: mode == Mode::ZooKeeper,
                fakes_clock: mode == Mode::Single,
                ends_logs: matches!(mode, Mode::Red | Mode::Sentinel { .. }),
                room_leases: Fault::mix(mode)
                    .iter()
                    .map(|fault| fault.traits(mode).room_leases)
                    .max()
                    .unwrap_or(4),
                ..Traits::on(ALL)
            },
        };
        // One RedLock master of three cut off, frozen, slow, down or emptied: the quorum keeps
        // it from the clients by design.
        if mode == Mode::Red {
            traits.shown_by(InPlace)
        } else {
            traits
        }
    }

    /// Whether the fault can be injected into `mode`.
    pub fn applies_to(self, mode: Mode) -> bool {
        self.traits(mode).modes.contains(&mode)
    }

    /// The faults of `mode` that stay inside the timing assumptions, which the soak mixes.
    pub fn mix(mode: Mode) -> &'static [Fault] {
        use Fault::*;
        match mode {
            Mode::Single => &[
                FreezeServer(2),
                ClientPause(2),
                DebugSleep(2),
                DelayReplies(2),
                HoldReplies(2),
                Partition(2),
                ClockJumps,
            ],
            Mode::Red => &[KillMaster(2), Partition(2), FreezeServer(2), SlowMaster(2)],
            Mode::Cluster => &[FreezeSlotMaster, PromoteReplica, Reshard],
            // Without the replica's acknowledgement a failover may lose a hold: outside.
            Mode::Sentinel { acks: false } => &[SentinelFailover],
            Mode::Sentinel { acks: true } => &[KillUnreplicated, SentinelFailover, FreezePrimary],
            Mode::ZooKeeper => &[KillLeader(2), CutOffHolder(3), RestartFollower],
        }
    }

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
            proxies,
            client_proxies,
            histories,
            diverged,
        } = targets;
        // Later for a fault that first looks for the holder.
        let mut start = now_ns();
        match self {
            Fault::None | Fault::Mix => return None,
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
                // Without a lock key to read the owner from (ZooKeeper; a semaphore's or a
                // read-write lock's holds), the histories tell the holder.
                let pid = match ensemble {
                    Some(_) => None,
                    None => holder_pid(&servers[0], histories),
                };
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
}

/// The process id of the client holding `{jobs}` on `server`, from the owner ids the clients
/// recorded when they started.
fn holder_pid(server: &RedisServer, histories: &[PathBuf]) -> Option<u32> {
    let fields: Vec<String> = server.connection().hkeys(LOCK_KEY).ok()?;
    // Owner ids never start with ':', the hold's own fields always do.
    let owner = fields.iter().find(|field| !field.starts_with(':'))?;
    history::merge(histories)
        .into_iter()
        .find_map(|event| match event {
            Event::Start { owner: o, pid, .. } if &o == owner => Some(pid),
            _ => None,
        })
}

/// How many leases a fault looks for a long hold before it strikes. They come in bunches, 7 to
/// 10 s apart: one acquisition in twenty of each client is long, and while one is held the
/// others' waits fail, which draws their turns together.
const SEARCH_LEASES: u32 = 8;

/// The hold open now that the histories tell of, preferring one open for a tenth to a half of a
/// lease: one of the long holds (half a lease per step, a lease and a half in all), which will
/// still be held, and renewed, a lease from now; the others last a few ms. Looks for
/// [`SEARCH_LEASES`] leases, then takes the latest open hold; `None` if there is none.
fn holding(histories: &[PathBuf], lease: Duration) -> Option<history::OpenHold> {
    let give_up = Instant::now() + lease * SEARCH_LEASES;
    let (young, old) = (
        (lease / 10).as_nanos() as u64,
        (lease / 2).as_nanos() as u64,
    );
    loop {
        let now = now_ns();
        let holds = history::open_holds(histories);
        let long = holds
            .iter()
            .filter(|hold| (young..=old).contains(&now.saturating_sub(hold.since)))
            .max_by_key(|hold| hold.since);
        if let Some(hold) = long {
            return Some(hold.clone());
        }
        if Instant::now() >= give_up {
            return holds.into_iter().max_by_key(|hold| hold.since);
        }
        thread::sleep(Duration::from_millis(20));
    }
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
