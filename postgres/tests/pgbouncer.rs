//! The same calls through PgBouncer in transaction pooling mode, where consecutive transactions
//! may run on different server connections: nothing may rest on session state.

mod common;

use common::{connect, soon};
use postgres_blocking::{Pipeline, TransactionStatus};
use testkit::{PgBouncer, PgServer};

#[test]
fn queries_errors_and_pipelines_work_through_pgbouncer_in_transaction_mode() {
    let pg = PgServer::start();
    let bouncer = PgBouncer::start(&pg);
    let mut admin = connect(&pg.scram_url());
    admin
        .batch_execute("CREATE TABLE holds (name text PRIMARY KEY, n int8)", soon())
        .expect("made");
    let mut conn = connect(&bouncer.scram_url());
    for round in 0..20 {
        let row = conn
            .query_one(
                "SELECT $1::int8 * 2, $2::text",
                &[Some(&round.to_string()), None],
                soon(),
            )
            .expect("a row");
        assert_eq!(row.get::<i64>(0).expect("int8"), round * 2);
        assert_eq!(row.get::<Option<&str>>(1).expect("NULL"), None);
    }
    conn.execute("INSERT INTO holds VALUES ($1, 1)", &[Some("a")], soon())
        .expect("inserted");
    let error = conn
        .execute("INSERT INTO holds VALUES ($1, 1)", &[Some("a")], soon())
        .expect_err("a duplicate");
    assert_eq!(error.code(), Some("23505"));
    assert!(conn.is_usable());

    let mut renewals = Pipeline::new();
    renewals
        .push("UPDATE holds SET n = n + 1 WHERE name = $1", &[Some("a")])
        .expect("encoded");
    renewals
        .push("INSERT INTO holds VALUES ($1, 1)", &[Some("a")])
        .expect("encoded");
    renewals
        .push("INSERT INTO holds VALUES ($1, 1)", &[Some("b")])
        .expect("encoded");
    let outcomes = conn.pipeline(&renewals, soon()).expect("one round trip");
    assert_eq!(outcomes[0].as_ref().expect("renewed").rows_affected(), 1);
    assert_eq!(
        outcomes[1].as_ref().expect_err("a duplicate").code(),
        Some("23505")
    );
    assert_eq!(outcomes[2].as_ref().expect("inserted").rows_affected(), 1);

    let mut all_or_nothing = Pipeline::new();
    all_or_nothing
        .push("UPDATE holds SET n = n + 10", &[])
        .expect("encoded");
    all_or_nothing
        .push("INSERT INTO holds VALUES ($1, 1)", &[Some("b")])
        .expect("encoded");
    let error = conn
        .pipeline_atomic(&all_or_nothing, soon())
        .expect_err("a duplicate");
    assert_eq!(error.code(), Some("23505"));
    assert_eq!(conn.transaction_status(), TransactionStatus::Idle);
    let sum = admin
        .query_one("SELECT sum(n) FROM holds", &[], soon())
        .expect("a row")
        .get::<i64>(0)
        .expect("a sum");
    assert_eq!(sum, 3, "a: 2, b: 1, and nothing of the failed batch");
    conn.ping(soon()).expect("a ping");
    conn.batch_execute("SELECT 1; SELECT 2", soon())
        .expect("the simple protocol");
}

#[test]
fn a_cancel_request_through_pgbouncer_ends_a_running_statement() {
    let pg = PgServer::start();
    let bouncer = PgBouncer::start(&pg);
    let mut conn = connect(&bouncer.scram_url());
    let token = conn.cancel_token().expect("PgBouncer's key");
    let sleeper = std::thread::spawn(move || {
        let result = conn.query(
            "SELECT pg_sleep(60)",
            &[],
            soon() + std::time::Duration::from_secs(20),
        );
        (result.map(|_| ()), conn)
    });
    let running = "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(60)' \
                   AND state = 'active'";
    testkit::wait_until(
        "the statement runs",
        std::time::Duration::from_secs(10),
        || pg.psql(running).is_ok_and(|count| count.trim() == "1"),
    );
    token.cancel(soon()).expect("taken");
    let (result, mut conn) = sleeper.join().expect("the sleeper");
    assert_eq!(result.expect_err("cancelled").code(), Some("57014"));
    conn.ping(soon()).expect("the session goes on");
}

#[test]
fn pipelines_of_clients_side_by_side_each_get_their_own_answers() {
    let pg = PgServer::start();
    // Four clients over two server connections: their transactions share them.
    let bouncer = PgBouncer::start_with_pool_size(&pg, 2);
    let clients: Vec<_> = (0..4)
        .map(|client| {
            let url = bouncer.scram_url();
            std::thread::spawn(move || {
                let mut conn = connect(&url);
                let mut servers = std::collections::BTreeSet::new();
                for round in 0..50 {
                    let mut pipeline = Pipeline::new();
                    let tags: Vec<String> =
                        (0..8).map(|n| format!("{client}-{round}-{n}")).collect();
                    for tag in &tags {
                        pipeline
                            .push("SELECT $1::text, pg_backend_pid()", &[Some(tag)])
                            .expect("encoded");
                    }
                    let outcomes = conn.pipeline(&pipeline, soon()).expect("a round trip");
                    let mut got = Vec::new();
                    for outcome in outcomes {
                        let rows = outcome.expect("a row").into_rows();
                        let row = &rows[0];
                        got.push(row.get::<String>(0).expect("text"));
                        servers.insert(row.get::<i32>(1).expect("a pid"));
                    }
                    assert_eq!(got, tags);
                }
                servers
            })
        })
        .collect();
    let mut servers = std::collections::BTreeSet::new();
    for client in clients {
        servers.extend(client.join().expect("a client"));
    }
    // Four clients, at most two server processes: some served several clients.
    assert!(servers.len() <= 2, "{servers:?}");
}
