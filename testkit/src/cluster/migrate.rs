//! Moving a hash slot from one master to another, in the steps `redis-cli --cluster reshard`
//! takes: the slot marked importing and migrating, its keys moved with `MIGRATE`, then given to
//! its new master on every master. The steps are public too, so that a test can hold a slot in
//! the middle of its move (when the old master answers `ASK` for keys it no longer holds).

use std::time::Duration;

use super::{RedisCluster, Role};

/// How many keys one `MIGRATE` moves.
const KEYS_PER_MIGRATE: usize = 100;

impl RedisCluster {
    /// Moves `slot` and its keys from the master on `from`, which serves it, to the master on
    /// `to`, and waits until every answering node agrees that `to` serves it.
    pub fn migrate_slot(&self, slot: u16, from: u16, to: u16) {
        self.begin_migration(slot, from, to);
        self.move_keys(slot, from, to);
        self.finish_migration(slot, from, to);
    }

    /// Marks `slot` importing on `to` and migrating on `from` (`CLUSTER SETSLOT`). From then on
    /// `from` still answers for the slot's keys it holds, and sends clients asking for others to
    /// `to` with `ASK`.
    pub fn begin_migration(&self, slot: u16, from: u16, to: u16) {
        let owner = self.master_of_slot(slot);
        assert_eq!(owner, from, "slot {slot} is served by {owner}, not {from}");
        self.setslot(to, slot, "IMPORTING", &self.id(from));
        self.setslot(from, slot, "MIGRATING", &self.id(to));
    }

    /// Moves every key of `slot` from `from` to `to` with `MIGRATE ... REPLACE KEYS`, a hundred
    /// at a time, and returns how many it moved.
    pub fn move_keys(&self, slot: u16, from: u16, to: u16) -> usize {
        let source = self.server(from);
        let mut moved = 0;
        loop {
            let keys: Vec<Vec<u8>> = source
                .query(
                    redis::cmd("CLUSTER")
                        .arg("GETKEYSINSLOT")
                        .arg(slot)
                        .arg(KEYS_PER_MIGRATE),
                )
                .unwrap_or_else(|error| panic!("CLUSTER GETKEYSINSLOT {slot}: {error}"));
            if keys.is_empty() {
                return moved;
            }
            let timeout = Duration::from_secs(5).as_millis().to_string();
            let mut migrate = redis::cmd("MIGRATE");
            migrate
                .arg("127.0.0.1")
                .arg(to)
                .arg("")
                .arg(0)
                .arg(timeout)
                .arg("REPLACE")
                .arg("KEYS")
                .arg(&keys);
            let _: redis::Value = source
                .query(&migrate)
                .unwrap_or_else(|error| panic!("MIGRATE of slot {slot} to {to}: {error}"));
            moved += keys.len();
        }
    }

    /// Gives `slot` to `to` (`CLUSTER SETSLOT slot NODE`) on `to`, then on `from`, then on every
    /// other answering master, and waits until every answering node agrees and the cluster is
    /// ok. `from` must hold none of the slot's keys any more ([`RedisCluster::move_keys`]).
    pub fn finish_migration(&self, slot: u16, from: u16, to: u16) {
        let to_id = self.id(to);
        self.setslot(to, slot, "NODE", &to_id);
        self.setslot(from, slot, "NODE", &to_id);
        for node in self.nodes() {
            let other = node.port != from && node.port != to;
            if other && node.role == Role::Master && self.server(node.port).is_answering() {
                self.setslot(node.port, slot, "NODE", &to_id);
            }
        }
        self.wait(
            &format!("every node to see slot {slot} served by {to}"),
            || {
                for node in self.nodes.iter().filter(|node| node.is_answering()) {
                    let view = super::view_of(node)?;
                    let serves = view.iter().any(|seen| seen.port == to && seen.serves(slot));
                    if !serves {
                        return Err(format!("port {} does not see it yet", node.port()));
                    }
                }
                Ok(())
            },
        );
        self.wait_ok();
    }

    fn setslot(&self, port: u16, slot: u16, state: &str, id: &str) {
        let () = self
            .server(port)
            .query(
                redis::cmd("CLUSTER")
                    .arg("SETSLOT")
                    .arg(slot)
                    .arg(state)
                    .arg(id),
            )
            .unwrap_or_else(|error| panic!("CLUSTER SETSLOT {slot} {state} on {port}: {error}"));
    }
}
