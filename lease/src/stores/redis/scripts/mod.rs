//! The Lua scripts, and the only Rust code that knows their arguments and replies. A script call
//! is a [`Call`]: EVALSHA of a script loaded once per server through [`redis::Script`], sent
//! again after loading the script where the server answers NOSCRIPT. The same `Call` is invoked
//! on one connection or written to several at once (RedLock's fan-out).
//!
//! Every script checks the keys and arguments it is given before its first write (see
//! `access.lua` and `checks.lua`): a key of another type, a fencing counter that is not a whole
//! number from 0 or cannot rise any more, a malformed lease, and a command the user may not run
//! fail the call with nothing changed.

mod acks;
mod call;
mod claim;
mod direct;
mod if_held;
mod latch;
pub(crate) mod limit;
mod proclaim;
mod reply;
mod resize;
mod shared;

pub(crate) use acks::Acks;
pub(crate) use call::{is_noscript, Call};
pub(crate) use claim::{claim, claim_id, parse_claim};
pub(crate) use if_held::HeldWrite;
pub(crate) use latch::{latch_down, latch_read, latch_set, parse_latch_down, parse_latch_set};
pub(crate) use proclaim::{parse_proclaim, proclaim};
pub(crate) use reply::{parse_acquire, parse_release, parse_renew, Acquire, ReleaseReply};
pub(crate) use resize::{parse_resize, resize};

use crate::backend::{Kind, Renewal};
use crate::error::Result;
use crate::state::LockState;
use crate::stores::redis::fencing::Epoch;
use crate::stores::redis::keys::LockKeys;
use call::{millis, Lua};
use std::sync::LazyLock;
use std::time::Duration;

static ACQUIRE: LazyLock<Lua> = LazyLock::new(|| Lua::new(include_str!("acquire.lua")));
static LOCK: LazyLock<Lua> = LazyLock::new(|| Lua::alone(include_str!("lock.lua")));
static RELEASE: LazyLock<Lua> = LazyLock::new(|| Lua::new(include_str!("release.lua")));
static UNLOCK: LazyLock<Lua> = LazyLock::new(|| Lua::alone(include_str!("unlock.lua")));
static RENEW: LazyLock<Lua> = LazyLock::new(|| Lua::new(include_str!("renew.lua")));
static WITHDRAW: LazyLock<Lua> = LazyLock::new(|| Lua::new(include_str!("withdraw.lua")));

/// How long a waiter's mark lasts in Redis unless it asks again (a fair lock's place in line, a
/// writer's claim to go before new readers): a waiter asks at least every second, so a live
/// one keeps it, and one that vanished holds others up for at most this long.
pub(crate) const WAITER_MARK: Duration = Duration::from_secs(5);

/// An acquisition attempt: a new hold whose id (and first acquisition's) is `id`, or a re-entry
/// of the hold `reenter` under the acquisition `id`; `waits` if the caller waits should the
/// primitive be taken (a fair lock's waiter then takes a place in line). With `reserve`, a plain
/// lock found held by that hold of the caller's client reserves tokens for it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn acquire(
    keys: &LockKeys,
    owner: &str,
    lease: Duration,
    id: &str,
    reenter: Option<&str>,
    epoch: Epoch,
    waits: bool,
    reserve: Option<Reserve<'_>>,
) -> Call {
    if keys.kind.shared() {
        return shared::acquire(keys, owner, lease, id, reenter, epoch, waits);
    }
    // The common acquisition has a script of its own, which carries only what it needs.
    if keys.kind != Kind::Fair && reenter.is_none() && epoch == Epoch::None && reserve.is_none() {
        return Call::new(&LOCK, &[&keys.lock, &keys.fence])
            .arg(millis(lease))
            .arg(owner)
            .arg(id);
    }
    // A plain lock names only the keys it has: an importing node runs a script for a migrating
    // slot only if it holds every key named (else TRYAGAIN, until the migration ends).
    let (fair, call) = match keys.kind {
        Kind::Fair => (
            millis(WAITER_MARK).to_string(),
            Call::new(
                &ACQUIRE,
                &[
                    &keys.lock,
                    &keys.fence,
                    &keys.epoch,
                    &keys.queue,
                    &keys.queue_until,
                ],
            ),
        ),
        _ => (
            String::new(),
            Call::new(&ACQUIRE, &[&keys.lock, &keys.fence, &keys.epoch]),
        ),
    };
    let call = call
        .arg(millis(lease))
        .arg(owner)
        .arg(id)
        .arg(reenter.unwrap_or(""))
        .arg(epoch.arg())
        .arg(fair)
        .arg(u8::from(waits));
    match reserve {
        Some(reserve) if keys.kind == Kind::Lock => call
            .arg(reserve.holder.unwrap_or(""))
            .arg(reserve.count)
            .arg(&keys.channel)
            .arg(match reserve.announce {
                Announce::Global => "numsub",
                Announce::Sharded => "shardnumsub",
            }),
        _ => call,
    }
}

