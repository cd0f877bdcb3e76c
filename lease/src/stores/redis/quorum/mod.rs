//! RedLock over independent Redis masters: a hold stands while a quorum of them (by default
//! N/2+1) keep it.
//!
//! An attempt sends the acquire script to every master at once, from the calling thread, with a
//! per-node timeout far below the lease; it wins if a quorum granted it and the lease, less the
//! time the attempt took and the drift allowance, is still ahead. A lost attempt is undone on every
//! master that may have granted it. Renewals go to every master in one batched call each; a lease
//! is renewed when a quorum extended it. There are no fencing tokens: no single counter exists
//! across independent masters.

mod build;
mod masters;
mod renew;

pub(crate) use build::build;

use super::fanout::{self, Answer, Master};
use crate::backend::{
    Attempt, Attempted, GrantFate, Kind, Release, ReleaseOutcome, Released, Renewer, Rivals,
    ServerIdentity,
};
use crate::error::{Error, Result};
use crate::state::LockState;
use crate::stores::redis::deployment::Deployment;
use crate::stores::redis::fencing::Epoch;
use crate::stores::redis::keys::LockKeys;
use crate::stores::redis::scripts::{self, Acquire, Announce, Call};
use crate::waiters::Waiters;
use masters::{release_new_hold, undo_deadline, Quorum};
use renew::QuorumRenewer;
use std::sync::Arc;
use std::time::{Duration, Instant};

impl Deployment for Quorum {
    fn fenced(&self) -> bool {
        false
    }

    fn grants(&self) -> bool {
        true
    }

    fn address(&self) -> &str {
        &self.place
    }

