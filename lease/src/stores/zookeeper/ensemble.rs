//! The client's one ZooKeeper session, and where its events go.
//!
//! A client has one session at a time, opened on first use. The session is the lease of every
//! hold the client takes through it: its nodes are ephemeral, so when the ensemble expires the
//! session, they go. A session that expired is never replaced behind a hold's back: the holds
//! made through it are lost (their renewals find it gone), and only later acquisitions open a
//! new session.
//!
//! Watch notifications wake the waiters of the lock whose child changed (waiters watch a lock by
//! its node's path); a change of the session's state (disconnected, connected again, expired)
//! wakes every waiter, to look for itself.

use crate::error::{Cause, Error, Result};
use crate::waiters::Notifier;
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Instant;
use zookeeper_blocking::{Config as ZkConfig, Error as ZkError, Event, Session};

/// The client's session, opened when first needed.
pub(super) struct Ensemble {
    config: ZkConfig,
    current: Mutex<Option<Session>>,
    notifier: Notifier,
}

impl Ensemble {
    pub(super) fn new(config: ZkConfig, notifier: Notifier) -> Ensemble {
        Ensemble {
            config,
            current: Mutex::new(None),
            notifier,
        }
    }

    /// The session, opened (or opened anew after an expiry) if needed, by `deadline`.
    pub(super) fn session(&self, deadline: Instant) -> Result<Session> {
        let Some(mut current) = self.current.try_lock_until(deadline) else {
            return Err(unavailable(&ZkError::Timeout));
        };
        if let Some(session) = current.as_ref().filter(|session| !session.is_expired()) {
            return Ok(session.clone());
        }
        let session = Session::connect(self.config.clone(), deadline, self.events())
            .map_err(|error| unavailable(&error))?;
        log::debug!(
            "zookeeper session {:#x} opened ({:?})",
            session.session_id(),
            session.timeout()
        );
        *current = Some(session.clone());
        Ok(session)
    }

    /// The session now, if one is open and not expired; never opens one.
    pub(super) fn current(&self) -> Option<Session> {
        self.current
            .lock()
            .as_ref()
            .filter(|session| !session.is_expired())
            .cloned()
    }

    /// The session's event handler: wakes whoever the event concerns.
    fn events(&self) -> Arc<dyn Fn(Event) + Send + Sync> {
        let notifier = self.notifier.clone();
        Arc::new(move |event: Event| match &event {
            Event::NodeDeleted(path)
            | Event::NodeCreated(path)
            | Event::NodeDataChanged(path)
            | Event::NodeChildrenChanged(path) => {
                // A lock's waiters watch its node; a contender's node is one of its children.
                notifier.notify(super::paths::parent(path));
                notifier.notify(path);
            }
            Event::Disconnected | Event::Connected | Event::Expired | Event::Closed => {
                log::debug!("zookeeper session: {event:?}");
                notifier.notify_all();
            }
        })
    }
}

/// A ZooKeeper failure as the crate's error: a passing one (no answer, connection lost,
/// session expired, no server reachable) is `Unavailable`, which a wait rides out; one
/// the server answered (refused) is `Refused`.
pub(super) fn unavailable(error: &ZkError) -> Error {
    match error {
        ZkError::Timeout
        | ZkError::ConnectionLoss
        | ZkError::SessionExpired
        | ZkError::Closed
        | ZkError::Unavailable { .. } => Error::Unavailable {
            server: None,
            cause: Cause::text("zookeeper", error.to_string()),
        },
        ZkError::Protocol(detail) => Error::Protocol(format!("zookeeper: {detail}")),
        ZkError::BadPath(detail) => Error::InvalidArgument(detail.clone()),
        other => Error::Refused {
            server: None,
            cause: Cause::text("zookeeper", other.to_string()),
        },
    }
}
