//! Transactions (`multi`): several writes, and checks of nodes' versions, applied all together
//! by the ensemble or not at all, in one request ([`Session::multi`]).
//!
//! A transaction that fails is answered with one error result per operation: the first that
//! failed carries its code, those before it `OK` and those after it `RUNTIMEINCONSISTENCY`, and
//! none of them was applied; [`Session::multi`] reports the first as [`Error::Aborted`].

use super::multi::{Op, OpResult};
use super::path::{self, Chroot};
use super::proto::{code, error_of, Outcome, Reply, Request};
use super::session::Call;
use super::{unexpected, Error, Session};
use std::time::Instant;

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
