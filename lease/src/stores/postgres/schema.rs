//! The store's tables and functions in the client's schema (`schema.sql`): the statements each
//! call sends, made once per client, and the first use's check that the schema is there and the
//! store can use it, installing it if it is missing.
//!
//! The check reads the tables' columns and the functions' version: a table of another shape (a
//! column missing or of another type) is refused with a message naming it, never misread; a
//! schema of an older version of the store is brought up to date. Installing takes a
//! transaction-scoped advisory lock, so that clients starting together install it once (and it
//! works through a transaction-mode pooler); a role that may not create it is told which right
//! it lacks, and the guide shows the file an administrator runs instead.

use postgres_blocking::{Connection, Error as PgError};
use std::time::Instant;

/// The store's SQL, `@schema@` and `@channel@` to be filled in.
const SCHEMA_SQL: &str = include_str!("schema.sql");

/// The version of the functions this build of the store installs, returned by the schema's
/// `version()`: raised whenever `schema.sql` changes what a function does.
pub(crate) const VERSION: i32 = 7;

/// The columns each table must have, with their types as `information_schema` names them.
const COLUMNS: &[(&str, &[(&str, &str)])] = &[
    (
        "names",
        &[
            ("key", "text"),
            ("fence", "bigint"),
            ("family", "text"),
            ("permits", "integer"),
            ("contended", "boolean"),
        ],
    ),
    (
        "holds",
        &[
            ("key", "text"),
            ("hold", "text"),
            ("owner", "text"),
            ("side", "text"),
            ("take", "integer"),
            ("token", "bigint"),
            ("expires", "timestamp with time zone"),
            ("acquisitions", "ARRAY"),
            ("proclaimed", "text"),
        ],
    ),
    (
        "marks",
        &[
            ("key", "text"),
            ("what", "text"),
            ("owner", "text"),
            ("arrived", "timestamp with time zone"),
            ("lapses", "timestamp with time zone"),
        ],
    ),
    (
        "ended",
        &[
            ("key", "text"),
            ("id", "text"),
            ("how", "text"),
            ("at", "timestamp with time zone"),
        ],
    ),
    (
        "latches",
        &[
            ("key", "text"),
            ("count", "bigint"),
            ("round", "text"),
            ("expires", "timestamp with time zone"),
        ],
    ),
    // Rate limiters.
    (
        "limiters",
        &[
            ("key", "text"),
            ("mode", "text"),
            ("a", "bigint"),
            ("b", "bigint"),
            ("c", "bigint"),
            ("tat", "bigint"),
            ("last", "bigint"),
            ("lapses", "bigint"),
        ],
    ),
    (
        "grants",
        &[("key", "text"), ("at", "bigint"), ("n", "bigint")],
    ),
];

/// The statements a client sends, in its schema.
pub(crate) struct Statements {
    pub(crate) schema: String,
    pub(crate) channel: String,
    pub(crate) acquire: String,
    pub(crate) release: String,
    pub(crate) claim: String,
    pub(crate) undo: String,
    pub(crate) withdraw: String,
    pub(crate) renew: String,
    pub(crate) force_release: String,
    pub(crate) resize: String,
    pub(crate) proclaim: String,
    pub(crate) leader: String,
    pub(crate) name: String,
    pub(crate) holds: String,
    pub(crate) waiting: String,
    pub(crate) identify: String,
    /// A count-down latch's calls, and the check of a hold before a write.
    pub(crate) latches: LatchStatements,
    pub(crate) held: String,
    // Rate limiters.
    pub(crate) limiter_take: String,
    pub(crate) limiter_look: String,
    pub(crate) limiter_reconfigure: String,
}

/// The statements of a count-down latch.
pub(crate) struct LatchStatements {
    pub(crate) set: String,
    pub(crate) down: String,
    pub(crate) read: String,
}

