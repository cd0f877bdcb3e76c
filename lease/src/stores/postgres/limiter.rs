//! A rate limiter in PostgreSQL: its row in `limiters` and a window's grants in `grants`, each
//! call one function of the schema (`limiter_take`, `limiter_look`, `limiter_reconfigure`) that
//! takes the limiter's row lock and then reads the database's clock (`clock_timestamp()`), so
//! that the calls on one limiter run one at a time, each judged by the clock after the one
//! before it committed. Commits are synchronous: a grant the server acknowledged survives its
//! crash.

use super::place::PgPlace;
use crate::backend::{Limits, Taken};
use crate::error::{Error, Result};
use crate::rate::{self, store_time, LimiterState, RateLimit};
use postgres_blocking::Row;
use std::time::{Duration, Instant};

impl PgPlace {
    /// The statement `sql` about this limiter, declaring `limit`, with `more` parameters after
    /// it; its one row.
    fn limiter_call(
        &self,
        sql: &str,
        limit: &RateLimit,
        more: &[String],
        deadline: Instant,
    ) -> Result<Row> {
        let (mode, numbers) = limit.wire();
        let mut texts = vec![self.key.clone(), mode.to_owned()];
        texts.extend(numbers.iter().map(u64::to_string));
        texts.extend(more.iter().cloned());
        let params: Vec<Option<&str>> = texts.iter().map(|text| Some(text.as_str())).collect();
        self.shared.call(&self.key, deadline, |conn| {
            conn.query_one(sql, &params, deadline)
        })
    }

    /// The stored limit of a reply's columns `prefix` `mode`, `a`, `b`, `c`, if there is one.
    fn stored_limit(row: &Row, prefix: &str) -> postgres_blocking::Result<Option<RateLimit>> {
        let column = |name: &str| format!("{prefix}{name}");
        let Some(mode) = row.get::<Option<String>>(column("mode").as_str())? else {
            return Ok(None);
        };
        let numbers = [
            row.get::<u64>(column("a").as_str())?,
            row.get::<u64>(column("b").as_str())?,
            row.get::<u64>(column("c").as_str())?,
        ];
        Ok(RateLimit::from_wire(&mode, numbers))
    }
}

/// A reply the crate cannot read, as its error.
fn unreadable(what: &str, error: impl std::fmt::Display) -> Error {
    Error::Protocol(format!("postgres: a rate limiter's {what}: {error}"))
}

impl Limits for PgPlace {
    fn take(&self, limit: &RateLimit, n: u64, deadline: Instant) -> Result<Taken> {
        let sql = &self.shared.sql.limiter_take;
        let row = self.limiter_call(sql, limit, &[n.to_string()], deadline)?;
        let read = || -> postgres_blocking::Result<Option<Taken>> {
            Ok(match row.get::<i32>("outcome")? {
                1 => Some(Taken::Granted {
                    at: row.get::<u64>("at")?,
                    available: row.get::<u64>("available")?,
                }),
                0 => Some(Taken::Wait {
                    wait: Duration::from_micros(row.get::<u64>("wait")?),
                    available: row.get::<u64>("available")?,
                }),
                _ => PgPlace::stored_limit(&row, "s_")?.map(|stored| Taken::Declared { stored }),
            })
        };
        read()
            .map_err(|error| unreadable("take", error))?
            .ok_or_else(|| unreadable("take", "an outcome it does not know"))
    }

    fn reconfigure(&self, limit: &RateLimit, deadline: Instant) -> Result<Option<RateLimit>> {
        let sql = &self.shared.sql.limiter_reconfigure;
        let row = self.limiter_call(sql, limit, &[], deadline)?;
        let read = || -> postgres_blocking::Result<(bool, Option<RateLimit>)> {
            Ok((
                row.get::<bool>("refused")?,
                PgPlace::stored_limit(&row, "s_")?,
            ))
        };
        match read().map_err(|error| unreadable("reconfiguration", error))? {
            (false, before) => Ok(before),
            (true, Some(stored)) => Err(rate::other_mode(&self.id.name, &stored, limit)),
            (true, None) => Err(unreadable("reconfiguration", "a refusal naming no limit")),
        }
    }

    fn meter(&self, limit: &RateLimit, deadline: Instant) -> Result<LimiterState> {
        let sql = &self.shared.sql.limiter_look;
        let row = self.limiter_call(sql, limit, &[], deadline)?;
        let read = || -> postgres_blocking::Result<LimiterState> {
            let next = row.get::<i64>("next_wait")?;
            Ok(LimiterState {
                name: self.id.name.clone(),
                node: Some(self.shared.shown.clone()),
                limit: match row.get::<bool>("stored")? {
                    true => PgPlace::stored_limit(&row, "")?,
                    false => None,
                },
                used: row.get::<u64>("used")?,
                available: row.get::<u64>("available")?,
                next_in: u64::try_from(next).ok().map(Duration::from_micros),
                now: store_time(row.get::<u64>("now")?),
            })
        };
        read().map_err(|error| unreadable("read", error))
    }
}
