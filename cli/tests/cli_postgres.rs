//! The `lease` tool on a real PostgreSQL, chosen by a `postgres://` URL: runs on one name never
//! overlap and their tokens rise, the password comes from a file or the environment, `status`
//! names the holder and `unlock --force` stops it, `--pg-schema` keeps the tables apart, a wrong
//! password and a silent server keep their exit codes, each store's options are refused on the
//! others, and through PgBouncer in transaction mode `--pg-listen-url` carries the waiters'
//! wake-ups.

mod pg;
mod tool;

use pg::{lease, server};
use std::fs;
use std::process::Child;
use std::time::Duration;
use testkit::{PgBouncer, PgServer};
use tool::{
    closed_port, finish, one_run_at_a_time, output, scratch, shell, spawn, stderr_of, stdout_of,
};

const USAGE: i32 = 64;
const UNAVAILABLE: i32 = 69;
const REFUSED: i32 = 78;
const LOST: i32 = 79;

/// The password user's URL without its password, which the tool is then given apart.
fn url_without_password(server: &PgServer) -> String {
    format!(
        "postgres://{}@127.0.0.1:{}/postgres",
        PgServer::SCRAM_USER,
        server.port()
    )
}

#[test]
fn runs_on_one_name_never_overlap_and_their_tokens_rise() {
    let server = server();
    let url = url_without_password(&server);
    let (dir, stamps) = scratch("stamps");
    let password_file = dir.path().join("password");
    fs::write(&password_file, format!("{}\n", PgServer::SCRAM_PASSWORD)).expect("written");
    let script = "echo start $LEASE_TOKEN >> FILE; sleep 0.2; echo end $LEASE_TOKEN >> FILE";
    let runs: Vec<Child> = (0..3)
        .map(|n| {
            let mut command = lease(&url);
            // The password from the file for one, from the environment for the others.
            if n == 0 {
                command.arg("--password-file").arg(&password_file);
            } else {
                command.env("LEASE_REDIS_PASSWORD", PgServer::SCRAM_PASSWORD);
            }
            spawn(
                command
                    .args(["--lease", "2s", "run", "--wait", "30s", "nightly"])
                    .args(shell(script, &stamps)),
            )
        })
        .collect();
    for run in runs {
        let done = finish(run, Duration::from_secs(30));
        assert_eq!(done.status.code(), Some(0), "{}", stderr_of(&done));
    }
    one_run_at_a_time(&stamps, 3);
}

#[test]
fn status_names_the_holder_and_unlock_force_stops_it() {
    let server = server();
    let url = server.scram_url();
    let (_dir, marker) = scratch("holding");
    let holder = spawn(
        lease(&url)
            .args(["--lease", "2s", "run", "--owner", "web-1", "report"])
            .args(shell("touch FILE; sleep 30", &marker)),
    );
    testkit::wait_until("the run holds", Duration::from_secs(10), || marker.exists());
    let status = output(lease(&url).args(["status", "report"]));
    let text = stdout_of(&status);
    assert_eq!(
        status.status.code(),
        Some(0),
        "{text}{}",
        stderr_of(&status)
    );
    let shown = format!(
        "\"report\" (on postgres://{}:***@127.0.0.1:{}/postgres) held by web-1 (1 hold), ",
        PgServer::SCRAM_USER,
        server.port()
    );
    assert!(text.starts_with(&shown), "{text}");
    assert!(text.contains("token 1, last fencing token 1"), "{text}");
    assert!(!text.contains(PgServer::SCRAM_PASSWORD), "{text}");
    let json = stdout_of(&output(lease(&url).args(["status", "--json", "report"])));
    let json: serde_json::Value = serde_json::from_str(&json).expect("one JSON object");
    assert_eq!(
        (
            &json["held"],
            &json["hold_token"],
            &json["holders"][0]["owner"]
        ),
        (
            &serde_json::json!(true),
            &serde_json::json!(1),
            &serde_json::json!("web-1")
        ),
        "{json}"
    );
    let forced = output(lease(&url).args(["unlock", "--force", "report"]));
    let said = stdout_of(&forced);
    assert_eq!(forced.status.code(), Some(0), "{}", stderr_of(&forced));
    assert!(
        said.starts_with("removed the lock \"report\"") && said.contains("held by web-1"),
        "{said}"
    );
    // The holder learns at its next renewal that its hold is gone, and stops its command.
    let done = finish(holder, Duration::from_secs(20));
    assert_eq!(done.status.code(), Some(LOST), "{}", stderr_of(&done));
    let free = output(lease(&url).args(["status", "report"]));
    assert_eq!(free.status.code(), Some(1), "{}", stdout_of(&free));
}

