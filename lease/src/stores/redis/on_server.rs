//! One lock call on the server a `Via` reaches: the calls one server, a Sentinel's primary and
//! a cluster's slot master share (an attempt, a release, the settling of a grant, the withdrawal
//! of a wait, and a waiter's pause), and the undoing of an acquisition that reports failure.

use crate::backend::{
    Attempt, Attempted, GrantFate, Release, ReleaseOutcome, Released, Reserved, Rivals,
};
use crate::error::{Error, Result};
use crate::stores::redis::conn::Link;
use crate::stores::redis::fencing::Epoch;
use crate::stores::redis::keys::LockKeys;
use crate::stores::redis::pool::Via;
use crate::stores::redis::scripts::{self, Acquire, Announce, Call, Reserve};
use std::time::{Duration, Instant};

/// The longest a waiter sleeps before looking at the lock again, in case a release message was
/// lost. It also sleeps no longer than the holder's remaining lease.
const MAX_RECHECK: Duration = Duration::from_secs(1);

/// How long past an attempt's deadline the undoing of an acquisition that reports failure may
/// be waited for on a server that answers: enough for it to answer, too little to stretch the
/// call. An undo whose reply misses it was written all the same, and runs in its turn.
const UNDO_GRACE: Duration = Duration::from_millis(50);

/// The releases that undo `attempt` whatever it came to, written behind it on a connection that
/// did not answer: Redis runs a connection's commands in order, so if the attempt runs at all, it
/// is undone at once. Each release names the attempt's acquisition, which exists only if the
/// attempt ran, so neither can touch anything else. Each loads its script first: no NOSCRIPT
/// reply is read on that connection any more.
fn undo(keys: &LockKeys, attempt: &Attempt<'_>, announce: Announce) -> Vec<u8> {
    let mut bytes = undo_in(keys, attempt, announce, attempt.id).bytes_behind();
    if let Some(hold) = attempt.reenter {
        bytes.extend(undo_in(keys, attempt, announce, hold).bytes_behind());
    }
    bytes
}

/// The release of `attempt`'s acquisition in the hold `hold`.
fn undo_in(keys: &LockKeys, attempt: &Attempt<'_>, announce: Announce, hold: &str) -> Call {
    scripts::release(
        keys,
        attempt.owner,
        hold,
        attempt.id,
        None,
        announce,
        Epoch::None,
    )
}

/// Undoes an acquisition that ran (`holds` acquisitions of its hold, as it replied) but reports
/// failure: on `con` if it still answers, waiting for the reply until the attempt's `deadline`
/// or [`UNDO_GRACE`] from now, whichever is later; else written behind what `con` was sent.
fn undo_acquired(
    con: &mut dyn Link,
    keys: &LockKeys,
    attempt: &Attempt<'_>,
    announce: Announce,
    holds: u64,
    deadline: Instant,
) {
    let hold = match (holds, attempt.reenter) {
        (1, _) | (_, None) => attempt.id,
        (_, Some(hold)) => hold,
    };
    let call = undo_in(keys, attempt, announce, hold);
    if !con.is_usable() {
        con.send_behind(&call.bytes_behind());
        return;
    }
    con.set_deadline(deadline.max(Instant::now() + UNDO_GRACE));
    if let Err(error) = call.run(con, &keys.lock) {
        log::warn!(
            "undoing a failed acquisition of {:?}: {error}; if it was not written, it lapses \
             with its lease",
            keys.name
        );
    }
}

/// What an acquire script's `reply` says, for an attempt whose client watched the lock's channel
/// (`watching`) or not.
fn attempted(reply: Acquire, watching: bool) -> Attempted {
    match reply {
        Acquire::Acquired {
            holds,
            token,
            reserved,
        } => Attempted::Acquired {
            holds,
            token: Some(token),
            confirmed_at: None,
            reserved: reserved.map(|(last, subscribers)| Reserved {
                first: token + 1,
                last,
                rivals: rivals(subscribers, watching),
            }),
        },
        Acquire::Busy { ttl } => Attempted::Busy { ttl },
        Acquire::Reserved {
            ttl,
            first,
            last,
            subscribers,
        } => Attempted::Reserved {
            ttl,
            reserved: Reserved {
                first,
                last,
                rivals: rivals(subscribers, watching),
            },
        },
    }
}

/// What `subscribers` connections watching a lock's channel say of other clients' waiters, the
/// asking client's own subscriber being one of them if it `watching`.
fn rivals(subscribers: u64, watching: bool) -> Rivals {
    if subscribers > u64::from(watching) {
        Rivals::Subscribed
    } else {
        Rivals::None
    }
}

