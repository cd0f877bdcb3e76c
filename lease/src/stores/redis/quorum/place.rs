//! A lock on a RedLock's masters: each call sent to every master at once, and decided by the
//! quorum of their answers.

use super::masters::{release_new_hold, undo_deadline, Quorum};
use crate::backend::{
    Attempt, Attempted, GrantFate, Grants, HoldEnd, Kind, LockId, Place, Release, ReleaseOutcome,
    Released, Rivals, ServerIdentity,
};
use crate::error::{Error, Result};
use crate::state::LockState;
use crate::stores::redis::fanout::{self, Answer, Master};
use crate::stores::redis::fencing::Epoch;
use crate::stores::redis::keys::LockKeys;
use crate::stores::redis::scripts::{self, Acquire, Announce, Call};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A lock on a RedLock's masters: its keys on each, and the quorum that decides.
pub(super) struct QuorumPlace {
    pub(super) id: LockId,
    pub(super) keys: LockKeys,
    pub(super) quorum: Arc<Quorum>,
}

impl Place for QuorumPlace {
    fn id(&self) -> &LockId {
        &self.id
    }

    fn of_kind(&self, kind: Kind) -> Arc<dyn Place> {
        Arc::new(QuorumPlace {
            id: self.id.with_kind(kind),
            keys: self.keys.with_kind(kind),
            quorum: Arc::clone(&self.quorum),
        })
    }

    fn address(&self) -> (&str, &str) {
        (&self.quorum.place, &self.keys.lock)
    }

    /// No release is announced on a RedLock: its waiters look again after their pauses.
    fn wake_key(&self) -> &str {
        &self.keys.channel
    }

    fn hold_address(&self, hold: &str) -> Arc<str> {
        Arc::from(self.keys.hold_key(hold))
    }