impl Statements {
    /// The statements of the store in `schema` (a checked plain identifier).
    pub(crate) fn new(schema: &str) -> Statements {
        let s = schema;
        Statements {
            schema: schema.to_owned(),
            channel: format!("lease:{schema}"),
            acquire: format!(
                "SELECT acquired, holds, token, ttl_ms, reserved_first, reserved_last, rivals \
                 FROM {s}.acquire($1, $2, $3, $4, $5, $6::bigint, $7::boolean, $8::integer, \
                 $9::integer, $10::integer, $11, $12::integer)"
            ),
            release: format!(
                "SELECT remaining, token, reserved_last, rivals FROM {s}.release($1, $2, $3, $4, \
                 $5::boolean, $6, $7, $8::bigint, $9::integer)"
            ),
            claim: format!("SELECT {s}.claim($1, $2, $3, $4)"),
            undo: format!("SELECT {s}.undo($1, $2, $3, $4::boolean)"),
            withdraw: format!("SELECT {s}.withdraw($1, $2)"),
            renew: format!("SELECT {s}.renew($1::text[], $2::text[], $3::bigint[])"),
            force_release: format!("SELECT {s}.force_release($1, $2::boolean)"),
            resize: format!("SELECT {s}.resize($1, $2::integer)"),
            proclaim: format!("SELECT {s}.proclaim($1, $2, $3, $4)"),
            leader: format!(
                "SELECT token, proclaimed, ceil(extract(epoch FROM expires - clock_timestamp()) \
                 * 1000)::bigint AS ttl_ms, (SELECT family FROM {s}.names WHERE key = $1) AS \
                 family FROM {s}.holds WHERE key = $1 AND expires > clock_timestamp() ORDER BY \
                 token LIMIT 1"
            ),
            name: format!(
                "SELECT fence, family, permits FROM {s}.names WHERE key = $1 AND (family IS NOT \
                 NULL OR fence > 0 OR permits IS NOT NULL)"
            ),
            holds: format!(
                "SELECT owner, cardinality(acquisitions) AS holds, token, ceil(extract(epoch \
                 FROM expires - clock_timestamp()) * 1000)::bigint AS ttl_ms, take, side, \
                 proclaimed FROM {s}.holds WHERE key = $1 AND expires > clock_timestamp() ORDER \
                 BY token"
            ),
            waiting: format!(
                "SELECT count(*) AS waiting FROM {s}.marks WHERE key = $1 AND what = 'fair' AND \
                 lapses > clock_timestamp()"
            ),
            identify: "SELECT pg_postmaster_start_time()::text AS started, \
                       coalesce(inet_server_port(), 0) AS port, current_database() AS db"
                .to_owned(),
            latches: LatchStatements {
                set: format!("SELECT {s}.latch_set($1, $2::bigint, $3, $4::bigint)"),
                down: format!("SELECT {s}.latch_down($1, $2::bigint, $3::bigint)"),
                read: format!(
                    "SELECT count, round, ceil(extract(epoch FROM expires - clock_timestamp()) \
                     * 1000)::bigint AS ttl_ms FROM {s}.latches WHERE key = $1 AND expires > \
                     clock_timestamp()"
                ),
            },
            held: format!("SELECT {s}.held($1, $2, $3)"),
            limiter_take: format!(
                "SELECT * FROM {s}.limiter_take($1, $2, $3::bigint, $4::bigint, $5::bigint, \
                 $6::bigint)"
            ),
            limiter_look: format!(
                "SELECT * FROM {s}.limiter_look($1, $2, $3::bigint, $4::bigint, $5::bigint)"
            ),
            limiter_reconfigure: format!(
                "SELECT * FROM {s}.limiter_reconfigure($1, $2, $3::bigint, $4::bigint, \
                 $5::bigint)"
            ),
        }
    }

    /// The SQL that makes the schema, for this client's schema and channel.
    pub(crate) fn install_sql(&self) -> String {
        SCHEMA_SQL
            .replace("@schema@", &self.schema)
            .replace("@channel@", &quoted(&self.channel))
            .replace(
                "-- @version@",
                &format!(
                    "CREATE OR REPLACE FUNCTION {}.version() RETURNS integer LANGUAGE sql \
                     IMMUTABLE AS 'SELECT {VERSION}';",
                    self.schema
                ),
            )
    }
}