/// One attempt on the server `via` reaches. An attempt that reports failure leaves nothing
/// behind: one that got no answer is undone behind itself, and one that ran but whose replicas
/// did not acknowledge it (too few, `WAIT` refused or unanswered) is undone at once.
///
/// With acknowledgements, `WAIT` follows the script's reply rather than riding in its write:
/// Redis runs nothing a client wrote behind a `WAIT` it blocks in, and drops it all when the
/// client goes, so an undo written behind both would be lost with the connection the attempt
/// gave up on. Only an acquisition is acknowledged: a reply that the lock is held wrote nothing.
pub(crate) fn attempt_on(
    via: Via<'_>,
    keys: &LockKeys,
    attempt: &Attempt<'_>,
    deadline: Instant,
    announce: Announce,
) -> Result<Attempted> {
    let mut con = via.get(deadline)?;
    let call = scripts::acquire(
        keys,
        attempt.owner,
        attempt.lease,
        attempt.id,
        attempt.reenter,
        con.epoch(),
        attempt.waits,
        attempt.reserve.map(|reserve| Reserve {
            holder: reserve.holder,
            count: reserve.count,
            announce,
        }),
    );
    let reply = match call.run(&mut *con, &keys.lock) {
        Ok(reply) => reply,
        Err(error) => {
            if error.is_unavailable() {
                con.send_behind(&undo(keys, attempt, announce));
            }
            return Err(error);
        }
    };
    let watching = attempt.reserve.is_some_and(|reserve| reserve.watching);
    let attempted = scripts::parse_acquire(&reply).map(|reply| attempted(reply, watching))?;
    let (Attempted::Acquired { holds, .. }, Some(acks)) = (attempted, via.pool.acks()) else {
        return Ok(attempted);
    };
    let failure = match acks.confirm(&mut *con, &keys.lock) {
        Ok(None) => return Ok(attempted),
        Ok(Some(shortfall)) => shortfall.error(&keys.name),
        Err(error) => error,
    };
    // Not handed out: undone on the primary, which ran it.
    undo_acquired(&mut *con, keys, attempt, announce, holds, deadline);
    Err(failure)
}

/// One release on the server `via` reaches. A release whose reply was lost is sent again, once,
/// within the same deadline: the script applies it at most once.
pub(crate) fn release_on(
    via: Via<'_>,
    keys: &LockKeys,
    release: &Release<'_>,
    deadline: Instant,
    announce: Announce,
) -> ReleaseOutcome {
    let acks = via.pool.acks();
    // A grant whose reply is lost is withdrawn behind the release, unless its waiter claims it
    // first (see `claim.lua`): no grant outlives a lost reply unclaimed.
    let withdraw = release
        .grant
        .as_ref()
        .map(|grant| release_first(keys, grant.owner, grant.hold, grant.hold, announce));
    let once = || {
        via.call(deadline, |con| {
            let call = scripts::release_call(keys, release, announce, con.epoch());
            let replied = call.run_acked(con, &keys.lock, acks);
            if let (Err(error), Some(withdraw)) = (&replied, &withdraw) {
                if error.is_unavailable() {
                    con.send_behind(&withdraw.bytes_behind());
                }
            }
            let (reply, shortfall) = replied?;
            let released = scripts::parse_release(&reply)?;
            match shortfall {
                Some(shortfall) => Err(shortfall.error(&keys.name)),
                None => Ok(released),
            }
        })
    };
    let mut outcome = once();
    if matches!(&outcome, Err(error) if error.is_unavailable()) && Instant::now() < deadline {
        log::debug!("release of {:?} got no answer; sending it again", keys.name);
        outcome = once();
    }
    ReleaseOutcome {
        // A release the replicas did not acknowledge may be lost with the primary: it is sent
        // again, like one that got no answer.
        settled: !matches!(
            &outcome,
            Err(Error::Unavailable { .. } | Error::NotReplicated { .. })
        ),
        released: outcome.map(|released| match released {
            scripts::ReleaseReply::Applied { holds_left } => Released::Applied { holds_left },
            scripts::ReleaseReply::Granted {
                token,
                subscribers,
                last,
            } => {
                // The granted waiter watched the channel: its client's subscriber is one.
                let rivals = rivals(subscribers, true);
                Released::Granted {
                    token: Some(token),
                    rivals,
                    reserved: last.map(|last| Reserved {
                        first: token + 1,
                        last,
                        rivals,
                    }),
                }
            }
            scripts::ReleaseReply::AlreadyApplied => Released::AlreadyApplied,
            scripts::ReleaseReply::NotOwner => Released::NotOwner,
        }),
    }
}

