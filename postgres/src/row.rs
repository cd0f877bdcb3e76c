//! [`Row`]: one row of a result, its values in text format, and the typed getters that parse
//! them ([`FromText`]), each failing with [`Error::Column`] rather than panicking.

use crate::{Error, Result};
use fallible_iterator::FallibleIterator;
use postgres_protocol::message::backend::{DataRowBody, RowDescriptionBody};
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

/// A column of a result: its name and the OID of its type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    name: String,
    type_oid: u32,
}

impl Column {
    /// The column's name (`?column?` for an expression the statement did not name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The OID of the column's type (`pg_type.oid`: 20 is `int8`, 25 `text`, 16 `bool`).
    pub fn type_oid(&self) -> u32 {
        self.type_oid
    }
}

/// The columns a `RowDescription` describes.
pub(crate) fn columns(body: &RowDescriptionBody) -> Result<Arc<[Column]>> {
    let fields: std::result::Result<Vec<Column>, _> = body
        .fields()
        .map(|field| {
            Ok(Column {
                name: field.name().to_owned(),
                type_oid: field.type_oid(),
            })
        })
        .collect();
    fields
        .map(Arc::from)
        .map_err(|error| Error::Protocol(format!("a row description: {error}")))
}

/// One row of a result, its values as the server wrote them in text format.
#[derive(Clone)]
pub struct Row {
    columns: Arc<[Column]>,
    body: DataRowBody,
    ranges: Vec<Option<Range<usize>>>,
}

impl Row {
    /// The row in `body`, of `columns`.
    pub(crate) fn new(columns: Arc<[Column]>, body: DataRowBody) -> Result<Row> {
        let ranges: Vec<_> = body
            .ranges()
            .collect()
            .map_err(|error| Error::Protocol(format!("a data row: {error}")))?;
        if ranges.len() != columns.len() {
            return Err(Error::Protocol(format!(
                "a data row of {} values for {} columns",
                ranges.len(),
                columns.len()
            )));
        }
        Ok(Row {
            columns,
            body,
            ranges,
        })
    }

    /// The row's columns.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// How many values the row has.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Whether the row has no values.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The value of a column (by index from 0, or by name) as the type asked for: `&str`,
    /// `String`, `bool`, the integers, `f32`, `f64`, or `Option` of one of them for a value that
    /// may be NULL.
    ///
    /// # Errors
    ///
    /// [`Error::Column`] for a column the row does not have, a NULL asked for as a type that
    /// is not an `Option`, or a value that does not parse as the type.
    pub fn get<'a, T: FromText<'a>>(&'a self, column: impl ColumnIndex) -> Result<T> {
        let index = self.index(&column)?;
        let text = self.text_at(index)?;
        T::from_text(text).map_err(|reason| Error::Column {
            column: self.columns[index].name.clone(),
            reason,
        })
    }

    /// The text of a column's value (by index or name), `None` for NULL.
    ///
    /// # Errors
    ///
    /// [`Error::Column`] for a column the row does not have, or a value that is not UTF-8.
    pub fn text(&self, column: impl ColumnIndex) -> Result<Option<&str>> {
        let index = self.index(&column)?;
        self.text_at(index)
    }

    fn index(&self, column: &impl ColumnIndex) -> Result<usize> {
        column.find(&self.columns).ok_or_else(|| Error::Column {
            column: column.to_string(),
            reason: format!("no such column among {}", self.columns.len()),
        })
    }

    fn text_at(&self, index: usize) -> Result<Option<&str>> {
        match &self.ranges[index] {
            None => Ok(None),
            Some(range) => std::str::from_utf8(&self.body.buffer()[range.clone()])
                .map(Some)
                .map_err(|_| Error::Column {
                    column: self.columns[index].name.clone(),
                    reason: "the value is not UTF-8".into(),
                }),
        }
    }
}

impl fmt::Debug for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut row = f.debug_map();
        for (index, column) in self.columns.iter().enumerate() {
            row.entry(&column.name, &self.text_at(index).ok().flatten());
        }
        row.finish()
    }
}

/// What names a column of a row: its index from 0 (`usize`) or its name (`&str` or `&String`,
/// the first column of that name).
pub trait ColumnIndex: fmt::Display {
    /// The column's index among `columns`, if there is one.
    fn find(&self, columns: &[Column]) -> Option<usize>;
}

impl ColumnIndex for usize {
    fn find(&self, columns: &[Column]) -> Option<usize> {
        (*self < columns.len()).then_some(*self)
    }
}

impl ColumnIndex for &str {
    fn find(&self, columns: &[Column]) -> Option<usize> {
        columns.iter().position(|column| column.name == *self)
    }
}

impl ColumnIndex for &String {
    fn find(&self, columns: &[Column]) -> Option<usize> {
        ColumnIndex::find(&self.as_str(), columns)
    }
}

/// A type a value's text parses as. `text` is `None` for NULL, which only `Option` accepts.
pub trait FromText<'a>: Sized {
    /// The value, or why the text is not one.
    ///
    /// # Errors
    ///
    /// Why: a NULL where none may be, or text that does not parse.
    fn from_text(text: Option<&'a str>) -> std::result::Result<Self, String>;
}

/// The text of a value that may not be NULL.
fn not_null(text: Option<&str>) -> std::result::Result<&str, String> {
    text.ok_or_else(|| "the value is NULL; ask for an Option".to_owned())
}

impl<'a> FromText<'a> for &'a str {
    fn from_text(text: Option<&'a str>) -> std::result::Result<Self, String> {
        not_null(text)
    }
}

impl FromText<'_> for String {
    fn from_text(text: Option<&str>) -> std::result::Result<Self, String> {
        not_null(text).map(str::to_owned)
    }
}

impl FromText<'_> for bool {
    fn from_text(text: Option<&str>) -> std::result::Result<Self, String> {
        match not_null(text)? {
            "t" | "true" => Ok(true),
            "f" | "false" => Ok(false),
            other => Err(format!("{other:?} is not a boolean (t or f)")),
        }
    }
}

/// `FromText` for types that parse with `str::parse`.
macro_rules! from_text_by_parse {
    ($($type:ty),*) => {$(
        impl FromText<'_> for $type {
            fn from_text(text: Option<&str>) -> std::result::Result<Self, String> {
                let text = not_null(text)?;
                text.parse().map_err(|error| {
                    format!("{text:?} is not a {}: {error}", stringify!($type))
                })
            }
        }
    )*};
}

from_text_by_parse!(i16, i32, i64, u32, u64, f32, f64);

impl<'a, T: FromText<'a>> FromText<'a> for Option<T> {
    fn from_text(text: Option<&'a str>) -> std::result::Result<Self, String> {
        text.map(|text| T::from_text(Some(text))).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_getters_parse_text_and_refuse_what_does_not_fit() {
        assert_eq!(i64::from_text(Some("-42")), Ok(-42));
        assert_eq!(bool::from_text(Some("t")), Ok(true));
        assert_eq!(Option::<i32>::from_text(None), Ok(None));
        assert_eq!(Option::<&str>::from_text(Some("x")), Ok(Some("x")));
        assert!(i64::from_text(None).expect_err("NULL").contains("NULL"));
        assert!(i16::from_text(Some("70000")).is_err());
        assert!(bool::from_text(Some("yes")).is_err());
        assert!(f64::from_text(Some("1.5e3")).is_ok_and(|value| value == 1500.0));
    }
}
