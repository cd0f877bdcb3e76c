//! The Lua scripts, and the only Rust code that knows their arguments and replies. Each script is
//! loaded once per connection through [`redis::Script`]: EVALSHA, reloaded on NOSCRIPT.

use crate::error::{Error, Result};
use crate::keys::LockKeys;
use redis::{Connection, Script};
use std::sync::LazyLock;
use std::time::Duration;

static ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("acquire.lua")));
static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("release.lua")));
static RENEW: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("renew.lua")));
static FORCE_RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("force_release.lua")));

/// What an acquisition attempt came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Acquire {
    /// Held now, `holds` deep, with this fencing token.
    Acquired { holds: u64, token: u64 },
    /// Held by another owner for about this long (`None`: no expiry set).
    Held { ttl: Option<Duration> },
}

/// What a release came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Release {
    /// Applied; this many holds are left (0: the lock was freed and announced).
    Applied { holds_left: u64 },
    /// Applied to the last hold, and the lock granted to the waiting owner with this token;
    /// `subscribers` connections were watching the lock's channel.
    Granted { token: u64, subscribers: u64 },
    /// This very release had been applied before (the call is a retry).
    AlreadyApplied,
    /// The lock is not held by the owner.
    NotOwner,
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis())
        .unwrap_or(u64::MAX)
        .max(1)
}

pub(crate) fn acquire(
    con: &mut Connection,
    keys: &LockKeys,
    owner: &str,
    lease: Duration,
) -> Result<Acquire> {
    let reply: Vec<i64> = ACQUIRE
        .key(&keys.lock)
        .key(&keys.fence)
        .arg(millis(lease))
        .arg(owner)
        .invoke(con)
        .map_err(|error| Error::from_redis(error, &keys.lock))?;
    parse_acquire(&reply)
}

pub(crate) fn parse_acquire(reply: &[i64]) -> Result<Acquire> {
    match reply {
        [1, holds, token] => Ok(Acquire::Acquired {
            holds: u64::try_from(*holds).unwrap_or(0),
            token: u64::try_from(*token).unwrap_or(0),
        }),
        [0, ttl] => Ok(Acquire::Held {
            ttl: u64::try_from(*ttl).ok().map(Duration::from_millis),
        }),
        other => Err(Error::Protocol(format!("acquire replied {other:?}"))),
    }
}

/// A waiting owner that a release may grant the lock to.
pub(crate) struct Grant<'a> {
    pub(crate) owner: &'a str,
    pub(crate) lease: Duration,
}

pub(crate) fn release(
    con: &mut Connection,
    keys: &LockKeys,
    owner: &str,
    release_id: &str,
    lease: Duration,
    grant: Option<&Grant<'_>>,
) -> Result<Release> {
    let reply: Vec<i64> = RELEASE
        .key(&keys.lock)
        .key(&keys.releases)
        .key(&keys.fence)
        .arg(owner)
        .arg(release_id)
        .arg(millis(lease))
        .arg(&keys.channel)
        .arg(grant.map_or("", |grant| grant.owner))
        .arg(grant.map_or(1, |grant| millis(grant.lease)))
        .invoke(con)
        .map_err(|error| Error::from_redis(error, &keys.lock))?;
    parse_release(&reply)
}

pub(crate) fn parse_release(reply: &[i64]) -> Result<Release> {
    match reply {
        [-2] => Ok(Release::AlreadyApplied),
        [-1] => Ok(Release::NotOwner),
        [0, token, subscribers] => Ok(Release::Granted {
            token: u64::try_from(*token).unwrap_or(0),
            subscribers: u64::try_from(*subscribers).unwrap_or(0),
        }),
        [left] if *left >= 0 => Ok(Release::Applied {
            holds_left: *left as u64,
        }),
        other => Err(Error::Protocol(format!("release replied {other:?}"))),
    }
}

/// One lease for [`renew`] to extend.
pub(crate) struct Renewal<'a> {
    pub(crate) lock_key: &'a str,
    pub(crate) owner: &'a str,
    pub(crate) lease: Duration,
}

/// Extends every lease whose owner still holds it, in one call. Returns one flag per lease, in
/// order: whether it was extended.
pub(crate) fn renew(con: &mut Connection, leases: &[Renewal<'_>]) -> Result<Vec<bool>> {
    let mut invocation = RENEW.prepare_invoke();
    for lease in leases {
        invocation
            .key(lease.lock_key)
            .arg(lease.owner)
            .arg(millis(lease.lease));
    }
    let reply: Vec<i64> = invocation.invoke(con).map_err(Error::Unavailable)?;
    parse_renew(&reply, leases.len())
}

pub(crate) fn parse_renew(reply: &[i64], leases: usize) -> Result<Vec<bool>> {
    if reply.len() != leases || reply.iter().any(|flag| !matches!(flag, 0 | 1)) {
        return Err(Error::Protocol(format!(
            "renewal of {leases} leases replied {reply:?}"
        )));
    }
    Ok(reply.iter().map(|&flag| flag == 1).collect())
}

/// A script call packed to be sent by hand (to several masters at once, without waiting for
/// each), with its script, to load where the server answers NOSCRIPT.
pub(crate) struct Packed {
    pub(crate) command: redis::Cmd,
    pub(crate) script: &'static Script,
}

fn evalsha(script: &'static Script, keys: &[&str]) -> redis::Cmd {
    let mut command = redis::cmd("EVALSHA");
    command.arg(script.get_hash()).arg(keys.len()).arg(keys);
    command
}

pub(crate) fn pack_acquire(keys: &LockKeys, owner: &str, lease: Duration) -> Packed {
    let mut command = evalsha(&ACQUIRE, &[&keys.lock, &keys.fence]);
    command.arg(millis(lease)).arg(owner);
    Packed {
        command,
        script: &ACQUIRE,
    }
}

/// A release; at the last hold it frees the lock, or grants it to `grant`'s owner.
pub(crate) fn pack_release(
    keys: &LockKeys,
    owner: &str,
    release_id: &str,
    lease: Duration,
    grant: Option<&Grant<'_>>,
) -> Packed {
    let mut command = evalsha(&RELEASE, &[&keys.lock, &keys.releases, &keys.fence]);
    command
        .arg(owner)
        .arg(release_id)
        .arg(millis(lease))
        .arg(&keys.channel)
        .arg(grant.map_or("", |grant| grant.owner))
        .arg(grant.map_or(1, |grant| millis(grant.lease)));
    Packed {
        command,
        script: &RELEASE,
    }
}

pub(crate) fn pack_renew(leases: &[Renewal<'_>]) -> Packed {
    let keys: Vec<&str> = leases.iter().map(|lease| lease.lock_key).collect();
    let mut command = evalsha(&RENEW, &keys);
    for lease in leases {
        command.arg(lease.owner).arg(millis(lease.lease));
    }
    Packed {
        command,
        script: &RENEW,
    }
}

/// Deletes the lock whoever holds it. Returns whether there was one.
pub(crate) fn force_release(con: &mut Connection, keys: &LockKeys) -> Result<bool> {
    let deleted: i64 = FORCE_RELEASE
        .key(&keys.lock)
        .arg(&keys.channel)
        .invoke(con)
        .map_err(|error| Error::from_redis(error, &keys.lock))?;
    Ok(deleted == 1)
}