    fn servers(&self, deadline: Instant) -> Result<Vec<ServerIdentity>> {
        let q = &*self.quorum;
        let deadline = q.deadline(deadline);
        let mut first_error = None;
        let mut servers = Vec::with_capacity(q.masters.len());
        for master in q.masters.iter() {
            match master.pool.identify(deadline) {
                Ok(identity) => servers.push(identity),
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        match first_error {
            Some(error) if servers.is_empty() => Err(error),
            _ => Ok(servers),
        }
    }

    fn attempt(&self, attempt: &Attempt<'_>, deadline: Instant) -> Result<Attempted> {
        let (q, keys) = (&*self.quorum, &self.keys);
        let acquire = scripts::acquire(
            keys,
            attempt.owner,
            attempt.lease,
            attempt.id,
            attempt.reenter,
            Epoch::None,
            attempt.waits,
            None,
        );
        // Undoing it, whichever it came to on a master: a new hold, or a re-entry. Each names
        // this acquisition, which exists only where the attempt ran.
        let undo_new = release_new_hold(keys, attempt.owner, attempt.id);
        let undo_reentry = attempt.reenter.map(|hold| {
            scripts::release(
                keys,
                attempt.owner,
                hold,
                attempt.id,
                None,
                Announce::Global,
                Epoch::None,
            )
        });
        let undo: Vec<&Call> = std::iter::once(&undo_new).chain(&undo_reentry).collect();
        let quorum = q.quorum;
        // Settled once a quorum granted it, or too few masters are left to.
        let settled = |answers: &[Answer]| {
            let (mut granted, mut refused) = (0, 0);
            for answer in answers {
                match answer {
                    Answer::Reply(reply) => match scripts::parse_acquire(reply) {
                        Ok(Acquire::Acquired { .. }) => granted += 1,
                        _ => refused += 1,
                    },
                    Answer::Failed(_) => refused += 1,
                    Answer::Silent => {}
                }
            }
            granted >= quorum || answers.len() - refused < quorum
        };
        let all = q.all();
        let answers = fanout::exchange(&all, &acquire, q.deadline(deadline), &undo, &settled);
        let mut granted: Vec<(&Master, u64)> = Vec::new();
        let mut answered = 0;
        let mut failures = Vec::new();
        for (master, answer) in q.masters.iter().zip(answers) {
            match answer {
                Answer::Reply(reply) => {
                    answered += 1;
                    if let Ok(Acquire::Acquired { holds, .. }) = scripts::parse_acquire(&reply) {
                        granted.push((master, holds));
                    }
                }
                failed @ Answer::Failed(_) => failures.push(failed),
                Answer::Silent => {}
            }
        }
        if granted.len() >= q.quorum && (attempt.now)() < attempt.valid_until {
            let holds = granted.iter().map(|(_, holds)| *holds).max().unwrap_or(1);
            return Ok(Attempted::Acquired {
                holds,
                token: None,
                confirmed_at: None,
                reserved: None,
            });
        }
        let undo_by = undo_deadline(deadline);
        for (undo, new) in [(Some(&undo_new), true), (undo_reentry.as_ref(), false)] {
            let Some(undo) = undo else { continue };
            let masters: Vec<&Master> = granted
                .iter()
                .filter(|(_, holds)| (*holds == 1) == new)
                .map(|(master, _)| *master)
                .collect();
            if !masters.is_empty() {
                q.everywhere(&masters, undo, undo_by);
            }
        }
        match (answered, fanout::worst(failures)) {
            (0, Some(error)) => Err(error),
            _ => Ok(Attempted::Busy { ttl: None }),
        }
    }

    /// A plain lock leaves nothing behind a wait.
    fn abandon(&self, _owner: &str, _waited: bool) {}

    /// A hold on the masters lapses with its keys' lease.
    fn ended(&self, _hold: &str, _end: HoldEnd) {}

    fn release(&self, release: &Release<'_>, deadline: Instant) -> ReleaseOutcome {
        let (q, keys) = (&*self.quorum, &self.keys);
        let call = scripts::release_call(keys, release, Announce::Global, Epoch::None);
        // Withdraws the grant where it went through but cannot stand; a silent master gets it
        // behind the release.
        let withdraw = release
            .grant
            .as_ref()
            .map(|grant| release_new_hold(keys, grant.owner, grant.hold));
        let on_silent: Vec<&Call> = withdraw.iter().collect();
        let all = q.all();
        let answers = fanout::exchange(
            &all,
            &call,
            q.deadline(deadline),
            &on_silent,
            &fanout::all_replies,
        );
        let settled = answers
            .iter()
            .all(|answer| matches!(answer, Answer::Reply(_)));
        let (mut holds_left, mut applied, mut not_owner) = (0, 0, 0);
        let mut granted: Vec<&Master> = Vec::new();
        let mut failures = Vec::new();
        for (master, answer) in q.masters.iter().zip(answers) {
            match answer {
                Answer::Reply(reply) => match scripts::parse_release(&reply) {
                    Ok(scripts::ReleaseReply::NotOwner) => not_owner += 1,
                    Ok(scripts::ReleaseReply::Granted { .. }) => {
                        applied += 1;
                        granted.push(master);
                    }
                    Ok(scripts::ReleaseReply::Applied { holds_left: left }) => {
                        applied += 1;
                        holds_left = holds_left.max(left);
                    }
                    Ok(scripts::ReleaseReply::AlreadyApplied) => applied += 1,
                    Err(error) => failures.push(Answer::Failed(error)),
                },
                failed => failures.push(failed),
            }
        }
        let mut handed_over = false;
        if let (Some(grant), Some(withdraw)) = (&release.grant, &withdraw) {
            if granted.len() >= q.quorum && (grant.now)() < grant.valid_until {
                handed_over = true;
            } else if !granted.is_empty() {
                q.everywhere(&granted, withdraw, undo_deadline(deadline));
            }
        }
        let released = if handed_over {
            Ok(Released::Granted {
                token: None,
                // No release is announced: other clients' waiters poll, unseen.
                rivals: Rivals::Unknown,
                reserved: None,
            })
        } else if applied > 0 {
            Ok(Released::Applied { holds_left })
        } else if not_owner > 0 {
            Ok(Released::NotOwner)
        } else {
            Err(fanout::worst(failures).unwrap_or_else(|| {
                Error::unavailable(crate::stores::redis::conn::io_error(
                    std::io::ErrorKind::TimedOut,
                    "no master answered the release in time",
                ))
            }))
        };
        ReleaseOutcome { released, settled }
    }

    /// Every master's view, combined: a holder counts if it holds the lock on a quorum, for as
    /// long as a quorum of those still will.
    fn inspect(&self, deadline: Instant) -> Result<LockState> {
        let (q, keys) = (&*self.quorum, &self.keys);
        let mut views = Vec::new();
        let mut last_error = None;
        for (master, view) in q.masters.iter().zip(q.views(keys, deadline)) {
            match view {
                Ok(view) => views.push((master.pool.shown().to_owned(), view)),
                Err(error) => last_error = Some(error),
            }
        }
        if views.len() < q.quorum {
            // A holder may hold the lock on a quorum that counts the masters that did not
            // answer: too few answers cannot say it is free.
            let why = last_error.map_or_else(String::new, |error| format!(" (last: {error})"));
            return Err(Error::unavailable(crate::stores::redis::conn::io_error(
                std::io::ErrorKind::NotConnected,
                format!(
                    "{} of {} masters answered, fewer than a quorum of {}{why}",
                    views.len(),
                    q.masters.len(),
                    q.quorum
                ),
            )));
        }
        let mut state = LockState::empty(&keys.name);
        let mut owners: Vec<&str> = views
            .iter()
            .flat_map(|(_, view)| view.holders.iter().map(|(owner, _)| owner.as_str()))
            .collect();
        owners.sort_unstable();
        owners.dedup();
        for owner in owners {
            let mut held: Vec<(u64, Option<Duration>)> = views
                .iter()
                .filter_map(|(_, view)| {
                    let holds = view.holders.iter().find(|(o, _)| o == owner)?.1;
                    Some((holds, view.ttl))
                })
                .collect();
            if held.len() < q.quorum {
                continue;
            }
            held.sort_by_key(|&(_, ttl)| std::cmp::Reverse(ttl));
            state.ttl = held[q.quorum - 1].1;
            let holds = held.iter().map(|(holds, _)| *holds).min().unwrap_or(0);
            state.holders.push((owner.to_owned(), holds));
        }
        for (shown, view) in views {
            state.add_view(&shown, view);
        }
        Ok(state)
    }

    fn force_release(&self, deadline: Instant) -> Result<bool> {
        let (q, keys) = (&*self.quorum, &self.keys);
        let mut deleted = false;
        let mut answered = false;
        let mut last_error = None;
        for master in q.masters.iter() {
            match master.pool.call(q.deadline(deadline), |con| {
                scripts::force_release(con, keys, Announce::Global)
            }) {
                Ok(found) => {
                    answered = true;
                    deleted |= found;
                }
                Err(error) => last_error = Some(error),
            }
        }
        match (answered, last_error) {
            (false, Some(error)) => Err(error),
            _ => Ok(deleted),
        }
    }

    /// A plain lock's, the only kind offered here.
    fn grants(&self) -> Option<&dyn Grants> {
        self.id.kind.grants().then_some(self as &dyn Grants)
    }
}

impl Grants for QuorumPlace {
    fn claim_id(&self, hold: &str) -> String {
        scripts::claim_id(hold)
    }

    /// Withdrawn everywhere: a grant of unknown outcome is never claimed on a quorum.
    fn settle_grant(&self, owner: &str, hold: &str, deadline: Instant) -> Result<GrantFate> {
        let (q, keys) = (&*self.quorum, &self.keys);
        let withdraw = release_new_hold(keys, owner, hold);
        q.everywhere(&q.all(), &withdraw, deadline);
        Ok(GrantFate::Withdrawn)
    }
}