/// Tokens to reserve, for a plain lock's client to hand on without the server: past a new hold's
/// own, or for `holder`, a hold of the caller's client, should an attempt find it holding the
/// lock; how the lock's channel is announced, to count its watchers.
#[derive(Clone, Copy)]
pub(crate) struct Reserve<'a> {
    pub(crate) holder: Option<&'a str>,
    pub(crate) count: u32,
    pub(crate) announce: Announce,
}

/// What Redis holds for the primitive, read without a script (see `direct.rs`; a shared
/// primitive's in `shared.rs`).
pub(crate) fn inspect(
    con: &mut dyn crate::stores::redis::conn::Link,
    keys: &LockKeys,
) -> Result<LockState> {
    if keys.kind.shared() {
        shared::inspect(con, keys)
    } else {
        direct::inspect(con, keys)
    }
}

/// Deletes the primitive whoever holds it, and announces it; whether there was anything.
pub(crate) fn force_release(
    con: &mut dyn crate::stores::redis::conn::Link,
    keys: &LockKeys,
    announce: Announce,
) -> Result<bool> {
    if keys.kind.shared() {
        shared::force_release(con, keys, announce)
    } else {
        direct::force_release(con, keys, announce)
    }
}

/// Withdraws `owner`'s marks of a wait that ended without the primitive: its place in a fair
/// lock's line, its mark as a read-write lock's waiting writer.
pub(crate) fn withdraw(keys: &LockKeys, owner: &str) -> Call {
    Call::new(&WITHDRAW, &[&keys.queue, &keys.queue_until, &keys.writer]).arg(owner)
}

/// A waiting owner that a release may grant the lock to, as a new hold of id `hold`, with
/// `reserve` tokens reserved past its own.
pub(crate) struct Grant<'a> {
    pub(crate) owner: &'a str,
    pub(crate) hold: &'a str,
    pub(crate) lease: Duration,
    pub(crate) reserve: u32,
}

/// How a lock's channel is announced on: a global channel (`PUBLISH`), or a sharded one on the
/// master of its slot (`SPUBLISH`, Redis Cluster).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Announce {
    Global,
    Sharded,
}

impl Announce {
    pub(crate) fn command(self) -> &'static str {
        match self {
            Announce::Global => "publish",
            Announce::Sharded => "spublish",
        }
    }
}

/// The release of acquisition `id` of hold `hold`; at the hold's last, it frees the lock (and
/// announces it, as `announce` says) or grants it to `grant`'s owner.
/// The release script's call for the core's `release` on `keys`, announcing a freed lock as
/// `announce` says, a grant's token drawn in `epoch`.
pub(crate) fn release_call(
    keys: &LockKeys,
    release: &crate::backend::Release<'_>,
    announce: Announce,
    epoch: Epoch,
) -> Call {
    let grant = release.grant.as_ref().map(|grant| Grant {
        owner: grant.owner,
        hold: grant.hold,
        lease: grant.lease,
        reserve: grant.reserve,
    });
    self::release(
        keys,
        release.owner,
        release.hold,
        release.id,
        grant.as_ref(),
        announce,
        epoch,
    )
}

