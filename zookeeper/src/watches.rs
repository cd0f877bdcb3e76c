//! The watches a session has armed, kept so that a new connection can re-arm them
//! (`setWatches`): which calls arm which kind, and which events disarm them, as the Java
//! client's watch manager does.

use super::path::Chroot;
use super::proto::{self, code, event};
use std::collections::BTreeSet;

/// What a call with its watch flag set arms, once its reply says the server armed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Watch {
    /// `exists`: a data watch on a node that exists, an exist watch on one that does not.
    Exists(String),
    /// `getData`: a data watch (none when the node does not exist).
    Data(String),
    /// `getChildren`: a child watch (none when the node does not exist).
    Children(String),
}

/// The paths (the client's, without the chroot) with a watch armed, by kind.
#[derive(Debug, Default)]
pub(crate) struct Watches {
    /// Watches on the data of nodes that exist (`exists`, `getData`).
    data: BTreeSet<String>,
    /// Watches on nodes that did not exist (`exists`).
    exist: BTreeSet<String>,
    /// Watches on the children of nodes (`getChildren`).
    child: BTreeSet<String>,
}

impl Watches {
    /// Notes `watch`, whose call got the reply code `err`.
    pub(crate) fn armed(&mut self, watch: Watch, err: i32) {
        match (watch, err) {
            (Watch::Exists(path) | Watch::Data(path), code::OK) => {
                self.data.insert(path);
            }
            (Watch::Exists(path), code::NO_NODE) => {
                self.exist.insert(path);
            }
            (Watch::Children(path), code::OK) => {
                self.child.insert(path);
            }
            _ => {}
        }
    }

    /// Forgets the watches an event of type `kind` on `path` fired (a watch fires once).
    pub(crate) fn fired(&mut self, kind: i32, path: &str) {
        match kind {
            event::NODE_CREATED | event::NODE_DATA_CHANGED => {
                self.data.remove(path);
                self.exist.remove(path);
            }
            event::NODE_DELETED => {
                self.data.remove(path);
                self.exist.remove(path);
                self.child.remove(path);
            }
            event::NODE_CHILDREN_CHANGED => {
                self.child.remove(path);
            }
            _ => {}
        }
    }

    /// How many watches are armed.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.data.len() + self.exist.len() + self.child.len()
    }

    /// The `setWatches` frames that re-arm them all as of `last_zxid`.
    pub(crate) fn frames(&self, chroot: &Chroot, last_zxid: i64) -> Vec<Vec<u8>> {
        let server = |paths: &BTreeSet<String>| -> Vec<String> {
            paths.iter().map(|path| chroot.prefix(path)).collect()
        };
        proto::set_watches(
            last_zxid,
            &server(&self.data),
            &server(&self.exist),
            &server(&self.child),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watches_are_armed_by_replies_and_disarmed_by_events() {
        let mut watches = Watches::default();
        watches.armed(Watch::Exists("/a".into()), code::NO_NODE);
        watches.armed(Watch::Data("/b".into()), code::NO_NODE);
        watches.armed(Watch::Children("/c".into()), code::OK);
        watches.armed(Watch::Exists("/d".into()), code::OK);
        assert_eq!(watches.len(), 3);
        watches.fired(event::NODE_CREATED, "/a");
        watches.fired(event::NODE_CHILDREN_CHANGED, "/d");
        assert_eq!(watches.len(), 2);
        watches.fired(event::NODE_DELETED, "/c");
        watches.fired(event::NODE_DELETED, "/d");
        assert_eq!(watches.len(), 0);
        assert!(watches
            .frames(&Chroot::new(None).expect("none"), 1)
            .is_empty());
    }
}