#[test]
fn the_schema_option_keeps_the_locks_tables_in_a_schema_of_their_own() {
    let server = server();
    let url = server.scram_url();
    let (_dir, marker) = scratch("holding");
    let holder = spawn(
        lease(&url)
            .args(["--pg-schema", "jobs", "--lease", "2s", "run", "nightly"])
            .args(shell("touch FILE; sleep 30", &marker)),
    );
    testkit::wait_until("the run holds", Duration::from_secs(10), || marker.exists());
    let tables = server
        .psql("SELECT table_name FROM information_schema.tables WHERE table_schema = 'jobs' ORDER BY 1")
        .expect("the tables listed");
    assert!(
        tables.contains("holds") && tables.contains("names"),
        "{tables}"
    );
    let in_jobs = output(
        lease(&url)
            .env("LEASE_PG_SCHEMA", "jobs")
            .args(["status", "nightly"]),
    );
    assert_eq!(in_jobs.status.code(), Some(0), "{}", stdout_of(&in_jobs));
    // The default schema, `lease`, is another store: the name is free there.
    let in_lease = output(lease(&url).args(["status", "nightly"]));
    assert_eq!(in_lease.status.code(), Some(1), "{}", stdout_of(&in_lease));
    let bad = output(lease(&url).args(["--pg-schema", "Jobs;", "status", "nightly"]));
    assert_eq!(bad.status.code(), Some(USAGE), "{}", stderr_of(&bad));
    assert!(stderr_of(&bad).contains("schema"), "{}", stderr_of(&bad));
    let forced = output(lease(&url).args(["--pg-schema", "jobs", "unlock", "--force", "nightly"]));
    assert_eq!(forced.status.code(), Some(0), "{}", stderr_of(&forced));
    let done = finish(holder, Duration::from_secs(20));
    assert_eq!(done.status.code(), Some(LOST), "{}", stderr_of(&done));
}

#[test]
fn a_wrong_password_is_refused_and_a_closed_port_is_unavailable() {
    let server = server();
    let wrong = server.url_for(PgServer::SCRAM_USER, "not-the-password");
    let refused = output(lease(&wrong).args(["status", "job"]));
    let said = stderr_of(&refused);
    assert_eq!(refused.status.code(), Some(REFUSED), "{said}");
    assert!(said.contains("postgres at postgres://"), "{said}");
    assert!(!said.contains("not-the-password"), "{said}");
    // A database or a role that does not exist is refused too: no retry mends it.
    let no_database = format!(
        "postgres://{}:{}@127.0.0.1:{}/no_such_db",
        PgServer::SCRAM_USER,
        PgServer::SCRAM_PASSWORD,
        server.port()
    );
    for url in [no_database, server.url_for("no_such_role", "x")] {
        let done = output(lease(&url).args(["status", "job"]));
        assert_eq!(done.status.code(), Some(REFUSED), "{}", stderr_of(&done));
    }
    let closed = format!("postgres://app:secret@127.0.0.1:{}/app", closed_port());
    let unavailable = output(lease(&closed).args(["status", "job"]));
    let said = stderr_of(&unavailable);
    assert_eq!(unavailable.status.code(), Some(UNAVAILABLE), "{said}");
    assert!(
        said.contains("postgres unavailable at postgres://app:***@127.0.0.1:"),
        "{said}"
    );
}

/// Options, variables, and what the tool says as it refuses them.
type Refusal<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);

