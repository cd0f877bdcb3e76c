//! A lock in PostgreSQL: its key in the store's tables, and each call on it one function of the
//! schema (`schema.sql`), run in one round trip. An attempt whose answer is lost is undone: at
//! once on a fresh connection if the server answers, else within a second of the server
//! answering again (the listening thread tries), or before the next call on the same name, or
//! at the next renewal round, whichever comes first; its undoing leaves a record, so that should
//! the attempt run after it, it takes nothing.

use super::errors::other_permits;
use super::inspect;
use super::shared::{Shared, Undo};
use crate::backend::{
    Attempt, Attempted, Elects, GrantFate, Grants, HoldEnd, Kind, Latches, Leading, Limits, LockId,
    Place, Release, ReleaseOutcome, Released, Reserved, Resizes, Rivals, ServerIdentity,
    WritesWhileHeld,
};
use crate::error::{Error, Result};
use crate::policy::after;
use crate::state::LockState;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a waiting fair acquisition's place in line, or a waiting writer's mark, lasts
/// without it asking again (each waiting call asks at least every second).
const MARK: Duration = Duration::from_secs(5);

/// The key of the primitive `id` under `prefix`: the name in braces (names hold none), and an
/// election's apart from the lock of the same name.
pub(crate) fn key_of(prefix: &str, id: &LockId) -> String {
    let tail = match id.kind {
        Kind::Leader => "}:leader",
        Kind::Latch => "}:latch",
        Kind::Limiter => "}:limiter",
        _ => "}",
    };
    [prefix, "{", &id.name, tail].concat()
}

/// The kind of an acquisition, as the store's `acquire` names it.
fn kind_text(kind: Kind) -> &'static str {
    match kind {
        Kind::Lock => "lock",
        Kind::Fair => "fair",
        Kind::Semaphore { .. } => "semaphore",
        Kind::Read => "read",
        Kind::Write => "write",
        Kind::Leader => "leader",
        // Never acquired: they have calls of their own.
        Kind::Latch => "latch",
        Kind::Limiter => "limiter",
    }
}

/// A lock in the store's tables.
pub(crate) struct PgPlace {
    pub(crate) id: LockId,
    pub(crate) key: String,
    pub(crate) shared: Arc<Shared>,
}

impl PgPlace {
    fn election(&self) -> &'static str {
        if self.id.kind == Kind::Leader {
            "true"
        } else {
            "false"
        }
    }

    /// Undoes the acquisition `id` of `owner` (an attempt, a grant, a claim, whose answer was
    /// lost) by `deadline` if the server answers; else keeps it to undo later.
    fn undo(&self, owner: &str, id: &str, deadline: Instant) {
        let undo = Undo {
            key: self.key.clone(),
            owner: owner.to_owned(),
            id: id.to_owned(),
            election: self.id.kind == Kind::Leader,
        };
        // Within what is left of the call's deadline only: a call ends by its deadline, and the
        // listening thread undoes it within a second of the server answering again.
        if Instant::now() >= deadline {
            self.shared.keep_undo(undo);
            return;
        }
        if let Err(error) = self.shared.undo(&undo, deadline) {
            log::debug!(
                "undoing an unanswered call on {:?}: {error}; it is undone later",
                self.id.name
            );
            self.shared.keep_undo(undo);
        }
    }
}

/// What the store says of other clients' waiters: whether one found the name held since it was
/// last freed (the flag that makes a release announce).
fn rivals(seen: Option<bool>) -> Rivals {
    if seen.unwrap_or(false) {
        Rivals::Subscribed
    } else {
        Rivals::None
    }
}

impl Place for PgPlace {
    fn id(&self) -> &LockId {
        &self.id
    }

    fn of_kind(&self, kind: Kind) -> Arc<dyn Place> {
        let id = self.id.with_kind(kind);
        Arc::new(PgPlace {
            key: key_of(&self.shared.prefix, &id),
            id,
            shared: Arc::clone(&self.shared),
        })
    }

    fn address(&self) -> (&str, &str) {
        (&self.shared.shown, &self.key)
    }

    fn wake_key(&self) -> &str {
        &self.key
    }

    fn hold_address(&self, _hold: &str) -> Arc<str> {
        Arc::from(self.key.as_str())
    }

    fn servers(&self, deadline: Instant) -> Result<Vec<ServerIdentity>> {
        let row = self.shared.call(&self.key, deadline, |conn| {
            conn.query_one(&self.shared.sql.identify, &[], deadline)
        })?;
        let field = |name: &str| row.text(name).ok().flatten().unwrap_or_default();
        Ok(vec![ServerIdentity {
            run_id: Some(format!(
                "{}/{}/{}",
                field("started"),
                field("port"),
                field("db")
            )),
            peer: None,
        }])
    }