/// `text` as an SQL string literal.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Why the schema cannot be used.
pub(crate) enum Unusable {
    /// A table's shape is not the store's: what is wrong.
    Shape(String),
    /// The call failed.
    Failed(PgError),
}

impl From<PgError> for Unusable {
    fn from(error: PgError) -> Unusable {
        Unusable::Failed(error)
    }
}

/// Makes sure the store's schema is there, of this version, and of the shape it needs,
/// installing (or updating) it if not, all by `deadline`.
pub(crate) fn ensure(
    conn: &mut Connection,
    statements: &Statements,
    deadline: Instant,
) -> Result<(), Unusable> {
    if installed_version(conn, &statements.schema, deadline)? == Some(VERSION) {
        return check_shape(conn, &statements.schema, Tables::All, deadline);
    }
    check_shape(conn, &statements.schema, Tables::Present, deadline)?;
    let sql = format!(
        "BEGIN; SELECT pg_advisory_xact_lock(hashtext({})); {} COMMIT;",
        quoted(&format!("lease schema {}", statements.schema)),
        statements.install_sql()
    );
    conn.batch_execute(&sql, deadline)?;
    check_shape(conn, &statements.schema, Tables::All, deadline)
}

/// Which tables a shape check looks at.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tables {
    /// Every table of the store: each must be there.
    All,
    /// Those present, before the missing ones are made.
    Present,
}

/// The version of the functions installed in `schema`, if they are.
fn installed_version(
    conn: &mut Connection,
    schema: &str,
    deadline: Instant,
) -> Result<Option<i32>, PgError> {
    let row = conn.query_one(
        "SELECT EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
         WHERE n.nspname = $1 AND p.proname = 'version' AND p.pronargs = 0) AS present",
        &[Some(schema)],
        deadline,
    )?;
    if !row.get::<bool>("present")? {
        return Ok(None);
    }
    let row = conn.query_one(&format!("SELECT {schema}.version() AS v"), &[], deadline)?;
    Ok(Some(row.get::<i32>("v")?))
}

/// Checks that every table of the store in `schema` (or every one present) has the columns it
/// needs, of their types.
fn check_shape(
    conn: &mut Connection,
    schema: &str,
    tables: Tables,
    deadline: Instant,
) -> Result<(), Unusable> {
    let rows = conn.query(
        "SELECT table_name, column_name, data_type FROM information_schema.columns WHERE \
         table_schema = $1",
        &[Some(schema)],
        deadline,
    )?;
    let mut found = Vec::with_capacity(rows.len());
    for row in &rows {
        found.push((
            row.get::<String>("table_name")?,
            row.get::<String>("column_name")?,
            row.get::<String>("data_type")?,
        ));
    }
    for (table, columns) in COLUMNS {
        let present = found.iter().any(|(t, _, _)| t == table);
        if tables == Tables::Present && !present {
            continue;
        }
        for (column, wanted) in *columns {
            let has = found
                .iter()
                .find(|(t, c, _)| t == table && c == column)
                .map(|(_, _, kind)| kind.as_str());
            match has {
                Some(kind) if kind == *wanted => {}
                Some(kind) => {
                    return Err(Unusable::Shape(format!(
                        "column {schema}.{table}.{column} is of type {kind}, where the store \
                         needs {wanted}"
                    )))
                }
                None => {
                    return Err(Unusable::Shape(format!(
                        "table {schema}.{table} has no column {column} ({wanted}), which the \
                         store needs"
                    )))
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_installed_sql_names_the_schema_and_channel_and_its_version() {
        let sql = Statements::new("app_locks").install_sql();
        assert!(!sql.contains("@schema@") && !sql.contains("@channel@"));
        assert!(sql.contains("CREATE TABLE IF NOT EXISTS app_locks.holds"));
        assert!(sql.contains("pg_notify('lease:app_locks', p_key)"));
        assert!(sql.contains("app_locks.version() RETURNS integer"));
    }
}
