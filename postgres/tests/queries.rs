//! Statements: parameters and NULLs, text results and typed getters, the server's errors (the
//! connection usable after them), pipelines each way, and the simple protocol.

mod common;

use common::{connect, soon};
use postgres_blocking::{Error, Pipeline, TransactionStatus};
use testkit::PgServer;

#[test]
fn parameters_nulls_and_typed_getters() {
    let pg = PgServer::start();
    let mut conn = connect(&pg.scram_url());
    let row = conn
        .query_one(
            "SELECT $1::int8 + 1 AS next, $2::text AS nothing, $3::bool AS yes, \
             'héllo'::text AS word, 2.5::float8 AS half, NULL::int4 AS missing",
            &[Some("41"), None, Some("true")],
            soon(),
        )
        .expect("a row");
    assert_eq!(row.len(), 6);
    assert_eq!(row.columns()[0].name(), "next");
    assert_eq!(row.columns()[0].type_oid(), 20);
    assert_eq!(row.get::<i64>("next").expect("int8"), 42);
    assert_eq!(row.get::<i32>(0).expect("fits an i32"), 42);
    assert_eq!(row.get::<Option<&str>>("nothing").expect("NULL"), None);
    assert!(row.get::<bool>("yes").expect("bool"));
    assert_eq!(row.get::<&str>("word").expect("text"), "héllo");
    assert_eq!(row.get::<String>(3).expect("text"), "héllo");
    assert_eq!(row.get::<f64>("half").expect("float8"), 2.5);
    assert_eq!(row.get::<Option<i32>>("missing").expect("NULL"), None);
    assert_eq!(row.text("next").expect("text"), Some("42"));

    // A typed getter fails with a typed error, never a panic.
    let null = row.get::<i32>("missing").expect_err("NULL into an i32");
    assert!(
        matches!(&null, Error::Column { column, .. } if column == "missing"),
        "{null:?}"
    );
    let text = row.get::<i64>("word").expect_err("text into an i64");
    assert!(matches!(text, Error::Column { .. }), "{text:?}");
    let absent = row
        .get::<i64>("no_such_column")
        .expect_err("no such column");
    assert!(matches!(absent, Error::Column { .. }), "{absent:?}");
    let beyond = row.get::<i64>(17).expect_err("no such index");
    assert!(matches!(beyond, Error::Column { .. }), "{beyond:?}");
}

#[test]
fn rows_counts_and_the_one_row_helpers() {
    let pg = PgServer::start();
    let mut conn = connect(&pg.scram_url());
    conn.batch_execute(
        "CREATE TABLE items (id int8 PRIMARY KEY, name text); \
         INSERT INTO items VALUES (1, 'a'), (2, NULL)",
        soon(),
    )
    .expect("made");
    let inserted = conn
        .execute(
            "INSERT INTO items SELECT g, 'x' FROM generate_series(3, 7) g",
            &[],
            soon(),
        )
        .expect("inserted");
    assert_eq!(inserted, 5);
    let updated = conn
        .execute(
            "UPDATE items SET name = $1 WHERE id > $2",
            &[Some("y"), Some("5")],
            soon(),
        )
        .expect("updated");
    assert_eq!(updated, 2);
    let rows = conn
        .query("SELECT id, name FROM items ORDER BY id", &[], soon())
        .expect("rows");
    assert_eq!(rows.len(), 7);
    assert_eq!(rows[1].get::<Option<String>>("name").expect("NULL"), None);
    let none = conn
        .query_opt("SELECT id FROM items WHERE id = $1", &[Some("99")], soon())
        .expect("no row");
    assert!(none.is_none());
    let many = conn
        .query_one("SELECT id FROM items", &[], soon())
        .expect_err("seven rows");
    assert!(matches!(many, Error::RowCount { got: 7, .. }), "{many:?}");
    assert!(conn.is_usable());
}

