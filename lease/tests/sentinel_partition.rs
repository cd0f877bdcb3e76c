//! A primary cut off from its Sentinels and its replica while it keeps serving a holder on its
//! side of the partition (the holder cut off from the Sentinels too). Without replica
//! acknowledgements the holder keeps renewing there while another client takes the lock on the
//! promoted replica: two holders, fenced (the second token is of a higher epoch). With them,
//! the holder's renewals are never acknowledged and it is told it lost the hold before the
//! other client can take it. Once the partition heals, the holder's client leaves the old
//! primary before the Sentinels convert it.

mod common;

use redis_lease::{Client, LeaseGuard, LostReason};
use std::thread;
use std::time::{Duration, Instant};
use testkit::{Gate, SentinelSet};

/// How long a failover may take to become usable before a test fails.
const SETTLE: Duration = Duration::from_secs(20);
const LEASE: Duration = Duration::from_secs(2);
const NAME: &str = "split";

/// The epoch a token carries in its high bits.
fn epoch(token: u64) -> u64 {
    token >> 44
}

fn client_of(set: &SentinelSet, sentinels: Vec<String>, acks: bool) -> Client {
    let builder = Client::sentinel(set.master_name(), sentinels)
        .default_lease(LEASE)
        .command_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_millis(500));
    match acks {
        true => builder.replica_acks(1, Duration::from_millis(200)),
        false => builder,
    }
    .build()
    .expect("valid settings")
}

/// A partition with the holder on the old primary's side.
struct Split {
    set: SentinelSet,
    /// The holder's way to the Sentinels, closed during the partition.
    gates: Vec<Gate>,
    holder: Client,
    guard: LeaseGuard,
}

impl Split {
    /// A holder of [`NAME`], renewed, then the partition.
    fn start(acks: bool) -> Split {
        let set = SentinelSet::start_partitionable();
        let gates: Vec<Gate> = set
            .sentinels()
            .iter()
            .map(|sentinel| Gate::start(sentinel.port()))
            .collect();
        let holder = client_of(&set, gates.iter().map(Gate::url).collect(), acks);
        let lock = holder.lock(NAME).expect("valid");
        let guard = common::retried_while_unavailable(SETTLE, || lock.try_lock())
            .expect("free, yet not acquired");
        // A renewal or two reach the replica before the cut.
        thread::sleep(LEASE / 2);
        assert!(!guard.is_lost(), "lost before the partition");
        set.partition_primary();
        for gate in &gates {
            gate.close();
        }
        Split {
            set,
            gates,
            holder,
            guard,
        }
    }

    /// Another client, on the Sentinels' side, takes [`NAME`] on the promoted replica; returns
    /// its token and whether the holder had been told it lost its hold by then.
    fn taken_on_the_other_side(&self) -> (u64, bool) {
        let other = client_of(&self.set, self.set.sentinel_urls(), false);
        let lock = other.lock(NAME).expect("valid");
        let deadline = Instant::now() + SETTLE;
        loop {
            let lost_before = self.guard.is_lost();
            match lock.with_lease(Duration::from_secs(30)).try_lock() {
                Ok(Some(guard)) => {
                    let token = guard.fencing_token().expect("a token");
                    return (token, lost_before);
                }
                Ok(None) | Err(redis_lease::Error::Unavailable { .. })
                    if Instant::now() < deadline =>
                {
                    thread::sleep(Duration::from_millis(20));
                }
                other => panic!(
                    "the other side: {other:?}; primary {}, ttl {:?}, state {:?}",
                    self.set.primary(),
                    lock.remaining_ttl(),
                    lock.inspect()
                ),
            }
        }
    }

    fn heal(&self) {
        self.set.heal_partition();
        for gate in &self.gates {
            gate.open();
        }
    }
}

#[test]
fn without_acks_a_partitioned_holder_overlaps_a_holder_on_the_promoted_replica_fenced() {
    let split = Split::start(false);
    let holder_token = split.guard.fencing_token().expect("a token");
    let (other_token, lost_before) = split.taken_on_the_other_side();
    assert!(
        !lost_before && !split.guard.is_lost(),
        "the holder on the old primary's side was told {:?}: its renewals there succeed",
        split.guard.lost()
    );
    assert!(
        epoch(other_token) > epoch(holder_token),
        "tokens {holder_token} then {other_token}: the second holder's is not of a higher epoch"
    );

    // Healed: the holder's client learns of the failover from a Sentinel it listens to again,
    // and leaves the old primary, which still believes it is the primary.
    let old = split.set.server(split.set.replica());
    split.heal();
    let lock = split.holder.lock("after-the-split").expect("valid");
    // The Sentinels convert the old primary no sooner than 8 s after they see it again.
    let deadline = Instant::now() + Duration::from_secs(5);
    let token = loop {
        match lock.with_lease(LEASE).try_lock() {
            Ok(Some(guard)) => {
                let token = guard.fencing_token().expect("a token");
                if epoch(token) == epoch(other_token) || Instant::now() >= deadline {
                    break token;
                }
            }
            Ok(None) => panic!("a fresh name is held"),
            Err(_) if Instant::now() < deadline => {}
            Err(error) => panic!("{error}"),
        }
        thread::sleep(Duration::from_millis(50));
    };
    let role: Vec<redis::Value> = redis::cmd("ROLE")
        .query(&mut old.connection())
        .expect("ROLE");
    assert_eq!(
        epoch(token),
        epoch(other_token),
        "after the partition healed, the holder's client still drew tokens of the old epoch \
         (the old primary's role: {role:?})"
    );
}

#[test]
fn with_acks_a_partitioned_holder_is_told_before_anyone_else_holds() {
    let split = Split::start(true);
    let (_, lost_before) = split.taken_on_the_other_side();
    assert!(
        lost_before,
        "another client took the lock while the partitioned holder still believed it held it"
    );
    let lost = split.guard.lost().expect("lost");
    assert_eq!(lost.reason, LostReason::Unconfirmed, "{lost:?}");
    split.heal();
}
