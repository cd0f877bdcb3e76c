//! Transactions (`multi`): several writes, and checks of nodes' versions, applied all together
//! by the ensemble or not at all, in one request ([`Session::multi`]). The operations
//! ([`Op`]), what each did ([`OpResult`]), and their encoding as ZooKeeper's
//! `MultiTransactionRecord` and `MultiResponse`: each operation behind a `MultiHeader` (its
//! type, `done`, an error code), the list ended by a header whose `done` is set.
//!
//! A transaction that fails is answered with one error result per operation: the first that
//! failed carries its code, those before it `OK` and those after it `RUNTIMEINCONSISTENCY`, and
//! none of them was applied; [`Session::multi`] reports the first as [`Error::Aborted`].

use super::jute::{JuteError, Reader, Writer};
use super::path::{self, Chroot};
use super::proto::{code, error_of, op, open_acl, stat, Reply, Request};
use super::session::Call;
use super::{unexpected, CreateMode, Error, Session, Stat};
use std::time::Instant;

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

    /// Its type in its `MultiHeader`.
    fn opcode(&self) -> i32 {
        match self {
            Op::Create { .. } => op::CREATE,
            Op::Delete { .. } => op::DELETE,
            Op::SetData { .. } => op::SET_DATA,
            Op::Check { .. } => op::CHECK,
        }
    }

    /// The same operation, its path as the server sees it (`chroot` prefixed).
    fn rooted(&self, chroot: &Chroot) -> Op {
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

/// The `MultiHeader` that ends a transaction's operations or results.
fn end(body: &mut Writer) {
    body.int(-1).boolean(true).int(-1);
}

/// Writes the operations of a `multi` request after its header.
pub(crate) fn encode(body: &mut Writer, ops: &[Op]) {
    for operation in ops {
        body.int(operation.opcode()).boolean(false).int(-1);
        match operation {
            Op::Create { path, data, mode } => {
                body.string(path).buffer(data);
                open_acl(body);
                body.int(mode.flags());
            }
            Op::Delete { path, version } | Op::Check { path, version } => {
                body.string(path).int(version.unwrap_or(-1));
            }
            Op::SetData {
                path,
                data,
                version,
            } => {
                body.string(path).buffer(data).int(version.unwrap_or(-1));
            }
        }
    }
    end(body);
}

/// One result of a `multi` reply: what an operation did, or its error code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    Done(OpResult),
    Failed(i32),
}

/// Reads the results of a `multi` reply, up to the header that ends them.
pub(crate) fn decode(body: &mut Reader<'_>) -> Result<Vec<Outcome>, JuteError> {
    let mut outcomes = Vec::new();
    loop {
        let kind = body.int("result type")?;
        let done = body.boolean("done")?;
        let err = body.int("result error")?;
        if done {
            return Ok(outcomes);
        }
        outcomes.push(match kind {
            op::CREATE => Outcome::Done(OpResult::Created {
                path: body.string("created path")?,
            }),
            op::CREATE2 => {
                let path = body.string("created path")?;
                stat(body)?;
                Outcome::Done(OpResult::Created { path })
            }
            op::DELETE => Outcome::Done(OpResult::Deleted),
            op::SET_DATA => Outcome::Done(OpResult::DataSet(stat(body)?)),
            op::CHECK => Outcome::Done(OpResult::Checked),
            op::ERROR => Outcome::Failed(body.int("error")?),
            other => {
                return Err(JuteError(format!(
                    "a transaction's result of type {other} (error {err})"
                )))
            }
        });
    }
}

impl Session {
    /// Applies `ops` as one transaction, by `deadline`: all of them, in order, or, if one
    /// fails, none. Returns what each did, in order. The paths are checked before anything is
    /// sent. A transaction without operations is sent all the same (a round trip that writes
    /// nothing).
    ///
    /// ```no_run
    /// # use std::time::{Duration, Instant};
    /// # use zookeeper_blocking::{Op, Session};
    /// # fn run(session: &Session) -> Result<(), zookeeper_blocking::Error> {
    /// let soon = Instant::now() + Duration::from_secs(2);
    /// // Moves a job from one queue to another only while the node "/leader/me" exists.
    /// session.multi(
    ///     &[
    ///         Op::check("/leader/me", None),
    ///         Op::delete("/queue/job-7", None),
    ///         Op::create("/done/job-7", b"ok".to_vec(), zookeeper_blocking::CreateMode::Persistent),
    ///     ],
    ///     soon,
    /// )?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Aborted`] with the index and the error of the first operation that failed
    /// (none was applied); `BadPath` for a path refused before sending; or a session or
    /// connection error (`Timeout` and `ConnectionLoss`: it may or may not have been applied).
    pub fn multi(&self, ops: &[Op], deadline: Instant) -> Result<Vec<OpResult>, Error> {
        for operation in ops {
            let sequential = matches!(operation, Op::Create { mode, .. } if mode.is_sequential());
            path::check(operation.path(), sequential)?;
        }
        let chroot = &self.shared().chroot;
        let request = Request::Multi(
            ops.iter()
                .map(|operation| operation.rooted(chroot))
                .collect(),
        );
        let outcomes = match self.shared().call(Call::new(request), deadline)? {
            Reply::Multi(outcomes) => outcomes,
            other => return Err(unexpected(other)),
        };
        if outcomes.len() != ops.len() {
            return Err(Error::Protocol(format!(
                "{} results to a transaction of {} operations",
                outcomes.len(),
                ops.len()
            )));
        }
        results(outcomes, chroot)
    }
}