#[test]
fn each_stores_options_are_refused_on_the_others() {
    // Refused before any connection: no server is needed.
    let url = format!("postgres://app@127.0.0.1:{}/app", closed_port());
    let refusals: [Refusal<'_>; 7] = [
        (&["--cluster"], &[], "--cluster is Redis's"),
        (&["--redlock"], &[], "--redlock is Redis's"),
        (
            &[],
            &[("LEASE_SENTINEL", "mymaster")],
            "--sentinel (from $LEASE_SENTINEL) is Redis's",
        ),
        (&["--replica-acks", "1"], &[], "--replica-acks is Redis's"),
        (
            &["--url", "redis://127.0.0.1:6379"],
            &[],
            "a postgres:// URL names one PostgreSQL database",
        ),
        (
            &["--zookeeper", "127.0.0.1:2181"],
            &[],
            "--zookeeper excludes --url",
        ),
        (
            &["--sentinel", "m", "--cluster"],
            &[],
            "--cluster is Redis's",
        ),
    ];
    for (args, variables, said) in refusals {
        let mut command = lease(&url);
        command.envs(variables.iter().copied());
        let refused = output(command.args(args).args(["status", "job"]));
        let stderr = stderr_of(&refused);
        assert_eq!(refused.status.code(), Some(USAGE), "{args:?}: {stderr}");
        assert!(stderr.contains(said), "{args:?}: no {said:?} in {stderr}");
    }
    let redis = format!("redis://127.0.0.1:{}", closed_port());
    let elsewhere: [Refusal<'_>; 3] = [
        (
            &["--url", &redis, "--pg-schema", "jobs"],
            &[],
            "--pg-schema is PostgreSQL's: it applies with a postgres:// URL only, and the locks \
             here are on Redis",
        ),
        (
            &["--url", &redis],
            &[("LEASE_PG_LISTEN_URL", "postgres://db/app")],
            "--pg-listen-url (from $LEASE_PG_LISTEN_URL) is PostgreSQL's",
        ),
        (
            &["--zookeeper", "127.0.0.1:2181", "--pg-schema", "jobs"],
            &[],
            "the locks here are on ZooKeeper",
        ),
    ];
    for (args, variables, said) in elsewhere {
        let mut command = tool::bare();
        command.envs(variables.iter().copied());
        let refused = output(command.args(args).args(["status", "job"]));
        let stderr = stderr_of(&refused);
        assert_eq!(refused.status.code(), Some(USAGE), "{args:?}: {stderr}");
        assert!(stderr.contains(said), "{args:?}: no {said:?} in {stderr}");
    }
}

/// A holder and a waiter of one name through `bouncer`, the waiter's listening connection going
/// to `listen` if given: what the waiter said, once both have run one after the other.
fn hand_over_through(bouncer: &PgBouncer, listen: Option<&str>) -> String {
    let url = bouncer.scram_url();
    let (_dir, stamps) = scratch("stamps");
    let with_listen = |command: &mut std::process::Command| {
        if let Some(listen) = listen {
            command.args(["--pg-listen-url", listen]);
        }
        command.args(["--lease", "2s", "--command-timeout", "1s"]);
    };
    let mut holder = lease(&url);
    with_listen(&mut holder);
    let holder = spawn(holder.args(["run", "job"]).args(shell(
        "echo start >> FILE; sleep 3; echo end >> FILE",
        &stamps,
    )));
    testkit::wait_until("the holder runs", Duration::from_secs(10), || {
        fs::read_to_string(&stamps).is_ok_and(|log| log.contains("start"))
    });
    let mut waiter = lease(&url);
    with_listen(&mut waiter);
    // It runs on for longer than its listening connection takes to find out whether what is
    // sent reaches it (twice the command timeout), so that it can say so before it exits.
    let waiter = spawn(
        waiter
            .args(["run", "--wait", "30s", "job"])
            .args(shell("echo next >> FILE; sleep 2.5", &stamps)),
    );
    let held = finish(holder, Duration::from_secs(20));
    assert_eq!(held.status.code(), Some(0), "{}", stderr_of(&held));
    let waited = finish(waiter, Duration::from_secs(20));
    let said = stderr_of(&waited);
    assert_eq!(waited.status.code(), Some(0), "{said}");
    let log = fs::read_to_string(&stamps).expect("stamps");
    assert_eq!(log, "start\nend\nnext\n", "one after the other");
    said
}

#[test]
fn through_pgbouncer_the_listen_url_carries_the_waiters_wake_ups() {
    let server = server();
    let bouncer = PgBouncer::start(&server);
    // Without it, the listening connection goes through the pooler, which loses what it hears:
    // the tool says so, and its waiter still runs, by its own looks.
    let unheard = hand_over_through(&bouncer, None);
    assert!(
        unheard.contains("do not reach the listening connection"),
        "{unheard}"
    );
    let heard = hand_over_through(&bouncer, Some(&server.scram_url()));
    assert!(!heard.contains("warning"), "{heard}");
}
