//! A count-down latch in PostgreSQL: a row of the store's `latches` table (its count, its round
//! and when it lapses, by the database's clock), changed by the schema's `latch_set` and
//! `latch_down` in one round trip each; the last count-down notifies the latch's waiters on the
//! store's channel, with the latch's key.

use super::place::PgPlace;
use crate::backend::{LatchRead, Latches, LATCH_KEPT_OPEN};
use crate::error::{Error, Result};
use std::time::{Duration, Instant};

impl Latches for PgPlace {
    fn set_count(
        &self,
        count: u32,
        round: &str,
        expiry: Duration,
        deadline: Instant,
    ) -> Result<bool> {
        let (count, expiry) = (count.to_string(), expiry.as_millis().to_string());
        let params = [
            Some(self.key.as_str()),
            Some(&count),
            Some(round),
            Some(&expiry),
        ];
        self.shared.call(&self.key, deadline, |conn| {
            conn.query_one(&self.shared.sql.latches.set, &params, deadline)
                .and_then(|row| row.get::<bool>(0))
        })
    }

    fn count_down(&self, expiry: Duration, deadline: Instant) -> Result<u32> {
        let kept = expiry.max(LATCH_KEPT_OPEN).as_millis().to_string();
        let expiry = expiry.as_millis().to_string();
        let params = [Some(self.key.as_str()), Some(&expiry), Some(&kept)];
        let left = self.shared.call(&self.key, deadline, |conn| {
            conn.query_one(&self.shared.sql.latches.down, &params, deadline)
                .and_then(|row| row.get::<i64>(0))
        })?;
        u32::try_from(left)
            .map_err(|_| Error::Protocol(format!("postgres: a latch's count of {left}")))
    }

    /// Waiters are woken by the store's channel, which the last count-down notifies.
    fn read(&self, _watch: bool, deadline: Instant) -> Result<LatchRead> {
        let row = self.shared.call(&self.key, deadline, |conn| {
            conn.query_opt(&self.shared.sql.latches.read, &[Some(&self.key)], deadline)
        })?;
        let Some(row) = row else {
            return Ok(LatchRead::absent());
        };
        let read = || -> postgres_blocking::Result<LatchRead> {
            Ok(LatchRead {
                count: row.get::<u32>("count")?,
                round: Some(row.get::<String>("round")?),
                ttl: row.get::<Option<u64>>("ttl_ms")?.map(Duration::from_millis),
            })
        };
        read().map_err(|error| Error::Protocol(format!("postgres: a latch's row: {error}")))
    }
}