    fn servers(&self, _: &LockKeys, deadline: Instant) -> Result<Vec<ServerIdentity>> {
        let deadline = self.deadline(deadline);
        let mut first_error = None;
        let mut servers = Vec::with_capacity(self.masters.len());
        for master in self.masters.iter() {
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

    fn call_timeout(&self) -> Duration {
        self.node_timeout
    }

    fn admit(&self, keys: &LockKeys) -> Result<()> {
        match keys.kind {
            Kind::Lock => Ok(()),
            Kind::Leader => Err(Error::InvalidArgument(
                "a leader election is not offered on RedLock: a term is a fencing token, which \
                 needs one counter, and RedLock's masters each keep their own"
                    .into(),
            )),
            other => Err(Error::InvalidArgument(format!(
                "a {} is not offered on RedLock: its masters would each keep their own holds or \
                 line, and a quorum of them does not bound its holders as one server does",
                other.label()
            ))),
        }
    }

    fn attempt(
        &self,
        keys: &LockKeys,
        attempt: &Attempt<'_>,
        deadline: Instant,
    ) -> Result<Attempted> {
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
        let quorum = self.quorum;
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
        let all = self.all();
        let answers = fanout::exchange(&all, &acquire, self.deadline(deadline), &undo, &settled);
        let mut granted: Vec<(&Master, u64)> = Vec::new();
        let mut answered = 0;
        let mut failures = Vec::new();
        for (master, answer) in self.masters.iter().zip(answers) {
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
        if granted.len() >= self.quorum && (attempt.now)() < attempt.valid_until {
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
                self.everywhere(&masters, undo, undo_by);
            }
        }
        match (answered, fanout::worst(failures)) {
            (0, Some(error)) => Err(error),
            _ => Ok(Attempted::Busy { ttl: None }),
        }
    }

    fn release(&self, keys: &LockKeys, release: &Release<'_>, deadline: Instant) -> ReleaseOutcome {
        let call = scripts::release_call(keys, release, Announce::Global, Epoch::None);
        // Withdraws the grant where it went through but cannot stand; a silent master gets it
        // behind the release.
        let withdraw = release
            .grant
            .as_ref()
            .map(|grant| release_new_hold(keys, grant.owner, grant.hold));
        let on_silent: Vec<&Call> = withdraw.iter().collect();
        let all = self.all();
        let answers = fanout::exchange(
            &all,
            &call,
            self.deadline(deadline),
            &on_silent,
            &fanout::all_replies,
        );
        let settled = answers
            .iter()
            .all(|answer| matches!(answer, Answer::Reply(_)));
        let (mut holds_left, mut applied, mut not_owner) = (0, 0, 0);
        let mut granted: Vec<&Master> = Vec::new();
        let mut failures = Vec::new();
        for (master, answer) in self.masters.iter().zip(answers) {
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
            if granted.len() >= self.quorum && (grant.now)() < grant.valid_until {
                handed_over = true;
            } else if !granted.is_empty() {
                self.everywhere(&granted, withdraw, undo_deadline(deadline));
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

    fn settle_grant(
        &self,
        keys: &LockKeys,
        owner: &str,
        hold: &str,
        deadline: Instant,
    ) -> Result<GrantFate> {
        let withdraw = release_new_hold(keys, owner, hold);
        self.everywhere(&self.all(), &withdraw, deadline);
        Ok(GrantFate::Withdrawn)
    }

    /// A pause from 1 ms to the retry delay, so that contenders fall out of step.
    fn pause(&self, _: Option<Duration>) -> Duration {
        let mut state = self.random.lock();
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        let span = u64::try_from(self.retry_delay.as_micros())
            .unwrap_or(u64::MAX)
            .max(1000);
        Duration::from_micros(1000 + *state % (span - 999))
    }

    /// Every master's view, combined: a holder counts if it holds the lock on a quorum, for as
    /// long as a quorum of those still will.
    fn inspect(&self, keys: &LockKeys, deadline: Instant) -> Result<LockState> {
        let mut views = Vec::new();
        let mut last_error = None;
        for (master, view) in self.masters.iter().zip(self.views(keys, deadline)) {
            match view {
                Ok(view) => views.push((master.pool.shown().to_owned(), view)),
                Err(error) => last_error = Some(error),
            }
        }
        if views.len() < self.quorum {
            // A holder may hold the lock on a quorum that counts the masters that did not
            // answer: too few answers cannot say it is free.
            let why = last_error.map_or_else(String::new, |error| format!(" (last: {error})"));
            return Err(Error::unavailable(crate::stores::redis::conn::io_error(
                std::io::ErrorKind::NotConnected,
                format!(
                    "{} of {} masters answered, fewer than a quorum of {}{why}",
                    views.len(),
                    self.masters.len(),
                    self.quorum
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
            if held.len() < self.quorum {
                continue;
            }
            held.sort_by_key(|&(_, ttl)| std::cmp::Reverse(ttl));
            state.ttl = held[self.quorum - 1].1;
            let holds = held.iter().map(|(holds, _)| *holds).min().unwrap_or(0);
            state.holders.push((owner.to_owned(), holds));
        }
        for (shown, view) in views {
            state.add_view(&shown, view);
        }
        Ok(state)
    }

    fn force_release(&self, keys: &LockKeys, deadline: Instant) -> Result<bool> {
        let mut deleted = false;
        let mut answered = false;
        let mut last_error = None;
        for master in self.masters.iter() {
            match master.pool.call(self.deadline(deadline), |con| {
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

    /// Never asked: [`Deployment::admit`] refuses semaphores here.
    fn resize(&self, keys: &LockKeys, _: u32, _: Instant) -> Result<Option<u32>> {
        self.admit(keys).map(|()| None)
    }

    /// Never asked: [`Deployment::admit`] refuses elections here.
    fn proclaim(&self, keys: &LockKeys, _: &str, _: &str, _: &str, _: Instant) -> Result<bool> {
        self.admit(keys).map(|()| false)
    }

    /// A quorum of the masters says who they are, each within the node timeout.
    fn ping(&self, deadline: Instant) -> Result<()> {
        let deadline = self.deadline(deadline);
        let mut last_error = None;
        let mut answered = 0;
        for master in self.masters.iter() {
            match master.pool.identify(deadline) {
                Ok(_) => answered += 1,
                Err(error) => last_error = Some(error),
            }
        }
        if answered >= self.quorum {
            return Ok(());
        }
        let why = last_error.map_or_else(String::new, |error| format!(" (last: {error})"));
        Err(Error::Unavailable {
            server: None,
            cause: crate::error::Cause::text(
                "redis",
                format!(
                    "{answered} of {} masters answered, fewer than the quorum of {}{why}",
                    self.masters.len(),
                    self.quorum
                ),
            ),
        })
    }

    fn renewer(&self) -> Box<dyn Renewer> {
        Box::new(QuorumRenewer {
            masters: Arc::clone(&self.masters),
            quorum: self.quorum,
            node_timeout: self.node_timeout,
        })
    }

    fn waiters(&self, _: String) -> Result<Waiters> {
        Ok(Waiters::local())
    }
}
