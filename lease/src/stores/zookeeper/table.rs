//! What the client knows of its own nodes: the contenders waiting in a lock's queue, and the
//! holds, with their re-entry counts (kept here, not in ZooKeeper, as Curator keeps them).

use std::collections::{HashMap, VecDeque};

/// How many released acquisitions are remembered, so that a release sent again after a lost
/// reply is told it was applied.
const REMEMBERED: usize = 1024;

/// A contender's node: its path and its creation zxid (the fencing token it holds with).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Node {
    pub(super) path: String,
    pub(super) token: u64,
}

/// A contender's place in a lock's queue, from before its node is created: a create whose reply
/// was lost is looked for by the guid rather than made twice.
#[derive(Debug, Clone)]
pub(super) struct Waiting {
    pub(super) guid: String,
    pub(super) session: i64,
    pub(super) node: Option<Node>,
    /// A create was sent for it and its reply lost: its node may exist.
    pub(super) unanswered: bool,
}

/// A hold of this client: the lowest node of its lock.
#[derive(Debug, Clone)]
pub(super) struct HeldNode {
    pub(super) node: Node,
    pub(super) owner: String,
    pub(super) session: i64,
    pub(super) count: u64,
    /// A delete of its node went unanswered: a later "no such node" means it was applied.
    pub(super) deleting: bool,
    /// Its last acquisition was lost or abandoned: its node is being deleted, and it is not
    /// re-entered any more.
    pub(super) ending: bool,
}

#[derive(Default)]
pub(super) struct Table {
    /// Contenders, by lock path and owner.
    pub(super) waiting: HashMap<(String, String), Waiting>,
    /// Holds, by hold id.
    pub(super) held: HashMap<String, HeldNode>,
    released: VecDeque<String>,
}

impl Table {
    /// Remembers that the acquisition `id` was released.
    pub(super) fn released(&mut self, id: &str) {
        if self.released.len() == REMEMBERED {
            self.released.pop_front();
        }
        self.released.push_back(id.to_owned());
    }

    /// Whether the acquisition `id` was released.
    pub(super) fn was_released(&self, id: &str) -> bool {
        self.released.iter().any(|released| released == id)
    }

    /// The node of `hold` to delete now that one of its acquisitions ended without a release
    /// (lost, or abandoned: `abandoned` also counts it out): only if it was the hold's last,
    /// since the other acquisitions of a re-entered hold keep it. The hold is then ending, and
    /// no re-entry takes it again.
    pub(super) fn ended(&mut self, hold: &str, abandoned: bool) -> Option<(String, i64)> {
        let held = self.held.get_mut(hold)?;
        if held.count > 1 {
            if abandoned {
                held.count -= 1;
            }
            return None;
        }
        held.ending = true;
        Some((held.node.path.clone(), held.session))
    }

    /// The hold whose node is `path`, if it is this client's.
    pub(super) fn held_at(&self, path: &str) -> Option<&HeldNode> {
        self.held.values().find(|held| held.node.path == path)
    }
}