#[test]
fn a_server_error_keeps_its_sqlstate_and_the_connection_goes_on() {
    let pg = PgServer::start();
    let mut conn = connect(&pg.scram_url());
    conn.batch_execute("CREATE TABLE names (name text PRIMARY KEY)", soon())
        .expect("made");
    conn.execute("INSERT INTO names VALUES ($1)", &[Some("a")], soon())
        .expect("inserted");
    let error = conn
        .execute("INSERT INTO names VALUES ($1)", &[Some("a")], soon())
        .expect_err("a duplicate");
    assert_eq!(error.code(), Some("23505"), "{error:?}");
    let db = error.db_error().expect("the server's error");
    assert_eq!(db.severity(), "ERROR");
    assert_eq!(db.table(), Some("names"));
    assert_eq!(db.constraint(), Some("names_pkey"));
    assert!(db
        .detail()
        .is_some_and(|detail| detail.contains("(name)=(a)")));
    assert!(!error.is_retryable() && !error.is_connection_lost());
    let syntax = conn.query("SELEKT 1", &[], soon()).expect_err("a typo");
    assert_eq!(syntax.code(), Some("42601"));
    assert!(conn.is_usable());
    let row = conn
        .query_one("SELECT count(*) FROM names", &[], soon())
        .expect("a row");
    assert_eq!(row.get::<i64>(0).expect("a count"), 1);

    // In a transaction block, the failure shows in the status until ROLLBACK.
    conn.batch_execute("BEGIN", soon()).expect("begun");
    assert_eq!(conn.transaction_status(), TransactionStatus::InTransaction);
    let _ = conn
        .execute("INSERT INTO names VALUES ('a')", &[], soon())
        .expect_err("dup");
    assert_eq!(conn.transaction_status(), TransactionStatus::Failed);
    conn.batch_execute("ROLLBACK", soon()).expect("rolled back");
    assert_eq!(conn.transaction_status(), TransactionStatus::Idle);
}

#[test]
fn a_pipeline_runs_each_statement_on_its_own_and_one_failure_leaves_the_others() {
    let pg = PgServer::start();
    let mut conn = connect(&pg.scram_url());
    conn.batch_execute("CREATE TABLE holds (name text PRIMARY KEY, n int8)", soon())
        .expect("made");
    let mut pipeline = Pipeline::new();
    pipeline
        .push("INSERT INTO holds VALUES ($1, 1)", &[Some("a")])
        .expect("encoded");
    pipeline
        .push("INSERT INTO holds VALUES ($1, 1)", &[Some("a")])
        .expect("encoded");
    pipeline
        .push("INSERT INTO holds VALUES ($1, $2)", &[Some("b"), Some("2")])
        .expect("encoded");
    pipeline
        .push("SELECT name, n FROM holds ORDER BY name", &[])
        .expect("encoded");
    let outcomes = conn.pipeline(&pipeline, soon()).expect("the round trip");
    assert_eq!(outcomes.len(), 4);
    assert_eq!(
        outcomes[0].as_ref().expect("first insert").rows_affected(),
        1
    );
    let duplicate = outcomes[1].as_ref().expect_err("a duplicate");
    assert_eq!(duplicate.code(), Some("23505"));
    assert_eq!(
        outcomes[2].as_ref().expect("third insert").rows_affected(),
        1
    );
    let rows = outcomes[3].as_ref().expect("the select").rows();
    let names: Vec<&str> = rows
        .iter()
        .map(|row| row.get("name").expect("text"))
        .collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(conn.transaction_status(), TransactionStatus::Idle);
}