pub(crate) fn release(
    keys: &LockKeys,
    owner: &str,
    hold: &str,
    id: &str,
    grant: Option<&Grant<'_>>,
    announce: Announce,
    epoch: Epoch,
) -> Call {
    if keys.kind.shared() {
        return shared::release(keys, owner, hold, id, announce);
    }
    // A release without a grant has a script of its own, which carries only what it needs.
    if grant.is_none() {
        return Call::new(&UNLOCK, &[&keys.lock, &keys.released])
            .arg(owner)
            .arg(hold)
            .arg(id)
            .arg(&keys.channel)
            .arg(announce.command());
    }
    Call::new(
        &RELEASE,
        &[&keys.lock, &keys.fence, &keys.released, &keys.epoch],
    )
    .arg(owner)
    .arg(hold)
    .arg(id)
    .arg(&keys.channel)
    .arg(grant.map_or("", |grant| grant.owner))
    .arg(grant.map_or("", |grant| grant.hold))
    .arg(grant.map_or(1, |grant| millis(grant.lease)))
    .arg(announce.command())
    .arg(epoch.arg())
    .arg(grant.map_or(0, |grant| grant.reserve))
}

/// Extends every lease whose hold still holds its lock, in one call: each renewal's address is
/// the key that holds its hold (see `LockKeys::hold_key`).
pub(crate) fn renew(leases: &[Renewal<'_>]) -> Call {
    let keys: Vec<&str> = leases.iter().map(|lease| lease.address).collect();
    let mut call = Call::new(&RENEW, &keys);
    for lease in leases {
        call = call.arg(lease.hold).arg(millis(lease.lease));
    }
    call
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Error, Result};
    use crate::stores::redis::conn::Conn;

    /// Acquires and releases `keys` as a new hold on `con` with tokens of `epoch`.
    fn take(con: &mut Conn, keys: &LockKeys, id: &str, epoch: Epoch) -> Result<u64> {
        let reply = acquire(
            keys,
            "o",
            Duration::from_secs(5),
            id,
            None,
            epoch,
            false,
            None,
        )
        .run(con, "k")?;
        let Acquire::Acquired { token, .. } = parse_acquire(&reply)? else {
            panic!("held: {reply:?}");
        };
        let released = release(keys, "o", id, id, None, Announce::Global, Epoch::None);
        released.run(con, "k")?;
        Ok(token)
    }

    #[test]
    fn an_epoch_raises_the_tokens_and_an_epoch_behind_the_counter_gets_none() {
        let server = testkit::RedisServer::start();
        let endpoint = crate::stores::redis::conn::Endpoint::parse(&server.url()).expect("valid");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut con = Conn::open(&endpoint, deadline).expect("reachable");
        let keys = LockKeys::for_test("epochs");
        let span = 1u64 << 44;
        assert_eq!(take(&mut con, &keys, "a", Epoch::None).expect("free"), 1);
        assert_eq!(
            take(&mut con, &keys, "b", Epoch::Known(0)).expect("free"),
            2
        );
        // A new epoch starts at its first token, then counts up within it.
        assert_eq!(
            take(&mut con, &keys, "c", Epoch::Known(3)).expect("free"),
            3 * span
        );
        assert_eq!(
            take(&mut con, &keys, "d", Epoch::Known(3)).expect("free"),
            3 * span + 1
        );
        // Without an epoch the counter goes on; with one behind it, nothing is handed out.
        assert_eq!(
            take(&mut con, &keys, "e", Epoch::None).expect("free"),
            3 * span + 2
        );
        let behind = take(&mut con, &keys, "f", Epoch::Known(2));
        assert!(
            matches!(&behind, Err(error) if error.code() == Some("EPOCH")),
            "{behind:?}"
        );
        let state = crate::stores::redis::scripts::inspect(&mut con, &keys).expect("readable");
        assert!(!state.is_held(), "refused before any write: {state:?}");
        let past = take(&mut con, &keys, "g", Epoch::Known(Epoch::MAX + 1));
        assert!(matches!(&past, Err(Error::Refused { .. })), "{past:?}");
        assert_eq!(
            take(&mut con, &keys, "h", Epoch::Known(Epoch::MAX)).expect("free"),
            Epoch::MAX * span
        );
    }
}