/// What the operations of a transaction did, or the error of the first that failed.
fn results(outcomes: Vec<Outcome>, chroot: &Chroot) -> Result<Vec<OpResult>, Error> {
    let failed = outcomes
        .iter()
        .enumerate()
        .find_map(|(index, outcome)| match outcome {
            Outcome::Failed(err) if *err != code::OK && *err != code::RUNTIME_INCONSISTENCY => {
                Some((index, *err))
            }
            _ => None,
        });
    if let Some((index, err)) = failed {
        return Err(Error::Aborted {
            index,
            error: Box::new(error_of(err)),
        });
    }
    outcomes
        .into_iter()
        .map(|outcome| match outcome {
            Outcome::Done(OpResult::Created { path }) => Ok(OpResult::Created {
                path: chroot.strip(&path),
            }),
            Outcome::Done(result) => Ok(result),
            Outcome::Failed(err) => Err(Error::Protocol(format!(
                "a transaction answered error {err} for an operation, and none for the others"
            ))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_are_written_behind_their_headers_and_the_list_ends_with_done() {
        let ops = [
            Op::check("/a", Some(3)),
            Op::create("/a/b", b"x".to_vec(), CreateMode::Persistent),
            Op::set_data("/a", b"yz".to_vec(), None),
            Op::delete("/c", Some(1)),
        ];
        let mut body = Writer::new();
        encode(&mut body, &ops);
        let frame = body.frame().expect("small");
        let mut read = Reader::new(&frame[4..]);
        let header = |read: &mut Reader<'_>| {
            (
                read.int("type").expect("type"),
                read.boolean("done").expect("done"),
                read.int("err").expect("err"),
            )
        };
        assert_eq!(header(&mut read), (op::CHECK, false, -1));
        assert_eq!((read.string("p"), read.int("v")), (Ok("/a".into()), Ok(3)));
        assert_eq!(header(&mut read), (op::CREATE, false, -1));
        assert_eq!(read.string("p"), Ok("/a/b".into()));
        assert_eq!(read.buffer("d"), Ok(b"x".to_vec()));
        assert_eq!(read.int("acls"), Ok(1));
        assert_eq!(read.int("perms"), Ok(31));
        assert_eq!(read.string("scheme"), Ok("world".into()));
        assert_eq!(read.string("id"), Ok("anyone".into()));
        assert_eq!(read.int("flags"), Ok(0));
        assert_eq!(header(&mut read), (op::SET_DATA, false, -1));
        assert_eq!(read.string("p"), Ok("/a".into()));
        assert_eq!(read.buffer("d"), Ok(b"yz".to_vec()));
        assert_eq!(read.int("v"), Ok(-1));
        assert_eq!(header(&mut read), (op::DELETE, false, -1));
        assert_eq!((read.string("p"), read.int("v")), (Ok("/c".into()), Ok(1)));
        assert_eq!(header(&mut read), (-1, true, -1));
        assert_eq!(read.left(), 0);
    }

    #[test]
    fn the_first_operation_that_failed_is_the_error() {
        let chroot = Chroot::new(None).expect("none");
        let outcomes = vec![
            Outcome::Failed(code::OK),
            Outcome::Failed(code::BAD_VERSION),
            Outcome::Failed(code::RUNTIME_INCONSISTENCY),
        ];
        assert_eq!(
            results(outcomes, &chroot),
            Err(Error::Aborted {
                index: 1,
                error: Box::new(Error::BadVersion)
            })
        );
        let applied = vec![
            Outcome::Done(OpResult::Checked),
            Outcome::Done(OpResult::Deleted),
        ];
        assert_eq!(
            results(applied, &chroot),
            Ok(vec![OpResult::Checked, OpResult::Deleted])
        );
    }
}
