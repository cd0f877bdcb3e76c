//! Writes made only while a hold holds, in PostgreSQL: the schema's `held` check and the
//! caller's statement in one transaction (one round trip, all or nothing). The check takes the
//! name's row lock, which every call that could end the hold or begin another takes too, until
//! the transaction commits.

use super::errors::NOT_HELD;
use super::place::PgPlace;
use crate::backend::WritesWhileHeld;
use crate::error::{Error, Result};
use crate::write::{wrong_kind, Write, Written};
use postgres_blocking::Pipeline;
use std::time::Instant;

impl WritesWhileHeld for PgPlace {
    fn if_held(
        &self,
        owner: &str,
        hold: &str,
        write: &Write,
        deadline: Instant,
    ) -> Result<Option<Written>> {
        #[allow(unreachable_patterns)] // other kinds exist with the other stores' features
        let (statement, params) = match write {
            Write::Sql { statement, params } => (statement, params),
            other => return Err(wrong_kind(other, &self.shared.shown, "SQL statements")),
        };
        let mut pipeline = Pipeline::new();
        let refused = |error: postgres_blocking::Error| {
            Error::InvalidArgument(format!("a write's statement cannot be sent: {error}"))
        };
        pipeline
            .push(
                &self.shared.sql.held,
                &[Some(self.key.as_str()), Some(owner), Some(hold)],
            )
            .map_err(refused)?;
        let params: Vec<Option<&str>> = params.iter().map(Option::as_deref).collect();
        pipeline.push(statement, &params).map_err(refused)?;
        self.shared.ensure_schema(deadline)?;
        let outcomes = match self
            .shared
            .pool
            .call(deadline, |conn| conn.pipeline_atomic(&pipeline, deadline))
        {
            Ok(outcomes) => outcomes,
            Err(error) if error.code() == Some(NOT_HELD) => return Ok(None),
            Err(error) => return Err(self.shared.error(error, &self.key)),
        };
        let Some(outcome) = outcomes.into_iter().nth(1) else {
            return Err(Error::Protocol(
                "postgres: a write while held answered without its statement".into(),
            ));
        };
        let rows = outcome
            .rows()
            .iter()
            .map(|row| {
                (0..row.len())
                    .map(|column| row.text(column).map(|text| text.map(str::to_owned)))
                    .collect::<postgres_blocking::Result<Vec<_>>>()
            })
            .collect::<postgres_blocking::Result<Vec<_>>>()
            .map_err(|error| Error::Protocol(format!("postgres: a write's rows: {error}")))?;
        Ok(Some(Written::Sql {
            rows_affected: outcome.rows_affected(),
            rows,
        }))
    }
}
