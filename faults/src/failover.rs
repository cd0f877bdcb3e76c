//! Failovers that can lose what a primary acknowledged: of a Sentinel-managed primary (killed
//! with writes its replica never got, failed over on request, frozen and back as a replica), and
//! of the cluster master of the lock's slot, forced over to a replica that is behind.

use crate::LOCK_KEY;
use redis::Commands;
use std::collections::BTreeMap;
use std::thread;
use std::time::Duration;
use testkit::{Failover, RedisCluster, RedisServer, SentinelSet};

/// How long the clients take the lock on a primary whose replica is cut off, before the primary
/// dies: half a lease. It stays within the Sentinels' `DOWN_AFTER` (and far within the cluster's
/// node timeout), so that the paused replica is never counted down and may be promoted at once.
fn unreplicated_spell(lease: Duration) -> Duration {
    lease / 2
}

/// The replica cut off, the clients on the primary alone for a while, the primary killed
/// (SIGKILL), the replica resumed and promoted by the Sentinels, and the killed server started
/// again, empty, as the new primary's replica.
pub(crate) fn kill_unreplicated(set: &mut SentinelSet, lease: Duration) {
    let old = set.primary();
    set.pause_replica();
    thread::sleep(unreplicated_spell(lease));
    set.kill_primary();
    set.resume_replica();
    set.wait_primary_changed(old);
    set.start_again(old);
    set.wait_replicated();
}

/// `SENTINEL FAILOVER`: the replica, caught up, promoted, and the old primary made its replica.
pub(crate) fn on_request(set: &SentinelSet) {
    set.wait_replicated();
    set.failover();
}

/// One Sentinel frozen (the `count`th, in turn), `SENTINEL FAILOVER` asked of the next one,
/// the old primary made the new one's replica; the frozen Sentinel let run again a `lease`
/// later.
pub(crate) fn past_a_frozen_sentinel(set: &SentinelSet, count: usize, lease: Duration) {
    set.wait_replicated();
    let frozen = count % set.sentinels().len();
    set.sentinels()[frozen].pause();
    let old = set.request_failover((frozen + 1) % set.sentinels().len());
    set.wait_primary_changed(old);
    set.demote(old);
    thread::sleep(lease);
    set.sentinels()[frozen].resume();
}

/// The primary cut off from the Sentinels and its replica while the clients still reach it,
/// until the Sentinels have promoted the replica and `after` more; then healed, and the old
/// primary made the new one's replica at once (the Sentinels would wait 8 s) and synced.
pub(crate) fn partition_primary(set: &SentinelSet, after: Duration) {
    set.wait_replicated();
    let old = set.partition_primary();
    set.wait_primary_changed(old);
    thread::sleep(after);
    set.heal_partition();
    set.demote(old);
}

/// The primary frozen (SIGSTOP) until the Sentinels have promoted its replica, then let run
/// again: it comes back believing it is the primary, until the Sentinels make it a replica. Once
/// it has synced, its copy of the lock is compared with the new primary's, with writes stopped;
/// returns what differs, if anything.
pub(crate) fn freeze_primary(set: &SentinelSet) -> Option<String> {
    let old = set.freeze_primary();
    set.wait_primary_changed(old);
    set.server(old).resume();
    set.wait_replicated();
    let (new_copy, old_copy) = set
        .with_writes_paused(|primary, replica| (LockCopy::read(primary), LockCopy::read(replica)));
    match (old_copy, new_copy) {
        (Ok(old_copy), Ok(new_copy)) => old_copy.difference(&new_copy),
        (Err(error), _) | (_, Err(error)) => Some(format!("the copies could not be read: {error}")),
    }
}

/// On a cluster: the replica of the lock's slot master cut off, the clients on the master alone
/// for a while, the master killed (SIGKILL), the replica resumed and made master with
/// `CLUSTER FAILOVER FORCE`, and the old master started again, empty, as its replica.
pub(crate) fn force_behind(cluster: &mut RedisCluster, lease: Duration) -> Option<()> {
    let master = cluster.master_for_key(LOCK_KEY);
    let replica = *cluster.replicas_of(master).first()?;
    cluster.pause_replica(replica);
    thread::sleep(unreplicated_spell(lease));
    cluster.kill(master);
    cluster.resume(replica);
    // FORCE, not TAKEOVER: FORCE skips only the handshake with the master, which is dead; the
    // election still needs a majority of the masters that serve slots, and the two others are
    // that majority (they vote for a FORCE request even though the master is not yet flagged
    // as failed). TAKEOVER would bump the epoch without any vote, which is needed only when no
    // majority of masters answers.
    cluster.failover(replica, Failover::Force);
    cluster.start_again(master);
    cluster.wait_ok();
    Some(())
}

/// One server's copy of the lock: the hash of its hold, when the hash expires, and the last
/// fencing token handed out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockCopy {
    /// Owner ids with their hold counts, and the hold's own fields (starting with `:`).
    pub hold: BTreeMap<String, String>,
    /// `PEXPIRETIME`: Unix ms, -1 without expiry, -2 without the key.
    pub expires_at_ms: i64,
    pub fence: Option<String>,
}

impl LockCopy {
    fn read(server: &RedisServer) -> redis::RedisResult<LockCopy> {
        let mut con = server.connection();
        Ok(LockCopy {
            hold: con.hgetall(LOCK_KEY)?,
            expires_at_ms: redis::cmd("PEXPIRETIME").arg(LOCK_KEY).query(&mut con)?,
            fence: con.get(format!("{LOCK_KEY}:fence"))?,
        })
    }

    /// What differs between this copy, the old primary's, and `new`, the new primary's, if
    /// anything: first an owner holding here that the new primary does not have.
    pub fn difference(&self, new: &LockCopy) -> Option<String> {
        if let Some(owner) = self
            .hold
            .keys()
            .find(|field| !field.starts_with(':') && !new.hold.contains_key(*field))
        {
            return Some(format!(
                "the old primary still has a hold of {owner} that the new primary does not: \
                 old {self:?}, new {new:?}"
            ));
        }
        (self != new).then(|| format!("the copies differ: old {self:?}, new {new:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy(hold: &[(&str, &str)], expires_at_ms: i64, fence: Option<&str>) -> LockCopy {
        LockCopy {
            hold: hold
                .iter()
                .map(|&(field, value)| (field.to_owned(), value.to_owned()))
                .collect(),
            expires_at_ms,
            fence: fence.map(str::to_owned),
        }
    }

    #[test]
    fn equal_copies_have_no_difference() {
        let held = copy(&[("owner-a", "1"), (":token", "7")], 1_000, Some("7"));
        assert_eq!(held.difference(&held.clone()), None);
        let free = copy(&[], -2, Some("7"));
        assert_eq!(free.difference(&free.clone()), None);
    }

    #[test]
    fn a_hold_only_the_old_primary_has_is_named() {
        let old = copy(&[("owner-a", "1"), (":token", "8")], 2_000, Some("8"));
        let new = copy(&[], -2, Some("7"));
        let found = old.difference(&new).expect("a difference");
        assert!(found.contains("hold of owner-a"), "{found}");
    }

    #[test]
    fn any_other_difference_is_told() {
        let old = copy(&[("owner-a", "1")], 2_000, Some("7"));
        let later = copy(&[("owner-a", "1")], 3_000, Some("7"));
        let found = old.difference(&later).expect("a difference");
        assert!(found.starts_with("the copies differ"), "{found}");
        let fenced = copy(&[("owner-a", "1")], 2_000, Some("8"));
        assert!(old.difference(&fenced).is_some());
    }
}