/// The release of acquisition `id` of the hold `hold` of `owner`, without a grant: the
/// withdrawal of a grant (`id` the hold's), or the undoing of a claim (`id` the claimant's).
fn release_first(keys: &LockKeys, owner: &str, hold: &str, id: &str, announce: Announce) -> Call {
    scripts::release(keys, owner, hold, id, None, announce, Epoch::None)
}

/// Whether a grant of unknown outcome went through on the server `via` reaches: claimed by the
/// waiting owner if it stands, so that the withdrawal its releaser wrote behind the release
/// finds nothing to withdraw. A claim that gets no answer is undone behind itself (its undoing
/// announces on the global channel: a waiter of a sharded one finds the lock free when it looks
/// again).
pub(crate) fn settle_grant_on(
    via: Via<'_>,
    keys: &LockKeys,
    owner: &str,
    hold: &str,
    deadline: Instant,
) -> Result<GrantFate> {
    let mut con = via.get(deadline)?;
    let claimed = match scripts::claim(keys, owner, hold).run(&mut *con, &keys.lock) {
        Ok(reply) => scripts::parse_claim(&reply)?,
        Err(error) => {
            if error.is_unavailable() {
                let id = scripts::claim_id(hold);
                let undo = release_first(keys, owner, hold, &id, Announce::Global);
                con.send_behind(&undo.bytes_behind());
            }
            return Err(error);
        }
    };
    Ok(match claimed {
        Some(token) => GrantFate::Granted {
            token: Some(token),
            id: scripts::claim_id(hold),
        },
        None => GrantFate::Withdrawn,
    })
}

/// Withdraws what `owner`'s wait left in Redis (a fair lock's place in line, a writer's mark)
/// on the server `via` reaches, by `deadline`. Best effort: a mark left behind lapses by itself
/// (see [`scripts::WAITER_MARK`]).
pub(crate) fn withdraw_on(
    via: Via<'_>,
    keys: &LockKeys,
    owner: &str,
    deadline: Instant,
) -> Result<()> {
    via.call(deadline, |con| {
        scripts::withdraw(keys, owner)
            .run(con, &keys.lock)
            .map(drop)
    })
}

/// Withdraws a wait's marks, logging a failure (the marks then lapse by themselves).
pub(crate) fn log_withdrawal(keys: &LockKeys, withdrawn: Result<()>) {
    if let Err(error) = withdrawn {
        log::debug!(
            "withdrawing a wait for {:?} failed: {error}; its mark lapses within {:?}",
            keys.name,
            scripts::WAITER_MARK
        );
    }
}

/// An election leader's proclamation on the server `via` reaches, acknowledged by replicas as
/// its hold was: whether the hold still led.
pub(crate) fn proclaim_on(
    via: Via<'_>,
    keys: &LockKeys,
    (owner, hold, value): (&str, &str, &str),
    deadline: Instant,
    announce: Announce,
) -> Result<bool> {
    let call = scripts::proclaim(keys, owner, hold, value, announce);
    acked_on(via, keys, &call, scripts::parse_proclaim, deadline)
}

/// A semaphore's resizing on the server `via` reaches, acknowledged by replicas as its holds
/// are: the number of permits declared before, if any was.
pub(crate) fn resize_on(
    via: Via<'_>,
    keys: &LockKeys,
    permits: u32,
    deadline: Instant,
) -> Result<Option<u32>> {
    acked_on(
        via,
        keys,
        &scripts::resize(keys, permits),
        scripts::parse_resize,
        deadline,
    )
}

/// `call` on the server `via` reaches, by `deadline`, its reply read by `parse`; a shortfall of
/// the replica acknowledgements the pool asks for is the call's error.
pub(crate) fn acked_on<T>(
    via: Via<'_>,
    keys: &LockKeys,
    call: &Call,
    parse: fn(&redis::Value) -> Result<T>,
    deadline: Instant,
) -> Result<T> {
    let acks = via.pool.acks();
    via.call(deadline, |con| {
        let (reply, shortfall) = call.run_acked(con, &keys.lock, acks)?;
        let parsed = parse(&reply)?;
        match shortfall {
            Some(shortfall) => Err(shortfall.error(&keys.name)),
            None => Ok(parsed),
        }
    })
}

/// How long a waiter of a server that announces releases sleeps: no longer than the holder's
/// lease has left, and never more than [`MAX_RECHECK`].
pub(crate) fn pause(ttl: Option<Duration>) -> Duration {
    ttl.unwrap_or(MAX_RECHECK)
        .clamp(Duration::from_millis(1), MAX_RECHECK)
}
