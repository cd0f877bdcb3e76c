//! What a name is in the store now, told from the library's inspections (each a `LockState`,
//! whatever the store): whose it is (a lock's, a semaphore's, a read-write lock's), by the
//! problems each primitive's view finds and the permits a semaphore's declares, and whether its
//! election has a leader. The commands use it to say what a name is, and which flag takes it,
//! instead of "free" or "a key of another type".
//!
//! A lock and a fair lock are one lock in the store (a fair lock's line aside), so they are one
//! kind here; an election is stored apart from the name's lock, so a name can be both.

use crate::exit::Failure;
use crate::primitive::PrimitiveArgs;
use redis_lease::{Client, Leader, LockState};

/// The primitive a name is now (on Redis, whose keys it has; on PostgreSQL, which primitive's
/// holds its row took last).
pub enum Found {
    /// A lock's (plain or fair): its state, held or not.
    Lock(LockState),
    /// A semaphore's, with the number of permits its runs declare.
    Semaphore { permits: u32, state: LockState },
    /// A read-write lock's: its readers and its writer (boxed: two states are large).
    ReadWrite {
        read: Box<LockState>,
        write: Box<LockState>,
    },
    /// What no primitive can use (keys of another type, a counter at its end): the lock's view
    /// of it, problems and all.
    Unusable(LockState),
}

impl Found {
    /// Whether anyone holds the primitive.
    pub fn is_held(&self) -> bool {
        match self {
            Found::Lock(state) | Found::Semaphore { state, .. } | Found::Unusable(state) => {
                state.is_held()
            }
            Found::ReadWrite { read, write } => read.is_held() || write.is_held(),
        }
    }

    /// Whether `primitive` (the flags a command was given) takes this kind of name.
    pub fn takes(&self, primitive: &PrimitiveArgs) -> bool {
        match self {
            Found::Lock(_) => primitive.permits.is_none() && !primitive.read && !primitive.write,
            Found::Semaphore { .. } => primitive.permits.is_some(),
            Found::ReadWrite { .. } => primitive.read || primitive.write,
            Found::Unusable(_) => true,
        }
    }

    /// What it is, for a sentence: `a semaphore of 3 permits`, `a read-write lock`.
    pub fn what(&self) -> String {
        match self {
            Found::Lock(_) | Found::Unusable(_) => "a lock".to_owned(),
            Found::Semaphore { permits, .. } => format!("a semaphore of {permits} permits"),
            Found::ReadWrite { .. } => "a read-write lock".to_owned(),
        }
    }

    /// How a command's flags take it, after a verb: `with --permits 3`, `with --read or
    /// --write`.
    pub fn flags(&self) -> String {
        match self {
            Found::Lock(_) | Found::Unusable(_) => {
                "without --permits, --read or --write".to_owned()
            }
            Found::Semaphore { permits, .. } => format!("with --permits {permits}"),
            Found::ReadWrite { .. } => "with --read or --write".to_owned(),
        }
    }

    /// `"sem" is a semaphore of 3 permits, not a lock: take it with --permits 3`: what the
    /// name is, against what `primitive` asked for, and how `verb` (take, look at, remove)
    /// gets it.
    pub fn mismatch(&self, name: &str, primitive: &PrimitiveArgs, verb: &str) -> String {
        format!(
            "{name:?} is {}, not a {}: {verb} it {}",
            self.what(),
            asked(primitive),
            self.flags()
        )
    }
}

/// The kind `primitive` asks for: a lock (plain or fair), a semaphore, a read-write lock.
pub fn asked(primitive: &PrimitiveArgs) -> &'static str {
    if primitive.permits.is_some() {
        "semaphore"
    } else if primitive.read || primitive.write {
        "read-write lock"
    } else {
        "lock"
    }
}

/// What `name` is: the lock's view first, then, if the lock finds what it cannot use (another
/// primitive's keys or holds), a semaphore's and a read-write lock's. A view that finds fewer
/// problems than the lock's is the one the name belongs to (the problems they share, such as
/// a fencing counter that is not a number, remain in it). One round trip for a sound lock's
/// name, up to five for another's.
pub fn found(client: &Client, name: &str) -> Result<Found, Failure> {
    let as_lock = client.lock(name)?.inspect()?;
    if as_lock.problems.is_empty() {
        return Ok(Found::Lock(as_lock));
    }
    let fewer = |state: &LockState| state.problems.len() < as_lock.problems.len();
    // Refused where the deployment offers no semaphore (RedLock): then the name is not one.
    if let Ok(semaphore) = client.semaphore(name, 1) {
        let state = semaphore.inspect()?;
        let permits = state.permits.and_then(|n| u32::try_from(n).ok());
        if let (true, Some(permits)) = (fewer(&state), permits) {
            return Ok(Found::Semaphore { permits, state });
        }
    }
    if let Ok(rw) = client.read_write_lock(name) {
        let read = rw.read_lock().inspect()?;
        if fewer(&read) {
            let write = rw.write_lock().inspect()?;
            return Ok(Found::ReadWrite {
                read: Box::new(read),
                write: Box::new(write),
            });
        }
    }
    Ok(Found::Unusable(as_lock))
}

/// The semaphore `name` is while nothing holds it, where the store keeps a semaphore's permits
/// apart from its holders (PostgreSQL, whose lock's view of such a name finds nothing wrong):
/// its permits and its state, if a semaphore's view finds them and no problem. A store whose
/// semaphore's view gives back the number asked for (ZooKeeper's) stores none this way: asked
/// for 1 and then for 2, it answers 1 and then 2. `None` where the deployment offers no
/// semaphore (RedLock).
pub fn stored_semaphore(client: &Client, name: &str) -> Result<Option<(u32, LockState)>, Failure> {
    let stored = |asked: u32| -> Result<Option<(u32, LockState)>, Failure> {
        let Ok(semaphore) = client.semaphore(name, asked) else {
            return Ok(None);
        };
        let state = semaphore.inspect()?;
        let permits = state.permits.and_then(|n| u32::try_from(n).ok());
        Ok(permits
            .filter(|_| state.problems.is_empty())
            .map(|permits| (permits, state)))
    };
    match stored(1)? {
        Some((1, state)) => Ok(match stored(2)? {
            Some((2, _)) => None,
            _ => Some((1, state)),
        }),
        found => Ok(found),
    }
}

/// The leader of the election `name`, if one leads now; none where the deployment offers no
/// election (RedLock).
pub fn leader(client: &Client, name: &str) -> Result<Option<Leader>, Failure> {
    match client.election(name) {
        Ok(election) => Ok(election.leader()?),
        Err(_) => Ok(None),
    }
}

/// `term 3, "host-b"`: a leader as `lease leader` shows it (its value escaped, so that it
/// cannot write to the terminal).
pub fn leader_text(leader: &Leader) -> String {
    format!("term {}, {:?}", leader.term, leader.value)
}
