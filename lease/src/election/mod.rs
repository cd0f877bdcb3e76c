//! [`Election`]: one leader at a time among every client that campaigns under a name, on the
//! lock machinery. A term of leadership is a hold of the election's own lock, taken from the
//! store by one campaign (never handed from thread to thread, never granted), renewed by the
//! watchdog, and fenced by its token; the leader's value lives beside the hold, and observers
//! are woken by the store's announcements or watches.

mod leader;
mod leadership;
mod observer;
mod seen;

pub use leader::Leader;
pub use leadership::Leadership;
pub use observer::Observer;

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::lock::{LeaseGuard, Lock};
use crate::policy::after;
use crate::state::LockState;
use std::time::{Duration, Instant};

/// The longest value a leader may proclaim, in bytes: it is stored beside the term and read by
/// every observer at every change.
pub const MAX_VALUE: usize = 64 * 1024;

/// Checks a value a leader would proclaim.
fn check_value(value: &str) -> Result<()> {
    if value.len() > MAX_VALUE {
        return Err(Error::InvalidArgument(format!(
            "a leader's value must not be longer than {MAX_VALUE} bytes, not {}",
            value.len()
        )));
    }
    if value.contains('\0') {
        return Err(Error::InvalidArgument(
            "a leader's value must not contain a NUL character".into(),
        ));
    }
    Ok(())
}

/// A leader election by name: at most one [`Leadership`] stands at a time across every client
/// that campaigns under the name (inside the assumptions of
/// [`guarantees`](crate::guarantees)), and observers see its leader. Cheap to clone.
///
/// A campaign waits for the leadership as [`Lock::lock`] waits for a lock, in the same four
/// forms: [`Election::campaign`], [`Election::try_campaign`], [`Election::try_campaign_for`] and
/// [`Election::try_campaign_until`], ended from another thread by [`Election::cancel_on`]. Each
/// campaign is an owner of its own: two campaigns of one thread or one process compete as two
/// processes would, and a campaign never re-enters a leadership that stands.
///
/// ```no_run
/// # fn main() -> redis_lease::Result<()> {
/// # let client = redis_lease::Client::open("redis://127.0.0.1/")?;
/// let election = client.election("scheduler")?;
/// let mut leadership = election.campaign("host-a:8080")?;
/// let term = leadership.term(); // a fencing token: send it with every write the leader makes
/// while !leadership.is_lost() {
///     // ... lead, writing with `term` ...
/// #   break;
/// }
/// leadership.resign()?;
/// # let _ = term;
/// # Ok(())
/// # }
/// ```
///
/// The election is not the lock of the same name: each has keys (or a node) of its own.
#[derive(Clone)]
pub struct Election {
    lock: Lock,
}

impl Election {
    pub(crate) fn new(lock: Lock) -> Election {
        Election { lock }
    }

    /// The election's name.
    pub fn name(&self) -> &str {
        self.lock.name()
    }

    /// The same election, its campaigns' waits ended from another thread by `cancel`: a waiting
    /// campaign returns [`Error::Cancelled`] soon after [`Cancel::cancel`], within one command
    /// timeout.
    #[must_use = "this returns a new handle with the setting; the one it is called on is unchanged"]
    pub fn cancel_on(&self, cancel: &Cancel) -> Election {
        Election {
            lock: self.lock.cancel_on(cancel),
        }
    }

    /// Campaigns until this campaign leads (or is cancelled), then proclaims `value`: the
    /// leadership returned has a new term, above every term before it.
    ///
    /// # Errors
    ///
    /// As [`Lock::lock`]; [`Error::InvalidArgument`] for a value longer than [`MAX_VALUE`] or
    /// holding a NUL. A campaign that leads but cannot proclaim its value resigns and returns
    /// the proclamation's error.
    pub fn campaign(&self, value: impl Into<String>) -> Result<Leadership> {
        self.run(value.into(), |lock| lock.lock().map(Some))?
            .ok_or_else(|| Error::Protocol("a waiting campaign returned nothing".into()))
    }

    /// One attempt: `Ok(None)` if another campaign leads (or another thread of this client is
    /// already campaigning).
    ///
    /// # Errors
    ///
    /// As [`Election::campaign`].
    pub fn try_campaign(&self, value: impl Into<String>) -> Result<Option<Leadership>> {
        self.run(value.into(), Lock::try_lock)
    }

    /// Campaigns for up to `wait`; `Ok(None)` if another campaign led all along. Returns within
    /// `wait` plus two command timeouts (the last attempt, and the proclamation).
    ///
    /// # Errors
    ///
    /// As [`Election::campaign`]; an attempt that fails for a reason that may pass is made
    /// again until the deadline, as [`Lock::try_lock_for`] does.
    pub fn try_campaign_for(
        &self,
        wait: Duration,
        value: impl Into<String>,
    ) -> Result<Option<Leadership>> {
        self.try_campaign_until(after(wait), value)
    }

    /// Campaigns until `deadline`; `Ok(None)` if another campaign led all along.
    ///
    /// # Errors
    ///
    /// As [`Election::try_campaign_for`].
    pub fn try_campaign_until(
        &self,
        deadline: Instant,
        value: impl Into<String>,
    ) -> Result<Option<Leadership>> {
        self.run(value.into(), |lock| lock.try_lock_until(deadline))
    }

    /// One campaign, taking the election's lock by `take` as an owner of its own.
    fn run(
        &self,
        value: String,
        take: impl FnOnce(&Lock) -> Result<Option<LeaseGuard>>,
    ) -> Result<Option<Leadership>> {
        check_value(&value)?;
        let owner = format!("{}:leader", self.lock.core().ids().next());
        let lock = self.lock.owned_by(owner);
        let Some(guard) = take(&lock)? else {
            return Ok(None);
        };
        let mut leadership = Leadership::new(lock, guard)?;
        // Dropped on failure: the term ends with it.
        leadership.proclaim(value)?;
        Ok(Some(leadership))
    }

    /// The leader now, read once within the command timeout: `None` if no campaign leads, or
    /// the one that does has not yet proclaimed its value.
    ///
    /// # Errors
    ///
    /// [`Error::Unavailable`] if the store does not answer in time, [`Error::Refused`] if it
    /// refuses the read.
    pub fn leader(&self) -> Result<Option<Leader>> {
        let leading = self
            .lock
            .elects()?
            .leader(false, self.lock.core().call_deadline())?;
        Ok(leading.and_then(|leading| {
            Some(Leader {
                term: leading.term,
                value: leading.value?,
            })
        }))
    }

    /// Follows the leader: an [`Observer`] whose channel first carries the leader now, then
    /// every change (a new term, a proclamation, no leader), never a term older than one it
    /// carried. Woken by the store's announcements (Redis) or watches (ZooKeeper), and on
    /// Redis by the moment the leader's lease would lapse.
    ///
    /// # Errors
    ///
    /// As [`Election::leader`], for the first read.
    pub fn observe(&self) -> Result<Observer> {
        Observer::start(self.lock.clone())
    }

    /// What the store holds for the election now: its leader's owner id, term (as
    /// `hold_token`), remaining lease and value (`proclaimed`). For operators and tools.
    ///
    /// # Errors
    ///
    /// As [`Lock::inspect`].
    pub fn inspect(&self) -> Result<LockState> {
        self.lock.inspect()
    }
}

impl std::fmt::Debug for Election {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Election")
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}