#[test]
fn an_atomic_pipeline_is_all_or_nothing() {
    let pg = PgServer::start();
    let mut conn = connect(&pg.scram_url());
    conn.batch_execute("CREATE TABLE holds (name text PRIMARY KEY)", soon())
        .expect("made");
    let mut failing = Pipeline::new();
    failing
        .push("INSERT INTO holds VALUES ($1)", &[Some("a")])
        .expect("encoded");
    failing
        .push("INSERT INTO holds VALUES ($1)", &[Some("a")])
        .expect("encoded");
    failing
        .push("INSERT INTO holds VALUES ($1)", &[Some("b")])
        .expect("encoded");
    let error = conn
        .pipeline_atomic(&failing, soon())
        .expect_err("a duplicate");
    assert_eq!(error.code(), Some("23505"));
    assert_eq!(error.db_error().and_then(|db| db.statement()), Some(1));
    let count = |conn: &mut postgres_blocking::Connection| {
        conn.query_one("SELECT count(*) FROM holds", &[], soon())
            .expect("a row")
            .get::<i64>(0)
            .expect("a count")
    };
    assert_eq!(count(&mut conn), 0, "nothing stays of a failed batch");

    // The same with the transaction written out: rolled back in the same call.
    let mut explicit = Pipeline::new();
    explicit.push("BEGIN", &[]).expect("encoded");
    explicit
        .push("INSERT INTO holds VALUES ($1)", &[Some("c")])
        .expect("encoded");
    explicit
        .push("INSERT INTO holds VALUES ($1)", &[Some("c")])
        .expect("encoded");
    explicit.push("COMMIT", &[]).expect("encoded");
    let error = conn
        .pipeline_atomic(&explicit, soon())
        .expect_err("a duplicate");
    assert_eq!(error.db_error().and_then(|db| db.statement()), Some(2));
    assert_eq!(conn.transaction_status(), TransactionStatus::Idle);
    assert_eq!(count(&mut conn), 0);

    let mut fine = Pipeline::new();
    fine.push("INSERT INTO holds VALUES ($1)", &[Some("a")])
        .expect("encoded");
    fine.push("INSERT INTO holds VALUES ($1)", &[Some("b")])
        .expect("encoded");
    fine.push("SELECT count(*) FROM holds", &[])
        .expect("encoded");
    let outcomes = conn.pipeline_atomic(&fine, soon()).expect("all of them");
    assert_eq!(outcomes.len(), 3);
    assert_eq!(outcomes[2].rows()[0].get::<i64>(0).expect("a count"), 2);
    assert_eq!(count(&mut conn), 2);
}

#[test]
fn the_simple_protocol_runs_several_statements_and_stops_at_an_error() {
    let pg = PgServer::start();
    let mut conn = connect(&pg.scram_url());
    conn.batch_execute("CREATE TABLE t (n int); INSERT INTO t VALUES (1); ", soon())
        .expect("ran");
    let error = conn
        .batch_execute(
            "INSERT INTO t VALUES (2); SELECT 1/0; INSERT INTO t VALUES (3)",
            soon(),
        )
        .expect_err("a division by zero");
    assert_eq!(error.code(), Some("22012"));
    // The statements of one query string form one implicit transaction.
    let row = conn
        .query_one("SELECT count(*) FROM t", &[], soon())
        .expect("a row");
    assert_eq!(row.get::<i64>(0).expect("a count"), 1);
    conn.batch_execute("", soon()).expect("an empty query");
    let late = conn
        .query(
            "SELECT 1",
            &[],
            std::time::Instant::now() - std::time::Duration::from_millis(1),
        )
        .expect_err("a deadline already past");
    assert!(
        late.is_timeout() && conn.is_usable(),
        "nothing was sent: {late:?}"
    );
    let name = String::from("n");
    let row = conn.query_one("SELECT 5 AS n", &[], soon()).expect("a row");
    assert_eq!(row.get::<i32>(&name).expect("by a String's name"), 5);
    conn.ping(soon()).expect("a ping");
    let copy = conn
        .batch_execute("COPY t FROM STDIN", soon())
        .expect_err("no COPY IN");
    assert!(matches!(copy, Error::Unsupported(_)), "{copy:?}");
    assert!(!conn.is_usable());
    let closed = conn.ping(soon()).expect_err("closed");
    assert!(matches!(closed, Error::Closed), "{closed:?}");
}
