//! The scenarios of each profile: `default` runs them all, `short` those marked for it, and the
//! soak a random mix of the faults inside the timing assumptions per deployment.

use crate::fault::Fault;
use crate::mode::Mode;
use crate::primitive::Primitive;
use crate::scenario::Scenario;

mod postgres;

/// The scenarios of the default profile.
pub fn all() -> Vec<Scenario> {
    let mut all = on_redis_and_zookeeper();
    all.extend(postgres::scenarios());
    all
}

/// The scenarios on Redis (one server, RedLock, Cluster, Sentinels) and on ZooKeeper.
fn on_redis_and_zookeeper() -> Vec<Scenario> {
    use Fault::*;
    use Mode::*;
    let scenario = |name, inside, mode, fault| Scenario {
        name,
        inside,
        mode,
        fault,
        short: true,
        primitive: Primitive::Lock,
    };
    let failover = |name, inside, mode, fault, short| Scenario {
        name,
        inside,
        mode,
        fault,
        short,
        primitive: Primitive::Lock,
    };
    let primitive = |name, inside, mode, fault, primitive, short| Scenario {
        name,
        inside,
        mode,
        fault,
        short,
        primitive,
    };
    vec![
        scenario("contention baseline", true, Single, None),
        scenario(
            "redis frozen (SIGSTOP) past the lease",
            true,
            Single,
            FreezeServer(2),
        ),
        scenario("CLIENT PAUSE past the lease", true, Single, ClientPause(2)),
        scenario("DEBUG SLEEP past the lease", true, Single, DebugSleep(2)),
        scenario("RedLock contention baseline", true, Red, None),
        scenario(
            "RedLock: a master killed, restarted after 2 leases",
            true,
            Red,
            KillMaster(2),
        ),
        scenario(
            "replies delayed past the lease (proxy)",
            true,
            Single,
            DelayReplies(2),
        ),
        scenario(
            "replies held for 2 leases (proxy)",
            true,
            Single,
            HoldReplies(2),
        ),
        scenario(
            "partition from the server for 2 leases (proxy)",
            true,
            Single,
            Partition(2),
        ),
        scenario(
            "RedLock: a master partitioned for 2 leases (proxy)",
            true,
            Red,
            Partition(2),
        ),
        scenario(
            "RedLock: a master frozen (SIGSTOP) for 2 leases",
            true,
            Red,
            FreezeServer(2),
        ),
        scenario(
            "RedLock: a slow master, 50 ms (proxy)",
            true,
            Red,
            SlowMaster(2),
        ),
        scenario(
            "client wall clocks jumping ±5 min (libfaketime)",
            true,
            Single,
            ClockJumps,
        ),
        scenario("cluster contention baseline", true, Cluster, None),
        scenario(
            "cluster: the lock's master frozen (SIGSTOP) past the lease",
            true,
            Cluster,
            FreezeSlotMaster,
        ),
        scenario(
            "cluster: a replica promoted (CLUSTER FAILOVER)",
            true,
            Cluster,
            PromoteReplica,
        ),
        scenario(
            "cluster: the lock's slot resharded under load",
            true,
            Cluster,
            Reshard,
        ),
        scenario(
            "holder frozen (SIGSTOP) past its lease",
            false,
            Single,
            FreezeHolder(3),
        ),
        scenario("lock key expiring early", false, Single, ExpireKey),
        scenario(
            "RedLock: a master restarted empty at once",
            false,
            Red,
            RestartMasterNow,
        ),
        failover(
            "sentinel: failover with the acquisition not replicated (no replica acks)",
            false,
            Sentinel { acks: false },
            KillUnreplicated,
            true,
        ),
        failover(
            "sentinel: failover with the acquisition not replicated (replica acks)",
            true,
            Sentinel { acks: true },
            KillUnreplicated,
            true,
        ),
        // Outside without acks: until the clients hear of the promotion and the old primary is
        // made a replica, holds taken and renewed on it never reach the new primary (overlaps;
        // see docs/reliability.md).
        failover(
            "sentinel: failover while holds are renewed and waiters wait (no replica acks)",
            false,
            Sentinel { acks: false },
            SentinelFailover,
            false,
        ),
        failover(
            "sentinel: failover while holds are renewed and waiters wait (replica acks)",
            true,
            Sentinel { acks: true },
            SentinelFailover,
            false,
        ),
        // A frozen Sentinel anywhere in the clients' lists costs them little, and they hear the
        // failover from the Sentinel that performed it.
        failover(
            "sentinel: failover on request with one Sentinel frozen (replica acks)",
            true,
            Sentinel { acks: true },
            FailoverPastAFrozenSentinel,
            false,
        ),
        // The clients reach both sides, and hear the promotion from the Sentinels: without acks,
        // what they wrote on the cut-off primary before that is lost (outside); with acks, it
        // was never acknowledged.
        failover(
            "sentinel: the primary partitioned from the Sentinels and its replica (no replica acks)",
            false,
            Sentinel { acks: false },
            PartitionPrimary(2),
            false,
        ),
        failover(
            "sentinel: the primary partitioned from the Sentinels and its replica (replica acks)",
            true,
            Sentinel { acks: true },
            PartitionPrimary(2),
            false,
        ),
        failover(
            "sentinel: the old primary frozen, failed over, and back as a replica (replica acks)",
            true,
            Sentinel { acks: true },
            FreezePrimary,
            false,
        ),
        failover(
            "cluster: FORCE failover with the replica behind",
            false,
            Cluster,
            ForceFailover,
            false,
        ),
        // On a ZooKeeper ensemble of three, the session is the lease: a holder is told lost by
        // its deadline, before the ensemble can expire its session and hand the lock on.
        scenario(
            "zookeeper: the leader killed while holds are renewed and waiters wait, restarted after 2 leases",
            true,
            ZooKeeper,
            KillLeader(2),
        ),
        scenario(
            "zookeeper: the leader frozen (SIGSTOP) for 3 leases: its followers elect another",
            true,
            ZooKeeper,
            FreezeLeader(3),
        ),
        failover(
            "zookeeper: the leader frozen for 1 lease, less than its followers wait: it wakes to expire sessions they kept answering",
            false,
            ZooKeeper,
            FreezeLeader(1),
            false,
        ),
        scenario(
            "zookeeper: the holder cut off from the ensemble past its session timeout (proxies frozen 3 leases)",
            true,
            ZooKeeper,
            CutOffHolder(3),
        ),
        failover(
            "zookeeper: holder frozen (SIGSTOP) past its session timeout",
            false,
            ZooKeeper,
            FreezeHolder(3),
            false,
        ),
        failover(
            "zookeeper: a follower killed and restarted",
            true,
            ZooKeeper,
            RestartFollower,
            false,
        ),
        // A semaphore of 3 permits and a read-write lock, taken by 4 processes of 2 threads:
        // never more than 3 holders, never a reader beside a writer.
        primitive(
            "semaphore (3 permits): redis frozen (SIGSTOP) past the lease",
            true,
            Single,
            FreezeServer(2),
            Primitive::Semaphore(3),
            true,
        ),
        primitive(
            "semaphore (3 permits): partition from the server for 2 leases (proxy)",
            true,
            Single,
            Partition(2),
            Primitive::Semaphore(3),
            false,
        ),
        primitive(
            "semaphore (3 permits): holder frozen (SIGSTOP) past its lease",
            false,
            Single,
            FreezeHolder(3),
            Primitive::Semaphore(3),
            false,
        ),
        primitive(
            "semaphore (3 permits): cluster, the slot's master frozen past the lease",
            true,
            Cluster,
            FreezeSlotMaster,
            Primitive::Semaphore(3),
            false,
        ),
        primitive(
            "read-write lock: redis frozen (SIGSTOP) past the lease",
            true,
            Single,
            FreezeServer(2),
            Primitive::ReadWrite,
            true,
        ),
        primitive(
            "read-write lock: partition from the server for 2 leases (proxy)",
            true,
            Single,
            Partition(2),
            Primitive::ReadWrite,
            false,
        ),
        primitive(
            "read-write lock: holder frozen (SIGSTOP) past its lease",
            false,
            Single,
            FreezeHolder(3),
            Primitive::ReadWrite,
            false,
        ),
        primitive(
            "semaphore (3 permits): zookeeper, the leader killed, restarted after 2 leases",
            true,
            ZooKeeper,
            KillLeader(2),
            Primitive::Semaphore(3),
            false,
        ),
        primitive(
            "read-write lock: zookeeper, the holder cut off past its session timeout (proxies frozen 3 leases)",
            true,
            ZooKeeper,
            CutOffHolder(3),
            Primitive::ReadWrite,
            false,
        ),
        primitive(
            "read-write lock: sentinel failover with the acquisition not replicated (replica acks)",
            true,
            Sentinel { acks: true },
            KillUnreplicated,
            Primitive::ReadWrite,
            false,
        ),
        // A leader election: each cycle a campaign whose term fences its writes, and an
        // observer in each process whose history must never go back to an older term.
        primitive(
            "election: redis frozen (SIGSTOP) past the lease",
            true,
            Single,
            FreezeServer(2),
            Primitive::Election,
            true,
        ),
        primitive(
            "election: partition from the server for 2 leases (proxy)",
            true,
            Single,
            Partition(2),
            Primitive::Election,
            false,
        ),
        primitive(
            "election: leader frozen (SIGSTOP) past its lease",
            false,
            Single,
            FreezeHolder(3),
            Primitive::Election,
            false,
        ),
        primitive(
            "election: cluster, the slot's master frozen past the lease",
            true,
            Cluster,
            FreezeSlotMaster,
            Primitive::Election,
            false,
        ),
        primitive(
            "election: sentinel failover with the acquisition not replicated (replica acks)",
            true,
            Sentinel { acks: true },
            KillUnreplicated,
            Primitive::Election,
            false,
        ),
        primitive(
            "election: zookeeper, the leader cut off past its session timeout (proxies frozen 3 leases)",
            true,
            ZooKeeper,
            CutOffHolder(3),
            Primitive::Election,
            false,
        ),
    ]
}

