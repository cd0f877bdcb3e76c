//! Deleting nodes in the background, so that no node of this client stands in a lock's queue
//! longer than it should (left in place, one would keep every later contender waiting for as
//! long as the session lives):
//!
//! - a contender's node when its wait ends without the lock and the delete made then got no
//!   answer within a call timeout, or its create's reply was lost;
//! - a hold's node whose delete went unanswered;
//! - a hold's node once its holder was told the hold is lost (a fixed lease run out, a
//!   `max_hold` reached, a lease not confirmed in time): the lease lapses here as it does in
//!   Redis, after the holder's deadline;
//! - an abandoned hold's node, when its lease would have lapsed.
//!
//! A delete that gets no answer is tried again until the node is gone, or its session is (which
//! takes its nodes with it).

use super::ensemble::Ensemble;
use super::paths;
use super::table::Table;
use crate::error::{Error, Result};
use crossbeam_channel::{select, Receiver, Sender};
use parking_lot::Mutex;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use zookeeper_blocking::Error as ZkError;

/// How long the reaper waits before trying again the deletes that failed.
const RETRY: Duration = Duration::from_millis(200);

/// A node to delete.
#[derive(Debug, Clone)]
pub(super) enum Job {
    /// The node at this path.
    Node { path: String, session: i64 },
    /// The node of the contender `guid` under the lock `lock`, whose create's reply was lost:
    /// it may exist.
    Guid {
        lock: String,
        guid: String,
        session: i64,
    },
    /// The node of an abandoned acquisition's hold, once its lease would have lapsed, if it was
    /// the hold's last acquisition.
    Lapse { hold: String, session: i64 },
}

impl Job {
    fn session(&self) -> i64 {
        match self {
            Job::Node { session, .. } | Job::Guid { session, .. } | Job::Lapse { session, .. } => {
                *session
            }
        }
    }
}

/// The handle that gives the reaper its jobs; the reaper's thread ends when it is dropped.
pub(super) struct Reaper {
    jobs: Sender<(Job, Instant)>,
    /// The holds whose holders were told they are lost.
    losses: Sender<String>,
}

/// What the reaper's thread works with.
pub(super) struct Context {
    pub(super) ensemble: Weak<Ensemble>,
    pub(super) table: Arc<Mutex<Table>>,
    pub(super) call_timeout: Duration,
}

impl Reaper {
    /// Starts the reaper's thread, named `thread_name`.
    pub(super) fn start(context: Context, thread_name: String) -> Result<Reaper> {
        let (jobs, job_queue) = crossbeam_channel::unbounded();
        let (losses, loss_queue) = crossbeam_channel::unbounded();
        std::thread::Builder::new()
            .name(thread_name)
            .spawn(move || run(&context, &job_queue, &loss_queue))
            .map_err(Error::Spawn)?;
        Ok(Reaper { jobs, losses })
    }

    /// Deletes the node `job` names, soon.
    pub(super) fn reap(&self, job: Job) {
        self.reap_at(job, Instant::now());
    }

    /// Deletes the node `job` names, not before `at`.
    pub(super) fn reap_at(&self, job: Job, at: Instant) {
        // The thread ends only when this sender is gone.
        let _ = self.jobs.send((job, at));
    }

    /// The hold `hold` is lost: its node goes, if this client still has it.
    pub(super) fn lost(&self, hold: &str) {
        let _ = self.losses.send(hold.to_owned());
    }
}

fn run(context: &Context, jobs: &Receiver<(Job, Instant)>, losses: &Receiver<String>) {
    let mut pending: Vec<(Job, Instant)> = Vec::new();
    loop {
        let wake = pending
            .iter()
            .map(|(_, at)| (*at).max(Instant::now() + RETRY / 4))
            .min();
        let timeout = crossbeam_channel::at(wake.unwrap_or_else(far_future));
        select! {
            recv(jobs) -> job => match job {
                Ok(job) => pending.push(job),
                Err(_) => return,
            },
            recv(losses) -> hold => {
                if let Ok(hold) = hold {
                    pending.extend(lost_node(context, &hold).map(|job| (job, Instant::now())));
                }
            },
            recv(timeout) -> _ => {},
        }
        pending.extend(jobs.try_iter());
        let Some(ensemble) = context.ensemble.upgrade() else {
            return;
        };
        let now = Instant::now();
        pending.retain_mut(|(job, at)| {
            if *at > now {
                return true;
            }
            if let Job::Lapse { hold, .. } = job {
                match context.table.lock().ended(hold, true) {
                    Some((path, session)) => *job = Job::Node { path, session },
                    None => return false,
                }
            }
            let done = reap(&ensemble, job, now + context.call_timeout);
            if !done {
                *at = Instant::now() + RETRY;
            }
            !done
        });
    }
}

/// An instant no timeout reaches: the reaper then sleeps until told something.
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365)
}

/// The node of the lost hold `hold`, if this client still has it and the lost acquisition was
/// its last: that hold's, never a later hold's of the same owner.
fn lost_node(context: &Context, hold: &str) -> Option<Job> {
    let (path, session) = context.table.lock().ended(hold, false)?;
    log::debug!("zookeeper node {path} of a lost hold goes");
    Some(Job::Node { path, session })
}

/// Tries one job; whether it is done with (the node deleted, or gone with its session).
fn reap(ensemble: &Ensemble, job: &Job, deadline: Instant) -> bool {
    let Some(session) = ensemble.current() else {
        return true;
    };
    if session.session_id() != job.session() {
        // The job's session expired, and its ephemeral nodes with it.
        return true;
    }
    let path = match job {
        Job::Node { path, .. } => path.clone(),
        // Turned into a `Node` job when due.
        Job::Lapse { .. } => return true,
        Job::Guid { lock, guid, .. } => match session.get_children(lock, false, deadline) {
            Ok((children, _)) => match children.iter().find(|child| paths::is_of(child, guid)) {
                Some(child) => format!("{lock}/{child}"),
                None => return true,
            },
            Err(ZkError::NoNode) => return true,
            Err(error) => return gave_up(lock, &error),
        },
    };
    match session.delete(&path, None, deadline) {
        Ok(()) | Err(ZkError::NoNode) => {
            log::debug!("zookeeper node {path} deleted");
            true
        }
        Err(error) => gave_up(&path, &error),
    }
}

/// Whether a failed job is given up (the session is gone, or the server refused), or kept to
/// be tried again (no answer).
fn gave_up(path: &str, error: &ZkError) -> bool {
    match error {
        ZkError::Timeout | ZkError::ConnectionLoss | ZkError::Unavailable { .. } => false,
        ZkError::SessionExpired | ZkError::Closed => true,
        other => {
            log::warn!("zookeeper node {path} could not be deleted: {other}");
            true
        }
    }
}
