//! Reading the answers to what was sent, up to the `ReadyForQuery` that ends them: for each
//! statement its rows and count, or the server's error. The same reading serves the extended
//! protocol (a `Sync` ends a group of statements; after an error the server skips the rest of
//! the group) and the simple one (a query string of several statements; an error ends it).
//!
//! Anything the protocol does not allow where it comes closes the connection (through the
//! session), as does `COPY ... FROM STDIN`, whose server would wait for data that never comes.

use crate::pipeline::{rows_affected, Outcome};
use crate::row::{self, Column};
use crate::session::Session;
use crate::{DbError, Error, Result, Row};
use postgres_protocol::message::backend::Message;
use std::sync::Arc;

/// The answers up to the next `ReadyForQuery`: one entry per statement that ran or failed (the
/// statements skipped after a failure have none).
pub(crate) fn read_group(session: &mut Session) -> Result<Vec<Result<Outcome, DbError>>> {
    let mut answers = Vec::new();
    let mut columns: Arc<[Column]> = Arc::from(Vec::new());
    let mut rows = Vec::new();
    loop {
        match session.next()? {
            Message::ParseComplete | Message::BindComplete | Message::NoData => {}
            Message::RowDescription(body) => match row::columns(&body) {
                Ok(described) => columns = described,
                Err(error) => return session.fail(error),
            },
            Message::DataRow(body) => match Row::new(Arc::clone(&columns), body) {
                Ok(row) => rows.push(row),
                Err(error) => return session.fail(error),
            },
            Message::CommandComplete(body) => {
                let Ok(tag) = body.tag() else {
                    return session.fail(Error::Protocol("a command tag that is not UTF-8".into()));
                };
                answers.push(Ok(Outcome {
                    rows: std::mem::take(&mut rows),
                    affected: rows_affected(tag),
                }));
            }
            Message::EmptyQueryResponse => answers.push(Ok(Outcome::default())),
            Message::ErrorResponse(body) => {
                let error = session.db_error(&body)?;
                if !session.is_open() {
                    return Err(Error::Db(Box::new(error)));
                }
                rows.clear();
                answers.push(Err(error));
            }
            // The rows of a `COPY ... TO STDOUT` are not kept.
            Message::CopyOutResponse(_) | Message::CopyData(_) | Message::CopyDone => {}
            Message::CopyInResponse(_) => {
                return session.fail(Error::Unsupported(
                    "COPY ... FROM STDIN (the connection is closed)".into(),
                ))
            }
            Message::ReadyForQuery(body) => {
                session.ready(body.status())?;
                return Ok(answers);
            }
            _ => {
                return session.fail(Error::Protocol(
                    "a message that does not belong in a statement's answer".into(),
                ))
            }
        }
    }
}
