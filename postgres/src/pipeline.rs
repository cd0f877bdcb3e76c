//! [`Pipeline`]: statements encoded for the extended query protocol, to send in one round trip,
//! and [`Outcome`], what one statement returned. Every statement uses the unnamed prepared
//! statement and the unnamed portal, so nothing outlives its call on the server: a
//! transaction-mode pooler such as PgBouncer may hand each call to another server connection.

use crate::{Error, Result, Row};
use bytes::BytesMut;
use postgres_protocol::message::frontend;
use postgres_protocol::IsNull;

/// Statements to send in one round trip, each with its parameters in text format (`None` is
/// NULL), as [`Connection::pipeline`](crate::Connection::pipeline) (each statement on its own:
/// one failing leaves the others standing) or
/// [`Connection::pipeline_atomic`](crate::Connection::pipeline_atomic) (all or nothing) run them.
///
/// ```
/// use postgres_blocking::Pipeline;
///
/// let mut renewals = Pipeline::new();
/// for name in ["a", "b"] {
///     renewals.push("UPDATE holds SET expires = now() + $2::interval WHERE name = $1", &[
///         Some(name),
///         Some("30 seconds"),
///     ])?;
/// }
/// assert_eq!(renewals.len(), 2);
/// # Ok::<(), postgres_blocking::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct Pipeline {
    /// Each statement's Parse, Bind, Describe and Execute messages.
    statements: Vec<BytesMut>,
}

impl Pipeline {
    /// An empty pipeline.
    pub fn new() -> Pipeline {
        Pipeline::default()
    }

    /// Adds a statement with its parameters (`$1`, `$2`, ... in `sql`; the server infers their
    /// types, which a cast such as `$1::bigint` states where it cannot).
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`] for a statement holding a NUL byte, or more than 65535 parameters.
    pub fn push(&mut self, sql: &str, params: &[Option<&str>]) -> Result<()> {
        self.statements.push(encode(sql, params)?);
        Ok(())
    }

    /// How many statements it holds.
    pub fn len(&self) -> usize {
        self.statements.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.statements.is_empty()
    }

    /// The messages to send: each statement followed by a `Sync` when `sync_each`, else one
    /// `Sync` after them all.
    pub(crate) fn messages(&self, sync_each: bool) -> BytesMut {
        let mut bytes = BytesMut::new();
        for statement in &self.statements {
            bytes.extend_from_slice(statement);
            if sync_each {
                frontend::sync(&mut bytes);
            }
        }
        if !sync_each {
            frontend::sync(&mut bytes);
        }
        bytes
    }
}

/// A statement's Parse, Bind, Describe (portal) and Execute messages, all unnamed and in text
/// format.
pub(crate) fn encode(sql: &str, params: &[Option<&str>]) -> Result<BytesMut> {
    let unsupported = |why: &str| Error::Unsupported(why.to_owned());
    let mut bytes = BytesMut::new();
    frontend::parse("", sql, None, &mut bytes)
        .map_err(|_| unsupported("a statement holding a NUL byte"))?;
    let bound = frontend::bind(
        "",
        "",
        None,
        params.iter(),
        |param, buffer| match param {
            Some(text) => {
                buffer.extend_from_slice(text.as_bytes());
                Ok(IsNull::No)
            }
            None => Ok(IsNull::Yes),
        },
        None,
        &mut bytes,
    );
    if bound.is_err() {
        return Err(unsupported(
            "more than 65535 parameters, or a value over 2 GiB",
        ));
    }
    frontend::describe(b'P', "", &mut bytes)
        .and_then(|()| frontend::execute("", 0, &mut bytes))
        .map_err(|_| unsupported("a statement that cannot be encoded"))?;
    Ok(bytes)
}

/// What one statement returned: its rows (none for a statement that returns none) and how many
/// rows it affected.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub(crate) rows: Vec<Row>,
    pub(crate) affected: u64,
}

impl Outcome {
    /// The rows returned.
    pub fn rows(&self) -> &[Row] {
        &self.rows
    }

    /// The rows returned, taken.
    pub fn into_rows(self) -> Vec<Row> {
        self.rows
    }

    /// How many rows the statement inserted, updated, deleted, merged, returned (a `SELECT`) or
    /// copied; 0 for the statements that tell no count.
    pub fn rows_affected(&self) -> u64 {
        self.affected
    }
}

/// The row count of a `CommandComplete` tag: its last word, for the commands that give one
/// (`INSERT 0 5`, `UPDATE 3`, `SELECT 2`).
pub(crate) fn rows_affected(tag: &str) -> u64 {
    let mut words = tag.split(' ');
    match words.next() {
        Some("INSERT" | "UPDATE" | "DELETE" | "SELECT" | "MERGE" | "COPY" | "FETCH" | "MOVE") => {
            words.next_back().and_then(|n| n.parse().ok()).unwrap_or(0)
        }
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_is_read_from_the_commands_that_give_one() {
        assert_eq!(rows_affected("INSERT 0 5"), 5);
        assert_eq!(rows_affected("UPDATE 3"), 3);
        assert_eq!(rows_affected("SELECT 12"), 12);
        assert_eq!(rows_affected("CREATE TABLE"), 0);
        assert_eq!(rows_affected("LISTEN"), 0);
    }

    #[test]
    fn a_nul_byte_is_refused_before_anything_is_sent() {
        let mut pipeline = Pipeline::new();
        let error = pipeline.push("SELECT '\0'", &[]).expect_err("a NUL byte");
        assert!(matches!(error, Error::Unsupported(_)), "{error:?}");
        assert!(pipeline.is_empty());
        pipeline.push("SELECT $1", &[None]).expect("fine");
        let each = pipeline.messages(true);
        let once = pipeline.messages(false);
        assert_eq!(each.len(), once.len());
        assert_eq!(each.last(), Some(&4), "ends with a Sync (S, length 4)");
    }
}
