//! [`ReadWriteLock`]: many readers or one writer.

use crate::lock::Lock;

/// A read-write lock: any number of readers at once, or one writer. Its two sides are
/// [`Lock`]s, with every call a lock has (its settings, such as [`Lock::with_lease`] and
/// [`Lock::cancel_on`], its four acquisition calls, `inspect`), and guards that tell their
/// holder of a lost lease as a lock's do. Cheap to clone.
///
/// ```no_run
/// # fn main() -> redis_lease::Result<()> {
/// # let client = redis_lease::Client::open("redis://127.0.0.1/")?;
/// let prices = client.read_write_lock("prices")?;
/// let reading = prices.read_lock().lock()?; // beside other readers
/// reading.unlock()?;
/// let writing = prices.write_lock().lock()?; // alone
/// writing.unlock()?;
/// # Ok(())
/// # }
/// ```
///
/// - **Reentrant**: an owner re-enters the read hold or the write hold it has.
/// - **Downgrade**: the owner of the write hold may take a read hold as well, then release the
///   write hold and go on reading. The reverse (an upgrade) is refused with
///   [`Error::InvalidArgument`](crate::Error::InvalidArgument) when this client knows the owner
///   reads: it would wait for itself.
/// - **Writers are not starved**: a writer that waits leaves a mark in the store, and readers that
///   do not hold the lock already wait until it has written. The mark lapses 5 s after the
///   writer last asked (a waiting writer asks at least every second), so a writer that
///   vanished holds new readers back for at most that long. A stream of writers can keep
///   readers waiting.
/// - Each reader's hold is a lease of its own: a reader that dies lets writers in once its
///   lease lapses.
///
/// On ZooKeeper the contenders queue in order: a reader behind a waiting writer waits for it, and
/// a writer behind readers for them. Not offered on RedLock.
#[derive(Clone, Debug)]
pub struct ReadWriteLock {
    read: Lock,
    write: Lock,
}

impl ReadWriteLock {
    pub(crate) fn new(read: Lock, write: Lock) -> ReadWriteLock {
        ReadWriteLock { read, write }
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.read.name()
    }

    /// The shared side: held by many readers at once, never while a writer holds the lock.
    pub fn read_lock(&self) -> &Lock {
        &self.read
    }

    /// The exclusive side: held by one writer, never while anyone reads (but the writer itself,
    /// after a downgrade).
    pub fn write_lock(&self) -> &Lock {
        &self.write
    }

    /// The same lock, both sides held on behalf of `owner` (see [`Lock::owned_by`]; an owner id
    /// it refuses fails every acquisition of either side with
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument)).
    #[must_use = "this returns a new handle with the setting; the one it is called on is unchanged"]
    pub fn owned_by(&self, owner: impl Into<String>) -> ReadWriteLock {
        let owner = owner.into();
        ReadWriteLock {
            read: self.read.owned_by(owner.clone()),
            write: self.write.owned_by(owner),
        }
    }
}
