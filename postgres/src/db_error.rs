//! [`DbError`]: an error or notice the server sent, field by field (`ErrorResponse` and
//! `NoticeResponse` carry the same fields).

use fallible_iterator::FallibleIterator;
use postgres_protocol::message::backend::ErrorFields;
use std::fmt;

/// An error the server sent: its SQLSTATE code, severity and message, and the other fields it
/// gave. Notices have the same shape, and are logged (see the crate's documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbError {
    severity: String,
    code: String,
    message: String,
    detail: Option<String>,
    hint: Option<String>,
    position: Option<u32>,
    where_: Option<String>,
    schema: Option<String>,
    table: Option<String>,
    column: Option<String>,
    datatype: Option<String>,
    constraint: Option<String>,
    statement: Option<usize>,
}

impl DbError {
    /// The fields of an `ErrorResponse` or a `NoticeResponse`; `Err` with the reason for a body
    /// that is not a list of fields.
    pub(crate) fn parse(mut fields: ErrorFields<'_>) -> Result<DbError, String> {
        let mut error = DbError {
            severity: String::new(),
            code: String::new(),
            message: String::new(),
            detail: None,
            hint: None,
            position: None,
            where_: None,
            schema: None,
            table: None,
            column: None,
            datatype: None,
            constraint: None,
            statement: None,
        };
        let mut localized_severity = None;
        while let Some(field) = fields
            .next()
            .map_err(|e| format!("an error's fields: {e}"))?
        {
            let value = String::from_utf8_lossy(field.value_bytes()).into_owned();
            match field.type_() {
                b'V' => error.severity = value,
                b'S' => localized_severity = Some(value),
                b'C' => error.code = value,
                b'M' => error.message = value,
                b'D' => error.detail = Some(value),
                b'H' => error.hint = Some(value),
                b'P' => error.position = value.parse().ok(),
                b'W' => error.where_ = Some(value),
                b's' => error.schema = Some(value),
                b't' => error.table = Some(value),
                b'c' => error.column = Some(value),
                b'd' => error.datatype = Some(value),
                b'n' => error.constraint = Some(value),
                _ => {}
            }
        }
        if error.severity.is_empty() {
            error.severity = localized_severity.unwrap_or_default();
        }
        if error.code.is_empty() || error.severity.is_empty() {
            return Err("an error without a code or a severity".into());
        }
        Ok(error)
    }

    /// This error, as the failure of the statement at `index` of a pipeline.
    pub(crate) fn in_statement(mut self, index: usize) -> DbError {
        self.statement = Some(index);
        self
    }

    /// The severity, not localized: `ERROR`, `FATAL` or `PANIC` (or, for a notice, `WARNING`,
    /// `NOTICE`, `DEBUG`, `INFO`, `LOG`).
    pub fn severity(&self) -> &str {
        &self.severity
    }

    /// The SQLSTATE code, such as `23505` (unique violation) or `40001` (serialization failure).
    pub fn code(&self) -> &str {
        &self.code
    }

    /// The primary message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The detail, if the server gave one.
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }

    /// The hint, if the server gave one.
    pub fn hint(&self) -> Option<&str> {
        self.hint.as_deref()
    }

    /// Where in the statement's text the error is, in characters from 1.
    pub fn position(&self) -> Option<u32> {
        self.position
    }

    /// The context: a call stack of functions, for example.
    pub fn where_(&self) -> Option<&str> {
        self.where_.as_deref()
    }

    /// The schema of the object the error is about.
    pub fn schema(&self) -> Option<&str> {
        self.schema.as_deref()
    }

    /// The table the error is about.
    pub fn table(&self) -> Option<&str> {
        self.table.as_deref()
    }

    /// The column the error is about.
    pub fn column(&self) -> Option<&str> {
        self.column.as_deref()
    }

    /// The data type the error is about.
    pub fn datatype(&self) -> Option<&str> {
        self.datatype.as_deref()
    }

    /// The constraint the error is about.
    pub fn constraint(&self) -> Option<&str> {
        self.constraint.as_deref()
    }

    /// In a pipeline run as one transaction, the index of the statement that failed.
    pub fn statement(&self) -> Option<usize> {
        self.statement
    }

    /// Whether the server ended the session with this error (`FATAL` or `PANIC`).
    pub fn is_fatal(&self) -> bool {
        matches!(self.severity.as_str(), "FATAL" | "PANIC")
    }
}

impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.severity, self.code, self.message)?;
        if let Some(index) = self.statement {
            write!(f, " (statement {index} of the pipeline)")?;
        }
        if let Some(detail) = &self.detail {
            write!(f, "; detail: {detail}")?;
        }
        if let Some(hint) = &self.hint {
            write!(f, "; hint: {hint}")?;
        }
        Ok(())
    }
}

impl std::error::Error for DbError {}