    fn attempt(&self, attempt: &Attempt<'_>, deadline: Instant) -> Result<Attempted> {
        self.shared.ensure_schema(deadline)?;
        self.shared.settle_undos(Some(&self.key), deadline);
        let (permits, take) = match self.id.kind {
            Kind::Semaphore { permits, take } => (permits, take),
            _ => (0, 1),
        };
        let (reserve_for, reserve) = attempt.reserve.map_or(("", 0), |reserve| {
            (reserve.holder.unwrap_or(""), reserve.count)
        });
        let texts = [
            self.key.clone(),
            kind_text(self.id.kind).to_owned(),
            attempt.owner.to_owned(),
            attempt.id.to_owned(),
            attempt.reenter.unwrap_or("").to_owned(),
            attempt.lease.as_millis().to_string(),
            attempt.waits.to_string(),
            permits.to_string(),
            take.to_string(),
            MARK.as_millis().to_string(),
            reserve_for.to_owned(),
            reserve.to_string(),
        ];
        let params: Vec<Option<&str>> = texts.iter().map(|text| Some(text.as_str())).collect();
        let replied = self.shared.pool.call(deadline, |conn| {
            conn.query_one(&self.shared.sql.acquire, &params, deadline)
        });
        let row = match replied {
            Ok(row) => row,
            Err(error) => {
                if let Some(refused) = other_permits(&error, &self.key, permits) {
                    return Err(refused);
                }
                let mapped = self.shared.error(error, &self.key);
                if mapped.is_unavailable() {
                    self.undo(attempt.owner, attempt.id, deadline);
                }
                return Err(mapped);
            }
        };
        let read = || -> postgres_blocking::Result<Attempted> {
            let rivals = rivals(row.get::<Option<bool>>("rivals")?);
            let last = row.get::<Option<u64>>("reserved_last")?;
            Ok(if row.get::<bool>("acquired")? {
                let token = row.get::<u64>("token")?;
                Attempted::Acquired {
                    holds: row.get::<u64>("holds")?,
                    token: Some(token),
                    confirmed_at: None,
                    reserved: last.map(|last| Reserved {
                        first: token + 1,
                        last,
                        rivals,
                    }),
                }
            } else {
                let ttl = row.get::<Option<u64>>("ttl_ms")?.map(Duration::from_millis);
                match (row.get::<Option<u64>>("reserved_first")?, last) {
                    (Some(first), Some(last)) => Attempted::Reserved {
                        ttl,
                        reserved: Reserved {
                            first,
                            last,
                            rivals,
                        },
                    },
                    _ => Attempted::Busy { ttl },
                }
            })
        };
        read()
            .map_err(|error| Error::Protocol(format!("postgres: an acquisition's reply: {error}")))
    }

    fn abandon(&self, owner: &str, waited: bool) {
        if !(waited && self.id.kind.marks_waiting()) {
            return;
        }
        let deadline = after(self.shared.call_timeout);
        let withdrawn = self.shared.call(&self.key, deadline, |conn| {
            conn.execute(
                &self.shared.sql.withdraw,
                &[Some(&self.key), Some(owner)],
                deadline,
            )
        });
        if let Err(error) = withdrawn {
            log::debug!(
                "withdrawing a wait for {:?} failed: {error}; its mark lapses within {MARK:?}",
                self.id.name
            );
        }
    }

    /// A hold in the store lapses with its lease, by the database's clock.
    fn ended(&self, _hold: &str, _end: HoldEnd) {}

    /// A release that grants and gets no answer is not sent again: its grant is withdrawn (an
    /// undoing of the granted hold's id, which a grant that has not run yet finds and does not
    /// make), and the waiter settles it by a claim, which excludes the withdrawal.
    fn release(&self, release: &Release<'_>, deadline: Instant) -> ReleaseOutcome {
        let grant = release.grant.as_ref();
        let lease = grant.map_or(0, |grant| grant.lease.as_millis()).to_string();
        let reserve = grant.map_or(0, |grant| grant.reserve).to_string();
        let params = [
            Some(self.key.as_str()),
            Some(release.owner),
            Some(release.hold),
            Some(release.id),
            Some(self.election()),
            Some(grant.map_or("", |grant| grant.owner)),
            Some(grant.map_or("", |grant| grant.hold)),
            Some(lease.as_str()),
            Some(reserve.as_str()),
        ];
        let once = || {
            self.shared.call(&self.key, deadline, |conn| {
                let row = conn.query_one(&self.shared.sql.release, &params, deadline)?;
                let remaining = row.get::<i64>("remaining")?;
                let Some(token) = row.get::<Option<u64>>("token")? else {
                    return Ok(match remaining {
                        -2 => Released::AlreadyApplied,
                        -1 => Released::NotOwner,
                        left => Released::Applied {
                            holds_left: u64::try_from(left).unwrap_or(0),
                        },
                    });
                };
                let rivals = rivals(row.get::<Option<bool>>("rivals")?);
                Ok(Released::Granted {
                    token: Some(token),
                    rivals,
                    reserved: row
                        .get::<Option<u64>>("reserved_last")?
                        .map(|last| Reserved {
                            first: token + 1,
                            last,
                            rivals,
                        }),
                })
            })
        };
        let mut outcome = once();
        let unanswered =
            |outcome: &Result<Released>| matches!(outcome, Err(error) if error.is_unavailable());
        if let (true, Some(grant)) = (unanswered(&outcome), grant) {
            self.undo(grant.owner, grant.hold, deadline);
        } else if unanswered(&outcome) && Instant::now() < deadline {
            log::debug!(
                "release of {:?} got no answer; sending it again",
                self.id.name
            );
            outcome = once();
        }
        ReleaseOutcome {
            settled: !unanswered(&outcome),
            released: outcome,
        }
    }