/// The scenarios of the short profile: those of the default one marked `short`.
pub fn short() -> Vec<Scenario> {
    all()
        .into_iter()
        .filter(|scenario| scenario.short)
        .collect()
}

/// The soak: a random mix of the faults inside the timing assumptions, for one server, for
/// RedLock and for a Sentinel-managed primary with replica acknowledgement. It must pass like
/// any scenario inside them.
pub fn soak() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "soak: a random mix of faults (one server)",
            inside: true,
            mode: Mode::Single,
            fault: Fault::Mix,
            short: false,
            primitive: Primitive::Lock,
        },
        Scenario {
            name: "soak: a random mix of faults (RedLock)",
            inside: true,
            mode: Mode::Red,
            fault: Fault::Mix,
            short: false,
            primitive: Primitive::Lock,
        },
        Scenario {
            name: "soak: a random mix of failovers (Sentinel, replica acks)",
            inside: true,
            mode: Mode::Sentinel { acks: true },
            fault: Fault::Mix,
            short: false,
            primitive: Primitive::Lock,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::postgres::{PG, PG_POOLED};
    use super::*;
    use testkit::Shutdown;

    fn is_failover(scenario: &Scenario) -> bool {
        matches!(scenario.mode, Mode::Sentinel { .. }) || scenario.fault == Fault::ForceFailover
    }

    #[test]
    fn the_short_profile_runs_the_unreplicated_failover_with_and_without_acks() {
        let failovers: Vec<Scenario> = short()
            .into_iter()
            .filter(|scenario| is_failover(scenario) && scenario.primitive == Primitive::Lock)
            .collect();
        assert_eq!(failovers.len(), 2, "{failovers:?}");
        for acks in [false, true] {
            assert!(failovers
                .iter()
                .any(|scenario| scenario.fault == Fault::KillUnreplicated
                    && scenario.mode == Mode::Sentinel { acks }
                    && scenario.inside == acks));
        }
        assert_eq!(
            all().len() - short().len(),
            26,
            "the other failovers, three ZooKeeper scenarios, eight of the semaphore's and the \
             read-write lock's, five of the election's and three through PgBouncer run by \
             default"
        );
    }

    #[test]
    fn a_primary_killed_with_unreplicated_holds_is_outside_the_assumptions_without_acks() {
        for scenario in all().iter().filter(|scenario| is_failover(scenario)) {
            assert!(scenario.mode.fenced(), "{}", scenario.name);
            let may_lose = matches!(
                scenario.fault,
                Fault::KillUnreplicated
                    | Fault::ForceFailover
                    | Fault::SentinelFailover
                    | Fault::PartitionPrimary(_)
            ) && scenario.mode != Mode::Sentinel { acks: true };
            assert_eq!(scenario.inside, !may_lose, "{}", scenario.name);
        }
    }

    #[test]
    fn zookeeper_is_fenced_and_only_a_frozen_holder_or_a_leader_woken_to_expire_is_outside() {
        let zookeeper: Vec<Scenario> = all()
            .into_iter()
            .filter(|scenario| scenario.mode == Mode::ZooKeeper)
            .collect();
        assert_eq!(zookeeper.len(), 9);
        for scenario in &zookeeper {
            assert!(scenario.mode.fenced());
            assert!(
                scenario.name.contains("zookeeper, ") || scenario.name.starts_with("zookeeper: "),
                "{}",
                scenario.name
            );
            // A leader frozen past the session timeout and back before its followers leave it
            // expires sessions they kept answering.
            let outside = matches!(
                scenario.fault,
                Fault::FreezeHolder(_) | Fault::FreezeLeader(..=2)
            );
            assert_eq!(scenario.inside, !outside, "{}", scenario.name);
        }
        let short: Vec<Fault> = short()
            .into_iter()
            .filter(|scenario| scenario.mode == Mode::ZooKeeper)
            .map(|scenario| scenario.fault)
            .collect();
        assert_eq!(
            short,
            [
                Fault::KillLeader(2),
                Fault::FreezeLeader(3),
                Fault::CutOffHolder(3)
            ]
        );
    }

    #[test]
    fn postgres_is_fenced_and_only_a_frozen_holder_is_outside() {
        let postgres: Vec<Scenario> = all()
            .into_iter()
            .filter(|scenario| matches!(scenario.mode, Mode::Postgres { .. }))
            .collect();
        for scenario in &postgres {
            assert!(scenario.mode.fenced(), "{}", scenario.name);
            assert!(scenario.name.starts_with("postgres"), "{}", scenario.name);
            let outside = matches!(scenario.fault, Fault::FreezeHolder(_));
            assert_eq!(scenario.inside, !outside, "{}", scenario.name);
        }
        // Each fault on the server directly, and the pooled baseline, in the short profile.
        let direct: Vec<Fault> = postgres
            .iter()
            .filter(|scenario| scenario.mode == PG)
            .map(|scenario| scenario.fault)
            .collect();
        assert_eq!(
            direct,
            [
                Fault::None,
                Fault::FreezeServer(2),
                Fault::RestartServer(Shutdown::Fast),
                Fault::RestartServer(Shutdown::Immediate),
                Fault::Partition(2),
                Fault::PartitionListener(2),
                Fault::KillWaiter,
                Fault::FreezeHolder(3),
            ]
        );
        let short: Vec<(Mode, Fault)> = short()
            .into_iter()
            .filter(|scenario| matches!(scenario.mode, Mode::Postgres { .. }))
            .map(|scenario| (scenario.mode, scenario.fault))
            .collect();
        assert_eq!(short.len(), direct.len() + 1, "{short:?}");
        assert!(short.contains(&(PG_POOLED, Fault::None)));
        let pooled = postgres
            .iter()
            .filter(|scenario| scenario.mode == PG_POOLED);
        assert_eq!(pooled.count(), 4);
    }

    #[test]
    fn faults_apply_to_their_scenarios_deployments() {
        for scenario in all().iter().chain(&soak()) {
            assert!(
                scenario.fault.applies_to(scenario.mode),
                "{}",
                scenario.name
            );
            for fault in Fault::mix(scenario.mode) {
                assert!(
                    fault.applies_to(scenario.mode),
                    "{fault:?} in {:?}",
                    scenario.mode
                );
            }
        }
    }

    #[test]
    fn scenario_names_are_unique() {
        let mut names: Vec<&str> = all().iter().chain(&soak()).map(|s| s.name).collect();
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count);
    }
}
