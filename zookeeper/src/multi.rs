//! The operations of a transaction ([`Op`], applied all together by [`Session::multi`] or not
//! at all) and what each did ([`OpResult`]).

use super::path::Chroot;
#[cfg(doc)]
use super::Session;
use super::{CreateMode, Stat};

/// One operation of a transaction ([`Session::multi`]), its path as the session names it
/// (under its chroot, if it has one).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Op {
    /// Creates a node (as [`Session::create`]): the transaction fails if it exists, or its
    /// parent does not.
    Create {
        /// The node's path (a sequential one may end with `/`).
        path: String,
        /// Its data.
        data: Vec<u8>,
        /// Its kind.
        mode: CreateMode,
    },
    /// Deletes a node, at `version` if given.
    Delete {
        /// The node's path.
        path: String,
        /// The version the node must have, if any.
        version: Option<i32>,
    },
    /// Replaces a node's data, at `version` if given.
    SetData {
        /// The node's path.
        path: String,
        /// The new data.
        data: Vec<u8>,
        /// The version the node must have, if any.
        version: Option<i32>,
    },
    /// Writes nothing: the transaction fails unless the node exists (at `version`, if given).
    Check {
        /// The node's path.
        path: String,
        /// The version the node must have, if any.
        version: Option<i32>,
    },
}

impl Op {
    /// [`Op::Create`].
    pub fn create(path: impl Into<String>, data: impl Into<Vec<u8>>, mode: CreateMode) -> Op {
        Op::Create {
            path: path.into(),
            data: data.into(),
            mode,
        }
    }

    /// [`Op::Delete`].
    pub fn delete(path: impl Into<String>, version: Option<i32>) -> Op {
        Op::Delete {
            path: path.into(),
            version,
        }
    }

    /// [`Op::SetData`].
    pub fn set_data(path: impl Into<String>, data: impl Into<Vec<u8>>, version: Option<i32>) -> Op {
        Op::SetData {
            path: path.into(),
            data: data.into(),
            version,
        }
    }

    /// [`Op::Check`].
    pub fn check(path: impl Into<String>, version: Option<i32>) -> Op {
        Op::Check {
            path: path.into(),
            version,
        }
    }

    /// The node it is about.
    pub fn path(&self) -> &str {
        match self {
            Op::Create { path, .. }
            | Op::Delete { path, .. }
            | Op::SetData { path, .. }
            | Op::Check { path, .. } => path,
        }
    }

    /// The same operation, its path as the server sees it (`chroot` prefixed).
    pub(crate) fn rooted(&self, chroot: &Chroot) -> Op {
        let mut rooted = self.clone();
        match &mut rooted {
            Op::Create { path, .. }
            | Op::Delete { path, .. }
            | Op::SetData { path, .. }
            | Op::Check { path, .. } => *path = chroot.prefix(path),
        }
        rooted
    }
}

/// What one operation of a transaction that was applied did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpResult {
    /// A node was created: its actual path (with its sequential suffix, the chroot stripped).
    /// (A transaction's answer carries no stat of the nodes it created.)
    Created {
        /// The path created.
        path: String,
    },
    /// A node was deleted.
    Deleted,
    /// A node's data was replaced: its new stat.
    DataSet(Stat),
    /// A node was found as checked.
    Checked,
}
