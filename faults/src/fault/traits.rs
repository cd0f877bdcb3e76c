//! What each fault asks of a scenario and how the scenario judges it ([`Fault::traits`]): the
//! deployments it applies to, what it needs set up, what it does to the servers' logs, how its
//! effect shows and the room it needs; and the faults the soak mixes ([`Fault::mix`]).

use super::holders::{SEARCH_LEASES, WAITER_SEARCH_LEASES};
use super::Fault;
use crate::mode::Mode;
use testkit::Shutdown;

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
    /// On PostgreSQL, whether the proxy (if [`Traits::proxied`]) carries the clients' listening
    /// connections rather than their calls.
    pub listening_proxied: bool,
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
    Mode::Postgres { pooled: false },
    Mode::Postgres { pooled: true },
];
const ONE_SERVER: &[Mode] = &[Mode::Single];
const HOLDERS: &[Mode] = &[
    Mode::Single,
    Mode::ZooKeeper,
    Mode::Postgres { pooled: false },
    Mode::Postgres { pooled: true },
];
const SERVERS: &[Mode] = &[Mode::Single, Mode::Red, Mode::Postgres { pooled: false }];
const FROZEN: &[Mode] = &[
    Mode::Single,
    Mode::Red,
    Mode::Postgres { pooled: false },
    Mode::Postgres { pooled: true },
];
const REDLOCK: &[Mode] = &[Mode::Red];
const CLUSTER: &[Mode] = &[Mode::Cluster];
const SENTINELS: &[Mode] = &[
    Mode::Sentinel { acks: false },
    Mode::Sentinel { acks: true },
];
const ZOOKEEPER: &[Mode] = &[Mode::ZooKeeper];
const POSTGRES: &[Mode] = &[Mode::Postgres { pooled: false }];
const POSTGRES_ANY: &[Mode] = &[
    Mode::Postgres { pooled: false },
    Mode::Postgres { pooled: true },
];

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
            listening_proxied: false,
        }
    }

    const fn listening_proxied(self) -> Traits {
        Traits {
            proxied: true,
            listening_proxied: true,
            ..self
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
            FreezeServer(_) => Traits::on(FROZEN),
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
            // Also for the start again (an immediate shutdown's recovery included).
            RestartServer(_) => Traits::on(POSTGRES).room(6),
            // Waiters look again each second by themselves: by design the clients see nothing but
            // slower turns. The fault counts if the proxy carried a connection to cut.
            PartitionListener(_) => Traits::on(POSTGRES).listening_proxied().shown_by(InPlace),
            // By design the others see nothing: the killed waiter held nothing.
            KillWaiter => Traits::on(POSTGRES_ANY)
                .shown_by(InPlace)
                .room(WAITER_SEARCH_LEASES + 2),
            Mix => Traits {
                proxied: true,
                client_proxies: mode == Mode::ZooKeeper,
                listening_proxied: false,
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
            Mode::Postgres { pooled: false } => &[
                FreezeServer(2),
                RestartServer(Shutdown::Fast),
                RestartServer(Shutdown::Immediate),
                Partition(2),
                KillWaiter,
            ],
            Mode::Postgres { pooled: true } => &[FreezeServer(2), KillWaiter],
        }
    }
}