    fn inspect(&self, deadline: Instant) -> Result<LockState> {
        inspect::inspect(&self.shared, &self.id, &self.key, deadline)
    }

    fn force_release(&self, deadline: Instant) -> Result<bool> {
        self.shared.call(&self.key, deadline, |conn| {
            conn.query_one(
                &self.shared.sql.force_release,
                &[Some(&self.key), Some(self.election())],
                deadline,
            )
            .and_then(|row| row.get::<bool>(0))
        })
    }

    fn resizes(&self) -> Option<&dyn Resizes> {
        matches!(self.id.kind, Kind::Semaphore { .. }).then_some(self as &dyn Resizes)
    }

    fn elects(&self) -> Option<&dyn Elects> {
        (self.id.kind == Kind::Leader).then_some(self as &dyn Elects)
    }

    fn grants(&self) -> Option<&dyn Grants> {
        (self.id.kind == Kind::Lock).then_some(self as &dyn Grants)
    }

    fn latches(&self) -> Option<&dyn Latches> {
        (self.id.kind == Kind::Latch).then_some(self as &dyn Latches)
    }

    /// Every primitive's holds: each is a row of the holds table.
    fn writes(&self) -> Option<&dyn WritesWhileHeld> {
        self.id.kind.holds().then_some(self as &dyn WritesWhileHeld)
    }

    /// A rate limiter's (see `limiter.rs`).
    fn limits(&self) -> Option<&dyn Limits> {
        (self.id.kind == Kind::Limiter).then_some(self as &dyn Limits)
    }
}

impl Grants for PgPlace {
    fn claim_id(&self, hold: &str) -> String {
        format!("{hold}:claimed")
    }

    /// A claim that gets no answer is undone behind itself, so that a claim the server runs
    /// later takes nothing.
    fn settle_grant(&self, owner: &str, hold: &str, deadline: Instant) -> Result<GrantFate> {
        let id = self.claim_id(hold);
        let claimed = self.shared.call(&self.key, deadline, |conn| {
            conn.query_one(
                &self.shared.sql.claim,
                &[Some(&self.key), Some(owner), Some(hold), Some(&id)],
                deadline,
            )
            .and_then(|row| row.get::<Option<u64>>(0))
        });
        match claimed {
            Ok(Some(token)) => Ok(GrantFate::Granted {
                token: Some(token),
                id,
            }),
            Ok(None) => Ok(GrantFate::Withdrawn),
            Err(error) => {
                if error.is_unavailable() {
                    self.undo(owner, &id, deadline);
                }
                Err(error)
            }
        }
    }
}

impl Resizes for PgPlace {
    fn resize(&self, permits: u32, deadline: Instant) -> Result<Option<u32>> {
        let permits = permits.to_string();
        self.shared.call(&self.key, deadline, |conn| {
            conn.query_one(
                &self.shared.sql.resize,
                &[Some(&self.key), Some(&permits)],
                deadline,
            )
            .and_then(|row| row.get::<Option<u32>>(0))
        })
    }
}

impl Elects for PgPlace {
    fn proclaim(&self, owner: &str, hold: &str, value: &str, deadline: Instant) -> Result<bool> {
        self.shared.call(&self.key, deadline, |conn| {
            conn.query_one(
                &self.shared.sql.proclaim,
                &[Some(&self.key), Some(owner), Some(hold), Some(value)],
                deadline,
            )
            .and_then(|row| row.get::<bool>(0))
        })
    }

    /// Observers are woken by the name's announcements, which a proclamation and every end of
    /// a term send, and by the leader's lease lapsing.
    fn leader(&self, _watch: bool, deadline: Instant) -> Result<Option<Leading>> {
        let row = self.shared.call(&self.key, deadline, |conn| {
            conn.query_opt(&self.shared.sql.leader, &[Some(&self.key)], deadline)
        })?;
        let Some(row) = row else {
            return Ok(None);
        };
        let read = || -> postgres_blocking::Result<Option<Leading>> {
            if row
                .get::<Option<&str>>("family")?
                .is_some_and(|family| family != "lock")
            {
                return Ok(None);
            }
            Ok(Some(Leading {
                term: row.get::<u64>("token")?,
                value: row.get::<Option<String>>("proclaimed")?,
                ttl: row.get::<Option<u64>>("ttl_ms")?.map(Duration::from_millis),
            }))
        };
        read().map_err(|error| Error::Protocol(format!("postgres: a leader's row: {error}")))
    }
}
